"""robosuite's collision meshes as a mesh folder, tested on a fake wheel written here (no network);
one test reads the real wheel when one is on this machine."""

import hashlib
import json
import os
import subprocess
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import trimesh
from hydra import compose, initialize_config_dir

from contactnet.data import robosuite_meshes as rs
from contactnet.data.generate import split_objects
from contactnet.data.mesh_folder import load_mesh_folder
from contactnet.data.objects import ObjectSetSpec, build_object_set, load_object_set

ROOT = Path(__file__).resolve().parents[2]
ASSETS = rs.ASSETS

OBJECT_XML = """<mujoco model="box">
  <asset><mesh file="meshes/box.stl" name="box_mesh" scale="0.5 0.5 0.5"/></asset>
  <worldbody><body><body name="object">
    <geom mesh="box_mesh" type="mesh" group="0"/>
  </body></body></worldbody>
</mujoco>"""
# The same mesh, visual only: it must not hide the collision use above.
OBJECT_VISUAL_XML = OBJECT_XML.replace('group="0"', 'contype="0" conaffinity="0" group="1"')
GHOST_XML = """<mujoco model="ghost">
  <asset><mesh file="meshes/ghost.obj" name="ghost_mesh"/></asset>
  <worldbody><body name="object"><geom mesh="ghost_mesh" type="mesh" contype="0" conaffinity="0"/></body></worldbody>
</mujoco>"""
# Default classes, compiler meshdir, childclass, a millimetre file with scale 0.001 and its mirror.
ROBOT_XML = """<mujoco model="arm">
  <compiler angle="radian" meshdir="meshes/"/>
  <default>
    <default class="visual"><geom contype="0" conaffinity="0" group="1" type="mesh"/></default>
    <default class="collision"><geom group="0" type="mesh"/></default>
  </default>
  <asset>
    <mesh name="link0" file="link0.stl"/>
    <mesh name="link0_vis" file="link0_vis.obj"/>
    <mesh name="link1" file="link1_mm.stl" scale="0.001 0.001 0.001"/>
    <mesh name="link1_left" file="link1_mm.stl" scale="0.001 -0.001 0.001"/>
  </asset>
  <worldbody>
    <body name="base">
      <geom mesh="link0_vis" class="visual"/>
      <geom mesh="link0" class="collision"/>
      <body name="l1" childclass="collision">
        <geom mesh="link1"/>
        <geom mesh="link1_left"/>
        <geom type="box" size="0.1 0.1 0.1"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""
GRIPPER_XML = """<mujoco model="hand">
  <asset>
    <mesh name="palm" file="meshes/hand/palm.stl"/>
    <mesh name="finger" file="meshes/hand/finger.msh"/>
  </asset>
  <worldbody><body name="hand">
    <geom mesh="palm" type="mesh"/>
    <body name="finger"><geom mesh="finger" type="mesh"/></body>
  </body></worldbody>
</mujoco>"""

EXPECTED = {  # written file -> extent in metres
    "objects/box.ply": 0.05,
    "robot_links/arm-link0.ply": 0.2,
    "robot_links/arm-link1.ply": 0.3,  # 300 mm x 0.001
    "gripper_links/hand-finger.ply": 0.02,
    "gripper_links/hand-palm.ply": 0.08,
}


def _box(extent) -> trimesh.Trimesh:
    return trimesh.creation.box([extent] * 3)


def _export(mesh: trimesh.Trimesh, suffix: str) -> bytes:
    return mesh.export(file_type=suffix)


def _msh(mesh: trimesh.Trimesh) -> bytes:
    """MuJoCo's legacy binary mesh, with normals and no texture coordinates."""
    v = np.asarray(mesh.vertices, "<f4")
    n = np.asarray(mesh.vertex_normals, "<f4")
    f = np.asarray(mesh.faces, "<i4")
    return np.array([len(v), len(n), 0, len(f)], "<i4").tobytes() + v.tobytes() + n.tobytes() + f.tobytes()


def fake_wheel(path: Path, version: str = "9.9.9") -> Path:
    """A wheel with robosuite's asset layout: 5 collision meshes, 1 visual-only, 1 unused."""
    path = path / f"robosuite-{version}-py3-none-any.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    files = {
        "objects/box.xml": OBJECT_XML,
        "objects/box-visual.xml": OBJECT_VISUAL_XML,
        "objects/ghost.xml": GHOST_XML,
        "objects/meshes/box.stl": _export(_box(0.1), "stl"),
        "objects/meshes/ghost.obj": _export(_box(0.1), "obj"),
        "objects/meshes/unused.obj": _export(_box(0.1), "obj"),
        "robots/arm/robot.xml": ROBOT_XML,
        "robots/arm/meshes/link0.stl": _export(_box(0.2), "stl"),
        "robots/arm/meshes/link0_vis.obj": _export(_box(0.2), "obj"),
        "robots/arm/meshes/link1_mm.stl": _export(_box(300.0), "stl"),
        "grippers/hand.xml": GRIPPER_XML,
        "grippers/meshes/hand/palm.stl": _export(_box(0.08), "stl"),
        "grippers/meshes/hand/finger.msh": _msh(_box(0.02)),
    }
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("robosuite/__init__.py", "")
        for name, data in files.items():
            archive.writestr(ASSETS + name, data)
    return path


@pytest.fixture
def wheel(tmp_path) -> Path:
    return fake_wheel(tmp_path / "wheels")


def _reasons(manifest) -> dict[str, str]:
    return {s["source"].removeprefix(ASSETS): s["reason"] for s in manifest["skipped"]}


def test_extract_fake_wheel(tmp_path, wheel):
    out = tmp_path / "meshes"
    manifest = rs.extract(out, wheel=wheel)
    written = {e["path"]: e for e in manifest["written"]}
    assert set(written) == set(EXPECTED)
    assert manifest["counts"] == {"objects": 1, "robot_links": 2, "gripper_links": 2}
    assert manifest["wheel"] == {"name": wheel.name, "version": "9.9.9",
                                 "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
    for path, extent in EXPECTED.items():  # the MJCF scale is applied: metres
        mesh = trimesh.load(out / path, process=False)
        np.testing.assert_allclose(np.ptp(mesh.vertices, axis=0), extent, rtol=1e-6)
        assert len(mesh.vertices) == 8 and mesh.is_watertight  # STL corners merged
        assert written[path]["sha256"] == hashlib.sha256((out / path).read_bytes()).hexdigest()
    assert written["robot_links/arm-link1.ply"]["scale"] == [0.001] * 3  # the mirror is not written again
    reasons = _reasons(manifest)
    assert reasons["objects/meshes/ghost.obj"].startswith("visual-only")
    assert reasons["robots/arm/meshes/link0_vis.obj"].startswith("visual-only")
    assert reasons["objects/meshes/unused.obj"].startswith("not used")
    assert "objects/meshes/box.stl" not in reasons
    assert json.loads((out / rs.MANIFEST).read_text()) == manifest
    assert not list(tmp_path.glob(".meshes.staging-*"))


def test_object_set_families_are_kinds(tmp_path, wheel):
    out = tmp_path / "meshes"
    rs.extract(out, wheel=wheel)
    meshes, folder = load_mesh_folder(out)
    assert folder.layout == "files" and not folder.skipped and len(meshes) == len(EXPECTED)
    build_object_set(ObjectSetSpec(source=str(out), num_points=64), tmp_path / "objects", progress=False)
    objects = load_object_set(tmp_path / "objects")
    n = len(EXPECTED)  # then n inner copies (the nested splits' small objects)
    assert objects.inner_of == [None] * n + list(range(n))
    assert sorted(objects.families[:n]) == sorted(p.split("/")[0] for p in EXPECTED)
    ids = split_objects(objects, "all", used=["unknown"])
    assert ids == {"known": [], "unknown": list(range(n)), "known_inner": [], "unknown_inner": list(range(n, 2 * n))}


def test_split_objects_only_used_groups_must_be_non_empty():
    objects = SimpleNamespace(families=["objects", "robot_links", "robot_links"], inner_of=[None] * 3)
    assert split_objects(objects, ["objects"]) == {"known": [1, 2], "unknown": [0], "known_inner": [],
                                                   "unknown_inner": []}
    with pytest.raises(ValueError, match="the known object set"):
        split_objects(objects, "all")
    with pytest.raises(ValueError, match="the unknown object set"):
        split_objects(objects, [], used=["known", "unknown"])
    with pytest.raises(ValueError, match="are not in the object set"):
        split_objects(objects, ["gripper_links"], used=["unknown"])


def test_msh_reader():
    box = _box(0.02)
    vertices, faces = rs.read_msh(_msh(box))
    np.testing.assert_allclose(vertices, box.vertices, atol=1e-7)
    np.testing.assert_array_equal(faces, box.faces)
    with pytest.raises(ValueError, match="implies"):
        rs.read_msh(_msh(box)[:-4])
    with pytest.raises(ValueError, match="header"):
        rs.read_msh(b"\0" * 8)


def test_rerun_does_nothing_and_refuses_other_requests(tmp_path, wheel):
    out = tmp_path / "meshes"
    first = rs.extract(out, wheel=wheel)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert rs.extract(out, wheel=wheel) == first
    assert rs.extract(out) == first  # no wheel needed to see the set is there
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == stamps
    with pytest.raises(rs.RobosuiteMeshError, match="max_meshes None, requested 2"):
        rs.extract(out, wheel=wheel, max_meshes=2)
    with pytest.raises(rs.RobosuiteMeshError, match="robosuite 9.9.9, requested 1.5.1"):
        rs.extract(out, version="1.5.1")
    other = fake_wheel(tmp_path / "other", version="9.9.9")
    with zipfile.ZipFile(other, "a") as archive:
        archive.writestr("robosuite/extra.py", "")
    with pytest.raises(rs.RobosuiteMeshError, match="differs"):
        rs.extract(out, wheel=other)


def test_max_meshes_takes_kinds_in_turn(tmp_path, wheel):
    manifest = rs.extract(tmp_path / "ci", wheel=wheel, max_meshes=3)
    assert manifest["counts"] == {"objects": 1, "robot_links": 1, "gripper_links": 1}
    assert sum("beyond --max-meshes 3" in s["reason"] for s in manifest["skipped"]) == 2
    with pytest.raises(ValueError, match="max_meshes"):
        rs.extract(tmp_path / "none", wheel=wheel, max_meshes=0)


def test_cached_wheel_is_used_and_kept(tmp_path, wheel):
    out = tmp_path / "meshes"
    cached = fake_wheel(out / rs.CACHE, version="9.9.9")
    manifest = rs.extract(out, version="9.9.9", download=False)
    assert manifest["wheel"]["name"] == cached.name and cached.is_file()
    assert set(p.name for p in out.iterdir()) == {rs.CACHE, rs.MANIFEST, "objects", "robot_links", "gripper_links"}


def test_interrupted_run_leaves_no_set_and_resumes(tmp_path, wheel, monkeypatch):
    out = tmp_path / "meshes"
    fake_wheel(out / rs.CACHE, version="9.9.9")
    real_write, calls = rs._write_mesh, []

    def crash(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_write(*args)

    monkeypatch.setattr(rs, "_write_mesh", crash)
    with pytest.raises(KeyboardInterrupt):
        rs.extract(out, version="9.9.9", download=False)
    assert [p.name for p in out.iterdir()] == [rs.CACHE]  # the cache is kept, nothing else
    assert not list(tmp_path.glob(".meshes.staging-*"))
    monkeypatch.setattr(rs, "_write_mesh", real_write)
    assert rs.extract(out, version="9.9.9", download=False)["counts"]["robot_links"] == 2


def test_broken_mesh_is_skipped_with_its_reason(tmp_path, wheel):
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr(ASSETS + "grippers/broken.xml", GRIPPER_XML.replace('"hand"', '"broken"')
                         .replace("meshes/hand/palm.stl", "meshes/broken/palm.stl")
                         .replace("meshes/hand/finger.msh", "meshes/broken/finger.msh"))
        archive.writestr(ASSETS + "grippers/meshes/broken/palm.stl", b"solid nothing\nendsolid\n")
        archive.writestr(ASSETS + "grippers/meshes/broken/finger.msh", b"\1\0\0\0" * 3)
    manifest = rs.extract(tmp_path / "meshes", wheel=wheel)
    reasons = _reasons(manifest)
    assert "16-byte header" in reasons["grippers/meshes/broken/finger.msh"]
    assert "grippers/meshes/broken/palm.stl" in reasons
    assert manifest["counts"]["gripper_links"] == 2


@pytest.mark.parametrize("case", ["missing", "not_a_zip", "no_assets", "badly_named"])
def test_unusable_wheel_is_a_clear_error(tmp_path, case):
    path = tmp_path / "robosuite-1.0.0-py3-none-any.whl"
    if case == "not_a_zip":
        path.write_text("not a zip")
    elif case == "no_assets":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("robosuite/__init__.py", "")
    elif case == "badly_named":
        path = fake_wheel(tmp_path).rename(tmp_path / "thing.whl")
    match = {"missing": "does not exist", "not_a_zip": "cannot read", "no_assets": "no MJCF model",
             "badly_named": "not named like a robosuite wheel"}[case]
    with pytest.raises(rs.RobosuiteMeshError, match=match):
        rs.extract(tmp_path / "out", wheel=path)
    assert not (tmp_path / "out").exists()


def test_no_wheel_without_download(tmp_path):
    with pytest.raises(rs.RobosuiteMeshError, match="downloads are off"):
        rs.extract(tmp_path / "out", download=False)


@pytest.mark.parametrize("stderr, hint", [
    ("ERROR: Could not find a version that satisfies the requirement robosuite==1.5.1", "no network access"),
    ("/usr/bin/python: No module named pip", "pip is not installed"),
])
def test_pip_failure_is_a_clear_error(tmp_path, monkeypatch, stderr, hint):
    def fake_run(command, **kwargs):
        assert command[1:4] == ["-m", "pip", "download"] and "--no-deps" in command
        return subprocess.CompletedProcess(command, 1, "", stderr)

    monkeypatch.setattr(rs.subprocess, "run", fake_run)
    with pytest.raises(rs.RobosuiteMeshError, match=hint) as error:
        rs.extract(tmp_path / "out")
    assert "--wheel" in str(error.value) and rs.WHEEL_ENV in str(error.value)
    assert not list((tmp_path / "out" / rs.CACHE).glob(".pip-*"))  # its scratch folder is gone


def test_pip_download_lands_in_the_cache(tmp_path, monkeypatch):
    def fake_run(command, **kwargs):
        fake_wheel(Path(command[command.index("--dest") + 1]), version=rs.ROBOSUITE_VERSION)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(rs.subprocess, "run", fake_run)
    manifest = rs.extract(tmp_path / "out")
    assert manifest["wheel"]["version"] == rs.ROBOSUITE_VERSION
    assert (tmp_path / "out" / rs.CACHE / f"robosuite-{rs.ROBOSUITE_VERSION}-py3-none-any.whl").is_file()


def test_cli(tmp_path, wheel, capsys):
    rs.main(["--out", str(tmp_path / "m"), "--wheel", str(wheel), "--max-meshes", "2"])
    assert "from robosuite-9.9.9-py3-none-any.whl" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="error: .*does not exist"):
        rs.main(["--out", str(tmp_path / "n"), "--wheel", str(tmp_path / "absent.whl")])


@pytest.mark.parametrize("entry", ["generate", "eval"])
def test_config_composes(tmp_path, entry):
    # paths.data_dir defaults to <cwd>/data, which only a Hydra run (not compose) can resolve
    overrides = ["data=robosuite_real", f"paths.data_dir={tmp_path}"]
    overrides += ["ckpt_path=x.ckpt"] if entry == "eval" else []
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(entry, overrides=overrides)
    assert cfg.data.objects.source == f"{tmp_path}/meshes/robosuite"
    assert cfg.data.unknown_families == "all"
    assert {s.objects for s in cfg.data.splits.values()} == {"unknown"}
    assert {name: s.placement for name, s in cfg.data.splits.items()} == {
        "test_unknown": "uniform", "boundary_unknown": "boundary", "nested_unknown": "nested"}
    if entry == "eval":
        assert cfg.data_root == f"{tmp_path}/robosuite_real"
    ObjectSetSpec(**{k: v for k, v in cfg.data.objects.items() if k != "_target_"})  # every key is a field


def _real_wheel() -> tuple[Path | None, str]:
    """(a robosuite wheel on this machine, or None with the reason)."""
    if os.environ.get(rs.WHEEL_ENV):
        path = Path(os.environ[rs.WHEEL_ENV])
        return (path, "") if path.is_file() else (None, f"{rs.WHEEL_ENV}={path} is not a file")
    cached = sorted((ROOT / "data" / "meshes" / "robosuite" / rs.CACHE).glob("robosuite-*.whl"))
    if cached:
        return cached[-1], ""
    return None, (f"no robosuite wheel here: set {rs.WHEEL_ENV} or run "
                  "python -m contactnet.data.robosuite_meshes --out data/meshes/robosuite")


@pytest.mark.skipif(_real_wheel()[0] is None, reason=_real_wheel()[1])
def test_real_wheel(tmp_path):
    manifest = rs.extract(tmp_path / "meshes", wheel=_real_wheel()[0], max_meshes=4)
    assert sum(manifest["counts"].values()) == 4 and all(manifest["counts"].values())
    build_object_set(ObjectSetSpec(source=str(tmp_path / "meshes"), num_points=128), tmp_path / "objects",
                     progress=False)
    objects = load_object_set(tmp_path / "objects")
    assert set(objects.families) == set(rs.KINDS) and len(objects) == 8  # 4 meshes and their inner copies
    extents = np.ptp(objects.aabb, axis=1).max(1)
    assert ((extents > 0.005) & (extents < 2.0)).all()  # metres
