"""cir-to-linalg: lower every `cir.compute` to linalg on tensors.

The body (body_analysis.py) decides the lowering; the kind only names intent:

* out[P] = f(loads)                      -> one `linalg.generic`, all loops parallel
* out[P] = epi(fold_R(acc op g(loads)))  -> `linalg.matmul` / `linalg.batch_matmul` when
                                            g is A*B with matmul maps, else a generic with
                                            reduction loops; `epi` as a parallel generic
* yield g(loads)  (reduce kinds)         -> `linalg.reduce` when g is a plain load, else a
                                            generic with reduction loops; argmin/argmax as
                                            a two-result generic (value, first index)

Loads with affine indices become indexing maps; others become `tensor.extract` gathers.
Body functions are erased afterwards.

    %y = "cir.compute"(%a, %b, ...) {kind = "matmul", body = @c_body, ...}
  becomes
    %init = linalg.fill ins(%zero) outs(%empty)
    %y = linalg.matmul ins(%a, %b) outs(%init)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .body_analysis import Structured, Unstructured, analyze
from .cir_ops import body_of, compute_ops, defining_op, func_by_name, int_attr, string_attr
from .linalg_emit import PARALLEL, REDUCTION, Lowering, identity_map, projection
from .pipeline import fail

NAME = "cir-to-linalg"
DESCRIPTION = "Lower cir.compute to linalg on tensors (named ops, generics, gathers)"


@dataclass
class Options:
    # Recognise matmul/batch_matmul/reduce bodies as named linalg ops (else generics).
    named_ops: bool = True


def run(module: ir.Operation, options: Options) -> None:
    funcs = func_by_name(module)
    bodies = set()
    for compute in compute_ops(module):
        body = body_of(compute, funcs)
        bodies.add(ir.StringAttr(body.attributes["sym_name"]).value)
        structure = analyze(body)
        if isinstance(structure, Unstructured):
            raise fail(structure.location or compute.location,
                       f"cannot lower this '{string_attr(compute, 'kind')}' body to linalg: "
                       f"{structure.reason}")
        lowering = Lowering(compute, body)
        try:
            if structure.form == "store":
                result = _lower_store(lowering, structure, options)
            else:
                result = _lower_yield(lowering, structure, compute, options)
        except ValueError as err:
            raise fail(compute.location, f"cannot lower this body to linalg: {err}")
        compute.results[0].replace_all_uses_with(result)
        compute.erase()
    for name in bodies:
        funcs[name].erase()


# ---------------------------------------------------------------------------- store form


def _lower_store(L: Lowering, s: Structured, options: Options) -> ir.Value:
    n = len(s.ivs)
    bounds = [loop.operands[1] for loop in s.loops]
    element = s.value.type
    red = s.reduction
    if red is None:
        init = L.empty(bounds, element)
        return L.generic(s.ivs, [PARALLEL] * n, [s.value], [(init, identity_map(n))],
                         lambda vals, outs: vals)[0]
    init = _reduction_init(L, s, bounds)
    reduced = (_named_contraction(L, s, init) if options.named_ops else None)
    if reduced is None:
        dims = s.ivs + red.ivs
        iterators = [PARALLEL] * n + [REDUCTION] * len(red.ivs)
        reduced = L.generic(dims, iterators, [red.contribution],
                            [(init, projection(len(dims), range(n)))],
                            lambda vals, outs: [_combine(red.combiner, outs[0], vals[0])])[0]
    if s.value == red.result:
        return reduced
    out = L.empty(bounds, element)
    return L.generic(s.ivs, [PARALLEL] * n, [s.value], [(out, identity_map(n))],
                     lambda vals, outs: vals,
                     substitutions=[(red.result, reduced, identity_map(n))])[0]


def _reduction_init(L: Lowering, s: Structured, bounds) -> ir.Value:
    """The accumulator's initial value over the parallel loops, as a tensor."""
    red = s.reduction
    try:
        return L.filled(bounds, red.init.type, L.outer(red.init))
    except ValueError:  # depends on the loops (`var sum = bias[oc]`)
        n = len(s.ivs)
        return L.generic(s.ivs, [PARALLEL] * n, [red.init],
                         [(L.empty(bounds, red.init.type), identity_map(n))],
                         lambda vals, outs: vals)[0]


def _named_contraction(L: Lowering, s: Structured, init: ir.Value) -> Optional[ir.Value]:
    """linalg.matmul / batch_matmul when the body is exactly C[.., i, j] += A*B."""
    red = s.reduction
    if red.combiner not in ("arith.addf", "arith.addi") or len(red.ivs) != 1:
        return None
    product = defining_op(red.contribution)
    if product is None or product.name not in ("arith.mulf", "arith.muli"):
        return None
    loads = [defining_op(v) for v in product.operands]
    if any(op is None or op.name != "cir.load" for op in loads):
        return None
    n = len(s.ivs)
    dims = {iv: d for d, iv in enumerate(s.ivs + red.ivs)}
    maps = [L.load_map(op, dims, n + 1) for op in loads]
    if any(m is None for m in maps):
        return None
    d = [ir.AffineDimExpr.get(i) for i in range(n + 1)]
    if n == 2:
        a_map, b_map, named = [d[0], d[2]], [d[2], d[1]], linalg.matmul
    elif n == 3:
        a_map, b_map, named = [d[0], d[1], d[3]], [d[0], d[3], d[2]], linalg.batch_matmul
    else:
        return None
    a_map, b_map = (ir.AffineMap.get(n + 1, 0, e) for e in (a_map, b_map))
    ordered = list(zip(loads, maps))
    if not (ordered[0][1] == a_map and ordered[1][1] == b_map):
        ordered.reverse()
        if not (ordered[0][1] == a_map and ordered[1][1] == b_map):
            return None
    acc_type = red.init.type
    sources = [L.outer(op.operands[0]) for op, _ in ordered]
    if any(ir.RankedTensorType(v.type).element_type != acc_type for v in sources):
        return None
    with L.ip, L.compute.location:
        return named(*sources, outs=[init])


# ---------------------------------------------------------------------------- yield form

_COMBINER = {"+": ("arith.addf", "arith.addi"), "*": ("arith.mulf", "arith.muli"),
             "min": ("arith.minimumf", "arith.minsi"), "max": ("arith.maximumf", "arith.maxsi"),
             "and": (None, "arith.andi"), "or": (None, "arith.ori")}


def _identity(op: str, element: ir.Type):
    is_float = isinstance(element, ir.FloatType)
    if op in ("+", "or"):
        return 0
    if op in ("*", "and"):
        return 1
    if is_float:
        return math.inf if op in ("min", "argmin") else -math.inf
    width = ir.IntegerType(element).width
    hi, lo = 2 ** (width - 1) - 1, -2 ** (width - 1)
    return hi if op in ("min", "argmin") else lo


def _lower_yield(L: Lowering, s: Structured, compute: ir.Operation,
                 options: Options) -> ir.Value:
    op = string_attr(compute, "reduce")
    axis = int_attr(compute, "axis")
    n = len(s.ivs)
    reduced = list(range(n)) if axis is None else [axis]
    kept = [d for d in range(n) if d not in reduced]
    bounds = [s.loops[d].operands[1] for d in kept]
    iterators = [REDUCTION if d in reduced else PARALLEL for d in range(n)]
    out_map = projection(n, kept)
    element = s.value.type
    if op in ("argmin", "argmax"):
        i64 = ir.IntegerType.get_signless(64)
        values = L.filled(bounds, element, L.constant(element, _identity(op, element)))
        indices = L.filled(bounds, i64, L.constant(i64, 0))
        result = L.generic(s.ivs, iterators, [s.value, s.index],
                           [(values, out_map), (indices, out_map)],
                           lambda vals, outs: _arg_select(op, vals, outs))[1]
    else:
        combiner = _COMBINER[op][0 if isinstance(element, ir.FloatType) else 1]
        init = L.filled(bounds, element, L.constant(element, _identity(op, element)))
        result = _named_reduce(L, s, init, combiner, reduced) if options.named_ops else None
        if result is None:
            result = L.generic(s.ivs, iterators, [s.value], [(init, out_map)],
                               lambda vals, outs: [_combine(combiner, outs[0], vals[0])])[0]
    if axis is None:  # a full reduction is a scalar
        with L.ip, compute.location:
            return tensor.ExtractOp(result, []).result
    return result


def _named_reduce(L: Lowering, s: Structured, init, combiner, reduced) -> Optional[ir.Value]:
    """linalg.reduce when the yielded value is a plain load at the loop variables."""
    load = defining_op(s.value)
    if load is None or load.name != "cir.load":
        return None
    dims = {iv: d for d, iv in enumerate(s.ivs)}
    if L.load_map(load, dims, len(s.ivs)) != identity_map(len(s.ivs)):
        return None
    source = L.outer(load.operands[0])
    element = s.value.type
    with L.ip, L.compute.location:
        op = linalg.ReduceOp([init.type], [source], [init],
                             ir.DenseI64ArrayAttr.get(reduced))
        block = op.regions[0].blocks.append(element, element)
        with ir.InsertionPoint(block):
            linalg.YieldOp([_combine(combiner, block.arguments[1], block.arguments[0])])
    return op.results[0]


def _arg_select(op: str, vals, outs) -> list[ir.Value]:
    """Keep (value, index) when it beats the best so far; ties keep the lower index, so
    the result is the first extreme index whatever order the reduction runs in."""
    value, index = vals
    best, best_index = outs
    i64 = ir.IntegerType.get_signless(64)
    index = arith.IndexCastOp(i64, index).result if isinstance(index.type, ir.IndexType) \
        else index
    if isinstance(value.type, ir.FloatType):
        better = arith.CmpFOp(arith.CmpFPredicate.OGT if op == "argmax"
                              else arith.CmpFPredicate.OLT, value, best).result
        equal = arith.CmpFOp(arith.CmpFPredicate.OEQ, value, best).result
    else:
        better = arith.CmpIOp(arith.CmpIPredicate.sgt if op == "argmax"
                              else arith.CmpIPredicate.slt, value, best).result
        equal = arith.CmpIOp(arith.CmpIPredicate.eq, value, best).result
    earlier = arith.CmpIOp(arith.CmpIPredicate.slt, index, best_index).result
    take = arith.OrIOp(better, arith.AndIOp(equal, earlier).result).result
    return [arith.SelectOp(take, value, best).result,
            arith.SelectOp(take, index, best_index).result]


def _combine(name: str, acc: ir.Value, value: ir.Value) -> ir.Value:
    return ir.Operation.create(name, results=[acc.type], operands=[acc, value]).results[0]
