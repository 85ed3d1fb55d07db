"""Train a `ViewCompletion` net: single cached depth views → the objects' whole surfaces.

    python -m contactnet.training.completion --data data/procedural_small --out outputs/completion/procedural_small.pt
    python eval.py ckpt_path=... clouds=single_view completion=outputs/completion/procedural_small.pt

Training reads the cached views (`contactnet.data.partial_views`, built when missing) of the known
objects of `--data` (its train split's; never the unknown ones) and their inner copies, plus every
object of the `--extra-objects` sets (e.g. more objects of the known families, or of the wider ones
that no data config holds: `python -m contactnet.data.objects --families vessel superquadric
drilled_block extruded_outline ...`). Each step draws a batch of views and fits the predicted
surface to the object's full cloud (`chamfer`) and its normals to those of the nearest full-cloud
points, in the view's canonical frame. About 0.2 s a step on 2 CPU threads; `--device cuda` trains
on a GPU (the object sets stay in host memory, each step's batch is moved there).

`--init <net.pt>` starts from a finished net (a longer run in stages, e.g. at a lower `--lr`).
`--back` adds the back head (`ViewCompletion(back=True)`) and fits it to where each view point's
camera ray last leaves the mesh (`ray_exits`, cast once per view when training starts, about a
minute for 1,200 objects' views). `--image 32` lets the back head read the view's image too
(`ViewImage`; added to an `--init` net at zero, so it starts where that net was).

Every `--save-every` steps the net, the optimiser and the step are written atomically next to the
output (`<out>.partial`); a rerun with the same arguments resumes from there, and the finished
net is written to `--out` (the partial file is then removed).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import numpy as np
import torch

from contactnet.data.dataset import load_manifest
from contactnet.data.objects import load_object_set
from contactnet.data.storage import atomic_write
from contactnet.geometry.depth_views import ray_exits
from contactnet.models.checkpoint import read_checkpoint
from contactnet.models.completion import (
    FORMAT,
    ViewCompletion,
    chamfer,
    load_view_completion,
    random_subsets,
    to_canonical,
)

log = logging.getLogger(__name__)


def training_views(data_root: str | Path | None, extra_objects=(), back: bool = False
                   ) -> list[tuple[torch.Tensor, ...]]:
    """Per object set: views (N, V, K, 3), their normals, full clouds (N, K, 3), their normals, and
    with `back` the views' ray exits (N, V, K, 3), their normals and valid (N, V, K) (`ray_exits`)."""
    sets = []
    if data_root is not None:
        objects = load_object_set(Path(data_root) / "objects")
        known = set(load_manifest(Path(data_root) / "train")["objects"]["known"])
        ids = [i for i in range(len(objects)) if i in known or objects.inner_of[i] in known]
        sets.append((objects, ids))
    for root in extra_objects:
        objects = load_object_set(root)
        sets.append((objects, list(range(len(objects)))))
    out = []
    for objects, ids in sets:
        views = objects.partial_views()
        arrays = [views.points[ids], views.normals[ids], objects.points[ids], objects.normals[ids]]
        if back:
            exits = [ray_exits(objects.vertices[i], objects.faces[i], views.eyes[i], views.points[i]) for i in ids]
            arrays += [np.stack(a) for a in zip(*exits)]
        out.append(tuple(torch.from_numpy(a) if a.dtype == bool else torch.from_numpy(a).float() for a in arrays))
    if not out:
        raise ValueError("data_root, extra_objects: give at least one object set to train on")
    return out


def completion_loss(net: ViewCompletion, points, normals, full, full_normals, generator=None, normal_weight=0.1,
                    exits=None, exit_normals=None, valid=None):
    """Chamfer distance + normal_weight · (1 − cos) to the nearest full-cloud normals, in the
    views' canonical frames (so in units of each view's RMS radius); (B,) each term. With the
    back head (`net.back`) and the views' ray exits, also the Laplace negative log-likelihood of
    each predicted back point's distance to its exit under its expected error, + normal_weight ·
    (1 − cos) of its normal, over the valid exits."""
    origin, R, scale, every, every_normals, local, local_normals, idx = net.canonical_inputs(points, normals, generator)
    _, h, g = net.encode(local, local_normals)
    pred, pred_normals = net.decode(h)
    distance, nearest = chamfer(pred, to_canonical(full, origin, R, scale))
    target_normals = (full_normals @ R.transpose(1, 2)).gather(1, nearest[..., None].expand(-1, -1, 3))
    normal = 1 - (pred_normals * target_normals).sum(-1).mean(1)
    loss = distance + normal_weight * normal
    if net.back:
        back, back_normals, expected = net.predict_back(h, g, local, local_normals,
                                                        net.view_features(every, every_normals))
        mask = valid.gather(1, idx[..., 0]).float()
        err = (back - to_canonical(exits.gather(1, idx), origin, R, scale)).norm(dim=-1)
        cos = (back_normals * (exit_normals.gather(1, idx) @ R.transpose(1, 2))).sum(-1)
        # The distance's Laplace likelihood: the expected error learns how far each point may be off.
        nll = err / expected + expected.log()
        back_loss = ((nll + normal_weight * (1 - cos)) * mask).sum(1) / mask.sum(1).clamp_min(1)
        loss = loss + back_loss
    return loss, distance, normal


def train_completion(out: str | Path, data_root=None, extra_objects=(), steps: int = 6000, batch: int = 32,
                     lr: float = 1e-3, target_points: int = 768, seed: int = 0, save_every: int = 500,
                     progress: bool = True, init: str | Path | None = None, back: bool = False,
                     image: int | None = None, device: str | torch.device = "cpu") -> ViewCompletion:
    """Train (or resume) a ViewCompletion and write it to `out`; returns the trained net. init: a
    finished net to start from (its design and weights) instead of a fresh one: a longer run in
    stages, or one fine-tuned on more objects; back: give the net a back head (`ViewCompletion`),
    a new one on top of `init`'s weights (an `init` with one keeps it); image: let the back head
    read the view's image (`ViewImage`, this many pixels a side), added to `init` in the same way;
    device: where the net trains (the object sets stay in host memory, each step's batch is moved)."""
    out = Path(out)
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device} was asked for, but this torch sees no CUDA device")
    torch.manual_seed(seed)
    if init is None:
        net = ViewCompletion(back=back or image is not None, image=image)
    else:
        net = load_view_completion(init)
        if image is not None and net.image not in (None, image):
            raise ValueError(f"image: {init} already reads a {net.image}-pixel image, not {image}")
        if (back and not net.back) or (image is not None and net.image is None):
            first = net
            net = ViewCompletion(**{**first.config, "keep": None, "back": True, "image": image})
            net.load_state_dict(first.state_dict(), strict=False)
    net.to(device)
    sets = training_views(data_root, extra_objects, net.back)
    weights = torch.tensor([float(s[0].shape[0] * s[0].shape[1]) for s in sets])  # sets drawn by their views
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    partial = out.with_name(out.name + ".partial")
    start = 0
    if partial.exists():
        state = read_checkpoint(partial)
        if state["steps"] != steps:
            raise ValueError(f"steps: {partial} was started with {state['steps']} steps, not {steps}; pass the "
                             "same settings to resume, or delete it to start again")
        net.load_state_dict(state["state_dict"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start = state["step"]
        log.info("resuming %s at step %d", partial, start)
    net.train()
    for step in range(start, steps):
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)  # a resumed run draws what this one would
        # The net's own draws (its input points) on its device; on the CPU the same stream, as before.
        g_net = g if device.type == "cpu" else torch.Generator(device).manual_seed(seed * 1_000_003 + step)
        arrays = sets[int(torch.multinomial(weights, 1, generator=g))]
        points, normals, full, full_normals = arrays[:4]
        o = torch.randint(points.shape[0], (batch,), generator=g)
        v = torch.randint(points.shape[1], (batch,), generator=g)
        pick = random_subsets(batch, full.shape[1], target_points, g)[..., None].expand(-1, -1, 3)
        drawn = [points[o, v], normals[o, v], full[o].gather(1, pick), full_normals[o].gather(1, pick),
                 *(a[o, v] for a in arrays[4:])]
        drawn = [a.to(device) for a in drawn]
        backs = dict(zip(("exits", "exit_normals", "valid"), drawn[4:]))
        loss, distance, normal = completion_loss(net, *drawn[:4], g_net, **backs)
        opt.zero_grad()
        loss.mean().backward()
        opt.step()
        sched.step()
        if progress and (step % 100 == 0 or step == steps - 1):
            print(f"step {step}/{steps}: loss {loss.mean():.4f} chamfer {distance.mean():.4f} normal "
                  f"{normal.mean():.3f}", flush=True)
        if (step + 1) % save_every == 0 and step + 1 < steps:
            state = {"step": step + 1, "steps": steps, "state_dict": net.state_dict(), "optimizer": opt.state_dict(),
                     "scheduler": sched.state_dict()}
            atomic_write(partial, lambda tmp: torch.save(state, tmp))
    net.eval()
    final = {"format": FORMAT, "config": net.config, "state_dict": {k: v.cpu() for k, v in net.state_dict().items()},
             "steps": steps}
    atomic_write(out, lambda tmp: torch.save(final, tmp))
    if partial.exists():
        os.remove(partial)
    return net


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Train a single-view shape completion net (ViewCompletion).")
    parser.add_argument("--data", help="dataset folder: its known objects and their inner copies")
    parser.add_argument("--extra-objects", nargs="*", default=(), help="object set folders used in full")
    parser.add_argument("--out", required=True, help="checkpoint to write, e.g. outputs/completion/net.pt")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init", help="a finished completion net to continue from (e.g. at a lower --lr)")
    parser.add_argument("--back", action="store_true", help="learn the back surface behind each seen point too")
    parser.add_argument("--image", type=int, help="the back head also reads the view's image, this many pixels a side")
    parser.add_argument("--device", default="cpu", help="where to train: cpu (default) or cuda")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    train_completion(args.out, args.data, args.extra_objects, args.steps, args.batch, args.lr, seed=args.seed,
                     init=args.init, back=args.back, image=args.image, device=args.device)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
