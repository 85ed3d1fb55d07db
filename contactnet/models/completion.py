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

With `back=True` a second head predicts, for every visible point, where its camera ray last leaves
the object (the surface a camera on the far side would see, in the manner of Front2Back's back
depth maps) from the point's own features and the view's. It is trained on the exact exits that
`ray_exits` casts through the meshes. Those points are tied to the view's silhouette, which the
global decoder's are not; the decoder then fills only what lies off both the seen and the back
surface (a cup's inside seen from its side, a handle's far half). With `image` the back head also
reads each point's neighbourhood on the view's depth image (`ViewImage`, a small U-Net over the
view rasterised in its canonical frame), as Front2Back predicts back depth maps in image space.

    completion = ViewCompletion()                       # trained by contactnet.training.completion
    points, normals = completion(view_points, view_normals)   # (B, K, 3) each, same frame
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from contactnet.models.checkpoint import read_checkpoint

__all__ = ["FORMAT", "ViewCompletion", "ViewImage", "canonical_frames", "chamfer", "complete_views",
           "load_view_completion", "random_subsets"]

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


def to_canonical(points: torch.Tensor, origin: torch.Tensor, R: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Points (B, n, 3) in the views' frame → their canonical frames (`canonical_frames`)."""
    return (points - origin[:, None]) @ R.transpose(1, 2) / scale[:, None, None]


def from_canonical(points: torch.Tensor, origin: torch.Tensor, R: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The inverse of `to_canonical`."""
    return points * scale[:, None, None] @ R + origin[:, None]


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


class ViewImage(nn.Module):
    """A small U-Net over the view rasterised in its canonical frame, looking along +z (the
    viewing direction): each point's neighbourhood on the image, which a PointNet's per-point
    features do not see (the silhouette's width there, the depth's slope, a rim or a hole nearby),
    in the manner of Front2Back's image-space back depth maps.

    canonical points, normals (B, n, 3) → (B, channels, size, size) features; `sample` reads them
    at points. The image covers ±extent (units of the view's RMS radius) in x and y; a cell holds
    the mean depth and normal of the points in it and whether it holds any."""

    def __init__(self, size: int = 32, extent: float = 2.0, channels: int = 32):
        super().__init__()
        if not isinstance(size, int) or size < 8 or size % 8:
            raise ValueError(f"size: expected a multiple of 8 pixels, at least 8, got {size}")
        self.size, self.extent, self.channels = size, extent, channels

        def block(c_in, c_out):
            return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(c_out, c_out, 3, padding=1), nn.ReLU())

        c = channels
        self.down = nn.ModuleList([block(5, c), block(c, 2 * c), block(2 * c, 4 * c), block(4 * c, 4 * c)])
        self.up = nn.ModuleList([block(8 * c, 2 * c), block(4 * c, c), block(2 * c, c)])

    def raster(self, points: torch.Tensor, normals: torch.Tensor) -> torch.Tensor:
        """(B, 5, size, size): the mean depth, mean normal and occupancy of each cell."""
        b = points.shape[0]
        cell = ((points[..., :2] / self.extent + 1) * (self.size / 2)).floor().long().clamp(0, self.size - 1)
        flat = (cell[..., 1] * self.size + cell[..., 0])[..., None]
        values = torch.cat([points[..., 2:], normals, torch.ones_like(points[..., :1])], -1)
        sums = values.new_zeros(b, self.size * self.size, 5).scatter_add_(1, flat.expand(-1, -1, 5), values)
        count = sums[..., 4:]
        image = torch.cat([sums[..., :4] / count.clamp_min(1), (count > 0).to(values.dtype)], -1)
        return image.transpose(1, 2).reshape(b, 5, self.size, self.size)

    def forward(self, points: torch.Tensor, normals: torch.Tensor) -> torch.Tensor:
        x, skips = self.raster(points, normals), []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else nn.functional.max_pool2d(x, 2))
            skips.append(x)
        for block, skip in zip(self.up, reversed(skips[:-1])):
            x = block(torch.cat([nn.functional.interpolate(x, scale_factor=2.0), skip], 1))
        return x

    def sample(self, features: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        """The features (B, C, size, size) at canonical points (B, n, 3) → (B, n, C), bilinear."""
        grid = (points[..., None, :2] / self.extent).clamp(-1, 1)
        return nn.functional.grid_sample(features, grid, align_corners=False)[..., 0].transpose(1, 2)


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

    back: the back head (module docstring), with its points whose expected error (units of the
    view's RMS radius) is below back_trust (None: all of them); 0.1 was chosen on the val split.
    With the true back surface the same net scores 0.957 / 0.966 (docs/results.md), with the
    learned one 0.940 / 0.918.

    image: the back head also reads each point's neighbourhood on the view's image (`ViewImage`,
    this many pixels a side; None: it does not).

    inputs: visible points the encoder reads (drawn at random); width: the encoder's feature size.
    """

    def __init__(self, predicted: int = 1024, inputs: int = 256, width: int = 256, keep: float | None = None,
                 near: float = 0.2, back: bool = False, back_trust: float | None = 0.1,
                 image: int | None = None):
        super().__init__()
        if keep is not None and not 0 <= keep <= 1:
            raise ValueError(f"keep: expected a fraction in [0, 1] or None, got {keep}")
        if not near > 0:
            raise ValueError(f"near: expected a positive distance, got {near}")
        if back and keep is not None:
            raise ValueError("back, keep: the back head fills the cloud at one density (keep=None)")
        self.predicted, self.inputs, self.width, self.keep, self.near = predicted, inputs, width, keep, near
        if back_trust is not None and not back_trust > 0:
            raise ValueError(f"back_trust: expected a positive error or None, got {back_trust}")
        if image is not None and not back:
            raise ValueError("image, back: the view's image feeds the back head (back=True)")
        self.back, self.back_trust, self.image = back, back_trust, image
        self.point_mlp = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 128))
        self.point_mlp2 = nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width))
        self.decoder = nn.Sequential(nn.Linear(width, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                     nn.Linear(1024, predicted * 6))
        if back:
            self.back_head = nn.Sequential(nn.Linear(2 * width + 6, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                                           nn.Linear(128, 7))
        if image is not None:
            self.view_image = ViewImage(image)
            # Added to the back head's first layer; zero at first, so a head trained without the
            # image starts where it was.
            self.image_to_back = nn.Linear(self.view_image.channels, self.back_head[0].out_features, bias=False)
            nn.init.zeros_(self.image_to_back.weight)

    @property
    def config(self) -> dict:
        return {"predicted": self.predicted, "inputs": self.inputs, "width": self.width, "keep": self.keep,
                "near": self.near, "back": self.back, "back_trust": self.back_trust, "image": self.image}

    def canonical_frame(self, points: torch.Tensor, normals: torch.Tensor):
        """The view's canonical frame (origin, R, scale) and all its points and normals in it."""
        origin, R, scale = canonical_frames(points, normals)
        return origin, R, scale, to_canonical(points, origin, R, scale), normals @ R.transpose(1, 2)

    def input_index(self, points: torch.Tensor, generator=None) -> torch.Tensor:
        """(B, inputs, 3) gather index of the view points the encoder reads, drawn at random."""
        return random_subsets(*points.shape[:2], self.inputs, generator, points.device)[..., None].expand(-1, -1, 3)

    def canonical_inputs(self, points: torch.Tensor, normals: torch.Tensor, generator=None):
        """The canonical frame (origin, R, scale), all the view's points and normals in it, the
        `inputs` of them that the encoder reads, and their gather index (`input_index`)."""
        origin, R, scale, local, local_normals = self.canonical_frame(points, normals)
        idx = self.input_index(points, generator)
        return origin, R, scale, local, local_normals, local.gather(1, idx), local_normals.gather(1, idx), idx

    def point_features(self, points: torch.Tensor, normals: torch.Tensor, pooled: torch.Tensor | None = None):
        """Canonical points and normals (B, n, 3) → the first stage's pooled feature (B, 128), of
        these points unless given, and each point's second-stage feature (B, n, width)."""
        f = self.point_mlp(torch.cat([points, normals], -1))
        pooled = f.amax(1) if pooled is None else pooled
        return pooled, self.point_mlp2(torch.cat([f, pooled[:, None].expand_as(f)], -1))

    def encode(self, local: torch.Tensor, local_normals: torch.Tensor):
        """Canonical input points and normals (B, k, 3) → the first stage's pooled feature (B, 128),
        the view's feature (B, width) and the points' own features (B, k, width)."""
        pooled, g = self.point_features(local, local_normals)
        return pooled, g.amax(1), g

    def decode(self, h: torch.Tensor):
        """The view's feature (B, width) → predicted surface points and unit normals (B, predicted, 3)."""
        out = self.decoder(h).view(-1, self.predicted, 6)
        return out[..., :3], nn.functional.normalize(out[..., 3:], dim=-1)

    def predict_canonical(self, local: torch.Tensor, local_normals: torch.Tensor):
        """Canonical view points and normals (B, k, 3) → predicted surface points and unit normals
        (B, predicted, 3), canonical frame."""
        return self.decode(self.encode(local, local_normals)[1])

    def view_features(self, local: torch.Tensor, local_normals: torch.Tensor) -> torch.Tensor | None:
        """The view's image features (`ViewImage`) from all its canonical points, None without `image`."""
        return None if self.image is None else self.view_image(local, local_normals)

    def predict_back(self, h: torch.Tensor, g: torch.Tensor, points: torch.Tensor, normals: torch.Tensor,
                     image: torch.Tensor | None = None):
        """The back surface behind each canonical view point (B, n, 3): where its camera ray last
        leaves the object (`ray_exits`), the outward unit normal there, and the expected error of
        the point (B, n) (a Laplace scale: its mean distance from the true exit), from the view's
        feature h, the points' own g (`encode`, `point_features`) and, with `image`, the view's
        image features (`view_features`)."""
        first = self.back_head[0](torch.cat([g, h[:, None].expand(-1, points.shape[1], -1), points, normals], -1))
        if image is not None:
            first = first + self.image_to_back(self.view_image.sample(image, points))
        out = self.back_head[1:](first)
        return points + out[..., :3], nn.functional.normalize(out[..., 3:6], dim=-1), out[..., 6].clamp(-7, 7).exp()

    def forward(self, points: torch.Tensor, normals: torch.Tensor, generator: torch.Generator | None = None):
        if points.dim() != 3 or points.shape[-1] != 3 or points.shape != normals.shape:
            raise ValueError(f"points, normals: expected equal shapes (B, K, 3), got {tuple(points.shape)} and "
                             f"{tuple(normals.shape)}")
        b, k, _ = points.shape
        if self.back:
            return self._with_back(points, normals, generator)
        origin, R, scale, _, _, inputs, input_normals, _ = self.canonical_inputs(points, normals, generator)
        pred, pred_normals = self.predict_canonical(inputs, input_normals)
        if self.keep is None:
            index = self._one_density([inputs], pred, k, generator)
        pred = from_canonical(pred, origin, R, scale)
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

    def _with_back(self, points, normals, generator=None):
        """keep=None with the back head: the visible points, the back points behind them (those
        whose expected error is below `back_trust`, all if None) and the decoder's points off both,
        at one density."""
        k = points.shape[1]
        origin, R, scale, local, local_normals, inputs, input_normals, idx = self.canonical_inputs(points, normals,
                                                                                                 generator)
        pooled, h, _ = self.encode(inputs, input_normals)
        pred, pred_normals = self.decode(h)
        image = self.view_features(local, local_normals)
        parts = [self.predict_back(h, self.point_features(p, n, pooled)[1], p, n, image)  # in blocks: wide activations
                 for p, n in zip(local.split(512, 1), local_normals.split(512, 1))]
        back, back_normals, error = (torch.cat(x, 1) for x in zip(*parts))
        trusted = torch.ones_like(error, dtype=torch.bool) if self.back_trust is None else error < self.back_trust
        index = self._one_density([inputs, back.gather(1, idx)], pred, k, generator,
                                  [None, trusted.gather(1, idx[..., 0])], [None, trusted])[..., None]
        index = index.expand(-1, -1, 3)
        mapped = from_canonical(torch.cat([back, pred], 1), origin, R, scale)
        return (torch.cat([points, mapped], 1).gather(1, index),
                torch.cat([normals, torch.cat([back_normals, pred_normals], 1) @ R], 1).gather(1, index))

    def _one_density(self, sources: list[torch.Tensor], pred: torch.Tensor, k: int, generator=None,
                     source_masks=None, draw_masks=None) -> torch.Tensor:
        """(B, k) indices into [source 0 (k) | source 1 (k) | ... | predicted]: each source (its
        `inputs` points, canonical frame: units of RMS radius) gets the share of k that the predicted
        points nearest to it within `near` are of all, in a random order, and predicted points off
        every source fill the rest (with replacement). source_masks[i] (B, inputs) / draw_masks[i]
        (B, k), where given: only those points of source i count, and only those are drawn (in
        turn, again from the first if it needs more)."""
        n_sources = len(sources)
        source_masks, draw_masks = source_masks or [None] * n_sources, draw_masks or [None] * n_sources
        blocks = [pred.detach().split(64)]  # blocks of views: memory
        blocks += [s.split(64) for s in sources]
        blocks += [[None] * len(blocks[0]) if m is None else m.split(64) for m in source_masks]
        nearest, owner = [], []
        for p, *rest in zip(*blocks):
            d = []
            for s, mask in zip(rest[:n_sources], rest[n_sources:]):
                dist = torch.cdist(p, s)
                d.append((dist if mask is None else dist.masked_fill(~mask[:, None], float("inf"))).amin(2))
            d, o = torch.stack(d, -1).min(-1)
            nearest.append(d)
            owner.append(o)
        nearest, owner = torch.cat(nearest), torch.cat(owner)
        seen = nearest < self.near
        counts = torch.stack([(seen & (owner == i)).float().mean(1) for i in range(n_sources)], 1).mul(k).round()
        counts = counts.long().clamp(0, k - 1)
        counts[:, 0].clamp_(min=1)
        ends = counts.cumsum(1).clamp(max=k - 1)
        orders = [random_subsets(pred.shape[0], k, k, generator, pred.device) for _ in sources]
        unseen = torch.multinomial((~seen).float() + 1e-6, k, replacement=True, generator=generator)
        j = torch.arange(k, device=pred.device)
        index = n_sources * k + unseen
        for i in reversed(range(n_sources)):
            starts = ends[:, i] - counts[:, i]
            order = orders[i]
            if draw_masks[i] is not None:  # the allowed points in the drawn order, from the source's first slot
                allowed = draw_masks[i].gather(1, order)
                order = order.gather(1, torch.sort((~allowed).byte(), dim=1, stable=True).indices)
                n = allowed.sum(1, keepdim=True).clamp_min(1)
                order = order.gather(1, (j[None] - starts[:, None]).clamp_min(0) % n)
            inside = (j >= starts[:, None]) & (j < ends[:, i, None])
            index = torch.where(inside, i * k + order, index)
        return index


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
