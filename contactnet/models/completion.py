"""Shape completion of single depth views: a prior on the side the camera does not see.

One view shows about half of an object, and a collision net fed that half misses the overlaps
behind it (docs/results.md). `ViewCompletion` predicts the whole surface from the visible points
(a point-cloud completion net in the manner of PCN: a two-stage PointNet encoder and a fully
connected decoder) and returns a cloud of the same size in the same frame, with outward normals,
that the shape encoders read unchanged.

Each view is put in a canonical frame first, so the prediction does not depend on where the camera
or the object was: origin at the visible points' centroid, +z along the viewing direction (the
camera-facing normals' mean points back at the camera), x along the points' widest spread across
the view (its sign fixed by the third moment), unit RMS radius. The net predicts in that frame and
the result is mapped back, so completion commutes with rigid motions and scaling of the view.

    completion = ViewCompletion()                       # trained by contactnet.training.completion
    points, normals = completion(view_points, view_normals)   # (B, K, 3) each, same frame
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from contactnet.models.checkpoint import read_checkpoint

__all__ = ["FORMAT", "ViewCompletion", "canonical_frames", "chamfer", "complete_views", "load_view_completion",
           "random_subsets"]

FORMAT = "contactnet.view_completion/1"


def canonical_frames(points: torch.Tensor, normals: torch.Tensor):
    """Views (B, K, 3) with camera-facing normals → origin (B, 3), rotation R (B, 3, 3) whose rows
    are the canonical axes, and scale (B,): canonical = (p − origin) Rᵀ / scale."""
    origin = points.mean(1)
    centred = points - origin[:, None]
    toward_camera = normals.mean(1)
    z = -toward_camera / toward_camera.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    across = centred - (centred @ z[..., None]) * z[:, None]
    _, axes = torch.linalg.eigh(across.transpose(1, 2) @ across)  # ascending: the last spreads widest
    x = axes[..., 2] - (axes[..., 2] * z).sum(-1, keepdim=True) * z
    x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    flip = torch.where(((centred @ x[..., None])[..., 0] ** 3).mean(1) < 0, -1.0, 1.0).to(points.dtype)
    x = x * flip[:, None]
    R = torch.stack([x, torch.cross(z, x, dim=-1), z], 1)
    scale = centred.pow(2).sum(-1).mean(1).sqrt().clamp_min(1e-9)
    return origin, R, scale


def random_subsets(count: int, n: int, k: int, generator=None, device=None) -> torch.Tensor:
    """(count, k) int64: k distinct indices of [0, n) per row, drawn uniformly."""
    return torch.rand(count, n, generator=generator, device=device).argsort(1)[:, :k]


def chamfer(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric Chamfer distance (B,) between clouds a (B, n, 3) and b (B, m, 3) (mean nearest
    distance each way, not squared), and each point of a's nearest in b (B, n). The pairing is
    found without gradient; the distances carry it."""
    with torch.no_grad():
        d2 = torch.baddbmm((b * b).sum(-1)[:, None], a, b.transpose(1, 2), alpha=-2)  # |b|² − 2ab
        a_near = d2.min(2).indices
        b_near = d2.add_((a * a).sum(-1)[..., None]).min(1).indices
    near_b = b.gather(1, a_near[..., None].expand(-1, -1, 3))
    near_a = a.gather(1, b_near[..., None].expand(-1, -1, 3))
    return (a - near_b).norm(dim=-1).mean(1) + (b - near_a).norm(dim=-1).mean(1), a_near


class ViewCompletion(nn.Module):
    """points, normals (B, K, 3) of single views (normals facing the camera) → completed points and
    outward normals (B, K, 3) in the same frame, visible points and predicted ones:
    - keep None (default): one density over the whole surface, as a full cloud has. The predicted
      points farther than `near` (in units of the view's RMS radius) from the visible ones are the
      unseen side; the visible points fill the share of the K that the rest of the predicted
      points (the seen side) make up, and the unseen side's fill the others;
    - keep a fraction: round(keep·K) of the visible points and the rest drawn from all `predicted`
      points (with replacement if it has fewer). The seen side then holds more points than the
      unseen one (about 3:1 at keep = 0.5).
    Scored with the `make train` quickstart on procedural_small's single views (a 15,000-step
    net; docs/results.md): uniform known / unknown 0.935 / 0.902 with keep = 0.5, 0.940 / 0.907
    with the one density, boundary 0.714 → 0.750.

    inputs: visible points the encoder reads (drawn at random); width: the encoder's feature size.
    """

    def __init__(self, predicted: int = 1024, inputs: int = 256, width: int = 256, keep: float | None = None,
                 near: float = 0.2):
        super().__init__()
        if keep is not None and not 0 <= keep <= 1:
            raise ValueError(f"keep: expected a fraction in [0, 1] or None, got {keep}")
        if not near > 0:
            raise ValueError(f"near: expected a positive distance, got {near}")
        self.predicted, self.inputs, self.width, self.keep, self.near = predicted, inputs, width, keep, near
        self.point_mlp = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 128))
        self.point_mlp2 = nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width))
        self.decoder = nn.Sequential(nn.Linear(width, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                     nn.Linear(1024, predicted * 6))

    @property
    def config(self) -> dict:
        return {"predicted": self.predicted, "inputs": self.inputs, "width": self.width, "keep": self.keep,
                "near": self.near}

    def canonical_inputs(self, points: torch.Tensor, normals: torch.Tensor, generator=None):
        """The canonical frame (origin, R, scale) and `inputs` of the view's points and normals in it."""
        origin, R, scale = canonical_frames(points, normals)
        idx = random_subsets(*points.shape[:2], self.inputs, generator, points.device)[..., None].expand(-1, -1, 3)
        local = (points.gather(1, idx) - origin[:, None]) @ R.transpose(1, 2) / scale[:, None, None]
        return origin, R, scale, local, normals.gather(1, idx) @ R.transpose(1, 2)

    def predict_canonical(self, local: torch.Tensor, local_normals: torch.Tensor):
        """Canonical view points and normals (B, k, 3) → predicted surface points and unit normals
        (B, predicted, 3), canonical frame."""
        f = self.point_mlp(torch.cat([local, local_normals], -1))
        h = self.point_mlp2(torch.cat([f, f.amax(1, keepdim=True).expand_as(f)], -1)).amax(1)
        out = self.decoder(h).view(-1, self.predicted, 6)
        return out[..., :3], nn.functional.normalize(out[..., 3:], dim=-1)

    def forward(self, points: torch.Tensor, normals: torch.Tensor, generator: torch.Generator | None = None):
        if points.dim() != 3 or points.shape[-1] != 3 or points.shape != normals.shape:
            raise ValueError(f"points, normals: expected equal shapes (B, K, 3), got {tuple(points.shape)} and "
                             f"{tuple(normals.shape)}")
        b, k, _ = points.shape
        origin, R, scale, local, local_normals = self.canonical_inputs(points, normals, generator)
        pred, pred_normals = self.predict_canonical(local, local_normals)
        if self.keep is None:
            index = self._one_density(local, pred, k, generator)
        pred = (pred * scale[:, None, None]) @ R + origin[:, None]
        pred_normals = pred_normals @ R
        if self.keep is None:
            index = index[..., None].expand(-1, -1, 3)
            return torch.cat([points, pred], 1).gather(1, index), torch.cat([normals, pred_normals], 1).gather(1, index)
        kept = int(round(self.keep * k))
        visible = random_subsets(b, k, kept, generator, points.device)
        if k - kept <= self.predicted:  # without replacement when there are enough
            new = random_subsets(b, self.predicted, k - kept, generator, points.device)
        else:
            new = torch.randint(self.predicted, (b, k - kept), generator=generator, device=points.device)
        visible, new = visible[..., None].expand(-1, -1, 3), new[..., None].expand(-1, -1, 3)
        return (torch.cat([points.gather(1, visible), pred.gather(1, new)], 1),
                torch.cat([normals.gather(1, visible), pred_normals.gather(1, new)], 1))

    def _one_density(self, local: torch.Tensor, pred: torch.Tensor, k: int, generator=None) -> torch.Tensor:
        """(B, k) indices into [visible (k) | predicted]: as many visible points as the predicted
        points near the encoder's inputs (canonical frame: units of RMS radius) are of all, in a
        random order, and predicted points off the seen side for the rest (with replacement)."""
        seen = torch.cat([torch.cdist(p, v).amin(2) < self.near  # (B, P), in blocks of views
                          for p, v in zip(pred.detach().split(64), local.split(64))])
        visible = (seen.float().mean(1) * k).round().long().clamp(1, k - 1)  # (B,)
        order = random_subsets(pred.shape[0], k, k, generator, pred.device)
        unseen = torch.multinomial((~seen).float() + 1e-6, k, replacement=True, generator=generator)
        return torch.where(torch.arange(k, device=pred.device) < visible[:, None], order, k + unseen)


def load_view_completion(path: str | Path, map_location: str | torch.device = "cpu") -> ViewCompletion:
    """A trained `ViewCompletion` (what `python -m contactnet.training.completion` writes), in eval mode."""
    checkpoint = read_checkpoint(path, map_location)
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        raise ValueError(f"path: {path} is not a view-completion checkpoint (format {FORMAT!r})")
    net = ViewCompletion(**checkpoint["config"])
    net.load_state_dict(checkpoint["state_dict"])
    return net.to(map_location).eval()


@torch.no_grad()
def complete_views(net: ViewCompletion, points, normals, batch: int = 512, seed: int = 0):
    """Views (..., K, 3) float32 numpy arrays (e.g. `PartialViews.points`, `.normals`) → their
    completions, same shapes and dtype; the draws come from `seed`, so a rerun gives the same."""
    shape = points.shape
    flat_p = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float32)).reshape(-1, *shape[-2:])
    flat_n = torch.from_numpy(np.ascontiguousarray(normals, dtype=np.float32)).reshape(-1, *shape[-2:])
    device = next(net.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    out_p, out_n = [], []
    for i in range(0, flat_p.shape[0], batch):
        p, n = net(flat_p[i:i + batch].to(device), flat_n[i:i + batch].to(device), generator)
        out_p.append(p.cpu())
        out_n.append(n.cpu())
    return torch.cat(out_p).reshape(shape).numpy(), torch.cat(out_n).reshape(shape).numpy()
