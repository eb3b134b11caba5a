"""cir-verify: check cir invariants that IRDL cannot express.

IRDL checks operand counts and attribute kinds. This pass checks the rest: every
`cir.compute` names a private body function whose arguments are its operands then `out`;
`reduce` computes name a known operator; `out_dims` points at index operands, one per
result dimension; `cir.load`/`cir.store` use one index per dimension and the element type;
`cir.store` writes only `out`; `cir.yield` appears only in the body of a reduction;
`cir.attention`'s shapes agree (query [P.., Sq, D], key [P.., Sk, D], value [P.., Sk, E],
result [P.., Sq, E], each pair of extents where both are static; a bool mask whose
`mask_dims` name its loops, a `causal_offset` that is an i64); and no value is built by a chain of more than MAX_VALUE_DEPTH operations
(the passes after this one walk values recursively: zynml/limits.py).

    // error: 'cir.compute' body @missing is not a function of this module
    %y = "cir.compute"(%x) {kind = "elementwise", body = @missing, ...}

The pass changes nothing; it fails with located errors. The passes that read `cir`
(cir-shape-propagation, cir-raise-attention, cir-to-linalg) call `verify_bodies` first:
run on their own (`zynml-opt --cir-to-linalg`), they meet unverified input too, and their
code relies on every compute having its body (a body symbol that names no function was an
AttributeError). They do not need the rest (`out_dims` is for shape propagation only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir

from ..lowering import cir_ops
from ..lowering.cir_ops import (attention_operands, body_of, compute_ops, entry_block,
                                func_by_name, i64_array, is_body_function, ops_in, out_args,
                                run_time_group, string_attr, top_level_funcs)
from .pipeline import fail
from ..dialects.cir import REDUCE_OPS
from ..limits import MAX_VALUE_DEPTH

NAME = "cir-verify"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    funcs = func_by_name(module)
    kinds_of_body: dict[str, str] = {}
    outs_of_body: dict[str, list[ir.Value]] = {}
    for compute in compute_ops(module):
        fn = _check_compute(compute, funcs)
        name = ir.StringAttr(fn.attributes["sym_name"]).value
        kinds_of_body[name] = string_attr(compute, "kind")
        outs_of_body[name] = out_args(compute, fn)
    for fn in top_level_funcs(module):
        name = ir.StringAttr(fn.attributes["sym_name"]).value
        for block in fn.regions[0].blocks:
            _check_value_depth(block, {})
        for op in ops_in(fn, "cir.attention"):
            _check_attention(op)
        for op in ops_in(fn):
            if op.name in ("cir.load", "cir.store", "cir.yield", "cir.barrier", "cir.alloc",
                           "cir.print"):
                if not is_body_function(fn):
                    raise fail(op.location, f"'{op.name}' is only valid in a compute body "
                                            "function (marked cir.body)")
                _check_body_op(op, fn, kinds_of_body.get(name), outs_of_body.get(name))


def verify_bodies(module: ir.Operation) -> None:
    """What every pass that reads `cir` relies on: each compute's body is a function of
    the module, marked cir.body, defined, taking the compute's operands then `out`; a
    reduce compute names a known operator."""
    funcs = func_by_name(module)
    for compute in compute_ops(module):
        _check_body(compute, funcs)
        _check_reduce(compute)


def _check_reduce(op: ir.Operation) -> None:
    """A reduce compute names a known operator (the lowering looks it up); no other does."""
    kind, reduce_op = string_attr(op, "kind"), string_attr(op, "reduce")
    if kind == "reduce":
        if reduce_op not in REDUCE_OPS:
            raise fail(op.location, f"'cir.compute' of kind reduce needs 'reduce' to be one "
                                    f"of {', '.join(REDUCE_OPS)}; got {reduce_op!r}")
    elif reduce_op is not None:
        raise fail(op.location, f"'reduce' attribute on a compute of kind '{kind}'")


def _check_body(op: ir.Operation, funcs: dict[str, ir.Operation]) -> ir.Operation:
    loc = op.location
    fn = body_of(op, funcs)
    body_name = cir_ops.body_name(op)
    if body_name is None:
        raise fail(loc, "'cir.compute' needs 'body', a symbol naming its body function")
    if fn is None:
        raise fail(loc, f"'cir.compute' body @{body_name} is not a function of this module")
    if not is_body_function(fn):
        raise fail(loc, f"'cir.compute' body @{body_name} is not marked 'cir.body'")
    if not len(fn.regions[0].blocks):
        raise fail(loc, f"'cir.compute' body @{body_name} is a declaration; it needs a body")
    args = list(entry_block(fn).arguments)
    operands = list(op.operands)
    outs = len(op.results)
    if len(args) != len(operands) + outs:
        raise fail(loc, f"body @{body_name} takes {len(args)} arguments; expected "
                        f"{len(operands) + outs} (the {len(operands)} operands, then "
                        f"{'out' if outs == 1 else f'{outs} outs'})")
    for i, (arg, operand) in enumerate(zip(args, operands)):
        if arg.type != operand.type:
            raise fail(loc, f"operand #{i} has type {operand.type} but body @{body_name} "
                            f"takes {arg.type}")
    return fn


def _check_compute(op: ir.Operation, funcs: dict[str, ir.Operation]) -> ir.Operation:
    loc = op.location
    kind = string_attr(op, "kind")
    if not kind:
        raise fail(loc, "'cir.compute' needs a non-empty kind")
    fn = _check_body(op, funcs)
    _check_reduce(op)
    body_name = cir_ops.body_name(op)
    args = list(entry_block(fn).arguments)
    operands = list(op.operands)
    if kind == "reduce" and len(op.results) != 1:
        raise fail(loc, "a 'reduce' compute has one result")
    rank = 0
    for result, out in zip(op.results, out_args(op, fn)):
        result_type = result.type
        if kind != "reduce" and not isinstance(result_type, ir.RankedTensorType):
            raise fail(loc, f"a '{kind}' compute has a tensor result; only 'reduce' computes "
                            f"give a scalar (got {result_type})")
        expected_out = result_type if isinstance(result_type, ir.RankedTensorType) else \
            ir.RankedTensorType.get([], result_type)
        if out.type != expected_out:
            raise fail(loc, f"body @{body_name} takes out as {out.type}; expected "
                            f"{expected_out}")
        rank += ir.RankedTensorType(expected_out).rank
    check_out_dims(op, rank)
    _check_inits(op)
    return fn


def _check_inits(op: ir.Operation) -> None:
    """`inits` (`mut x`): per result, -1 or the operand of the result's type it starts
    from."""
    inits = i64_array(op, "inits")
    if inits is None:
        return
    if len(inits) != len(op.results):
        raise fail(op.location, f"'inits' has {len(inits)} entries for {len(op.results)} "
                                "results")
    operands = list(op.operands)
    for k, (init, result) in enumerate(zip(inits, op.results)):
        if init == -1:
            continue
        if not 0 <= init < len(operands) or not isinstance(
                operands[init].type, ir.RankedTensorType) or \
                ir.RankedTensorType(operands[init].type).element_type != \
                ir.RankedTensorType(result.type).element_type:
            raise fail(op.location, f"'inits' entry {init} of result #{k} is not a tensor "
                                    "operand of the result's element type")


def check_out_dims(op: ir.Operation, rank: int) -> list[int]:
    """`out_dims` names one index operand per dimension of the result (shape propagation
    reads them): its entries, or a located PassFailure."""
    loc, operands = op.location, list(op.operands)
    out_dims = i64_array(op, "out_dims")
    if out_dims is None:
        raise fail(loc, "'cir.compute' needs 'out_dims' (one operand index per result "
                        "dimension)")
    if len(out_dims) != rank:
        raise fail(loc, f"'out_dims' has {len(out_dims)} entries for a result of rank {rank}")
    for d in out_dims:
        if not 0 <= d < len(operands) or not isinstance(operands[d].type, ir.IndexType):
            raise fail(loc, f"'out_dims' entry {d} is not an index operand")
    return out_dims


def _check_body_op(op: ir.Operation, fn: ir.Operation, kind: str | None,
                   outs: list[ir.Value] | None) -> None:
    loc = op.location
    if op.name == "cir.load":
        _check_indexing(op, op.operands[0], list(op.operands[1:]), op.results[0].type)
    elif op.name == "cir.store":
        outs = outs or [entry_block(fn).arguments[-1]]
        dest = op.operands[1]
        local = not isinstance(dest, ir.BlockArgument) and dest.owner.name == "cir.alloc"
        if dest not in outs and not local:
            raise fail(loc, "'cir.store' may only write 'out' (the body's last argument) "
                            "or a 'cir.alloc' tensor; a cir.multi_compute's body has an "
                            "'out' per result, its last arguments")
        _check_indexing(op, op.operands[1], list(op.operands[2:]), op.operands[0].type)
        if "combine" in op.attributes:
            _check_combine(op, loc)
    elif op.name == "cir.alloc":
        result = op.results[0].type
        if not isinstance(result, ir.RankedTensorType) or result.rank != len(op.operands):
            raise fail(loc, f"'cir.alloc' takes one extent per dimension of its result; got "
                            f"{len(op.operands)} for {result}")
    elif op.name == "cir.yield":
        if kind is not None and kind != "reduce":
            raise fail(loc, f"'cir.yield' in the body of a '{kind}' compute; only reductions "
                            "yield")


def _check_value_depth(block: ir.Block, depth: dict) -> None:
    """`depth[value]`: the longest chain of ops that computes it (a loop's or an if's
    results count the values their regions yield). Iterative along a block: a body may be
    thousands of statements long; regions nest only as deep as the source's blocks."""
    for op in block.operations:
        op = op.operation
        deepest = max((depth.get(v, 0) for v in op.operands), default=0)
        for region in op.regions:
            for inner in region.blocks:
                _check_value_depth(inner, depth)
                ops = list(inner.operations)
                if ops:
                    yielded = ops[-1].operation.operands
                    deepest = max([deepest] + [depth.get(v, 0) for v in yielded])
        if deepest >= MAX_VALUE_DEPTH:
            raise fail(op.location, f"a value here is built by a chain of more than "
                                    f"{MAX_VALUE_DEPTH} operations (counting those of the lets "
                                    "and assignments it reads); compute it in parts")
        for result in op.results:
            depth[result] = deepest + 1


def _check_indexing(op: ir.Operation, source: ir.Value, indices: list, element: ir.Type):
    if not isinstance(source.type, ir.RankedTensorType):
        raise fail(op.location, f"'{op.name}' needs a ranked tensor, got {source.type}")
    tensor_type = ir.RankedTensorType(source.type)
    if len(indices) != tensor_type.rank:
        raise fail(op.location, f"'{op.name}' uses {len(indices)} indices on a tensor of "
                                f"rank {tensor_type.rank}")
    if tensor_type.element_type != element:
        raise fail(op.location, f"'{op.name}' element type {element} does not match "
                                f"{tensor_type.element_type}")


def _check_attention(op: ir.Operation) -> None:
    query, key, value, scale, mask, offset = attention_operands(op)
    types = [v.type for v in (query, key, value)] + [op.results[0].type]
    if not all(isinstance(t, ir.RankedTensorType) for t in types):
        raise fail(op.location, "'cir.attention' takes and gives ranked tensors")
    q, k, v, o = (list(ir.RankedTensorType(t).shape) for t in types)
    rank = len(q)
    elements = {str(ir.RankedTensorType(t).element_type) for t in types}
    if rank < 2 or any(len(s) != rank for s in (k, v, o)):
        raise fail(op.location, "'cir.attention' query, key, value and result need one rank, "
                                "2 or more")
    if len(elements) != 1 or not isinstance(ir.RankedTensorType(types[0]).element_type,
                                            ir.FloatType):
        raise fail(op.location, "'cir.attention' needs one float element type")
    groups = i64_array(op, "kv_group")
    if groups is not None and (len(groups) != rank - 2 or any(g < 1 for g in groups)):
        raise fail(op.location, "'cir.attention' kv_group needs one group >= 1 per leading "
                                f"axis ({rank - 2})")
    groups = groups or [1] * (rank - 2)
    kv_lead = [extent * g if not ir.ShapedType.is_dynamic_size(extent) else extent
               for extent, g in zip(k[:-2], groups)]
    v_lead = v[:-2]
    grouped_at_run_time = _check_run_time_group(op, groups)
    if grouped_at_run_time is not None:  # any extents there: the reads are clamped
        kv_lead[grouped_at_run_time] = q[grouped_at_run_time]
        v_lead[grouped_at_run_time] = k[grouped_at_run_time]
    if not _extents_may_agree(kv_lead, q[:-2]) or not _extents_may_agree(v_lead, k[:-2]) or \
            not _extents_may_agree([k[-1], v[-2]], [q[-1], k[-2]]) or \
            not _extents_may_agree(o, q[:-1] + v[-1:]):
        q, k, v, o = (_shape_text(shape) for shape in (q, k, v, o))
        raise fail(op.location, f"'cir.attention' shapes do not agree: query {q}, key {k}, "
                                f"value {v}, result {o}, kv_group {groups}")
    if not isinstance(scale.type, ir.FloatType):
        raise fail(op.location, "'cir.attention' scale must be a float")
    causal = op.attributes["causal_offset"] if "causal_offset" in op.attributes else None
    if causal is not None and not (isinstance(causal, ir.IntegerAttr) and
                                   str(causal.type) == "i64"):
        raise fail(op.location, "'cir.attention' causal_offset must be an i64 integer "
                                "(key j allowed when j <= i + causal_offset)")
    if offset is not None and (causal is None or
                               not isinstance(offset.type, (ir.IntegerType, ir.IndexType))):
        raise fail(op.location, "'cir.attention' offset must be an integer or index scalar, "
                                "with causal_offset (key j allowed when j <= i + offset + "
                                "causal_offset)")
    if mask is not None:
        dims = i64_array(op, "mask_dims")
        mask_type = mask.type
        loops = q[:-1] + [k[-2]]
        if dims is None or not isinstance(mask_type, ir.RankedTensorType) or \
                str(ir.RankedTensorType(mask_type).element_type) != "i1" or \
                any(not 0 <= d < len(loops) for d in dims) or \
                not _extents_may_agree(list(ir.RankedTensorType(mask_type).shape),
                                       [loops[d] for d in dims]):
            raise fail(op.location, "'cir.attention' mask must be a bool tensor whose "
                                    "'mask_dims' name, per axis, a loop of (p.., i, j) of "
                                    "the same extent")


def _check_run_time_group(op: ir.Operation, groups: list) -> Optional[int]:
    """The axis of cir.attention's run-time `group` (None without one), checked."""
    found = run_time_group(op)
    if found is None:
        if "group_axis" in op.attributes:
            raise fail(op.location, "'cir.attention' group_axis needs the group operand")
        return None
    axis, group = found
    if axis is None or not 0 <= axis < len(groups) or groups[axis] != 1 or \
            not isinstance(group.type, (ir.IntegerType, ir.IndexType)):
        raise fail(op.location, "'cir.attention' group must be an integer or index scalar, "
                                "with group_axis (i64) naming a leading axis whose kv_group "
                                "is 1")
    return axis


def _shape_text(shape: list[int]) -> str:
    """[2, ?, 16]: a run-time extent as `?`."""
    return "[" + ", ".join("?" if ir.ShapedType.is_dynamic_size(d) else str(d)
                           for d in shape) + "]"


def _extents_may_agree(a: list[int], b: list[int]) -> bool:
    """Equal lengths, and equal extents where both are static (a run-time size may be
    anything; the call checks what the program binds together)."""
    return len(a) == len(b) and all(
        x == y or ir.ShapedType.is_dynamic_size(x) or ir.ShapedType.is_dynamic_size(y)
        for x, y in zip(a, b))


def _check_combine(store: ir.Operation, loc) -> None:
    """A scatter's `combine`: "+", "min", "max", or "umin"/"umax" on integers."""
    combine = string_attr(store, "combine")
    if combine not in ("+", "min", "max", "umin", "umax"):
        raise fail(loc, "'cir.store' combine must be \"+\", \"min\", \"max\", \"umin\" or "
                        "\"umax\" (a scatter)")
    if combine.startswith("u") and not isinstance(store.operands[0].type, ir.IntegerType):
        raise fail(loc, f"'cir.store' combine = \"{combine}\" (unsigned) needs an integer "
                        "value")
