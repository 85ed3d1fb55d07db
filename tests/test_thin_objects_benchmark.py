"""benchmarks/thin_objects.py: its two mesh sets are what it says, and the whole command runs on a
tiny stand-in for robosuite's mesh folder (the real one is not in CI)."""

import json

import numpy as np
import pytest
import trimesh

from benchmarks.thin_objects import main, probe_meshes, squashed_meshes
from tests.baselines.test_paper_experiments import random_locc  # noqa: F401 (a fixture)


@pytest.fixture()
def source(tmp_path):
    """A stand-in for robosuite's folder: objects/ and one link kind, five meshes each."""
    for kind in ("objects", "robot_links"):
        (tmp_path / kind).mkdir()
        for i in range(5):
            mesh = trimesh.creation.box((0.05 + 0.01 * i, 0.04, 0.03)) if i % 2 else trimesh.creation.icosphere(2, 0.03)
            mesh.export(tmp_path / kind / f"m{i}.ply")
    return tmp_path


def test_squashed_meshes_are_sheets_and_sticks(source, tmp_path):
    squashed_meshes(source, tmp_path / "out", count=8)
    for kind, thin_sides in (("sheets", 1), ("sticks", 2)):
        files = sorted((tmp_path / "out" / kind).glob("*.ply"))
        assert len(files) == 4
        for path in files:
            extent = np.sort(trimesh.load(path, force="mesh").extents)
            assert 0.08 - 1e-9 <= extent[2] <= 0.3 + 1e-9
            ratios = extent[:thin_sides] / extent[2]
            assert ((ratios >= 0.01 - 1e-6) & (ratios <= 0.033 + 1e-6)).all(), (path.name, ratios)


def test_probe_meshes_hold_the_cases_it_names(source, tmp_path):
    probe_meshes(source, tmp_path / "out")
    odd = {p.stem: trimesh.load(p, force="mesh", process=False) for p in (tmp_path / "out" / "odd").glob("*.ply")}
    assert set(odd) == {"open_holes", "thin_plate", "flat_quad", "degenerate_box", "dense_ellipsoid", "tiny_screw",
                        "long_rod"}
    assert odd["flat_quad"].extents[2] == 0 and not odd["open_holes"].is_watertight
    assert len(odd["dense_ellipsoid"].faces) > 300_000
    assert len(list((tmp_path / "out" / "plain").glob("*.ply"))) == 4


def test_the_command_builds_labels_and_scores(source, tmp_path, random_locc):
    out = tmp_path / "result.json"
    main(["--ckpt", f"tiny={random_locc}", "--robosuite", str(source), "--data-dir", str(tmp_path / "data"),
          "--workers", "1", "--pairs", "4", "--poses", "4", "--out", str(out),
          # 16 pairs of stand-in shapes per split: any positive rate
          *(f"--override=data.positive_rate_band.{p}=[0,1]" for p in ("uniform", "boundary", "nested"))])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["net"], r["set"]) for r in rows] == [("tiny", "squashed"), ("tiny", "probe")]
    assert all(r[s].count("/") == 1 for r in rows for s in ("test_unknown", "boundary_unknown", "nested_unknown"))
