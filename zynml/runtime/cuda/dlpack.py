"""DLPack export of a DeviceArray (`__dlpack__`), so `torch.from_dlpack(a)`,
`cupy.from_dlpack(a)` and `jax.dlpack.from_dlpack(a)` take it without a copy.

The capsule holds a DLManagedTensor (dlpack.h, v0.8 layout) whose deleter drops the
reference that keeps the array's memory alive; a capsule never consumed runs the deleter
when it is collected.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["to_dlpack_capsule", "CUDA_DEVICE_TYPE"]

CUDA_DEVICE_TYPE = 2  # kDLCUDA


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]

# managed tensor address -> (struct, shape array, the array kept alive)
_LIVE: dict[int, tuple] = {}


@_DELETER
def _delete(managed) -> None:
    _LIVE.pop(ctypes.addressof(managed.contents), None)


_CAPSULE_NAME = b"dltensor"
# The destructor gets the dying capsule as a raw pointer: turning it into a Python object
# (py_object) would take a reference to an object being freed.
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR]
_capsule_api = ctypes.PyDLL(None)  # the same functions, prototyped on raw pointers
_IsValid = _capsule_api.PyCapsule_IsValid
_IsValid.restype, _IsValid.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
_GetPointer = _capsule_api.PyCapsule_GetPointer
_GetPointer.restype, _GetPointer.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]


@_DESTRUCTOR
def _capsule_destructor(capsule) -> None:
    # a consumer renames the capsule "used_dltensor" and owns the tensor from then on
    if _IsValid(capsule, _CAPSULE_NAME):
        _LIVE.pop(_GetPointer(capsule, _CAPSULE_NAME), None)


def _dtype(dtype: np.dtype) -> _DLDataType:
    if dtype.name == "bfloat16":
        return _DLDataType(4, 16, 1)
    code = {"f": 2, "i": 0, "u": 1, "b": 6}[dtype.kind]
    return _DLDataType(code, dtype.itemsize * 8, 1)


def to_dlpack_capsule(array: Any) -> Any:
    """A DLPack capsule viewing `array` (a C-contiguous DeviceArray)."""
    managed = _DLManagedTensor()
    shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    tensor = managed.dl_tensor
    tensor.data = array.ptr
    tensor.device = _DLDevice(CUDA_DEVICE_TYPE, array.device.ordinal)
    tensor.ndim = array.ndim
    tensor.dtype = _dtype(array.dtype)
    tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = None  # C-contiguous
    tensor.byte_offset = 0
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _LIVE[address] = (managed, shape, array)
    return _PyCapsule_New(address, _CAPSULE_NAME, _capsule_destructor)
