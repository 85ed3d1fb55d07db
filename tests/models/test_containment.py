"""The collision nets' containment test: an object wholly inside another collides, both ways round
and on every prediction path; it only ever flags pairs that truly collide; and it can be switched
on for a net trained without it."""

import pytest
import torch

from contactnet.data.pairs import PairSpec, sample_pairs
from contactnet.data.procedural import make_object
from contactnet.geometry.mesh import Mesh, MeshLibrary
from contactnet.geometry.sampling import sample_surface_even
from contactnet.geometry.winding import surface_dipoles
from contactnet.models import LOCC, GlobalOCN, ShapeEmbedding, ShapeEncoder, load_model
from contactnet.models.checkpoint import build_net
from contactnet.models.containment import CONTAINED_LOGIT, contained, contained_indexed
from contactnet.ops import mesh_collide, mesh_distance
from tests.geometry.test_winding import _sphere

IDENTITY = torch.tensor([0.0, 0, 0, 1, 0, 0, 0])


def _at(x, y=0.0, z=0.0):
    return IDENTITY + torch.tensor([x, y, z, 0, 0, 0, 0])


def _spheres(radii=(0.1, 0.01)):
    """(len(radii), 1500, 3) points and normals of centred spheres, float32."""
    clouds = [_sphere(1500, r) for r in radii]
    return (torch.cat([p for p, _ in clouds]).float(), torch.cat([n for _, n in clouds]).float())


def test_a_small_sphere_inside_a_large_one_is_contained_both_ways_round():
    points, normals = _spheres()
    big, small = surface_dipoles(points[0], normals[0]), surface_dipoles(points[1], normals[1])
    # The small sphere deep inside, crossing the large one's surface, just outside, far away.
    poses = torch.stack([_at(0.03), _at(0.1), _at(0.115), _at(0.5)])
    want = torch.tensor([True, False, False, False])
    assert torch.equal(contained(big, small, IDENTITY.expand(4, 7), poses), want)
    assert torch.equal(contained(small, big, poses, IDENTITY.expand(4, 7)), want)  # B holds A
    # Embeddings broadcast against poses as in training: (2, 1) objects against (2, 4) poses.
    both = torch.stack([big, small])[:, None]
    got = contained(both, both.flip(0), IDENTITY.expand(2, 4, 7), torch.stack([poses, poses]))
    assert torch.equal(got, torch.stack([want, want]))


@pytest.mark.parametrize("cls", [LOCC, GlobalOCN])
def test_a_contained_pair_gets_a_colliding_logit_on_every_path(cls, device):
    torch.manual_seed(0)
    net = cls(ShapeEncoder(grid=4, hidden=16, features=8, channels=8), head_hidden=16, containment=True)
    net = net.eval().to(device)
    points, normals = (x.to(device) for x in _spheres())
    table = net.encode(points, normals)
    ids_a, ids_b = torch.tensor([0, 0, 1, 0], device=device), torch.tensor([1, 1, 0, 1], device=device)
    pose_a = torch.stack([IDENTITY, IDENTITY, _at(-0.03), IDENTITY]).to(device)
    pose_b = torch.stack([_at(0.03), _at(0.5), IDENTITY, _at(0.1)]).to(device)
    inside = torch.tensor([True, False, True, False], device=device)
    with torch.no_grad():
        rows = net.predict(table.map(lambda x: x[ids_a]), table.map(lambda x: x[ids_b]), pose_a, pose_b)
        indexed = net.predict_indexed(table, ids_a, ids_b, pose_a, pose_b)
        net.containment = False
        plain = net.predict_indexed(table, ids_a, ids_b, pose_a, pose_b)
    torch.testing.assert_close(indexed, rows)
    assert (indexed[inside] >= CONTAINED_LOGIT).all()
    torch.testing.assert_close(indexed[~inside], plain[~inside], rtol=0, atol=0)
    torch.testing.assert_close(indexed[inside], plain[inside].clamp_min(CONTAINED_LOGIT), rtol=0, atol=0)


def test_the_raise_keeps_the_heads_gradients():
    """A planner descending the learned cost from a contained pose gets the head's gradient, not
    a flat plateau: the raise is a constant."""
    torch.manual_seed(0)
    net = LOCC(ShapeEncoder(grid=4, hidden=16, features=8, channels=8), head_hidden=16, containment=True).eval()
    table = net.encode(*_spheres())
    ids_a, ids_b = torch.tensor([0, 0]), torch.tensor([1, 1])
    grads = []
    for on in (True, False):
        net.containment = on
        pose_b = torch.stack([_at(0.03), _at(0.5)]).requires_grad_(True)
        logits = net.predict_indexed(table, ids_a, ids_b, IDENTITY.expand(2, 7), pose_b)
        (grad,) = torch.autograd.grad(logits.sum(), pose_b)
        grads.append(grad)
    assert logits[0] < CONTAINED_LOGIT and grads[1][0].abs().sum() > 0  # the head alone: low, with a gradient
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)


def test_it_flags_only_pairs_that_collide():
    """On uniform poses of procedural objects and their small copies (nested and interlocked
    configurations), every pair the test calls contained collides by the exact kernel, and it
    finds most of the pairs the exact kernel finds contained with the surfaces apart (32 of 41:
    the rest lie within a dipole spacing of a wall, where the winding number is smoothed). The
    indexed (fused) test answers as the torch one, in float64 and float32, and casts poses of
    another dtype to the table's."""
    shapes = [make_object(f, 2) for f in ("star_prism", "random_union", "egad_like", "ring", "mug")]
    shapes += [(v * 0.25, f) for v, f in shapes]
    lib = MeshLibrary([Mesh(v, f) for v, f in shapes], dtype=torch.float64)
    clouds = [sample_surface_even(v, f, 1500, seed=0) for v, f in shapes]
    dipoles = torch.stack([surface_dipoles(torch.as_tensor(p), torch.as_tensor(n)) for p, n, _ in clouds])
    g = torch.Generator().manual_seed(3)
    ids_a = torch.randint(5, (3000,), generator=g)
    ids_b = torch.randint(5, (3000,), generator=g) + 5
    pa, pb, _, _ = sample_pairs(lib, ids_a, ids_b, PairSpec(placement="uniform"), g)
    flagged = contained(dipoles[ids_a], dipoles[ids_b], pa, pb)
    # The indexed test (the fused kernel, each query stopping at its first probe outside) agrees.
    assert torch.equal(contained_indexed(dipoles, ids_a, ids_b, pa, pb), flagged)
    assert torch.equal(contained_indexed(dipoles.float(), ids_a, ids_b, pa.float(), pb.float()),
                       contained(dipoles[ids_a].float(), dipoles[ids_b].float(), pa.float(), pb.float()))
    # float64 poses against a float32 table: cast to the table's dtype.
    assert torch.equal(contained_indexed(dipoles.float(), ids_a, ids_b, pa, pb),
                       contained(dipoles[ids_a].float(), dipoles[ids_b].float(), pa.float(), pb.float()))
    collide = mesh_collide(lib, ids_a, ids_b, pa, pb)
    assert flagged.sum() > 20 and collide[flagged].all()
    exact = collide & (mesh_distance(lib, ids_a, ids_b, pa, pb).distance > 0)  # contained, surfaces apart
    assert (flagged & exact).sum() >= 0.6 * exact.sum()
    # Not a trivial rule: most colliding pairs cross surfaces and are left to the net.
    assert flagged.sum() < 0.5 * collide.sum()


def test_an_embedding_without_dipoles_is_refused_by_name():
    net = LOCC(ShapeEncoder(grid=4, hidden=16, features=8, channels=8), head_hidden=16, containment=True)
    emb = net.encode(*_spheres())
    bare = ShapeEmbedding(*emb[:4])
    with pytest.raises(ValueError, match="emb_b.dipoles"):
        net.predict(emb, bare, IDENTITY.expand(2, 7), IDENTITY.expand(2, 7))
    with pytest.raises(ValueError, match="table.dipoles"):
        net.predict_indexed(bare, torch.tensor([0]), torch.tensor([1]), IDENTITY[None], IDENTITY[None])
    net.containment = False  # off: the old embeddings still work
    net.predict(emb, bare, IDENTITY.expand(2, 7), IDENTITY.expand(2, 7))


def test_load_model_switches_the_test_for_a_net_trained_without_it(tmp_path):
    config = {"_target_": "contactnet.models.LOCC", "encoder": {
        "_target_": "contactnet.models.ShapeEncoder", "grid": 4, "hidden": 16, "features": 8, "channels": 8}}
    net = build_net(config)  # an older checkpoint's config: no containment key
    torch.save({"contactnet_net_config": config, "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}},
               tmp_path / "net.ckpt")
    assert not load_model(tmp_path / "net.ckpt").containment
    assert load_model(tmp_path / "net.ckpt", containment=True).containment
