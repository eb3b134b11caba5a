"""The two kernels of the attention backward ukernel (attention_backward.py says what
they compute) and the host function that launches them, built with MLIR's Python API
on tile_kernel.py's frame.
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, gpu, memref, nvgpu, scf, vector
from mlir.dialects import math as mmath

from ..strategies.flash_skeleton import OnlineSoftmax, add, clamp, less, mul, quad_reduce
from ..strategies.kernel_builder import index_const
from .attention_backward import BLOCK, Problem, token_shapes
from .tile_kernel import TileKernel, accumulator_tiles, element_type, flat, host_module
from ..strategies.warp_mma import MMA_N, barrier, f32_zero


def build_module(problem: Problem, target, kernel_module: str) -> ir.Module:
    """The host function `main(q, k, v, dout, o[, lse]) -> (dq, dk, dv)` and its two
    kernels; `lse` (the rows' log-sum-exp in base 2, f32 [heads, rows]) where the
    forward gave it (problem.lse_given), else the dQ kernel makes it. The "tokens"
    layout: `main(qkv, dout, o, lse) -> dqkv`, q, k, v and their gradients parts of
    one fused projection's rows."""
    p = problem
    el = element_type(p)
    stat_type = ir.MemRefType.get([p.heads, p.rows], ir.F32Type.get())
    if p.layout == "tokens":
        if not p.lse_given:
            raise ValueError("the token-major backward takes the forward's lse")
        packed, rows = (ir.MemRefType.get(shape, el) for shape in token_shapes(p))
        inputs = {"qkv": packed, "dout": rows, "o": rows, "lse": stat_type}
        outputs = {"dqkv": packed}
        aliases = {"q": "qkv", "k": "qkv", "v": "qkv", "dq": "dqkv", "dk": "dqkv",
                   "dv": "dqkv"}
    else:
        q_type = ir.MemRefType.get([p.heads, p.rows, p.d], el)
        kv_type = ir.MemRefType.get([p.kv_heads, p.keys, p.d], el)
        inputs = {"q": q_type, "k": kv_type, "v": kv_type, "dout": q_type, "o": q_type}
        outputs = {"dq": q_type, "dk": kv_type, "dv": kv_type}
        aliases = {}
    scratch = {"delta": stat_type}
    (inputs if p.lse_given else scratch)["lse"] = stat_type
    return host_module(p, target, kernel_module, inputs, outputs, scratch, [
        ("k0_attention_backward_dq", _DqKernel, ["q", "k", "v", "dout", "o", "dq", "lse",
                                                 "delta"],
         (p.heads, math.ceil(p.rows / BLOCK), p.causal)),
        ("k1_attention_backward_dkdv", _DkDvKernel, ["q", "k", "v", "dout", "lse", "delta",
                                                     "dk", "dv"],
         (p.kv_heads, math.ceil(p.keys / BLOCK), False))], aliases)


# ---------------------------------------------------------------- dQ, lse, delta

class _DqKernel(TileKernel):
    """Q and dO kept; K (first sweep), K and V (second) streamed."""

    def emit(self, args: list, tiles: dict) -> None:
        q, k, v, dout, o, dq, lse, delta_out = args
        q, k, v, dq = (self.operand(x, part) for x, part in ((q, 0), (k, 1), (v, 2), (dq, 0)))
        dout, o = self.operand(dout), self.operand(o)
        p, w = self.p, self.w
        head, kv_head, row0, first, rows = self.query_block()
        self.copy_rows(q, head, row0, p.rows, index_const(0))
        self.copy_rows(dout, head, row0, p.rows, index_const(BLOCK))
        delta = self._delta(dout, o, head, rows)
        self.wait_copies()
        q_rows, do_rows = self.kept(0), self.kept(BLOCK)
        barrier()  # every warp has its fragments: the stage is free for the sweeps
        if p.lse_given:  # the forward's, in base 2
            lse2 = [memref.LoadOp(lse, [head, clamp(row, p.rows)]).result for row in rows]
        else:
            lse2 = self._log_sum_exp(k, kv_head, q_rows, row0, rows)

        def step(kv0, base, acc, masked):
            # dP's product runs while P is computed from S (wgmma: both in flight)
            s = self.product_nk(q_rows, base, wait=False)
            dp = self.product_nk(do_rows, add(base, BLOCK), wait=False)
            probs = []  # value i of a tile: row i // 2 of the lane's two, column i % 2
            for n, tile in enumerate(self.finish(s, 1)):
                probs.append([])
                for i, score in enumerate(tile):
                    allowed = None
                    if masked:
                        key = add(add(kv0, w.two_t), n * MMA_N + i % 2)
                        allowed = self.allowed(key, rows[i // 2])
                    probs[-1].append(self.prob(score, lse2[i // 2], allowed))
            ds = []
            for p_tile, dp_tile in zip(probs, self.finish(dp, 0)):
                ds.append([arith.MulFOp(prob, arith.SubFOp(dp_value, delta[i // 2]).result)
                           .result for i, (prob, dp_value) in enumerate(zip(p_tile, dp_tile))])
            return flat(self.accumulate_kn(accumulator_tiles(acc), ds, base))

        acc = self.sweep_keys(k, v, kv_head, row0, [f32_zero()] * (p.d // 2), step)
        self.store_rows(dq, head, first, accumulator_tiles(acc), p.scale, p.rows)
        self.store_row_values(head, rows, ([] if p.lse_given else [(lse, lse2)]) +
                              [(delta_out, delta)])

    def _delta(self, dout, o, head, rows) -> list:
        """rowsum(dO * O) of the lane's two rows (f32; the quad's lanes add theirs)."""
        pair = ir.VectorType.get([2], self.el)
        sums = []
        for row in rows:
            row = clamp(row, self.p.rows)
            total = f32_zero()
            for n in range(self.p.d // MMA_N):
                at = dout.at(head, row, add(self.w.two_t, n * MMA_N))
                a = vector.LoadOp(pair, dout.array, at, alignment=4).result
                b = vector.LoadOp(pair, o.array, o.at(head, row, add(self.w.two_t, n * MMA_N)),
                                  alignment=4).result
                for c in (0, 1):
                    x, y = (arith.ExtFOp(self.f32, vector.ExtractOp(t, [], [c]).result)
                            .result for t in (a, b))
                    total = mmath.FmaOp(x, y, total).result
            sums.append(quad_reduce(total, arith.AddFOp))
        return sums

    def _log_sum_exp(self, k, kv_head, q_rows, row0, rows) -> list:
        """lse2 = max * c + log2(sum of exp2(s * c - max * c)) of the lane's two rows,
        over the keys they see: the first sweep. +inf for a row that sees none (its P
        is then 0)."""
        softmax = OnlineSoftmax(self.f32, lanes=4, scale=self.c)

        def step(kv0, base, state, masked):
            values, masks = self.scores_by_row(self.product_nk(q_rows, base), kv0, rows,
                                               masked)
            update = softmax.update(values, state[:2], state[2:], masks)
            return update.maxima + update.sums

        state = self.sweep_keys(k, None, kv_head, row0, self.softmax_start(), step)
        return self.lse2_of(state[:2], state[2:])[0]


# ---------------------------------------------------------------- dK, dV

class _DkDvKernel(TileKernel):
    """K and V kept; Q, dO and the rows' lse2 and delta streamed."""

    def stat_tiles(self) -> dict:
        shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
        return {"stats": ir.MemRefType.get([4 * BLOCK], self.f32, memory_space=shared)}

    def emit(self, args: list, tiles: dict) -> None:
        q, k, v, dout, lse, delta, dk, dv = args
        q, k, v, dk, dv = (self.operand(x, part) for x, part in
                           ((q, 0), (k, 1), (v, 2), (dk, 1), (dv, 2)))
        dout = self.operand(dout)
        p, w = self.p, self.w
        stats = tiles["stats"]  # per buffer: its BLOCK rows' lse2, then their delta
        # (where causal the first key tile is seen by the most query rows: the longest
        # blocks start first)
        kv_head, key_tile = self.order.at(gpu.block_id(gpu.Dimension.x))
        key0 = mul(key_tile, BLOCK)
        first = add(key0, self.warp16)
        keys = [add(add(first, w.g), 8 * h) for h in (0, 1)]
        self.copy_rows(k, kv_head, key0, p.keys, index_const(0))
        self.copy_rows(v, kv_head, key0, p.keys, index_const(BLOCK))
        self.wait_copies()
        k_rows, v_rows = self.kept(0), self.kept(BLOCK)
        barrier()
        query_tiles = math.ceil(p.rows / BLOCK)
        if p.causal:  # the first query tile with a row that sees key0
            start = arith.DivUIOp(arith.MaxSIOp(
                arith.SubIOp(key0, index_const(p.offset)).result, index_const(0)).result,
                index_const(BLOCK)).result
        else:
            start = index_const(0)
        count = arith.SubIOp(index_const(query_tiles), start).result

        def tile_of(step):
            """(query head, first row) of sweep step `step`: each head of the group
            sweeps the query tiles start..."""
            head = add(mul(kv_head, p.group), arith.DivUIOp(step, count).result)
            return head, mul(add(start, arith.RemUIOp(step, count).result), BLOCK)

        def issue(step, base):
            head, row0 = tile_of(step)
            self.copy_rows(q, head, row0, p.rows, base)
            self.copy_rows(dout, head, row0, p.rows, add(base, BLOCK))
            self._copy_stats(lse, delta, stats, head, row0, self.buffer_index(base))

        def compute(step, base, acc):
            _, row0 = tile_of(step)
            return self.by_mask(self.crosses(key0, row0, False), acc,
                                lambda masked: tile_step(row0, base, acc, masked))

        def tile_step(row0, base, acc, masked):
            at = self.buffer_index(base)  # its stats: 2 BLOCK floats a buffer
            dk_acc, dv_acc = accumulator_tiles(acc[:p.d // 2]), accumulator_tiles(acc[p.d // 2:])
            # wgmma: dP^T's product runs while P^T is computed, dV's while dS^T is; the
            # stats are read where they are used (held for the tile, their 32 registers
            # cost d 64's third block a multiprocessor)
            s_t = self.product_nk(k_rows, base, wait=False)
            dp_t = self.product_nk(v_rows, add(base, BLOCK), wait=False)

            def stats_pair(n, which):
                """Accumulator tile n's two columns' lse2 (0) or delta (1), as read."""
                column = add(add(add(at, w.two_t), n * MMA_N), which * BLOCK)
                pair = vector.LoadOp(ir.VectorType.get([2], self.f32), stats, [column],
                                     alignment=8).result
                return [vector.ExtractOp(pair, [], [c]).result for c in (0, 1)]
            probs = []
            for n, s_tile in enumerate(self.finish(s_t, 1)):
                lse2 = stats_pair(n, 0)
                probs.append([])
                for i, score in enumerate(s_tile):
                    allowed = None
                    if p.causal and masked:
                        row = add(add(row0, w.two_t), n * MMA_N + i % 2)
                        allowed = self.causal_allows(keys[i // 2], row)
                    probs[-1].append(self.prob(score, lse2[i % 2], allowed))
            dv_acc = self.accumulate_kn(dv_acc, probs, add(base, BLOCK), wait=False)
            ds = []
            for n, (p_tile, dp_tile) in enumerate(zip(probs, self.finish(dp_t, 1))):
                delta = stats_pair(n, 1)
                ds.append([arith.MulFOp(prob, arith.SubFOp(dp_value, delta[i % 2]).result)
                           .result for i, (prob, dp_value) in enumerate(zip(p_tile, dp_tile))])
            dk_acc = self.accumulate_kn(dk_acc, ds, base, wait=False)
            return flat(self.finish(dk_acc + dv_acc, 0))

        steps = arith.MulIOp(count, index_const(p.group)).result
        acc = self.sweep(steps, [f32_zero()] * p.d, issue, compute)
        self.store_rows(dk, kv_head, first, accumulator_tiles(acc[:p.d // 2]), p.scale, p.keys)
        self.store_rows(dv, kv_head, first, accumulator_tiles(acc[p.d // 2:]), 1.0, p.keys)

    def _copy_stats(self, lse, delta, stats, head, row0, at) -> None:
        """cp.async lse2 (threads 0..BLOCK) and delta (the next BLOCK threads) of rows
        row0.. into stats[at..at + BLOCK] and stats[at + BLOCK..at + 2 BLOCK], 4 bytes
        each. Rows past the end read 0: their Q and dO rows are zeros, so they add
        nothing to dK and dV."""
        for half, source in enumerate((lse, delta)):
            index = arith.SubIOp(self.tid, index_const(half * BLOCK)).result
            mine = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.uge, self.tid, index_const(half * BLOCK))
                .result, less(self.tid, (half + 1) * BLOCK)).result
            guard = scf.IfOp(mine)
            with ir.InsertionPoint(guard.then_block):
                row = add(row0, index)
                count = arith.SelectOp(less(row, self.p.rows), index_const(1),
                                       index_const(0)).result
                nvgpu.DeviceAsyncCopyOp(
                    stats, [add(add(at, index), half * BLOCK)], source,
                    [head, clamp(row, self.p.rows)], ir.IntegerAttr.get(ir.IndexType.get(), 1),
                    srcElements=count)
                scf.YieldOp([])
