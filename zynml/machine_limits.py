"""What a call may ask of the machine: arrays checked against its memory before a run.

Why: numpy and IREE report a size no machine can hold in their own terms (a MemoryError
from `np.ascontiguousarray` of a broadcast view, IREE's RESOURCE_EXHAUSTED from the
allocator, an OverflowError for an integer beyond 64 bits), with no word of which input
or output asked for it. Checking the sizes first turns these into located ZynMLErrors
that name the array, its shape and what it needs.

    check_fits("output 'y'", (100000, 100000), np.float32, loc)
    # <string>:1:5: error: output 'y' (shape 100000x100000, float32) needs 37.3 GiB,
    # more than this machine's memory (15.6 GiB)
"""
from __future__ import annotations

import math
import os

import numpy as np

from .errors import SourceLocation, ZynMLError

__all__ = ["host_memory", "check_fits", "as_i64", "size_text"]


def host_memory() -> int | None:
    """Bytes of physical memory, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def size_text(nbytes: int) -> str:
    """1234567 -> '1.2 MiB' (binary units, as free(1) and the docs use)."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if nbytes < 1024 or unit == "EiB":
            return f"{nbytes} bytes" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def check_fits(what: str, shape, dtype, loc: SourceLocation | None,
               limit: int | None = None) -> None:
    """Raise a located ZynMLError when an array of `shape` and `dtype` is larger than the
    machine's memory (`limit`, default: host_memory()). Python integers: no overflow."""
    limit = host_memory() if limit is None else limit
    dims = [int(d) for d in shape]
    nbytes = math.prod(dims) * np.dtype(dtype).itemsize
    if limit is None or nbytes <= limit:
        return
    shape_text = "x".join(map(str, dims))
    raise ZynMLError(f"{what} (shape {shape_text}, {np.dtype(dtype).name}) needs "
                     f"{size_text(nbytes)}, more than this machine's memory "
                     f"({size_text(limit)})", loc)


def as_i64(name: str, value: int, loc: SourceLocation | None) -> np.ndarray:
    """A Python int as a 0-d int64 array; one beyond 64 bits is a located error."""
    try:
        return np.asarray(value, dtype=np.int64)
    except OverflowError:
        # str() of a huge int is slow and, past 4300 digits, refused: say its size
        shown = str(value) if value.bit_length() <= 256 else \
            f"an integer of {value.bit_length()} bits"
        raise ZynMLError(f"input '{name}' is {shown}, which does not fit in a 64-bit "
                         f"integer (i64 holds -2**63 to 2**63 - 1)", loc) from None
