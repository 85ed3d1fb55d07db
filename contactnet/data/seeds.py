"""Seeds derived from a base seed and keys (names or indices), so every generated item is a pure
function of (config, its own key) and does not shift when other items are added or removed."""

import zlib

import numpy as np


def derive_seed(base: int, *keys: int | str) -> int:
    parts = [int(base)] + [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in keys]
    return int(np.random.SeedSequence(parts).generate_state(1)[0])
