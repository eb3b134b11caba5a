"""The device API's argument checks: a wrong shape, dtype or device is a DeviceAPIError
naming the operation and the argument, before anything is queued."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ZynMLError

__all__ = ["DeviceAPIError", "Arg", "FLOATS", "INTEGERS"]

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class DeviceAPIError(ZynMLError, ValueError):
    """A Device operation given an argument it cannot take."""


def fail(op: str, arg: str, problem: str) -> DeviceAPIError:
    return DeviceAPIError(f"Device.{op}: argument '{arg}' {problem}")


class Arg:
    """One buffer argument of operation `op`: its shape and dtype, checked on demand."""

    def __init__(self, op: str, name: str, value: Any, shape: tuple[int, ...],
                 dtype: np.dtype):
        self.op, self.name, self.value = op, name, value
        self.shape, self.dtype = shape, dtype

    @property
    def dtype_name(self) -> str:
        return "bfloat16" if "bfloat16" in str(self.dtype) else self.dtype.name

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def error(self, problem: str) -> DeviceAPIError:
        return fail(self.op, self.name, problem)

    def rank(self, *ranks: int) -> "Arg":
        if len(self.shape) not in ranks:
            wanted = " or ".join(str(r) for r in ranks)
            raise self.error(f"must have rank {wanted}, got shape {self.shape}")
        return self

    def floating(self) -> "Arg":
        if self.dtype_name not in FLOATS:
            raise self.error(f"must be a float buffer (f16, bf16, f32, f64), got "
                             f"{self.dtype_name}")
        return self

    def integer(self) -> "Arg":
        if self.dtype_name not in INTEGERS:
            raise self.error(f"must hold integer ids (u32, i32, i64, ...), got "
                             f"{self.dtype_name}")
        return self

    def same_dtype(self, other: "Arg") -> "Arg":
        if self.dtype_name != other.dtype_name:
            raise self.error(f"has dtype {self.dtype_name}, but '{other.name}' has "
                             f"{other.dtype_name}")
        return self

    def dim(self, axis: int, extent: int, what: str) -> "Arg":
        if self.shape[axis] != extent:
            raise self.error(f"has shape {self.shape}, but its axis {axis % len(self.shape)} "
                             f"must be {what} ({extent})")
        return self

    def shape_is(self, shape: tuple[int, ...], what: str) -> "Arg":
        if tuple(self.shape) != tuple(shape):
            raise self.error(f"has shape {self.shape}, but must have {what}'s shape "
                             f"{tuple(shape)}")
        return self


def check_size(op: str, name: str, given: Any, actual: int) -> None:
    """An explicit size argument of the spec (m, n_rows, ...), checked against the
    buffers; None means not given."""
    if given is None:
        return
    if isinstance(given, bool) or not isinstance(given, (int, np.integer)) or given < 0:
        raise fail(op, name, f"is a size, a non-negative integer, not {given!r}")
    if int(given) != actual:
        raise fail(op, name, f"is {given}, but the buffers give {actual}")
