"""DeviceArray: a dense, C-ordered tensor in GPU memory.

It owns its memory (freed, stream-ordered, when the last reference goes) or borrows
another library's (`from_cuda_array`, zero copy). It speaks `__cuda_array_interface__`
(version 3), so `torch.as_tensor(a, device="cuda")`, `cupy.asarray(a)` and numba take it
without a copy, and `numpy()` / `np.asarray(a)` copy it to the host.

bfloat16 goes through DLPack both ways. The interface has no bfloat16 typestr: PyTorch
before 2.5 raises for it (as JAX does), 2.5 says "<f2" (float16's), later versions "<V2"
(any 2-byte void; ml_dtypes' string). So a bfloat16 DeviceArray has no interface
(`torch.from_dlpack(a)` takes it), and a GPU array whose interface cannot name its dtype
comes in through `__dlpack__`.

A program's scalar result (a loss) computed on GPU arrays is a 0-d DeviceArray: it stays
on the GPU, so a call does not wait for the GPU. Reading it is the caller's explicit step,
which waits: `float(loss)`, `int(n)`, `bool(flag)`, `loss.item()` or `loss.numpy()`.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, Optional

import numpy as np

from .dlpack import CUDA_DEVICE_TYPE, DLPackTensor, to_dlpack_capsule
from .driver import Device, get_device

__all__ = ["DeviceArray", "from_cuda_array", "dtype_name", "is_gpu_array", "gpu_array_spec"]


def dtype_name(dtype: np.dtype) -> str:
    try:
        return _DTYPE_NAMES[dtype]  # every upload asks: a dict hit, not numpy's name code
    except (KeyError, TypeError):
        pass
    found = np.dtype(dtype)
    name = "bfloat16" if found.name == "bfloat16" or str(found) == "bfloat16" else found.name
    try:
        _DTYPE_NAMES[dtype] = name
    except TypeError:  # an unhashable dtype-like: not kept
        pass
    return name


_DTYPE_NAMES: dict = {}


@lru_cache(maxsize=None)
def _numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        try:
            import ml_dtypes  # numpy has no bfloat16 of its own
            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            return np.dtype(np.uint16)
    return np.dtype(name)


class DeviceArray:
    # Called with `ptr` when an owning array goes (__del__: far cheaper per array than
    # weakref.finalize, and a cycle holding one is still collected, PEP 442).
    _release: Optional[Callable[[int], None]] = None

    def __init__(self, device: Device, ptr: int, shape: tuple[int, ...], dtype: str,
                 owner: Any = None, owned: bool = False):
        self.device = device
        self.ptr = ptr
        self.shape = tuple(int(s) for s in shape)
        self.dtype = _numpy_dtype(dtype)
        self._dtype_name = dtype
        self._owner = owner  # keeps borrowed memory alive
        if owned:
            self._release = device.free

    @classmethod
    def owning(cls, device: Device, ptr: int, shape: tuple[int, ...], dtype: np.dtype,
               dtype_name: str, release: Callable[[int], None]) -> "DeviceArray":
        """An array of `ptr` that calls `release(ptr)` when it goes; `shape` a tuple of
        ints and `dtype` its numpy dtype already (the per-call fast path's results)."""
        array = cls.__new__(cls)
        array.device, array.ptr, array.shape = device, ptr, shape
        array.dtype, array._dtype_name, array._owner = dtype, dtype_name, None
        array._release = release
        return array

    def __del__(self):
        release = self._release
        if release is not None:
            try:
                release(self.ptr)
            except Exception:  # interpreter shutdown: the context may be gone already
                pass

    # ------------------------------------------------------------------ construction

    @staticmethod
    def empty(shape, dtype, device: Optional[Device] = None) -> "DeviceArray":
        device = device or get_device(0)
        name = dtype if isinstance(dtype, str) else dtype_name(dtype)
        nbytes = math.prod(int(n) for n in shape) * _numpy_dtype(name).itemsize
        return DeviceArray(device, device.alloc(nbytes), tuple(shape), name, owned=True)

    @staticmethod
    def from_numpy(array: np.ndarray, device: Optional[Device] = None) -> "DeviceArray":
        host = array if type(array) is np.ndarray and array.flags.c_contiguous else \
            np.require(array, requirements="C")  # keeps 0-d arrays 0-d
        out = DeviceArray.empty(host.shape, dtype_name(host.dtype), device)
        out.device.copy_to_device(out.ptr, host.ctypes.data, host.nbytes)
        # a copy from pinned memory reads it later, and `host` may be a temporary; one
        # from pageable memory has read it already (no wait for the GPU's queued work:
        # a training step uploads token ids a dozen times)
        if host.nbytes and out.device.is_page_locked(host.ctypes.data):
            out.device.synchronize()
        return out

    # ------------------------------------------------------------------ properties

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def __cuda_array_interface__(self) -> dict:
        if self._dtype_name == "bfloat16":  # AttributeError: hasattr() is False
            raise AttributeError("bfloat16 has no __cuda_array_interface__ typestr; "
                                 "take the array through DLPack (torch.from_dlpack(a))")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": None}

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("DeviceArray exports its own memory (copy=True is not done)")
        # ZynML's work is on the legacy default stream, which orders itself with the
        # consumer's stream on the same device: nothing to wait for here
        return to_dlpack_capsule(self)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (CUDA_DEVICE_TYPE, self.device.ordinal)

    # ------------------------------------------------------------------ copies

    def numpy(self) -> np.ndarray:
        host = np.empty(self.shape, dtype=self.dtype)
        self.device.copy_to_host(host.ctypes.data, self.ptr, self.nbytes)
        self.device.synchronize()
        return host

    def item(self) -> Any:
        """The one element as a Python number (copied to the host: waits for the GPU)."""
        if self.size != 1:
            raise ValueError(f"item() of a DeviceArray of {self.size} elements; only one "
                             "element converts to a Python number")
        return self.numpy().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def view(self, dtype) -> "DeviceArray":
        """The same memory read as `dtype` of the same item size (a bool result that
        crossed as int8, an unsigned one as signless): no copy."""
        name = dtype if isinstance(dtype, str) else dtype_name(dtype)
        if name == self._dtype_name:
            return self
        if _numpy_dtype(name).itemsize != self.dtype.itemsize:
            raise ValueError(f"cannot view {self._dtype_name} as {name}: item sizes differ")
        return DeviceArray(self.device, self.ptr, self.shape, name, owner=self)

    def reshape(self, *shape) -> "DeviceArray":
        """The same memory with another shape of as many elements (one -1 is inferred),
        as numpy's reshape of a C-contiguous array: no copy."""
        dims = list(shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list))
                    else shape)
        if dims.count(-1) > 1:
            raise ValueError("reshape takes at most one -1")
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            dims[dims.index(-1)] = self.size // known if known else 0
        if math.prod(dims) != self.size or any(d < 0 for d in dims):
            raise ValueError(f"cannot reshape a DeviceArray of shape {self.shape} into "
                             f"{tuple(shape)}")
        return DeviceArray(self.device, self.ptr, tuple(dims), self._dtype_name, owner=self)

    def copy_from(self, host: np.ndarray) -> None:
        """Overwrite this array with a numpy array of its shape (a checkpoint's values)."""
        host = np.require(np.asarray(host, dtype=self.dtype), requirements="C")
        if host.shape != self.shape:
            raise ValueError(f"copy_from: shape {host.shape} into a DeviceArray of "
                             f"{self.shape}")
        self.device.copy_to_device(self.ptr, host.ctypes.data, host.nbytes)
        self.device.synchronize()

    def __array__(self, dtype=None, copy=None):
        host = self.numpy()
        return host if dtype is None else host.astype(dtype)

    def to_device(self, device: str = "cpu", copy: bool = True):
        """`"cpu"` -> a numpy array; `"cuda:N"` -> this array (N = its GPU) or a copy."""
        from ...devices import parse_device
        kind, ordinal = parse_device(device)
        if kind == "cpu":
            return self.numpy()
        if kind != "cuda":
            raise ValueError(f"a CUDA array cannot move to '{device}' directly; "
                             "move it to 'cpu' first")
        if ordinal == self.device.ordinal and not copy:
            return self
        target = get_device(ordinal)
        out = DeviceArray.empty(self.shape, self._dtype_name, target)
        if target is not self.device:  # one device's work is ordered by its one stream
            self.device.synchronize()
        target.copy_on_device(out.ptr, self.ptr, self.nbytes)
        return out

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self._dtype_name}, "
                f"device='cuda:{self.device.ordinal}')")


def _interface(obj: Any) -> Optional[dict]:
    """obj's __cuda_array_interface__ where it names the dtype; None where it has none,
    raises, or may stand for bfloat16 (see the module docstring)."""
    if str(getattr(obj, "dtype", "")).endswith("bfloat16"):  # torch.bfloat16: "<f2" on 2.5
        return None
    try:
        iface = obj.__cuda_array_interface__
    except Exception:  # AttributeError; KeyError from PyTorch < 2.5 for bfloat16; JAX
        return None
    return None if np.dtype(iface["typestr"]).kind == "V" else iface


def _on_cuda_by_dlpack(obj: Any) -> bool:
    try:
        return obj.__dlpack_device__()[0] == CUDA_DEVICE_TYPE
    except Exception:  # no DLPack, or a producer that cannot say
        return False


def is_gpu_array(value: Any) -> bool:
    """A DeviceArray, or a CUDA array of another library (either protocol)."""
    return isinstance(value, DeviceArray) or _interface(value) is not None or \
        _on_cuda_by_dlpack(value)


def _from_dlpack(obj: Any):
    """obj's DLPack tensor, its work ordered before ZynML's on the legacy default stream
    (stream=1 in the protocol)."""
    try:
        capsule = obj.__dlpack__(stream=1)
    except TypeError:  # a producer without the stream argument
        capsule = obj.__dlpack__()
    return DLPackTensor(capsule)


def gpu_array_spec(obj: Any) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, numpy dtype) of a GPU array argument, without a copy."""
    if isinstance(obj, DeviceArray):
        return obj.shape, obj.dtype
    iface = _interface(obj)
    if iface is not None:
        return tuple(iface["shape"]), np.dtype(iface["typestr"])
    tensor = _from_dlpack(obj)
    return tensor.shape, _numpy_dtype(tensor.dtype)


def from_cuda_array(obj: Any, device: Device) -> DeviceArray:
    """Borrow a C-contiguous array of another library through __cuda_array_interface__,
    or through DLPack where the interface cannot name the dtype (bfloat16)."""
    iface = _interface(obj)
    if iface is None:
        tensor = _from_dlpack(obj)
        if not tensor.contiguous:
            raise ValueError("ZynML takes C-contiguous GPU arrays; call .contiguous() first")
        if tensor.device_id != device.ordinal:
            raise ValueError(f"a GPU array on cuda:{tensor.device_id} given to a program "
                             f"on cuda:{device.ordinal}")
        # the DLPackTensor keeps the producer's memory alive as long as this array
        return DeviceArray(device, tensor.ptr, tensor.shape, tensor.dtype, owner=tensor)
    shape = tuple(iface["shape"])
    dtype = np.dtype(iface["typestr"])
    strides = iface.get("strides")
    if strides is not None:
        expected, step = [], dtype.itemsize
        for extent in reversed(shape):
            expected.append(step)
            step *= extent
        if tuple(strides) != tuple(reversed(expected)) and \
                math.prod(int(n) for n in shape) > 1:
            raise ValueError("ZynML takes C-contiguous GPU arrays; call .contiguous() first")
    return DeviceArray(device, int(iface["data"][0]), shape, dtype_name(dtype), owner=obj)
