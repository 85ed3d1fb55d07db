"""Pure-torch reference of `contactnet.ops.dipoles_enclose` (any dtype and device)."""

import torch

from contactnet.geometry.winding import dipole_winding


def dipoles_enclose(dipoles: torch.Tensor, ids: torch.Tensor, probes: torch.Tensor, inside: float = 0.5) -> torch.Tensor:
    """(Q,) bool: every probe's winding number w.r.t. its object's dipoles is >= inside (true
    without probes)."""
    if probes.shape[1] == 0:
        return torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
    return dipole_winding(dipoles[ids], probes).amin(-1) >= inside
