"""The fused containment test (`dipoles_enclose`) against its reference (the winding numbers of
`dipole_winding`): probes inside, outside and on a sphere's surface, queries of one object and of
several, no probes; float32 and float64; argument errors; opcheck."""

import pytest
import torch

from contactnet.geometry.winding import surface_dipoles
from contactnet.ops.dipole_winding import dipoles_enclose
from contactnet.ops.reference.dipole_winding import dipoles_enclose as reference
from tests.geometry.test_winding import _sphere


def _table(dtype):
    """Dipoles of two spheres (radius 1 and 0.3) and of a random cloud (no inside)."""
    clouds = [tuple(x[0] for x in _sphere(600, r)) for r in (1.0, 0.3)]
    g = torch.Generator().manual_seed(0)
    noise = (torch.rand(600, 3, generator=g, dtype=torch.float64) - 0.5, torch.randn(600, 3, generator=g,
                                                                                      dtype=torch.float64))
    dipoles = [surface_dipoles(p.double(), torch.nn.functional.normalize(n.double(), dim=-1))
               for p, n in [*clouds, noise]]
    return torch.stack(dipoles).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_the_winding_numbers(dtype):
    dipoles = _table(dtype)
    g = torch.Generator().manual_seed(1)
    q, p = 600, 16
    ids = torch.randint(3, (q,), generator=g)
    # Probes in a ball of radius 0.2-1.5 around the centre: all inside, all outside, and mixed.
    radius = 0.2 + 1.3 * torch.rand(q, 1, 1, generator=g, dtype=torch.float64)
    probes = (radius * torch.nn.functional.normalize(torch.randn(q, p, 3, generator=g, dtype=torch.float64), dim=-1)
              * torch.rand(q, p, 1, generator=g, dtype=torch.float64) ** 0.1).to(dtype)
    for inside in (0.5, 0.9):
        got = dipoles_enclose(dipoles, ids, probes, inside)
        assert torch.equal(got, reference(dipoles, ids, probes, inside))
    assert got.any() and not got.all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_first_probe_outside_decides(dtype):
    """A query whose probes are all inside but one, at each position in turn."""
    dipoles = _table(dtype)
    probes = torch.zeros(9, 8, 3, dtype=dtype)
    for q in range(8):
        probes[q, q] = torch.tensor([3.0, 0.0, 0.0])
    got = dipoles_enclose(dipoles, torch.zeros(9, dtype=torch.long), probes)
    assert torch.equal(got, torch.tensor([False] * 8 + [True]))


def test_no_probes_and_no_queries():
    dipoles = _table(torch.float32)
    assert dipoles_enclose(dipoles, torch.tensor([0, 2]), torch.zeros(2, 0, 3)).tolist() == [True, True]
    assert dipoles_enclose(dipoles, torch.zeros(0, dtype=torch.long), torch.zeros(0, 4, 3)).shape == (0,)


def test_bad_input_is_a_clear_error():
    dipoles = _table(torch.float32)
    probes = torch.zeros(2, 4, 3)
    with pytest.raises(ValueError, match=r"dipoles: expected shape \(N, N, 7\)"):
        dipoles_enclose(dipoles[..., :6].contiguous(), torch.tensor([0, 1]), probes)
    with pytest.raises(ValueError, match=r"ids: indices must lie in \[0, 3\)"):
        dipoles_enclose(dipoles, torch.tensor([0, 3]), probes)
    with pytest.raises(TypeError, match="probes has dtype torch.float64"):
        dipoles_enclose(dipoles, torch.tensor([0, 1]), probes.double())
    with pytest.raises(ValueError, match=r"probes: expected shape \(2, N, 3\)"):
        dipoles_enclose(dipoles, torch.tensor([0, 1]), probes[:1])


def test_opcheck():
    dipoles = _table(torch.float64)
    torch.library.opcheck(torch.ops.contactnet.dipoles_enclose.default,
                          (dipoles, torch.tensor([0, 1, 2]), torch.zeros(3, 4, 3, dtype=torch.float64), 0.5))
