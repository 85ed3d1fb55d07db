"""Derived seeds: keys that int() would truncate are refused rather than folded together."""

import pytest

from contactnet.data.seeds import derive_rng, derive_seed


def test_non_integral_float_keys_are_refused_and_integral_ones_are_ints():
    with pytest.raises(TypeError, match="1.5"):
        derive_seed(0, "scale", 1.5)
    with pytest.raises(TypeError, match="0.7"):
        derive_rng(0, 0.7)
    assert derive_seed(0, "scale", 2.0) == derive_seed(0, "scale", 2)
    assert derive_seed(0, "scale", "1.5") != derive_seed(0, "scale", "1")
