"""Inputs updated in place (`compute(mut x, ...)`, docs/language.md §2) at the call.

A program that writes an input marked `mut` returns that input's new values as an output
of the same name; the call then writes them into the caller's array, which the result
holds (`out["x"] is x`). The kernels compute the new values into a buffer of the run time,
copied into the caller's array once per call: on the CPU (IREE) and the interpreter with
numpy, on CUDA device to device for a GPU array (torch, CuPy, ZynML's DeviceArray; a numpy
array there is copied back to the host, as every output is).

Before running, aliasing is checked: an array updated in place may share no memory with
another input of the call (the same array passed twice, or views of one buffer), since
on a device that writes in place, a read of the other input could see the writes.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .errors import SourceLocation, ZynMLError
from .runtime import call_context

__all__ = ["check_updatable", "write_back"]


def _gpu_span(value: Any) -> Optional[tuple[int, int]]:
    """(address, bytes) of a GPU array, or None for anything else."""
    from .runtime.cuda.device_array import DeviceArray, is_gpu_array
    if not is_gpu_array(value):
        return None
    if isinstance(value, DeviceArray):
        return value.ptr, value.nbytes
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is None:
        return None
    size = int(np.prod(iface["shape"], dtype=np.int64)) * np.dtype(iface["typestr"]).itemsize
    return int(iface["data"][0]), size


def _overlap(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.may_share_memory(a, b)
    span_a, span_b = _gpu_span(a), _gpu_span(b)
    if span_a is None or span_b is None or not span_a[1] or not span_b[1]:
        return False
    return span_a[0] < span_b[0] + span_b[1] and span_b[0] < span_a[0] + span_a[1]


def check_updatable(mutated: dict[str, SourceLocation], inputs: dict[str, Any]) -> None:
    """Each input the program updates is a writable numpy array, or a GPU array, sharing
    memory with no other input: else a ZynMLError at its `mut`, naming both."""
    for name, loc in mutated.items():
        array = inputs.get(name)
        if _gpu_span(array) is None and (not isinstance(array, np.ndarray)
                                         or not array.flags.writeable):
            what = "a read-only array" if isinstance(array, np.ndarray) else \
                f"a {type(array).__name__}"
            raise ZynMLError(f"input '{name}' is updated in place ('mut'), so it must be a "
                             f"writable numpy array or a GPU array; got {what}", loc)
        for other, value in inputs.items():
            if other != name and _overlap(array, value):
                kind = "updated in place too" if other in mutated else "read by the program"
                raise ZynMLError(f"inputs '{name}' and '{other}' share memory: '{name}' is "
                                 f"updated in place ('mut') and '{other}' is {kind}; pass "
                                 f"separate arrays (e.g. {other}.copy())", loc)


def write_back(results: dict[str, Any], inputs: dict[str, Any],
               mutated: dict[str, SourceLocation]) -> dict[str, Any]:
    """`results` with each updated input's new values written into the caller's array,
    which then is that output."""
    for name in mutated:
        if name not in results:
            continue
        target, value = inputs[name], results[name]
        if isinstance(target, np.ndarray):
            np.copyto(target, np.asarray(value), casting="no")
        else:  # a GPU array: on the device, ordered after the kernels on their stream
            from .runtime.cuda.device_array import from_cuda_array
            destination = from_cuda_array(target, value.device)
            if destination.ptr != value.ptr:  # else the kernels wrote it in place
                _queue(value.device).copy_on_device(destination.ptr, value.ptr,
                                                    value.nbytes)
        results[name] = target
    return results


def _queue(device: Any) -> Any:
    """Where the call's kernels went: the stream of the call's context (a stream of
    `zynml.Future`s, or a graph's capture stream, whose copy a replay must repeat: one
    on the default stream during a capture runs once and is not recorded), else the
    device's default stream."""
    stream = call_context.current()
    return stream if hasattr(stream, "copy_on_device") else device
