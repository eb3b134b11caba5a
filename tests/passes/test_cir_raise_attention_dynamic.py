"""cir-raise-attention with run-time sizes: the attention forms compiled once (`dynamic=`)
become one cir.attention whose extents are read at run time, and that one compile serves
every size (CPU, IREE; against float64 numpy on fresh random inputs of odd sizes).
Program.stats() shows the single specialization."""
import numpy as np
import pytest

import zynml
from conftest import (assert_close, attention_reference, causal, conditioned_attention,
                      decode_attention, grouped_reference, online_attention)

from passes.test_cir_raise_attention import SPEC, UNMASKED
from passes.test_cir_raise_attention_decode import TRANSFORMER_LAYOUT

# (batch, heads, queries, keys, head dim): 1, primes, and more keys than a tile
SIZES = [(1, 1, 1, 1, 1), (2, 3, 17, 23, 5), (1, 2, 7, 131, 64)]


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def qkv(rng, batch, heads, rows, keys, d, kv_heads=None):
    kv_heads = kv_heads or heads
    return f32(rng, batch, heads, rows, d), f32(rng, batch, kv_heads, keys, d), \
        f32(rng, batch, kv_heads, keys, d)


def raised_once(prog, **values) -> str:
    """The program's linalg at `values`: one attention, no loops left."""
    text = str(prog.stage_module(values, "linalg"))
    assert text.count('library_call = "zynml_attention_out"') == 1, text
    assert "scf.for" not in text
    return text


def test_unmasked_attention_of_run_time_sizes(rng):
    prog = zynml.compile(UNMASKED, device="cpu", dynamic=True)
    text = raised_once(prog, **dict(zip("QKV", qkv(rng, *SIZES[1]))))
    assert "tensor<?x?x?x?xf32>" in text  # shape-generic: nothing fixed at 17 or 23
    for size in SIZES:
        q, k, v = qkv(rng, *size)
        assert_close(prog(Q=q, K=k, V=v)["attn"], attention_reference(q, k, v, scale=0.125))
    assert prog.stats().specializations == 1


def test_scale_computed_from_a_run_time_head_dim(rng):
    """`/ sqrt(head_dim)` with head_dim a run-time size: the scale is computed before
    the attention from the size, and follows it."""
    prog = zynml.compile(conditioned_attention("j <= i + 2"), device="cpu", dynamic=True)
    raised_once(prog, **dict(zip("QKV", qkv(rng, *SIZES[1]))))
    for size in SIZES:
        q, k, v = qkv(rng, *size)
        expected = grouped_reference(q, k, v, causal(size[2], size[3], 2),
                                     scale=1 / np.sqrt(size[4]))
        assert_close(prog(Q=q, K=k, V=v)["attn"], expected)
    assert prog.stats().specializations == 1


def test_masked_attention_of_run_time_sizes(rng):
    prog = zynml.compile(SPEC, device="cpu", dynamic=True)
    for batch, heads, rows, _, d in SIZES:
        q, k, v = qkv(rng, batch, heads, rows, rows, d)
        mask = rng.random((rows, rows)) < 0.7
        mask[0] = False  # a row with no allowed key gives zeros
        assert_close(prog(Q=q, K=k, V=v, mask=mask)["attn"],
                     attention_reference(q, k, v, mask))
    assert prog.stats().specializations == 1


def test_run_time_offset_and_sizes(rng):
    """Decode attention's causal offset and its sizes all at run time: one compile."""
    prog = zynml.compile(decode_attention("1").replace("h / 1", "h"), device="cpu",
                         dynamic=True)
    raised_once(prog, **dict(zip("QKV", qkv(rng, *SIZES[1]))), cache_start=np.int64(3))
    for size in SIZES:
        q, k, v = qkv(rng, *size)
        for offset in (0, 5, size[3]):
            out = prog(Q=q, K=k, V=v, cache_start=np.int64(offset))["attn"]
            assert_close(out, grouped_reference(q, k, v, causal(size[2], size[3], offset)))
    assert prog.stats().specializations == 1


@pytest.mark.parametrize("group", [2, 4])
def test_grouped_heads_static_and_the_rest_run_time(rng, group):
    """Grouped-query attention: the heads stay static (K's heads times the group must be
    Q's, which only static extents prove); batch, queries and keys are run-time sizes."""
    prog = zynml.compile(online_attention(str(group)), device="cpu",
                         dynamic=["batch", "sq", "sk"])
    for batch, _, rows, keys, d in SIZES:
        q, k, v = qkv(rng, batch, 8, rows, keys, 8, kv_heads=8 // group)
        if (batch, rows) == (2, 17):
            raised_once(prog, Q=q, K=k, V=v)
        assert_close(prog(Q=q, K=k, V=v)["attn"], grouped_reference(q, k, v))
    assert prog.stats().specializations == 1


def test_run_time_grouped_heads_are_lowered_as_written(rng):
    """With the heads run-time sizes nothing ties K's heads to Q's: no cir.attention
    (its reads at h / group would leave K where the body's are clamped), same numbers."""
    prog = zynml.compile(online_attention("4"), device="cpu", dynamic=True)
    q, k, v = qkv(rng, 1, 8, 5, 7, 8, kv_heads=2)
    assert "zynml_attention" not in str(prog.stage_module(dict(Q=q, K=k, V=v), "linalg"))
    assert_close(prog(Q=q, K=k, V=v)["attn"], grouped_reference(q, k, v))


def test_transformer_layout_of_run_time_sizes(rng):
    """The transposes around the attention take run-time extents too."""
    prog = zynml.compile(TRANSFORMER_LAYOUT.replace("GROUP", "1").replace("h / 1", "h"),
                         device="cpu", dynamic=True)
    heads_first = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731
    for batch, heads, rows, _, d in SIZES:
        q, k, v = (f32(rng, batch, rows, heads, d) for _ in range(3))
        if rows == 17:
            assert "linalg.transpose" in raised_once(prog, q=q, k=k, v=v)
        expected = grouped_reference(heads_first(q), heads_first(k), heads_first(v),
                                     scale=1 / np.sqrt(d))
        assert_close(prog(q=q, k=k, v=v)["attn"], heads_first(expected))
    assert prog.stats().specializations == 1


def test_dot_rows_of_different_run_time_lengths_are_an_error(rng):
    """dot(Q[..], K[..]) binds Q's and K's last axes to one size: a call where they
    differ is refused (the raised attention would read K's rows over Q's length)."""
    prog = zynml.compile(UNMASKED, device="cpu", dynamic=True)
    q, k, v = f32(rng, 1, 1, 3, 4), f32(rng, 1, 1, 3, 5), f32(rng, 1, 1, 3, 4)
    with pytest.raises(zynml.ZynMLError) as error:
        prog(Q=q, K=k, V=v)
    # located at the dot, its source line and a caret under it
    line = next(n for n, text in enumerate(UNMASKED.splitlines(), 1) if "dot(" in text)
    column = UNMASKED.splitlines()[line - 1].index("dot(") + 1
    assert str(error.value).splitlines() == [
        f"<string>:{line}:{column}: error: 'dot' of rows of different lengths: 4 and 5",
        UNMASKED.splitlines()[line - 1], " " * (column - 1) + "^"]
