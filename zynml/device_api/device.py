"""`zynml.Device`: compute-device-api.md's device object over ZynML's programs.

    dev = zynml.Device("cuda:0")            # or "cpu", "vulkan:0", "auto"
    x = dev.upload(np.ones((4, 8)))         # f32 unless dtype= says otherwise
    y = dev.elementwise([x], lambda x: zynml.exp(x) * 2.0 + 1.0)
    p = dev.softmax(dev.matmul(x, dev.transpose_2d(x)))
    dev.sync(); dev.download(p)             # numpy

Buffers are the arrays ZynML's programs already take and give: numpy arrays on "cpu"
(and on IREE's GPUs, whose programs copy them per call), GPU arrays on "cuda:N" (ZynML's
`DeviceArray`, or any `__cuda_array_interface__` / DLPack array: torch, CuPy). Every
operation runs a library kernel (zynml.kernels) or a traced elementwise kernel; on CUDA
it is queued on ZynML's stream (the legacy default stream) and returns at once, and
`sync()` waits. Shapes come from the buffers: the spec's explicit sizes are optional
keywords, checked against them.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from ..api import Program
from ..call_values import is_gpu_array
from ..devices import parse_device, resolve
from ..kernels import basic
from .checks import Arg, check_size, fail
from .attention_ops import AttentionOps
from .ops import ForwardOps
from .tracing import elementwise_source, trace
from .training import TrainingOps

__all__ = ["Device"]

# (kernel source, device) -> Program: one compile per expression text and device
_traced: dict[tuple[str, str], Program] = {}
_traced_lock = threading.Lock()


class Device(ForwardOps, TrainingOps, AttentionOps):
    """A compute device: buffers, a fused elementwise closure, and the operations of
    compute-device-api.md (docs/device-api.md lists them with their kernels)."""

    def __init__(self, name: str = "auto"):
        placement = resolve(name)  # a device not present: a DeviceError naming those that are
        self.name, self.kind = placement.device, placement.kind
        self._gpu = None
        if self.kind == "cuda":
            from ..runtime.cuda.driver import get_device
            self._gpu = get_device(placement.ordinal)

    def __repr__(self) -> str:
        return f"zynml.Device('{self.name}')"

    # ---------------------------------------------------------------- buffers

    def upload(self, data: Any, dtype: Any = np.float32) -> Any:
        """`data` (anything numpy takes) as a buffer of `dtype` (f32 by default)."""
        host = np.asarray(data, dtype=dtype)
        host = np.ascontiguousarray(host) if host.ndim else host.copy()  # 0-d stays 0-d
        if self._gpu is not None:
            from ..runtime.cuda.device_array import DeviceArray
            return DeviceArray.from_numpy(host, self._gpu)
        return host.copy() if host is data else host

    def upload_u32(self, data: Any) -> Any:
        """Token ids (non-negative integers) as a u32 buffer."""
        values = np.asarray(data)
        if values.dtype.kind not in "iub" or (values.size and values.min() < 0) or \
                (values.size and int(values.max()) > 0xFFFFFFFF):
            raise fail("upload_u32", "data", "must hold integers from 0 to 2^32 - 1")
        return self.upload(values, np.uint32)

    def alloc(self, shape: Any, dtype: Any = np.float32) -> Any:
        """A zero-filled buffer of `shape` (or a length) and `dtype`."""
        if self.kind in ("cpu", "cuda"):
            from ..memory import allocate
            array = allocate(shape, dtype, device=self.name)
            return np.asarray(array) if self.kind == "cpu" else array
        return np.zeros(shape, dtype=dtype)

    def download(self, buffer: Any) -> np.ndarray:
        """The buffer's contents as a numpy array (on CUDA: waits for the work queued)."""
        self._arg("download", "buffer", buffer)
        if is_gpu_array(buffer):
            return np.asarray(basic.reshaped(buffer, tuple(_shape_of(buffer))))
        return np.array(buffer, copy=True)

    def copy_buffer(self, src: Any) -> Any:
        """A new buffer holding src's contents, copied on the device."""
        arg = self._arg("copy_buffer", "src", src)
        if self._gpu is None:
            return np.array(src, copy=True)
        from ..runtime.cuda.device_array import DeviceArray
        source = basic.reshaped(src, arg.shape)
        out = DeviceArray.empty(arg.shape, arg.dtype_name, self._gpu)
        self._gpu.copy_on_device(out.ptr, source.ptr, out.nbytes)
        return out

    def sync(self) -> None:
        """Wait until every operation queued on the device has finished."""
        if self._gpu is not None:
            self._gpu.synchronize()

    # ---------------------------------------------------------------- elementwise

    def elementwise(self, inputs: Sequence[Any], f: Callable, numel: int | None = None) -> Any:
        """f applied elementwise to `inputs` as one fused kernel. `f` takes one symbolic
        value per input and combines them with operators, numbers and the math functions
        `zynml.exp`, `zynml.where`, ... (docs/device-api.md). Inputs broadcast as numpy's
        do; the result has their common shape. Compiled once per expression and device."""
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        args = [self._arg("elementwise", f"inputs[{k}]", value)
                for k, value in enumerate(inputs)]
        if not args:
            raise fail("elementwise", "inputs", "must hold at least one buffer")
        source, out_shape = elementwise_source(trace(f, len(args)),
                                               [a.shape for a in args])
        check_size("elementwise", "numel", numel, int(np.prod(out_shape, dtype=np.int64)))
        key = (source, self.name)
        with _traced_lock:
            program = _traced.get(key)
            if program is None:
                program = _traced[key] = Program(source, device=self.name, dynamic=True)
        return program(**{f"x{k}": a.value for k, a in enumerate(args)})["result"]

    # ---------------------------------------------------------------- checks

    def _arg(self, op: str, name: str, value: Any) -> Arg:
        """`value` as a buffer argument of `op`: it must live on this device."""
        if is_gpu_array(value):
            where = _cuda_name(value)
            if where != self.name:
                raise fail(op, name, f"lives on {where}, but this device is {self.name}"
                           + ("; download it first" if self._gpu is None else ""))
            from ..runtime.cuda.device_array import gpu_array_spec
            shape, dtype = gpu_array_spec(value)
            return Arg(op, name, value, tuple(shape), np.dtype(dtype))
        if not isinstance(value, np.ndarray):
            raise fail(op, name, f"must be a buffer of this device, not "
                       f"{type(value).__name__}; make one with upload() or alloc()")
        if self._gpu is not None:
            raise fail(op, name, f"is a host (numpy) array, but this device is "
                       f"{self.name}: upload() it first")
        return Arg(op, name, value, tuple(value.shape), value.dtype)

    def _matrix(self, op: str, name: str, value: Any, rows: int | None,
                cols: int | None, rows_name: str, cols_name: str) -> Arg:
        """A rank-2 buffer argument; a flat one is viewed as [rows, cols] when both sizes
        are given (the spec's flat buffers). The sizes are checked against it."""
        arg = self._arg(op, name, value)
        if len(arg.shape) == 1 and rows is not None and cols is not None:
            check_size(op, rows_name, rows, rows)
            check_size(op, cols_name, cols, cols)
            if rows * cols != arg.size:
                raise arg.error(f"has {arg.size} elements, not {rows_name} * {cols_name} "
                                f"= {rows * cols}")
            arg = Arg(op, name, basic.reshaped(value, (rows, cols)), (rows, cols), arg.dtype)
        arg.rank(2)
        check_size(op, rows_name, rows, arg.shape[0])
        check_size(op, cols_name, cols, arg.shape[1])
        return arg

    def _distinct(self, op: str, *args: Arg) -> None:
        """Buffers updated in place must not be one another (or an input)."""
        for k, first in enumerate(args):
            for second in args[k + 1:]:
                if _address(first.value) == _address(second.value) and first.size:
                    raise fail(op, second.name, f"is the same buffer as '{first.name}'")


def _shape_of(value: Any) -> tuple[int, ...]:
    from ..runtime.cuda.device_array import gpu_array_spec
    return tuple(gpu_array_spec(value)[0])


def _cuda_name(value: Any) -> str:
    from ..kernels.library import device_of
    kind, ordinal = parse_device(device_of([value]))
    return f"{kind}:{ordinal}"


def _address(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return value.__array_interface__["data"][0]
    ptr = getattr(value, "ptr", None)
    if isinstance(ptr, int):
        return ptr
    iface = getattr(value, "__cuda_array_interface__", None)
    return int(iface["data"][0]) if iface else id(value)

