"""Seeds derived from a base seed and keys (names or indices), so every generated item is a pure
function of (config, its own key) and does not shift when other items are added or removed.

`derive_seed` gives a 32-bit seed (what torch's CPU generator keeps of any seed): right for a
bounded number of keys (objects, shards, splits), and fixed forever, since stored datasets depend
on it. Keys without a bound, such as every (epoch, item) of training, use `derive_rng`: among 10⁵
keys two 32-bit seeds coincide about once (the birthday bound), so there the keys seed a numpy
generator directly (SeedSequence entropy, 128-bit state) and never pass through 32 bits.
"""

import zlib

import numpy as np


def _entropy(base: int, keys: tuple[int | str, ...]) -> list[int]:
    for k in keys:  # int() would truncate 1.5 to 1: two keys, one stream
        if isinstance(k, float) and not k.is_integer():
            raise TypeError(f"keys: expected ints or strings, got the float {k!r} (pass e.g. f'{k:g}')")
    return [int(base)] + [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in keys]


def derive_seed(base: int, *keys: int | str) -> int:
    return int(np.random.SeedSequence(_entropy(base, keys)).generate_state(1)[0])


def derive_rng(base: int, *keys: int | str) -> np.random.Generator:
    """A generator whose whole state comes from (base, keys): distinct keys, distinct streams."""
    return np.random.default_rng(np.random.SeedSequence(_entropy(base, keys)))
