"""cir-raise-attention: which bodies become cir.attention, and that the raised program
computes what the body says (CPU, against float64 numpy on fresh random inputs)."""
import numpy as np
import pytest

import zynml
from conftest import assert_close, attention_reference as reference

from test_spec_examples import EXAMPLES  # noqa: F401  (tests/ is on the path)

SPEC = (EXAMPLES / "attention.zyn").read_text()

# The spec's body without a mask, scores multiplied by a constant.
UNMASKED = """
let attn = compute(Q, K, V) {
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var max_score = -inf
        for j in 0..keys:
            let score = dot(Q[b, h, i], K[b, h, j]) * 0.125
            max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..keys:
            let score = dot(Q[b, h, i], K[b, h, j]) * 0.125
            sum_exp += exp(score - max_score)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..keys:
                let score = dot(Q[b, h, i], K[b, h, j]) * 0.125
                acc += exp(score - max_score) / sum_exp * V[b, h, j, d]
            out[b, h, i, d] = acc
}
"""


def linalg_text(source, **inputs):
    return str(zynml.compile(source, device="cpu").stage_module(inputs, "linalg"))


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 17, 5), (1, 2, 131, 64)])
def test_spec_attention_is_raised_and_matches_numpy(rng, shape):
    q, k, v = (f32(rng, *shape) for _ in range(3))
    mask = rng.random(shape[2:3] * 2) < 0.7
    mask[0, :] = False  # a row with no allowed key gives zeros
    text = linalg_text(SPEC, Q=q, K=k, V=v, mask=mask)
    assert 'library_call = "zynml_attention_out"' in text
    assert "scf.for" not in text  # no element-by-element loops left
    out = zynml.run(SPEC, device="cpu", Q=q, K=k, V=v, mask=mask)["attn"]
    assert_close(out, reference(q, k, v, mask))


def test_unmasked_attention_with_keys_unlike_queries(rng):
    q, k, v = f32(rng, 2, 3, 7, 8), f32(rng, 2, 3, 11, 8), f32(rng, 2, 3, 11, 5)
    assert "zynml_attention_out" in linalg_text(UNMASKED, Q=q, K=k, V=v)
    out = zynml.run(UNMASKED, device="cpu", Q=q, K=k, V=v)["attn"]
    assert_close(out, reference(q, k, v, scale=0.125))


def test_f16_attention_accumulates_in_f32(rng):
    q, k, v = ((f32(rng, 1, 2, 19, 8) * 0.5).astype(np.float16) for _ in range(3))
    out = zynml.run(UNMASKED, device="cpu", Q=q, K=k, V=v)["attn"]
    assert out.dtype == np.float16
    assert_close(out, reference(q, k, v, scale=0.125), rtol=1e-2)


def _literal(q, k, v, sum_scale=0.125, sum_factor=1.0, values=lambda v: v):
    """A changed body, evaluated as written in float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2)
    m = (s * 0.125).max(-1, keepdims=True)
    total = sum_factor * np.exp(s * sum_scale - m).sum(-1, keepdims=True)
    return (np.exp(s * 0.125 - m) / total) @ values(v)


@pytest.mark.parametrize("change,expected", [
    (("sum_exp += exp(score - max_score)", "sum_exp += exp(score - max_score) * 2.0"),
     lambda q, k, v: _literal(q, k, v, sum_factor=2.0)),
    (("* V[b, h, j, d]", "* V[b, h, j, d] * V[b, h, j, d]"),
     lambda q, k, v: _literal(q, k, v, values=lambda v: v * v)),
    # a different score in one of the three loops
    (("            let score = dot(Q[b, h, i], K[b, h, j]) * 0.125\n            sum_exp",
      "            let score = dot(Q[b, h, i], K[b, h, j]) * 0.25\n            sum_exp"),
     lambda q, k, v: _literal(q, k, v, sum_scale=0.25)),
])
def test_bodies_that_are_not_attention_are_lowered_as_written(rng, change, expected):
    source = UNMASKED.replace(*change)
    assert source != UNMASKED
    q, k, v = f32(rng, 1, 2, 5, 3), f32(rng, 1, 2, 6, 3), f32(rng, 1, 2, 6, 3)
    assert "zynml_attention" not in linalg_text(source, Q=q, K=k, V=v)
    assert_close(zynml.run(source, device="cpu", Q=q, K=k, V=v)["attn"], expected(q, k, v))


FLASH = (EXAMPLES / "flash_attention.zyn").read_text()


@pytest.mark.parametrize("shape", [(1, 1, 1, 3), (1, 2, 70, 5), (2, 1, 131, 16)])
def test_spec_flash_attention_is_raised_and_matches_numpy(rng, shape):
    """The tile form, rewritten per point, is an online softmax over key blocks: raised
    too (partial last blocks included)."""
    q, k, v = (f32(rng, *shape) for _ in range(3))
    assert "zynml_attention_out" in linalg_text(FLASH, Q=q, K=k, V=v)
    assert_close(zynml.run(FLASH, device="cpu", Q=q, K=k, V=v)["attn"], reference(q, k, v))

