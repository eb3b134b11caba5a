"""cir-raise-attention on decode attention (CPU, IREE): a causal offset that is an integer
input (`j <= i + cache_start`), grouped-query attention (K and V read at head h / group)
and the online softmax written per element each become one cir.attention, and compute
what the body says (against float64 numpy on fresh random inputs)."""
import numpy as np
import pytest

import zynml
from conftest import assert_close, causal, decode_attention, grouped_reference, \
    online_attention

HEADS = 8
SHAPES = [(1, 61, 8), (7, 61, 64), (61, 67, 8)]  # (queries, keys, head dim)
OFFSETS = (0, 1, 37)


def inputs(rng, rows, keys, d, group, dtype=np.float32, batch=1):
    q = rng.standard_normal((batch, HEADS, rows, d))
    k, v = (rng.standard_normal((batch, HEADS // group, keys, d)) for _ in range(2))
    return [a.astype(dtype) for a in (q, k, v)]


def linalg_text(prog, **values):
    return str(prog.stage_module(values, "linalg"))


@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("rows,keys,d", SHAPES)
def test_run_time_offset_and_groups_match_numpy(rng, group, rows, keys, d):
    """One cir.attention whatever cache_start's value (the IR does not depend on it: the
    offset is read at run time), K and V read through `h floordiv group`."""
    prog = zynml.compile(decode_attention(str(group)), device="cpu")
    q, k, v = inputs(rng, rows, keys, d, group)
    text = linalg_text(prog, Q=q, K=k, V=v, cache_start=np.int64(1))
    assert text.count('library_call = "zynml_attention_out"') == 1 and "scf.for" not in text
    assert "zynml.runtime_offset" in text
    assert (f"floordiv {group}" in text) == (group > 1)
    assert linalg_text(prog, Q=q, K=k, V=v, cache_start=np.int64(37)) == text
    for offset in OFFSETS:
        out = prog(Q=q, K=k, V=v, cache_start=np.int64(offset))["attn"]
        assert_close(out, grouped_reference(q, k, v, causal(rows, keys, offset)))


def test_negative_run_time_offset_leaves_rows_without_keys(rng):
    """cache_start = -3: the first three rows see no key and give 0, as the loops do."""
    prog = zynml.compile(decode_attention("2"), device="cpu")
    q, k, v = inputs(rng, 7, 11, 8, 2)
    out = prog(Q=q, K=k, V=v, cache_start=np.int64(-3))["attn"]
    assert_close(out, grouped_reference(q, k, v, causal(7, 11, -3)))
    assert not np.asarray(out)[:, :, :3].any()


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("rows,keys,d", [(1, 61, 64), (7, 61, 8)])
def test_f16_decode_attention(rng, group, rows, keys, d):
    prog = zynml.compile(decode_attention(str(group)), device="cpu")
    q, k, v = inputs(rng, rows, keys, d, group, np.float16)
    for offset in OFFSETS:
        out = prog(Q=q, K=k, V=v, cache_start=np.int64(offset))["attn"]
        assert out.dtype == np.float16
        assert_close(out, grouped_reference(q, k, v, causal(rows, keys, offset)), rtol=1e-2)


@pytest.mark.parametrize("condition,offset", [
    ("j < i + cache_start", -1), ("i + cache_start >= j", 0),
    ("j <= cache_start + i - 2", -2), ("j - cache_start <= i + 1", 1),
])
def test_run_time_offset_spellings(rng, condition, offset):
    """Other linear forms with the input: causal_offset holds their constant part."""
    prog = zynml.compile(decode_attention("2", condition), device="cpu")
    q, k, v = inputs(rng, 7, 13, 8, 2)
    text = linalg_text(prog, Q=q, K=k, V=v, cache_start=np.int64(5))
    assert f"zynml.causal_offset = {offset} : i64, zynml.runtime_offset" in text
    out = prog(Q=q, K=k, V=v, cache_start=np.int64(5))["attn"]
    assert_close(out, grouped_reference(q, k, v, causal(7, 13, 5 + offset)))


@pytest.mark.parametrize("condition,allowed", [
    ("j <= i + 2 * cache_start", lambda i, j, n: j <= i + 2 * n),
    ("j <= i - cache_start", lambda i, j, n: j <= i - n),
    ("j >= i + cache_start", lambda i, j, n: j >= i + n),
])
def test_other_offsets_are_lowered_as_written(rng, condition, allowed):
    """Not `j <= i + c + cache_start`: the body runs as written, and still right."""
    prog = zynml.compile(decode_attention("2", condition), device="cpu")
    q, k, v = inputs(rng, 5, 9, 4, 2)
    assert "zynml_attention" not in linalg_text(prog, Q=q, K=k, V=v, cache_start=np.int64(2))
    mask = allowed(np.arange(5)[:, None], np.arange(9)[None, :], 2)
    out = prog(Q=q, K=k, V=v, cache_start=np.int64(2))["attn"]
    assert_close(out, grouped_reference(q, k, v, mask))


RUN_TIME_GROUP = decode_attention("g", inputs="Q, K, V, cache_start, g")


def test_run_time_group_is_one_attention_for_every_group(rng):
    """`h / g` with g an input: one cir.attention whose group is read at run time (the
    scores and out generics gather K and V at head h floordiv g); one compile serves
    groups 1, 2, 4 and 8 (K's and V's heads run-time sizes), each against numpy."""
    prog = zynml.compile(RUN_TIME_GROUP, device="cpu", dynamic=["K.shape[1]", "V.shape[1]"])
    for group in (1, 2, 4, 8):
        q, k, v = inputs(rng, 7, 13, 8, group)
        values = dict(Q=q, K=k, V=v, cache_start=np.int64(3), g=np.int64(group))
        text = linalg_text(prog, **values)
        assert text.count('library_call = "zynml_attention_out"') == 1 and \
            text.count("zynml.runtime_group = 1") == 2 and "scf.for" not in text
        assert_close(prog(**values)["attn"], grouped_reference(q, k, v, causal(7, 13, 3)))
    assert prog.stats().compiles == 1


def test_run_time_group_reads_like_the_body(rng):
    """Query heads that are not a multiple of the key heads (5 and 2, g = 3: head h reads
    key head h floordiv 3): what the loops compute as written (the interpreter too)."""
    prog = zynml.compile(RUN_TIME_GROUP, device="cpu")
    interpreter = zynml.compile(RUN_TIME_GROUP, device="interpreter")
    q = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 6, 4)).astype(np.float32) for _ in range(2))
    values = dict(Q=q, K=k, V=v, cache_start=np.int64(1), g=np.int64(3))
    assert "zynml_attention_out" in linalg_text(prog, **values)
    heads = np.arange(5) // 3  # each query head's key head, spelled out
    expected = grouped_reference(q, k[:, heads], v[:, heads], causal(3, 6, 1))
    out = prog(**values)["attn"]
    assert_close(out, expected)
    assert_close(out, interpreter(**values)["attn"])


@pytest.mark.parametrize("group", [1, 2, 4])
def test_online_softmax_with_a_run_time_group(rng, group):
    source = online_attention("g").replace("compute(Q, K, V)", "compute(Q, K, V, g)")
    prog = zynml.compile(source, device="cpu")
    q, k, v = inputs(rng, 5, 11, 8, group)
    text = linalg_text(prog, Q=q, K=k, V=v, g=np.int64(group))
    assert "zynml.runtime_group" in text and "scf.for" not in text
    assert_close(prog(Q=q, K=k, V=v, g=np.int64(group))["attn"], grouped_reference(q, k, v))


@pytest.mark.parametrize("group", [1, 2, 4, 8])
def test_online_softmax_per_element_is_raised(rng, group):
    prog = zynml.compile(online_attention(str(group)), device="cpu")
    q, k, v = inputs(rng, 7, 61, 8, group)
    text = linalg_text(prog, Q=q, K=k, V=v)
    assert text.count('library_call = "zynml_attention_out"') == 1 and "scf.for" not in text
    assert_close(prog(Q=q, K=k, V=v)["attn"], grouped_reference(q, k, v))


# docs/language.md's form: one row of queries per point, no batch or heads
LANGUAGE_GUIDE_ONLINE = """
let attn = compute(Q, K, V) {
    @kernel flash_attention
    for i in 0..sq, d in 0..dv:
        var m = -inf
        var l = 0.0
        var o = 0.0
        for j in 0..sk:
            let s = dot(Q[i], K[j])
            let m_new = max(m, s)
            let scale = exp(m - m_new)
            l = scale * l + exp(s - m_new)
            o = scale * o + exp(s - m_new) * V[j, d]
            m = m_new
        out[i, d] = o / l
}
"""


def test_online_softmax_of_the_language_guide(rng):
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((7, 5), (13, 5), (13, 3)))
    prog = zynml.compile(LANGUAGE_GUIDE_ONLINE, device="cpu")
    assert "zynml_attention_out" in linalg_text(prog, Q=q, K=k, V=v)
    assert_close(prog(Q=q, K=k, V=v)["attn"], grouped_reference(q, k, v, scale=1.0))


@pytest.mark.parametrize("change", [
    ("l = scale * l + exp(s - m_new)", "l = l + exp(s - m_new)"),           # not rescaled
    ("o = scale * o + exp(s - m_new) *", "o = o + exp(s - m_new) *"),        # not rescaled
    ("V[b, h / 2, j, d]", "V[b, h / 2, j, d] * 2.0"),                        # not V
])
def test_online_forms_that_are_not_attention_are_lowered_as_written(rng, change):
    source = online_attention("2").replace(*change)
    prog = zynml.compile(source, device="cpu")
    q, k, v = inputs(rng, 3, 5, 4, 2)
    assert "zynml_attention" not in linalg_text(prog, Q=q, K=k, V=v)
    expected = _online_literal(q, k, v, *change)
    assert_close(prog(Q=q, K=k, V=v)["attn"], expected)


def _online_literal(q, k, v, old, new):
    """The changed online loop evaluated as written, in float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    k, v = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * 0.125
    m = np.full(s.shape[:-1] + (1,), -np.inf)
    l = np.zeros_like(m)
    o = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for j in range(s.shape[-1]):
        sj, vj = s[..., j:j + 1], v[..., j:j + 1, :]
        if "* 2.0" in new:
            vj = vj * 2.0
        m_new = np.maximum(m, sj)
        scale = np.exp(m - m_new)
        l = (l if "l = l" in new else scale * l) + np.exp(sj - m_new)
        o = (o if "o = o" in new else scale * o) + np.exp(sj - m_new) * vj
        m = m_new
    return o / l


TRANSFORMER_LAYOUT = """
let attn = compute(q, k, v) {
    @kernel flash_attention
    for b in 0..batch, i in 0..seq, h in 0..num_heads, d in 0..head_dim:
        var m = -inf
        var l = 0.0
        var o = 0.0
        for j in 0..seq:
            let s = dot(q[b, i, h], k[b, j, h / GROUP]) / sqrt(head_dim)
            let m_new = max(m, s)
            let scale = exp(m - m_new)
            l = scale * l + exp(s - m_new)
            o = scale * o + exp(s - m_new) * v[b, j, h / GROUP, d]
            m = m_new
        out[b, i, h, d] = o / l
}
"""


@pytest.mark.parametrize("group", [1, 2, 4])
def test_transformer_layout_is_raised(rng, group):
    """The transformer block's form (tests/programs/transformer/): the query row is the
    second loop of four, q and k indexed [b, i, h] and [b, j, h]: raised, with Q, K and V
    transposed to [b, h, i, d] around the attention."""
    prog = zynml.compile(TRANSFORMER_LAYOUT.replace("GROUP", str(group)), device="cpu")
    q = rng.standard_normal((2, 7, 4, 8)).astype(np.float32)
    k, v = (rng.standard_normal((2, 7, 4 // group, 8)).astype(np.float32) for _ in range(2))
    text = linalg_text(prog, q=q, k=k, v=v)
    assert "zynml_attention_out" in text and "linalg.transpose" in text and "scf.for" not in text
    heads_first = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731
    expected = grouped_reference(heads_first(q), heads_first(k), heads_first(v),
                                 scale=1 / np.sqrt(8))
    assert_close(prog(q=q, k=k, v=v)["attn"], heads_first(expected))
