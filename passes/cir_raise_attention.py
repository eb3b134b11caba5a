"""cir-raise-attention: a compute body that is attention written out becomes cir.attention.

The spec writes attention one output element at a time (tests/programs/examples/
attention.zyn): for each row, a loop for the row max of the scores, a loop for the sum of
their exponentials, and for each output column a loop that weighs values by
exp(score - max) / sum, each loop recomputing `score = dot(Q[.., i], K[.., j]) * scale`
under an optional condition on the key. Lowered as written, that costs O(Sk * D) per
output element. When the body is exactly that (checked on `Terms` trees: the three
scores, conditions, max and sum must be the same computations), the compute becomes one
`cir.attention`, which the backends run as attention (the CUDA backend as one
flash-attention kernel). Anything else is left alone and lowered from its body.

The condition, the same tree in the three loops, is one of
  * `mask[i, j]`: a bool input indexed by the loops (p.., i, j)       -> `mask_dims`
  * `j <= i + c`: causal, c a constant (0: the diagonal; c > 0: a KV cache's earlier
    keys)                                                              -> `causal_offset`
  * `j <= i + c + s`: s an integer scalar input (a KV cache's `cache_start`), read at
    run time                                  -> the `offset` operand, c in `causal_offset`
  * a mask and a causal comparison, joined by `and` (either order).
The causal comparison is read as a linear form (zynml/lowering/attention_forms.py): `<=`,
`<`, `>=` or `>` between sums and differences of i, j, integer constants and at most one
scalar input, so `j <= i`, `j < i + 1`, `i >= j`, `j <= i + 3`, `j < i - 1` and
`j <= cache_start + i - 2` are all recognised; it must keep j at most i plus a constant
plus the input (`j >= i`, `j <= i - cache_start`, `j <= i + 2 * cache_start` are not).

K and V may be read at `h / g` instead of `h` along a leading axis, g a constant (the
same for both, and g times K's extent Q's): grouped-query attention, `kv_group`; or g an
integer scalar input (along one axis): the `group` operand, read at run time. Nothing
ties a run-time group to K's extent but the bounds of the loads, which the body's
lowering clamps into K and V: cir.attention's clamped reads of head h / g are that, for
any extents (K's and V's may differ there).

Besides the three loops, the online softmax written per element (docs/language.md: one
key loop carrying the running max m, sum l and output o, `out = o / l`) and the spec's
flash attention (its tile form, rewritten per point: an online softmax over key blocks)
are attention exactly, and raised too. The query row need not be the output's last loop
but one: the transformer block's `out[b, i, h, d]` reads `q[b, i, h]`, `k[b, j, h]`; Q, K
and V are then transposed to [P.., S, D] (linalg.transpose) around the cir.attention.

Runs after cir-shape-propagation, and checks the raised op's shapes against the loops:
static extents by value, run-time sizes by which dimension of main's inputs they read
(zynml/lowering/body_extents.py: `for j in 0..seq_len` covers K's keys when the call
checks K's axis 2 equal to seq_len). A scale computed from sizes (`/ sqrt(head_dim)`
with head_dim a run-time size) is rebuilt before the op. Grouped axes need static
extents: nothing ties a run-time number of key heads to the query heads.

    %o = "cir.compute"(%q, %k, %v, %mask, ...) {kind = "attention", body = @o_body, ...}
  becomes
    %o = "cir.attention"(%q, %k, %v, %scale, %mask) {mask_dims = array<i64: 2, 3>, ...}
  and `if j <= i:` instead of the mask becomes
    %o = "cir.attention"(%q, %k, %v, %scale) {causal_offset = 0 : i64, ...}
  and `if j <= i + cache_start:` with K[b, h / 4, j, d] becomes
    %o = "cir.attention"(%q, %k, %v, %scale, %cache_start) {causal_offset = 0 : i64,
           kv_group = array<i64: 1, 4>, ...}
  and K[b, h / g, j, d], g an input, becomes
    %o = "cir.attention"(%q, %k, %v, %scale, %g) {group_axis = 1 : i64, ...}
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ..lowering.attention_forms import (RowOrder, causal_offset, either, guarded, kv_divisor,
                                        reduction, rescaled, strip, sum_with_acc)
from ..lowering.body_extents import BodyExtents, is_size_expression
from ..lowering.cir_ops import body_of, compute_ops, func_by_name, ops_in
from ..lowering.cir_terms import Terms, evaluate, float_const, shifted
from ..lowering.linalg_emit import Lowering, tensor_extents

from .cir_verify import verify_bodies

NAME = "cir-raise-attention"


@dataclass
class Options:
    pass


@dataclass
class _Attention:
    query: ir.Value
    key: ir.Value
    value: ir.Value
    mask: Optional[ir.Value]
    mask_dims: list[int]
    scale: float | ir.Value  # a number, or a scalar input or a float computed from sizes
    divide: bool             # the scores are divided by `scale` (a value)
    groups: list             # per leading axis: K and V read head p / group there (an
                             # int, or an integer scalar input: read at run time)
    causal: Optional[int] = None  # key j allowed only when j <= i + causal (+ offset)
    offset: Optional[ir.Value] = None  # an integer scalar input added to `causal`
    rows: Optional[RowOrder] = None  # the output's row loops, the query row last


def run(module: ir.Operation, options: Options) -> None:
    verify_bodies(module)  # what this pass relies on, also when run on its own
    funcs = func_by_name(module)
    for compute in compute_ops(module):
        body = body_of(compute, funcs)
        if body is None or len(compute.results) != 1:  # attention has one result
            continue
        found = _match(compute, body)
        if found is not None:
            _replace(compute, body, found)
            body.erase()


# ---------------------------------------------------------------- matching

def _match(compute: ir.Operation, body: ir.Operation) -> Optional[_Attention]:
    block = body.regions[0].blocks[0]
    out = block.arguments[len(block.arguments) - 1]
    if not isinstance(out.type, ir.RankedTensorType) or \
            ir.RankedTensorType(out.type).rank < 2:
        return None
    if any(op.name in ("cir.yield", "cir.alloc", "cir.barrier", "cir.print")
           for op in ops_in(body)):
        return None
    stores = list(ops_in(body, "cir.store"))
    if len(stores) != 1 or stores[0].operands[1] != out:
        return None
    store = stores[0]
    terms = Terms()
    extents = BodyExtents(compute, body, terms)
    rank = ir.RankedTensorType(out.type).rank
    out_shape = [extents.of_out(out, axis) for axis in range(rank)]
    loops = _enclosing_loops(store, body)
    if len(loops) != rank or None in out_shape:
        return None
    for axis, (loop, index) in enumerate(zip(loops, list(store.operands)[2:])):
        if not _plain_loop(terms, extents, loop, out_shape[axis]) or \
                loop.regions[0].blocks[0].arguments[0] != index:
            return None
        terms.name(index, ("E",) if axis == rank - 1 else ("P", axis))
    stored = terms.of(store.operands[0])
    for row_axis in reversed(range(rank - 1)):  # the query row: the last loop, or another
        rows = RowOrder(rank, row_axis)
        found = _match_output(terms, extents, stored, rows, out_shape) or \
            _match_online(terms, extents, stored, rows, out_shape) or \
            _match_flash(terms, extents, stored, rows, out_shape)
        if found is not None and isinstance(found.scale, tuple):  # ("sizes", tree)
            found.scale = _value_of(terms, body, found.scale[1])
        if found is not None and found.scale is not None:
            return found
    return None


def _match_output(terms: Terms, extents: BodyExtents, tree: tuple, rows: list,
                  out_shape: list) -> Optional[_Attention]:
    """`tree` = sum over j of [allowed] exp(score - max) / sum * V[.., j, e]."""
    loop = reduction(tree, 0.0)
    if loop is None:
        return None
    keys, update = loop
    cond, step = guarded(update)
    added = sum_with_acc(step)
    if added is None:
        return None
    for weight, value_load in either(added, "arith.mulf"):
        value = _kv_load_of(terms, value_load, rows, ("iv", 0), ("E",))
        weights = _match_weight(weight)
        if value is None or weights is None:
            continue
        score, row_max, row_sum = weights
        if not _is_max_loop(row_max, keys, cond, score) or \
                not _is_sum_loop(row_sum, keys, cond, score, row_max):
            continue
        found = _match_score(terms, extents, score, rows)
        condition = _match_condition(terms, cond, rows)
        if found is None or condition is None or found[4] != value[1]:
            continue
        query, key, scale, divide, groups = found
        mask_value, mask_dims, causal, offset = condition
        attention = _Attention(query, key, value[0], mask_value, mask_dims, scale, divide,
                               groups, causal, offset, rows)
        if _shapes_agree(attention, extents, extents.of_tree(keys), out_shape):
            return attention
    return None


def _match_online(terms: Terms, extents: BodyExtents, tree: tuple, rows: list,
                  out_shape: list) -> Optional[_Attention]:
    """`tree` = o / l after the online softmax written per element (docs/language.md):
    one loop over every key j carrying m = -inf, l = 0, o = 0, whose body is

        m_new = max(m, score(j))
        l     = exp(m - m_new) * l + exp(score(j) - m_new)
        o     = exp(m - m_new) * o + exp(score(j) - m_new) * V[.., j, e]
        m     = m_new

    which is attention exactly (one pass instead of three)."""
    if tree[0] != "arith.divf" or tree[2][0] != "for" or tree[3][0] != "for" or \
            tree[2][:5] != tree[3][:5] or tree[2][6] != tree[3][6]:
        return None
    loop = tree[2]
    o_k, l_k, yields = loop[5], tree[3][5], loop[6]
    if loop[1] != ("const", 0, "index") or loop[3] != ("const", 1, "index") or \
            len(loop[4]) != 3 or o_k == l_k:
        return None
    m_k = ({0, 1, 2} - {o_k, l_k}).pop()
    inits = loop[4]
    if not (float_const(inits[o_k], 0.0) and float_const(inits[l_k], 0.0) and
            float_const(inits[m_k], float("-inf"))):
        return None
    m_acc, l_acc, o_acc = ("acc", 0, m_k), ("acc", 0, l_k), ("acc", 0, o_k)
    m_new = yields[m_k]
    score = next((s for m, s in either(m_new, "arith.maximumf") if m == m_acc), None)
    found = _match_score(terms, extents, score, rows) if score else None
    if found is None:
        return None
    alpha = ("math.exp", ("arith.subf", m_acc, strip(m_new)))
    weight = ("math.exp", ("arith.subf", strip(score), strip(m_new)))
    added = rescaled(yields[l_k], alpha, l_acc)
    weighted = rescaled(yields[o_k], alpha, o_acc)
    if added is None or weighted is None or strip(added) != weight:
        return None
    query, keys, scale, divide, groups = found
    for w, value_load in either(weighted, "arith.mulf"):
        value = _kv_load_of(terms, value_load, rows, ("iv", 0), ("E",))
        if strip(w) == weight and value is not None and value[1] == groups:
            attention = _Attention(query, keys, value[0], None, [], scale, divide, groups,
                                   rows=rows)
            if _shapes_agree(attention, extents, extents.of_tree(loop[2]), out_shape):
                return attention
    return None


def _match_flash(terms: Terms, extents: BodyExtents, tree: tuple, rows: list,
                 out_shape: list) -> Optional[_Attention]:
    """`tree` = o / l after the spec's flash attention (its tile form, rewritten per
    point): a loop over key blocks kv0 = 0, B, .. carrying o, m, l, whose body is

        m_new = max(m, max_jj [key < n] score(key))          key = kv0 + jj, jj in 0..B
        l     = exp(m - m_new) * l + sum_jj [key < n] exp(score(key) - m_new)
        o     = exp(m - m_new) * o + sum_jj [key < n'] exp(score(key) - m_new) * V[.., key, e]

    the online softmax, which is attention exactly. The keys visited must be all of K's."""
    if tree[0] != "arith.divf" or tree[2][0] != "for" or tree[3][0] != "for" or \
            tree[2][:5] != tree[3][:5] or tree[2][6] != tree[3][6]:
        return None
    _, lower, upper, step, inits, o_k, yields = tree[2]
    l_k = tree[3][5]
    if lower != ("const", 0, "index") or upper[0] != "const" or step[0] != "const" or \
            len(inits) != 3 or o_k == l_k:
        return None
    m_k = ({0, 1, 2} - {o_k, l_k}).pop()
    if not (float_const(inits[o_k], 0.0) and float_const(inits[l_k], 0.0) and
            float_const(inits[m_k], float("-inf"))):
        return None
    m_acc, l_acc, o_acc = ("acc", 0, m_k), ("acc", 0, l_k), ("acc", 0, o_k)
    m_new = yields[m_k]
    block_max = next((b for m, b in either(m_new, "arith.maximumf") if m == m_acc), None)
    loop = reduction(block_max, float("-inf")) if block_max else None
    if loop is None or loop[0] != step:
        return None
    cond, update = guarded(loop[1])
    guard = _key_guard(cond)
    if guard is None:
        return None
    key, bounds = guard
    score = next((x for acc, x in either(update, "arith.maximumf") if acc == ("acc", 0, 0)),
                 None)
    found = _match_score(terms, extents, score, rows, key) if score else None
    if found is None:
        return None
    alpha = ("math.exp", ("arith.subf", m_acc, strip(m_new)))  # attributes stripped
    weight = ("math.exp", ("arith.subf", strip(score), strip(shifted(m_new))))
    block_sum = rescaled(yields[l_k], alpha, l_acc)
    block_pv = rescaled(yields[o_k], alpha, o_acc)
    if block_sum is None or block_pv is None:
        return None
    sums = reduction(block_sum, 0.0)
    if sums is None or sums[0] != step or guarded(sums[1])[0] != cond or \
            strip(sum_with_acc(guarded(sums[1])[1])) != weight:
        return None
    pv = reduction(block_pv, 0.0)
    pv_guard = _key_guard(guarded(pv[1])[0]) if pv and pv[0] == step else None
    if pv_guard is None or pv_guard[0] != key:
        return None
    value = None
    for w, value_load in either(sum_with_acc(guarded(pv[1])[1]) or (), "arith.mulf"):
        if strip(w) == weight:
            value = _kv_load_of(terms, value_load, rows, key, ("E",))
    query, keys, scale, divide, groups = found
    if value is None or value[1] != groups:
        return None
    visited = min([-(-upper[1] // step[1]) * step[1]] + bounds + pv_guard[1])
    attention = _Attention(query, keys, value[0], None, [], scale, divide, groups, rows=rows)
    return attention if _shapes_agree(attention, extents, visited, out_shape) else None


def _key_guard(cond):
    """`key < n` (several, joined by `and`) with key = kv0 + jj -> (key, [n..])."""
    if cond is None:
        return None
    if cond[0] == "arith.andi":
        parts = [_key_guard(c) for c in cond[2:]]
        if any(p is None for p in parts) or parts[0][0] != parts[1][0]:
            return None
        return parts[0][0], parts[0][1] + parts[1][1]
    predicate = dict(cond[1]).get("predicate") if cond[0] == "arith.cmpi" else None
    if predicate not in ("2 : i64", "6 : i64") or cond[3][0] != "const":  # slt, ult
        return None
    key = cond[2]
    if key[0] != "arith.addi" or sorted(map(repr, key[2:])) != sorted(
            map(repr, [("iv", 1), ("iv", 0)])):
        return None
    return key, [cond[3][1]]


def _match_weight(tree: tuple):
    """exp(score - max) / sum -> (score, max, sum)."""
    if tree[0] != "arith.divf" or tree[2][0] != "math.exp" or \
            tree[2][2][0] != "arith.subf":
        return None
    return tree[2][2][2], tree[2][2][3], tree[3]


def _is_max_loop(tree: tuple, keys: tuple, cond, score: tuple) -> bool:
    loop = reduction(tree, float("-inf"))
    if loop is None or loop[0] != keys:
        return False
    loop_cond, step = guarded(loop[1])
    return loop_cond == cond and (score, ("acc", 0, 0)) in either(step, "arith.maximumf")


def _is_sum_loop(tree: tuple, keys: tuple, cond, score: tuple, row_max: tuple) -> bool:
    loop = reduction(tree, 0.0)
    if loop is None or loop[0] != keys:
        return False
    loop_cond, step = guarded(loop[1])
    added = sum_with_acc(step)
    return loop_cond == cond and added is not None and added[0] == "math.exp" and \
        added[2][0] == "arith.subf" and added[2][2:] == (score, row_max)


def _match_score(terms: Terms, extents: BodyExtents, tree: tuple, rows: list,
                 key: tuple = ("iv", 0)):
    """dot(Q[.., i, :], K[.., key, :]) [* or / scale] -> (Q, K, scale, divide, groups);
    `key` as read where the score is computed; K's leading indices p or p / group. The
    scale: a number, a float scalar input, or ("sizes", tree) for a number computed from
    run-time sizes (`/ sqrt(head_dim)`)."""
    candidates = [(tree, 1.0, False)]
    if tree[0] in ("arith.mulf", "arith.divf"):
        for dot, factor in (either(tree, tree[0]) if tree[0] == "arith.mulf"
                            else [(tree[2], tree[3])]):
            number = evaluate(factor)
            if number is not None and number != 0:
                scale = number if tree[0] == "arith.mulf" else 1.0 / number
                candidates.append((dot, scale, False))
            elif factor[0] == "free" and _is_input(terms.free[factor[1]]) and \
                    isinstance(terms.free[factor[1]].type, ir.FloatType):
                candidates.append((dot, terms.free[factor[1]], tree[0] == "arith.divf"))
            elif factor[0].startswith(("arith.", "math.")) and \
                    is_size_expression(factor, extents):
                candidates.append((dot, ("sizes", factor), tree[0] == "arith.divf"))
    for dot, scale, divide in candidates:
        loop = reduction(dot, 0.0)
        if loop is None:
            continue
        added = sum_with_acc(loop[1])
        if added is None or added[0] != "arith.mulf":
            continue
        for q_load, k_load in either(added, "arith.mulf"):
            query = _load_of(terms, q_load, rows.physical(list(rows)) + [("iv", 0)])
            keys = _kv_load_of(terms, k_load, rows, shifted(key), ("iv", 0))
            if query is not None and keys is not None and \
                    extents.of_tensor(query, -1) == extents.of_tree(loop[0]) == \
                    extents.of_tensor(keys[0], -1):
                return query, keys[0], scale, divide, keys[1]
    return None


def _match_condition(terms: Terms, cond, rows: list):
    """No condition, a mask, a causal comparison, or a mask and a causal comparison joined
    by `and` -> (mask, mask_dims, causal offset or None, the scalar input added to it or
    None); None for anything else."""
    if cond is None:
        return None, [], None, None
    offset = _causal(terms, cond, rows[-1])
    if offset is not None:
        return (None, []) + offset
    mask = _match_mask(terms, cond, rows)
    if mask is not None:
        return mask + (None, None)
    if cond[0] == "arith.andi":
        for causal, masked in ((cond[2], cond[3]), (cond[3], cond[2])):
            offset = _causal(terms, causal, rows[-1])
            mask = _match_mask(terms, masked, rows)
            if offset is not None and mask is not None:
                return mask + offset
    return None


def _causal(terms: Terms, cond: tuple, row: tuple):
    """`j <= i + c [+ s]` -> (c, s or None), s an integer scalar input; None otherwise."""
    found = causal_offset(cond, row)
    if found is None:
        return None
    constant, scalar = found
    if scalar is None:
        return constant, None
    value = terms.free[scalar[1]]
    if not _is_input(value) or not isinstance(value.type, (ir.IntegerType, ir.IndexType)):
        return None
    return constant, value


def _match_mask(terms: Terms, cond, rows: list):
    """A bool load indexed by the row loops and j -> (mask, mask_dims)."""
    if cond[0] != "cir.load" or cond[2][0] != "free":
        return None
    mask = terms.free[cond[2][1]]
    loops = rows + [("iv", 0)]
    if not _is_input(mask) or str(ir.RankedTensorType(mask.type).element_type) != "i1" \
            or any(i not in loops for i in cond[3:]):
        return None
    return mask, [loops.index(i) for i in cond[3:]]


def _shapes_agree(found: _Attention, extents: BodyExtents, keys, out_shape: list) -> bool:
    """The loops cover exactly the tensors cir.attention reads and writes (extents:
    body_extents.py's keys, numbers when static; `keys` the key loop's)."""
    shape = {name: extents.of_shape(v)
             for name, v in (("q", found.query), ("k", found.key), ("v", found.value))}
    out_shape = found.rows.logical_shape(out_shape)
    shape = {name: found.rows.logical_shape(s) for name, s in shape.items()}
    fixed = [a for a, g in enumerate(found.groups) if not isinstance(g, ir.Value)]
    ok = keys is not None and shape["q"][:-1] == out_shape[:-1] and \
        shape["k"][-2] == keys == shape["v"][-2] and shape["v"][-1] == out_shape[-1] and \
        all(shape["k"][a] == shape["v"][a] for a in fixed) and \
        all(_grouped(extent, kv, g)
            for extent, kv, g in zip(out_shape[:-2], shape["k"][:-2], found.groups))
    types = {str(ir.RankedTensorType(v.type).element_type)
             for v in (found.query, found.key, found.value)}
    element = ir.RankedTensorType(found.query.type).element_type
    ok = ok and len(types) == 1 and str(element) in ("f16", "bf16", "f32", "f64") and \
        (isinstance(found.scale, (float, tuple)) or found.scale.type == element)
    if ok and found.mask is not None:
        loops = out_shape[:-1] + [keys]
        ok = extents.of_shape(found.mask) == [loops[d] for d in found.mask_dims]
    return ok


def _grouped(extent, kv_extent, group) -> bool:
    """Query heads `extent` read key heads `kv_extent` in groups of `group`: the same
    extent, or (grouped) static extents with kv_extent * group = extent; nothing ties a
    run-time number of key heads to the query heads' (the body's reads are clamped, a
    constant group's reads in cir.attention are not). A run-time group (a Value) reads
    clamped, as the body does: any extents."""
    if isinstance(group, ir.Value):
        return True
    if group == 1:
        return extent == kv_extent
    return isinstance(extent, int) and isinstance(kv_extent, int) and \
        kv_extent * group == extent


# ---------------------------------------------------------------- loads

def _load_of(terms: Terms, tree: tuple, indices: list) -> Optional[ir.Value]:
    """The input that `tree` loads at exactly `indices`, or None."""
    if tree[0] != "cir.load" or tree[2][0] != "free" or list(tree[3:]) != indices:
        return None
    tensor = terms.free[tree[2][1]]
    return tensor if _is_input(tensor) and _ranked(tensor.type) else None


def _kv_load_of(terms: Terms, tree: tuple, rows: RowOrder, key: tuple, last: tuple):
    """The input that `tree` loads at the rows with `key` for the query row (the leading
    ones as they are or divided by groups), then `last` -> (it, groups), groups: per
    leading axis, the constant the loop is divided by (1: read as is)."""
    lead = list(rows[:-1])
    indices = rows.physical(lead + [key]) + [last]
    if tree[0] != "cir.load" or tree[2][0] != "free" or len(tree) != 3 + len(indices):
        return None
    read = list(tree[3:])
    if any(read[a] != indices[a] for a in (rows.perm[-1], len(indices) - 1)):
        return None
    groups = [kv_divisor(read[axis], loop) for axis, loop in zip(rows.perm, lead)]
    tensor = terms.free[tree[2][1]]
    if None in groups or not _is_input(tensor) or not _ranked(tensor.type):
        return None
    groups = [terms.free[g[1]] if isinstance(g, tuple) else g for g in groups]
    run_time = [g for g in groups if isinstance(g, ir.Value)]
    if len(run_time) > 1 or any(not _is_input(g) or not isinstance(
            g.type, (ir.IntegerType, ir.IndexType)) for g in run_time):
        return None  # one run-time group, an integer input
    return tensor, groups


# ---------------------------------------------------------------- IR helpers

def _value_of(terms: Terms, body: ir.Operation, tree: tuple) -> Optional[ir.Value]:
    """A value of the body whose tree is `tree` (one without loop variables)."""
    for op in ops_in(body, tree[0]):
        for result in op.results:
            if terms.of(result) == tree:
                return result
    return None


def _enclosing_loops(op: ir.Operation, body: ir.Operation) -> list[ir.Operation]:
    loops = []
    parent = op.parent
    while parent is not None and parent.operation != body.operation:
        if parent.operation.name != "scf.for":
            return []
        loops.append(parent.operation)
        parent = parent.operation.parent
    return list(reversed(loops))


def _plain_loop(terms: Terms, extents: BodyExtents, loop: ir.Operation, extent) -> bool:
    lower, upper, step = (terms.of(v) for v in list(loop.operands)[:3])
    return len(loop.operands) == 3 and lower == ("const", 0, "index") and \
        step == ("const", 1, "index") and extents.of_tree(upper) == extent


def _is_input(value: ir.Value) -> bool:
    """An argument of the body function (what the compute's operands bind)."""
    return isinstance(value, ir.BlockArgument) and \
        value.owner.owner.operation.name == "func.func"


def _ranked(type_: ir.Type) -> bool:
    return isinstance(type_, ir.RankedTensorType)


# ---------------------------------------------------------------- rewriting

def _replace(compute: ir.Operation, body: ir.Operation, found: _Attention) -> None:
    outer = dict(zip(body.regions[0].blocks[0].arguments, compute.operands))
    element = ir.RankedTensorType(found.query.type).element_type
    with ir.InsertionPoint(compute), compute.location:
        if isinstance(found.scale, float):  # kept in the precision the scores are summed in
            wide = element if str(element) == "f64" else ir.F32Type.get()
            scale = arith.ConstantOp(wide, found.scale).result
        else:  # an input, or a number computed from sizes: rebuilt here from main's
            scale = Lowering(compute, body).outer(found.scale)
            if found.divide:
                scale = arith.DivFOp(arith.ConstantOp(scale.type, 1.0).result, scale).result
            if str(scale.type) == "f64" and str(element) != "f64":  # scores sum in f32
                scale = arith.TruncFOp(ir.F32Type.get(), scale).result
        # another query row than the last loop: Q, K and V transposed to [P.., S, D]
        order = found.rows.perm + [len(found.rows.perm)]
        operands = [_transposed(outer[v], order)
                    for v in (found.query, found.key, found.value)] + [scale]
        run_time = [(axis, g) for axis, g in enumerate(found.groups)
                    if isinstance(g, ir.Value)]
        attributes = {"operandSegmentSizes": ir.DenseI32ArrayAttr.get(
            [1, 1, 1, 1, int(found.mask is not None), int(found.offset is not None),
             len(run_time)])}
        if found.mask is not None:
            operands.append(outer[found.mask])
            attributes["mask_dims"] = ir.DenseI64ArrayAttr.get(found.mask_dims)
        if found.offset is not None:
            operands.append(outer[found.offset])
        for axis, group in run_time:
            operands.append(outer[group])
            attributes["group_axis"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), axis)
        if found.causal is not None:
            attributes["causal_offset"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), found.causal)
        constant = [1 if isinstance(g, ir.Value) else g for g in found.groups]
        if any(g != 1 for g in constant):
            attributes["kv_group"] = ir.DenseI64ArrayAttr.get(constant)
        for name in ("names", "workgroup", "shared", "device"):
            if name in compute.attributes:
                attributes[name] = compute.attributes[name]
        result_type = ir.RankedTensorType(compute.results[0].type)
        logical = ir.RankedTensorType.get(found.rows.logical_shape(list(result_type.shape)),
                                          result_type.element_type)
        attention = ir.Operation.create("cir.attention", results=[logical],
                                        operands=operands, attributes=attributes)
        result = _transposed(attention.results[0], [order.index(a) for a in range(len(order))])
    compute.results[0].replace_all_uses_with(result)
    compute.erase()


def _transposed(value: ir.Value, order: list) -> ir.Value:
    """`value` with its axes in `order` (linalg.transpose), itself for the identity."""
    if order == sorted(order):
        return value
    sizes = tensor_extents(value)
    empty = tensor.EmptyOp([sizes[a] for a in order],
                           ir.RankedTensorType(value.type).element_type).result
    return linalg.transpose(value, outs=[empty], permutation=order).results[0]
