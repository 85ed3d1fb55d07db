"""Preallocated per-environment obstacle slots (cuRobo's object cache) for one kind of sphere-query
obstacle: what it is (an id into the kind's geometry store), its shape parameters, pose and enable
flag, written in place so captured graphs stay valid.

    ids     (E, N) int64
    params  (E, N, P) world dtype (P = 0 for kinds without per-slot parameters)
    pose    (E, N, 7) world dtype, [x, y, z, qw, qx, qy, qz], metres
    enabled (E, N) bool
Empty slots are disabled, id 0, zero parameters and the identity pose, so computing them (and
masking the result) is always safe.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["SlotTable"]


class SlotTable:
    def __init__(self, kind: str, num_envs: int, capacity: int, num_params: int, dtype: torch.dtype,
                 device: torch.device):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"cache[{kind!r}]: expected an int >= 1 slots per environment, got {capacity!r}")
        self.kind, self.capacity = kind, capacity
        self.ids = torch.zeros(num_envs, capacity, dtype=torch.int64, device=device)
        self.params = torch.zeros(num_envs, capacity, num_params, dtype=dtype, device=device)
        self.pose = torch.zeros(num_envs, capacity, 7, dtype=dtype, device=device)
        self.pose[..., 3] = 1
        self.enabled = torch.zeros(num_envs, capacity, dtype=torch.bool, device=device)
        self._used = np.zeros((num_envs, capacity), dtype=bool)

    def take(self, env: int) -> int:
        free = np.flatnonzero(~self._used[env])
        if free.size == 0:
            raise ValueError(f"env: environment {env} has no free {self.kind} slot ({self.capacity}); make the "
                             f"world with a larger cache={{{self.kind!r}: ...}}")
        self._used[env, free[0]] = True
        return int(free[0])

    def free(self, env: int, slot: int) -> None:
        self.enabled[env, slot] = False
        self._used[env, slot] = False

    def count(self) -> int:
        return int(self._used.sum())

    def buffers(self) -> list[torch.Tensor]:
        return [self.ids, self.params, self.pose, self.enabled]

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.buffers())
