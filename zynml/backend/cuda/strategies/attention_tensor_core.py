"""Attention on tensor cores: the generics of one f16 `cir.attention` as one
FlashAttention-2 forward kernel (warp-level mma.sync m16n8k16, f16 operands, f32
accumulators), for head dims that are multiples of 16 up to 128.

A block of `warps` warps takes 16 * m_tiles * warps query rows of one (p..) slice, each
warp m_tiles tiles of 16 rows; Q's A fragments stay in registers for the whole kernel, or
(q_shared) Q's rows are copied to shared memory once and read with ldmatrix where used.
Keys and values pass through shared memory `block_n` rows at a time, copied with
cp.async (16 bytes a thread, zero-filled past the last key): K tile j+1 is in flight
while the warps multiply P V of tile j, and V tile j while they compute the scores of
tile j (FlashAttention-2's order, flash_skeleton.KeyTileLoop; one buffer each). Per
tile each warp computes, all in registers (the softmax: flash_skeleton.OnlineSoftmax):

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

Takes what attention_match.attention_groups finds when query, key, value and out are f16 and
row-major, both head dims are multiples of 16 up to 128, and the scale is a positive
constant (the lowering's 1/sqrt(head_dim)); anything else runs on the SIMT `attention`
kernel. On sm_90a, attention_wgmma is asked first: it takes f16 / bf16 with head dims 64
and 128, masked or causal as well. The mask (bool, any of the loops (p.., i, j) as its axes) is read per score from
global memory, two neighbouring keys at a time where its rows allow. The 16-byte copies
need 16-byte aligned buffers: ZynML's allocations are, and the runtime copies an input
that is not (zynml/runtime/cuda/function.py).
Run-time sizes (DYNAMIC): the batch, heads, rows and keys are read off the arguments and
the last key tile is always checked; run-time head dims get a kernel per head dim of
RUN_TIME_HEAD_DIMS, and a scale computed from them is the kernels' argument, each kernel
run under the launch's test of the head dims and the scale > 0 (attention_sizes.py).
Not here yet: bf16, wgmma and TMA (sm_90a), the mask through
shared memory, more than 48 KB of shared memory (dynamic).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, nvgpu, scf, vector

from .kernel_builder import index_const
from . import Launch
from .tuning import choose
from .attention_match import Group, attention_groups
from .attention_sizes import head_dim_cases, run_time_launch
from .flash_skeleton import (WARP, FlashFrame, KeyTileLoop, OnlineSoftmax, add,
                             async_copy_chunk, async_group, base2_factor, base2_scale,
                             block_slice,
                             both, clamp, covering, declare_static_tiles, frame_fields,
                             head_dims, inverse_sum, kernel_entry, kernel_values, less,
                             mask_allows, mask_pair, positive_scale, problem, quad_reduce,
                             row_blocks_grid, row_major, run_time_scale, run_time_sizes,
                             spread_over_threads, static_tiles)


NAME = "attention_tensor_core"
REQUIRES = frozenset({"mma_sync", "ldmatrix", "cp_async"})
DYNAMIC = True  # run-time sizes: memref.dim in the kernel, a kernel per head dim
RUN_TIME_HEAD_DIMS = (64, 128)  # built for where the head dims are run-time sizes
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


def params_for(group: Group, target, head_dim: Optional[int] = None) -> Optional[Params]:
    """The first CONFIGS entry (tuned) whose head dim covers Q's and V's (`head_dim` for
    both where given: run-time head dims) and whose tiles fit a block's static shared
    memory."""
    d, e = head_dims(group, head_dim)
    return choose(NAME, covering(CONFIGS, group, (d, e)), target, problem(group),
                  lambda p: p.block_n % MMA_K == 0 and
                  p.shared_bytes(d, e) <= target.facts.max_static_shared_per_block)


def find_groups(generics: list, target) -> list[Group]:
    """The attention runs (attention_match.attention_groups) this kernel can take."""
    return [group for group in attention_groups(generics) if matches(group, target)]


def _f16_row_major(value: ir.Value) -> bool:
    return str(ir.MemRefType(value.type).element_type) == "f16" and row_major(value)


def matches(group: Group, target) -> bool:
    """f16 and row-major throughout, head dims multiples of 16 up to 128 (each of
    RUN_TIME_HEAD_DIMS where they are run-time sizes), a positive scale (tested at launch
    where it is a value of the call), tiles that fit; causal or not."""
    if not all(_f16_row_major(v) for v in (group.query, group.key, group.value, group.out)):
        return False
    if group.mask is not None and not row_major(group.mask):
        return False
    static = [n for n in head_dims(group) if not ir.ShapedType.is_dynamic_size(n)]
    if any(n % MMA_K or n > MAX_HEAD_DIM for n in static):
        return False
    cases = head_dim_cases(group, RUN_TIME_HEAD_DIMS)  # [None]: static head dims
    scale_ok = positive_scale(group) is not None or \
        (run_time_sizes(group) and run_time_scale(group))
    return bool(cases) and scale_ok and \
        all(params_for(group, target, d) is not None for d in cases)


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    """The kernel's Launch; with run-time sizes, a kernel per head dim case under the
    plan's tests (attention_sizes.run_time_launch: the head dims, a run-time scale > 0)."""
    if not run_time_sizes(group):
        return _build(group, gpu_module, kernel_name, target)
    return run_time_launch(
        group, kernel_name, head_dim_cases(group, RUN_TIME_HEAD_DIMS),
        lambda name, head_dim, _: _build(group, gpu_module, name, target, head_dim),
        positive_scale=True)


def _build(group: Group, gpu_module: ir.Operation, kernel_name: str, target,
           head_dim: Optional[int] = None) -> Launch:
    d, e = head_dims(group, head_dim)
    p = params_for(group, target, head_dim)
    f16 = ir.F16Type.get()
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    tiles = {name: ir.MemRefType.get([p.block_n, width + p.pad], f16, memory_space=shared)
             for name, width in (("k", d), ("v", e))}
    if p.q_shared:
        tiles["q"] = ir.MemRefType.get([p.block_m, d + p.pad], f16, memory_space=shared)
    declare_static_tiles(gpu_module, kernel_name, tiles, group.ops[-1].location)
    values = kernel_values(group)  # a constant scale is not among them: it is folded in
    threads = WARP * p.warps
    with kernel_entry(gpu_module, kernel_name, values, threads,
                      group.ops[-1].location) as args:
        mask = args[group.mask] if group.mask is not None else None
        c = base2_scale(group, args, ir.F32Type.get()) if run_time_scale(group) else \
            base2_factor(group)
        kernel = _Kernel(p=p, c=c, **frame_fields(group, args, head_dim))
        kernel.emit(args[group.query], args[group.key], args[group.value], mask,
                    args[group.out], static_tiles(kernel_name, tiles))
    grid = row_blocks_grid(group, p.block_m)
    return Launch(kernel_name, values, grid, (threads, 1, 1))


# ---------------------------------------------------------------- the kernel

@dataclass
class _Kernel(FlashFrame):
    p: Params
    c: float | ir.Value  # scale * log2(e): a number, or the call's (run-time sizes)

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
        self.slice_ivs = block_slice(self.lead)
        block_row0 = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.block_m)).result
        row0 = add(arith.AddIOp(block_row0, arith.MulIOp(
            warp, index_const(p.warp_m)).result).result, self.group)
        self.my_rows = [add(row0, MMA_M * tile + 8 * h)
                        for tile in range(p.m_tiles) for h in (0, 1)]
        self.rows_in = [clamp(r, self.rows) for r in self.my_rows]  # the mask's rows
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
        # keys past the last in the last tile: checked (run-time keys: always)
        self.mask, self.bounds = mask, not isinstance(self.keys, int) or \
            self.keys % p.block_n != 0
        self.pairs = mask is not None and self.mask_pairs
        acc_type = ir.VectorType.get([2, 2], f32)
        self.zero_acc = arith.ConstantOp(acc_type, ir.DenseElementsAttr.get_splat(
            acc_type, ir.FloatAttr.get(f32, 0.0))).result
        tiles_n = self.key_tiles(block_row0, p.block_m, p.block_n)
        copies = self._copy_tile(key, tiles["k"], index_const(0), self.d)
        # Q (where shared) and K tile 0: one group, the loop's first wait
        first = async_group((q_copies if p.q_shared else []) + copies)
        self.softmax = OnlineSoftmax(f32, lanes=4, scale=self.c)
        loop = KeyTileLoop(
            p.block_n, 2 * p.m_tiles,
            copy_keys=lambda kv0: async_group(
                self._copy_tile(key, tiles["k"], kv0, self.d)),
            copy_values=lambda kv0: async_group(
                self._copy_tile(value, tiles["v"], kv0, self.e)),
            scores=lambda kv0, m, l: self._softmax(self._scores(q_frags, tiles["k"]), kv0,
                                                   m, l),
            weighted_values=lambda o, update: self._weighted_values(
                o, update.alphas, update.probs, tiles["v"]))
        sums, o = loop.emit(tiles_n, first, [self.zero_acc] * (p.m_tiles * (self.e // MMA_N)))
        self._store(out, [quad_reduce(x, arith.AddFOp) for x in sums], o)

    # ------------------------------------------------------------ pieces

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
                                               [row, add(self.quad2, col)],
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
                               zero_fill=self.bounds, slice_ivs=self.kv_slice(self.slice_ivs))

    def _copy_rows(self, source, tile, row0, count, width, extent, zero_fill=False,
                   slice_ivs=None):
        """cp.async rows row0..row0 + count of `source` (of `extent` rows) into `tile`, 16
        bytes a thread and step; rows past the end read the last row (zero_fill: nothing,
        and zeros land). Returns the copies' tokens (those outside a guard: a group
        commits every copy the thread issued before it either way)."""
        per_row = width // 8  # 16-byte copies of 8 f16
        return spread_over_threads(
            self.tid, count * per_row, WARP * self.p.warps,
            lambda flat: async_copy_chunk(source, tile, slice_ivs or self.slice_ivs, row0,
                                          per_row, flat, extent, 8, zero_fill))

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
        key_row = add(self.ld_row, arith.MulIOp(
            arith.DivUIOp(self.ld_matrix, index_const(2)).result, index_const(8)).result)
        dim_col = arith.MulIOp(arith.RemUIOp(self.ld_matrix, index_const(2)).result,
                               index_const(8)).result
        if not isinstance(q_frags, list):
            q_row = add(add(self.warp_row, self.ld_row), arith.MulIOp(
                arith.RemUIOp(self.ld_matrix, index_const(2)).result, index_const(8)).result)
            q_col = arith.MulIOp(arith.DivUIOp(self.ld_matrix, index_const(2)).result,
                                 index_const(8)).result
        for ks in range(self.d // MMA_K):
            if isinstance(q_frags, list):
                a_frags = [q_frags[tile][ks] for tile in range(tiles)]
            else:
                a_frags = [self._ldmatrix(q_frags, add(q_row, MMA_M * tile),
                                          add(q_col, ks * MMA_K), False)
                           for tile in range(tiles)]
            for n0 in range(0, self.p.block_n, 16):
                frag = self._ldmatrix(k_tile, add(key_row, n0), add(dim_col, ks * MMA_K),
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
        out = [[[None, None] for _ in range(count)] for _ in self.my_rows]
        base = add(kv0, self.quad2)
        for n in range(count):
            key0 = add(base, n * MMA_N)
            if self.bounds:
                for c in (0, 1):
                    inside = less(add(key0, c), self.keys)
                    for r in range(len(self.my_rows)):
                        out[r][n][c] = inside
            if self.causal:
                for c in (0, 1):
                    for r, row in enumerate(self.my_rows):
                        below = self.causal.allows(add(key0, c), row)
                        out[r][n][c] = both(out[r][n][c], below)
            if self.mask is None:
                continue
            for r, row in enumerate(self.rows_in):
                bits = mask_pair(self.mask,
                                 lambda key: self.mask_index(self.slice_ivs, row, key),
                                 key0, self.keys, self.pairs, self.bounds)
                for c in (0, 1):
                    out[r][n][c] = both(out[r][n][c], mask_allows(bits[c]))
        return out

    def _softmax(self, scores, kv0, m_old, l_old):
        """The online softmax of one tile in the accumulators' layout: row r = 2 * tile + h
        holds accumulator row h of each 8-key tile n, columns 2t, 2t + 1; its values (and
        its P) in the order [n][c], flat."""
        allowed = self._allowed(kv0)
        if allowed is not None:
            allowed = [[a for pair in row for a in pair] for row in allowed]
        # a generator: each row's values are extracted as the update reaches the row
        row_scores = ([vector.ExtractOp(s, [], [h, col]).result
                       for s in scores[tile] for col in (0, 1)]
                      for tile in range(self.p.m_tiles) for h in (0, 1))
        return self.softmax.update(row_scores, m_old, l_old, allowed)

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
        key_row = add(self.ld_row, arith.MulIOp(
            arith.RemUIOp(self.ld_matrix, index_const(2)).result, index_const(8)).result)
        val_col = arith.MulIOp(arith.DivUIOp(self.ld_matrix, index_const(2)).result,
                               index_const(8)).result
        a_type = ir.VectorType.get([4, 2], self.f16)
        for kk in range(self.p.block_n // MMA_K):
            a_frags = [vector.FromElementsOp(a_type, [
                arith.TruncFOp(self.f16, probs[2 * t + h][2 * (2 * kk + half) + col]).result
                for half in (0, 1) for h in (0, 1) for col in (0, 1)]).result
                for t in range(self.p.m_tiles)]
            for n0 in range(0, self.e, 16):
                frag = self._ldmatrix(v_tile, add(key_row, kk * MMA_K), add(val_col, n0),
                                      True)
                for half, b in enumerate(self._halves(frag)):
                    for t, a in enumerate(a_frags):
                        n = t * per_tile + n0 // MMA_N + half
                        o[n] = self._mma(a, b, o[n])
        return o

    def _store(self, out, sums, o):
        """out = O / l in f16 where the row exists; 0 for a row with no allowed key."""
        pair = ir.VectorType.get([2], self.f16)
        per_tile = self.e // MMA_N
        for r, row in enumerate(self.my_rows):
            tile, h = divmod(r, 2)
            guard = scf.IfOp(less(row, self.rows))
            with ir.InsertionPoint(guard.then_block):
                inverse = inverse_sum(sums[r])
                for n in range(per_tile):
                    acc = o[tile * per_tile + n]
                    scalars = [arith.TruncFOp(self.f16, arith.MulFOp(
                        vector.ExtractOp(acc, [], [h, col]).result, inverse).result).result
                        for col in (0, 1)]
                    vector.StoreOp(vector.FromElementsOp(pair, scalars).result, out,
                                   self.slice_ivs + [row, add(self.quad2, n * MMA_N)],
                                   alignment=4)
                scf.YieldOp([])
