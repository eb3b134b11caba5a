"""The attention forward ukernel's kernel (attention_forward.py says what it computes) and
the host function that launches it, on tile_kernel.py's frame."""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith

from ..strategies.flash_skeleton import OnlineSoftmax, add, inverse_sum
from ..strategies.kernel_builder import index_const
from .attention_forward import BLOCK, Problem, token_shapes
from .tile_kernel import TileKernel, accumulator_tiles, element_type, flat, host_module
from ..strategies.warp_mma import MMA_N, barrier, f32_zero


def build_module(problem: Problem, target, kernel_module: str) -> ir.Module:
    """The host function `main(q, k, v) -> (o, lse)` and its kernel: lse is the rows'
    log-sum-exp in base 2, f32 [heads, rows], as the backward ukernel takes it. The
    "tokens" layout: `main(qkv) -> (o, lse)`, q, k and v parts of one fused
    projection's rows and o token-major."""
    p = problem
    el = element_type(p)
    stat_type = ir.MemRefType.get([p.heads, p.rows], ir.F32Type.get())
    if p.layout == "tokens":
        packed, rows = (ir.MemRefType.get(shape, el) for shape in token_shapes(p))
        inputs, o_type = {"qkv": packed}, rows
        aliases = {"q": "qkv", "k": "qkv", "v": "qkv"}
    else:
        o_type = ir.MemRefType.get([p.heads, p.rows, p.d], el)
        kv_type = ir.MemRefType.get([p.kv_heads, p.keys, p.d], el)
        inputs, aliases = {"q": o_type, "k": kv_type, "v": kv_type}, {}
    return host_module(p, target, kernel_module, inputs, {"o": o_type, "lse": stat_type}, {}, [
        ("k0_attention_forward", _ForwardKernel, ["q", "k", "v", "o", "lse"],
         (p.heads, math.ceil(p.rows / BLOCK), p.causal))], aliases)


class _ForwardKernel(TileKernel):
    """Q kept; K and V streamed; per key tile S = Q K^T, the online softmax's update,
    O = O * alpha + P V."""

    def emit(self, args: list, tiles: dict) -> None:
        q, k, v, o, lse = args
        q, k, v = (self.operand(x, part) for part, x in enumerate((q, k, v)))
        o = self.operand(o)
        p = self.p
        head, kv_head, row0, first, rows = self.query_block()
        self.copy_rows(q, head, row0, p.rows, index_const(0))
        self.wait_copies()
        q_rows = self.kept(0)
        barrier()  # every warp has its fragments: the stage is free for the sweep
        softmax = OnlineSoftmax(self.f32, lanes=4, scale=self.c)

        def step(kv0, base, state, masked):
            values, masks = self.scores_by_row(self.product_nk(q_rows, base), kv0, rows,
                                               masked)
            update = softmax.update(values, state[:2], state[2:4], masks)
            # an accumulator tile holds (row g, 2 columns) then (row g + 8, 2 columns)
            probs = [[update.probs[h][2 * n + col] for h in (0, 1) for col in (0, 1)]
                     for n in range(BLOCK // MMA_N)]
            kept = [[arith.MulFOp(x, update.alphas[i // 2]).result for i, x in
                     enumerate(tile)] for tile in accumulator_tiles(state[4:])]
            acc = self.accumulate_kn(kept, probs, add(base, BLOCK))
            return update.maxima + update.sums + flat(acc)

        state = self.sweep_keys(k, v, kv_head, row0, self.softmax_start() +
                                [f32_zero()] * (p.d // 2), step)
        lse2, sums = self.lse2_of(state[:2], state[2:4])
        inverse = [inverse_sum(total) for total in sums]  # 0 for a row that saw no key
        out = [[arith.MulFOp(x, inverse[i // 2]).result for i, x in enumerate(tile)]
               for tile in accumulator_tiles(state[4:])]
        self.store_rows(o, head, first, out, 1.0, p.rows)
        self.store_row_values(head, rows, [(lse, lse2)])
