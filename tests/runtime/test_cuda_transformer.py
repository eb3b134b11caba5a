"""The spec's transformer block and reshapes on the native CUDA backend, on a GPU (marked
`gpu`: CI skips these; tools/gpu_tests.sh runs them), against float64 numpy on fresh
random inputs. Reshapes and the projections' collapsed rows are views in the launch plan
(tests/backend/test_cuda_plan_views.py)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close, run_transformer_block

pytestmark = pytest.mark.gpu

RESHAPE = Path(__file__).resolve().parents[1] / "programs" / "reshape_views.zyn"


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
    out, expected = run_transformer_block("cuda:0", rng, batch, seq, heads, head_dim, ffn)
    assert np.asarray(out).shape == expected.shape
    assert_close(np.asarray(out), expected, rtol=1e-3)
