"""cir-join-stores: the stores of one loop that together write a whole range become one.

RoPE is written with two stores per pair of elements, either interleaved (GPT-J, the
spec's example) or as the two halves of a row (GPT-NeoX, Hugging Face's Llama):

    for p in 0..n:                          for p in 0..n:
        out[.., 2 * p]     = v0(p)              out[.., p]     = v0(p)
        out[.., 2 * p + 1] = v1(p)              out[.., p + n] = v1(p)

Lowered as written, each store is a generic writing a strided (or offset) part of `out`:
a kernel each on CUDA, a row's loads repeated in each. Together the stores write every
element of `out[.., 0 : 2n]` once, so the loop is rewritten as one over that range, the
store's value chosen by which of the stores wrote that element:

    for e in 0..2 * n:                       for e in 0..2 * n:
        p = e / 2                                p = e % n
        out[.., e] = e % 2 == 0 ? v0(p) : v1(p)  out[.., e] = e / n == 0 ? v0(p) : v1(p)

a plain elementwise store, which a row kernel fuses with the row's other work. Both
values are computed at every element (each is cheap next to the memory it reads).

A loop is joined when it runs from 0 in steps of 1 and carries no values; its stores
to one output are at its top level, alike but for one index, which is `a * p + c`
(the k stores' c covering 0 .. a - 1 with a = k: interleaved) or `p + b * n`, n the loop's
bound (b = 0 .. k - 1: halves, thirds...); nothing else in the loop writes anything or
reads that output. Anything else is left as it is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, scf

from ..lowering.cir_ops import (constant_int, defining_op, is_body_function, ops_in,
                                top_level_funcs)
from ..lowering.cir_terms import Terms

NAME = "cir-join-stores"

_PURE_CIR = ("cir.load",)  # cir ops a joined loop may hold besides its stores


@dataclass
class Options:
    pass


@dataclass
class _Join:
    loop: ir.Operation
    stores: list          # the cir.store ops, in order
    dim: int              # the index that differs between them
    stride: int           # a: interleaved (a = k); 1: blocks of the loop's bound
    parts: list           # per store: its residue (interleaved) or block number


def run(module: ir.Operation, options: Options) -> None:
    for fn in top_level_funcs(module):
        if not is_body_function(fn):
            continue
        # innermost first: a joined loop's ops are copies, its old ones erased, so no
        # loop is looked at after a loop around it was rewritten
        for loop in reversed(list(ops_in(fn, "scf.for"))):
            join = _match(loop)
            if join is not None:
                _rewrite(join)


def _match(loop: ir.Operation) -> Optional[_Join]:
    if len(loop.results) or constant_int(loop.operands[0]) != 0 or \
            constant_int(loop.operands[2]) != 1:
        return None
    body = loop.regions[0].blocks[0]
    stores = [op.operation for op in body.operations if op.operation.name == "cir.store"]
    if len(stores) < 2 or any("combine" in s.attributes for s in stores):
        return None
    out = stores[0].operands[1]
    if any(s.operands[1] != out or len(s.operands) != len(stores[0].operands)
           for s in stores):
        return None
    for op in ops_in(loop):
        if op.name.startswith("cir.") and op.name not in _PURE_CIR and op not in stores:
            return None  # another write (a nested store, a local array)
        if op.name.startswith(("memref.", "func.call")) or \
                op.name == "cir.load" and op.operands[0] == out:
            return None
    # the body recomputes sizes and indices at each use (`d / 2` in the bound and in
    # `p + d / 2` are two ops): compared as trees of what they compute
    terms = Terms()
    differing = [k for k in range(2, len(stores[0].operands))
                 if len({terms.of(s.operands[k]) for s in stores}) > 1]
    if len(differing) != 1:
        return None
    dim = differing[0]
    iv, bound = body.arguments[0], loop.operands[1]
    forms = [_linear(s.operands[dim], iv, terms.of(bound), terms) for s in stores]
    if None in forms:
        return None
    n = constant_int(bound)
    if n is not None:  # a static bound: its multiples are constants
        forms = [(a, c + b * n, 0) for a, c, b in forms]
    k, scales = len(stores), {f[0] for f in forms}
    offsets, blocks = [f[1] for f in forms], [f[2] for f in forms]
    if scales == {k} and not any(blocks) and sorted(offsets) == list(range(k)):
        return _Join(loop, stores, dim - 2, k, offsets)
    if scales != {1}:
        return None
    if n is not None and n > 0 and sorted(offsets) == [b * n for b in range(k)]:
        return _Join(loop, stores, dim - 2, 1, [c // n for c in offsets])
    if not any(offsets) and sorted(blocks) == list(range(k)):
        return _Join(loop, stores, dim - 2, 1, blocks)
    return None


def _linear(index: ir.Value, iv: ir.Value, bound: tuple, terms: Terms, depth: int = 8
            ) -> Optional[tuple[int, int, int]]:
    """`index` as (a, c, b) with index = a * iv + c + b * bound (a, c, b integers; `bound`
    the loop bound's tree in `terms`); None for anything else."""
    if index == iv:
        return 1, 0, 0
    if terms.of(index) == bound:
        return 0, 0, 1
    c = constant_int(index)
    if c is not None:
        return 0, c, 0
    op = defining_op(index)
    if op is None or depth == 0 or op.name not in ("arith.addi", "arith.muli"):
        return None
    a, b = (_linear(x, iv, bound, terms, depth - 1) for x in op.operands)
    if a is None or b is None:
        return None
    if op.name == "arith.addi":
        return a[0] + b[0], a[1] + b[1], a[2] + b[2]
    if a[0] == a[2] == 0:  # a constant times b
        return a[1] * b[0], a[1] * b[1], a[1] * b[2]
    if b[0] == b[2] == 0:
        return b[1] * a[0], b[1] * a[1], b[1] * a[2]
    return None


def _rewrite(join: _Join) -> None:
    loop = join.loop
    k = len(join.stores)
    with ir.InsertionPoint(loop), loop.location:
        bound = loop.operands[1]
        count = arith.ConstantOp(ir.IndexType.get(), k).result
        joined = scf.ForOp(loop.operands[0], arith.MulIOp(bound, count).result,
                           loop.operands[2])
    with ir.InsertionPoint(joined.body), loop.location:
        e = joined.induction_variable
        if join.stride > 1:  # interleaved: element e is residue e % k of pair e / k
            p = arith.DivUIOp(e, count).result
            part = arith.RemUIOp(e, count).result
        else:  # blocks: element e is p = e % n of block e / n
            p = arith.RemUIOp(e, bound).result
            part = arith.DivUIOp(e, bound).result
        mapping = {loop.regions[0].blocks[0].arguments[0]: p}
        values = {}
        for op in loop.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "scf.yield":
                continue
            if op in join.stores:
                values[op] = _mapped(op.operands[0], mapping)
                continue
            clone = op.clone()
            for n, operand in enumerate(clone.operands):
                clone.operands[n] = _mapped(operand, mapping)
            for old, new in zip(op.results, clone.results):
                mapping[old] = new
            _remap_nested(clone, mapping)
        chosen = values[join.stores[-1]]
        for store, which in reversed(list(zip(join.stores[:-1], join.parts[:-1]))):
            here = arith.CmpIOp(arith.CmpIPredicate.eq, part,
                                arith.ConstantOp(ir.IndexType.get(), which).result).result
            chosen = arith.SelectOp(here, values[store], chosen).result
        first = join.stores[0]
        indices = [_mapped(v, mapping) for v in first.operands[2:]]
        indices[join.dim] = e
        ir.Operation.create("cir.store", operands=[chosen, first.operands[1], *indices],
                            loc=first.location)
        scf.YieldOp([])
    loop.erase()


def _mapped(value: ir.Value, mapping: dict) -> ir.Value:
    return mapping.get(value, value)


def _remap_nested(op: ir.Operation, mapping: dict) -> None:
    """Uses of the old loop's values inside a cloned op's regions (a nested reduction
    loop reading p) take the new values."""
    for inner in ops_in(op):
        for n, operand in enumerate(inner.operands):
            if operand in mapping:
                inner.operands[n] = mapping[operand]
