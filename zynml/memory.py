"""The memory API of the spec ("Memory Management") in Python.

    x = zynml.allocate((1024, 1024), "float32", device="cuda:0")   # DeviceArray, zeroed
    h = zynml.allocate((4, 3), "float64")                           # HostArray (numpy)
    g = h.to_device("cuda:0")                                       # copy to the GPU
    v = h.to_device("cpu", copy=False)                              # the same memory
    pool = zynml.memory_pool("cuda:0", 1 << 30)
    t = pool.allocate((512, 256), "float32"); pool.free(t); pool.reset()

CPU arrays are numpy arrays (`HostArray`, a subclass that adds `to_device`); CUDA arrays
are `DeviceArray`s (zynml/runtime/cuda/device_array.py), which speak
`__cuda_array_interface__`. A pool takes its memory once and hands out 256-byte aligned
pieces (first fit, neighbours merged on free); freeing twice, or what the pool did not
allocate, is an error, and `reset` frees everything at once.
"""
from __future__ import annotations

from typing import Any


import numpy as np

from .devices import DeviceError, parse_device
from .errors import ZynMLError, note
from .machine_limits import check_fits

__all__ = ["allocate", "memory_pool", "HostArray", "MemoryPool", "PoolError",
           "AllocationError"]

ALIGN = 256


class AllocationError(ZynMLError, ValueError):
    """A shape, dtype or size that cannot be allocated (a ValueError, as it always was)."""


class PoolError(ZynMLError, ValueError):
    """A pool that is full, or a free of memory the pool does not hold live."""


class HostArray(np.ndarray):
    """A numpy array of ZynML's: `to_device` moves it (the spec's `data.to_device`)."""

    def to_device(self, device: str = "cpu", copy: bool = True):
        kind, ordinal = parse_device(device)
        if kind == "cpu":
            return np.array(self, copy=True).view(HostArray) if copy else self
        if not copy:
            raise DeviceError(f"to_device('{device}', copy=False): host memory cannot be "
                              "used by a CUDA kernel in place; use copy=True")
        if kind in IREE_DRIVERS:
            return IreeArray.from_numpy(np.asarray(self), kind)
        if kind != "cuda":
            raise DeviceError(f"to_device('{device}'): arrays move to 'cpu', 'cuda:N' and "
                              f"the IREE GPUs ({', '.join(IREE_DRIVERS)})")
        from .runtime.cuda.device_array import DeviceArray
        return DeviceArray.from_numpy(np.asarray(self), _cuda_device(ordinal))


# device kind -> IREE runtime driver, for arrays on GPUs that only IREE drives
IREE_DRIVERS = {"vulkan": "vulkan", "rocm": "hip", "metal": "metal"}


class IreeArray:
    """An array in the memory of an IREE device (Vulkan, ROCm, Metal). IREE programs on
    that device read it; `to_device("cpu")` / `np.asarray` copy it to the host. IREE's own
    device arrays have no DLPack: this wrapper is what ZynML hands out."""

    def __init__(self, array: Any, kind: str):
        self._array, self.kind = array, kind
        self.shape, self.dtype = tuple(array.shape), np.dtype(array.dtype)

    @staticmethod
    def from_numpy(host: np.ndarray, kind: str) -> "IreeArray":
        import iree.runtime as ireert
        from .runtime.iree_runner import runtime_config
        device = runtime_config(IREE_DRIVERS[kind]).device
        return IreeArray(ireert.asdevicearray(device, np.ascontiguousarray(host)), kind)

    @property
    def device(self) -> str:
        return f"{self.kind}:0"

    def numpy(self) -> np.ndarray:
        return np.asarray(self._array.to_host()).copy()

    def __array__(self, dtype=None, copy=None):
        host = self.numpy()
        return host if dtype is None else host.astype(dtype)

    def to_device(self, device: str = "cpu", copy: bool = True):
        kind, _ = parse_device(device)
        if kind == self.kind and not copy:
            return self
        if kind == "cpu":
            return self.numpy().view(HostArray)
        return self.numpy().view(HostArray).to_device(device, copy=True)

    def __repr__(self) -> str:
        return f"IreeArray(shape={self.shape}, dtype={self.dtype}, device='{self.device}')"


def _cuda_device(ordinal: int):
    """The CUDA device; no driver, no GPU or a failing one is a DeviceError that says so."""
    from .runtime.cuda.driver import CudaError, get_device
    try:
        return get_device(ordinal)
    except CudaError as err:
        raise DeviceError(f"cannot use 'cuda:{ordinal}': {err}") from None


def allocate(shape, dtype="float32", device: str = "cpu", pinned: bool = False) -> Any:
    """A zero-filled array of `shape` and `dtype` on `device`. `pinned=True` (CPU only)
    gives page-locked host memory, which copies to and from a GPU faster."""
    shape, dtype = _shape(shape), _dtype(dtype)
    kind, ordinal = parse_device(device)
    if kind == "cpu":
        _fits(shape, dtype)
        if pinned:
            try:
                return _pinned(shape, dtype)
            except DeviceError as err:  # no CUDA here: nothing to copy to faster
                note(f"note: pinned=True: {err.message}; allocating ordinary host memory")
        return np.zeros(shape, dtype=dtype).view(HostArray)
    if pinned:
        raise DeviceError("pinned=True is for host memory (device='cpu')")
    if kind in IREE_DRIVERS:
        return IreeArray.from_numpy(np.zeros(shape, dtype=dtype), kind)
    if kind != "cuda":
        raise DeviceError(f"allocate on '{device}': ZynML allocates on 'cpu', 'cuda:N' and "
                          f"the IREE GPUs ({', '.join(IREE_DRIVERS)})")
    from .runtime.cuda.device_array import DeviceArray
    array = DeviceArray.empty(shape, dtype, _cuda_device(ordinal))
    array.device.fill_bytes(array.ptr, 0, array.nbytes)
    return array


def _shape(shape) -> tuple[int, ...]:
    try:
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    except TypeError:
        dims = None
    if dims is None or any(not isinstance(d, (int, np.integer)) or isinstance(d, bool)
                           or d < 0 for d in dims):
        shown = repr(shape)
        shown = shown if len(shown) <= 80 else type(shape).__name__  # not a whole array
        raise AllocationError(f"a shape is a sequence of non-negative integers, not {shown}")
    return tuple(int(d) for d in dims)


def _dtype(dtype) -> np.dtype:
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError) as err:
        raise AllocationError(f"not a dtype: {dtype!r} ({err})") from None


def _fits(shape, dtype: np.dtype) -> None:
    """Host memory larger than the machine's: an AllocationError, not numpy's MemoryError."""
    try:
        check_fits("the allocation", shape, dtype, None)
    except ZynMLError as err:
        raise AllocationError(err.message) from None


def _pinned(shape, dtype) -> "HostArray":
    import ctypes
    from .runtime.cuda.driver import CudaError, _driver, check
    _cuda_device(0)  # pinned memory belongs to a CUDA context
    nbytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
    driver = _driver()
    try:
        # portable: page-locked for every GPU's context, not only the current one's (a
        # @parallel(data) call copies it to each GPU straight from where it is)
        ptr = int(check(driver.cuMemHostAlloc(nbytes, 1), "cuMemHostAlloc"))
    except CudaError as err:
        raise AllocationError(f"cannot allocate {nbytes} bytes of pinned memory: "
                              f"{err}") from None
    buffer = (ctypes.c_byte * nbytes).from_address(ptr)
    array = np.frombuffer(buffer, dtype=np.uint8, count=nbytes)[: nbytes]
    out = array[: int(np.prod(shape, dtype=np.int64)) * dtype.itemsize].view(dtype)
    out = out.reshape(shape).view(HostArray)
    out[...] = 0
    import weakref
    weakref.finalize(buffer, lambda: driver.cuMemFreeHost(ptr))
    out._pinned_buffer = buffer  # keeps the memory alive as long as the array
    return out


class MemoryPool:
    """`size` bytes of one device, handed out in aligned pieces. On the CPU and CUDA the
    pool takes its memory once and pieces are views into it; on IREE's GPUs (whose
    runtime allocates each array itself) the pool does the same accounting, and each
    piece is an IreeArray of its own."""

    def __init__(self, device: str, size: int):
        kind, ordinal = parse_device(device)
        if kind not in ("cpu", "cuda") and kind not in IREE_DRIVERS:
            raise DeviceError(f"memory_pool on '{device}': pools live on 'cpu', 'cuda:N' "
                              f"and the IREE GPUs ({', '.join(IREE_DRIVERS)})")
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size <= 0:
            raise AllocationError("a pool's size is a positive number of bytes, not "
                                  f"{size if isinstance(size, (int, float)) else type(size).__name__}")
        size = int(size)
        if kind == "cpu":
            _fits((size,), np.dtype(np.uint8))
        self.device, self.size = ("cpu" if kind == "cpu" else f"{kind}:{ordinal}"), size
        self._iree = kind if kind in IREE_DRIVERS else None
        self._gpu = None
        if self._iree:
            self._base = 0
        elif kind == "cpu":
            self._host = np.zeros(size + ALIGN, dtype=np.uint8)
            base = self._host.ctypes.data
            self._base = base + (-base % ALIGN)
            self._gpu = None
        else:
            self._gpu = _cuda_device(ordinal)
            self._base = self._gpu.alloc(size)
        self._free: list[tuple[int, int]] = [(0, size)]  # (offset, bytes), sorted
        self._live: dict[int, tuple[int, int]] = {}  # offset -> (bytes, allocation number)
        self._allocations = 0

    @property
    def used(self) -> int:
        return sum(nbytes for nbytes, _ in self._live.values())

    def allocate(self, shape, dtype="float32") -> Any:
        shape, dtype = _shape(shape), _dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        rounded = -(-max(nbytes, 1) // ALIGN) * ALIGN
        for index, (offset, free) in enumerate(self._free):
            if free >= rounded:
                self._free[index:index + 1] = [(offset + rounded, free - rounded)] \
                    if free > rounded else []
                self._allocations += 1
                self._live[offset] = (rounded, self._allocations)
                array = self._view(offset, shape, dtype)
                # which piece of which pool: checked by free(), so a stale array (freed,
                # or from before reset) cannot free a newer piece at the same offset
                array._zynml_pool = (self, offset, self._allocations)
                return array
        raise PoolError(f"pool on '{self.device}' ({self.size} bytes, {self.used} in use) "
                        f"cannot hold {nbytes} more bytes")

    def _view(self, offset: int, shape, dtype) -> Any:
        if self._iree:
            return IreeArray.from_numpy(np.zeros(shape, dtype=dtype), self._iree)
        if self._gpu is None:
            start = self._base - self._host.ctypes.data + offset
            count = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            array = self._host[start:start + count].view(dtype).reshape(shape)
            array = array.view(HostArray)
            array[...] = 0
        else:
            from .runtime.cuda.device_array import DeviceArray
            array = DeviceArray(self._gpu, self._base + offset, shape, dtype.name,
                                owner=self)
        return array

    def free(self, array: Any) -> None:
        owner, offset, number = getattr(array, "_zynml_pool", (None, None, None))
        if owner is not self or self._live.get(offset, (0, None))[1] != number:
            raise PoolError("free of an array this pool does not hold live (never "
                            "allocated from it, already freed, or freed by reset)")
        self._release(offset, self._live.pop(offset)[0])

    def _release(self, offset: int, nbytes: int) -> None:
        self._free.append((offset, nbytes))
        self._free.sort()
        merged: list[tuple[int, int]] = []
        for start, size in self._free:
            if merged and merged[-1][0] + merged[-1][1] == start:
                merged[-1] = (merged[-1][0], merged[-1][1] + size)
            else:
                merged.append((start, size))
        self._free = merged

    def reset(self) -> None:
        """Free everything the pool handed out."""
        self._live.clear()
        self._free = [(0, self.size)]

    def __del__(self):
        gpu = getattr(self, "_gpu", None)
        if gpu is not None:
            try:
                gpu.free(self._base)
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<zynml.MemoryPool {self.device} {self.used}/{self.size} bytes in use>"



def memory_pool(device: str, size: int) -> MemoryPool:
    return MemoryPool(device, size)
