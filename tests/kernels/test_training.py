"""LayerNorm, linear and GELU with their gradients (zynml/kernels/training.py) against
float64 numpy, analytic and by finite differences, on the CPU."""
from __future__ import annotations

import numpy as np
import pytest

import zynml.kernels as K
from zynml.errors import ZynMLError
from conftest import assert_close

SIZES = [(1, 1), (7, 13), (37, 5), (64, 7), (192, 13)]  # multiples of 64: one call


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _layer_norm64(x, w, b, eps):
    x = x.astype(np.float64)
    xhat = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + eps)
    return xhat * w + b, xhat


@pytest.mark.parametrize("rows, d", SIZES)
def test_layer_norm_and_its_gradients(rows, d, rng):
    x, w, b, g = _rand(rng, rows, d), _rand(rng, d), _rand(rng, d), _rand(rng, rows, d)
    y_ref, xhat = _layer_norm64(x, w, b, 1e-5)
    np.testing.assert_allclose(K.layer_norm(x, w, b, 1e-5, device="cpu"), y_ref,
                               rtol=1e-4, atol=1e-4)
    dx, dw, db = K.layer_norm_backward(x, w, g, 1e-5, device="cpu")
    gw = g * w
    dx_ref = (gw - gw.mean(1, keepdims=True) - xhat * (gw * xhat).mean(1, keepdims=True)) \
        / np.sqrt(x.astype(np.float64).var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(dw, (g * xhat).sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, g.astype(np.float64).sum(0), rtol=1e-4, atol=1e-4)
    residual = _rand(rng, rows, d)  # the gradient reaching x past the norm, added to dx
    dx2, dw2, db2 = K.layer_norm_backward(x, w, g, 1e-5, grad_residual=residual,
                                          device="cpu")
    np.testing.assert_allclose(dx2, dx_ref + residual, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(dw2, dw, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(db2, db, rtol=1e-6, atol=1e-6)
    for residual_or_none in (residual, None):  # given arrays: written, and returned
        dweight, dbias = _rand(rng, d), _rand(rng, d)
        dx3, dw3, db3 = K.layer_norm_backward(x, w, g, 1e-5, grad_residual=residual_or_none,
                                              dweight=dweight, dbias=dbias, device="cpu")
        assert dw3 is dweight and db3 is dbias
        np.testing.assert_allclose(dx3, dx2 if residual_or_none is not None else dx,
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(dweight, (g * xhat).sum(0), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(dbias, g.astype(np.float64).sum(0), rtol=1e-4, atol=1e-4)


def test_layer_norm_input_gradient_by_finite_differences(rng):
    x, w, b, g = _rand(rng, 3, 11), _rand(rng, 11), _rand(rng, 11), _rand(rng, 3, 11)
    loss = lambda xx: (_layer_norm64(xx, w, b, 1e-5)[0] * g).sum()
    x64, h, numeric = x.astype(np.float64), 1e-6, np.zeros((3, 11))
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x64)
        e[idx] = h
        numeric[idx] = (loss(x64 + e) - loss(x64 - e)) / (2 * h)
    dx, _, _ = K.layer_norm_backward(x, w, g, 1e-5, device="cpu")
    np.testing.assert_allclose(dx, numeric, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("rows, k, n", [(1, 1, 1), (7, 13, 5), (67, 17, 19)])
def test_linear_residual_adds_the_stream_to_the_projection(rows, k, n, rng):
    x, w, b, r = _rand(rng, rows, k), _rand(rng, k, n), _rand(rng, n), _rand(rng, rows, n)
    want = x.astype(np.float64) @ w + b + r
    np.testing.assert_allclose(K.linear_residual(x, w, b, r, device="cpu"), want,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows, k, n", [(1, 1, 1), (7, 13, 5), (33, 17, 19), (64, 3, 5),
                                        (192, 17, 19)])
def test_linear_and_its_gradients(rows, k, n, rng):
    x, w, b, g = _rand(rng, rows, k), _rand(rng, k, n), _rand(rng, n), _rand(rng, rows, n)
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    np.testing.assert_allclose(K.linear(x, w, b, device="cpu"), x64 @ w64 + b,
                               rtol=1e-4, atol=1e-4)
    dx, dw, db = K.linear_backward(x, w, g, device="cpu")
    np.testing.assert_allclose(dx, g64 @ w64.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, x64.T @ g64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, g64.sum(0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows, k, n", [(1, 1, 1), (33, 17, 19), (64, 3, 5), (192, 17, 19)])
def test_linear_gradients_written_into_given_arrays(rows, k, n, rng):
    """dw and db given (a flat gradient buffer's views): written there and returned, by
    the one-call pipeline (rows a multiple of 64) and by the three calls."""
    x, w, g = _rand(rng, rows, k), _rand(rng, k, n), _rand(rng, rows, n)
    flat = rng.standard_normal(k * n + n + 3).astype(np.float32)  # not zeros: all written
    dw, db = flat[:k * n].reshape(k, n), flat[k * n:k * n + n]
    dx, got_dw, got_db = K.linear_backward(x, w, g, dw=dw, db=db, device="cpu")
    assert got_dw is dw and got_db is db
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    np.testing.assert_allclose(dx, g64 @ w64.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(flat[:k * n].reshape(k, n), x64.T @ g64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(flat[k * n:k * n + n], g64.sum(0), rtol=1e-4, atol=1e-4)


def test_linear_gradients_into_need_both_arrays(rng):
    x, w, g = _rand(rng, 64, 3), _rand(rng, 3, 5), _rand(rng, 64, 5)
    with pytest.raises(ZynMLError, match="both dw and db"):
        K.linear_backward(x, w, g, dw=np.zeros((3, 5), np.float32), device="cpu")


@pytest.mark.parametrize("splits, part, k, n", [(1, 64, 5, 3), (4, 64, 17, 19),
                                                 (3, 128, 13, 1)])
def test_split_weight_gradient_sums_its_parts(splits, part, k, n, rng):
    """linear_backward's d w over `splits` parts of the rows (split-K), on the CPU."""
    from zynml.kernels import library
    rows = splits * part
    x, w, g = _rand(rng, rows, k), _rand(rng, k, n), _rand(rng, rows, n)
    dx, dw, db = library.call("linear", "linear_backward",
                              {"x": x, "w": w, "grad": g, "groups": rows // 64,
                               "splits": splits, "part": part}, "cpu")
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    np.testing.assert_allclose(dw, x64.T @ g64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, g64 @ w.astype(np.float64).T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, g64.sum(0), rtol=1e-4, atol=1e-4)


def test_weight_splits_fill_a_gpu_and_keep_parts_whole():
    from zynml.kernels.training import weight_splits
    # GPT-2 small's four projections over 16 x 1024 tokens (18, 54, 72, 72 tiles of 256
    # unsplit) on an H100's 132 multiprocessors: the fastest of every split and tile width
    # timed on an H200 (docs/performance.md Session 24: 4 parts of 192-wide tiles, 2 of
    # 256, 4 of 192, 4 of 192)
    assert [weight_splits(16384, k, n, True) for k, n in
            ((768, 768), (768, 2304), (768, 3072), (3072, 768))] == [4, 2, 4, 4]
    assert weight_splits(16384, 768, 768, False) == 1           # not on a GPU
    assert weight_splits(1024, 64, 64, True) == 2               # parts of 512 rows at least
    assert weight_splits(192, 768, 768, True) == 1              # 3 groups of 64: no halves
    assert weight_splits(16384, 8192, 8192, True) == 1          # already many tiles


def _gelu64(v):
    return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))


@pytest.mark.parametrize("rows, d", SIZES)
def test_gelu_and_its_gradient(rows, d, rng):
    x, g = 3 * _rand(rng, rows, d), _rand(rng, rows, d)
    x64 = x.astype(np.float64)
    # f32 GELU cancels in 1 + tanh(u) for x << 0: its error is absolute, on the scale of
    # x (of g for the gradient), so a lone x << 0 needs that floor (CI drew one: 1.9e-5)
    assert_close(K.gelu(x, device="cpu"), _gelu64(x64), floor=np.abs(x64).max())
    numeric = (_gelu64(x64 + 1e-6) - _gelu64(x64 - 1e-6)) / 2e-6
    assert_close(K.gelu_backward(x, g, device="cpu"), g * numeric, rtol=1e-4,
                 floor=np.abs(g).max())


@pytest.mark.parametrize("batch, seq, heads, head_dim", [(1, 1, 1, 1), (2, 5, 3, 7)])
def test_heads_move_between_layouts(batch, seq, heads, head_dim, rng):
    width = heads * head_dim
    qkv = _rand(rng, batch * seq, 3 * width)
    parts = qkv.reshape(batch, seq, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
    q, k, v = K.split_heads(qkv, batch, heads, device="cpu")
    (only,) = K.split_heads(np.ascontiguousarray(qkv[:, :width]), batch, heads, parts=1,
                            device="cpu")
    np.testing.assert_array_equal(only, parts[0])
    for got, want in zip((q, k, v), parts):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(K.merge_heads(np.ascontiguousarray(parts[1]), device="cpu"),
                                  qkv[:, width:2 * width])
    np.testing.assert_array_equal(K.merge_qkv(q, k, v, device="cpu"), qkv)


def test_one_query_row_merges_without_a_copy(rng):
    """[batch, heads, 1, d] and [batch, heads * d] are the same bytes: merge_heads gives
    o itself, seen with the merged shape."""
    o = _rand(rng, 3, 5, 1, 7)
    merged = K.merge_heads(o, device="cpu")
    assert merged.shape == (3, 35) and np.shares_memory(merged, o)
    np.testing.assert_array_equal(merged, o.transpose(0, 2, 1, 3).reshape(3, 35))


def test_a_split_of_other_than_one_or_three_arrays_is_refused(rng):
    with pytest.raises(ZynMLError, match=r"parts=1\) or a fused projection's q, k and v "
                                         r"\(parts=3\), not parts=2"):
        K.split_heads(_rand(rng, 5, 12), 1, 3, parts=2, device="cpu")


def test_residual_add_and_gradient_clipping(rng):
    x, y = _rand(rng, 3, 17), _rand(rng, 3, 17)
    np.testing.assert_allclose(K.residual_add(x, y, device="cpu"), x + y, rtol=1e-6)
    g = _rand(rng, 101)
    assert float(K.sum_squares(g, device="cpu")) == pytest.approx(
        (g.astype(np.float64) ** 2).sum(), rel=1e-5)
    scaled = g.copy()
    assert K.scale_in_place(scaled, 0.25, device="cpu") is scaled
    np.testing.assert_allclose(scaled, g * 0.25, rtol=1e-6)


@pytest.mark.parametrize("rows", [4, 7])
def test_a_long_sum_of_squares_runs_as_rows(rows, rng, monkeypatch):
    """A length of whole SUM_ROW rows takes the two-step pipeline (a block per row on a
    GPU), one more element the single reduction; both sum as float64 does."""
    from zynml.kernels import library
    pipelines = []
    call = library.call
    monkeypatch.setattr(K.training, "call",
                        lambda name, pipeline, *args, **kw: pipelines.append(pipeline)
                        or call(name, pipeline, *args, **kw))
    for n in (rows * K.SUM_ROW, rows * K.SUM_ROW + 1):
        g = _rand(rng, n)
        want = (g.astype(np.float64) ** 2).sum()
        assert float(K.sum_squares(g, device="cpu")) == pytest.approx(want, rel=1e-5)
    assert pipelines == ["sum_squares_by_rows", "sum_squares"]


@pytest.mark.parametrize("sizes, max_norm", [((1,), 1.0), ((101, 7), 0.5), ((13, 2), np.inf)])
def test_global_norm_and_clip_scale_stay_on_the_device(sizes, max_norm, rng):
    """The global sum of squares is added into a one-element array (no value comes back
    per gradient), and clip_scale is clip_grad_norm_'s factor times grad_scale."""
    grads = [_rand(rng, n) for n in sizes]
    total = np.full(1, np.nan, np.float32)
    assert K.zero_buffer(total, device="cpu") is total
    for g in grads:
        assert K.add_sum_squares(total, g, device="cpu") is total
    want = sum((g.astype(np.float64) ** 2).sum() for g in grads)
    assert float(total[0]) == pytest.approx(want, rel=1e-5)
    grad_scale = 1 / 3
    norm = np.sqrt(want) * grad_scale
    factor = grad_scale * min(1.0, max_norm / (norm + 1e-6))
    got = K.clip_scale(total, grad_scale, max_norm, device="cpu")
    assert np.shape(got) == (1,) and float(got[0]) == pytest.approx(factor, rel=1e-5)


@pytest.mark.parametrize("n, weight_decay", [(1, 0.0), (97, 0.1)])
def test_adamw_with_a_device_gradient_scale_is_torchs_step(n, weight_decay, rng):
    torch = pytest.importorskip("torch")
    param, grad = _rand(rng, n), _rand(rng, n)
    m, v = _rand(rng, n) * 0.1, np.abs(_rand(rng, n)) * 0.01
    scale = np.array([0.37], np.float32)
    ref = torch.nn.Parameter(torch.tensor(param, dtype=torch.float64))
    opt = torch.optim.AdamW([ref], lr=3e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=weight_decay)
    ref.grad = torch.tensor(grad * np.float64(scale[0]))
    opt.step()  # step 1 from zero moments, then step 2 from ours
    state = opt.state[ref]
    state["exp_avg"].copy_(torch.tensor(m, dtype=torch.float64))
    state["exp_avg_sq"].copy_(torch.tensor(v, dtype=torch.float64))
    ref.data.copy_(torch.tensor(param, dtype=torch.float64))
    opt.step()
    K.adamw_step(param, grad, m, v, lr=3e-3, step=2, beta1=0.9, beta2=0.95, eps=1e-8,
                 weight_decay=weight_decay, grad_scale=scale, device="cpu")
    np.testing.assert_allclose(param, ref.detach().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(m, state["exp_avg"].numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(v, state["exp_avg_sq"].numpy(), rtol=1e-5, atol=1e-9)


def test_cuda_clipped_adamw_is_one_kernel_in_place():
    """No sum comes back to the host: the scale is read from a device array inside the
    one pointwise AdamW kernel. Compiles for sm_90a here; no GPU needed."""
    import json
    from zynml.kernels import library
    prog = library.program("adamw_clipped", "cuda", require_device=False, dynamic=False)
    f, n = np.float32(0.5), 1031
    plan = json.loads(prog.emit("plan", dict(
        param=np.ones(n, np.float32), grad=np.ones(n, np.float32), m=np.ones(n, np.float32),
        v=np.ones(n, np.float32), scale=np.ones(1, np.float32), step_size=f, beta1=f,
        beta2=f, eps=f, decay=f, bc2_sqrt=f)))
    assert [k["strategy"] for k in _kernels(plan)] == ["pointwise"]
    assert [o["value"] for o in plan["outputs"]] == ["%in0", "%in2", "%in3"]  # in place


def test_gpt_embedding_and_its_gradients(rng):
    vocab, context, c, batch, seq = 11, 9, 5, 2, 7
    wte, wpe = _rand(rng, vocab, c), _rand(rng, context, c)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    np.testing.assert_array_equal(K.embed(wte, wpe, ids, device="cpu"),
                                  (wte[ids] + wpe[:seq]).reshape(batch * seq, c))
    grad, dwte = _rand(rng, batch * seq, c), _rand(rng, vocab, c)
    want = dwte.astype(np.float64)
    np.add.at(want, ids.reshape(-1), grad)
    assert K.embed_backward_tokens(dwte, ids, grad, device="cpu") is dwte
    np.testing.assert_allclose(dwte, want, rtol=1e-5, atol=1e-6)
    dwpe = np.zeros((context, c))
    dwpe[:seq] = grad.reshape(batch, seq, c).sum(0)
    np.testing.assert_allclose(K.embed_backward_positions(wpe, grad, batch, seq, device="cpu"),
                               dwpe, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pipeline, inputs", [
    ("linear_backward_input", {"grad": (256, 384), "w": (128, 384)}),
    ("linear_backward_weight", {"x": (256, 128), "grad": (256, 384)}),
    ("linear_backward", {"x": (256, 128), "w": (128, 384), "grad": (256, 384), "groups": 4,
                         "splits": 2, "part": 128}),
])
def test_cuda_gradient_products_run_on_the_gemm_strategy(pipeline, inputs):
    """The transposed operand is its own kernel: fused into the product (as elementwise
    fusion would, were named ops generalized first) it is no plain matmul any more and
    falls to the SIMT strategy. Compiles for sm_90a here; no GPU needed."""
    import json
    from zynml.kernels import library
    prog = library.program("linear", "cuda", require_device=False).pipeline(pipeline)
    plan = json.loads(prog.emit("plan", {n: np.ones(s, np.float16) if isinstance(s, tuple)
                                         else s for n, s in inputs.items()}))
    strategies = [k["strategy"] for k in _kernels(plan)]
    assert "matmul_wgmma" in strategies and "matmul" not in strategies, strategies
    assert strategies.count("matmul_wgmma") == (2 if pipeline == "linear_backward" else 1)


def _half(*shape):
    return np.ones(shape, np.float16)


def _f32(*shape):
    return np.ones(shape, np.float32)


@pytest.mark.parametrize("program, pipeline, inputs, into", [
    ("linear", "linear_backward", {"x": _half(256, 128), "w": _half(128, 384),
                                   "grad": _half(256, 384), "groups": 4, "splits": 2,
                                   "part": 128},
     {"dw": _f32(128, 384), "db": _f32(384)}),
    ("layer_norm", "layer_norm_backward_residual",
     {"x": _f32(256, 96), "weight": _f32(96), "grad": _half(256, 96),
      "grad_residual": _half(256, 96), "eps": 1e-5, "groups": 4},
     {"dweight": _f32(96), "dbias": _f32(96)}),
])
def test_cuda_gradients_into_given_arrays_are_written_where_they_are(
        program, pipeline, inputs, into):
    """The `_into` pipelines: the blocks that sum the parameter gradients' parts write
    the caller's arrays themselves (outputs marked `updates`, no buffers of their own,
    no copies), with the kernels of the pipeline that returns new arrays. Compiles for
    sm_90a here; no GPU needed."""
    import json
    from zynml.kernels import library
    prog = library.program(program, "cuda", require_device=False)
    written = json.loads(prog.pipeline(f"{pipeline}_into").emit("plan", {**inputs, **into}))
    plain = json.loads(prog.pipeline(pipeline).emit("plan", inputs))
    given = [list(written["input_names"]).index(name) for name in into]
    assert [o.get("updates") for o in written["outputs"]] == [None] + given
    assert not [s for s in written["body"] if s["op"] == "copy"]
    assert len([s for s in written["body"] if s["op"] == "alloc"]) == \
        len([s for s in plain["body"] if s["op"] == "alloc"]) - 2
    assert [(k["strategy"], k["grid"]) for k in _kernels(written)] == \
        [(k["strategy"], k["grid"]) for k in _kernels(plain)]


def _kernels(node):
    if isinstance(node, dict):
        if "strategy" in node:
            yield node
        for value in node.values():
            yield from _kernels(value)
    elif isinstance(node, list):
        for value in node:
            yield from _kernels(value)
