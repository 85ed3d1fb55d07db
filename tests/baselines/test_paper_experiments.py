"""The paper experiments' --quick runs (benchmarks/paper_*.py) on the tiny dataset: every method
family scored, outputs written, and a rerun skips the finished rows."""

import json

import pytest
import torch

from benchmarks import paper_common, paper_fig6, paper_scale
from contactnet.models import LOCC, ShapeEncoder

pytest.importorskip("coacd")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def random_locc(tmp_path_factory):
    """A checkpoint as training writes it (plain-data network config + `net.` weights), random weights."""
    torch.manual_seed(0)
    net = LOCC(ShapeEncoder(grid=4, hidden=32, features=16))
    config = {"_target_": "contactnet.models.LOCC",
              "encoder": {"_target_": "contactnet.models.ShapeEncoder", "grid": 4, "hidden": 32, "features": 16}}
    path = tmp_path_factory.mktemp("ckpt") / "random.ckpt"
    torch.save({"contactnet_net_config": config, "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}}, path)
    return path


def quick_args(tiny_data, tmp_path, ckpt):
    return ["--quick", "--data-root", str(tiny_data / "procedural_tiny"), "--out-dir", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "coacd"), "--ckpt", f"locc={ckpt}", "--device", "cpu",
            "--hybrid-max-error", "0.05"]


@pytest.mark.parametrize("script, group, count", [(paper_fig6, "split", 4), (paper_scale, "scale", 2)])
def test_quick_run_writes_every_method_and_resumes(script, group, count, tiny_data, tmp_path, random_locc, monkeypatch):
    out = script.main(quick_args(tiny_data, tmp_path, random_locc))
    results = json.loads((out / "results.json").read_text())
    rows = results["rows"]
    families = {r["family"] for r in rows}
    assert families == {"net:locc", "hybrid:locc", "ucf_gjk", "piece_gjk", "is_cd", "exact"}
    assert len({r[group] for r in rows}) == count
    assert all(r["checks_per_second"] > 0 and 0 <= r["acc"] <= 1 for r in rows)
    assert all(r["balanced_acc"] == 1 or r["tpr"] != r["tpr"] or r["tnr"] != r["tnr"] for r in rows if r["family"] == "exact")
    # The certified hybrid never misses a collision (TPR 1, or NaN without colliding pairs).
    assert all(r["tpr"] == 1 or r["tpr"] != r["tpr"] for r in rows if r["family"] == "hybrid:locc")
    assert (out / "results.png").stat().st_size > 0 and "| exact |" in (out / "results.md").read_text()
    # A rerun finds every row done: nothing is scored again.
    monkeypatch.setattr(paper_common, "score", lambda *a, **k: pytest.fail("a finished row was scored again"))
    monkeypatch.setattr(script, "score", paper_common.score)
    script.main(quick_args(tiny_data, tmp_path, random_locc))
    assert len(json.loads((out / "results.json").read_text())["rows"]) == len(rows)
    # Other pairs into the same folder: refused, not mixed in.
    with pytest.raises(SystemExit, match="seed: 0 there, 1 now"):
        script.main(quick_args(tiny_data, tmp_path, random_locc) + ["--seed", "1"])


def test_bad_checkpoint_option(tiny_data, tmp_path):
    with pytest.raises(SystemExit, match="NAME=PATH"):
        paper_fig6.main(["--quick", "--data-root", str(tiny_data / "procedural_tiny"), "--ckpt", "no-name",
                         "--out-dir", str(tmp_path)])


def test_split_pairs_subsets(tiny_data):
    root = tiny_data / "procedural_tiny"
    every = paper_common.load_split_pairs(root, "test_unknown", None, None, 0)
    two = paper_common.load_split_pairs(root, "test_unknown", None, 2, 0)
    assert 0 < len(two) <= len(every) and len(two.object_ids()) <= 2
    few = paper_common.load_split_pairs(root, "test_unknown", 5, None, 0)
    assert len(few) == 5 and torch.isin(few.poses_a[:, 0], every.poses_a[:, 0]).all()
    with pytest.raises(FileNotFoundError, match="split"):
        paper_common.load_split_pairs(root, "no_such_split", None, None, 0)


def test_network_rows_average_over_frames_as_the_checker_does(tiny_data, random_locc):
    """--frames F scores a network by the logit CollisionChecker(frames=F) computes, on the object
    set's own clouds."""
    from contactnet.data.objects import load_object_set
    from contactnet.geometry import Mesh
    from contactnet.models import load_model
    from contactnet.planning import CollisionChecker, CollisionWorld

    root = tiny_data / "procedural_tiny"
    objects = load_object_set(root / "objects")
    args = paper_fig6.parse_args(["--data-root", str(root), "--ckpt", f"locc={random_locc}", "--device", "cpu",
                                  "--frames", "1", "3"])
    assert [m.label for m in paper_common.method_grid(args) if m.family.startswith("net:")] == \
        ["net:locc", "net:locc frames=3"]
    factory = paper_common.CheckerFactory(objects, args, "cpu", progress=False)
    world = CollisionWorld(num_points=len(objects.points[0]))
    for i in range(len(objects)):
        world._register(objects.names[i], Mesh(objects.vertices[i], objects.faces[i]),
                        samples=(objects.points[i], objects.normals[i]))
    pairs = paper_common.load_split_pairs(root, "test_unknown", 64, None, 0)
    queries = (pairs.ids_a, pairs.ids_b, pairs.poses_a, pairs.poses_b)
    net = load_model(str(random_locc))
    for frames in (1, 3):
        want = CollisionChecker(world, "locc", net, frames=frames).pairwise(*queries).logit
        torch.testing.assert_close(factory.net_logits("locc", frames)(*queries), want, atol=1e-4, rtol=1e-4)


def test_scaled_pairs_are_the_same_configurations_at_every_scale(tiny_data):
    """Every scale draws the same configurations, scaled with the objects, so exact labels agree and
    a row's change across scales is what the scale does to the method (1.0 and 1.5 once shared a
    seed by truncation while 0.7 and 2.0 drew other pairs)."""
    from contactnet.data.dataset import load_manifest
    from contactnet.data.objects import load_object_set
    from contactnet.data.pairs import PairSpec

    root = tiny_data / "procedural_tiny"
    spec = load_manifest(root / "test_unknown")["spec"]
    objects = load_object_set(root / "objects")
    pair_spec = PairSpec(**{**spec["pairs"], "poses_per_pair": 8})
    args = paper_scale.parse_args(["--data-root", str(root), "--device", "cpu"])
    ids = sorted(spec["object_ids"])
    pairs = {s: paper_scale.scaled_pairs(paper_common.CheckerFactory(objects, args, "cpu", progress=False, scale=s),
                                         ids, pair_spec, 32, 0) for s in (0.7, 1.0, 1.5)}
    for s in (0.7, 1.5):
        assert torch.equal(pairs[s].ids_a, pairs[1.0].ids_a) and torch.equal(pairs[s].label, pairs[1.0].label)
        offset = {k: pairs[k].poses_b[:, :3] - pairs[k].poses_a[:, :3] for k in (s, 1.0)}  # A's place is not scaled
        torch.testing.assert_close(offset[s], s * offset[1.0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(pairs[s].poses_b[:, 3:], pairs[1.0].poses_b[:, 3:])
        # Clearances scale exactly; penetration depths come from a bisection to an absolute tolerance.
        torch.testing.assert_close(pairs[s].signed_distance, s * pairs[1.0].signed_distance, rtol=1e-4, atol=2e-4)


def test_mixed_scale_pairs_meet_a_scaled_copy(tiny_data, tmp_path, random_locc):
    """--mixed: A from the originals, B from copies scaled 2x (ids after the originals), labels those
    of the exact check on the joined set; the run writes its rows."""
    import numpy as np

    from contactnet.data.dataset import load_manifest
    from contactnet.data.objects import load_object_set
    from contactnet.data.pairs import PairSpec
    from contactnet.ops import mesh_collide

    root = tiny_data / "procedural_tiny"
    spec = load_manifest(root / "test_unknown")["spec"]
    objects = load_object_set(root / "objects")
    n = len(objects)
    joined = paper_common.joined_object_sets(objects, paper_common.scaled_object_set(objects, 2.0))
    assert len(joined) == 2 * n and joined.points.shape[0] == 2 * n
    assert np.allclose(joined.aabb[n:], 2 * objects.aabb) and np.allclose(joined.vertices[n], 2 * objects.vertices[0])
    args = paper_scale.parse_args(["--data-root", str(root), "--device", "cpu"])
    factory = paper_common.CheckerFactory(joined, args, "cpu", progress=False)
    pair_spec = PairSpec(**{**spec["pairs"], "poses_per_pair": 8})
    pairs = paper_scale.scaled_pairs(factory, sorted(spec["object_ids"]), pair_spec, 32, 0, b_offset=n)
    assert (pairs.ids_a < n).all() and (pairs.ids_b >= n).all() and 0 < int(pairs.label.sum()) < 32
    lib = factory.library()
    assert torch.equal(mesh_collide(lib, pairs.ids_a, pairs.ids_b, pairs.poses_a, pairs.poses_b).cpu(), pairs.label)
    out = paper_scale.main(["--mixed", "--data-root", str(root), "--scales", "2.0", "--max-pairs", "32",
                            "--max-objects", "3", "--poses-per-pair", "8", "--gjk-thresholds", "--iscd-points",
                            "--ckpt", f"locc={random_locc}", "--device", "cpu", "--repeats", "1",
                            "--out-dir", str(tmp_path / "mixed")])
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {r["family"] for r in rows} == {"net:locc", "exact"} and all(r["balanced_acc"] == 1 for r in rows
                                                                          if r["family"] == "exact")
