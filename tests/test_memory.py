"""The Python memory API (zynml/memory.py) on the CPU: allocate, to_device, pools."""
import numpy as np
import pytest

import zynml
from zynml.devices import DeviceError
from zynml.memory import HostArray, PoolError


def test_allocate_on_the_cpu_is_zeroed_and_movable(rng):
    a = zynml.allocate((4, 3), "float64")
    assert isinstance(a, HostArray) and a.shape == (4, 3) and a.dtype == np.float64
    assert not a.any()
    a[...] = rng.standard_normal((4, 3))
    same = a.to_device("cpu", copy=False)
    copied = a.to_device("cpu")
    assert same is a and copied is not a
    np.testing.assert_array_equal(copied, a)
    copied[0, 0] += 1
    assert copied[0, 0] != a[0, 0]


@pytest.mark.parametrize("call,message", [
    (lambda: zynml.allocate((2, -1)), "non-negative"),
    (lambda: zynml.allocate((2,), device="gpu"), "unknown device"),
    (lambda: zynml.allocate((2,), device="cuda:0", pinned=True), "pinned=True is for host"),
    (lambda: zynml.allocate((2,)).to_device("cuda:0", copy=False), "copy=False"),
    (lambda: zynml.memory_pool("cpu", 0), "positive number of bytes"),
    (lambda: zynml.memory_pool("gpu", 64), "unknown device"),
])
def test_memory_mistakes_are_clear(call, message):
    with pytest.raises((ValueError, DeviceError)) as err:
        call()
    assert message in str(err.value)


def test_an_iree_gpu_that_is_not_here_is_a_clear_error():
    from zynml.errors import BackendError
    with pytest.raises(BackendError, match="cannot create an IREE device for driver 'vulkan'"):
        zynml.allocate((2,), device="vulkan:0")


def test_pool_accounting_reuses_memory():
    pool = zynml.memory_pool("cpu", 4096)
    a = pool.allocate((100,), "float32")     # 400 bytes -> one 512-byte piece
    b = pool.allocate((10, 10), "float64")   # 800 bytes -> 1024
    assert pool.used == 512 + 1024
    assert not a.any() and b.shape == (10, 10) and b.dtype == np.float64
    a[...] = 1.0
    b[...] = 2.0  # pieces do not overlap
    assert (a == 1.0).all()
    pool.free(a)
    assert pool.used == 1024
    c = pool.allocate((128,), "float32")      # fits in the freed first piece
    assert c.ctypes.data == a.ctypes.data and not c.any()
    with pytest.raises(PoolError, match="cannot hold"):
        pool.allocate((4096,), "uint8")
    pool.free(c)
    pool.free(b)
    assert pool.used == 0
    whole = pool.allocate((4096,), "uint8")  # freed neighbours merged back into one piece
    assert whole.nbytes == 4096


def test_pool_double_free_and_stale_arrays_are_errors():
    pool, other = zynml.memory_pool("cpu", 2048), zynml.memory_pool("cpu", 2048)
    a = pool.allocate((8,))
    pool.free(a)
    with pytest.raises(PoolError, match="already freed"):
        pool.free(a)
    b = pool.allocate((8,))  # same offset as `a`, a new allocation
    with pytest.raises(PoolError):
        pool.free(a)         # the stale array must not free `b`
    with pytest.raises(PoolError):
        other.free(b)
    with pytest.raises(PoolError):
        pool.free(np.zeros(8, dtype=np.float32))
    pool.reset()
    assert pool.used == 0
    with pytest.raises(PoolError):
        pool.free(b)


def test_pinned_host_memory_is_page_locked_for_every_gpu(monkeypatch):
    """cuMemHostAlloc's portable flag (1): without it the memory is page-locked only for
    the context current at the allocation, and another GPU copies it as pageable memory
    (slower; a @parallel(data) call copies its inputs to each GPU)."""
    import ctypes
    import types

    from zynml import memory
    from zynml.runtime.cuda import driver
    buffers, flags = [], []

    def host_alloc(nbytes, flag):
        flags.append(flag)
        buffers.append(ctypes.create_string_buffer(b"\x7f" * nbytes, nbytes))
        return 0, ctypes.addressof(buffers[-1])
    fake = types.SimpleNamespace(cuMemHostAlloc=host_alloc, cuMemFreeHost=lambda ptr: (0,),
                                 CUresult=types.SimpleNamespace(CUDA_SUCCESS=0))
    monkeypatch.setattr(driver, "_DRIVER", [fake])
    monkeypatch.setattr(memory, "_cuda_device", lambda ordinal: None)
    a = zynml.allocate((3, 5), "float32", pinned=True)
    assert flags == [1] and a.ctypes.data == ctypes.addressof(buffers[0])
    assert a.shape == (3, 5) and not a.any()  # zeroed over the driver's bytes
