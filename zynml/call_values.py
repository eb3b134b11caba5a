"""How a call's Python values cross into an executable, and its results come back:
numpy arrays, Python scalars (ints as i64, checked), GPU arrays (torch, CuPy, ZynML's
own: passed without a copy), and outputs typed as the program declares them (bools and
unsigned integers cross as i8 / signless; 0-d results of GPU inputs stay on the GPU).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import specialize
from .errors import ZynMLError
from .frontend.symbols import CheckedProgram, is_tensor
from .frontend.types import from_numpy, to_numpy
from .machine_limits import as_i64, check_fits

__all__ = ["as_array", "scalar_outputs", "is_gpu_array", "GpuInput", "argument", "output",
           "check_input_names"]


def check_input_names(given, known: set[str], locs: dict, first_loc, pipelines: list[str],
                      options: tuple[str, ...]) -> None:
    """Every input given is one the program takes (else an error at `first_loc` that
    lists them, and where the program has none, its `pipelines`), and none is missing
    (an error at its declaration; one named like an option of zynml.run says so)."""
    for name in given:
        if name not in known:
            elsewhere = "" if known or not pipelines else \
                " (its pipelines take them: " + \
                ", ".join(f"zynml.compile(source).{p}(...)" for p in pipelines) + ")"
            raise ZynMLError(f"unknown input '{name}'; the program's inputs are: "
                             + (", ".join(sorted(known)) or "(none)") + elsewhere, first_loc)
    for name in known:
        if name not in given:
            hint = (f"; zynml.run's {name}= is an option, not this input: pass the inputs "
                    f"as a dict, zynml.run(source, {{'{name}': ...}})"
                    if name in options else "")
            raise ZynMLError(f"missing input '{name}'{hint}", locs.get(name))


def as_array(name: str, value: Any, loc) -> np.ndarray:
    if isinstance(value, specialize.ShapeOnly):  # `zynml compile --shape`: no data
        return value
    if isinstance(value, np.generic):  # numpy scalars keep their dtype (np.float64 is a float)
        return np.asarray(value)
    if isinstance(value, bool):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(value, int):
        return as_i64(name, value, loc)
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float32)
    try:
        array = np.asarray(value)
    except Exception as err:  # an object numpy cannot view
        raise ZynMLError(f"input '{name}' is not an array: {err}", loc) from None
    if from_numpy(array.dtype) is None:
        raise ZynMLError(f"input '{name}' has dtype {array.dtype}, which ZynML does not "
                         "support (f16, bf16, f32, f64, i8..i64, u8..u64, bool)", loc)
    return array


def scalar_outputs(checked: CheckedProgram):
    """For the fast calls of `checked` (GPU arrays in, out): outputs by name -> with bool
    and unsigned scalars read as their type (they cross as int8 / signless); None when
    there are none: other results, 0-d ones too, pass as they are."""
    scalars = [n for n in checked.flat_outputs()
               if _retyped(next(s for s in checked.steps if s.target == n).ty)]
    if not scalars:
        return None

    def finish(results: dict[str, Any]) -> dict[str, Any]:
        for name in scalars:
            results[name] = output(results[name], checked, name)
        return results
    return finish


def _retyped(ty) -> bool:
    return not is_tensor(ty) and (ty.is_bool or to_numpy(ty).kind == "u")


def is_gpu_array(value: Any) -> bool:
    from .runtime.cuda.device_array import is_gpu_array as on_gpu  # numpy only
    return on_gpu(value)


class GpuInput:
    """A GPU array argument (torch, cupy, DeviceArray...): its shape and dtype, no copy."""

    def __init__(self, value: Any):
        from .runtime.cuda.device_array import gpu_array_spec
        self.value = value
        self.shape, self.dtype = gpu_array_spec(value)
        self.ndim = len(self.shape)


def argument(name: str, array: Any, checked: CheckedProgram) -> Any:
    ty = checked.inputs[name]
    if isinstance(array, GpuInput):
        return array.value
    if is_tensor(ty):
        try:
            return np.ascontiguousarray(array)
        except MemoryError:  # smaller than the machine (checked), larger than what is free
            raise ZynMLError(f"not enough free memory to copy input '{name}' (shape "
                             f"{'x'.join(map(str, array.shape))}, {array.dtype}) into one "
                             "block", checked.input_locs.get(name)) from None
    if ty.is_bool:  # bool scalars cross as i8 (cirgen/program.py)
        return np.asarray(array, dtype=np.int8).reshape(())
    # a float parameter declared f16/bf16 takes the number given (a Python float is f32)
    return np.asarray(array, dtype=to_numpy(ty) if ty.is_float else array.dtype).reshape(())


def output(value: np.ndarray, checked: CheckedProgram, name: str) -> Any:
    step = next(s for s in checked.steps if s.target == name)
    dtype = to_numpy(step.ty.dtype if is_tensor(step.ty) else step.ty)
    if dtype.kind == "u" and value.dtype.kind == "i" and isinstance(value, np.ndarray):
        value = value.view(dtype)  # signless in IREE: same bits
    if is_tensor(step.ty):
        return value
    if is_gpu_array(value):  # computed on GPU arrays: it stays there (no wait), 0-d
        return value.view(dtype)
    scalar = np.asarray(value).reshape(())[()]  # a numpy scalar
    return np.bool_(scalar) if step.ty.is_bool else scalar


def check_outputs_fit(checked: CheckedProgram, kind: str) -> None:
    """Host outputs (`kind` cpu, interpreter) larger than memory: an error before a run."""
    if kind not in ("cpu", "interpreter"):
        return
    outputs = set(checked.flat_outputs())
    for step in checked.steps:
        if step.target in outputs and is_tensor(step.ty) and \
                step.ty.shape is not None and None not in step.ty.shape:
            check_fits(f"output '{step.target}'", step.ty.shape, to_numpy(step.ty.dtype),
                       step.loc)
