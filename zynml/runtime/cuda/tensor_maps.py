"""TMA descriptors (CUtensorMap) in device memory, encoded on demand and kept.

A kernel that copies tiles with the copy engine (`cp.async.bulk.tensor`, the
`matmul_wgmma` strategy) takes the address of a 128-byte descriptor per tensor it reads:
the tensor's address, sizes and strides, the box it copies and the shared-memory
swizzle (the plan's "tensor_map" steps). Kernels read descriptors through a generic
pointer, so they live in device memory. Each distinct one is encoded
(cuTensorMapEncodeTiled), uploaded once on the device's stream and reused by every later
call on the same buffer; a descriptor holds no data, so it stays valid when its buffer is
freed and another takes its address. Descriptors are written through the generic proxy
(this host copy) and their slots are reused after `release`, so each kernel fences a
descriptor before the copy engine reads it (strategies/hopper.py, acquire_tensor_maps).
"""
from __future__ import annotations

import ctypes
import struct
import weakref
from typing import Sequence

from .driver import CudaError, Device, _driver, check

__all__ = ["TensorMaps", "encode", "for_device"]

DESCRIPTOR_BYTES = 128
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}


class TensorMaps:
    # Descriptors kept per device (128 bytes each); past it, all are dropped and re-made.
    # A GPT-2 small bf16 training step makes about 440 (counted on the no-op driver,
    # benchmarks/fake_cuda.py): at 256 the set was dropped twice a step and every
    # descriptor re-made the next.
    LIMIT = 4096

    def __init__(self, device):
        self.device = device
        self._kept: dict[tuple, int] = {}

    def address(self, dtype: str, address: int, sizes: Sequence[int],
                strides: Sequence[int], box: Sequence[int], swizzle: int) -> int:
        """The device address of the descriptor of the `sizes`/`strides` (elements,
        outermost first) tensor at `address` that copies `box`-shaped tiles."""
        key = (dtype, address, tuple(sizes), tuple(strides), tuple(box), swizzle)
        found = self._kept.get(key)
        return found if found is not None else self._make(key)

    def _make(self, key: tuple) -> int:
        if len(self._kept) >= self.LIMIT:
            self.release()
        encoded = encode(*key)
        ptr = self.device.alloc(DESCRIPTOR_BYTES)
        # From pageable memory the copy has read the bytes when the call returns.
        host = ctypes.create_string_buffer(encoded, DESCRIPTOR_BYTES)
        self.device.copy_to_device(ptr, ctypes.addressof(host), DESCRIPTOR_BYTES)
        self._kept[key] = ptr
        return ptr

    def release(self) -> None:
        """Free every kept descriptor (stream-ordered: after the kernels that read them)."""
        kept, self._kept = self._kept, {}
        for ptr in kept.values():
            self.device.free(ptr)


_BY_DEVICE: "weakref.WeakKeyDictionary[Device, TensorMaps]" = weakref.WeakKeyDictionary()


def for_device(device: Device) -> TensorMaps:
    """The descriptors kept for `device` (one TensorMaps per device, made on first use)."""
    maps = _BY_DEVICE.get(device)
    if maps is None:
        maps = _BY_DEVICE[device] = TensorMaps(device)
    return maps


def encode(dtype: str, address: int, sizes: Sequence[int], strides: Sequence[int],
           box: Sequence[int], swizzle: int) -> bytes:
    """cuTensorMapEncodeTiled's 128 bytes. CUDA lists dimensions innermost first and
    strides in bytes without the innermost one, which must be 1 element."""
    if dtype not in _ITEMSIZE:
        raise CudaError(f"no TMA descriptor for {dtype} tensors")
    if strides[-1] != 1:
        raise CudaError("a TMA descriptor needs a contiguous innermost dimension")
    itemsize = _ITEMSIZE[dtype]
    if address % 16 or any(s * itemsize % 16 for s in strides[:-1]):
        raise CudaError(f"this kernel copies tiles with TMA, which needs 16-byte aligned "
                        f"rows: a {dtype} tensor at {address:#x} with strides "
                        f"{tuple(strides)} is not (pass a copy that starts on 16 bytes)")
    driver = _driver()
    kind = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32"}[dtype]
    swizzles = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
    rank = len(sizes)
    tensor_map = check(driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{kind}"), rank, address,
        [driver.cuuint64_t(s) for s in reversed(sizes)],
        [driver.cuuint64_t(s * itemsize) for s in reversed(strides[:-1])],
        [driver.cuuint32_t(b) for b in reversed(box)], [driver.cuuint32_t(1)] * rank,
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzles[swizzle]}"),
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled")
    return struct.pack("<16Q", *[int(v) for v in tensor_map.opaque])
