"""Shared test fixtures: the devices to run on (CUDA tests skip, never fail, without a GPU)."""

import pytest
import torch

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
