"""Recognise the structure of a cir body function (used by cir-to-linalg).

A body is *structured* when it is a perfect nest of `scf.for` loops (from 0, step 1, no
loop-carried values) — the parallel loops P — whose innermost block holds only pure scalar
ops, `cir.load`s, optionally one reduction R (a nest of `scf.for` loops threading one
accumulator, `acc = combine(acc, g)` innermost), and exactly one of:

* `cir.store %v, %out[P...]` — the store form: out[P] = epilogue(R result, loads);
* `cir.yield %v [, %i]` — the yield form of `reduce` kernels.

Anything else yields an `Unstructured` with the reason, which the pass reports.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from mlir import ir

from .cir_ops import constant_int, defining_op, entry_block

# Ops that may appear in a structured body besides loops, loads and the final store/yield.
PURE_PREFIXES = ("arith.", "math.")
PURE_OPS = {"tensor.dim", "cir.load"}

# Combiners recognised in `acc = combine(acc, g)`.
COMBINERS = {"arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf", "arith.maxnumf",
             "arith.minnumf", "arith.addi", "arith.muli", "arith.maxsi", "arith.minsi",
             "arith.maxui", "arith.minui", "arith.andi", "arith.ori"}


@dataclass
class Reduction:
    """`var acc = init; for r...: acc = combine(acc, contribution)`; `result` is its value."""

    loops: list[ir.Operation]
    ivs: list[ir.Value]
    init: ir.Value
    combiner: str
    contribution: ir.Value
    result: ir.Value


@dataclass
class Structured:
    loops: list[ir.Operation]  # P, outer to inner
    ivs: list[ir.Value]
    form: str  # "store" | "yield"
    value: ir.Value  # the stored or yielded value
    index: Optional[ir.Value] = None  # the index of an argmin/argmax yield
    reduction: Optional[Reduction] = None
    store_indices: list[ir.Value] = field(default_factory=list)


@dataclass
class Unstructured:
    reason: str
    location: Optional[ir.Location] = None


def is_pure(op: ir.Operation) -> bool:
    return (op.name.startswith(PURE_PREFIXES) or op.name in PURE_OPS) and not len(op.regions)


def _is_unit_loop(op: ir.Operation) -> bool:
    """scf.for from 0 in steps of 1."""
    return constant_int(op.operands[0]) == 0 and constant_int(op.operands[2]) == 1


def _ops(block: ir.Block) -> list[ir.Operation]:
    return [op.operation for op in block.operations]


def analyze(body: ir.Operation) -> Union[Structured, Unstructured]:
    block = entry_block(body)
    loops, ivs = [], []
    while True:
        ops = _ops(block)[:-1]  # drop the terminator
        nested = [op for op in ops if not is_pure(op)]
        if len(nested) == 1 and nested[0].name == "scf.for" and len(nested[0].results) == 0:
            loop = nested[0]
            if not _is_unit_loop(loop):
                return Unstructured("a parallel loop must run from 0 in steps of 1",
                                    loop.location)
            loops.append(loop)
            block = loop.regions[0].blocks[0]
            ivs.append(block.arguments[0])
            continue
        break
    return _innermost(block, loops, ivs)


def _innermost(block: ir.Block, loops, ivs) -> Union[Structured, Unstructured]:
    ops = _ops(block)[:-1]
    effects = [op for op in ops if op.name in ("cir.store", "cir.yield")]
    others = [op for op in ops if not is_pure(op) and op.name not in ("cir.store", "cir.yield")]
    if len(effects) != 1:
        where = effects[1].location if len(effects) > 1 else None
        return Unstructured(f"the innermost loop body has {len(effects)} stores/yields; "
                            "a structured body has exactly one", where)
    effect = effects[0]
    reduction = None
    for op in others:
        if op.name != "scf.for" or reduction is not None:
            return Unstructured(f"'{op.name}' in the loop body is not a structured "
                                "reduction", op.location)
        reduction = _reduction(op)
        if isinstance(reduction, Unstructured):
            return reduction
    if effect.name == "cir.yield":
        if reduction is not None:
            return Unstructured("a reduction body cannot also hold an inner reduction loop",
                                reduction.loops[0].location)
        operands = list(effect.operands)
        return Structured(loops, ivs, "yield", operands[0],
                          index=operands[1] if len(operands) > 1 else None)
    indices = list(effect.operands[2:])
    if len(indices) != len(ivs) or any(a != b for a, b in zip(indices, ivs)):
        return Unstructured("'out' must be written at the loop variables of the enclosing "
                            "loops, in order", effect.location)
    return Structured(loops, ivs, "store", effect.operands[0], reduction=reduction,
                      store_indices=indices)


def _reduction(outer: ir.Operation) -> Union[Reduction, Unstructured]:
    loops, ivs = [], []
    loop = outer
    init = outer.operands[3] if len(outer.operands) == 4 else None
    while True:
        if len(loop.operands) != 4 or len(loop.results) != 1:
            return Unstructured("a reduction loop must carry exactly one value", loop.location)
        if not _is_unit_loop(loop):
            return Unstructured("a reduction loop must run from 0 in steps of 1",
                                loop.location)
        block = loop.regions[0].blocks[0]
        loops.append(loop)
        ivs.append(block.arguments[0])
        acc = block.arguments[1]
        ops = _ops(block)
        yielded = ops[-1].operands[0]
        inner = [op for op in ops[:-1] if not is_pure(op)]
        if inner:
            nested = inner[0]
            if len(inner) != 1 or nested.name != "scf.for" or len(nested.operands) != 4 \
                    or nested.operands[3] != acc or yielded != nested.results[0]:
                return Unstructured("nested loops of a reduction must thread the "
                                    "accumulator straight through", inner[0].location)
            loop = nested
            continue
        combine = defining_op(yielded)
        if combine is None or combine.name not in COMBINERS:
            return Unstructured("the accumulator must be updated as acc = acc op value "
                                "(op: + * min max and or)", loop.location)
        a, b = combine.operands
        contribution = b if a == acc else a if b == acc else None
        uses = len(list(acc.uses))
        if contribution is None or uses != 1:
            return Unstructured("the accumulator must be used once, in acc = acc op value",
                                combine.location)
        return Reduction(loops, ivs, init, combine.name, contribution, outer.results[0])
