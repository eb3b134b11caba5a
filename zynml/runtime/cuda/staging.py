"""Page-locked ("pinned") host memory for copies that must not hold the calling thread.

A copy between pageable host memory and a GPU goes through the driver's own staging
buffer: the calling thread is held for the whole copy (about 7 GB/s), and threads
copying to several GPUs at once contend in the driver (Session 18, four H100s: four
threads' 2.5 MB uploads took 1.07 ms together, one alone 0.36 ms). A copy from or to
page-locked memory is a DMA queued on the stream, which the call does not wait for; the
host pays only its own memcpy into or out of the staging buffer, which numpy does
without the GIL, so several threads' memcpys run in parallel.
"""
from __future__ import annotations

import ctypes
import threading
import weakref

import numpy as np

from .driver import CudaError, _driver, check

__all__ = ["PinnedArena"]

# cuMemHostAlloc's flag for memory every context's copies may use (the copies of one
# call go to several GPUs)
_PORTABLE = 0x01


class PinnedArena:
    """One page-locked host buffer, grown on demand and kept, handed out in aligned
    regions. One user at a time (`lock`): a region stays read or written by queued copies
    until its user has waited for them, so the user holds the lock until then and
    `reset` starts the next user's regions from the beginning."""

    ALIGN = 256  # as the GPU's allocations: a region's copies start at aligned addresses

    def __init__(self):
        self.lock = threading.Lock()
        self._memory: ctypes.Array | None = None
        self._used = 0

    @property
    def capacity(self) -> int:
        return 0 if self._memory is None else len(self._memory)

    def reset(self, nbytes: int) -> None:
        """Room for `nbytes` of regions (their alignment included), the earlier regions
        forgotten. Growing frees the old buffer: the caller has waited for its copies.
        The current context allocates it (it must be some GPU's)."""
        self._used = 0
        nbytes += self.ALIGN  # the first region's alignment, whatever the base's
        if nbytes <= self.capacity:
            return
        self._memory = None  # freed first: two large buffers at once may not fit
        size = 1 << (nbytes - 1).bit_length()  # a power of two: few regrowths
        driver = _driver()
        try:
            ptr = int(check(driver.cuMemHostAlloc(size, _PORTABLE), "cuMemHostAlloc"))
        except CudaError as err:
            raise CudaError(f"cannot page-lock {size} bytes of host memory for staging "
                            f"copies: {err}") from None
        memory = (ctypes.c_byte * size).from_address(ptr)
        weakref.finalize(memory, driver.cuMemFreeHost, ptr)
        self._memory = memory

    def take(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The next region, as a `dtype` array of `shape` (after `reset`)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        base = 0 if self._memory is None else ctypes.addressof(self._memory)
        start = -(-(base + self._used) // self.ALIGN) * self.ALIGN - base
        if self._memory is None or start + nbytes > self.capacity:
            raise ValueError(f"internal: a staging region of {nbytes} bytes at {start} "
                             f"exceeds the {self.capacity} bytes reserved")
        self._used = start + nbytes
        flat = np.frombuffer(self._memory, np.uint8, nbytes, start)
        return flat.view(dtype).reshape(shape)

    @classmethod
    def room(cls, arrays: list[tuple[np.dtype, tuple[int, ...]]]) -> int:
        """The bytes `reset` needs for regions of these (dtype, shape)s in turn."""
        used = 0
        for dtype, shape in arrays:
            used = -(-used // cls.ALIGN) * cls.ALIGN
            used += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        return used
