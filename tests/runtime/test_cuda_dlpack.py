"""DLPack export of DeviceArrays (zynml/runtime/cuda/dlpack.py) without a GPU: the
DLTensor a consumer sees, and who keeps the memory alive until when."""
import ctypes
import gc

import numpy as np
import pytest

from zynml.runtime.cuda import dlpack

_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_rename = ctypes.pythonapi.PyCapsule_SetName
_rename.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Device:
    ordinal = 1


class _Array:
    """Stands for a DeviceArray: what the exporter reads."""

    def __init__(self, shape, dtype):
        self.ptr, self.shape, self.ndim = 0x7F0000001000, shape, len(shape)
        self.dtype, self.device = np.dtype(dtype), _Device()


@pytest.mark.parametrize("shape,dtype,code,bits", [
    ((3, 5), "float32", 2, 32), ((7,), "int64", 0, 64), ((), "float16", 2, 16),
    ((2, 3, 4), "uint8", 1, 8), ((4,), "bool", 6, 8),
])
def test_the_dltensor_describes_the_array(shape, dtype, code, bits):
    capsule = dlpack.to_dlpack_capsule(_Array(shape, dtype))
    managed = dlpack._DLManagedTensor.from_address(_get(capsule, b"dltensor"))
    tensor = managed.dl_tensor
    assert tensor.data == 0x7F0000001000 and tensor.byte_offset == 0
    assert (tensor.device.device_type, tensor.device.device_id) == (2, 1)
    assert tensor.ndim == len(shape)
    assert [tensor.shape[i] for i in range(len(shape))] == list(shape)
    assert not tensor.strides  # C-contiguous
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (code, bits, 1)


def test_an_unconsumed_capsule_releases_the_array():
    before = len(dlpack._LIVE)
    capsule = dlpack.to_dlpack_capsule(_Array((3,), "float32"))
    assert len(dlpack._LIVE) == before + 1
    del capsule
    gc.collect()
    assert len(dlpack._LIVE) == before


def test_a_consumer_owns_the_array_until_it_calls_the_deleter():
    before = len(dlpack._LIVE)
    array = _Array((3,), "float32")
    capsule = dlpack.to_dlpack_capsule(array)
    address = _get(capsule, b"dltensor")
    _rename(capsule, b"used_dltensor")  # what torch.from_dlpack does
    del capsule
    gc.collect()
    assert len(dlpack._LIVE) == before + 1  # the consumer still holds it
    assert dlpack._LIVE[address][2] is array
    managed = dlpack._DLManagedTensor.from_address(address)
    managed.deleter(ctypes.pointer(managed))
    assert len(dlpack._LIVE) == before
