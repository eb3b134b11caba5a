"""DLPack export of DeviceArrays and import of other libraries' CUDA tensors
(zynml/runtime/cuda/dlpack.py) without a GPU: the DLTensor a consumer sees, what an
imported one says, and who keeps the memory alive until when."""
import ctypes
import gc

import ml_dtypes
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
    ((2, 3, 4), "uint8", 1, 8), ((4,), "bool", 6, 8), ((3, 7), ml_dtypes.bfloat16, 4, 16),
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


# ----------------------------------------------------------------------------- import

def _tensor_of(capsule):
    return dlpack._DLManagedTensor.from_address(_get(capsule, b"dltensor")).dl_tensor


@pytest.mark.parametrize("shape,dtype,name", [
    ((3, 5), ml_dtypes.bfloat16, "bfloat16"), ((7,), "float16", "float16"),
    ((), "float32", "float32"), ((2, 1, 4), "int64", "int64"), ((4,), "bool", "bool")])
def test_import_reads_the_dltensor(shape, dtype, name):
    capsule = dlpack.to_dlpack_capsule(_Array(shape, dtype))
    tensor = dlpack.DLPackTensor(capsule)
    assert (tensor.ptr, tensor.shape, tensor.dtype) == (0x7F0000001000, shape, name)
    assert tensor.device_id == 1 and tensor.contiguous


def test_import_consumes_the_capsule_and_calls_the_deleter_when_dropped():
    before = len(dlpack._LIVE)
    array = _Array((3,), ml_dtypes.bfloat16)
    capsule = dlpack.to_dlpack_capsule(array)
    tensor = dlpack.DLPackTensor(capsule)
    with pytest.raises(BufferError, match="unconsumed"):
        dlpack.DLPackTensor(capsule)  # renamed "used_dltensor": taken once only
    del capsule
    gc.collect()
    assert len(dlpack._LIVE) == before + 1  # the importer holds the producer's tensor
    del tensor
    gc.collect()
    assert len(dlpack._LIVE) == before


def test_import_adds_the_byte_offset_and_reads_strides():
    keep = []

    def imported(shape, strides, offset=0):
        capsule = dlpack.to_dlpack_capsule(_Array(shape, "float32"))
        tensor = _tensor_of(capsule)
        values = (ctypes.c_int64 * len(strides))(*strides)
        keep.append(values)
        tensor.strides = ctypes.cast(values, ctypes.POINTER(ctypes.c_int64))
        tensor.byte_offset = offset
        return dlpack.DLPackTensor(capsule)

    assert imported((3, 5), (5, 1), offset=64).ptr == 0x7F0000001000 + 64
    assert imported((3, 5), (5, 1)).contiguous          # strides given, C order
    assert imported((3, 1, 5), (5, 99, 1)).contiguous   # a dimension of 1: any stride
    assert not imported((3, 5), (1, 3)).contiguous      # transposed
    assert not imported((3, 5), (10, 2)).contiguous     # every other element


@pytest.mark.parametrize("field,value,message", [
    ("device_type", 1, "device type 1, not CUDA"),
    ("code", 5, "code 5, 16 bits"),          # complex
    ("bits", 8, "code 4, 8 bits"),           # no 8-bit bfloat
    ("lanes", 2, "2 lanes"),
])
def test_import_refuses_what_zynml_cannot_take(field, value, message):
    capsule = dlpack.to_dlpack_capsule(_Array((4,), ml_dtypes.bfloat16))
    tensor = _tensor_of(capsule)
    setattr(tensor.device if field == "device_type" else tensor.dtype, field, value)
    with pytest.raises(BufferError, match=message):
        dlpack.DLPackTensor(capsule)
