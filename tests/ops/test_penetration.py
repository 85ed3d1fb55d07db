"""separating_translation: the one penetration estimate behind the stored labels and the planner's
signed distance (both callers must go through it), its bisection bracket, and its argument checks."""

import pytest
import torch

import contactnet.data.pairs as pairs
import contactnet.ops.penetration as penetration
import contactnet.planning.exact as exact
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import mesh_collide
from contactnet.ops.penetration import separating_translation
from contactnet.sim.scene import box_mesh

TOL = 1e-4


@pytest.fixture(scope="module")
def cubes():
    cube = box_mesh((0.1, 0.1, 0.1))
    return MeshLibrary([Mesh(cube.vertices, cube.faces), Mesh(cube.vertices, cube.faces)], dtype=torch.float64)


def _overlapping(offsets):
    """Unit-quaternion poses: A at the origin, B at x = offset (cubes of side 0.1 overlap by 0.1 - offset)."""
    q = len(offsets)
    poses_a = torch.zeros(q, 7, dtype=torch.float64)
    poses_a[:, 3] = 1
    poses_b = poses_a.clone()
    poses_b[:, 0] = torch.tensor(offsets, dtype=torch.float64)
    ids = torch.zeros(q, dtype=torch.int64)
    return ids, ids + 1, poses_a, poses_b


def test_translation_is_the_overlap_to_tol_and_separates(cubes):
    ids_a, ids_b, pa, pb = _overlapping([0.02, 0.05, 0.099])
    direction = torch.tensor([[-1.0, 0, 0]], dtype=torch.float64).expand(3, 3).contiguous()  # B moves to +x
    reach = torch.full((3,), 0.3, dtype=torch.float64)
    t = separating_translation(cubes, ids_a, ids_b, pa, pb, direction, reach, TOL)
    overlap = 0.1 - pb[:, 0]
    assert bool(((t >= overlap) & (t <= overlap + TOL)).all()), (t, overlap)  # the bracket's separated end
    apart, inside = pb.clone(), pb.clone()
    apart[:, :3] -= t[:, None] * direction
    inside[:, :3] -= (t - TOL)[:, None] * direction
    assert not bool(mesh_collide(cubes, ids_a, ids_b, pa, apart).any())
    assert bool(mesh_collide(cubes, ids_a, ids_b, pa, inside).all())


def _bisection_rounds(monkeypatch):
    """Counts the collision queries made inside contactnet.ops.penetration (a private copy of the
    bisection elsewhere would make its own, uncounted)."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[1].shape[0])
        return mesh_collide(*args, **kwargs)

    monkeypatch.setattr(penetration, "mesh_collide", counted)
    return calls


def test_stored_labels_and_planner_use_the_one_estimate(cubes, monkeypatch):
    """Both callers go through contactnet.ops.penetration.separating_translation, so the labels'
    and the planner's penetration estimates cannot drift apart."""
    ids_a, ids_b, pa, pb = _overlapping([0.02, 0.05, 0.2])  # two colliding, one apart
    direction = torch.tensor([[-1.0, 0, 0]], dtype=torch.float64).expand(3, 3).contiguous()
    rounds = _bisection_rounds(monkeypatch)
    labels = pairs.label_pairs(cubes, ids_a, ids_b, pa, pb, direction, pairs.PairSpec(penetration_tol=TOL))
    label_rounds = len(rounds)
    aabb = torch.tensor([[[-0.05] * 3, [0.05] * 3]] * 2, dtype=torch.float64)
    planner, colliding = exact.exact_signed_distance(cubes, aabb, ids_a, ids_b, pa, pb, tol=TOL)
    assert label_rounds > 0 and len(rounds) > label_rounds  # each caller bisected here ...
    assert set(rounds) == {2}  # ... over its colliding pairs only
    assert colliding.tolist() == labels["label"].tolist() == [True, True, False]
    # Same direction here (the centre line is -x): both give -t within one tolerance of -overlap.
    expected = torch.tensor([-0.08, -0.05], dtype=torch.float64)
    for signed in (labels["signed_distance"][:2], planner[:2]):
        assert bool(((signed - expected).abs() <= TOL).all()), signed


def test_bad_arguments_name_the_argument(cubes):
    ids_a, ids_b, pa, pb = _overlapping([0.05])
    direction = torch.tensor([[-1.0, 0, 0]], dtype=torch.float64)
    reach = torch.tensor([0.3], dtype=torch.float64)
    with pytest.raises(ValueError, match="tol: expected a finite bisection tolerance > 0"):
        separating_translation(cubes, ids_a, ids_b, pa, pb, direction, reach, 0.0)
    with pytest.raises(ValueError, match=r"direction: expected a tensor of shape \(1, 3\)"):
        separating_translation(cubes, ids_a, ids_b, pa, pb, direction[0], reach, TOL)
    with pytest.raises(ValueError, match=r"reach: expected a tensor of shape \(1,\)"):
        separating_translation(cubes, ids_a, ids_b, pa, pb, direction, reach[:, None], TOL)
    with pytest.raises(ValueError, match="reach: expected finite"):
        separating_translation(cubes, ids_a, ids_b, pa, pb, direction, torch.full_like(reach, float("inf")), TOL)
