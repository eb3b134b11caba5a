"""Decode attention on the native CUDA backend (marked `gpu`: CI skips these; they run on
the device machine after tools/gpu_tests.sh compile): a run-time causal offset
(`j <= i + cache_start`), grouped-query attention (K and V at head h / group) and the
online softmax per element, on the flash kernels (wgmma on sm_90a, tensor cores on
sm_80, SIMT for f32), against float64 numpy on fresh random inputs. Sizes and integer
inputs are fixed, and every artifact is compiled before the first launch (the device
machine compiles nothing: its cache comes from here)."""
import ml_dtypes
import numpy as np
import pytest

import zynml
from conftest import assert_close, causal, decode_attention, grouped_reference, \
    online_attention

pytestmark = pytest.mark.gpu

HEADS = 8
OFFSETS = (0, 1, 37, -3)


def inputs(rng, rows, keys, d, group, dtype, batch=2):
    q = rng.standard_normal((batch, HEADS, rows, d)) * 0.5
    k, v = (rng.standard_normal((batch, HEADS // group, keys, d)) * 0.5 for _ in range(2))
    return [a.astype(dtype) for a in (q, k, v)]


@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("rows,keys,d,dtype,target", [
    # a decode step (1-8 rows a KV head): attention_decode_mma, one part, no merge
    (1, 61, 64, np.float16, None),
    (7, 61, 128, np.float16, None),     # 7 rows: the mma kernel; 14 and more: wgmma
    (61, 133, 64, np.float16, None),    # several key tiles, a partial last one
    # mma.sync: attention_decode_mma at 7 and 14 rows, attention_tensor_core above
    (7, 61, 64, np.float16, "sm_80"),
    (7, 61, 8, np.float32, None),       # SIMT
    (61, 67, 64, np.float32, None),
])
def test_decode_attention_matches_numpy(rng, group, rows, keys, d, dtype, target):
    prog = zynml.compile(decode_attention(str(group)), device="cuda", target=target)
    q, k, v = inputs(rng, rows, keys, d, group, dtype)
    for offset in OFFSETS:  # every artifact before the first launch
        prog.artifact(Q=q, K=k, V=v, cache_start=np.int64(offset))
    rtol = 1e-2 if dtype == np.float16 else 1e-5
    for offset in OFFSETS:
        out = np.asarray(prog(Q=q, K=k, V=v, cache_start=np.int64(offset))["attn"])
        assert_close(out, grouped_reference(q, k, v, causal(rows, keys, offset)), rtol=rtol)
        if offset < 0:  # rows that see no key give 0
            assert not out[:, :, :-offset].any()


@pytest.mark.parametrize("group,rows,d,dtype,batch,params", [
    # attention_decode_mma (f16 / bf16, head dims 64 and 128)
    (1, 1, 64, np.float16, 1, ""),           # multi-head attention, a decode step
    (4, 1, 128, np.float16, 3, ""),          # grouped-query
    (8, 1, 64, ml_dtypes.bfloat16, 2, ""),
    (4, 2, 64, np.float16, 1, ""),           # a prefill of 2 tokens: 8 rows a KV head
    (4, 3, 64, ml_dtypes.bfloat16, 2, ""),   # 12 rows: the mma's rows g + 8 too
    # 16 rows of d 128: 8 warps' states would need 66 KB of shared memory (48 KB):
    # attention_wgmma takes them
    (8, 2, 128, np.float16, 1, ""),
    (4, 1, 128, np.float16, 2, "attention_decode_mma.unroll=2;attention_decode_mma.warps=2"),
    # attention_decode (FMAs)
    (2, 3, 8, np.float32, 2, ""),            # 2 lanes a key, 16 keys a warp
    (4, 1, 128, np.float32, 1, ""),
    (1, 1, 32, np.float16, 2, ""),           # 32 = 4 x 8: 4 lanes a key
    (4, 1, 128, np.float16, 2, "attention_decode_mma.max_rows=0"),  # 16 lanes a key
])
def test_keys_split_over_blocks_match_numpy(rng, group, rows, d, dtype, batch, params):
    """attention_decode(_mma): a few query rows per KV head over a cache of 1031 keys,
    split into parts that later kernels merge. Offsets: the first key only, a split that
    does not fall on a part's edge, every key, past the cache, and rows that see no key
    (their output is 0)."""
    keys = 1031
    prog = zynml.compile(decode_attention(str(group)), device="cuda", params=params)
    q, k, v = inputs(rng, rows, keys, d, group, dtype, batch)
    offsets = (0, 517, keys - rows, keys + 50, -2)
    for offset in offsets:
        prog.artifact(Q=q, K=k, V=v, cache_start=np.int64(offset))
    rtol = 1e-5 if dtype == np.float32 else 1e-2
    for offset in offsets:
        out = prog(Q=q, K=k, V=v, cache_start=np.int64(offset))["attn"]
        out = np.asarray(out).astype(np.float64)
        expected = grouped_reference(*(a.astype(np.float64) for a in (q, k, v)),
                                     causal(rows, keys, offset))
        assert_close(out, expected, rtol=rtol)
        if offset < 0:
            assert not out[:, :, :-offset].any()
            assert out[:, :, -offset:].all()


def test_decode_loop_over_a_fixed_cache(rng):
    """The benchmark's loop, small: one query token per step against a preallocated
    cache of 131 keys, cache_start = the step; keys past it are masked."""
    prog = zynml.compile(decode_attention("4"), device="cuda")
    q, k, v = inputs(rng, 1, 131, 128, 4, np.float16)
    steps = (0, 1, 63, 64, 65, 130)
    for step in steps:
        prog.artifact(Q=q, K=k, V=v, cache_start=np.int64(step))
    for step in steps:
        out = prog(Q=q, K=k, V=v, cache_start=np.int64(step))["attn"]
        expected = grouped_reference(q, k[:, :, :step + 1], v[:, :, :step + 1])
        assert_close(out, expected, rtol=1e-2)


@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("rows,keys,d,dtype", [(7, 61, 64, np.float16),
                                               (7, 61, 8, np.float32)])
def test_online_softmax_matches_numpy(rng, group, rows, keys, d, dtype):
    prog = zynml.compile(online_attention(str(group)), device="cuda")
    q, k, v = inputs(rng, rows, keys, d, group, dtype)
    prog.artifact(Q=q, K=k, V=v)
    out = prog(Q=q, K=k, V=v)["attn"]
    assert_close(out, grouped_reference(q, k, v), rtol=1e-2 if dtype == np.float16 else 1e-5)


RUN_TIME_GROUP = decode_attention("g", inputs="Q, K, V, cache_start, g")


@pytest.mark.parametrize("rows,keys,d,dtype,target", [
    (33, 133, 64, np.float16, None),    # wgmma, several key tiles, a partial last one
    (7, 61, 128, np.float16, None),
    (33, 67, 64, np.float16, "sm_80"),  # the SIMT flash kernel (run-time heads)
    (7, 61, 8, np.float32, None),
])
def test_run_time_group_matches_numpy(rng, rows, keys, d, dtype, target):
    """`h / g` with g an input, K's and V's heads run-time sizes: one compile serves
    groups 1, 2, 4 and 8 and every offset."""
    prog = zynml.compile(RUN_TIME_GROUP, device="cuda", target=target,
                         dynamic=["K.shape[1]", "V.shape[1]"])
    cases = [(group, inputs(rng, rows, keys, d, group, dtype)) for group in (1, 2, 4, 8)]
    for group, (q, k, v) in cases:  # the artifact before the first launch
        prog.artifact(Q=q, K=k, V=v, cache_start=np.int64(5), g=np.int64(group))
    rtol = 1e-2 if dtype == np.float16 else 1e-5
    for group, (q, k, v) in cases:
        for offset in (0, 37, -3):
            out = prog(Q=q, K=k, V=v, cache_start=np.int64(offset), g=np.int64(group))["attn"]
            assert_close(out, grouped_reference(q, k, v, causal(rows, keys, offset)), rtol=rtol)
    assert prog.stats().specializations == 1  # one executable (compiled, or from disk)


def test_run_time_group_of_query_heads_that_do_not_divide(rng):
    """5 query heads over 2 key heads with g = 3 (head h reads h floordiv 3), f16 on
    wgmma: as the loops read them."""
    prog = zynml.compile(RUN_TIME_GROUP, device="cuda")
    q = (rng.standard_normal((2, 5, 33, 64)) * 0.5).astype(np.float16)
    k, v = ((rng.standard_normal((2, 2, 61, 64)) * 0.5).astype(np.float16) for _ in range(2))
    values = dict(Q=q, K=k, V=v, cache_start=np.int64(1), g=np.int64(3))
    prog.artifact(**values)
    heads = np.arange(5) // 3
    expected = grouped_reference(q, k[:, heads], v[:, heads], causal(33, 61, 1))
    assert_close(prog(**values)["attn"], expected, rtol=1e-2)


@pytest.mark.parametrize("dtype,d", [(np.float16, 128), (np.float32, 64)])
def test_run_time_group_of_a_decode_step(rng, dtype, d):
    """One query row, 32 query heads over 8 key heads, the group an input: g = 4 runs
    the decode kernels built for it, g = 5 (query head h reads key head h // 5, 0 to 6)
    the flash kernel, from one artifact; both against numpy."""
    prog = zynml.compile(RUN_TIME_GROUP, device="cuda")
    q = (rng.standard_normal((2, 32, 1, d)) * 0.5).astype(dtype)
    k, v = ((rng.standard_normal((2, 8, 257, d)) * 0.5).astype(dtype) for _ in range(2))
    prog.artifact(Q=q, K=k, V=v, cache_start=np.int64(200), g=np.int64(4))
    rtol = 1e-2 if dtype == np.float16 else 1e-5
    for group in (4, 5):
        out = prog(Q=q, K=k, V=v, cache_start=np.int64(200), g=np.int64(group))["attn"]
        heads = np.arange(32) // group
        expected = grouped_reference(q, k[:, heads], v[:, heads], causal(1, 257, 200))
        assert_close(out, expected, rtol=rtol)
    assert prog.stats().specializations == 1
