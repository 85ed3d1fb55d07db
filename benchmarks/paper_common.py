"""Shared plumbing of the paper experiments (benchmarks/paper_*.py): the pairs of a test split, the
checkers compared on them (trained networks, UCF-GJK, PieceGjk, IS-CD, exact `mesh_collide`), a resumable
record of rows, and the figure and markdown table drawn from it.

Every checker is a callable `(ids_a, ids_b, poses_a, poses_b) -> (Q,) bool` on one device, built
over one object set (possibly scaled); every row scores one checker on one set of pairs with
`collision_report` (balanced accuracy first, per band of true signed distance) and times it on
the same pairs (`checks_per_second`, best of `repeats`, after a warm-up call).
"""

import argparse
import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import best_time, machine_info
from contactnet.data.dataset import read_shard
from contactnet.data.objects import ObjectSet, load_object_set
from contactnet.data.storage import write_json_atomic
from contactnet.geometry import Mesh, MeshLibrary, frame_quaternions
from contactnet.models.frame_tables import frame_logits, frame_tables
from contactnet.training.metrics import collision_report

NET_CHUNK = 16384  # queries per network forward pass
NEAR_CONTACT = 0.01  # metres: "within 1 cm of contact", |true signed distance| below it


@dataclass
class Pairs:
    """Query pairs with their exact labels (CPU tensors)."""

    ids_a: torch.Tensor  # (Q,) int64
    ids_b: torch.Tensor
    poses_a: torch.Tensor  # (Q, 7) float32 world poses
    poses_b: torch.Tensor
    label: torch.Tensor  # (Q,) bool
    signed_distance: torch.Tensor  # (Q,) float32 metres

    def __len__(self) -> int:
        return len(self.ids_a)

    def take(self, rows: torch.Tensor) -> "Pairs":
        return Pairs(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))

    def object_ids(self) -> list[int]:
        return sorted(set(self.ids_a.tolist()) | set(self.ids_b.tolist()))


def load_split_pairs(root: Path, split: str, max_pairs: int | None, max_objects: int | None, seed: int) -> Pairs:
    """The pairs of `root/split` (every shard); optionally only those among the first
    `max_objects` objects the rows name, then a seeded random subset of `max_pairs` rows."""
    folder = Path(root) / split
    shards = sorted(folder.glob("shard_*"))
    if not shards:
        raise FileNotFoundError(f"split: {folder} has no shards (generate it with contactnet.data.generate)")
    arrays = [read_shard(folder, int(s.name.split("_")[1]), mmap=False) for s in shards]
    cat = {k: torch.as_tensor(np.concatenate([a[k] for a in arrays])) for k in arrays[0]}
    pairs = Pairs(cat["ids_a"], cat["ids_b"], cat["poses_a"], cat["poses_b"], cat["label"].bool(),
                  cat["signed_distance"])
    if max_objects:  # the first K objects met in the rows, so the first object pair survives
        met = torch.stack([pairs.ids_a, pairs.ids_b], 1).flatten().tolist()
        keep = torch.tensor(list(dict.fromkeys(met))[:max_objects])
        pairs = pairs.take(torch.isin(pairs.ids_a, keep) & torch.isin(pairs.ids_b, keep))
    if len(pairs) == 0:
        raise ValueError(f"max_objects: no pair of {folder} lies among its first {max_objects} objects")
    if max_pairs and len(pairs) > max_pairs:
        rows = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed))[:max_pairs]
        pairs = pairs.take(rows.sort().values)
    return pairs


def scaled_object_set(objects: ObjectSet, factor: float) -> ObjectSet:
    """The set with every mesh, cloud and box scaled by `factor` about each object's origin."""
    return replace(objects, vertices=[v * factor for v in objects.vertices], points=objects.points * factor,
                   aabb=objects.aabb * factor, _partial_views=None, _convex_hulls=None)


def joined_object_sets(first: ObjectSet, second: ObjectSet) -> ObjectSet:
    """One set of `first`'s objects, then `second`'s (their ids shifted by len(first))."""
    n = len(first)
    return replace(first, names=first.names + second.names, families=first.families + second.families,
                   vertices=first.vertices + second.vertices, faces=first.faces + second.faces,
                   points=np.concatenate([first.points, second.points]),
                   normals=np.concatenate([first.normals, second.normals]),
                   aabb=np.concatenate([first.aabb, second.aabb]),
                   inner_of=list(first.inner_of) + [None if i is None else i + n for i in second.inner_of],
                   _partial_views=None, _convex_hulls=None)


# ---- the methods ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Method:
    """One point of the accuracy–speed plane: a method family and its parameters."""

    family: str  # "net:<name>", "hybrid:<name>", "ucf_gjk", "piece_gjk", "is_cd", "exact"
    params: tuple = ()  # ((name, value), ...)

    @property
    def label(self) -> str:
        return self.family + "".join(f" {k}={v}" for k, v in self.params)


def add_method_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt", action="append", default=[], metavar="NAME=PATH",
                        help="a trained network to score (repeatable), e.g. locc=outputs/.../best.ckpt")
    parser.add_argument("--frames", type=int, nargs="+", default=[1],
                        help="test-time frames of each network row (a row per value; CollisionChecker(frames=F): "
                             "the logit averaged over F fixed frames of each object, at F times the cost)")
    # Each (threshold, cap) is one CoACD pass over the objects: ~4 s per procedural object and up
    # to ~50 s per real one (28k faces) on a core, hence a 2 x 2 default grid and --coacd-workers.
    parser.add_argument("--gjk-thresholds", type=float, nargs="*", default=[0.2, 0.05],
                        help="CoACD concavity thresholds")
    parser.add_argument("--gjk-pieces", type=int, nargs="*", default=[4, 16], help="caps on pieces per object")
    parser.add_argument("--gjk-vertices", type=int, default=32, help="cap on vertices per piece (UCF-GJK)")
    parser.add_argument("--piece-vertices", type=int, default=1000,
                        help="cap on vertices per piece for the PieceGjk rows: its GJK climbs each hull's "
                             "vertex graph and pads nothing, so by default CoACD's hulls stay whole (a cap "
                             "shrinks thin parts' hulls, and they then miss collisions)")
    parser.add_argument("--gjk-iterations", type=int, nargs="*", default=[4, 8, 16], help="GJK rounds")
    parser.add_argument("--iscd-points", type=int, nargs="*", default=[16, 64, 256, 1024],
                        help="IS-CD query points per pair")
    parser.add_argument("--no-exact", action="store_true", help="skip the exact mesh_collide row")
    parser.add_argument("--hybrid-max-error", type=float, nargs="*", default=[],
                        help="a certified-hybrid row per network, frame count and value: tau from choose_tau at "
                             "this error rate on the val split of --tau-root; timed with its hull tests and "
                             "exact checks")
    parser.add_argument("--tau-root", default=None,
                        help="data set whose val split sets the hybrid's tau (default: --data-root; an "
                             "evaluation-only set such as robosuite_real has none: pass the training data)")
    parser.add_argument("--coacd-workers", type=int, default=os.cpu_count() or 1,
                        help="processes decomposing objects (default: every core)")
    parser.add_argument("--cache-dir", default="outputs/paper/coacd_cache",
                        help="CoACD decompositions, shared by every experiment (keyed by mesh and parameters)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per row (the best is kept)")
    parser.add_argument("--timed-batch", type=int, default=0,
                        help="time calls of at least this many queries (the pairs tiled), to fill a GPU; "
                             "accuracy is still scored on the pairs once")


def method_grid(args: argparse.Namespace) -> list[Method]:
    if any(f < 1 for f in args.frames):
        raise SystemExit(f"--frames: expected counts >= 1, got {args.frames}")
    # frames 1 keeps the parameterless row name, so earlier records resume
    methods = [Method(f"net:{spec.split('=', 1)[0]}", (("frames", f),) if f > 1 else ())
               for spec in args.ckpt for f in args.frames]
    methods += [Method(f"hybrid:{spec.split('=', 1)[0]}", (("frames", f), ("max_error", e)))
                for spec in args.ckpt for f in args.frames for e in getattr(args, "hybrid_max_error", [])]
    methods += [Method("ucf_gjk", (("t", t), ("pieces", p), ("iters", i)))
                for t in args.gjk_thresholds for p in args.gjk_pieces for i in args.gjk_iterations]
    methods += [Method("piece_gjk", (("t", t), ("pieces", p))) for t in args.gjk_thresholds for p in args.gjk_pieces]
    methods += [Method("is_cd", (("points", n),)) for n in args.iscd_points]
    return methods + ([] if args.no_exact else [Method("exact")])


def checkpoints(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    for spec in args.ckpt:
        if "=" not in spec:
            raise SystemExit(f"--ckpt: expected NAME=PATH, got {spec!r}")
        name, path = spec.split("=", 1)
        out[name] = path
    return out


class CheckerFactory:
    """Builds each method's checker over one object set, scaled by `scale`, on one device, reusing
    what is shared (networks, their cached embeddings, decompositions, the mesh library). Convex
    pieces are decomposed at scale 1 and scaled, so every scale reuses the cached decompositions."""

    def __init__(self, objects: ObjectSet, args: argparse.Namespace, device: str, progress: bool = True,
                 scale: float = 1.0):
        if not scale > 0:
            raise ValueError(f"scale: expected > 0, got {scale}")
        self.base, self.scale = objects, float(scale)
        self.objects = objects if scale == 1 else scaled_object_set(objects, scale)
        self.args, self.device, self.progress = args, device, progress
        self.ckpts = checkpoints(args)
        self._nets: dict[str, object] = {}
        self._tables: dict[str, list] = {}  # net -> its FrameTables, one per frame
        self._pieces: dict = {}
        self._val_scores: dict = {}  # (net, frames) -> the hybrid's val logits, labels, hull certificates
        self._tris = None
        self._lib = None

    def library(self) -> MeshLibrary:
        if self._lib is None:
            meshes = [Mesh(v, f, name=n) for v, f, n in zip(self.objects.vertices, self.objects.faces, self.objects.names)]
            self._lib = MeshLibrary(meshes, dtype=torch.float32).to(self.device)
        return self._lib

    def build(self, method: Method, ids: list[int]):
        """The checker of `method`, valid for queries among object `ids` (UCF-GJK decomposes only those)."""
        params = dict(method.params)
        if method.family.startswith("net:"):
            return self._net(method.family[4:], params.get("frames", 1))
        if method.family.startswith("hybrid:"):
            return self._hybrid(method.family[7:], params["frames"], params["max_error"])
        if method.family == "ucf_gjk":
            from contactnet.baselines import UcfGjk

            pieces, index = self._convex_pieces(params["t"], params["pieces"], ids)
            gjk = UcfGjk(pieces.to(self.device), params["iters"])
            return lambda a, b, pa, pb: gjk(index[a], index[b], pa, pb)
        if method.family == "piece_gjk":  # CoACD pieces, whole hulls, checked as a CPU library would
            from contactnet.baselines import PieceGjk

            pieces, index = self._convex_pieces(params["t"], params["pieces"], ids, self.args.piece_vertices)
            check = PieceGjk(pieces).to(self.device)
            return lambda a, b, pa, pb: check(index[a], index[b], pa, pb)
        if method.family == "is_cd":
            from contactnet.baselines import ImplicitSurfaceCD, pad_triangles

            # Padded to the most faces among the queried objects (as UCF-GJK's pieces are).
            if self._tris is None or self._tris[0] != ids:
                tris = pad_triangles([self.objects.vertices[i] for i in ids], [self.objects.faces[i] for i in ids])
                self._tris = (ids, tris.to(self.device), self._index(ids))
            _, tris, index = self._tris
            aabb = torch.as_tensor(self.objects.aabb[ids], dtype=torch.float32, device=self.device)
            iscd = ImplicitSurfaceCD(tris, aabb, params["points"])
            return lambda a, b, pa, pb: iscd(index[a], index[b], pa, pb)
        if method.family == "exact":
            from contactnet.ops import mesh_collide

            lib = self.library()
            lib.bvh  # built once, outside the timed calls
            return lambda a, b, pa, pb: mesh_collide(lib, a, b, pa, pb)
        raise ValueError(f"method: unknown family {method.family!r}")

    def _net(self, name: str, frames: int = 1):
        """The network's checker: colliding where its mean logit over the frames is >= 0 (p >= 0.5)."""
        logits = self.net_logits(name, frames)
        return lambda a, b, pa, pb: logits(a, b, pa, pb) >= 0

    def _hybrid(self, name: str, frames: int, max_error: float):
        """`CollisionChecker`'s certified hybrid (`certified_verdicts`): hull-certified pairs free, the
        network on the rest, "collide" logits >= tau kept, what it defers `mesh_collide`; tau from
        `choose_tau` on the val split of --tau-root."""
        from contactnet.ops import hulls_separated, mesh_collide
        from contactnet.planning.hybrid import certified_verdicts, choose_tau

        lib, logits = self.library(), self.net_logits(name, frames)
        lib.bvh, lib.hulls  # built once, outside the timed calls
        tau_root = Path(getattr(self.args, "tau_root", None) or self.args.data_root)
        if (name, frames) not in self._val_scores:  # every max_error reuses them
            val = load_split_pairs(tau_root, "val", None, None, 0)
            same = tau_root.resolve() == Path(self.args.data_root).resolve() and self.scale == 1
            tuner = self if same else CheckerFactory(load_object_set(tau_root / "objects"), self.args, self.device,
                                                     self.progress)
            args = [t.to(self.device) for t in (val.ids_a, val.ids_b, val.poses_a, val.poses_b)]
            self._val_scores[name, frames] = (tuner.net_logits(name, frames)(*args).cpu(), val.label,
                                              hulls_separated(tuner.library(), *args).cpu())
        tau = choose_tau(*self._val_scores[name, frames][:2], max_error, self._val_scores[name, frames][2])
        if self.progress:
            print(f"hybrid:{name} frames={frames} max_error={max_error}: tau {tau:.3f} from {tau_root.name}/val")

        def check(a, b, pa, pb):
            return certified_verdicts(hulls_separated(lib, a, b, pa, pb), lambda r: logits(a[r], b[r], pa[r], pb[r]),
                                      lambda r: mesh_collide(lib, a[r], b[r], pa[r], pb[r]), tau, pa.dtype)[0]

        return check

    def net_logits(self, name: str, frames: int = 1):
        """(ids_a, ids_b, poses_a, poses_b) -> (Q,) logits of the network `name`, each the mean over
        the objects' first `frames` test-time frames, as `CollisionChecker(frames=...)` computes them."""
        from contactnet.models import load_model

        if name not in self._nets:
            self._nets[name] = load_model(self.ckpts[name], map_location=self.device)
        net = self._nets[name]
        # Embeddings cached, as a simulator would; F frames are the first F of any larger count
        # (`frame_quaternions`), so the largest count built so far serves every smaller one.
        if len(self._tables.get(name, ())) < frames:
            o = self.objects
            as_t = lambda x: torch.as_tensor(np.asarray(x), dtype=torch.float32, device=self.device)  # noqa: E731
            self._tables[name] = frame_tables(net, as_t(o.points), as_t(o.normals), as_t(o.aabb),
                                              [as_t(v) for v in o.vertices], frame_quaternions(frames))
        tables = self._tables[name][:frames]
        return torch.no_grad()(lambda a, b, pa, pb: frame_logits(net, tables, a, b, pa, pb, NET_CHUNK))

    def _convex_pieces(self, threshold: float, max_pieces: int, ids: list[int], max_vertices: int | None = None):
        from contactnet.baselines import DecompositionSpec, object_set_pieces

        spec = DecompositionSpec(threshold=threshold, max_pieces=max_pieces,
                                 max_piece_vertices=max_vertices or self.args.gjk_vertices)
        key = (spec, tuple(ids))
        if key not in self._pieces:
            pieces = object_set_pieces([self.base.vertices[i] for i in ids], [self.base.faces[i] for i in ids],
                                       spec, self.args.cache_dir, progress=self.progress,
                                       workers=self.args.coacd_workers)
            self._pieces[key] = (pieces.scaled(self.scale), self._index(ids))
        return self._pieces[key]

    def _index(self, ids: list[int]) -> torch.Tensor:
        """Object id -> row among `ids` (-1 elsewhere), on the device."""
        index = torch.full((len(self.objects),), -1, dtype=torch.int64)
        index[torch.tensor(ids)] = torch.arange(len(ids))
        return index.to(self.device)


def score(checker, pairs: Pairs, device: str, repeats: int, timed_batch: int = 0) -> dict:
    """collision_report of `checker` on `pairs` plus its speed on them, timed on calls of the pairs
    tiled to at least `timed_batch` queries."""
    args = [pairs.ids_a.to(device), pairs.ids_b.to(device), pairs.poses_a.to(device), pairs.poses_b.to(device)]
    pred = checker(*args)
    tiles = max(1, -(-timed_batch // len(pairs)))
    timed = [a.repeat(tiles, *[1] * (a.dim() - 1)) for a in args] if tiles > 1 else args
    seconds = best_time(lambda: checker(*timed), repeats=repeats, warmup=0) / tiles
    pred = pred.float().cpu()
    report = collision_report(pred, pairs.label, pairs.signed_distance)
    near = pairs.signed_distance.abs() < NEAR_CONTACT
    near_report = collision_report(pred[near], pairs.label[near], pairs.signed_distance[near])
    for r in (report, near_report):
        r.pop("ece"), r.pop("ap")  # hard 0/1 predictions: no ranking or calibration to report
    near_report.pop("bands")
    return {**report, "within_1cm": near_report, "seconds": seconds, "checks_per_second": len(pairs) / seconds}


# ---- resumable record, figure, table --------------------------------------------------------


# Options that decide which pairs, device or training a row means: a record made with other values
# is not resumed (its rows would be silently mixed with these).
IDENTITY = ("data_root", "split", "splits", "scales", "max_pairs", "max_objects", "poses_per_pair", "seed", "device",
            "timed_batch", "train_pairs", "eval_pairs", "epochs", "overrides")


class Record:
    """results.json in `out_dir`: {"config", "machine", "rows": [{"key", ...}]}, rewritten
    atomically after every row; a rerun skips rows whose key is present, and refuses a record
    whose pairs or device (IDENTITY) differ."""

    def __init__(self, out_dir: str | Path, config: dict):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / "results.json"
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {"rows": []}
        old = self.data.get("config", {})
        changed = {k: (old[k], config.get(k)) for k in IDENTITY if k in old and old[k] != config.get(k)}
        if changed:
            raise SystemExit(f"--out-dir: {self.path} was made with other pairs or device "
                             f"({', '.join(f'{k}: {a!r} there, {b!r} now' for k, (a, b) in changed.items())}); "
                             "pick another --out-dir or delete it")
        self.data["config"], self.data["machine"] = config, machine_info()
        self.done = {row["key"] for row in self.data["rows"]}

    def add(self, key: str, row: dict) -> None:
        self.data["rows"].append({"key": key, **row})
        self.done.add(key)
        self.save()

    def save(self) -> None:
        write_json_atomic(self.path, self.data)


def _finite(x) -> str:
    return f"{x:.3f}" if isinstance(x, float) and math.isfinite(x) else "-"


def write_table(record: Record, group: str, title: str) -> Path:
    """results.md: one section per value of `group` (a split or a scale), a row per method."""
    rows = record.data["rows"]
    lines = [f"# {title}", "", f"machine: {record.data['machine']}", ""]
    for value in dict.fromkeys(r[group] for r in rows):
        lines += [f"## {group} {value}", "", "| method | bal. acc | acc | TPR | TNR | bal. acc within 1 cm (n) | "
                  "checks/s | n |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in sorted((r for r in rows if r[group] == value), key=lambda r: -r["checks_per_second"]):
            near = r["within_1cm"]
            lines.append(f"| {r['method']} | {_finite(r['balanced_acc'])} | {_finite(r['acc'])} | {_finite(r['tpr'])} | "
                         f"{_finite(r['tnr'])} | {_finite(near['balanced_acc'])} ({near['n']}) | "
                         f"{r['checks_per_second']:.3g} | {r['n']} |")
        lines.append("")
    path = record.out_dir / "results.md"
    path.write_text("\n".join(lines))
    return path


def plot_accuracy_speed(record: Record, group: str, title: str) -> Path:
    """results.png: balanced accuracy against checks per second, one panel per `group` value,
    one series per method family (the paper's Fig. 6)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = record.data["rows"]
    values = list(dict.fromkeys(r[group] for r in rows))
    fig, axes = plt.subplots(1, max(len(values), 1), figsize=(4.5 * max(len(values), 1), 4), squeeze=False)
    for ax, value in zip(axes[0], values):
        mine = [r for r in rows if r[group] == value]
        for family in dict.fromkeys(r["family"] for r in mine):
            pts = sorted((r["checks_per_second"], r["balanced_acc"]) for r in mine if r["family"] == family)
            ax.plot(*zip(*pts), "o-" if len(pts) > 1 else "o", label=family)
        ax.set_xscale("log")
        ax.set_xlabel("collision checks per second")
        ax.set_ylabel("balanced accuracy")
        ax.set_title(f"{group} {value}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    path = record.out_dir / "results.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
