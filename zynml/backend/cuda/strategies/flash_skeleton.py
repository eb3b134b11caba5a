"""The flash-attention skeleton the attention kernels share (attention.py,
attention_simt_tiled.py, attention_tensor_core.py, attention_wgmma.py).

Every one of them walks the keys a tile at a time and keeps, per query row, a running
maximum m, a running sum l and an output accumulator O (the spec's flash attention, with
the scores in base 2 so that each exponential is one ex2 instruction):

    s = score * scale * log2(e)          -inf where the row may not see the key
    m_new = max(m, max_j s_j);  alpha = exp2(m - m_new);  p_j = exp2(s_j - m_new)
    l = l * alpha + sum_j p_j;  O = O * alpha + sum_j p_j V_j
    out = O / l                          0 for a row with no allowed key (l = 0)

What differs between the kernels is how the two products run (SIMT FMAs, mma.sync,
wgmma), how the tiles reach shared memory (thread copies, cp.async, TMA), and which scores
a thread holds (its register layout). What they share is here:

- the frame: the group's sizes, what the kernel takes, the scale in base 2, the grid;
- the key rule: which (row, key) a row may attend (the key exists, the mask allows it,
  causal: key <= row + offset), and how many key tiles a block of rows visits;
- the online softmax update above, for any number of rows of any number of values;
- the final rule: 1 / l, or 0 for a row that saw no allowed key;
- FlashAttention-2's order of copies and products over the key tiles, for the kernels
  that copy K and V with cp.async into one buffer each (attention_simt_tiled,
  attention_tensor_core).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, nvgpu, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import float_constant, widened
from ....lowering.cir_ops import clone_op, defining_op
from .extents import Extent, as_index, buffer_extents, ceil_div, minus, product
from .kernel_builder import (delinearize, dense_row_major, index_const, kernel_type,
                             new_kernel)
from .tuning import problem_key

WARP = 32
LOG2E = math.log2(math.e)  # exp(x) = exp2(x * log2(e))

# ---------------------------------------------------------------- the frame
# (`group`: an attention_match.Group, the generics of one attention)


def operand_shape(value: ir.Value) -> list[int]:
    return list(ir.MemRefType(value.type).shape)


def element_name(value: ir.Value) -> str:
    return str(ir.MemRefType(value.type).element_type)


def sizes(group) -> tuple[list, int, int, int, int]:
    """(lead, rows, d, keys, e): the (p..) loops' sizes, the queries, Q's and K's head
    dim, the keys, V's head dim."""
    q_shape = operand_shape(group.query)
    return (q_shape[:-2], q_shape[-2], q_shape[-1], operand_shape(group.key)[-2],
            operand_shape(group.value)[-1])


def run_time_sizes(group) -> bool:
    """Whether Q, K, V or out has a run-time size (the lead, rows or keys: a kernel for
    them reads them with memref.dim, frame_fields)."""
    return any(not ir.MemRefType(v.type).has_static_shape
               for v in (group.query, group.key, group.value, group.out))


def host_sizes(group) -> tuple[list, Extent, Extent]:
    """(lead, rows, keys) on the host (the insertion point: before the group's last op,
    where its launch goes): numbers, or memref.dim of out's and K's buffers."""
    return _sizes_of(group.out, group.key)


def _sizes_of(out: ir.Value, key: ir.Value) -> tuple[list, Extent, Extent]:
    """(lead, rows, keys) read off out's and K's buffers (or their kernel arguments)."""
    out_extents = buffer_extents(out)
    return out_extents[:-2], out_extents[-2], buffer_extents(key)[-2]


def head_dims(group, head_dim: Optional[int] = None) -> tuple[int, int]:
    """(d, e): Q's (and K's) head dim and V's; (head_dim, head_dim) where given (a kernel
    built for one value of run-time head dims, attention_sizes.py)."""
    if head_dim:
        return head_dim, head_dim
    return operand_shape(group.query)[-1], operand_shape(group.value)[-1]


def common_element(group) -> Optional[str]:
    """The element type query, key, value and out share; None where they differ."""
    elements = {element_name(v) for v in (group.query, group.key, group.value, group.out)}
    return elements.pop() if len(elements) == 1 else None


def row_major(value: ir.Value) -> bool:
    """Dense row-major from the buffer's start (16-byte copies stay aligned): the
    identity layout (also with run-time sizes), or static strides that are."""
    type_ = ir.MemRefType(value.type)
    if isinstance(type_.layout, ir.AffineMapAttr) and \
            ir.AffineMapAttr(type_.layout).value == ir.AffineMap.get_identity(type_.rank):
        return True
    _, offset = type_.get_strides_and_offset()
    return offset == 0 and dense_row_major(value.type)


def _constant_scale(group):
    op = defining_op(group.scale)
    return op if op is not None and op.name == "arith.constant" else None


def positive_scale(group) -> Optional[float]:
    """The scale when it is a constant > 0 (the kernels that scale S in f32 take
    max(s) * c for max(s * c), which needs c > 0)."""
    op = _constant_scale(group)
    if op is None:
        return None
    value = ir.FloatAttr(op.attributes["value"]).value
    return value if value > 0 and math.isfinite(value) else None


def run_time_scale(group) -> bool:
    """Whether the scale is a value of the call (an input, or computed from run-time
    sizes), not a constant."""
    return _constant_scale(group) is None


def base2_factor(group) -> float:
    """c = scale * log2(e), for a positive constant scale: exp(s * scale) = exp2(s * c)."""
    return positive_scale(group) * LOG2E


def kernel_values(group) -> list:
    """What a kernel that reads its operands itself takes, in order: query, key, value,
    the mask if any, out, the scale unless it is a constant (cloned in instead), a
    run-time causal offset and a run-time group (0-d buffers or host integers) if any."""
    runtime = group.causal.runtime if group.causal is not None else None
    run_time_group = group.run_time_group
    return [group.query, group.key, group.value] + \
        ([group.mask] if group.mask is not None else []) + [group.out] + \
        ([] if _constant_scale(group) is not None else [group.scale]) + \
        ([runtime] if runtime is not None else []) + \
        ([run_time_group[1].group] if run_time_group is not None else [])


def problem(group) -> str:
    """The tuning problem of an attention (tuning.py): what its kernel takes."""
    return problem_key(kernel_values(group))


def scale_in_kernel(group, args: dict) -> ir.Value:
    """The scale inside the kernel: the constant cloned, or its argument (`args`: the
    kernel_values -> the kernel's arguments)."""
    constant = _constant_scale(group)
    return clone_op(constant, []).results[0] if constant is not None else args[group.scale]


def base2_scale(group, args: dict, element: ir.Type) -> ir.Value:
    """scale * log2(e) inside the kernel, in `element`: the factor of the kernels that
    scale Q as they read it (their scores are in base 2 from the product on)."""
    return arith.MulFOp(widened(scale_in_kernel(group, args), element),
                        float_constant(element, LOG2E)).result


def covering(configs: tuple, group, dims: Optional[tuple[int, int]] = None) -> list:
    """The params of a strategy's CONFIGS ((head dim bound, params), ...) whose bound
    covers the larger of Q's and V's head dims (`dims` where given), in order."""
    d, e = dims or head_dims(group)
    return [params for bound, params in configs if max(d, e) <= bound]


@contextmanager
def kernel_entry(gpu_module: ir.Operation, kernel_name: str, values: list, threads: int,
                 location, min_blocks: int = 0):
    """A kernel of `threads` threads a block that takes `values` (as kernel_type gives
    them): the with block builds its body, given value -> argument; it returns after.
    `min_blocks`: blocks a multiprocessor must hold at once (ptxas keeps the registers
    a thread uses to fit them: PTX's .minnctapersm)."""
    func = new_kernel(gpu_module, kernel_name, [kernel_type(v.type) for v in values],
                      [threads])
    if min_blocks:
        func.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), min_blocks)
    with ir.InsertionPoint(func.regions[0].blocks[0]), location:
        yield dict(zip(values, func.regions[0].blocks[0].arguments))
        gpu.ReturnOp([])


def row_blocks_grid(group, block_m: int) -> tuple:
    """A block per block_m query rows (x) of each (p..) slice (y): numbers, or values the
    plan computes on the host before the group's launch (run-time sizes)."""
    with ir.InsertionPoint(group.ops[-1]), group.ops[-1].location:
        lead, rows, _ = host_sizes(group)
        return ceil_div(rows, block_m), product(lead), 1


def block_slice(lead: list) -> list:
    """The (p..) indices of this block's slice (the grid's y)."""
    return delinearize(gpu.block_id(gpu.Dimension.y), lead) if lead else []


def declare_static_tiles(gpu_module: ir.Operation, kernel_name: str, tiles: dict,
                         location) -> None:
    """A static shared-memory buffer `<kernel>_<name>` per entry of `tiles` (name ->
    memref type in the workgroup address space), 16-byte aligned."""
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), location:
        for name, type_ in tiles.items():
            memref.GlobalOp(f"{kernel_name}_{name}", ir.TypeAttr.get(type_),
                            sym_visibility="private", alignment=16)


def static_tiles(kernel_name: str, tiles: dict) -> dict:
    """The buffers of declare_static_tiles, inside the kernel."""
    return {name: memref.get_global(type_, f"{kernel_name}_{name}")
            for name, type_ in tiles.items()}


# ---------------------------------------------------------------- index arithmetic

def add(a: ir.Value, b) -> ir.Value:
    """a + b (b an index value or an int; + 0 adds nothing)."""
    if isinstance(b, int):
        if b == 0:
            return a
        b = index_const(b)
    return arith.AddIOp(a, b).result


def mul(a: ir.Value, b: int) -> ir.Value:
    return arith.MulIOp(a, index_const(b)).result


def less(a: ir.Value, b: Extent) -> ir.Value:
    """a < b, unsigned (an i1)."""
    return arith.CmpIOp(arith.CmpIPredicate.ult, a, as_index(b)).result


def clamp(a: ir.Value, extent: Extent) -> ir.Value:
    """min(a, extent - 1): the last row or key for those past the end."""
    return arith.MinUIOp(a, as_index(minus(extent, 1))).result


# ---------------------------------------------------------------- copies

def spread_over_threads(tid: ir.Value, total: int, threads: int,
                        piece: Callable[[ir.Value], object]) -> list:
    """piece(flat) for flat = tid, tid + threads, .. < total: the block's threads share
    `total` pieces of work, the last round (where some threads have none) under a guard.
    The pieces' results, those outside the guard."""
    results = []
    for first in range(0, total, threads):
        flat = add(tid, first)
        if first + threads <= total:
            results.append(piece(flat))
            continue
        guard = scf.IfOp(less(flat, total))
        with ir.InsertionPoint(guard.then_block):
            piece(flat)
            scf.YieldOp([])
    return results


def async_copy_chunk(source: ir.Value, tile: ir.Value, slice_ivs: list, row0: ir.Value,
                     per_row: int, flat: ir.Value, extent: Extent, elements: int,
                     zero_fill: bool) -> ir.Value:
    """cp.async of chunk `flat` (16 bytes: `elements` values) of the rows row0.. of
    `source` (`extent` rows; per_row chunks a row) into row flat / per_row of `tile`. A
    row past the end reads the last one, or, with zero_fill, nothing: zeros land (V's
    zeros then meet P's zeros: no NaN from memory never written). Its token."""
    r = arith.DivUIOp(flat, index_const(per_row)).result
    col = mul(arith.RemUIOp(flat, index_const(per_row)).result, elements)
    row_at = add(row0, r)
    src_elements = None
    if zero_fill:
        src_elements = arith.SelectOp(less(row_at, extent), index_const(elements),
                                      index_const(0)).result
    return nvgpu.DeviceAsyncCopyOp(
        tile, [r, col], source, slice_ivs + [clamp(row_at, extent), col],
        ir.IntegerAttr.get(ir.IndexType.get(), elements), srcElements=src_elements,
        bypassL1=True).result


def async_group(copies: list) -> ir.Value:
    """Commit the thread's cp.async copies so far as one group (a wait takes its token;
    the group holds every copy issued before it, guarded or not)."""
    return nvgpu.DeviceAsyncCreateGroupOp(copies).result


# ---------------------------------------------------------------- the key rule

def both(a: Optional[ir.Value], b: ir.Value) -> ir.Value:
    """a and b, where a None allows everything."""
    return b if a is None else arith.AndIOp(a, b).result


def mask_allows(byte: ir.Value) -> ir.Value:
    """A mask byte (the kernels take the bool mask as i8) allows its key when not 0."""
    return arith.CmpIOp(arith.CmpIPredicate.ne, byte,
                        arith.ConstantOp(byte.type, 0).result).result


def only_allowed(allowed: ir.Value, score: ir.Value) -> ir.Value:
    """The score where the key is allowed, else -inf (its exponential is 0)."""
    return arith.SelectOp(allowed, score, float_constant(score.type, float("-inf"))).result


def keys_last(mask_dims: list, lead: list) -> bool:
    """Whether the mask's last axis is the keys' (j): a row's keys are contiguous bytes."""
    return mask_dims[-1] == len(lead) + 1


def mask_pair(mask: ir.Value, index: Callable[[ir.Value], list], key0: ir.Value,
              keys: Extent, pairs: bool, bounds: bool) -> list:
    """The mask's bytes of keys key0 and key0 + 1 (key0 even) of one row, `index(key)`
    its indices: one 2-byte load where `pairs` (FlashFrame.mask_pairs), else two. Where
    `bounds` (a tile may reach past the last key), keys past the end read the last ones
    (the bounds check drops them)."""
    if pairs:
        if bounds:
            key0 = arith.MinUIOp(key0, as_index(minus(keys, 2))).result
        pair = vector.LoadOp(ir.VectorType.get([2], ir.IntegerType.get_signless(8)),
                             mask, index(key0), alignment=2).result
        return [vector.ExtractOp(pair, [], [c]).result for c in (0, 1)]
    pair = [add(key0, c) for c in (0, 1)]
    if bounds:
        pair = [clamp(key, keys) for key in pair]
    return [memref.LoadOp(mask, index(key)).result for key in pair]


def frame_fields(group, args: Optional[dict] = None, head_dim: Optional[int] = None) -> dict:
    """The FlashFrame fields of an attention group, inside a kernel (`args`: the
    kernel_values -> its arguments; a run-time causal offset is loaded from there, and
    run-time sizes read off out's and K's arguments). `head_dim`: the kernel's, where the
    plan runs it only for Q's and V's head dims of that value."""
    lead, rows, _, keys, _ = sizes(group)
    d, e = head_dims(group, head_dim)
    if run_time_sizes(group):
        lead, rows, keys = _sizes_of(args[group.out], args[group.key])
    causal = group.causal
    if causal is not None and causal.runtime is not None:
        causal = causal.in_kernel(args)
    kv_group = list(group.kv_group) or [1] * len(lead)
    if group.run_time_group is not None:  # its divisor loaded once, at the kernel's start
        axis, run_time = group.run_time_group
        kv_group[axis] = run_time.in_kernel(args, axis, group.key, group.value)
    return dict(lead=lead, rows=rows, d=d, keys=keys, e=e, mask_dims=group.mask_dims,
                causal=causal, kv_group=kv_group)


@dataclass
class FlashFrame:
    """What every attention kernel knows of its problem, and the rule of which keys a
    row may attend; each kernel class extends it with its params and tiles."""
    lead: list        # the (p..) loops' sizes (numbers, or index values: run-time sizes)
    rows: Extent      # queries
    d: int            # Q's and K's head dim
    keys: Extent
    e: int            # V's and out's head dim
    mask_dims: list   # mask axis -> loop of (p.., i, j)
    causal: object    # attention_match.Causal, or None: every key (the mask aside)
    kv_group: list    # per (p..) axis: K and V are read at p / group (grouped-query;
                      # an int, or a run-time group in the kernel: attention_match.py)

    def kv_slice(self, slice_ivs: list) -> list:
        """K's and V's (p..) indices for the slice `slice_ivs` of Q and out."""
        return [iv if g == 1 else arith.DivUIOp(iv, index_const(g)).result
                if isinstance(g, int) else g.head(iv)
                for iv, g in zip(slice_ivs, self.kv_group)]

    def mask_index(self, slice_ivs: list, row: ir.Value, key: ir.Value) -> list:
        """The mask's indices at (row, key) of the slice `slice_ivs`."""
        loops = slice_ivs + [row, key]
        return [loops[k] for k in self.mask_dims]

    @property
    def mask_pairs(self) -> bool:
        """Whether keys 2t and 2t + 1 of a mask row are one aligned 2-byte load: the
        keys are the mask's last axis and its rows have even length."""
        return keys_last(self.mask_dims, self.lead) and isinstance(self.keys, int) and \
            self.keys % 2 == 0

    def allowed(self, key: ir.Value, row: ir.Value, slice_ivs: list, bounds: bool,
                mask: Optional[ir.Value]) -> Optional[ir.Value]:
        """May `row` see `key` (an i1; None: always): the key exists (checked where
        `bounds`: a tile may reach past the last), the mask's byte is set (a key past
        the end reads the last one's), and (causal) key <= row + offset."""
        verdict = less(key, self.keys) if bounds else None
        if mask is not None:
            key_in = clamp(key, self.keys) if bounds else key
            byte = memref.LoadOp(mask, self.mask_index(slice_ivs, row, key_in)).result
            verdict = both(verdict, mask_allows(byte))
        if self.causal:
            verdict = both(verdict, self.causal.allows(key, row))
        return verdict

    def key_tiles(self, first_row: ir.Value, block_m: int, block_n: int) -> ir.Value:
        """How many tiles of block_n keys the block of rows first_row.. visits: all, or
        (causal) those up to its last row's last allowed key; the tiles above the
        diagonal are neither copied nor multiplied. 0 where a negative offset leaves
        its rows none."""
        if not self.causal:
            return as_index(ceil_div(self.keys, block_n))
        end = self.causal.key_end(first_row, block_m, self.rows, self.keys)
        return arith.DivUIOp(add(end, block_n - 1), index_const(block_n)).result


# ---------------------------------------------------------------- across lanes

def shuffle_xor(value: ir.Value, offset: int) -> ir.Value:
    """The value of the lane whose index is this lane's xor `offset` (whole warp)."""
    i32 = ir.IntegerType.get_signless(32)
    return gpu.shuffle(value, arith.ConstantOp(i32, offset).result,
                       arith.ConstantOp(i32, WARP).result, gpu.ShuffleMode.XOR)[0]


def xor_reduce(value: ir.Value, op, lanes: int) -> ir.Value:
    """`op` over `lanes` consecutive lanes (a power of two) by xor shuffles 1, 2, ..:
    the lanes that share a row each end with the row's result."""
    offset = 1
    while offset < lanes:
        value = op(value, shuffle_xor(value, offset)).result
        offset *= 2
    return value


def quad_reduce(value: ir.Value, op) -> ir.Value:
    """`op` over the 4 lanes of a quad: an mma accumulator row's values lie in one."""
    return xor_reduce(value, op, 4)


def chain(values: list, op) -> ir.Value:
    """op over `values`, one after the other."""
    result = values[0]
    for value in values[1:]:
        result = op(result, value).result
    return result


def tree(values: list, op) -> ir.Value:
    """op over `values` as a balanced tree (independent steps the GPU can overlap)."""
    while len(values) > 1:
        values = [op(a, b).result for a, b in zip(values[::2], values[1::2])] + \
            ([values[-1]] if len(values) % 2 else [])
    return values[0]


# ---------------------------------------------------------------- the online softmax

class Update(NamedTuple):
    """A key tile's online softmax, per row: the new max and partial sum, alpha (what O
    and l are rescaled by) and the row's probabilities, in the order of its values."""
    maxima: list
    sums: list
    alphas: list
    probs: list


@dataclass(frozen=True)
class OnlineSoftmax:
    """The update of one key tile for the rows a thread holds, whatever its layout: it
    takes each row's scores (any number), the running maxima and sums, and gives the
    new ones, alpha = exp2(m - m_new) and p = exp2(s - m_new). The sums are this
    thread's values only: the lanes that share a row add theirs once, at the end."""
    element: ir.Type        # of the scores and the running values (f32, f64)
    lanes: int = 1          # consecutive lanes that share a row: its max meets by shuffles
    scale: Optional[float | ir.Value] = None  # c: scores still to be scaled (s * c -
                                   # m * c, one FMA each), a number or a value in the
                                   # kernel; None: already in base 2
    balanced: bool = False  # a row's max and sum as a balanced tree, not a chain
    may_be_empty: bool = True  # a row may have no allowed key yet (its max is -inf)

    def update(self, scores, maxima: list, sums: list, allowed=None) -> Update:
        """`scores`: each row's (a generator may build a row when it is reached);
        `allowed`: per row, an i1 per score (a forbidden score counts as -inf), or None."""
        combine = tree if self.balanced else chain
        update = Update([], [], [], [])
        for r, values in enumerate(scores):
            if allowed is not None:
                values = [only_allowed(ok, v) for ok, v in zip(allowed[r], values)]
            row_max = combine([maxima[r]] + values, arith.MaximumFOp)
            row_max = xor_reduce(row_max, arith.MaximumFOp, self.lanes)
            shift = self._shift(row_max)
            alpha = mmath.Exp2Op(self._exponent(maxima[r], shift)).result
            probs = [mmath.Exp2Op(self._exponent(v, shift)).result for v in values]
            total = combine([arith.MulFOp(sums[r], alpha).result] + probs, arith.AddFOp)
            for part, value in zip(update, (row_max, total, alpha, probs)):
                part.append(value)
        return update

    def _shift(self, row_max: ir.Value) -> ir.Value:
        """What each exponent takes off: m_new, or scaled -(m_new * c) (added by the
        FMA). A row with no allowed key yet has m_new = -inf: shifted by 0 instead, its
        exponentials are 0, not NaN."""
        shift = row_max
        if self.scale is not None:
            shift = arith.NegFOp(arith.MulFOp(row_max, self._c()).result).result
        if self.may_be_empty:
            empty = arith.CmpFOp(arith.CmpFPredicate.OEQ, row_max,
                                 float_constant(self.element, float("-inf"))).result
            shift = arith.SelectOp(empty, float_constant(self.element, 0.0), shift).result
        return shift

    def _exponent(self, value: ir.Value, shift: ir.Value) -> ir.Value:
        if self.scale is None:
            return arith.SubFOp(value, shift).result
        return mmath.FmaOp(value, self._c(), shift).result

    def _c(self) -> ir.Value:
        return self.scale if isinstance(self.scale, ir.Value) else \
            float_constant(self.element, self.scale)


def inverse_sum(total: ir.Value, may_be_empty: bool = True) -> ir.Value:
    """What O is multiplied by at the end: 1 / l, or 0 for a row with no allowed key
    (l = 0 and O = 0: out is 0, as the spec's loops give)."""
    element = total.type
    zero = float_constant(element, 0.0)
    some = arith.CmpFOp(arith.CmpFPredicate.OGT, total, zero).result if may_be_empty \
        else None
    inverse = arith.DivFOp(float_constant(element, 1.0), total).result
    return inverse if some is None else arith.SelectOp(some, inverse, zero).result


# ---------------------------------------------------------------- FlashAttention-2's order

@dataclass
class KeyTileLoop:
    """FlashAttention-2's loop over key tiles with one K and one V buffer in shared
    memory: K tile j + 1 is in flight while the threads multiply P V of tile j, V tile j
    while they compute the scores of tile j. The kernel gives the pieces:

    copy_keys(kv0), copy_values(kv0): issue the copies of the tile of keys kv0..; the
        token of their cp.async group, or None (copied by the threads: done);
    scores(kv0, m, l): S of the tile and its online softmax, an Update;
    weighted_values(o, update): O * alpha + P V.
    """
    block_n: int        # keys per tile
    rows: int           # the rows a thread holds
    copy_keys: Callable
    copy_values: Callable
    scores: Callable
    weighted_values: Callable

    def emit(self, tiles: ir.Value, first: Optional[ir.Value], o: list) -> tuple[list, list]:
        """The loop over `tiles` key tiles; K tile 0 is copied already (`first`: its
        token, None where the threads copied it). (l, O) at the end, nothing in flight."""
        f32 = ir.F32Type.get()
        tokens = [first] if first is not None else []
        rows = self.rows
        loop = scf.ForOp(index_const(0), tiles, index_const(1),
                         tokens + [float_constant(f32, float("-inf"))] * rows +
                         [float_constant(f32, 0.0)] * rows + o)
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            state = list(loop.inner_iter_args)
            token = state.pop(0) if first is not None else None
            m, l, o = state[:rows], state[rows:2 * rows], state[2 * rows:]
            kv0 = mul(j, self.block_n)
            if token is not None:
                nvgpu.DeviceAsyncWaitOp(token, numGroups=0)   # K tile j is here
            gpu.BarrierOp()            # ... for all; P V of tile j - 1 done: V is free
            v_token = self.copy_values(kv0)
            update = self.scores(kv0, m, l)
            if v_token is not None:
                nvgpu.DeviceAsyncWaitOp(v_token, numGroups=0)  # V tile j is here
            gpu.BarrierOp()            # ... for all; S of tile j done: K is free
            next_j = add(j, 1)
            more = arith.CmpIOp(arith.CmpIPredicate.ult, next_j, tiles).result
            next_kv0 = mul(next_j, self.block_n)
            if token is not None:
                prefetch = scf.IfOp(more, [token.type], has_else=True)
                with ir.InsertionPoint(prefetch.then_block):
                    scf.YieldOp([self.copy_keys(next_kv0)])
                with ir.InsertionPoint(prefetch.else_block):  # the last tile: nothing
                    scf.YieldOp([v_token])                    # to fetch, a spent token
                tokens = [prefetch.results[0]]
            else:
                prefetch = scf.IfOp(more)
                with ir.InsertionPoint(prefetch.then_block):
                    self.copy_keys(next_kv0)
                    scf.YieldOp([])
            o = self.weighted_values(o, update)
            scf.YieldOp(tokens + update.maxima + update.sums + o)
        state = list(loop.results)
        if first is not None:
            nvgpu.DeviceAsyncWaitOp(state.pop(0), numGroups=0)  # nothing left in flight
        return state[rows:2 * rows], state[2 * rows:]
