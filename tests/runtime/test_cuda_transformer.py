"""The spec's transformer block and reshapes on the native CUDA backend, on a GPU (marked
`gpu`: CI skips these; tools/gpu_tests.sh runs them), against float64 numpy on fresh
random inputs. Reshapes and the projections' collapsed rows are views in the launch plan
(tests/backend/test_cuda_plan_views.py)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close, transformer_block_reference, transformer_layer

pytestmark = pytest.mark.gpu

TRANSFORMER = Path(__file__).resolve().parents[1] / "programs" / "transformer" / \
    "transformer_block.zyn"
RESHAPE = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let z = reshape(y, [a, b])
let w = compute(z) {
    @kernel elementwise
    for i in 0..a, j in 0..b:
        out[i, j] = z[i, j] + 1.0 * i
}
"""


def test_a_reshape_on_the_gpu(rng):
    x = rng.standard_normal(5 * 7).astype(np.float32)
    out = zynml.run(RESHAPE, device="cuda:0", x=x, a=5, b=7)
    expected = (2 * x.astype(np.float64)).reshape(5, 7) + np.arange(5)[:, None]
    assert_close(out["w"], expected)


@pytest.mark.parametrize("batch,seq,heads,head_dim,ffn", [
    (3, 5, 3, 5, 11),       # odd everywhere, pointwise projections
    (3, 67, 4, 32, 256),    # projections as matrix-product kernels (201 rows)
])
def test_the_transformer_block_on_the_gpu_against_numpy(rng, batch, seq, heads, head_dim,
                                                        ffn):
    hidden = heads * head_dim
    layers = [transformer_layer(rng, hidden, ffn) for _ in range(2)]
    x = rng.standard_normal((batch, seq, hidden)).astype(np.float32)
    prog = zynml.compile(TRANSFORMER, device="cuda:0")
    out = prog.transformer_block(x, 1, model={"layers": layers}, num_heads=heads,
                                 head_dim=head_dim)
    assert np.asarray(out).shape == (batch, seq, hidden)
    assert_close(np.asarray(out), transformer_block_reference(x, layers[1], heads, head_dim),
                 rtol=1e-3)
