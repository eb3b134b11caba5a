"""Running a translated module: `cir.compute` (the out tensor, the reductions), `print`,
and the few tensor ops of the program function.

A compute allocates `out` with the extents its `out_dims` operands give, zero-filled
(elements no write reaches are 0, as docs/language.md says), and calls its body
function once: the loop nest runs in the order it is written. A `reduce` compute hands
the body a reducer, `_red(position, value[, index])`, which folds each yielded value
into `out[position]` (position: the trip numbers of the loops around the yield but the
reduced one) starting from the operator's identity:

    +  0      *  1      min  +inf / the type's largest      max  -inf / its smallest
    and true  or false  argmin/argmax: the first index of the extreme value (NaN never
                        wins; with none, index 0)

Unsigned reductions (`unsigned` on the compute) compare as unsigned.
"""
from __future__ import annotations

import re
import sys
from typing import Callable

import numpy as np

from . import scalars
from .scalars import maximumf, minimumf, unsigned
from .sites import Sites
from .translate import ComputeSpec

__all__ = ["make_compute", "extract_slice", "Printer"]


def make_compute(spec: ComputeSpec, body: Callable, sites: Sites) -> Callable:
    """The function the program calls for one `cir.compute`: operands in, its value out."""
    out_dims, scalar_result = spec.out_dims, spec.scalar_result

    def run(*operands):
        if spec.results is not None:  # several outputs (or a `mut x`)
            return _outputs(spec, sites, operands, body)
        shape = tuple(int(operands[d]) for d in out_dims)
        if shape and min(shape) < 0:
            sites.bad_extent(spec.site, shape)
        if spec.reduce is None:
            out = np.zeros(shape, spec.dtype)
            body(*operands, out, None)
        else:
            out, red = _reducer(spec, shape, sites)
            body(*operands, out, red)
        return out[()] if scalar_result else out
    return run


def _outputs(spec: ComputeSpec, sites: Sites, operands: tuple, body: Callable) -> tuple:
    """A cir.multi_compute: one array per result, its extents the next of `out_dims`."""
    outs, first = [], 0
    for (dtype, rank), init in zip(spec.results, spec.inits):
        shape = tuple(int(operands[d]) for d in spec.out_dims[first:first + rank])
        first += rank
        if shape and min(shape) < 0:
            sites.bad_extent(spec.site, shape)
        # `mut x` starts from x's values; the body reads x itself, so reads see them
        outs.append(np.array(operands[init], dtype) if init >= 0 else np.zeros(shape, dtype))
    body(*operands, *outs, None)
    return tuple(outs) if len(outs) > 1 else outs[0]


def _identity(op: str, dtype: np.dtype, is_unsigned: bool):
    if op in ("+", "or"):
        return dtype.type(0)
    if op in ("*", "and"):
        return dtype.type(1)
    smallest = op in ("max", "argmax")  # max starts from the smallest value
    if dtype.kind not in "iu":  # floats, bfloat16 included
        return dtype.type(-np.inf if smallest else np.inf)
    if is_unsigned:  # 0, or all ones: the largest unsigned value
        return dtype.type(0 if smallest else -1)
    info = np.iinfo(dtype)
    return dtype.type(info.min if smallest else info.max)


def _reducer(spec: ComputeSpec, shape: tuple, sites: Sites):
    """(the result array, the reducer the body calls)."""
    op, is_unsigned = spec.reduce, spec.unsigned
    dtype = spec.yield_dtype if spec.yield_dtype is not None else spec.dtype
    identity = _identity(op, dtype, is_unsigned)
    key = unsigned if is_unsigned else (lambda v: v)

    def located(array, position):
        sites.out_of_range(spec.yield_site, array, position)

    if op in ("argmin", "argmax"):
        values = np.full(shape, identity, dtype)
        indices = np.zeros(shape, np.int64)
        minimum = op == "argmin"

        def red_arg(position, value, index):
            try:
                best = values[position]
            except IndexError:
                located(indices, position)
            v, b = key(value), key(best)
            if (v < b if minimum else v > b) or (v == b and index < indices[position]):
                values[position] = value
                indices[position] = index
        return indices, red_arg

    out = np.full(shape, identity, dtype)
    combine = _combiner(op, dtype, is_unsigned)

    def red(position, value):
        try:
            out[position] = combine(out[position], value)
        except IndexError:
            located(out, position)
    return out, red


def _combiner(op: str, dtype: np.dtype, is_unsigned: bool) -> Callable:
    if op == "+":
        return lambda a, b: a + b
    if op == "*":
        return lambda a, b: a * b
    if op == "and":
        return lambda a, b: a & b
    if op == "or":
        return lambda a, b: a | b
    if dtype.kind in "iub":
        if is_unsigned:
            return scalars.minui if op == "min" else scalars.maxui
        return (lambda a, b: a if a <= b else b) if op == "min" else \
            (lambda a, b: a if a >= b else b)
    return minimumf if op == "min" else maximumf


def extract_slice(source: np.ndarray, offsets, sizes, strides, shape) -> np.ndarray:
    """tensor.extract_slice: `sizes` elements from `offsets` in steps of `strides`, as
    `shape` (a rank-reducing slice drops unit dimensions)."""
    index = tuple(slice(o, o + (s - 1) * st + 1, st) if s else slice(o, o)
                  for o, s, st in zip(offsets, sizes, strides))
    part = np.array(source[index])
    if all(d >= 0 for d in shape) and part.shape != tuple(shape):
        part = part.reshape(shape)
    return part


_FIELD = re.compile(r"\{\{|\}\}|\{u?\}")


class Printer:
    """`cir.print`: a line on stdout, the statement's location then the values."""

    def __init__(self, sites: Sites, stream=None):
        self.sites = sites
        self.stream = stream

    def __call__(self, k: int, values: tuple) -> None:
        site = self.sites[k]
        remaining = iter(values)

        def field(match: re.Match) -> str:
            text = match.group(0)
            if text in ("{{", "}}"):
                return text[0]
            return scalars.format_value(next(remaining), is_unsigned=text == "{u}")
        line = _FIELD.sub(field, site.detail or "")
        where = f"{site.loc}: " if site.loc is not None else ""
        stream = self.stream or sys.stdout
        stream.write(f"{where}{line}\n")
