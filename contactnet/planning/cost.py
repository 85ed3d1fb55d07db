"""Collision costs for trajectory optimisation, in cuRobo's shape (CHOMP's activation distance).

With the signed distance d (positive when separated, this project's convention) and an activation
distance eta > 0:

    cost(d) = 0                           d >= eta       (far: no cost, no gradient)
              (eta - d)^2 / (2 eta)       0 <= d < eta   (quadratic ramp inside eta)
              -d + eta / 2                d < 0          (linear in penetration depth)

This is cuRobo's `cost(d')` with its penetration d' = -d. cuRobo's documentation prints the
quadratic piece as (d' + eta)^2 / eta, but its kernels use 0.5 / eta, which is what makes the
pieces meet with equal value (eta / 2) and slope (-1) at d = 0; we use 0.5 / eta (C¹ everywhere).

The learned counterpart reads a collision logit l (> 0: colliding) and is smooth everywhere:
eta * softplus(l), ~0 far from collision and growing linearly with the logit inside it (the
smoothed max(0, l), scaled by eta so it has a distance's units like the exact cost).
"""

import torch
import torch.nn.functional as F

__all__ = ["collision_cost", "learned_collision_cost"]


def collision_cost(signed_distance: torch.Tensor, eta: float) -> torch.Tensor:
    """Elementwise cost of signed distances (metres) with activation distance eta (metres, > 0)."""
    if not eta > 0:
        raise ValueError(f"eta: expected an activation distance > 0, got {eta}")
    d = signed_distance
    ramp = (eta - d).clamp_min(0) ** 2 / (2 * eta)
    return torch.where(d < 0, eta / 2 - d, ramp)


def learned_collision_cost(logit: torch.Tensor, eta: float) -> torch.Tensor:
    """Elementwise smooth cost eta * softplus(logit) of collision logits."""
    if not eta > 0:
        raise ValueError(f"eta: expected an activation distance > 0, got {eta}")
    return eta * F.softplus(logit)
