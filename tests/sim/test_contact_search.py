"""The stepper's candidate searches over packed scenes: the compacted and the padded search find the
same pairs, never join two environments, and cover every pair brute force finds within the reach."""

import pytest
import torch

from contactnet.ops import ipc
from contactnet.sim import Stepper, scenes
from contactnet.sim.contact_search import search, search_padded


def pair_set(c: ipc.Candidates) -> set:
    fv, ee = c
    return ({("fv", *r) for r in fv.tolist() if r[0] >= 0}, {("ee", *r) for r in ee.tolist() if r[0] >= 0})


@pytest.fixture(scope="module")
def packed():
    # three environments of different sizes (padding) whose bodies are within reach of each other
    sim = Stepper([scenes.cube_stack(count=3), scenes.ring_on_peg(), scenes.cube_stack(count=2)], dt=0.01)
    return sim.packed


@pytest.mark.parametrize("swept", [False, True])
def test_padded_and_compacted_searches_find_the_same_pairs_within_one_environment(packed, swept):
    x0 = packed.positions(packed.q_init)
    x1 = x0 + torch.tensor([0.0, 0.0, -4e-3], dtype=x0.dtype) if swept else None
    reach = 2e-3
    compact = search(packed, x0, x1, reach)
    padded = search_padded(packed, x0, x1, reach, capacity=20000)
    assert not bool(padded.overflow)
    assert pair_set(compact) == pair_set(padded.candidates)
    assert compact.count > 0
    st = ipc.candidate_stencils(packed.faces, packed.edges, compact)
    env = packed.vertex_env[st]
    assert bool((env == env[:, :1]).all())  # every stencil's four vertices in one environment


def test_search_covers_every_pair_brute_force_finds_within_reach(packed):
    x = packed.positions(packed.q_init)
    reach = 2e-3
    found = pair_set(search(packed, x, None, reach))
    # brute force over face–vertex pairs of different collision groups in one environment
    fv = torch.cartesian_prod(torch.arange(x.shape[0]), torch.arange(packed.faces.shape[0]))
    g, env = packed.vertex_group, packed.vertex_env
    other = (g[fv[:, 0]] != g[packed.faces[fv[:, 1], 0]]) & (env[fv[:, 0]] == env[packed.faces[fv[:, 1], 0]])
    fv = fv[other]
    t = x[packed.faces[fv[:, 1]]]
    d2 = ipc.point_triangle_distance_squared(x[fv[:, 0]], t[:, 0].contiguous(), t[:, 1].contiguous(),
                                             t[:, 2].contiguous())
    near = {("fv", *r) for r in fv[d2 < reach**2].tolist()}
    assert near and near <= found[0]


def test_padded_search_reports_overflow(packed):
    x = packed.positions(packed.q_init)
    assert bool(search_padded(packed, x, None, 2e-3, capacity=1).overflow)
