"""A compiled CUDA artifact as a callable: arguments in, results out.

Arguments may be numpy arrays (copied to the GPU), ZynML DeviceArrays, or any GPU array
with `__cuda_array_interface__` (PyTorch, CuPy, pycuda, numba: used in place, no copy), or
with DLPack where the interface cannot name the dtype (bfloat16; device_array.py).
If any argument already lives on the GPU the results stay there (DeviceArrays);
otherwise they come back as numpy arrays.

`FastCalls` is zynml.Program's per-call fast path: a call whose GPU arrays match the
signature of one that went through the checks before goes straight to the plan's
launches (`_FlatPlan.run`), with the arrays' device pointers read once.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .artifact import CudaArtifact
from .device_array import (DeviceArray, _interface, _numpy_dtype, dtype_name, from_cuda_array,
                           is_gpu_array)
from .driver import get_device
from .executor import PlanExecutor

__all__ = ["CudaFunction", "FastCalls", "is_gpu_array"]


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

    def _argument(self, index: int, spec: dict, arg: Any) -> Any:
        if spec["kind"] == "scalar":
            value = np.asarray(arg).reshape(())[()]
            return value.item() if hasattr(value, "item") else value
        if isinstance(arg, DeviceArray):
            array = arg
        elif is_gpu_array(arg):
            array = from_cuda_array(arg, self.device)
        else:
            host = np.require(arg, dtype=_numpy_dtype(spec["dtype"]), requirements="C")
            array = DeviceArray.from_numpy(host, self.device)
        if tuple(array.shape) != tuple(spec["shape"]) or \
                dtype_name(array.dtype) != spec["dtype"]:
            raise ValueError(f"argument {index}: expected {spec['dtype']}{spec['shape']}, "
                             f"got {dtype_name(array.dtype)}{list(array.shape)}")
        if array.ptr % INPUT_ALIGNMENT:  # a fresh allocation is aligned
            array = array.to_device(f"cuda:{array.device.ordinal}")
        return array


# Kernels may read inputs 16 bytes at a time (vector loads, cp.async, TMA): a GPU input
# that starts elsewhere (a view at an odd offset) is copied first, on the checked path.
INPUT_ALIGNMENT = 16


_TORCH, _DEVICE_ARRAY, _INTERFACE, _INT, _FLOAT = range(5)
_KINDS: dict[type, int] = {int: _INT, float: _FLOAT, DeviceArray: _DEVICE_ARRAY}


def _kind(cls: type) -> int:
    if hasattr(cls, "data_ptr") and hasattr(cls, "is_contiguous"):
        return _TORCH  # data_ptr() and its attributes: far cheaper than the interface
    return _INTERFACE  # read per call: it may be an instance attribute, or missing


def _read(inputs: dict[str, Any]) -> tuple[tuple, list] | None:
    """(key, args) of a call whose tensors are all C-contiguous GPU arrays starting on 16
    bytes, else None.
    key: per input in the order given, (name, shape, dtype) of an array, (name, float)
    of a float, (name, int, value) of an int (programs specialize on them); args: the
    arrays' device pointers and the numbers, in the same order."""
    key: list = []
    args: list = []
    for name, value in inputs.items():
        cls = type(value)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _KINDS[cls] = _kind(cls)
        if kind == _TORCH:
            if not value.is_cuda or not value.is_contiguous():
                return None
            ptr = value.data_ptr()
            key.append((name, value.shape, value.dtype))
        elif kind == _DEVICE_ARRAY:
            ptr = value.ptr
            key.append((name, value.shape, value._dtype_name))
        elif kind == _INTERFACE:
            iface = _interface(value)  # None for bfloat16: DLPack, on the checked path
            if iface is None or iface.get("strides") is not None:
                return None
            ptr = iface["data"][0]
            key.append((name, iface["shape"], iface["typestr"]))
        if kind <= _INTERFACE:  # a tensor
            if ptr % INPUT_ALIGNMENT:
                return None  # the checked path copies it to an aligned buffer
            args.append(ptr)
            continue
        if kind == _INT:
            key.append((name, int, value))
            args.append(value)
        else:
            key.append((name, float))
            args.append(value)
    return tuple(key), args


class FastCalls:
    """Calls of a program with GPU arrays, by the signature of a call that went through
    the checks before (`add`): straight to the plan's launches. The key (`_read`) holds
    every input's name, shape and dtype, so a call of any other signature misses."""

    def __init__(self):
        self._calls: dict[tuple, Any] = {}

    def call(self, inputs: dict[str, Any]) -> dict[str, Any] | None:
        """The outputs by name, or None: not seen, or not all GPU arrays."""
        read = _read(inputs)
        if read is None:
            return None
        try:
            call = self._calls.get(read[0])
        except TypeError:  # a duck-typed array with an unhashable shape
            return None
        return None if call is None else call(inputs, read[1])

    def add(self, inputs: dict[str, Any], function: CudaFunction, names: Sequence[str],
            output_names: Sequence[str], finish: Any = None) -> None:
        """Calls like `inputs` (just run through the checks) go to `function` (its
        arguments: the inputs `names`) from now on; `finish` (outputs by name -> outputs
        by name) post-processes scalars."""
        read = _read(inputs)
        if read is None:
            return
        key, _ = read
        given = [part[0] for part in key]
        if sorted(given) != sorted(names):
            return
        order = [given.index(name) for name in names]  # plan position -> given position
        numbers = [part[1] is int or part[1] is float for part in key]
        specs, flat = function.specs, function.executor.flat
        fits = all(numbers[given_at] if spec["kind"] == "scalar" else
                   not numbers[given_at] or not spec["shape"]
                   for spec, given_at in zip(specs, order))
        if flat is not None and finish is None and fits and not all(numbers):
            # a number for a 0-d tensor (a `float` parameter) goes as a device copy
            constants = [(index, _Constant(function.device, spec["dtype"]))
                         for index, (spec, given_at) in enumerate(zip(specs, order))
                         if numbers[given_at] and spec["kind"] == "tensor"]
            self._calls[key] = _flat_call(flat.run, order, constants, list(output_names))
            return

        def call(inputs: dict[str, Any], _args: list) -> dict[str, Any]:
            results = dict(zip(output_names, function(*[inputs[n] for n in names])))
            return finish(results) if finish is not None else results
        self._calls[key] = call


def _flat_call(run, order: list[int], constants: list, output_names: list[str]):
    permute = order != list(range(len(order)))
    single = output_names[0] if len(output_names) == 1 else None

    def call(inputs: dict[str, Any], args: list) -> dict[str, Any]:
        if permute:
            args = [args[i] for i in order]
        for index, constant in constants:
            args[index] = constant(args[index])
        results = run(args)
        return {single: results[0]} if single is not None else dict(zip(output_names, results))
    return call


class _Constant:
    """A 0-d tensor input given as a Python number: one device copy, uploaded again
    (stream-ordered, after the launches that read the old value) only when another
    number object comes: `is`, since 0.0 == -0.0."""

    _NONE = object()

    def __init__(self, device, dtype: str):
        self.device, self.value = device, self._NONE
        self.host = np.zeros((), _numpy_dtype(dtype))
        self.array = DeviceArray.empty((), dtype, device)

    def __call__(self, value: Any) -> int:
        if value is not self.value:
            self.host[()] = value
            # pageable memory: the driver has taken the bytes when the call returns
            self.device.copy_to_device(self.array.ptr, self.host.ctypes.data,
                                       self.host.nbytes)
            self.value = value
        return self.array.ptr


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
