"""Fast calls of a CPU (IREE) program: numpy arrays of a signature seen before go
straight to the compiled function.

A call through `Program._run` checks every input (a GPU array? a supported dtype? does
it fit in memory? which executable?) and finds each output's type: about 60 µs of Python
on this project's 2-core machine for a 1024-element program.
Once such a call has succeeded, `HostCalls.add` keeps its signature (`_key`: per input,
its name and array type, dtype and shape, or the kind of its number), and later calls of
the same signature skip the checks: the arrays are handed to the same IreeFunction, which
converts layout and byte order as on the checked path, and the outputs are finished as
`call_values.output` would. Anything else (a new shape or dtype, a list, a GPU array, a
numpy subclass, a capture block) returns None and takes the checked path.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .call_values import argument, as_array, output
from .frontend.symbols import CheckedProgram, is_tensor
from .frontend.types import to_numpy
from .inplace import check_updatable, write_back
from .runtime import call_context

__all__ = ["HostCalls"]

_ndarray = np.ndarray
_NUMBERS = (int, float, bool)


def _key(inputs: dict[str, Any], static: frozenset) -> tuple | None:
    """The signature of a call whose inputs are all numpy arrays or numbers, else None:
    per input in the order given, (name, dtype, shape) of an array, (name, type, value) of
    a number, with the value None unless the front end compiles it in (`static`)."""
    key = []
    for name, value in inputs.items():
        cls = type(value)
        if cls is _ndarray:
            key.append((name, value.dtype, value.shape))
        elif cls in _NUMBERS or isinstance(value, np.generic):
            key.append((name, cls, value if name in static else None))
        else:
            return None
    return tuple(key)


def _finisher(checked: CheckedProgram, name: str) -> Callable[[np.ndarray], Any] | None:
    """What `call_values.output` does to result `name`, or None where it returns the
    result as it is (a tensor of a signed or float dtype: the usual case)."""
    ty = next(s for s in checked.steps if s.target == name).ty
    if is_tensor(ty) and to_numpy(ty.dtype).kind != "u":
        return None
    return lambda value: output(value, checked, name)


class HostCalls:
    """The signatures of a Program's successful CPU calls, each bound to its function."""

    def __init__(self, generic: CheckedProgram, shapes: Any):
        """generic: the program checked without shapes; shapes: its Specializations
        (zynml/specialize.py), whose executables `add` finds and whose stats count
        these calls as memory hits."""
        self._calls: dict[tuple, Callable[[dict], dict]] = {}
        self._static = frozenset(generic.static_scalars)  # ints compiled by value (sizes)
        self._mutated = generic.mutated  # `mut` inputs: checked for aliasing, written back
        self._shapes = shapes
        self._count_hit = shapes.count_hit

    def call(self, inputs: dict[str, Any]) -> dict[str, Any] | None:
        """The outputs by name, or None: a signature not seen, or a capture block."""
        key = _key(inputs, self._static)
        if key is None:
            return None
        run = self._calls.get(key)
        if run is None or call_context.current() is not None:
            return None
        self._count_hit()
        if self._mutated:
            check_updatable(self._mutated, inputs)
            return write_back(run(inputs), inputs, self._mutated)
        return run(inputs)

    def add(self, inputs: dict[str, Any], function: Any, *_) -> None:
        """Calls like `inputs` (just run through the checks) go to `function` (one of the
        executables' functions) from now on. The arguments after `function`, what the
        CUDA FastCalls.add takes, are read from the executable's checked program."""
        key = _key(inputs, self._static)
        checked = next((e.checked for e in list(self._shapes.executables.values())
                        if e.function is function), None)
        if key is None or checked is None or sorted(inputs) != sorted(checked.inputs):
            return
        arrays = {name for name, value in inputs.items()
                  if type(value) is _ndarray and is_tensor(checked.inputs[name])}
        if hasattr(function, "routed"):  # runtime/cpu_routing.py: this shape's device
            function = function.routed(*[inputs[name] for name in checked.inputs])
        self._calls[key] = _bound_call(function, checked, arrays)


def _bound_call(function: Any, checked: CheckedProgram,
                arrays: set[str]) -> Callable[[dict], dict]:
    """`run(inputs) -> outputs by name` of one signature: the numpy arrays given for
    tensor parameters (`arrays`) go to `function` as they are (it makes them contiguous
    and native-endian, as on the checked path); numbers and 0-d arrays are converted as
    the checked path converts them (integers range-checked)."""
    names: Sequence[str] = tuple(checked.inputs)
    convert = {name: (lambda value, name=name: argument(
                   name, as_array(name, value, checked.input_locs.get(name)), checked))
               for name in names if name not in arrays}
    outputs = tuple(checked.flat_outputs())
    finishers = [(name, f) for name in outputs
                 if (f := _finisher(checked, name)) is not None]
    if not convert and not finishers:  # the usual case: arrays in, arrays out

        def run_arrays(inputs: dict) -> dict:
            return dict(zip(outputs, function(*[inputs[n] for n in names])))
        return run_arrays

    def run(inputs: dict) -> dict:
        args = [inputs[n] if n not in convert else convert[n](inputs[n]) for n in names]
        results = dict(zip(outputs, function(*args)))
        for name, finish in finishers:
            results[name] = finish(results[name])
        return results
    return run
