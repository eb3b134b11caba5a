"""matmul_wgmma's batched products (A[b, i, k] @ B[b, k, j], the attention backward's):
which kernels a plan gets (here, compile-only), and the numbers on an H100 against
float64 (GPU tests: tools/gpu_tests.sh)."""
import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.kernels import variants
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY, assert_close

BATCHED = """
let wide = compute(A, B) {
    @kernel batched_matmul
    for b in 0..H, i in 0..M, j in 0..N:
        var acc: f32 = 0.0
        for k in 0..K:
            acc += cast(A[b, i, k], f32) * B[b, k, j]
        out[b, i, j] = acc
}
let narrow = compute(A, B) {
    @kernel batched_matmul
    for b in 0..H, i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += A[b, i, k] * B[b, k, j]
        out[b, i, j] = acc
}
"""


def _operands(rng, h, m, k, n, dtype):
    a = (rng.standard_normal((h, m, k)) * 0.5).astype(dtype)
    return a, rng.standard_normal((h, k, n)).astype(dtype)


@pytest.mark.parametrize("h, m, k, n, tile_n", [(3, 128, 64, 64, 64), (2, 256, 192, 384, 128),
                                                 (5, 128, 128, 512, 128),  # 20 tiles
                                                 (1, 128, 64, 64, 64)])  # a batch of one
def test_batched_products_take_wgmma_over_collapsed_operands(rng, h, m, k, n, tile_n):
    a, b = _operands(rng, h, m, k, n, ml_dtypes.bfloat16)
    artifact = zynml.compile(BATCHED, device="cuda", require_device=False).artifact(A=a, B=b)
    steps = list(launches(artifact.plan["body"]))
    assert [s["strategy"] for s in steps] == ["matmul_wgmma"] * 2  # the zero fills fused
    assert all(s["grid"] == [h * (m // 128) * (n // tile_n), 1, 1] for s in steps)
    # each descriptor is made of a [h * rows, cols] view of its operand (no copy): A's,
    # B's and, where the product is stored through TMA (the zero fill fused in), C's
    maps = [s for s in artifact.plan["body"] if s["op"] == "tensor_map"]
    views = {s["result"]: s for s in artifact.plan["body"] if s["op"] in ("view", "collapse")}
    assert len(maps) == 6 and all(m_["source"] in views for m_ in maps)
    assert [m_["box"] for m_ in maps[2::3]] == [[64, 32], [64, 64]]  # C: f32, then bf16
    assert [o["dtype"] for o in artifact.plan["outputs"]] == ["float32", "bfloat16"]


def test_the_attention_backward_runs_its_five_products_on_wgmma():
    """GPT-2 small's shapes, scaled down in heads: the scores and dP into f32, dQ, dK
    and dV in bf16 (N = 64, the head's width); no separate zero fills."""
    bf16 = ml_dtypes.bfloat16
    heads, rows, d = 4, 256, 64
    prog = zynml.compile(variants.variant_source("attention_backward", ()), device="cuda",
                         require_device=False, dynamic=False)
    args = {name: np.ones((heads, rows, d), bf16) for name in ("q", "k", "v", "dout", "o")}
    plan = prog.attention_backward._program.artifact(
        **args, allowed=np.ones((rows, rows), bool), scale=np.float32(0.125)).plan
    strategies = [s["strategy"] for s in launches(plan["body"])]
    assert strategies.count("matmul_wgmma") == 5, strategies
    assert not any(s.get("problem", "").startswith(("f32_", "bf16_"))
                   for s in launches(plan["body"]) if s["strategy"] == "pointwise")


@pytest.mark.gpu
@pytest.mark.parametrize("h, m, k, n", [(3, 128, 64, 64), (2, 256, 192, 384),
                                        (7, 128, 1024, 64), (1, 256, 128, 128)])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_cuda_batched_wgmma_matches_float64(rng, h, m, k, n, dtype):
    a, b = _operands(rng, h, m, k, n, dtype)
    if COMPILE_ONLY:
        zynml.compile(BATCHED, device="cuda", require_device=False).artifact(A=a, B=b)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(BATCHED, device="cuda:0")(A=a, B=b)
    want = np.einsum("bik,bkj->bij", a.astype(np.float64), b.astype(np.float64))
    assert np.asarray(out["wide"]).dtype == np.float32
    assert_close(out["wide"], want, rtol=1e-5)  # exact products, f32 sums
    assert_close(np.asarray(out["narrow"]).astype(np.float64), want, rtol=1e-2)
