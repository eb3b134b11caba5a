"""Scatters on the GPU. After bufferization, each call of a
`@__zynml_scatter_<kind>_d<depth>_<n>(updates, indices, original)` declaration
(zynml/lowering/scatter_lowering.py; IREE has its own op, zynml/backend/iree/scatter.py)
becomes `linalg.generic`s marked `zynml.scatter`, which the pointwise strategy runs one
thread a point; the call's result is the original, updated in place.

**Atomics** (the default): one generic over the updates with no output, whose region
combines each update into the original atomically, one thread per update: `addf`, `addi`,
`mins`, `maxs`, `minu`, `maxu` as `memref.atomic_rmw` (PTX `red`/`atom`), float min and
max as a compare-and-swap loop on the element's bits (`llvm.cmpxchg`, PTX `atom.cas`) of
`arith.minimumf`/`maximumf`: PTX has no float atomic min, and the loop keeps
reduce(min)'s NaN rule. Repeated indices meet in
some order, so float sums may differ in the last bits run to run:

    %r = call @__zynml_scatter_add_d1_0(%u, %k, %x) : (memref<13x5xf32>, memref<13x1xi64>,
             memref<7x5xf32>) -> memref<7x5xf32>
  becomes
    linalg.generic {iterator_types = ["parallel", "parallel"], zynml.scatter}
        ins(%u, %k : memref<13x5xf32>, memref<13x1xi64>) {
    ^bb0(%v: f32, %id: i64):
      %d = linalg.index 1 : index
      %row = arith.index_cast %id : i64 to index
      %old = memref.atomic_rmw addf %v, %x[%row, %d] : (f32, memref<7x5xf32>) -> f32
      linalg.yield
    }

**Sorted segments** (`deterministic`, float sums only: integer sums, min and max give the
same bits in any order): three generics, no atomics, contributions added in loop order,
so the result is bit for bit the interpreter's:

    rank[t] = #{s : (ids[s], s) < (ids[t], t)}     one thread per t, a loop over all s
    perm[rank[t]] = t                               one thread per t (ranks are distinct)
    at sorted position p and slice point d, when p starts a run of one id (p == 0 or
    ids[perm[p - 1]] != ids[perm[p]]): x[id, d] + u[perm[p], d] + u[perm[p + 1], d] + ...
    over the run, stored once (one writer per element)

The rank costs O(n^2) comparisons for n contributions (n threads of n steps): about
1e10 at n = 1e5, fine for token counts of training batches, not for millions.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, llvm, memref, scf

from ...lowering.cir_ops import ops_in
from ...lowering import SCATTER_CALLEE, SCATTER_PREFIX, scatter_combiner

__all__ = ["SCATTER_ATTR", "expand_scatter_calls"]

# Marks the generics of scatters: the pointwise strategy runs them, one thread a point.
SCATTER_ATTR = "zynml.scatter"

# memref.atomic_rmw's kind of each integer combiner and of float add
_ATOMIC_KIND = {"addf": "addf", "addi": "addi", "minsi": "mins", "maxsi": "maxs",
                "minui": "minu", "maxui": "maxu"}


def expand_scatter_calls(module: ir.Operation, deterministic: bool = False) -> None:
    body = module.regions[0].blocks[0]
    declarations = [op.operation for op in body.operations
                    if op.operation.name == "func.func" and
                    ir.StringAttr(op.operation.attributes["sym_name"]).value.startswith(
                        SCATTER_PREFIX)]
    if not declarations:
        return
    for call in [op for op in ops_in(module, "func.call")
                 if ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith(
                     SCATTER_PREFIX)]:
        match = SCATTER_CALLEE.fullmatch(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
        updates, indices, original = call.operands
        element = ir.MemRefType(updates.type).element_type
        combiner = scatter_combiner(match["kind"], isinstance(element, ir.FloatType))
        with ir.InsertionPoint(call), call.location:
            if deterministic and combiner == "addf":
                _sorted_segments(updates, indices, original, int(match["depth"]))
            else:
                _atomic_generic(updates, indices, original, int(match["depth"]), combiner)
        call.results[0].replace_all_uses_with(original)
        call.erase()
    for declaration in declarations:
        declaration.erase()


def _parallel_generic(ins: list, outs: list, maps: list, rank: int) -> ir.Operation:
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    op = linalg.GenericOp([], ins, outs,
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get([parallel] * rank))
    op.operation.attributes[SCATTER_ATTR] = ir.UnitAttr.get()
    return op


def _atomic_generic(updates: ir.Value, indices: ir.Value, original: ir.Value,
                    depth: int, combiner: str) -> None:
    rank = ir.MemRefType(updates.type).rank  # batch, then the slice
    dims = [ir.AffineDimExpr.get(d) for d in range(rank)]
    maps = [ir.AffineMap.get(rank, 0, dims)] + [
        ir.AffineMap.get(rank, 0, [dims[0], ir.AffineConstantExpr.get(c)])
        for c in range(depth)]
    op = _parallel_generic([updates] + [indices] * depth, [], maps, rank)
    element = ir.MemRefType(updates.type).element_type
    i64 = ir.MemRefType(indices.type).element_type
    block = op.regions[0].blocks.append(element, *[i64] * depth)
    with ir.InsertionPoint(block):
        where = [_index(k) for k in list(block.arguments)[1:]] + \
            [linalg.IndexOp(_i64_attr(d)).result for d in range(1, rank)]
        value = block.arguments[0]
        if combiner in _ATOMIC_KIND:
            memref.AtomicRMWOp(getattr(arith.AtomicRMWKind, _ATOMIC_KIND[combiner]),
                               value, original, where)
        else:
            _compare_and_swap(combiner, value, original, where)
        linalg.YieldOp([])


def _compare_and_swap(combiner: str, value: ir.Value, original: ir.Value,
                      where: list[ir.Value]) -> None:
    """original[where] = combiner(original[where], value) for a float min/max, atomically:
    a compare-and-swap of the element's bits, again while another thread came between
    (memref.generic_atomic_rmw would do this, but its lowering swaps f32 values, which
    llvm.cmpxchg refuses). No swap when the element already wins."""
    element = ir.MemRefType(original.type).element_type
    bits = ir.IntegerType.get_signless(element.width)
    layout = ir.MemRefType(original.type)
    strides, offset = layout.get_strides_and_offset()
    assert not any(layout.is_dynamic_stride_or_offset(n) for n in strides + [offset]), \
        "a scatter into a buffer of dynamic layout"
    linear = _const(offset)
    for index, stride in zip(where, strides):
        linear = arith.AddIOp(linear, arith.MulIOp(index, _const(stride)).result).result
    base = memref.ExtractAlignedPointerAsIndexOp(original).result
    address = arith.AddIOp(base, arith.MulIOp(linear, _const(element.width // 8)).result)
    i64 = ir.IntegerType.get_signless(64)
    pointer = llvm.IntToPtrOp(ir.Type.parse("!llvm.ptr"),
                              arith.IndexCastOp(i64, address.result).result).result
    seen = arith.BitcastOp(bits, memref.LoadOp(original, where).result).result
    loop = scf.WhileOp([bits], [seen])
    before = loop.before.blocks.append(bits)
    with ir.InsertionPoint(before):
        expected = before.arguments[0]
        wanted = arith.BitcastOp(bits, _combine(
            combiner, arith.BitcastOp(element, expected).result, value)).result
        changes = arith.CmpIOp(arith.CmpIPredicate.ne, wanted, expected).result
        branch = scf.IfOp(changes, [bits, ir.IntegerType.get_signless(1)], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            ordering = llvm.AtomicOrdering.monotonic
            pair = llvm.AtomicCmpXchgOp(pointer, expected, wanted, ordering, ordering).result
            found = llvm.ExtractValueOp(bits, pair, [0]).result
            swapped = llvm.ExtractValueOp(ir.IntegerType.get_signless(1), pair, [1]).result
            scf.YieldOp([found, arith.XOrIOp(swapped, _true()).result])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([expected, arith.ConstantOp(ir.IntegerType.get_signless(1), 0).result])
        scf.ConditionOp(branch.results[1], [branch.results[0]])
    after = loop.after.blocks.append(bits)
    with ir.InsertionPoint(after):
        scf.YieldOp([after.arguments[0]])


def _sorted_segments(updates: ir.Value, indices: ir.Value, original: ir.Value,
                     depth: int) -> None:
    i64 = ir.IntegerType.get_signless(64)
    shape = ir.MemRefType(updates.type).shape
    count = shape[0]
    order_type = ir.MemRefType.get([count], i64)
    line = ir.AffineMap.get_identity(1)

    def key(t: ir.Value) -> list[ir.Value]:
        return [memref.LoadOp(indices, [t, _const(c)]).result for c in range(depth)]

    # rank[t]: how many contributions come before t in (id, t) order
    ranks = memref.AllocOp(order_type, [], []).result
    rank_op = _parallel_generic([], [ranks], [line], 1)
    with ir.InsertionPoint(rank_op.regions[0].blocks.append(i64)):
        t = linalg.IndexOp(_i64_attr(0)).result
        mine = key(t)
        loop = scf.ForOp(_const(0), _const(count), _const(1), [_i64(0)])
        with ir.InsertionPoint(loop.body):
            s = loop.induction_variable
            before = arith.CmpIOp(arith.CmpIPredicate.ult, s, t).result
            for theirs, own in reversed(list(zip(key(s), mine))):
                less = arith.CmpIOp(arith.CmpIPredicate.slt, theirs, own).result
                equal = arith.CmpIOp(arith.CmpIPredicate.eq, theirs, own).result
                before = arith.OrIOp(less, arith.AndIOp(equal, before).result).result
            scf.YieldOp([arith.AddIOp(loop.inner_iter_args[0],
                                      arith.ExtUIOp(i64, before).result).result])
        linalg.YieldOp([loop.results[0]])
    # perm[rank[t]] = t
    order = memref.AllocOp(order_type, [], []).result
    perm_op = _parallel_generic([ranks], [], [line], 1)
    block = perm_op.regions[0].blocks.append(i64)
    with ir.InsertionPoint(block):
        t = linalg.IndexOp(_i64_attr(0)).result
        memref.StoreOp(arith.IndexCastOp(i64, t).result, order, [_index(block.arguments[0])])
        linalg.YieldOp([])
    # each run of one id, summed in order by its first position's threads
    rank = len(shape)
    sum_op = _parallel_generic([updates], [], [ir.AffineMap.get_identity(rank)], rank)
    element = ir.MemRefType(updates.type).element_type
    with ir.InsertionPoint(sum_op.regions[0].blocks.append(element)):
        p = linalg.IndexOp(_i64_attr(0)).result
        slice_ = [linalg.IndexOp(_i64_attr(d)).result for d in range(1, rank)]
        ids = key(_index(memref.LoadOp(order, [p]).result))
        first = arith.CmpIOp(arith.CmpIPredicate.eq, p, _const(0)).result
        previous = arith.SelectOp(first, _const(0), arith.SubIOp(p, _const(1)).result).result
        starts = arith.OrIOp(first, arith.XOrIOp(
            _same_key(key(_index(memref.LoadOp(order, [previous]).result)), ids),
            _true()).result).result
        branch = scf.IfOp(starts)
        with ir.InsertionPoint(branch.then_block):
            where = [_index(k) for k in ids] + slice_
            run = scf.WhileOp([ir.IndexType.get(), element],
                              [p, memref.LoadOp(original, where).result])
            before = run.before.blocks.append(ir.IndexType.get(), element)
            with ir.InsertionPoint(before):
                q, acc = before.arguments
                inside = arith.CmpIOp(arith.CmpIPredicate.ult, q, _const(count)).result
                safe = arith.SelectOp(inside, q, _const(0)).result
                same = _same_key(key(_index(memref.LoadOp(order, [safe]).result)), ids)
                scf.ConditionOp(arith.AndIOp(inside, same).result, [q, acc])
            after = run.after.blocks.append(ir.IndexType.get(), element)
            with ir.InsertionPoint(after):
                q, acc = after.arguments
                u = memref.LoadOp(updates, [_index(memref.LoadOp(order, [q]).result)] +
                                  slice_).result
                scf.YieldOp([arith.AddIOp(q, _const(1)).result,
                             arith.AddFOp(acc, u).result])
            memref.StoreOp(run.results[1], original, where)
            scf.YieldOp([])
        linalg.YieldOp([])


def _same_key(a: list[ir.Value], b: list[ir.Value]) -> ir.Value:
    same = None
    for x, y in zip(a, b):
        equal = arith.CmpIOp(arith.CmpIPredicate.eq, x, y).result
        same = equal if same is None else arith.AndIOp(same, equal).result
    return same


def _combine(combiner: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return ir.Operation.create(f"arith.{combiner}", results=[a.type],
                               operands=[a, b]).results[0]


def _true() -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(1), 1).result


def _index(value: ir.Value) -> ir.Value:
    return arith.IndexCastOp(ir.IndexType.get(), value).result


def _const(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _i64(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(64), value).result


def _i64_attr(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
