"""pack-loop-carried-tensors (IREE's input): a loop run in order that carries several
tensors, compiled with run-time sizes, gives the numbers its body says (CPU, against
float64 numpy on fresh random inputs). Before the pass, iree-compile packed the carried
l and o of this online softmax into one buffer: out = o / l came back 1 everywhere."""
import numpy as np
import pytest

import zynml
from conftest import assert_close

from passes.test_cir_raise_attention_decode import LANGUAGE_GUIDE_ONLINE

# The language guide's online softmax over scalar scores q[i] * k[j] (not a `dot`, so
# not raised to cir.attention: lowered as written, a loop carrying m, l and o)
ONLINE = LANGUAGE_GUIDE_ONLINE.replace("dot(Q[i], K[j])", "Q[i] * K[j]")
assert ONLINE != LANGUAGE_GUIDE_ONLINE


def reference(q, k, v):
    scores = np.outer(q.astype(np.float64), k)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True) @ v


@pytest.mark.parametrize("dynamic", [True, False])
def test_loop_carrying_three_tensors(rng, dynamic):
    prog = zynml.compile(ONLINE, device="cpu", dynamic=dynamic)
    for sq, sk, dv in [(1, 1, 1), (5, 7, 3), (17, 131, 2)]:
        q, k = (rng.standard_normal(n).astype(np.float32) for n in (sq, sk))
        v = rng.standard_normal((sk, dv)).astype(np.float32)
        assert_close(prog(Q=q, K=k, V=v)["attn"], reference(q, k, v))
    assert prog.stats().specializations == (1 if dynamic else 3)
