"""DLPack both ways: export of a DeviceArray (`__dlpack__`), so `torch.from_dlpack(a)`,
`cupy.from_dlpack(a)` and `jax.dlpack.from_dlpack(a)` take it without a copy, and import
of another library's CUDA tensor (`DLPackTensor`), the way bfloat16 tensors come in:
`__cuda_array_interface__` has no bfloat16 typestr (dlpack.h's kDLBfloat has a code).

An exported capsule holds a DLManagedTensor (dlpack.h, v0.8 layout) whose deleter drops
the reference that keeps the array's memory alive; a capsule never consumed runs the
deleter when it is collected. An imported one is renamed "used_dltensor" (it is ours) and
its producer's deleter runs when the DLPackTensor goes.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["to_dlpack_capsule", "DLPackTensor", "CUDA_DEVICE_TYPE"]

CUDA_DEVICE_TYPE = 2  # kDLCUDA
# dlpack.h's (type code, bits) -> plan dtype name; codes: kDLInt 0, kDLUInt 1, kDLFloat 2,
# kDLBfloat 4, kDLBool 6
_DTYPE_NAMES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
                (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
                (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
                (4, 16): "bfloat16", (6, 8): "bool"}


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
    if dtype.name == "bfloat16":  # ml_dtypes' kind is "V" (void)
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


# The capsule calls on Python objects (the ones above take raw pointers, for the destructor).
_object_api = ctypes.PyDLL(None)
_GetObjectPointer = _object_api.PyCapsule_GetPointer
_GetObjectPointer.restype = ctypes.c_void_p
_GetObjectPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_IsObjectValid = _object_api.PyCapsule_IsValid
_IsObjectValid.restype = ctypes.c_int
_IsObjectValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_SetName = _object_api.PyCapsule_SetName
_SetName.restype = ctypes.c_int
_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CALL_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)  # with the GIL held


class DLPackTensor:
    """A CUDA tensor taken from a DLPack capsule: `ptr` (data + byte_offset), `shape`,
    `dtype` (a plan dtype name), `device_id`, `contiguous` (C order). It owns the capsule's
    DLManagedTensor: the producer's deleter runs when this object goes."""

    def __init__(self, capsule):
        if not _IsObjectValid(capsule, _CAPSULE_NAME):
            raise BufferError("not an unconsumed DLPack capsule ('dltensor')")
        address = _GetObjectPointer(capsule, _CAPSULE_NAME)
        tensor = _DLManagedTensor.from_address(address).dl_tensor
        code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
        if tensor.device.device_type != CUDA_DEVICE_TYPE:
            raise BufferError(f"a DLPack tensor on device type {tensor.device.device_type}, "
                              f"not CUDA ({CUDA_DEVICE_TYPE})")
        if lanes != 1 or (code, bits) not in _DTYPE_NAMES:
            raise BufferError(f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no "
                              "ZynML dtype")
        self.dtype = _DTYPE_NAMES[code, bits]
        self.device_id = tensor.device.device_id
        self.shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
        self.ptr = (tensor.data or 0) + tensor.byte_offset
        self.contiguous = True
        if tensor.strides:  # NULL: C order
            expected = 1
            for dim in reversed(range(tensor.ndim)):
                if self.shape[dim] != 1 and tensor.strides[dim] != expected:
                    self.contiguous = False
                expected *= self.shape[dim]
        self._address = address
        _SetName(capsule, b"used_dltensor")  # consumed: the capsule no longer frees it

    def __del__(self):
        address, self._address = getattr(self, "_address", None), None
        if address:
            deleter = _DLManagedTensor.from_address(address).deleter
            if deleter:
                _CALL_DELETER(ctypes.cast(deleter, ctypes.c_void_p).value)(address)
