"""`make gpu-check` (benchmarks/gpu_check.py): a clear skip without CUDA, and on a GPU machine that
lacks a peer package, skips that name it instead of failures."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_check

ROOT = Path(__file__).resolve().parents[1]


def test_dry_run_lists_every_step_and_runs_nothing(tmp_path, capsys):
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpu-check: dry run")
    for step in gpu_check.STEPS:
        assert f"  {step} " in out
    assert "benchmarks.triangle_distance --quick --device cuda" in out and "-m cuda" in out
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA this would run the whole check")
def test_without_cuda_it_skips_with_a_reason_and_exit_zero(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gpu-check: skipped: torch sees no CUDA device")
    assert not (tmp_path / "out").exists()


def test_bad_step_names_are_refused():
    with pytest.raises(SystemExit):
        gpu_check.main(["--dry-run", "--steps", "build,nonsense"])


def test_missing_packages_skip_and_our_own_modules_fail(tmp_path):
    """As gpu-check runs pytest: a missing third-party package (at import or when a test runs) is
    a skip naming it, also behind an ImportError raised from it; a missing module of ours stays an
    error."""
    (tmp_path / "test_peer_at_import.py").write_text("import no_such_peer_pkg\n\ndef test_a():\n    pass\n")
    (tmp_path / "test_peer_at_run.py").write_text("def test_b():\n    import no_such_peer_pkg.sub\n")
    (tmp_path / "test_peer_chained.py").write_text(  # an extra's ImportError raised from the missing module
        "def test_e():\n    try:\n        import no_such_peer_pkg\n    except ImportError as e:\n"
        "        raise ImportError('needs the extra') from e\n")
    (tmp_path / "test_ours.py").write_text("def test_c():\n    import contactnet.no_such_module\n")
    (tmp_path / "test_plain.py").write_text("def test_d():\n    assert True\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "benchmarks.gpu_check",
                           "--rootdir", str(tmp_path), "-c", "/dev/null", "-rs", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.stdout.count("needs 'no_such_peer_pkg") == 3, done.stdout
    assert "1 failed, 1 passed, 3 skipped" in done.stdout, done.stdout
    assert gpu_check.missing_module("ModuleNotFoundError: No module named 'fcl'") == "fcl"
    assert gpu_check.missing_module("ModuleNotFoundError: No module named 'contactnet._C'") is None
