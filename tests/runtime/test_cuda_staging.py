"""zynml/runtime/cuda/staging.py: page-locked regions, aligned, grown and reused (on the
queued fake driver of test_cuda_data_parallel.py)."""
import numpy as np
import pytest

from zynml.runtime.cuda.driver import get_device
from zynml.runtime.cuda.staging import PinnedArena

from .test_cuda_data_parallel import queued  # noqa: F401  (the fake driver)


def test_regions_are_aligned_page_locked_views(queued):
    get_device(0)
    arena = PinnedArena()
    wanted = [(np.float32, (3,)), (np.float64, (2, 5)), (np.int8, (1,))]
    assert PinnedArena.room(wanted) == 256 + 256 + 1
    arena.reset(PinnedArena.room(wanted))
    regions = [arena.take(dtype, shape) for dtype, shape in wanted]
    for region, (dtype, shape) in zip(regions, wanted):
        assert region.dtype == dtype and region.shape == shape
        assert region.ctypes.data % PinnedArena.ALIGN == 0
        assert queued.page_locked(region.ctypes.data, region.nbytes)
    with pytest.raises(ValueError, match="exceeds the 1024 bytes reserved"):
        arena.take(np.uint8, (1024,))


def test_growing_frees_the_old_buffer_and_a_smaller_reset_reuses_it(queued):
    get_device(0)
    arena = PinnedArena()
    arena.reset(100)
    first = arena.capacity
    room = first - PinnedArena.ALIGN  # what `reset` may promise of this buffer
    arena.reset(room)  # fits: no allocation
    assert queued.count("cuMemHostAlloc") == 1 and arena.capacity == first
    arena.take(np.uint8, (room,))
    arena.reset(room + 1)  # grows to the next power of two; the old buffer goes
    assert arena.capacity == 2 * first
    assert queued.count("cuMemHostAlloc") == 2 and queued.count("cuMemFreeHost") == 1
    assert arena.take(np.uint8, (room + 1,)).ctypes.data % PinnedArena.ALIGN == 0
