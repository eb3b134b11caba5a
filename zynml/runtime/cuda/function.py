"""A compiled CUDA artifact as a callable: arguments in, results out.

Arguments may be numpy arrays (copied to the GPU), ZynML DeviceArrays, or any GPU array
with `__cuda_array_interface__` (PyTorch, CuPy, pycuda, numba: used in place, no copy).
If any argument already lives on the GPU the results stay there (DeviceArrays);
otherwise they come back as numpy arrays.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .artifact import CudaArtifact
from .device_array import DeviceArray, _numpy_dtype, dtype_name, from_cuda_array
from .driver import get_device
from .executor import PlanExecutor

__all__ = ["CudaFunction", "is_gpu_array"]


def is_gpu_array(value: Any) -> bool:
    return isinstance(value, DeviceArray) or hasattr(value, "__cuda_array_interface__")


class CudaFunction:
    def __init__(self, artifact: CudaArtifact, ordinal: int = 0):
        self.artifact = artifact
        self.device = get_device(ordinal)
        image = artifact.image(self.device.info.compute_capability)
        self.executor = PlanExecutor(artifact.plan, image if artifact.ptx else b"",
                                     artifact.globals, self.device)
        self.specs = artifact.plan["inputs"]

    def __call__(self, *args: Any) -> list[Any]:
        if len(args) != len(self.specs):
            raise TypeError(f"expected {len(self.specs)} arguments, got {len(args)}")
        on_gpu = any(is_gpu_array(a) for a in args)
        values = [self._argument(i, spec, arg) for i, (spec, arg) in
                  enumerate(zip(self.specs, args))]
        results = self.executor(values)
        if on_gpu:
            return results
        host = [r.numpy() if isinstance(r, DeviceArray) else r for r in results]
        return host

    def call_checked(self, args: Sequence[Any]) -> list[Any]:
        """The fast path: GPU arrays whose shapes and dtypes the caller has already
        matched against the plan (zynml.Program's per-signature cache); no copies, no
        checks, results stay on the GPU."""
        if self.executor.flat is None:
            return self(*args)
        # (not is_gpu_array: torch computes __cuda_array_interface__ on every access)
        return self.executor([
            a if spec["kind"] != "tensor" else
            self._argument(i, spec, a) if isinstance(a, (int, float)) else _pointer(a)
            for i, (a, spec) in enumerate(zip(args, self.specs))])

    def _argument(self, index: int, spec: dict, arg: Any) -> Any:
        if spec["kind"] == "scalar":
            value = np.asarray(arg).reshape(())[()]
            return value.item() if hasattr(value, "item") else value
        if isinstance(arg, DeviceArray):
            array = arg
        elif hasattr(arg, "__cuda_array_interface__"):
            array = from_cuda_array(arg, self.device)
        else:
            host = np.require(arg, dtype=_numpy_dtype(spec["dtype"]), requirements="C")
            array = DeviceArray.from_numpy(host, self.device)
        if tuple(array.shape) != tuple(spec["shape"]) or \
                dtype_name(array.dtype) != spec["dtype"]:
            raise ValueError(f"argument {index}: expected {spec['dtype']}{spec['shape']}, "
                             f"got {dtype_name(array.dtype)}{list(array.shape)}")
        return array


def _pointer(arg: Any) -> Any:
    if isinstance(arg, DeviceArray):
        return arg
    data_ptr = getattr(arg, "data_ptr", None)  # torch: much cheaper than the interface
    if data_ptr is not None and callable(data_ptr):
        return _Borrowed(data_ptr())
    return _Borrowed(arg.__cuda_array_interface__["data"][0])


class _Borrowed:
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr


def named_call(function: CudaFunction, inputs: dict[str, Any]) -> dict[str, Any]:
    """Call with inputs by name (the plan's input names); outputs by name."""
    plan = function.artifact.plan
    names: Sequence[str] = plan["input_names"]
    missing = [n for n in names if n not in inputs]
    unknown = [n for n in inputs if n not in names]
    if missing or unknown:
        raise TypeError(f"inputs {sorted(names)} expected; missing {missing}, unknown {unknown}")
    results = function(*[inputs[n] for n in names])
    return dict(zip(plan["output_names"], results))
