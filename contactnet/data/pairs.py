"""Labelled object pairs (LOCC §III-A and §IV-A), labelled exactly by the mesh kernels.

Training pairs are distance-manipulated: both objects get random poses, the minimum distance
between them is measured (direction u from B's closest point to A's), a target signed gap
s ~ N(0, σ) is drawn, and B is translated along u so that the gap along u becomes s. Only the
relative pose matters, so instead of two positions in a large box (the paper's wording) B starts
in a uniformly random direction from A with their bounding spheres just apart: the same relative
direction and rotation distribution, with the distance query in its fast near-field regime.
Test pairs use uniform poses: B's position uniform in the cube around A that its size can reach,
both rotations uniform, kept only where the two objects' oriented bounding boxes overlap (a pair a
box broad phase already rules out tells nothing about a narrow-phase collision checker).
Either way the label is then computed by `mesh_collide` at the final poses: s only steers the
sampling towards the contact boundary, it is never the label.

Two test placements probe where collision checkers fail:
- boundary: distance-manipulated with |s| uniform in `boundary_gap` (0–1 cm) and a random sign,
  so about half of the pairs touch or slightly penetrate and the rest are just apart;
- nested: B is a small object (a scaled-down copy, see `ObjectSetSpec.inner_scale`) whose centre
  is drawn in A's box, redrawn until the surfaces do not cross (B in a hollow of A, inside A's
  solid, or beside A; from halfway through `max_redraws` B may start beside A's box, for objects
  with no room inside), then moved along the minimum-distance direction to a gap s with |s|
  uniform in `nested_gap` (0.1 mm–1 cm) and a random sign: just outside A (free), just through a
  wall of A (colliding), or, when B started inside A's solid, still inside it (colliding by
  containment, with no surface crossing).

Per sample: object ids, both poses, the exact collision label, a signed distance, and the IPC
barrier b(d², d̂²) as a smooth proximity target.

Devices: random draws always come from the caller's CPU `torch.Generator` (so a seed gives the
same poses on any machine); the exact queries run wherever the library lives (`lib.to("cuda")`
takes them to the GPU kernels), and results come back on the library's device.
- Signed distance, separated pairs: the exact minimum surface distance (> 0).
- Signed distance, colliding pairs: −t, where t is the translation of B along the sample's
  direction (u, or the centre-to-centre direction for uniform pairs) that separates the pair,
  found by bisection to `penetration_tol` (`contactnet.ops.penetration`, the estimate the planner's
  exact signed distance uses too). The true penetration depth is at most t, so the stored
  value is a lower bound of the true signed distance (and exact for a pair that only touches).
- Barrier: b(d², d̂²) = −(d² − d̂²)² ln(d²/d̂²) for 0 < d < d̂, 0 beyond, +inf when colliding.
"""

from dataclasses import dataclass

import torch

from contactnet.geometry.boxes import boxes_overlap
from contactnet.geometry.mesh import MeshLibrary
from contactnet.geometry.poses import transform_points, unit_quaternions
from contactnet.ops import barrier, mesh_collide, mesh_distance
from contactnet.ops.penetration import separating_translation

__all__ = ["PLACEMENTS", "PairSpec", "label_pairs", "manipulate", "random_quaternions", "sample_pairs", "start_poses"]

PLACEMENTS = ("manipulated", "uniform", "boundary", "nested")


@dataclass
class PairSpec:
    poses_per_pair: int = 1000  # poses per object pair (the paper's 1000), stored contiguously
    placement: str = "manipulated"  # one of PLACEMENTS (see the module docstring)
    # With "manipulated": this fraction of the rows gets uniform poses instead (see sample_pairs).
    uniform_fraction: float = 0.0
    sigma: float = 0.02  # metres, std of the target signed gap s
    box_size: float = 1.0  # metres, side of the box A's position is drawn in
    dhat: float = 0.01  # metres, barrier activation distance
    penetration_tol: float = 1e-4  # metres, bisection tolerance of the penetration estimate
    boundary_gap: tuple[float, float] = (0.0, 0.01)  # metres, range of |s| for "boundary"
    nested_gap: tuple[float, float] = (1e-4, 0.01)  # metres, surface gap range for "nested"
    max_redraws: int = 32  # "nested": rounds of redraws of B's start until the surfaces do not cross

    def __post_init__(self):
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement: expected one of {PLACEMENTS}, got {self.placement!r}")
        for name in ("boundary_gap", "nested_gap"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(f"{name}: expected a range 0 <= low <= high in metres, got {getattr(self, name)}")
            setattr(self, name, (float(lo), float(hi)))
        for name in ("sigma", "box_size", "dhat", "penetration_tol"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: expected > 0, got {getattr(self, name)}")
        if self.poses_per_pair <= 0:
            raise ValueError(f"poses_per_pair: expected > 0, got {self.poses_per_pair}")
        if not 0 <= self.uniform_fraction <= 1:
            raise ValueError(f"uniform_fraction: expected a fraction in [0, 1], got {self.uniform_fraction}")


def random_quaternions(n: int, generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """(n, 4) rotations uniform on SO(3), as unit quaternions [qw, qx, qy, qz]."""
    return unit_quaternions(torch.randn(n, 4, generator=generator, dtype=dtype))


def _radius(lib: MeshLibrary, ids: torch.Tensor) -> torch.Tensor:
    """Bounding radius about the object-frame origin, per id (on the device of `ids`)."""
    radii = torch.stack([lib[i].vertices.norm(dim=1).max() for i in range(len(lib))]).to(lib.dtype)
    return radii.to(ids.device)[ids]


def _on_library_device(lib: MeshLibrary, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(lib.device) for t in tensors)


def start_poses(lib: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, spec: PairSpec,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Before manipulation: (poses_a, poses_b, target gap s). A uniform in the box, both rotations
    uniform, B in a uniform direction from A with their bounding spheres just apart."""
    q, dtype = ids_a.shape[0], lib.dtype
    rot_a = random_quaternions(q, generator, dtype)
    rot_b = random_quaternions(q, generator, dtype)
    pos_a = (torch.rand(q, 3, generator=generator, dtype=dtype) * 2 - 1) * spec.box_size / 2
    reach = _radius(lib, ids_a) + _radius(lib, ids_b)
    away = torch.randn(q, 3, generator=generator, dtype=dtype)
    pos_b = pos_a + away / away.norm(dim=1, keepdim=True) * (reach * 1.01)[:, None]
    s = torch.randn(q, generator=generator, dtype=dtype) * spec.sigma
    return torch.cat([pos_a, rot_a], 1), torch.cat([pos_b, rot_b], 1), s


def manipulate(lib: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, poses_a: torch.Tensor,
               poses_b: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Translate B along the minimum-distance direction u so that the gap becomes s:
    (poses_b, u, s with NaN where the start poses already overlapped and nothing was imposed)."""
    ids_a, ids_b, poses_a, poses_b, s = _on_library_device(lib, ids_a, ids_b, poses_a, poses_b, s)
    near = mesh_distance(lib, ids_a, ids_b, poses_a, poses_b)
    separated = near.distance > 0
    # Rarely the initial poses already overlap: keep them, push along the centre line instead.
    u = torch.where(separated[:, None], near.point_a - near.point_b, poses_a[:, :3] - poses_b[:, :3])
    u = u / u.norm(dim=1, keepdim=True).clamp_min(1e-12)
    shift = torch.where(separated, near.distance - s, torch.zeros_like(s))
    moved = torch.cat([poses_b[:, :3] + shift[:, None] * u, poses_b[:, 3:]], 1)
    return moved, u, torch.where(separated, s, torch.full_like(s, float("nan")))


def sample_pairs(lib: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, spec: PairSpec,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Poses for Q = len(ids_a) queries: (poses_a, poses_b, direction u (Q, 3), target gap s (Q,)).

    u points from B towards A; s is NaN where no gap was imposed (uniform pairs, and the rare
    manipulated pair whose initial poses already overlapped). Drawn with the CPU `generator`,
    returned on the library's device.

    With `spec.uniform_fraction` > 0 a random fraction of manipulated rows takes uniform poses
    instead: approaching along the minimum-distance direction rarely reaches the interlocked
    configurations (one object in another's hollow, boxes overlapping) that uniform poses are full
    of, so a model trained on manipulated pairs alone misjudges them.
    """
    ids_a, ids_b = ids_a.cpu(), ids_b.cpu()
    if spec.placement == "uniform":
        return _on_library_device(lib, *_uniform_poses(lib, ids_a, ids_b, spec, generator))
    if spec.placement == "nested":
        return _nested_poses(lib, ids_a, ids_b, spec, generator)
    poses_a, poses_b, s = start_poses(lib, ids_a, ids_b, spec, generator)
    if spec.placement == "boundary":
        lo, hi = spec.boundary_gap
        sign = torch.randint(2, s.shape, generator=generator, dtype=s.dtype) * 2 - 1
        s = sign * (lo + (hi - lo) * torch.rand(s.shape, generator=generator, dtype=s.dtype))
        return (poses_a, *manipulate(lib, ids_a, ids_b, poses_a, poses_b, s))
    if spec.uniform_fraction == 0:
        return (poses_a, *manipulate(lib, ids_a, ids_b, poses_a, poses_b, s))
    out = _on_library_device(lib, *_uniform_poses(lib, ids_a, ids_b, spec, generator))
    # Only the rows that stay manipulated pay for manipulate's distance queries.
    keep = torch.rand(len(ids_a), generator=generator) >= spec.uniform_fraction
    manipulated = (poses_a[keep], *manipulate(lib, ids_a[keep], ids_b[keep], poses_a[keep], poses_b[keep], s[keep]))
    keep = keep.to(lib.device)
    for o, m in zip(out, manipulated):
        o[keep] = m.to(o.device)
    return out


def _uniform_poses(lib: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, spec: PairSpec,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """sample_pairs' uniform poses, on the CPU."""
    q, dtype = ids_a.shape[0], lib.dtype
    rot_a = random_quaternions(q, generator, dtype)
    rot_b = random_quaternions(q, generator, dtype)
    pos_a = (torch.rand(q, 3, generator=generator, dtype=dtype) * 2 - 1) * spec.box_size / 2
    reach = _radius(lib, ids_a) + _radius(lib, ids_b)
    # Uniform: B's centre uniform in the cube of half-side r_a + r_b around A, redrawn until the
    # oriented boxes overlap (whole rounds of draws keep it a pure function of the seed).
    boxes = torch.stack([lib[i].bounds() for i in range(len(lib))]).to(dtype)
    pos_b = torch.empty_like(pos_a)
    todo = torch.ones(q, dtype=torch.bool)
    while bool(todo.any()):
        offset = (torch.rand(q, 3, generator=generator, dtype=dtype) * 2 - 1) * reach[:, None]
        rot_try = random_quaternions(q, generator, dtype)
        ok = todo & boxes_overlap(boxes[ids_a], boxes[ids_b], torch.cat([pos_a, rot_a], 1),
                                  torch.cat([pos_a + offset, rot_try], 1))
        pos_b[ok], rot_b[ok] = pos_a[ok] + offset[ok], rot_try[ok]
        todo &= ~ok
    u = pos_a - pos_b
    u = u / u.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return torch.cat([pos_a, rot_a], 1), torch.cat([pos_b, rot_b], 1), u, torch.full((q,), float("nan"), dtype=dtype)


def _nested_poses(lib: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, spec: PairSpec,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """sample_pairs' nested placement (module docstring). Where B started inside A's solid the
    returned direction is -u (from A's nearest surface towards B: the way out for a contained B,
    so the penetration bisection of `label_pairs` moves B out rather than deeper in) and the gap
    is NaN (moving a contained B back by its gap does not separate it, so it cannot bracket that
    bisection); elsewhere they are u and s as for manipulated pairs."""
    q, dtype = ids_a.shape[0], lib.dtype
    pos_a = (torch.rand(q, 3, generator=generator, dtype=dtype) * 2 - 1) * spec.box_size / 2
    poses_a = torch.cat([pos_a, random_quaternions(q, generator, dtype)], 1)
    lo, hi = spec.nested_gap
    sign = torch.randint(2, (q,), generator=generator, dtype=dtype) * 2 - 1
    gap = sign * (lo + (hi - lo) * torch.rand(q, generator=generator, dtype=dtype))
    boxes = torch.stack([lib[i].bounds() for i in range(len(lib))]).to(dtype)
    box_a, reach_b = boxes[ids_a], _radius(lib, ids_b).cpu()
    start_b = torch.empty_like(poses_a)
    todo = torch.ones(q, dtype=torch.bool)
    for round_ in range(spec.max_redraws):
        # Whole rounds of draws for every row keep the shard a pure function of the seed.
        unit = torch.rand(q, 3, generator=generator, dtype=dtype)
        rot_b = random_quaternions(q, generator, dtype)
        # From halfway on, B's centre may also fall in A's box grown by B's radius: where A's
        # features are closer together than B is wide (a comb's teeth), B fits only beside A.
        grow = reach_b[:, None] if round_ >= spec.max_redraws // 2 else 0
        centre = transform_points(poses_a, box_a[:, 0] - grow + unit * (box_a[:, 1] - box_a[:, 0] + 2 * grow))
        rows = todo.nonzero().squeeze(1)
        trial = torch.cat([centre[rows], rot_b[rows]], 1)
        # A start counts when the surfaces do not cross (B in a hollow, beside A, or inside it).
        apart = mesh_distance(lib, *_on_library_device(lib, ids_a[rows], ids_b[rows], poses_a[rows], trial)).distance > 0
        ok = apart.cpu() | (round_ == spec.max_redraws - 1)
        start_b[rows[ok]] = trial[ok]
        todo[rows[ok]] = False
        if not bool(todo.any()):
            break
    contained = mesh_collide(lib, *_on_library_device(lib, ids_a, ids_b, poses_a, start_b)).cpu()
    poses_b, u, s = manipulate(lib, ids_a, ids_b, poses_a, start_b, gap)
    contained = contained.to(u.device)
    direction = torch.where(contained[:, None], -u, u)
    return (poses_a.to(lib.device), poses_b, direction, torch.where(contained, torch.full_like(s, float("nan")), s))


def label_pairs(lib: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, poses_a: torch.Tensor,
                poses_b: torch.Tensor, direction: torch.Tensor, spec: PairSpec,
                gap: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Exact labels at the given poses: collision (Q,) bool, signed distance (Q,), barrier (Q,).

    `gap` (Q,), optional: the target gap s that `sample_pairs` imposed along `direction` (NaN where
    none). It only narrows the penetration bisection: B came from a pose at distance d and moved
    d − s along u, so moving it back by |s| + 2·tol leaves the pair at least 2·tol apart (distance
    is 1-Lipschitz in translation); the label itself is never taken from it. Runs on the
    library's device (inputs are moved there); the results are on it too.
    """
    ids_a, ids_b, poses_a, poses_b, direction = _on_library_device(lib, ids_a, ids_b, poses_a, poses_b, direction)
    gap = None if gap is None else gap.to(lib.device)
    label = mesh_collide(lib, ids_a, ids_b, poses_a, poses_b)
    signed = torch.empty(ids_a.shape[0], dtype=lib.dtype, device=lib.device)
    free = ~label
    if bool(free.any()):
        signed[free] = mesh_distance(lib, ids_a[free], ids_b[free], poses_a[free], poses_b[free]).distance
    if bool(label.any()):
        bracket = None if gap is None else gap[label].abs() + 2 * spec.penetration_tol
        ia, ib, pa, pb = ids_a[label], ids_b[label], poses_a[label], poses_b[label]
        signed[label] = -separating_translation(lib, ia, ib, pa, pb, direction[label],
                                                _separating_reach(lib, ia, ib, pa, pb, bracket), spec.penetration_tol)
    d2 = signed.clamp_min(0) ** 2
    proximity = barrier(d2.contiguous(), spec.dhat).value
    return {"label": label, "signed_distance": signed, "barrier": proximity}


def _separating_reach(lib, ids_a, ids_b, poses_a, poses_b, bracket=None) -> torch.Tensor:
    """A translation (Q,) that separates each pair whatever the direction: the bounding spheres'
    radii plus the centres' distance, or `bracket` (Q,) where it is known and smaller (NaN where not)."""
    hi = _radius(lib, ids_a) + _radius(lib, ids_b) + (poses_a[:, :3] - poses_b[:, :3]).norm(dim=1)
    if bracket is not None:
        hi = torch.where(torch.isfinite(bracket), torch.minimum(bracket, hi), hi)
    return hi
