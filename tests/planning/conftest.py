"""Planning test fixtures. Tests run single-threaded: the kernels and tiny nets here are far faster
on one thread than with oversubscribed threads on a shared machine."""

import pytest
import torch

from tests.planning.scenes import fit_tiny_net, make_world


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def world():
    return make_world()


@pytest.fixture(scope="module")
def world64():
    return make_world(dtype=torch.float64)


@pytest.fixture(scope="module")
def trained(world):
    torch.set_num_threads(1)
    return fit_tiny_net(world, "locc", steps=120)
