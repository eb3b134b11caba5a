"""Attention on the SIMT cores, register-tiled: the generics of one f32 (or f16, bf16)
`cir.attention` as one FlashAttention-2 forward kernel whose two products are small
block GEMMs (simt_gemm.py's shape: each thread a thread_m x thread_n micro-tile, TM + TN
shared reads per k step for TM * TN FMAs), f32 arithmetic throughout (no TF32).

A block of (block_m / thread_m) * lanes threads (lanes = block_n / thread_n) takes block_m
query rows of one (p..) slice; thread (ty, tx) owns rows ty * TM + i of the block. Q's
rows, scaled by scale * log2(e), are copied to shared memory once. Keys and values pass
through shared memory block_n rows at a time. Per key tile:

    S = Q K^T      thread (ty, tx) computes its rows x keys tx + lanes * j (j < TN),
                   reading Q[row][k..k+3] and K[key][k..k+3] (16-byte reads, rows padded
                   by 4 floats: the lanes' rows fall in different banks)
    m_new = max(m, rowmax(S))  a row's keys lie in `lanes` consecutive lanes of one warp:
                   xor shuffles complete the max
    P = exp2(S - m_new)        masked keys and keys past the end score -inf
    l = l * alpha + rowsum(P)  (this thread's keys only: the lanes' sums meet at the end)
    O = O * alpha + P V        P through shared memory; thread (ty, tx) owns O's columns
                   4 * (tx + lanes * q) + 0..3, reading P[row][j..j+3] and V[j][cols]

then out = O / l (0 for a row with no allowed key, as the spec's loops give). Where the
buffers are row-major f32 with head dims that are multiples of 4, K and V tiles are
copied with cp.async in FlashAttention-2's order (flash_skeleton.KeyTileLoop: K tile j+1
in flight during P V of tile j, V tile j during S of tile j); otherwise (f16, bf16, other
head dims) they are loaded, widened and stored by the threads, in the same order. Head
dims are padded to multiples of 4 with zeros in shared memory, rows past the last key
are zeros (P is 0 there), rows past the last query are computed on the last one and not
stored. The softmax and the key rule are flash_skeleton.py's.

Takes what attention_match.attention_groups finds in f32, f16 or bf16 with both head dims up
to 128 (at run-time sizes too, a kernel per head dim 64 and 128 where they are run-time:
attention_sizes.py); f64, wider heads and causal groups stay on `attention`. The mask
(bool, any of the loops (p.., i, j) as its axes) is read per score from global memory (consecutive
lanes read consecutive keys). The shared tiles are dynamic shared memory (68 KB for head
dim 64 at the defaults).
Not here yet: causal tile skipping, the mask through shared memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector
from mlir.dialects import math as mmath

from ....lowering.attention_lowering import float_constant, widened
from .kernel_builder import index_const
from . import Launch
from .tuning import choose
from .attention_match import Group, attention_groups
from .attention_sizes import head_dim_cases, per_head_dim
from .extents import as_index, ceil_div
from .flash_skeleton import (WARP, FlashFrame, KeyTileLoop, OnlineSoftmax, add,
                             async_copy_chunk, async_group, base2_scale, block_slice,
                             clamp, common_element, covering, element_name, frame_fields,
                             head_dims, inverse_sum, kernel_entry, kernel_values, less,
                             mul, problem, row_blocks_grid, row_major,
                             spread_over_threads, xor_reduce)


NAME = "attention_simt_tiled"
DYNAMIC = True  # run-time sizes: memref.dim in the kernel, a kernel per head dim
RUN_TIME_HEAD_DIMS = (64, 128)  # built for where the head dims are run-time sizes
# cp.async (the f32 tile copies): sm_80 and later; older chips keep `attention`.
REQUIRES = frozenset({"cp_async"})
MAX_HEAD_DIM = 128
ELEMENTS = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class Params:
    block_m: int = 64   # query rows per block
    block_n: int = 64   # keys per shared-memory tile
    thread_m: int = 4   # rows per thread (of S and of O)
    thread_n: int = 4   # keys per thread in S
    pad: int = 4        # floats after each row of the Q, K and P tiles (16 bytes)

    @property
    def lanes(self) -> int:
        """Threads that share a row: consecutive lanes of one warp."""
        return self.block_n // self.thread_n

    @property
    def threads(self) -> int:
        return self.block_m // self.thread_m * self.lanes

    def valid(self) -> bool:
        lanes = self.lanes
        return (self.block_n % self.thread_n == 0 and self.block_m % self.thread_m == 0
                and self.block_n % 4 == 0 and lanes & (lanes - 1) == 0 and lanes <= WARP
                and self.threads % WARP == 0 and self.threads <= 1024
                and self.pad % 4 == 0)

    def layout(self, d: int, e: int) -> "Layout":
        return Layout(self, d, e)

    def shared_bytes(self, d: int, e: int) -> int:
        return self.layout(d, e).bytes


@dataclass(frozen=True)
class Layout:
    """Widths and the shared tiles (f32, byte offsets into dynamic shared memory)."""
    p: Params
    d: int
    e: int

    @property
    def d_pad(self) -> int:  # Q and K columns in shared memory (zeros past d)
        return 4 * math.ceil(self.d / 4)

    @property
    def e_chunks(self) -> int:  # 4-column chunks of O per thread
        return math.ceil(math.ceil(self.e / 4) / self.p.lanes)

    @property
    def e_pad(self) -> int:  # V columns in shared memory (zeros past e)
        return 4 * self.p.lanes * self.e_chunks

    @property
    def tiles(self) -> dict:
        p = self.p
        shapes = {"q": (p.block_m, self.d_pad + p.pad), "k": (p.block_n, self.d_pad + p.pad),
                  "v": (p.block_n, self.e_pad), "p": (p.block_m, p.block_n + p.pad)}
        out, offset = {}, 0
        for name, shape in shapes.items():
            out[name] = (shape, offset)
            offset += 4 * shape[0] * shape[1]
        return out

    @property
    def o_tile(self) -> tuple:
        """O / l on its way out: over the other tiles, from the start."""
        return (self.p.block_m, self.e_pad + self.p.pad), 0

    @property
    def bytes(self) -> int:
        (rows, cols), _ = self.o_tile
        return max(sum(4 * s[0] * s[1] for s, _ in self.tiles.values()), 4 * rows * cols)


DEFAULT_PARAMS = Params()
# What linalg-to-gpu-kernels builds with: the first entry whose head dim covers the
# larger of Q's and V's and whose tiles fit the chip's shared memory. benchmarks/tune_attention.py --strategy attention_simt_tiled
# timed 19 and 23 sets on an H100 (2026-11-22): for 8x12x512x64 64 x 64 tiles of 4 x 4
# were among the four fastest (gpu_vs_torch.py: 0.215-0.225 ms); for 1x16x4096x128 128
# rows of 512 threads came first (3.69 ms; 64 x 32 of 4 x 2: 4.19 ms, 64 x 64: 4.30 ms;
# ptxas holds it to 128 registers, 16 bytes spilled). At head dim 128, 128 rows take
# 165 KB of shared memory: chips with less (sm_80's 163 KB, the 99 KB of sm_86/89/120)
# take 64 or 32 rows (untimed), and a chip with less still declines.
CONFIGS = ((64, DEFAULT_PARAMS), (MAX_HEAD_DIM, Params(block_m=128)),
           (MAX_HEAD_DIM, Params(block_m=64)), (MAX_HEAD_DIM, Params(block_m=32)))


def params_for(group: Group, target, head_dim: Optional[int] = None) -> Optional[Params]:
    """The first CONFIGS entry (tuned) whose head dim covers Q's and V's (`head_dim`
    where they are run-time sizes) and whose tiles fit the target's shared memory;
    None: none fits."""
    d, e = head_dims(group, head_dim)
    return choose(NAME, covering(CONFIGS, group, (d, e)), target, problem(group),
                  lambda p: p.valid() and p.shared_bytes(d, e) <= target.max_shared_per_block)


def find_groups(generics: list, target) -> list[Group]:
    """The attention runs (attention_match.attention_groups) this kernel can take."""
    return [group for group in attention_groups(generics) if matches(group, target)]


def matches(group: Group, target) -> bool:
    """f32, f16 or bf16 throughout, head dims up to 128, no causal flag, K and V with
    Q's heads (no grouped-query attention), tiles that fit."""
    if group.causal is not None or group.grouped or common_element(group) not in ELEMENTS:
        return False
    cases = head_dim_cases(group, RUN_TIME_HEAD_DIMS)  # [None]: static head dims
    if cases == [None] and max(head_dims(group)) > MAX_HEAD_DIM:
        return False
    return bool(cases) and all(params_for(group, target, d) is not None for d in cases)


def _async_copies(group: Group, d: int, e: int) -> bool:
    """K and V by cp.async, 16 bytes a copy: f32 and row-major from the buffer's start
    (16-byte aligned rows), head dims `d`, `e` multiples of 4."""
    return d % 4 == 0 and e % 4 == 0 and element_name(group.key) == "f32" and \
        row_major(group.key) and row_major(group.value)


def build(group: Group, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    return per_head_dim(group, kernel_name, RUN_TIME_HEAD_DIMS,
                        lambda name, head_dim: _build(group, gpu_module, name, target,
                                                      head_dim))


def _build(group: Group, gpu_module: ir.Operation, kernel_name: str, target,
           head_dim: Optional[int] = None) -> Launch:
    d, e = head_dims(group, head_dim)
    p = params_for(group, target, head_dim)
    assert p.valid(), p
    layout = p.layout(d, e)
    values = kernel_values(group)
    with kernel_entry(gpu_module, kernel_name, values, p.threads,
                      group.ops[-1].location) as args:
        scale = base2_scale(group, args, ir.F32Type.get())
        kernel = _Kernel(p=p, layout=layout, async_copy=_async_copies(group, d, e),
                         q_vectors=row_major(group.query),
                         kv_vectors=row_major(group.key) and row_major(group.value),
                         out_vectors=row_major(group.out),
                         **frame_fields(group, args, head_dim))
        kernel.emit(args[group.query], args[group.key], args[group.value],
                    args.get(group.mask) if group.mask is not None else None,
                    args[group.out], scale, _tiles(layout))
    return Launch(kernel_name, values, row_blocks_grid(group, p.block_m), (p.threads, 1, 1),
                  layout.bytes)


def _shared(shape, element) -> ir.Type:
    return ir.MemRefType.get(list(shape), element,
                             memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))


def _tiles(layout: Layout) -> dict:
    """The tiles as f32 views of the dynamic shared memory."""
    i8 = ir.IntegerType.get_signless(8)
    raw = gpu.dynamic_shared_memory(_shared((ir.ShapedType.get_dynamic_size(),), i8))
    tiles = dict(layout.tiles, o=layout.o_tile)
    return {name: memref.ViewOp(_shared(shape, ir.F32Type.get()), raw, index_const(offset),
                                []).result
            for name, (shape, offset) in tiles.items()}


# ---------------------------------------------------------------- the kernel

@dataclass
class _Kernel(FlashFrame):
    p: Params
    layout: Layout
    async_copy: bool    # K and V by cp.async
    q_vectors: bool     # Q read 4 at a time (row-major; where d % 4 == 0)
    kv_vectors: bool    # K and V likewise
    out_vectors: bool   # O written 4 at a time (row-major, e % 4 == 0)

    def emit(self, query, key, value, mask, out, scale, tiles):
        p, layout = self.p, self.layout
        f32 = ir.F32Type.get()
        self.f32, self.vec4 = f32, ir.VectorType.get([4], f32)
        self.zero = float_constant(f32, 0.0)
        self.tid = gpu.thread_id(gpu.Dimension.x)
        self.tx = arith.RemUIOp(self.tid, index_const(p.lanes)).result
        self.ty = arith.DivUIOp(self.tid, index_const(p.lanes)).result
        self.slice_ivs = block_slice(self.lead)
        row0 = self.row0 = mul(gpu.block_id(gpu.Dimension.x), p.block_m)
        self.tile_rows = [add(mul(self.ty, p.thread_m), i) for i in range(p.thread_m)]
        self.my_rows = [add(row0, r) for r in self.tile_rows]
        self.rows_in = [clamp(r, self.rows) for r in self.my_rows]
        self.key_cols = [add(self.tx, p.lanes * j) for j in range(p.thread_n)]
        self.v_cols = [mul(add(self.tx, p.lanes * q), 4) for q in range(layout.e_chunks)]
        # a tile may reach past the last key (always, as far as a run-time count is known)
        self.mask = mask
        self.bounds = not isinstance(self.keys, int) or self.keys % p.block_n != 0

        self._copy(query, tiles["q"], row0, p.block_m, layout.d, layout.d_pad, self.rows,
                   scale=scale)
        first = self._copy_kv(key, tiles["k"], index_const(0), layout.d, layout.d_pad)
        self.softmax = OnlineSoftmax(f32, lanes=p.lanes)
        loop = KeyTileLoop(
            p.block_n, p.thread_m,
            copy_keys=lambda kv0: self._copy_kv(key, tiles["k"], kv0, layout.d, layout.d_pad),
            copy_values=lambda kv0: self._copy_kv(value, tiles["v"], kv0, layout.e,
                                                  layout.e_pad),
            scores=lambda kv0, m, l: self._tile_softmax(tiles, kv0, m, l),
            weighted_values=lambda o, update: self._weighted_values(
                o, update.alphas, tiles["p"], tiles["v"]))
        sums, o = loop.emit(as_index(ceil_div(self.keys, p.block_n)), first,
                            [self.zero] * (p.thread_m * 4 * layout.e_chunks))
        self._store(out, [xor_reduce(x, arith.AddFOp, p.lanes) for x in sums], o, tiles["o"])

    # ------------------------------------------------------------ copies

    def _copy(self, source, tile, row0, count, width, width_pad, extent, scale=None):
        """Rows row0..row0 + count of `source` (of `extent` rows; past it: the last row,
        or zeros where `scale` is None) into `tile`'s first width_pad columns, widened to
        f32 (times `scale` where given), zeros past `width`."""
        vectors = width % 4 == 0 and (self.q_vectors if scale is not None
                                      else self.kv_vectors)
        per_row = width // 4 if vectors else width_pad
        spread_over_threads(
            self.tid, count * per_row, self.p.threads,
            lambda flat: self._copy_one(source, tile, row0, per_row, flat, width, extent,
                                        scale, vectors))

    def _copy_one(self, source, tile, row0, per_row, flat, width, extent, scale, vectors):
        r = arith.DivUIOp(flat, index_const(per_row)).result
        col = arith.RemUIOp(flat, index_const(per_row)).result
        if vectors:
            col = mul(col, 4)
        row_at = add(row0, r)
        real = less(row_at, extent)
        where = self.slice_ivs + [clamp(row_at, extent), col]
        if vectors:
            element = ir.MemRefType(source.type).element_type
            # row-major from the buffer's start, width % 4 == 0: 4 elements are aligned
            # to their size (without it LLVM splits the load into 4 scalar ones)
            loaded = vector.LoadOp(ir.VectorType.get([4], element), source, where,
                                   alignment=element.width // 2).result
            if element != self.f32:
                loaded = arith.ExtFOp(self.vec4, loaded).result
            if scale is not None:
                loaded = arith.MulFOp(loaded, vector.BroadcastOp(self.vec4, scale).result
                                      ).result
            else:
                zeros = arith.ConstantOp(self.vec4, ir.DenseElementsAttr.get_splat(
                    self.vec4, ir.FloatAttr.get(self.f32, 0.0))).result
                loaded = arith.SelectOp(real, loaded, zeros).result
            vector.StoreOp(loaded, tile, [r, col])
            return
        inside = less(col, width)
        where[-1] = clamp(col, width)
        loaded = widened(memref.LoadOp(source, where).result, self.f32)
        if scale is not None:
            loaded = arith.MulFOp(loaded, scale).result
        else:
            inside = arith.AndIOp(inside, real).result
        memref.StoreOp(arith.SelectOp(inside, loaded, self.zero).result, tile, [r, col])

    def _copy_kv(self, source, tile, kv0, width, width_pad):
        """Keys kv0.. of `source` into `tile` (zeros past the last key): cp.async, whose
        group's token it returns, or loads and stores by the threads (None)."""
        if not self.async_copy:
            self._copy(source, tile, kv0, self.p.block_n, width, width_pad, self.keys)
            return None
        per_row = width // 4  # 16-byte copies of 4 f32
        return async_group(spread_over_threads(
            self.tid, self.p.block_n * per_row, self.p.threads,
            lambda flat: async_copy_chunk(source, tile, self.slice_ivs, kv0, per_row, flat,
                                          self.keys, 4, self.bounds)))

    # ------------------------------------------------------------ the products

    def _read4(self, tile, row, col):
        vec = vector.LoadOp(self.vec4, tile, [row, col], alignment=16).result
        return [vector.ExtractOp(vec, [], [c]).result for c in range(4)]

    def _scores(self, q_tile, k_tile):
        """S[i][j] = Q[row i] . K[key j] for the thread's rows and keys."""
        p = self.p
        acc = [[self.zero] * p.thread_n for _ in range(p.thread_m)]
        for k0 in range(0, self.layout.d_pad, 4):
            k0v = index_const(k0)
            qs = [self._read4(q_tile, row, k0v) for row in self.tile_rows]
            ks = [self._read4(k_tile, col, k0v) for col in self.key_cols]
            for c in range(4):
                for i in range(p.thread_m):
                    for j in range(p.thread_n):
                        acc[i][j] = mmath.FmaOp(qs[i][c], ks[j][c], acc[i][j]).result
        return acc

    def _allowed(self, kv0):
        """allowed[i][j]: may row i see key j (an i1), or None when every key is."""
        if self.mask is None and not self.bounds:
            return None
        out = [[None] * self.p.thread_n for _ in range(self.p.thread_m)]
        for j, col in enumerate(self.key_cols):
            for i, row in enumerate(self.rows_in):
                out[i][j] = self.allowed(add(kv0, col), row, self.slice_ivs, self.bounds,
                                         self.mask)
        return out

    def _tile_softmax(self, tiles, kv0, m, l):
        """S of key tile kv0.. and its online softmax; P to its shared tile (the threads
        of a row multiply P V with columns of every lane's keys)."""
        scores = self._scores(tiles["q"], tiles["k"])
        update = self.softmax.update(scores, m, l, self._allowed(kv0))
        for i, row in enumerate(self.tile_rows):
            for jj, col in enumerate(self.key_cols):
                memref.StoreOp(update.probs[i][jj], tiles["p"], [row, col])
        return update

    def _weighted_values(self, o, alphas, p_tile, v_tile):
        """O * alpha + P V; o[i * 4 * e_chunks + 4 * q + c] is row i, column
        v_cols[q] + c."""
        p = self.p
        per_row = 4 * self.layout.e_chunks
        o = [arith.MulFOp(x, alphas[n // per_row]).result for n, x in enumerate(o)]
        for kk in range(0, p.block_n, 4):
            ps = [self._read4(p_tile, row, index_const(kk)) for row in self.tile_rows]
            for u in range(4):
                vs = [self._read4(v_tile, index_const(kk + u), col) for col in self.v_cols]
                for i in range(p.thread_m):
                    for q, chunk in enumerate(vs):
                        for c in range(4):
                            n = i * per_row + 4 * q + c
                            o[n] = mmath.FmaOp(ps[i][u], chunk[c], o[n]).result
        return o

    def _store(self, out, sums, o, o_tile):
        """out = O / l (0 for a row with no allowed key) through shared memory: each
        thread writes its rows' columns to `o_tile` (over the other tiles, once every
        thread is done with them), then the block writes the rows that exist, 4 columns
        a thread where the rows allow. (Stores guarded per row straight from the
        registers let LLVM sink each row's products into its guard where the loop over
        key tiles is gone, leaving every shared read before them: thousands of live
        registers.)"""
        p, e = self.p, self.layout.e
        per_row = 4 * self.layout.e_chunks
        gpu.BarrierOp()
        for i, row in enumerate(self.tile_rows):
            inverse = inverse_sum(sums[i])
            for q, col in enumerate(self.v_cols):
                values = [arith.MulFOp(o[i * per_row + 4 * q + c], inverse).result
                          for c in range(4)]
                vector.StoreOp(vector.FromElementsOp(self.vec4, values).result, o_tile,
                               [row, col])
        gpu.BarrierOp()
        out_type = ir.MemRefType(out.type).element_type
        vectors = self.out_vectors and e % 4 == 0
        per_row = e // 4 if vectors else e
        total = p.block_m * per_row
        for first in range(0, total, p.threads):
            flat = add(self.tid, first)
            r = arith.DivUIOp(flat, index_const(per_row)).result
            col = arith.RemUIOp(flat, index_const(per_row)).result
            row = add(self.row0, r)
            inside = less(row, self.rows)
            if first + p.threads > total:
                inside = arith.AndIOp(inside, less(flat, total)).result
            guard = scf.IfOp(inside)
            with ir.InsertionPoint(guard.then_block):
                if vectors:
                    col = mul(col, 4)
                    value = vector.LoadOp(self.vec4, o_tile, [r, col], alignment=16).result
                    if out_type != self.f32:
                        value = arith.TruncFOp(ir.VectorType.get([4], out_type),
                                               value).result
                    vector.StoreOp(value, out, self.slice_ivs + [row, col])
                else:
                    value = memref.LoadOp(o_tile, [r, col]).result
                    if out_type != self.f32:
                        value = arith.TruncFOp(out_type, value).result
                    memref.StoreOp(value, out, self.slice_ivs + [row, col])
                scf.YieldOp([])
