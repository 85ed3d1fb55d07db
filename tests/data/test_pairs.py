"""Pair sampling and exact labels: agreement with an independent labeller, the manipulated gap,
determinism, rotation-augmentation invariance of the exact label."""

import numpy as np
import pytest
import torch

from contactnet.data.pairs import PairSpec, label_pairs, manipulate, sample_pairs, start_poses
from contactnet.data.procedural import make_object
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.geometry.poses import compose_poses, quaternion_to_matrix
from contactnet.geometry.boxes import boxes_overlap
from contactnet.ops import mesh_collide, mesh_distance
from tests.data.independent_labeller import FclLabeller

FAMILY_SUBSET = ["mug", "bowl", "ring", "u_bracket", "hook", "gear_prism", "comb", "egad_like"]


@pytest.fixture(scope="module")
def objects():
    return [make_object(f, 0) for f in FAMILY_SUBSET]


@pytest.fixture(scope="module")
def lib(objects):
    return MeshLibrary([Mesh(v, f, name=n) for (v, f), n in zip(objects, FAMILY_SUBSET)], dtype=torch.float64)


def _queries(lib, q, spec, seed):
    g = torch.Generator().manual_seed(seed)
    ids_a = torch.randint(len(lib), (q,), generator=g)
    ids_b = torch.randint(len(lib), (q,), generator=g)
    poses_a, poses_b, u, s = sample_pairs(lib, ids_a, ids_b, spec, g)
    return ids_a, ids_b, poses_a, poses_b, u, s


@pytest.mark.parametrize("placement", ["manipulated", "uniform"])
def test_labels_agree_with_independent_labeller(lib, objects, placement):
    spec = PairSpec(placement=placement)
    # 2 x 5000 pairs: the 10k random pairs, half manipulated, half uniform.
    ids_a, ids_b, pa, pb, u, s = _queries(lib, 5000, spec, seed=1 + (placement == "manipulated"))
    labels = label_pairs(lib, ids_a, ids_b, pa, pb, u, spec, s)
    oracle = FclLabeller([v for v, _ in objects], [f for _, f in objects])
    expected = oracle.labels(ids_a, ids_b, pa, pb)
    compared = labels["signed_distance"].abs().numpy() >= 1e-7  # nearer touching: either answer is fair
    wrong = np.flatnonzero(compared & (labels["label"].numpy() != expected))
    assert wrong.size == 0, wrong[:20]
    compared = int(compared.sum())
    positives = int(labels["label"].sum())
    assert compared > 4950 and 250 < positives < 4750


def test_manipulated_gap_and_signed_distance(lib):
    spec = PairSpec(sigma=0.02)
    ids_a, ids_b, pa, pb, u, s = _queries(lib, 400, spec, seed=3)
    out = label_pairs(lib, ids_a, ids_b, pa, pb, u, spec)
    label, sd = out["label"], out["signed_distance"]
    # Separated pairs: the exact distance is at most the manipulated gap (other features may be
    # closer), and usually equal to it.
    free = ~label & (s > 0)
    assert (sd[free] <= s[free] + 1e-9).all()
    assert ((sd[free] - s[free]).abs() < 1e-9).float().mean() > 0.8
    # Colliding pairs get a negative signed distance, and the label follows the geometry,
    # mostly matching the sign of s without being taken from it.
    assert (sd[label] < 0).all() and (sd[~label] > 0).all()
    assert 0.9 < ((s < 0) == label).float().mean() < 1.0 or ((s < 0) == label).all()
    # Barrier: +inf when colliding, 0 beyond dhat, positive and finite in between.
    b = out["barrier"]
    assert torch.isinf(b[label]).all()
    near = ~label & (sd < spec.dhat)
    assert (b[near] > 0).all() and torch.isfinite(b[near]).all()
    assert (b[~label & (sd >= spec.dhat)] == 0).all()


def test_penetration_estimate_separates_the_pair(lib):
    spec = PairSpec()
    ids_a, ids_b, pa, pb, u, s = _queries(lib, 200, spec, seed=4)
    out = label_pairs(lib, ids_a, ids_b, pa, pb, u, spec)
    hit = out["label"]
    depth = -out["signed_distance"][hit]
    moved = pb[hit].clone()
    moved[:, :3] -= (depth + 2 * spec.penetration_tol)[:, None] * u[hit]
    assert not mesh_collide(lib, ids_a[hit], ids_b[hit], pa[hit], moved).any()
    moved = pb[hit].clone()
    moved[:, :3] -= (depth - 2 * spec.penetration_tol).clamp_min(0)[:, None] * u[hit]
    assert mesh_collide(lib, ids_a[hit], ids_b[hit], pa[hit], moved).all()


def test_sampling_is_deterministic(lib):
    a = _queries(lib, 50, PairSpec(), seed=9)
    b = _queries(lib, 50, PairSpec(), seed=9)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, equal_nan=True)


def test_exact_label_is_invariant_under_rotation_augmentation(lib):
    """Rotating both objects' shapes by R and composing R⁻¹ into both poses leaves the occupied
    space unchanged, so the exact label must not change."""
    spec = PairSpec()
    ids_a, ids_b, pa, pb, u, _ = _queries(lib, 300, spec, seed=5)
    label = mesh_collide(lib, ids_a, ids_b, pa, pb)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(4, generator=g, dtype=torch.float64)
    q = q / q.norm()
    R = quaternion_to_matrix(q)
    rotated = MeshLibrary([Mesh(lib[i].vertices @ R.T, lib[i].faces) for i in range(len(lib))], dtype=torch.float64)
    r_inv = torch.cat([torch.zeros(3, dtype=torch.float64), q * torch.tensor([1.0, -1, -1, -1], dtype=torch.float64)])
    pa2 = compose_poses(pa, r_inv.expand_as(pa))
    pb2 = compose_poses(pb, r_inv.expand_as(pb))
    assert (mesh_collide(rotated, ids_a, ids_b, pa2, pb2) == label).all()


def test_uniform_fraction_mixes_uniform_rows_into_manipulated_ones(lib):
    ids_a, ids_b, pa, pb, u, s = _queries(lib, 400, PairSpec(uniform_fraction=0.5), seed=11)
    uniform = s.isnan()  # no imposed gap (and the rare manipulated start that already overlapped)
    assert 0.35 < uniform.float().mean() < 0.65
    # The uniform rows follow the uniform sampler's rule: the oriented boxes overlap.
    boxes = torch.stack([lib[i].bounds() for i in range(len(lib))])
    assert boxes_overlap(boxes[ids_a], boxes[ids_b], pa, pb)[uniform].all()
    # The manipulated rows got their imposed gap (other features may come closer: see above).
    gap = mesh_distance(lib, ids_a[~uniform], ids_b[~uniform], pa[~uniform], pb[~uniform]).distance
    apart = s[~uniform] > 1e-3
    assert (gap[apart] <= s[~uniform][apart] + 1e-9).all()
    assert ((gap[apart] - s[~uniform][apart]).abs() < 1e-9).float().mean() > 0.8
    # Fraction 0 draws exactly what plain manipulation draws (no extra generator calls).
    g = torch.Generator().manual_seed(9)
    ids_a, ids_b = torch.randint(len(lib), (50,), generator=g), torch.randint(len(lib), (50,), generator=g)
    pa, pb, s = start_poses(lib, ids_a, ids_b, PairSpec(), g)
    want = (ids_a, ids_b, pa, *manipulate(lib, ids_a, ids_b, pa, pb, s))
    for x, y in zip(_queries(lib, 50, PairSpec(uniform_fraction=0.0), seed=9), want):
        torch.testing.assert_close(x, y, equal_nan=True)


@pytest.fixture(scope="module")
def nested_lib(objects):
    """The subset's objects (ids 0..7) followed by copies scaled by 0.3 (ids 8..15)."""
    meshes = [Mesh(v, f) for v, f in objects] + [Mesh(v * 0.3, f) for v, f in objects]
    return MeshLibrary(meshes, dtype=torch.float64)


def test_boundary_placement_labels_and_gaps(lib, objects):
    """Boundary pairs: |gap| within 1 cm, about half colliding; labels from the exact kernels agree
    with the independent labeller, never taken from the sign of the gap."""
    spec = PairSpec(placement="boundary")
    ids_a, ids_b, pa, pb, u, s = _queries(lib, 1500, spec, seed=21)
    out = label_pairs(lib, ids_a, ids_b, pa, pb, u, spec, s)
    label, sd = out["label"], out["signed_distance"]
    imposed = ~s.isnan()
    assert imposed.float().mean() > 0.97 and (s[imposed].abs() <= 0.01).all()
    assert 0.4 < label.float().mean() < 0.6
    # Separated: the true distance is at most the gap; colliding: penetration about |gap| or less.
    apart = ~label & imposed & (s > 0)
    assert (sd[apart] <= s[apart] + 1e-9).all()
    assert ((s[imposed] < 0) == label[imposed]).float().mean() > 0.9
    assert (sd[~label] <= 0.01 + 1e-9).float().mean() > 0.99
    assert (sd[label] >= -0.0102).float().mean() > 0.95
    oracle = FclLabeller([v for v, _ in objects], [f for _, f in objects])
    compared = sd.abs().numpy() > 1e-7
    wrong = np.flatnonzero(compared & (label.numpy() != oracle.labels(ids_a, ids_b, pa, pb)))
    assert wrong.size == 0, wrong[:20]


def test_nested_placement_inside_or_just_outside(nested_lib, objects):
    """Nested pairs: the small B lies just outside A, just through a wall of A, or inside A's
    solid (colliding by containment, surfaces apart); the labels agree with the independent
    labeller, and the penetration estimate moves B out of A."""
    spec = PairSpec(placement="nested", max_redraws=32)
    g = torch.Generator().manual_seed(22)
    ids_a = torch.randint(8, (600,), generator=g)
    ids_b = torch.randint(8, (600,), generator=g) + 8
    pa, pb, u, s = sample_pairs(nested_lib, ids_a, ids_b, spec, g)
    out = label_pairs(nested_lib, ids_a, ids_b, pa, pb, u, spec, s)
    label, sd = out["label"], out["signed_distance"]
    surface = mesh_distance(nested_lib, ids_a, ids_b, pa, pb).distance
    assert 0.4 < label.float().mean() < 0.7
    # Free rows sit within the gap range of A; colliding rows include containment (no crossing).
    lo, hi = spec.nested_gap
    assert ((surface[~label] >= lo - 1e-9) & (surface[~label] <= hi + 1e-9)).float().mean() > 0.95
    contained = label & (surface > 0)
    assert contained.any()
    # Moving B by the penetration estimate along -direction separates it (but for the rare row
    # that a move away from A's nearest wall pushed into another feature of A: a comb's teeth).
    moved = pb[label].clone()
    moved[:, :3] -= (-sd[label] + 2 * spec.penetration_tol)[:, None] * u[label]
    assert mesh_collide(nested_lib, ids_a[label], ids_b[label], pa[label], moved).float().mean() < 0.02
    oracle = FclLabeller([v for v, _ in objects] + [v * 0.3 for v, _ in objects], [f for _, f in objects] * 2)
    compared = surface.abs().numpy() > 1e-7
    wrong = np.flatnonzero(compared & (label.numpy() != oracle.labels(ids_a, ids_b, pa, pb)))
    assert wrong.size == 0, wrong[:20]


def test_bad_spec():
    with pytest.raises(ValueError, match="placement: expected one of"):
        PairSpec(placement="random")
    with pytest.raises(ValueError, match="boundary_gap"):
        PairSpec(boundary_gap=(0.01, 0.0))
    with pytest.raises(ValueError, match="uniform_fraction"):
        PairSpec(uniform_fraction=1.5)
    with pytest.raises(ValueError, match="sigma"):
        PairSpec(sigma=0)
    with pytest.raises(ValueError, match="poses_per_pair"):
        PairSpec(poses_per_pair=0)
