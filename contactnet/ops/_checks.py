"""Argument checks for the op wrappers: clear Python exceptions that name the argument, and no
silent copies (a non-contiguous input is an error, not a hidden `.contiguous()`)."""

from collections.abc import Sequence

import torch

FLOAT_DTYPES = (torch.float32, torch.float64)


def check_float_tensor(x, name: str, shape: Sequence[int | None]) -> None:
    """Check that `x` is a contiguous float32/float64 tensor of `shape` (None = any size)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected dtype float32 or float64, got {x.dtype}")
    expected = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
    if x.dim() != len(shape) or any(s is not None and x.shape[i] != s for i, s in enumerate(shape)):
        raise ValueError(f"{name}: expected shape {expected}, got {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor (call .contiguous() first)")


def check_same_batch(tensors: dict[str, torch.Tensor]) -> None:
    """All tensors share device, dtype and leading (batch) size."""
    (first_name, first), *rest = tensors.items()
    for name, x in rest:
        if x.device != first.device:
            raise ValueError(
                f"{name} is on {x.device} but {first_name} is on {first.device}; "
                "expected one device"
            )
        if x.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but {first_name} has {first.dtype}")
        if x.shape[0] != first.shape[0]:
            raise ValueError(
                f"{name} has batch size {x.shape[0]} but {first_name} has {first.shape[0]}"
            )
