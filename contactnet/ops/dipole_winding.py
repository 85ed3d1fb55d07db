"""Containment by the winding numbers of cloud dipoles, as one op: whether every probe point of a
query lies inside its object (`contactnet.geometry.winding.dipole_winding` >= a threshold).

The torch composition evaluates every probe against every dipole through (Q, P, S, 3) tensors; the
op stops a query at its first probe outside, so the pairs that are not contained (nearly all of
them) cost one probe each. Same winding numbers up to the order of the sum over dipoles. No
gradient (the answer is a boolean).
"""

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import as_index_tensor, check_float_tensor, check_index_values, check_same_device, \
    values_checked_here

load_extension()

_ops = torch.ops.contactnet

__all__ = ["dipoles_enclose"]


def dipoles_enclose(dipoles: torch.Tensor, ids, probes: torch.Tensor, inside: float = 0.5) -> torch.Tensor:
    """(Q,) bool: every probe of query q (probes (Q, P, 3), in object ids[q]'s frame) has a winding
    number >= `inside` with respect to that object's dipoles (N, S, 7) (`surface_dipoles`).
    ids (Q,) integer in [0, N). One float dtype, one device, contiguous."""
    check_float_tensor(dipoles, "dipoles", (None, None, 7))
    ids = as_index_tensor(ids, "ids", (None,), dipoles.device)
    check_float_tensor(probes, "probes", (ids.shape[0], None, 3))
    check_same_device(probes, "probes", dipoles, "dipoles")
    if probes.dtype != dipoles.dtype:
        raise TypeError(f"probes has dtype {probes.dtype} but dipoles has {dipoles.dtype}")
    if isinstance(inside, bool) or not isinstance(inside, (int, float)):
        raise TypeError(f"inside: expected a number, got {inside!r}")
    if values_checked_here(ids):
        check_index_values(ids, "ids", dipoles.shape[0])
    return _ops.dipoles_enclose(dipoles, ids, probes, float(inside))


@torch.library.register_fake("contactnet::dipoles_enclose")
def _(dipoles, ids, probes, inside):
    return ids.new_empty(ids.shape, dtype=torch.bool)
