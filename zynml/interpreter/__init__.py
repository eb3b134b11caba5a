"""The `cir` reference interpreter: a program's semantics as written, in Python and numpy.

It runs the `cir` module of a program (before any lowering: the loop nests as the source
writes them) element by element, in order, with every tensor read and write
bounds-checked and every integer division checked for zero; a failure is a ZynMLError at
the source line. It is the oracle of the differential tests (zynml/difftest) and a
debugger: `device="interpreter"` runs a program with it, and `print(...)` in a compute
body prints there (docs/language.md).

    fn = InterpreterFunction(compiler.to_cir(checked), source)
    outputs = fn(*arrays)          # main's arguments in order -> its results, as arrays

The stages: translate.py writes each function of the module as Python once (ops.py: the
arith/math ops, scalars.py: their semantics on numpy scalars); runtime.py runs computes
and reductions; sites.py locates failures.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from mlir import ir

from ..errors import SourceFile
from .runtime import Printer, extract_slice, make_compute
from .translate import translate

__all__ = ["InterpreterFunction", "python_source"]


class InterpreterFunction:
    """A `cir` module made callable: positional arrays (main's arguments: tensors, and
    scalars as rank-0 arrays) in, main's results out as numpy arrays."""

    def __init__(self, module: ir.Module, src: Optional[SourceFile] = None, stream=None):
        translation, entry = translate(module, src)
        self.source = translation.source
        namespace = dict(translation.globals)
        sites = translation.sites
        namespace.update(_sites=sites, _print=Printer(sites, stream),
                         _extract_slice=extract_slice)
        exec(compile(self.source, "<zynml interpreter>", "exec"), namespace)
        for k, spec in enumerate(translation.computes):
            namespace[f"_compute{k}"] = make_compute(spec, namespace[spec.body], sites)
        self._entry = namespace[entry]
        self._dtypes = translation.entry_dtypes

    def __call__(self, *arrays) -> list[np.ndarray]:
        if len(arrays) != len(self._dtypes):
            raise TypeError(f"expected {len(self._dtypes)} arguments, got {len(arrays)}")
        args = [_signless(np.asarray(a), d) for a, d in zip(arrays, self._dtypes)]
        with np.errstate(all="ignore"):
            results = self._entry(*args)
        return [np.array(r) for r in results]


def _signless(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """An argument as the module's element type: unsigned integers as the signed integers
    of the same bits (MLIR's integers are signless)."""
    if array.dtype == dtype:
        return array
    if array.dtype.kind == "u" and array.dtype.itemsize == dtype.itemsize:
        return array.view(dtype)
    return array.astype(dtype)


def python_source(module: ir.Module, src: Optional[SourceFile] = None) -> str:
    """The Python the interpreter runs for `module` (to read, or to debug the interpreter)."""
    return translate(module, src)[0].source
