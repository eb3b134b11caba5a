"""Attention on tensor cores: the generics of one f16 `cir.attention` as one
FlashAttention-2 forward kernel (warp-level mma.sync m16n8k16, f16 operands, f32
accumulators), for head dims that are multiples of 16 up to 128.

A block of `warps` warps takes 16 * m_tiles * warps query rows of one (p..) slice, each
warp m_tiles tiles of 16 rows; Q's A fragments stay in registers for the whole kernel, or
(q_shared) Q's rows are copied to shared memory once and read with ldmatrix where used.
Keys and values pass through shared memory `block_n` rows at a time, copied with
cp.async (16 bytes a thread, zero-filled past the last key): K tile j+1 is in flight
while the warps multiply P V of tile j, and V tile j while they compute the scores of
tile j (FlashAttention-2's order; one buffer each). Per tile each warp computes, all in
registers:

    S = Q K^T                      mma.sync; K's fragments by ldmatrix from shared memory,
                                   each feeding the m_tiles row tiles
    m_new = max(m, rowmax(S))      each row's values lie in one quad of lanes: shuffles
                                   xor 1 and 2 complete the max
    P = exp2(S * c - m_new * c)    c = scale * log2(e) > 0 (one FMA and one ex2 each);
                                   masked keys and keys past the end score -inf
    l = l * alpha + rowsum(P);  O = O * alpha + P V,  alpha = exp2((m - m_new) * c)
                                   P's accumulator fragments, rounded to f16, are the A
                                   fragments of P V as they lie (the C layout of m16n8k16
                                   is its A layout); V's fragments by ldmatrix.trans

then out = O / l in f16 (0 for a row with no allowed key, as the spec's loops give). The
scale multiplies S in f32 (not Q in f16): the scores round once, in the mma.

Causal attention (`group.causal`: key j allowed for row i when j <= i + offset) skips the
key tiles above the diagonal: a block's loop (and its cp.async prefetch) stops at tile
ceil(min(keys, last row + offset + 1) / block_n), about half the tiles at offset 0; in
the tiles it visits each score is checked like a mask bit (-inf).

Takes what attention.attention_groups finds when query, key, value and out are f16 and
row-major, both head dims are multiples of 16 up to 128, and the scale is a positive
constant (the lowering's 1/sqrt(head_dim)); anything else runs on the SIMT `attention`
kernel. On sm_90a, attention_wgmma is asked first: it takes f16 / bf16 with head dims 64
and 128, masked or causal as well. The mask (bool, any of the loops (p.., i, j) as its axes) is read per score from
global memory, two neighbouring keys at a time where its rows allow. The 16-byte copies
need 16-byte aligned buffers: ZynML's allocations are, and the runtime copies an input
that is not (zynml/runtime/cuda/function.py).
Not here yet: bf16, wgmma and TMA (sm_90a), the mask through
shared memory, more than 48 KB of shared memory (dynamic).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, nvgpu, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import float_constant
from .kernel_builder import delinearize, index_const, kernel_type, new_kernel
from . import Launch
from .tuning import choose
from .attention import (Causal, Group, attention_groups, operand_shape, positive_scale,
                        problem, quad_reduce, row_major, sizes)

NAME = "attention_tensor_core"
REQUIRES = frozenset({"mma_sync", "ldmatrix", "cp_async"})
WARP = 32
MMA_M, MMA_N, MMA_K = 16, 8, 16
MAX_HEAD_DIM = 128  # Q and O fragments stay in registers


@dataclass(frozen=True)
class Params:
    warps: int = 4      # warps per block
    m_tiles: int = 1    # 16-row tiles per warp: each K and V fragment feeds m_tiles mmas
    block_n: int = 64   # keys per shared-memory tile (a multiple of 16)
    q_shared: bool = False  # Q in shared memory (ldmatrix per use), not in registers
    pad: int = 8        # f16 after each shared row (16 bytes): ldmatrix's 8 row reads of
                        # a matrix land in different banks

    @property
    def warp_m(self) -> int:
        return self.m_tiles * MMA_M

    @property
    def block_m(self) -> int:
        return self.warps * self.warp_m

    def shared_bytes(self, d: int, e: int) -> int:
        """The K and V tiles, and Q's where it is shared (f16, padded rows)."""
        q_rows = self.block_m if self.q_shared else 0
        return 2 * (self.block_n * (d + e + 2 * self.pad) + q_rows * (d + self.pad))


DEFAULT_PARAMS = Params(warps=2, m_tiles=2, block_n=32, q_shared=True)
# What linalg-to-gpu-kernels builds with: the first entry whose head dim covers the
# larger of Q's and V's. benchmarks/tune_attention.py --strategy attention_tensor_core
# timed up to 48 sets per case (those that fit in 48 KB) on an H100 (2026-11-22): the
# default came first for head dim 64 (8x12x512, with and without a mask) and second for
# 128 (1x16x4096: 0.488 ms; 4 warps with Q in registers 0.472 ms, but ptxas spills 56
# bytes there).
CONFIGS = ((MAX_HEAD_DIM, DEFAULT_PARAMS),)


def params_for(group: Group, target) -> Optional[Params]:
    """The first CONFIGS entry (tuned) whose head dim covers Q's and V's and whose tiles
    fit a block's static shared memory."""
    d, e = operand_shape(group.query)[-1], operand_shape(group.value)[-1]
    return choose(NAME, [p for bound, p in CONFIGS if max(d, e) <= bound], target,
                  problem(group),
                  lambda p: p.block_n % MMA_K == 0 and
                  p.shared_bytes(d, e) <= target.facts.max_static_shared_per_block)


def find_groups(generics: list, target) -> list[Group]:
    """The attention runs (attention.attention_groups) this kernel can take."""
    return [group for group in attention_groups(generics) if matches(group, target)]


def _f16_row_major(value: ir.Value) -> bool:
    return str(ir.MemRefType(value.type).element_type) == "f16" and row_major(value)


def matches(group: Group, target) -> bool:
    """f16 and row-major throughout, head dims multiples of 16 up to 128, a positive
    constant scale, tiles that fit; causal or not."""
    if not all(_f16_row_major(v) for v in (group.query, group.key, group.value, group.out)):
        return False
    d, e = operand_shape(group.query)[-1], operand_shape(group.value)[-1]
    if any(n % MMA_K or n > MAX_HEAD_DIM for n in (d, e)):
        return False
    if group.mask is not None and not row_major(group.mask):
        return False
    return positive_scale(group) is not None and params_for(group, target) is not None


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    lead, rows, d, keys, e = sizes(group)
    p = params_for(group, target)
    f16 = ir.F16Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    tiles = {name: ir.MemRefType.get([p.block_n, width + p.pad], f16, memory_space=shared)
             for name, width in (("k", d), ("v", e))}
    if p.q_shared:
        tiles["q"] = ir.MemRefType.get([p.block_m, d + p.pad], f16, memory_space=shared)
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), group.ops[-1].location:
        for name, type_ in tiles.items():
            memref.GlobalOp(f"{kernel_name}_{name}", ir.TypeAttr.get(type_),
                            sym_visibility="private", alignment=16)
    values = [group.query, group.key, group.value] + \
        ([group.mask] if group.mask is not None else []) + [group.out]
    threads = WARP * p.warps
    func = new_kernel(gpu_module, kernel_name, [kernel_type(v.type) for v in values],
                      [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), group.ops[-1].location:
        args = dict(zip(values, func.regions[0].blocks[0].arguments))
        mask = args[group.mask] if group.mask is not None else None
        kernel = _Kernel(p, d, e, rows, keys, lead, group.mask_dims,
                         positive_scale(group) * math.log2(math.e), group.causal)
        kernel.emit(args[group.query], args[group.key], args[group.value], mask,
                    args[group.out],
                    {name: memref.get_global(t, f"{kernel_name}_{name}")
                     for name, t in tiles.items()})
        gpu.ReturnOp([])
    grid = (math.ceil(rows / p.block_m), math.prod(lead), 1)
    return Launch(kernel_name, values, grid, (threads, 1, 1))


# ---------------------------------------------------------------- the kernel

def _group(copies: list) -> ir.Value:
    """Commit the thread's cp.async copies so far as one group (wait on its token)."""
    return nvgpu.DeviceAsyncCreateGroupOp(copies).result


def _add(a: ir.Value, b) -> ir.Value:
    if isinstance(b, int):
        if b == 0:
            return a
        b = index_const(b)
    return arith.AddIOp(a, b).result


@dataclass
class _Kernel:
    p: Params
    d: int            # query / key head dim
    e: int            # value / out head dim
    rows: int         # queries
    keys: int
    lead: list        # the (p..) loops' sizes
    mask_dims: list   # mask axis -> loop of (p.., i, j)
    c: float          # scale * log2(e)
    causal: Optional[Causal] = None

    # A lane holds two rows of each of the warp's m_tiles 16-row tiles (accumulator rows
    # 0 and 1: g and g + 8); "row r" below is r = 2 * tile + (0 or 1).

    def emit(self, query, key, value, mask, out, tiles):
        p = self.p
        f32, f16 = ir.F32Type.get(), ir.F16Type.get()
        self.f32, self.f16 = f32, f16
        tid = gpu.thread_id(gpu.Dimension.x)
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        warp = arith.DivUIOp(tid, index_const(WARP)).result
        self.tid = tid
        self.group = arith.DivUIOp(lane, index_const(4)).result        # g: row in an 8
        self.quad = arith.RemUIOp(lane, index_const(4)).result         # t: lane of a quad
        self.quad2 = arith.MulIOp(self.quad, index_const(2)).result    # 2t: first column
        self.slice_ivs = delinearize(gpu.block_id(gpu.Dimension.y), self.lead) \
            if self.lead else []
        block_row0 = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.block_m)).result
        row0 = _add(arith.AddIOp(block_row0, arith.MulIOp(
            warp, index_const(p.warp_m)).result).result, self.group)
        self.my_rows = [_add(row0, MMA_M * tile + 8 * h)
                        for tile in range(p.m_tiles) for h in (0, 1)]
        last_row = index_const(self.rows - 1)
        self.rows_in = [arith.MinUIOp(r, last_row).result for r in self.my_rows]
        # ldmatrix x4: lanes 8m..8m+7 give the rows of matrix m
        self.ld_row = arith.RemUIOp(lane, index_const(8)).result
        self.ld_matrix = arith.DivUIOp(lane, index_const(8)).result
        self.warp_row = arith.MulIOp(warp, index_const(p.warp_m)).result
        if p.q_shared:  # the block's Q rows (clamped) to shared memory, once
            q_copies = self._copy_rows(query, tiles["q"], block_row0, p.block_m, self.d,
                                       self.rows)
            q_frags = tiles["q"]
        else:
            q_frags = [self._q_fragments(query, tile) for tile in range(p.m_tiles)]
        self.mask, self.bounds = mask, self.keys % p.block_n != 0
        self.pairs = mask is not None and self.mask_dims[-1] == len(self.lead) + 1 and \
            self.keys % 2 == 0

        neg_inf = float_constant(f32, float("-inf"))
        zero = float_constant(f32, 0.0)
        acc_type = ir.VectorType.get([2, 2], f32)
        self.zero_acc = arith.ConstantOp(acc_type, ir.DenseElementsAttr.get_splat(
            acc_type, ir.FloatAttr.get(f32, 0.0))).result
        tiles_n = self._key_tiles(block_row0)
        copies = self._copy_tile(key, tiles["k"], index_const(0), self.d)
        # Q (where shared) and K tile 0: one group, the loop's first wait
        first = _group((q_copies if p.q_shared else []) + copies)
        count = 2 * p.m_tiles
        o_count = p.m_tiles * (self.e // MMA_N)
        loop = scf.ForOp(index_const(0), tiles_n, index_const(1),
                         [first] + [neg_inf] * count + [zero] * count +
                         [self.zero_acc] * o_count)
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            token, *state = loop.inner_iter_args
            m, l, o = state[:count], state[count:2 * count], state[2 * count:]
            kv0 = arith.MulIOp(j, index_const(p.block_n)).result
            nvgpu.DeviceAsyncWaitOp(token, numGroups=0)   # K tile j is here
            gpu.BarrierOp()                                # ... for all; V is free
            v_token = _group(self._copy_tile(value, tiles["v"], kv0, self.e))
            scores = self._scores(q_frags, tiles["k"])
            m, l, alphas, probs = self._softmax(scores, kv0, m, l)
            nvgpu.DeviceAsyncWaitOp(v_token, numGroups=0)  # V tile j is here
            gpu.BarrierOp()                                # ... for all; K is free
            next_j = _add(j, 1)
            more = arith.CmpIOp(arith.CmpIPredicate.ult, next_j, tiles_n).result
            prefetch = scf.IfOp(more, [token.type], has_else=True)
            with ir.InsertionPoint(prefetch.then_block):
                scf.YieldOp([_group(self._copy_tile(
                    key, tiles["k"], arith.MulIOp(next_j, index_const(p.block_n)).result,
                    self.d))])
            with ir.InsertionPoint(prefetch.else_block):
                scf.YieldOp([v_token])
            o = self._weighted_values(o, alphas, probs, tiles["v"])
            scf.YieldOp([prefetch.results[0]] + m + l + o)
        token, *state = loop.results
        nvgpu.DeviceAsyncWaitOp(token, numGroups=0)  # nothing left in flight at exit
        sums = [quad_reduce(x, arith.AddFOp) for x in state[count:2 * count]]
        self._store(out, sums, state[2 * count:])

    # ------------------------------------------------------------ pieces

    def _key_tiles(self, block_row0):
        """How many key tiles the block visits: all, or (causal) those up to its last
        row's last allowed key; the tiles above the diagonal are skipped (tile 0 is
        copied before the loop either way: a block with none only waits for it)."""
        if not self.causal:
            return index_const(math.ceil(self.keys / self.p.block_n))
        end = self.causal.key_end(block_row0, self.p.block_m, self.rows, self.keys)
        return arith.DivUIOp(_add(end, self.p.block_n - 1), index_const(self.p.block_n)).result

    def _q_fragments(self, query, tile):
        """The A fragments of Q's rows of `tile`, one vector<4x2xf16> per 16 columns
        (m16n8k16's A layout: registers (row g, cols 2t..), (g + 8, 2t..), (g, 2t + 8..),
        (g + 8, 2t + 8..))."""
        pair = ir.VectorType.get([2], self.f16)
        frags = []
        for k0 in range(0, self.d, MMA_K):
            parts = []
            for col in (k0, k0 + 8):
                for row in self.rows_in[2 * tile:2 * tile + 2]:
                    parts.append(vector.LoadOp(pair, query, self.slice_ivs +
                                               [row, _add(self.quad2, col)],
                                               alignment=4).result)
            scalars = [vector.ExtractOp(v, [], [c]).result for v in parts for c in (0, 1)]
            frags.append(vector.FromElementsOp(ir.VectorType.get([4, 2], self.f16),
                                               scalars).result)
        return frags

    def _copy_tile(self, source, tile, kv0, width):
        """cp.async keys kv0.. of `source` into `tile`, keys past the last zero-filled
        (V's zeros meet P's zeros: no NaN from unwritten memory); returns the copies'
        tokens."""
        return self._copy_rows(source, tile, kv0, self.p.block_n, width, self.keys,
                               zero_fill=self.bounds)

    def _copy_rows(self, source, tile, row0, count, width, extent, zero_fill=False):
        """cp.async rows row0..row0 + count of `source` (of `extent` rows) into `tile`, 16
        bytes a thread and step; rows past the end read the last row (zero_fill: nothing,
        and zeros land). Returns the copies' tokens (those outside a guard: a group
        commits every copy the thread issued before it either way)."""
        threads = WARP * self.p.warps
        per_row = width // 8
        chunks = count * per_row
        tokens = []
        for first in range(0, chunks, threads):
            flat = _add(self.tid, first)
            args = (source, tile, row0, per_row, flat, extent, zero_fill)
            if first + threads <= chunks:
                tokens.append(self._copy_chunk(*args))
                continue
            guard = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ult, flat,
                                          index_const(chunks)).result)
            with ir.InsertionPoint(guard.then_block):
                self._copy_chunk(*args)
                scf.YieldOp([])
        return tokens

    def _copy_chunk(self, source, tile, row0, per_row, flat, extent, zero_fill):
        r = arith.DivUIOp(flat, index_const(per_row)).result
        col = arith.MulIOp(arith.RemUIOp(flat, index_const(per_row)).result,
                           index_const(8)).result
        row_at = arith.AddIOp(row0, r).result
        src_elements = None
        if zero_fill:
            real = arith.CmpIOp(arith.CmpIPredicate.ult, row_at,
                                index_const(extent)).result
            src_elements = arith.SelectOp(real, index_const(8), index_const(0)).result
        row_at = arith.MinUIOp(row_at, index_const(extent - 1)).result
        return nvgpu.DeviceAsyncCopyOp(
            tile, [r, col], source, self.slice_ivs + [row_at, col],
            ir.IntegerAttr.get(ir.IndexType.get(), 8), srcElements=src_elements,
            bypassL1=True).result

    def _ldmatrix(self, tile, row, col, transpose):
        return nvgpu.LdMatrixOp(ir.VectorType.get([4, 2], self.f16), tile, [row, col],
                                transpose, 4).result

    def _halves(self, frag):
        """The two B fragments (vector<2x2xf16>) of an ldmatrix x4 result."""
        return [vector.ShuffleOp(frag, frag, [0, 1]).result,
                vector.ShuffleOp(frag, frag, [2, 3]).result]

    def _mma(self, a, b, c):
        return nvgpu.MmaSyncOp(c.type, a, b, c, ir.ArrayAttr.get(
            [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)
             for n in (MMA_M, MMA_N, MMA_K)])).result

    def _scores(self, q_frags, k_tile):
        """S = Q K^T of the warp's rows and the tile's keys: [tile][n] vector<2x2xf32>
        per 8 keys. ldmatrix x4 at (16 keys, 16 dims) gives the B fragments of two 8-key
        tiles, (keys +0, dims +0), (+0, +8), (+8, +0), (+8, +8), for every row tile.
        q_frags: the A fragments [tile][ks], or Q's shared tile: ldmatrix x4 at (16 rows,
        16 dims) gives them, (rows +0, dims +0), (+8, +0), (+0, +8), (+8, +8)."""
        tiles = self.p.m_tiles
        s = [[self.zero_acc] * (self.p.block_n // MMA_N) for _ in range(tiles)]
        key_row = _add(self.ld_row, arith.MulIOp(
            arith.DivUIOp(self.ld_matrix, index_const(2)).result, index_const(8)).result)
        dim_col = arith.MulIOp(arith.RemUIOp(self.ld_matrix, index_const(2)).result,
                               index_const(8)).result
        if not isinstance(q_frags, list):
            q_row = _add(_add(self.warp_row, self.ld_row), arith.MulIOp(
                arith.RemUIOp(self.ld_matrix, index_const(2)).result, index_const(8)).result)
            q_col = arith.MulIOp(arith.DivUIOp(self.ld_matrix, index_const(2)).result,
                                 index_const(8)).result
        for ks in range(self.d // MMA_K):
            if isinstance(q_frags, list):
                a_frags = [q_frags[tile][ks] for tile in range(tiles)]
            else:
                a_frags = [self._ldmatrix(q_frags, _add(q_row, MMA_M * tile),
                                          _add(q_col, ks * MMA_K), False)
                           for tile in range(tiles)]
            for n0 in range(0, self.p.block_n, 16):
                frag = self._ldmatrix(k_tile, _add(key_row, n0), _add(dim_col, ks * MMA_K),
                                      False)
                for half, b in enumerate(self._halves(frag)):
                    n = n0 // MMA_N + half
                    for tile, a in enumerate(a_frags):
                        s[tile][n] = self._mma(a, b, s[tile][n])
        return s

    def _allowed(self, kv0):
        """allowed[r][n][c]: may row r see key kv0 + 8n + 2t + c (an i1), or None when
        every key is (no mask, not causal, whole tiles)."""
        count = self.p.block_n // MMA_N
        if self.mask is None and not self.bounds and not self.causal:
            return None
        i1 = ir.IntegerType.get_signless(1)
        true = arith.ConstantOp(i1, 1).result
        out = [[[true, true] for _ in range(count)] for _ in self.my_rows]
        base = _add(kv0, self.quad2)
        for n in range(count):
            key0 = _add(base, n * MMA_N)
            if self.bounds:
                for c in (0, 1):
                    inside = arith.CmpIOp(arith.CmpIPredicate.ult, _add(key0, c),
                                          index_const(self.keys)).result
                    for r in range(len(self.my_rows)):
                        out[r][n][c] = inside
            if self.causal:
                for c in (0, 1):
                    for r, row in enumerate(self.my_rows):
                        below = self.causal.allows(_add(key0, c), row)
                        out[r][n][c] = arith.AndIOp(out[r][n][c], below).result
            if self.mask is None:
                continue
            for r, row in enumerate(self.rows_in):
                bits = self._mask_bits(row, key0)
                for c in (0, 1):
                    set_ = arith.CmpIOp(arith.CmpIPredicate.ne, bits[c],
                                        arith.ConstantOp(bits[c].type, 0).result).result
                    out[r][n][c] = set_ if not (self.bounds or self.causal) else \
                        arith.AndIOp(out[r][n][c], set_).result
        return out

    def _mask_bits(self, row, key0):
        """The mask's bytes at (row, key0) and (row, key0 + 1)."""
        def where(key):
            loops = self.slice_ivs + [row, key]
            return [loops[k] for k in self.mask_dims]
        if self.pairs:  # key0 even, rows of even length: one 2-byte load
            if self.bounds:
                key0 = arith.MinUIOp(key0, index_const(self.keys - 2)).result
            pair = vector.LoadOp(ir.VectorType.get([2], ir.IntegerType.get_signless(8)),
                                 self.mask, where(key0), alignment=2).result
            return [vector.ExtractOp(pair, [], [c]).result for c in (0, 1)]
        bits = []
        for c in (0, 1):
            key = _add(key0, c)
            if self.bounds:
                key = arith.MinUIOp(key, index_const(self.keys - 1)).result
            bits.append(memref.LoadOp(self.mask, where(key)).result)
        return bits

    def _softmax(self, scores, kv0, m_old, l_old):
        """The online softmax of one tile in the accumulators' layout, per row r: new
        maxima, new partial sums (this lane's columns only), alphas, P [r][n][c] (f32)."""
        f32 = self.f32
        neg_inf = float_constant(f32, float("-inf"))
        zero = float_constant(f32, 0.0)
        c = float_constant(f32, self.c)
        allowed = self._allowed(kv0)
        m_new, l_new, alphas, probs = [], [], [], []
        for r in range(len(self.my_rows)):
            tile, h = divmod(r, 2)
            values = [[vector.ExtractOp(s, [], [h, col]).result for col in (0, 1)]
                      for s in scores[tile]]
            if allowed is not None:
                values = [[arith.SelectOp(allowed[r][n][col], v, neg_inf).result
                           for col, v in enumerate(pair)] for n, pair in enumerate(values)]
            row_max = m_old[r]
            for pair in values:
                for v in pair:
                    row_max = arith.MaximumFOp(row_max, v).result
            row_max = quad_reduce(row_max, arith.MaximumFOp)
            # a row with no allowed key yet: m = -inf; shift by 0 so exp2 gives 0, not NaN
            empty = arith.CmpFOp(arith.CmpFPredicate.OEQ, row_max, neg_inf).result
            shift = arith.SelectOp(empty, zero, arith.MulFOp(row_max, c).result).result
            neg_shift = arith.NegFOp(shift).result
            alpha = mmath.Exp2Op(mmath.FmaOp(m_old[r], c, neg_shift).result).result
            row_probs = [[mmath.Exp2Op(mmath.FmaOp(v, c, neg_shift).result).result
                          for v in pair] for pair in values]
            total = arith.MulFOp(l_old[r], alpha).result
            for pair in row_probs:
                for v in pair:
                    total = arith.AddFOp(total, v).result
            m_new.append(row_max)
            l_new.append(total)
            alphas.append(alpha)
            probs.append(row_probs)
        return m_new, l_new, alphas, probs

    def _weighted_values(self, o, alphas, probs, v_tile):
        """O * alpha + P V (o: [tile * e/8 + n]). P's f32 accumulators of keys 16kk..
        (8-key tiles 2kk, 2kk + 1) rounded to f16 are the A fragment of k-step kk;
        ldmatrix.trans x4 at (16 keys, 16 value columns) gives the B fragments of two
        8-column tiles: (keys +0, cols +0), (+8, +0), (+0, +8), (+8, +8)."""
        acc_type = ir.VectorType.get([2, 2], self.f32)
        per_tile = self.e // MMA_N
        scales = [vector.FromElementsOp(acc_type, [alphas[2 * t], alphas[2 * t],
                                                   alphas[2 * t + 1], alphas[2 * t + 1]]
                                        ).result for t in range(self.p.m_tiles)]
        o = [arith.MulFOp(x, scales[i // per_tile]).result for i, x in enumerate(o)]
        key_row = _add(self.ld_row, arith.MulIOp(
            arith.RemUIOp(self.ld_matrix, index_const(2)).result, index_const(8)).result)
        val_col = arith.MulIOp(arith.DivUIOp(self.ld_matrix, index_const(2)).result,
                               index_const(8)).result
        a_type = ir.VectorType.get([4, 2], self.f16)
        for kk in range(self.p.block_n // MMA_K):
            a_frags = [vector.FromElementsOp(a_type, [
                arith.TruncFOp(self.f16, probs[2 * t + h][2 * kk + half][col]).result
                for half in (0, 1) for h in (0, 1) for col in (0, 1)]).result
                for t in range(self.p.m_tiles)]
            for n0 in range(0, self.e, 16):
                frag = self._ldmatrix(v_tile, _add(key_row, kk * MMA_K), _add(val_col, n0),
                                      True)
                for half, b in enumerate(self._halves(frag)):
                    for t, a in enumerate(a_frags):
                        n = t * per_tile + n0 // MMA_N + half
                        o[n] = self._mma(a, b, o[n])
        return o

    def _store(self, out, sums, o):
        """out = O / l in f16 where the row exists; 0 for a row with no allowed key."""
        zero = float_constant(self.f32, 0.0)
        pair = ir.VectorType.get([2], self.f16)
        per_tile = self.e // MMA_N
        for r, row in enumerate(self.my_rows):
            tile, h = divmod(r, 2)
            inside = arith.CmpIOp(arith.CmpIPredicate.ult, row, index_const(self.rows)).result
            guard = scf.IfOp(inside)
            with ir.InsertionPoint(guard.then_block):
                some = arith.CmpFOp(arith.CmpFPredicate.OGT, sums[r], zero).result
                inverse = arith.SelectOp(some, arith.DivFOp(float_constant(self.f32, 1.0),
                                                            sums[r]).result, zero).result
                for n in range(per_tile):
                    acc = o[tile * per_tile + n]
                    scalars = [arith.TruncFOp(self.f16, arith.MulFOp(
                        vector.ExtractOp(acc, [], [h, col]).result, inverse).result).result
                        for col in (0, 1)]
                    vector.StoreOp(vector.FromElementsOp(pair, scalars).result, out,
                                   self.slice_ivs + [row, _add(self.quad2, n * MMA_N)],
                                   alignment=4)
                scf.YieldOp([])
