"""ZynML: compute() kernels written once, compiled through MLIR (cir -> linalg) and run
with IREE.

    >>> import numpy as np, zynml
    >>> zynml.run('''
    ... let y = compute(x) {
    ...     @kernel elementwise
    ...     for i in 0..len:
    ...         out[i] = relu(x[i])
    ... }''', x=np.array([-1.0, 2.0], dtype=np.float32))["y"]
    array([0., 2.], dtype=float32)
"""
from .api import Program, compile, load, run
from .devices import compute_devices
from .errors import ZynMLError
from .futures import Future, wait_all, wait_any
from .graphs import Graph, capture
from .memory import allocate, memory_pool
from .streams import Stream, stream
from .device_api import BUILTINS as _BUILTINS, Device, DeviceAPIError
from .compute_graph import ComputeGraph, OpParams, TensorOp

# the math functions of Device.elementwise's closures: zynml.exp, zynml.where, ...
globals().update(_BUILTINS)

__all__ = ["run", "compile", "load", "Program", "ZynMLError", "compute_devices", "allocate",
           "memory_pool", "Future", "wait_all", "wait_any", "Graph", "capture", "Stream",
           "stream", "Device", "DeviceAPIError", "ComputeGraph", "TensorOp", "OpParams"]
__version__ = "0.1.0"
