"""The decode-step kernels of zynml/kernels/decode.py on the CPU, against float64 numpy:
RoPE with the KV-cache write at a run-time position (a number or a 0-d array updated in
place: one compile), the write without RoPE and GPT-2's input rows at a position,
RMSNorm into a given array (f32 and bf16), the greedy argmax, and
kv_attention with a 0-d cache_start."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import zynml.kernels as K
from zynml.errors import ZynMLError

from conftest import assert_close, attention_reference


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * sin


def _tables(rng, positions, d):
    angles = rng.uniform(-3, 3, (positions, d // 2))
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def test_rope_kv_cache_rotates_q_and_writes_the_caches_at_pos(rng):
    batch, heads, kv_heads, positions, d = 3, 8, 2, 11, 6
    qkv = rng.standard_normal((batch, (heads + 2 * kv_heads) * d)).astype(np.float32)
    cos, sin = _tables(rng, positions, d)
    k_cache = rng.standard_normal((batch, kv_heads, positions, d)).astype(np.float32)
    v_cache = rng.standard_normal((batch, kv_heads, positions, d)).astype(np.float32)
    k_before, v_before = k_cache.copy(), v_cache.copy()
    pos = np.array(0, np.int64)
    program = K.program("rope_kv_cache", "cpu")
    before = program.stats().specializations
    x = qkv.astype(np.float64)
    q = x[:, :heads * d].reshape(batch, heads, 1, d)
    k = x[:, heads * d:(heads + kv_heads) * d].reshape(batch, kv_heads, d)
    v = x[:, (heads + kv_heads) * d:].reshape(batch, kv_heads, d)
    for p in (5, 0, 10, 5):  # a position written again is overwritten, not added to
        pos[()] = p  # in place, as between graph replays
        got = K.rope_kv_cache(qkv, cos, sin, pos, k_cache, v_cache, heads=heads, device="cpu")
        assert_close(got, _rope(q, cos[p], sin[p]))
        assert_close(k_cache[:, :, p], _rope(k, cos[p], sin[p]))
        np.testing.assert_array_equal(v_cache[:, :, p], v)
    untouched = [p for p in range(positions) if p not in (5, 0, 10)]
    np.testing.assert_array_equal(k_cache[:, :, untouched], k_before[:, :, untouched])
    np.testing.assert_array_equal(v_cache[:, :, untouched], v_before[:, :, untouched])
    got = K.rope_kv_cache(qkv, cos, sin, 7, k_cache, v_cache, heads=heads, device="cpu")
    assert_close(got, _rope(q, cos[7], sin[7]))
    assert program.stats().specializations - before == 1


def test_rope_kv_cache_errors(rng):
    cache = np.zeros((1, 2, 5, 4), np.float32)
    cos = np.ones((5, 4), np.float32)
    qkv = np.ones((1, 24), np.float32)
    with pytest.raises(ZynMLError, match="position 5 is outside the cache's 5 positions"):
        K.rope_kv_cache(qkv, cos, cos, 5, cache, cache.copy(), heads=2, device="cpu")
    with pytest.raises(ZynMLError, match=r"qkv \(1, 24\) is not \[batch"):
        K.rope_kv_cache(qkv, cos, cos, 0, cache, cache.copy(), heads=3, device="cpu")
    with pytest.raises(ZynMLError, match=r"sin \(5, 2\) is not \[positions"):
        K.rope_kv_cache(qkv, cos, cos[:, :2], 0, cache, cache.copy(), heads=2, device="cpu")
    with pytest.raises(ZynMLError, match="0-d integer array, got float32"):
        K.rope_kv_cache(qkv, cos, cos, np.array(1.0, np.float32), cache, cache.copy(),
                        heads=2, device="cpu")


def test_kv_cache_write_splits_q_and_writes_the_caches_at_pos(rng):
    batch, heads, positions, d = 3, 5, 7, 6
    qkv = rng.standard_normal((batch, 3 * heads * d)).astype(np.float32)
    k_cache = rng.standard_normal((batch, heads, positions, d)).astype(np.float32)
    v_cache = rng.standard_normal((batch, heads, positions, d)).astype(np.float32)
    k_before, v_before = k_cache.copy(), v_cache.copy()
    parts = qkv.reshape(batch, 3, heads, d)
    pos = np.array(0, np.int64)
    for p in (6, 0, 3, 6):  # a position written again is overwritten, not added to
        pos[()] = p  # in place, as between graph replays
        q = K.kv_cache_write(qkv, pos, k_cache, v_cache, device="cpu")
        np.testing.assert_array_equal(q, parts[:, 0, :, None, :])
        np.testing.assert_array_equal(k_cache[:, :, p], parts[:, 1])
        np.testing.assert_array_equal(v_cache[:, :, p], parts[:, 2])
    untouched = [p for p in range(positions) if p not in (6, 0, 3)]
    np.testing.assert_array_equal(k_cache[:, :, untouched], k_before[:, :, untouched])
    np.testing.assert_array_equal(v_cache[:, :, untouched], v_before[:, :, untouched])
    with pytest.raises(ZynMLError, match="position 7 is outside the cache's 7 positions"):
        K.kv_cache_write(qkv, 7, k_cache, v_cache, device="cpu")
    with pytest.raises(ZynMLError, match=r"qkv \(3, 90\) is not \[batch, 3 \* heads"):
        K.kv_cache_write(qkv, 1, k_cache[:, :4], v_cache[:, :4], device="cpu")


def test_decode_embedding_adds_the_row_of_pos(rng):
    wte = rng.standard_normal((37, 11)).astype(np.float32)
    wpe = rng.standard_normal((13, 11)).astype(np.float32)
    tokens = np.array([36, 0, 5], np.int64)
    for pos in (0, 12, np.array(4, np.int64)):
        got = K.decode_embedding(wte, wpe, tokens, pos, device="cpu")
        assert_close(got, wte[tokens].astype(np.float64) + wpe[int(pos)], rtol=1e-6)
    with pytest.raises(ZynMLError, match="position 13 is outside"):
        K.decode_embedding(wte, wpe, tokens, 13, device="cpu")
    with pytest.raises(ZynMLError, match=r"tokens \[batch\] expected"):
        K.decode_embedding(wte, wpe, tokens[:, None], 0, device="cpu")


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_rms_norm_into_computes_in_f32_and_writes_y(rng, dtype):
    rows, dim = 5, 37
    x = rng.standard_normal((rows, dim)).astype(dtype)
    w = rng.standard_normal(dim).astype(dtype)
    y = np.zeros((rows, dim), dtype)
    assert K.rms_norm_into(y, x, w, 1e-5, device="cpu") is y
    xf = x.astype(np.float64)
    want = xf / np.sqrt((xf ** 2).mean(axis=1, keepdims=True) + 1e-5) * w.astype(np.float64)
    assert y.dtype == np.dtype(dtype)
    assert_close(y, want, rtol=1e-5 if dtype == np.float32 else 8e-3)
    with pytest.raises(ZynMLError, match="must be"):
        K.rms_norm_into(y[:2], x, w, device="cpu")


def test_argmax_rows_takes_the_first_largest(rng):
    x = rng.standard_normal((7, 53)).astype(np.float32)
    x[2, 40] = x[2, 3] = 50.0  # a tie: the first
    got = K.argmax_rows(x, device="cpu")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, x.argmax(axis=1))
    with pytest.raises(ZynMLError, match="cols > 0"):
        K.argmax_rows(np.zeros((3, 0), np.float32), device="cpu")


def test_kv_attention_reads_a_0d_cache_start_in_place(rng):
    batch, heads, kv_heads, positions, d = 2, 8, 2, 9, 6
    q = rng.standard_normal((batch, heads, 1, d)).astype(np.float32)
    k, v = (rng.standard_normal((batch, kv_heads, positions, d)).astype(np.float32)
            for _ in range(2))
    start = np.array(0, np.int64)
    kr, vr = (np.repeat(a, heads // kv_heads, axis=1) for a in (k, v))
    for s in (3, 8, 0):
        start[()] = s
        got = K.kv_attention(q, k, v, start, device="cpu")
        mask = np.arange(positions)[None, :] <= s
        assert_close(got, attention_reference(q, kr, vr, mask), rtol=1e-5)
    start[()] = 9
    with pytest.raises(ZynMLError, match="cache_start 9 \\+ q_len 1 exceeds"):
        K.kv_attention(q, k, v, start, device="cpu")
    with pytest.raises(ZynMLError, match="0-d integer array"):
        K.kv_attention(q, k, v, np.array([1]), device="cpu")


@pytest.mark.xfail(strict=True, raises=ZynMLError,
                   reason="IREE 3.13 fails to tile the scores of GQA with 3 query heads per KV "
                          "head at batch 3 ('linalg.generic' op failed to tile operation); "
                          "2 and 4 per KV head compile. Should run like the others.")
def test_kv_attention_3_heads_per_kv_head_at_batch_3_on_the_cpu(rng):
    q = rng.standard_normal((3, 6, 1, 8)).astype(np.float32)
    k = rng.standard_normal((3, 2, 19, 8)).astype(np.float32)
    got = K.kv_attention(q, k, k, 3, device="cpu")
    mask = np.arange(19)[None, :] <= 3
    kr = np.repeat(k, 3, axis=1)
    assert_close(got, attention_reference(q, kr, kr, mask), rtol=1e-5)
