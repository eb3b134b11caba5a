"""FlashAttention-2's backward pass (arXiv:2307.08691, Algorithm 2) as two kernels on
tensor cores (wgmma on sm_90a at head dims 64 and 128, mma.sync otherwise:
tile_stage.py): the scores and probabilities live in registers a tile at a time, never
in memory. zynml/kernels/src/attention_backward.zyn is the
definition (every device runs it; here it holds [slices, rows, keys] whole); this is the
CUDA library's fast form of the same equations, batch and heads flattened into slices:

    q, dout, o  [heads, rows, d]       heads = kv_heads * group (query head h reads
    k, v        [kv_heads, keys, d]    key / value head h // group)
    P = exp(S * scale - lse),  S = Q K^T          (row i sees key j when j <= i + keys -
    dS = P * (dO V^T - delta),  delta = rowsum(dO * O)     rows, causal; every key else)
    dQ = scale dS K,  dK = scale dS^T Q,  dV = P^T dO     (dK, dV summed over the group)

`dq` kernel: a block takes 64 query rows (4 warps of 16). It computes delta, then the
rows' log-sum-exp in a first sweep over the key tiles (the online softmax's max and sum;
stored in base 2, lse2 = lse * log2(e)) unless the forward ukernel gave it
(`lse_given`, attention_forward.py), then in a second sweep P, dS and dQ; it stores dQ,
lse2 and delta. `dkdv` kernel: a block takes 64 keys (4 warps of 16) and, for each
query head of their group, sweeps the query tiles that can see them, with lse2 and delta
read back: S^T = K Q^T, P^T, dV += P^T dO, dP^T = V dO^T, dS^T, dK += dS^T Q. No atomics:
each output element is written by one thread. The streamed tiles come in with cp.async
through two buffers: tile j + 1 is copied while tile j is multiplied.

The kernels are built in attention_backward_kernels.py on tile_kernel.py's frame (MLIR
is needed only there); this module is what the library asks before it calls them.

Layouts: "heads" as above, or "tokens", where q, k and v are read where a fused qkv
projection's token-major rows hold them ([batch, seq, 3, heads, d]; self-attention, no
groups), dout and o are [batch, seq, heads, d], and dq, dk, dv are written into one d qkv
of the projection's layout (the library's fused_qkv_attention): no heads split or merged.

Causal sweeps skip the tiles a block cannot see (above the diagonal), about half, and
apply the key rule (a compare and a select per score) only on the tiles across the
diagonal or the keys' end: each sweep's step is built twice, with and without it.
Where the kept and streamed tiles sit in shared memory, and what multiplies them, is
tile_stage.py's (its two forms, and why head dims over 64 keep their tiles in shared
memory on mma.sync).

Takes f16 or bf16, head dims that are multiples of 16 up to 128, no mask; `supports`
says so and the library runs the .zyn otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

BLOCK = 64          # query rows of a dq block, keys of a dkdv block, and both tiles
WARPS = 4           # 16 rows (or keys) each
THREADS = 32 * WARPS
MAX_HEAD_DIM = 128
ELEMENTS = ("f16", "bf16")
LAYOUTS = ("heads", "tokens")
MMA_K = 16          # the head dim is a multiple of the products' depth


@dataclass(frozen=True)
class Problem:
    heads: int       # query slices (batch * heads)
    kv_heads: int    # key / value slices
    rows: int        # queries per slice
    keys: int
    d: int           # head dim
    element: str     # "f16" or "bf16"
    causal: bool
    scale: float
    lse_given: bool = False  # the backward takes the forward's lse2 (attention_forward)
    layout: str = "heads"    # or "tokens": q, k, v, o and the gradients token-major
    batch: int = 1           # (tokens) heads = batch * heads of a batch

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    @property
    def offset(self) -> int:
        """Causal: row i sees keys j <= i + offset."""
        return self.keys - self.rows


def supports(problem: Problem) -> str | None:
    """None where the kernels take `problem`, else why not."""
    if problem.element not in ELEMENTS:
        return f"element {problem.element}, not f16 or bf16"
    if problem.d % MMA_K or problem.d > MAX_HEAD_DIM:
        return f"head dim {problem.d}, not a multiple of 16 up to {MAX_HEAD_DIM}"
    if problem.heads % problem.kv_heads:
        return f"{problem.heads} query heads are not groups of {problem.kv_heads}"
    if problem.causal and problem.offset < 0:
        return "causal with more queries than keys"
    if problem.scale <= 0 or min(problem.rows, problem.keys) < 1:
        return "a scale that is not positive, or no rows"
    if problem.layout not in LAYOUTS:
        return f"layout {problem.layout!r}, not one of {LAYOUTS}"
    if problem.layout == "tokens" and (problem.kv_heads != problem.heads or
                                       problem.rows != problem.keys or
                                       problem.heads % problem.batch):
        return "token-major rows are a fused projection's: self-attention, no groups"
    return None


def token_shapes(problem: Problem) -> tuple[list, list]:
    """The token-major layout's shapes: a fused projection's q, k, v [batch, seq, 3,
    heads, d] and one [batch, seq, heads, d] (o, its gradient)."""
    p = problem
    heads = p.heads // p.batch
    return [p.batch, p.rows, 3, heads, p.d], [p.batch, p.rows, heads, p.d]

