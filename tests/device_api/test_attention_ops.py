"""Device's attention and loss operations (the specification's packed layout) on the CPU
against float64 numpy: causal_attention (GQA), kv_attention (decode and prefill over a
cache), causal_attention_backward, cross_entropy_forward_backward; and their errors."""
from __future__ import annotations

import numpy as np
import pytest

import zynml
from zynml import DeviceAPIError

from kernels.references import allowed, attention, attention_backward, cross_entropy


def _unpack(x, heads):  # [seq, heads * d] -> [1, heads, seq, d]
    seq, width = x.shape
    return x.reshape(seq, heads, width // heads).transpose(1, 0, 2)[None]


def _pack(x):  # [1, heads, seq, d] -> [seq, heads * d]
    return x[0].transpose(1, 0, 2).reshape(x.shape[2], -1)


@pytest.fixture(scope="module")
def dev():
    return zynml.Device("cpu")


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("seq, heads, kv_heads, d", [(1, 1, 1, 8), (7, 3, 1, 8), (13, 4, 2, 16)])
def test_causal_attention_and_backward(dev, rng, seq, heads, kv_heads, d):
    q, k, v = _rand(rng, seq, heads * d), _rand(rng, seq, kv_heads * d), _rand(rng, seq, kv_heads * d)
    keep = allowed(seq, seq, causal=True)
    want = _pack(attention(_unpack(q, heads), _unpack(k, kv_heads), _unpack(v, kv_heads), keep))
    got = dev.causal_attention(q, k, v, seq, heads, kv_heads, d)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    dout = _rand(rng, seq, heads * d)
    refs = attention_backward(_unpack(dout, heads), _unpack(q, heads), _unpack(k, kv_heads),
                              _unpack(v, kv_heads), keep)
    grads = dev.causal_attention_backward(dout, q, k, v, seq, heads, kv_heads, d)
    for g, r in zip(grads, refs):
        np.testing.assert_allclose(g, _pack(r), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("cache_start, q_len", [(0, 1), (6, 1), (5, 3)])
def test_kv_attention_decode_and_prefill(dev, rng, cache_start, q_len):
    heads, kv_heads, d, rows = 4, 2, 8, 11
    q = _rand(rng, q_len, heads * d)
    k, v = _rand(rng, rows, kv_heads * d), _rand(rng, rows, kv_heads * d)
    keep = np.arange(rows)[None, :] <= cache_start + np.arange(q_len)[:, None]
    want = _pack(attention(_unpack(q, heads), _unpack(k, kv_heads), _unpack(v, kv_heads), keep))
    got = dev.kv_attention(q, k, v, cache_start, q_len, heads, kv_heads, d)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_cross_entropy_forward_backward_skips_pad(dev, rng):
    logits = 3 * _rand(rng, 13, 37)
    targets = rng.integers(0, 37, 13).astype(np.int32)
    targets[[2, 5]] = 0
    loss, grad = dev.cross_entropy_forward_backward(logits, targets, 13, 37, pad_id=0)
    want_loss, want_grad = cross_entropy(logits, targets, pad_id=0)
    assert float(loss) == pytest.approx(want_loss, rel=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)
    assert not np.asarray(grad)[[2, 5]].any()


def test_attention_errors_name_operation_and_argument(dev, rng):
    q, k = _rand(rng, 5, 12), _rand(rng, 5, 8)
    with pytest.raises(DeviceAPIError, match="causal_attention.*'n_kv_heads'"):
        dev.causal_attention(q, k, k, n_heads=3, n_kv_heads=2)
    cache = _rand(rng, 5, 4)
    with pytest.raises(DeviceAPIError, match="kv_attention.*'k_cache'.*fewer than"):
        dev.kv_attention(q, cache, cache, cache_start=3, n_heads=3, n_kv_heads=1)
    with pytest.raises(DeviceAPIError, match="kv_attention.*'v_cache'.*shape"):
        dev.kv_attention(q, cache, _rand(rng, 4, 4), cache_start=0, n_heads=3, n_kv_heads=1)
    with pytest.raises(DeviceAPIError, match="causal_attention.*'head_dim'"):
        dev.causal_attention(q, q, q, n_heads=3, head_dim=5)
