"""Many arrays as views of one flat buffer: a model's parameters, their gradients and
AdamW's moments each live in one contiguous float32 array of the device (numpy on the
CPU, a DeviceArray on CUDA), so that a step touches each with one kernel call (the
gradients' global sum of squares, one AdamW call per weight-decay group) instead of one
call per parameter.

The layout (`FlatLayout`) puts the parameters of one group (weight decay on or off)
next to each other, in the model's order, each starting a multiple of `ALIGN` elements
in: the kernels read 16 bytes at a time, and a GPU input that starts elsewhere is
copied on the checked path (which would lose an in-place update). The padding between
views is zero in every buffer and stays zero: AdamW leaves a zero parameter with a zero
gradient and zero moments at zero, and it adds nothing to a sum of squares. A large
buffer ends with padding up to a multiple of SUM_ROW elements too (no group covers it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Hashable, Mapping

import numpy as np

from ..errors import ZynMLError
from ..kernels.training import SUM_ROW

__all__ = ["ALIGN", "Slot", "FlatLayout", "zeros_like", "numpy_dtype", "element_range",
           "copy_into"]

ALIGN = 64  # elements: 256 bytes, a multiple of every alignment the kernels ask for


@dataclass(frozen=True)
class Slot:
    start: int                 # the first element, in the flat buffer
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class FlatLayout:
    """Where each named array lies in a flat buffer: `slots[name]`, and per group (a
    key such as "decays") the contiguous range `groups[key] = (start, stop)` its arrays
    fill. Groups come in the order their first arrays come."""

    def __init__(self, shapes: Mapping[str, tuple[int, ...]],
                 group_of: Mapping[str, Hashable]):
        order: dict[Hashable, list[str]] = {}
        for name in shapes:
            order.setdefault(group_of[name], []).append(name)
        self.slots: dict[str, Slot] = {}
        self.groups: dict[Hashable, tuple[int, int]] = {}
        end = 0
        for key, names in order.items():
            start = end
            for name in names:
                slot = Slot(end, tuple(int(d) for d in shapes[name]))
                self.slots[name] = slot
                end += -(-slot.size // ALIGN) * ALIGN
            self.groups[key] = (start, end)
        # elements in a buffer, padding included: the total a multiple of SUM_ROW, so
        # that the gradients' sum of squares runs as rows (kernels/training.py)
        self.size = -(-end // SUM_ROW) * SUM_ROW if end >= 4 * SUM_ROW else end

    def pack(self, arrays: Mapping[str, Any]) -> np.ndarray:
        """A flat float32 host buffer holding `arrays` (numpy or GPU arrays, by name)."""
        flat = np.zeros(self.size, np.float32)
        for name, slot in self.slots.items():
            value = np.asarray(arrays[name], dtype=np.float32)
            if value.shape != slot.shape:
                raise ZynMLError(f"'{name}' has shape {value.shape}; the layout has "
                                 f"{slot.shape}")
            flat[slot.start:slot.start + slot.size] = value.reshape(-1)
        return flat

    def views(self, flat: Any) -> dict[str, Any]:
        """Each array as a view of `flat`, shaped as given, by name (no copy)."""
        return {name: element_range(flat, slot.start, slot.start + slot.size)
                .reshape(slot.shape) for name, slot in self.slots.items()}

    def ranges(self, names) -> list[tuple[int, int]]:
        """The (start, stop) element ranges the arrays `names` fill, the padding after
        each included, neighbours merged: what to reduce for those arrays alone."""
        spans = sorted((slot.start, slot.start + -(-slot.size // ALIGN) * ALIGN)
                       for slot in (self.slots[name] for name in names))
        merged: list[tuple[int, int]] = []
        for start, stop in spans:
            if merged and merged[-1][1] == start:
                merged[-1] = (merged[-1][0], stop)
            else:
                merged.append((start, stop))
        return merged

    def group(self, flat: Any, key: Hashable) -> Any:
        """The 1-D view of `flat` that group `key` fills (its padding included)."""
        start, stop = self.groups[key]
        return element_range(flat, start, stop)


def zeros_like(size: int, like: Any, dtype: str = "float32") -> Any:
    """`size` zeros of `dtype` where `like` lives: numpy for a numpy array (the CPU, and
    compile-only runs), else a DeviceArray on `like`'s GPU."""
    if isinstance(like, np.ndarray):
        return np.zeros(size, numpy_dtype(dtype))
    from ..runtime.cuda.device_array import DeviceArray
    flat = DeviceArray.empty((size,), dtype, _gpu_of(like))
    flat.device.fill_bytes(flat.ptr, 0, flat.nbytes)
    return flat


def numpy_dtype(dtype: str):
    """The numpy dtype of a dtype name ("float32", "bfloat16": ml_dtypes')."""
    if dtype == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def on_gpu_of(host: np.ndarray, like: Any) -> Any:
    """A host array copied to the GPU `like` (a GPU array) lives on, as a DeviceArray."""
    from ..runtime.cuda.device_array import DeviceArray
    return DeviceArray.from_numpy(host, _gpu_of(like))


def _gpu_of(array: Any):
    from ..kernels.basic import reshaped
    return reshaped(array, tuple(array.shape)).device


def element_range(flat: Any, start: int, stop: int) -> Any:
    """Elements start..stop of a 1-D array as a view: a numpy slice, or a DeviceArray
    on the same memory that keeps `flat` alive."""
    if isinstance(flat, np.ndarray):
        return flat[start:stop]
    from ..runtime.cuda.device_array import DeviceArray
    return DeviceArray(flat.device, flat.ptr + start * flat.dtype.itemsize,
                       (stop - start,), flat._dtype_name, owner=flat)


def copy_into(dst: Any, src: Any) -> Any:
    """dst[...] = src for arrays of one shape and dtype, and dst: numpy's copy on the
    CPU, one device-to-device copy on ZynML's stream on CUDA (no kernel, no library
    call)."""
    if tuple(dst.shape) != tuple(src.shape):
        raise ZynMLError(f"copy_into: shape {tuple(src.shape)} into {tuple(dst.shape)}")
    if isinstance(dst, np.ndarray):
        np.copyto(dst, src)
        return dst
    from ..kernels.basic import reshaped
    source = reshaped(src, tuple(src.shape))  # a DeviceArray on src's memory
    if source.dtype != dst.dtype:
        raise ZynMLError(f"copy_into: {source.dtype} into {dst.dtype}")
    dst.device.copy_on_device(dst.ptr, source.ptr, dst.nbytes)
    return dst
