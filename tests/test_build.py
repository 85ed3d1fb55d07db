"""Build hygiene: unique object stems, every .cu compiles with nvcc, light `import contactnet`."""

import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from torch.utils.cpp_extension import include_paths

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "csrc"


def test_object_file_stems_are_unique():
    """Sources compiled into one extension must not produce clashing object files."""
    stems = [p.stem for p in CSRC.rglob("*") if p.suffix in (".cpp", ".cu")]
    assert len(stems) == len(set(stems)), sorted(s for s in stems if stems.count(s) > 1)


def test_every_op_folder_has_cpu_and_cuda_sources():
    """Device ops (those with shared `<op>_kernels.h` math) ship both; host-only builders
    (the BVH, built once on the CPU and moved with the library) ship a CPU file only."""
    for folder in CSRC.iterdir():
        if folder.is_dir() and folder.name != "common":
            assert (folder / f"{folder.name}_cpu.cpp").exists(), folder
            if (folder / f"{folder.name}_kernels.h").exists():
                assert (folder / f"{folder.name}_cuda.cu").exists(), folder


def _nvcc_compile(cu: Path, out_dir: Path) -> tuple[Path, int, str]:
    # To unoptimised PTX: nvcc's front end checks every line, host and device (a host function
    # called from device code, a template that does not instantiate), in a sixth of the time of
    # an optimised object file. What that adds (the optimiser, ptxas, g++ on the host side) is
    # what `make gpu-check` builds on a GPU machine.
    cmd = [
        "nvcc", "-std=c++20", "-ptx", "-Xcicc", "-O0", str(cu), "-o", str(out_dir / (cu.stem + ".ptx")),
        f"-I{CSRC}", f"-I{sysconfig.get_paths()['include']}",
        *[f"-I{p}" for p in include_paths()],
        "--expt-relaxed-constexpr", "--fmad=false", "-arch=sm_90",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
        "-Xcudafe", "--diag_suppress=20012",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return cu, proc.returncode, proc.stderr[-4000:]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_cuda_sources_compile(tmp_path):
    """The CPU torch cannot link CUDA code, but nvcc can still compile every kernel file, so CUDA
    code cannot rot unseen on machines without a GPU."""
    sources = sorted(CSRC.rglob("*.cu"))
    assert sources
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda cu: _nvcc_compile(cu, tmp_path), sources))
    failures = [f"{cu.relative_to(ROOT)}:\n{err}" for cu, rc, err in results if rc != 0]
    assert not failures, "\n\n".join(failures)


def test_import_needs_only_torch_and_numpy():
    """`import contactnet` must not pull heavy optional stacks (they are imported where used)."""
    heavy = ["open3d", "wandb", "lightning", "pytorch_lightning", "hydra", "trimesh", "warp", "fcl"]
    code = (
        "import sys, contactnet, contactnet.ops\n"
        f"loaded = [m for m in {heavy!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_missing_extension_error_says_how_to_build(tmp_path):
    """Without contactnet._C the import fails with an ImportError that names the fix."""
    pkg = tmp_path / "contactnet"
    shutil.copytree(ROOT / "contactnet", pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    code = (
        "try:\n    import contactnet\nexcept ImportError as e:\n    print(e)\n"
        "else:\n    raise SystemExit('imported without _C')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = [{str(tmp_path)!r}] + "
         f"{[p for p in sys.path if 'site-packages' in p]!r}\n" + code],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "contactnet._C" in out.stdout and "make build" in out.stdout


def test_set_up_makes_the_chosen_stack_importable():
    """`make` set-up (the test extra, which pulls in the pointcloud and wandb extras) must leave every
    dependency importable, open3d included (it needs the system libusb, which the set-up installs)."""
    code = "import open3d, wandb, lightning, hydra, torchmetrics, trimesh, warp, fcl, coal, ipctk, klampt, mujoco"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
