"""Shared test fixtures: the devices to run on (CUDA tests skip, never fail, without a GPU) and one
tiny procedural dataset per test session."""

import os
from pathlib import Path

import pytest
import torch

CONF = Path(__file__).resolve().parents[1] / "conf"


def pytest_configure(config):
    # Under pytest-xdist (`make test` runs one worker per core) each worker gets its share of the
    # cores: a torch pool per worker the size of the machine would oversubscribe it.
    # The variable reaches the processes tests start (notebook kernels, DDP ranks, generation
    # workers), whose OpenMP threads would otherwise spin against the other workers'.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        share = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(share)
        torch.set_num_threads(share)


DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
        ],
    ),
]


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


# Accelerators only, for tests that compare a device with the CPU: without one they skip rather
# than pass by comparing the CPU with itself.
ACCELERATORS = DEVICES[1:]


@pytest.fixture(params=ACCELERATORS)
def accelerator(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """A data root holding `procedural_tiny/` (the `data=procedural_tiny` config), generated once per
    session and shared: tests read it (the partial views its objects render on first use are the
    only thing added to it). Tests of generation itself make their own (tests/data/test_generate.py)."""
    from hydra import compose, initialize_config_dir

    from contactnet.data.generate import generate

    root = tmp_path_factory.mktemp("data")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["data=procedural_tiny"])
    generate(cfg.data, root / "procedural_tiny", progress=False)
    return root
