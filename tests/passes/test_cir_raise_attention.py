"""cir-raise-attention: which bodies become cir.attention, and that the raised program
computes what the body says (CPU, against float64 numpy on fresh random inputs)."""
import numpy as np
import pytest

import zynml
from conftest import assert_close, attention_reference as reference, causal

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



# ---------------------------------------------------------------- causal

# UNMASKED with its three key loops under conditions (COND0, COND1, COND2).
CONDITIONED = """
let attn = compute(INPUTS) {
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var max_score = -inf
        for j in 0..keys:
            if COND0:
                let score = dot(Q[b, h, i], K[b, h, j]) * 0.125
                max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..keys:
            if COND1:
                let score = dot(Q[b, h, i], K[b, h, j]) * 0.125
                sum_exp += exp(score - max_score)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..keys:
                if COND2:
                    let score = dot(Q[b, h, i], K[b, h, j]) * 0.125
                    acc += exp(score - max_score) / sum_exp * V[b, h, j, d]
            out[b, h, i, d] = acc
}
"""


def _conditioned(*conditions: str, inputs: str = "Q, K, V") -> str:
    """CONDITIONED with one condition in the three loops, or one each."""
    conditions = conditions * 3 if len(conditions) == 1 else conditions
    source = CONDITIONED.replace("INPUTS", inputs)
    for n, condition in enumerate(conditions):
        source = source.replace(f"COND{n}", condition)
    return source


@pytest.mark.parametrize("condition,offset", [
    ("j <= i", 0), ("j < i + 1", 0), ("i >= j", 0), ("i + 1 > j", 0),
    ("j <= i + 3", 3),  # a KV cache of 3 earlier keys
    ("j < i - 1", -2),  # the first two rows see no key: 0
])
def test_causal_spellings_are_raised(rng, condition, offset):
    source = _conditioned(condition)
    q, k, v = f32(rng, 1, 2, 11, 4), f32(rng, 1, 2, 13, 4), f32(rng, 1, 2, 13, 3)
    text = linalg_text(source, Q=q, K=k, V=v)
    assert f"zynml.causal_offset = {offset} : i64" in text and "scf.for" not in text
    out = zynml.run(source, device="cpu", Q=q, K=k, V=v)["attn"]
    assert_close(out, reference(q, k, v, causal(11, 13, offset), scale=0.125))


CAUSAL_SHAPES = [((1, 1, 1, 1), 1), ((2, 3, 17, 5), 17), ((1, 2, 131, 64), 131),
                 ((1, 3, 7, 8), 19)]  # (Q's shape, keys): more keys than queries last


@pytest.mark.parametrize("shape,keys", CAUSAL_SHAPES)
def test_causal_attention_matches_numpy(rng, shape, keys):
    source = _conditioned("j <= i")
    q = f32(rng, *shape)
    k, v = f32(rng, *shape[:2], keys, shape[3]), f32(rng, *shape[:2], keys, 3)
    out = zynml.run(source, device="cpu", Q=q, K=k, V=v)["attn"]
    assert_close(out, reference(q, k, v, causal(shape[2], keys), scale=0.125))


@pytest.mark.parametrize("shape,keys", CAUSAL_SHAPES)
def test_causal_and_masked_attention_matches_numpy(rng, shape, keys):
    source = _conditioned("j <= i and mask[i, j]", inputs="Q, K, V, mask")
    q = f32(rng, *shape)
    k, v = f32(rng, *shape[:2], keys, shape[3]), f32(rng, *shape[:2], keys, 3)
    mask = rng.random((shape[2], keys)) < 0.7
    mask[0, :] = False  # a row with no allowed key gives zeros
    text = linalg_text(source, Q=q, K=k, V=v, mask=mask)
    assert "zynml.causal_offset = 0 : i64" in text and "scf.for" not in text
    out = zynml.run(source, device="cpu", Q=q, K=k, V=v, mask=mask)["attn"]
    assert_close(out, reference(q, k, v, causal(shape[2], keys) & mask, scale=0.125))


def test_mask_and_causal_in_the_other_order_is_raised(rng):
    source = _conditioned("mask[i, j] and j <= i + 2", inputs="Q, K, V, mask")
    q, k, v = f32(rng, 1, 2, 9, 4), f32(rng, 1, 2, 9, 4), f32(rng, 1, 2, 9, 4)
    mask = rng.random((9, 9)) < 0.7
    assert "zynml.causal_offset = 2 : i64" in linalg_text(source, Q=q, K=k, V=v, mask=mask)
    out = zynml.run(source, device="cpu", Q=q, K=k, V=v, mask=mask)["attn"]
    assert_close(out, reference(q, k, v, causal(9, 9, 2) & mask, scale=0.125))


def test_f16_causal_attention(rng):
    source = _conditioned("j <= i")
    q, k, v = ((f32(rng, 1, 2, 37, 16) * 0.5).astype(np.float16) for _ in range(3))
    out = zynml.run(source, device="cpu", Q=q, K=k, V=v)["attn"]
    assert out.dtype == np.float16
    assert_close(out, reference(q, k, v, causal(37, 37), scale=0.125), rtol=1e-2)


@pytest.mark.parametrize("conditions", [
    ("j <= i", "j < i + 1", "j <= i"),   # the same keys, spelled differently in one loop
    ("j <= i", "j <= i + 1", "j <= i"),  # another offset in one loop
    ("j >= i", "j >= i", "j >= i"),      # keys after the query: not causal
    ("j <= i - n", "j <= i - n", "j <= i - n"),  # an input subtracted (`j <= i + n`, a
    # run-time offset, is raised: test_cir_raise_attention_decode.py)
])
def test_other_conditions_are_lowered_as_written(rng, conditions):
    source = _conditioned(*conditions, inputs="Q, K, V, n")
    q, k, v = f32(rng, 1, 2, 5, 3), f32(rng, 1, 2, 6, 3), f32(rng, 1, 2, 6, 3)
    n = np.int64(1)
    assert "zynml_attention" not in linalg_text(source, Q=q, K=k, V=v, n=n)
    # as written: each loop's own condition (j, i) -> allowed
    allowed = [_literal_condition(c, 5, 6) for c in conditions]
    out = zynml.run(source, device="cpu", Q=q, K=k, V=v, n=n)["attn"]
    assert_close(out, _conditioned_literal(q, k, v, *allowed))


# What the conditions above allow, with n = 1 (the scalar input the tests pass).
_ALLOWED = {"j <= i": lambda i, j: j <= i, "j < i + 1": lambda i, j: j < i + 1,
            "j <= i + 1": lambda i, j: j <= i + 1, "j >= i": lambda i, j: j >= i,
            "j <= i - n": lambda i, j: j <= i - 1}


def _literal_condition(condition: str, rows: int, keys: int) -> np.ndarray:
    return _ALLOWED[condition](np.arange(rows)[:, None], np.arange(keys)[None, :])


def _conditioned_literal(q, k, v, max_allowed, sum_allowed, out_allowed):
    """The three loops evaluated as written in float64, each under its own condition."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * 0.125
    m = np.where(max_allowed, s, -np.inf).max(-1, keepdims=True)
    total = np.where(sum_allowed, np.exp(s - m), 0).sum(-1, keepdims=True)
    return np.where(out_allowed, np.exp(s - m) / total, 0) @ v
