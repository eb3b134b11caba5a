"""A compiled CUDA artifact as a callable: arguments in, results out.

Arguments may be numpy arrays (copied to the GPU), ZynML DeviceArrays, or any GPU array
with `__cuda_array_interface__` (PyTorch, CuPy, pycuda, numba: used in place, no copy), or
with DLPack where the interface cannot name the dtype (bfloat16; device_array.py).
If any argument already lives on the GPU the results stay there (DeviceArrays);
otherwise they come back as numpy arrays.

`FastCalls` is zynml.Program's per-call fast path: a call whose GPU arrays match the
signature of one that went through the checks before goes straight to the plan's
launches (`_FlatPlan.run`), with the arrays' device pointers read once. Numbers go to
the kernels as parameters, by value (scalar inputs of the plan); a program that updates
inputs in place (`mut`) takes it too, its guard checking their aliasing.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import call_context
from .artifact import CudaArtifact
from .device_array import (DeviceArray, _interface, _numpy_dtype, dtype_name, from_cuda_array,
                           is_gpu_array)
from .driver import get_device
from .executor import PlanExecutor
from . import plan_at_sizes

__all__ = ["CudaFunction", "FastCalls", "is_gpu_array"]


class CudaFunction:
    def __init__(self, artifact: CudaArtifact, ordinal: int = 0):
        self.artifact = artifact
        self.device = get_device(ordinal)
        image = artifact.image(self.device.info.compute_capability)
        self.executor = PlanExecutor(artifact.plan, image if artifact.ptx else b"",
                                     artifact.globals, self.device, artifact.ptx)
        self.specs = artifact.plan["inputs"]

    def __call__(self, *args: Any) -> list[Any]:
        if len(args) != len(self.specs):
            raise TypeError(f"expected {len(self.specs)} arguments, got {len(args)}")
        on_gpu = any(is_gpu_array(a) for a in args)
        stream = call_context.current()  # a Stream (streams.py), or None
        values = [self._argument(i, spec, arg) for i, (spec, arg) in
                  enumerate(zip(self.specs, args))]
        if stream is not None:  # results stay on the GPU: the call does not wait
            return self.executor.run_plan(values, queue=stream)
        results = self.executor(values, self._fixed_plan(values))
        if on_gpu:
            return results
        host = [r.numpy() if isinstance(r, DeviceArray) else r for r in results]
        return host

    def _fixed_plan(self, values: list) -> Any:
        """A plan with run-time sizes or branches (a launch chosen by the call's sizes or
        integers) fixed at this call's shapes and held integers, made once per set
        (plan_at_sizes.flat_at): a loaded artifact's calls take the fast path too."""
        if self.executor.flat is not None:
            return None
        return plan_at_sizes.flat_at(self.executor, [
            tuple(v.shape) if spec["kind"] == "tensor" else v
            for spec, v in zip(self.specs, values)])

    def _argument(self, index: int, spec: dict, arg: Any) -> Any:
        if spec["kind"] == "scalar":
            value = np.asarray(arg).reshape(())[()]
            return value.item() if hasattr(value, "item") else value
        if isinstance(arg, DeviceArray):
            array = arg
        elif is_gpu_array(arg):
            array = from_cuda_array(arg, self.device)
        else:
            if getattr(call_context.current(), "capturing", False):  # zynml/graphs.py
                raise ValueError(f"argument {index} is on the host: a captured call "
                                 "takes GPU arrays")
            host = np.require(arg, dtype=_numpy_dtype(spec["dtype"]), requirements="C")
            array = DeviceArray.from_numpy(host, self.device)
        if not _fits(tuple(array.shape), spec["shape"]) or \
                _signless(dtype_name(array.dtype)) != _signless(spec["dtype"]):
            raise ValueError(f"argument {index}: expected {spec['dtype']}{spec['shape']}, "
                             f"got {dtype_name(array.dtype)}{list(array.shape)}")
        if array.ptr % INPUT_ALIGNMENT:  # a fresh allocation is aligned
            if getattr(call_context.current(), "capturing", False):  # the copy would go
                raise ValueError(f"argument {index} starts at an address not a multiple "
                                 f"of {INPUT_ALIGNMENT}: a captured call takes it as it is")
            array = array.to_device(f"cuda:{array.device.ordinal}")
        return array


def _fits(shape: tuple, spec_shape: list) -> bool:
    """An array's shape against a plan input's, where None is a run-time size."""
    return len(shape) == len(spec_shape) and \
        all(want is None or got == want for got, want in zip(shape, spec_shape))


# Kernels may read inputs 16 bytes at a time (vector loads, cp.async, TMA): a GPU input
# that starts elsewhere (a view at an odd offset) is copied first, on the checked path.
INPUT_ALIGNMENT = 16


_TORCH, _DEVICE_ARRAY, _INTERFACE, _INT, _FLOAT = range(5)
_KINDS: dict[type, int] = {int: _INT, float: _FLOAT, DeviceArray: _DEVICE_ARRAY}


def _kind(cls: type) -> int:
    if hasattr(cls, "data_ptr") and hasattr(cls, "is_contiguous"):
        return _TORCH  # data_ptr() and its attributes: far cheaper than the interface
    return _INTERFACE  # read per call: it may be an instance attribute, or missing


def _key(inputs: dict[str, Any], static: frozenset = frozenset()) -> tuple | None:
    """The signature of a call whose tensors are all C-contiguous GPU arrays, else None
    (the guard generated for it, `_guarded_source`, also checks their alignment):
    per input in the order given, (name, type, shape, dtype) of an array, (name, float)
    of a float, (name, int, value) of an int in `static` (a size or an index: programs
    specialize on them), (name, int, None) of another int (a run-time argument)."""
    key: list = []
    for name, value in inputs.items():
        cls = type(value)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _KINDS[cls] = _kind(cls)
        if kind == _TORCH:
            if not value.is_cuda or not value.is_contiguous():
                return None
            key.append((name, cls, value.shape, value.dtype))
        elif kind == _DEVICE_ARRAY:
            key.append((name, cls, value.shape, value._dtype_name))
        elif kind == _INTERFACE:
            iface = _interface(value)  # None for bfloat16: DLPack, on the checked path
            if iface is None or iface.get("strides") is not None:
                return None
            key.append((name, cls, iface["shape"], iface["typestr"]))
        elif kind == _INT:
            key.append((name, int, value if name in static else None))
        else:
            key.append((name, float))
    return tuple(key)


class FastCalls:
    """Calls of a program with GPU arrays, by the signature (`_key`) of a call that went
    through the checks before (`add`), straight to the plan's launches. The signature
    called last is tried first, by code generated for it (`_guarded_source`): it checks
    each input as `_key` would and hands the pointers to the plan's `run`."""

    def __init__(self, static: frozenset = frozenset(), mutated: Sequence[str] = ()):
        self._calls: dict[tuple, tuple[Any, bool]] = {}  # key -> (call, guarded)
        self._last: Any = None  # the guarded call of the signature called last
        self._static = frozenset(static)  # int inputs compiled by value (sizes, indices)
        # inputs updated in place (`mut`): only guarded calls, which check their aliasing
        # and return the caller's arrays, as zynml/inplace.py does on the checked path
        self._mutated = tuple(mutated)

    def _call_fast(self, inputs: dict[str, Any]) -> dict[str, Any] | None:
        """The outputs by name, or None: not seen, or not all GPU arrays."""
        last = self._last
        if last is not None:
            outputs = last(inputs)
            if outputs is not None:
                return outputs
        key = _key(inputs, self._static)
        if key is None:
            return None
        try:
            entry = self._calls.get(key)
        except TypeError:  # a duck-typed array with an unhashable shape
            return None
        if entry is None:
            return None
        call, guarded = entry
        if guarded:
            self._last = call
        return call(inputs)

    call = _call_fast  # while a stream or capture is in use anywhere: see below

    def _call_outside_contexts(self, inputs: dict[str, Any]) -> dict[str, Any] | None:
        """`call` while some thread uses a stream or captures a graph: calls of this
        thread inside one take the checked path, which runs on the stream."""
        if call_context.current() is not None:
            return None
        return self._call_fast(inputs)

    def add(self, inputs: dict[str, Any], function: CudaFunction, names: Sequence[str],
            output_names: Sequence[str], finish: Any = None) -> None:
        """Calls like `inputs` (just run through the checks) go to `function` (its
        arguments: the inputs `names`) from now on; `finish` (outputs by name -> outputs
        by name) post-processes scalars."""
        specs, flat = function.specs, function.executor.flat
        held = plan_at_sizes.held_inputs(function.executor)
        if held:
            # run-time sizes computed from int inputs: the fast path at fixed sizes
            # holds their values, so its signature takes them by value
            self._static |= {names[i] for i in held}
        key = _key(inputs, self._static)
        if key is None or sorted(part[0] for part in key) != sorted(names):
            return
        try:
            hash(key)
        except TypeError:  # a duck-typed array with an unhashable shape
            return
        numbers = {part[0]: part[1] is int or part[1] is float for part in key}
        if flat is None:  # run-time sizes: the plan at these sizes (plan_at_sizes.py)
            flat = plan_at_sizes.flat_at(function.executor,
                                         [_shape_or_number(inputs[name]) for name in names])
            specs = flat.plan["inputs"] if flat is not None else specs
        fits = all(numbers[name] if spec["kind"] == "scalar" else
                   not numbers[name] or not spec["shape"] for spec, name in zip(specs, names))
        updated = self._updated(function, output_names, numbers)
        if flat is not None and finish is None and fits and not all(numbers.values()) \
                and updated is not None:
            # a number for a 0-d tensor (a 16-bit float) goes as a device copy; the
            # other numbers are kernel parameters (zynml/api.py, Program._by_value)
            constants = {name: _Constant(function.device, spec["dtype"])
                         for spec, name in zip(specs, names)
                         if numbers[name] and spec["kind"] == "tensor"}
            nbytes = {name: _count(spec["shape"]) * _numpy_dtype(spec["dtype"]).itemsize
                      for spec, name in zip(specs, names) if spec["kind"] == "tensor"}
            source, namespace = _guarded_source(key, names, constants, output_names,
                                                self._mutated, updated, nbytes)
            namespace["run"] = flat.run
            exec(compile(source, "<zynml fast call>", "exec"), namespace)
            self._calls[key] = (namespace["call"], True)
            return
        if self._mutated:  # the checked path checks aliasing and writes back
            return

        def call(inputs: dict[str, Any]) -> dict[str, Any]:
            results = dict(zip(output_names, function(*[inputs[n] for n in names])))
            return finish(results) if finish is not None else results
        self._calls[key] = (call, False)

    def _updated(self, function: CudaFunction, output_names: Sequence[str],
                 numbers: dict[str, bool]) -> dict[str, str] | None:
        """{output: the input it is} of the outputs the kernels wrote in place (`mut`);
        None when an input updated in place is a number, or its output has a buffer of
        its own (the checked path copies it into the caller's array)."""
        if any(numbers.get(name, True) for name in self._mutated):
            return None
        plan = function.artifact.plan
        updated = {output_names[k]: plan["input_names"][spec["updates"]]
                   for k, spec in enumerate(plan["outputs"]) if "updates" in spec}
        if any(name in output_names and updated.get(name) != name
               for name in self._mutated):
            return None
        return updated


def _contexts_active(active: bool) -> None:
    # no per-call test on the fast path while no stream or capture is in use anywhere
    FastCalls.call = FastCalls._call_outside_contexts if active else FastCalls._call_fast


call_context.on_contexts_active(_contexts_active)


def _shape_or_number(value: Any) -> Any:
    """An input of a signature `_key` accepted, as plan_at_sizes.flat_at takes it: a
    tensor's shape (a tuple), or the number itself."""
    kind = _KINDS.get(type(value))
    if kind == _INTERFACE:
        return tuple(_interface(value)["shape"])
    if kind in (_TORCH, _DEVICE_ARRAY):
        return tuple(value.shape)
    return value


def _signless(dtype: str) -> str:
    """The plan's dtype of an integer array: MLIR's integers are signless, so a u32 input
    is the plan's int32 (the kernels know it is unsigned)."""
    return dtype[1:] if dtype.startswith("uint") else dtype


def _count(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _guarded_source(key: tuple, names: Sequence[str], constants: dict[str, Any],
                    output_names: Sequence[str], mutated: Sequence[str] = (),
                    updated: dict[str, str] | None = None,
                    nbytes: dict[str, int] | None = None) -> tuple[str, dict[str, Any]]:
    """`call(inputs) -> outputs, or None` for the signature `key`, as Python, and the
    values it names. An input updated in place (`mutated`) must share no byte (`nbytes`
    per tensor input) with another input, else None (the checked path says why); an
    output written into its input (`updated`: output -> input) is the caller's array.
    For torch tensors x and y (in this order) and one output z:

        def call(inputs):
            if len(inputs) != 2:
                return None
            try:
                v0 = inputs['x']
                v1 = inputs['y']
            except KeyError:
                return None
            if not (type(v0) is type0 and v0.is_cuda and v0.is_contiguous()
                    and v0.shape == shape0 and v0.dtype == dtype0):
                return None
            p0 = v0.data_ptr()
            if not (not p0 % 16):
                return None
            ...
            results = run([p0, p1])
            return {'z': results[0]}
    """
    bound: dict[str, Any] = {}
    code = ["def call(inputs):", f"    if len(inputs) != {len(key)}:", "        return None",
            "    try:"]
    code += [f"        v{k} = inputs[{part[0]!r}]" for k, part in enumerate(key)]
    code += ["    except KeyError:", "        return None"]
    argument = {}  # input name -> the expression of its plan argument
    for k, part in enumerate(key):
        name, v = part[0], f"v{k}"
        if part[1] is int and part[2] is None:  # a run-time argument: any i64
            check = f"type({v}) is int and {-2 ** 63} <= {v} < {2 ** 63}"
            argument[name] = v
        elif part[1] is int:
            bound[f"value{k}"] = part[2]
            check = f"type({v}) is int and {v} == value{k}"
            argument[name] = v
        elif part[1] is float:
            check = f"type({v}) is float"
            argument[name] = v
        else:
            _, cls, shape, dtype = part
            bound[f"type{k}"], bound[f"shape{k}"], bound[f"dtype{k}"] = cls, shape, dtype
            kind = _KINDS[cls]
            if kind == _TORCH:
                check = (f"type({v}) is type{k} and {v}.is_cuda and {v}.is_contiguous() "
                         f"and {v}.shape == shape{k} and {v}.dtype == dtype{k}")
                pointer = f"{v}.data_ptr()"
            elif kind == _DEVICE_ARRAY:
                check = (f"type({v}) is type{k} and {v}.shape == shape{k} "
                         f"and {v}._dtype_name == dtype{k}")
                pointer = f"{v}.ptr"
            else:
                bound["interface"] = _interface
                code += [f"    if type({v}) is not type{k}:", "        return None",
                         f"    i{k} = interface({v})"]
                check = (f"i{k} is not None and i{k}.get('strides') is None "
                         f"and i{k}['shape'] == shape{k} and i{k}['typestr'] == dtype{k}")
                pointer = f"i{k}['data'][0]"
            # a misaligned view goes to the checked path, which copies it (INPUT_ALIGNMENT)
            code += [f"    if not ({check}):", "        return None",
                     f"    p{k} = {pointer}"]
            check = f"not p{k} % {INPUT_ALIGNMENT}"
            argument[name] = f"p{k}"
        code += [f"    if not ({check}):", "        return None"]
    code += _aliasing_guard(mutated, argument, nbytes or {})
    for k, name in enumerate(names):
        if name in constants:
            bound[f"constant{k}"] = constants[name]
            argument[name] = f"constant{k}({argument[name]})"
    given = {part[0]: f"v{k}" for k, part in enumerate(key)}
    updated = updated or {}
    code.append("    results = run([" + ", ".join(argument[name] for name in names) + "])")
    code.append("    return {" + ", ".join(
        f"{name!r}: " + (given[updated[name]] if name in updated else f"results[{k}]")
        for k, name in enumerate(output_names)) + "}")
    return "\n".join(code) + "\n", bound


def _aliasing_guard(mutated: Sequence[str], pointer: dict[str, str],
                    nbytes: dict[str, int]) -> list[str]:
    """Lines that return None (to the checked path, which raises the located error) when
    an input updated in place overlaps another input, by their byte ranges: the rule of
    zynml/inplace.py's check_updatable, on the pointers the guard has read."""
    code, seen = [], set()
    for name in mutated:
        for other, size in nbytes.items():
            pair = frozenset((name, other))
            if other == name or pair in seen or not size or not nbytes.get(name):
                continue
            seen.add(pair)
            a, b = pointer[name], pointer[other]
            code += [f"    if {a} < {b} + {size} and {b} < {a} + {nbytes[name]}:",
                     "        return None"]
    return code


class _Constant:
    """A 0-d tensor input given as a Python number (a 16-bit float, which kernels do not
    take by value, or a plan compiled without shapes): one device copy, uploaded again
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


def named_call(function: CudaFunction, inputs: dict[str, Any], call=None,
               output_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Call with inputs by name (the plan's input names); outputs by name. `call`, when
    given, runs in place of `function` (a checks.CheckedFunction around it), giving
    `output_names`."""
    plan = function.artifact.plan
    names: Sequence[str] = plan["input_names"]
    missing = [n for n in names if n not in inputs]
    unknown = [n for n in inputs if n not in names]
    if missing or unknown:
        raise TypeError(f"inputs {sorted(names)} expected; missing {missing}, unknown {unknown}")
    results = (call or function)(*[inputs[n] for n in names])
    return dict(zip(plan["output_names"] if output_names is None else output_names, results))
