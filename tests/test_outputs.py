"""Blocks with several outputs, `let (a, b) = compute(...)` writing `out.a[...]` and
`out.b[...]` (docs/language.md §2): numerics against numpy float64 on the CPU (IREE) and
the interpreter, one kernel on CUDA (compiled here; the `gpu` tests run it), and the
located errors of the syntax."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

ADAMW = Path(__file__).parent / "programs" / "training" / "adamw_outputs.zyn"
HYPER = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01)

ROW_STATS = """
let (mx, total, centered) = compute(x) {
    @kernel fused
    for r in 0..rows:
        var m = -inf
        var s = 0.0
        for c in 0..cols:
            m = max(m, x[r, c])
            s += x[r, c]
        out.mx[r] = m
        out.total[r] = s
        for c in 0..cols:
            out.centered[r, c] = x[r, c] - s / cols
}
"""

MIXED_DTYPES = """
let (positive, doubled, index) = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out.positive[i] = x[i] > 0.0
        out.doubled[i] = x[i] * 2.0
        out.index[i] = i
}
"""


def adamw_inputs(rng, n, step=1):
    return dict(p=rng.standard_normal(n).astype(np.float32),
                g=rng.standard_normal(n).astype(np.float32),
                m=rng.standard_normal(n).astype(np.float32) * 0.1,
                v=rng.random(n).astype(np.float32) * 0.1,
                bc1=np.float32(1 - HYPER["beta1"] ** step),
                bc2=np.float32(1 - HYPER["beta2"] ** step), **HYPER)


def adamw_reference(p, g, m, v, lr, beta1, beta2, eps, wd, bc1, bc2):
    p, g, m, v = (np.asarray(a, np.float64) for a in (p, g, m, v))
    m2 = beta1 * m + (1 - beta1) * g
    v2 = beta2 * v + (1 - beta2) * g * g
    p2 = p - lr * ((m2 / bc1) / (np.sqrt(v2 / bc2) + eps) + wd * p)
    return p2, m2, v2


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("n", [1, 37, 1001])
def test_adamw_step_gives_three_outputs(rng, device, n):
    inputs = adamw_inputs(rng, n, step=3)
    out = zynml.run(ADAMW, device=device, **inputs)
    assert list(out) == ["p2", "m2", "v2"]
    for name, expected in zip(("p2", "m2", "v2"), adamw_reference(**inputs)):
        assert out[name].dtype == np.float32 and out[name].shape == (n,)
        np.testing.assert_allclose(out[name], expected, rtol=2e-5, atol=1e-6)


def test_outputs_are_one_generic_on_the_cpu(rng):
    linalg = str(zynml.compile(ADAMW).stage_module(adamw_inputs(rng, 5), upto="linalg"))
    assert linalg.count("linalg.generic") == 1
    assert "-> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)" in linalg


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (3, 130)])
def test_row_statistics_of_different_shapes(rng, device, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    out = zynml.run(ROW_STATS, device=device, x=x)
    wide = x.astype(np.float64)
    np.testing.assert_array_equal(out["mx"], x.max(axis=1))
    np.testing.assert_allclose(out["total"], wide.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["centered"], wide - wide.mean(axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-5)
    assert out["centered"].shape == shape and out["mx"].shape == shape[:1]


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_outputs_of_different_dtypes(rng, device):
    x = rng.standard_normal(11).astype(np.float32)
    out = zynml.run(MIXED_DTYPES, device=device, x=x)
    np.testing.assert_array_equal(out["positive"], x > 0)
    np.testing.assert_array_equal(out["doubled"], x * 2)
    np.testing.assert_array_equal(out["index"], np.arange(11))
    assert [out[k].dtype for k in out] == [np.bool_, np.float32, np.int64]


def test_other_blocks_read_each_output(rng):
    src = ROW_STATS + """
let normalized = compute(centered, total) {
    @kernel elementwise
    for r in 0..rows, c in 0..cols:
        out[r, c] = centered[r, c] / total[r]
}
"""
    x = rng.random((5, 9)).astype(np.float32) + 0.5
    out = zynml.run(src, x=x)
    wide = x.astype(np.float64)
    expected = (wide - wide.mean(1, keepdims=True)) / wide.sum(1, keepdims=True)
    np.testing.assert_allclose(out["normalized"], expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- CUDA

def test_adamw_is_one_cuda_kernel(rng):
    prog = zynml.compile(ADAMW, device="cuda", require_device=False)
    artifact = prog.artifact(**adamw_inputs(rng, 37))
    assert len(list(launches(artifact.plan["body"]))) == 1
    assert [o["shape"] for o in artifact.plan["outputs"]] == [[37]] * 3


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 37, 100003])
def test_adamw_outputs_on_the_gpu(rng, n):
    inputs = adamw_inputs(rng, n, step=2)
    out = zynml.run(ADAMW, device="cuda:0", **inputs)
    for name, expected in zip(("p2", "m2", "v2"), adamw_reference(**inputs)):
        np.testing.assert_allclose(np.asarray(out[name]), expected, rtol=2e-5, atol=1e-6)


@pytest.mark.gpu
def test_row_statistics_on_the_gpu(rng):
    x = rng.standard_normal((33, 257)).astype(np.float32)
    out = zynml.run(ROW_STATS, device="cuda:0", x=x)
    wide = x.astype(np.float64)
    np.testing.assert_array_equal(np.asarray(out["mx"]), x.max(axis=1))
    np.testing.assert_allclose(np.asarray(out["total"]), wide.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(out["centered"]),
                               wide - wide.mean(1, keepdims=True), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------- errors

def _block(head, *lines, kernel="elementwise"):
    body = "".join(f"        {line}\n" for line in lines)
    return f"{head} {{\n    @kernel {kernel}\n    for i in 0..n:\n{body}}}\n"


@pytest.mark.parametrize("source,where,message", [
    (_block("let (a, b) = compute(x)", "out.a[i] = x[i]"),
     "1:9", "output 'b' is never written: the body must write out.b[...]"),
    (_block("let (a, b) = compute(x)", "out.a[i] = x[i]", "out.c[i] = x[i]"),
     "5:9", "unknown output 'c'; this block's outputs are a, b"),
    (_block("let (a, b) = compute(x)", "out.a[i] = x[i]", "out.b[i] = out.z[i]"),
     "5:20", "unknown output 'z'"),
    (_block("let (a, b) = compute(x)", "out[i] = x[i]"),
     "4:9", "this block has 2 outputs (a, b): write each as out.NAME[...]"),
    (_block("let a = compute(x)", "out.a[i] = x[i]"),
     "4:9", "'out.a' names one of several outputs, but this block has one"),
    (_block("let (a, b) = compute(x)", "yield x[i]", kernel="reduce(+)"),
     "2:5", "a 'reduce' kernel has one result, but the 'let' binds 2 names"),
    (_block("let (a, a) = compute(x)", "out.a[i] = x[i]"),
     "1:9", "'a' is bound twice by this 'let'"),
    (_block("let (a, b) = compute(x)", "out.a[i] += x[i]", "out.b[i] = x[i]"),
     "4:9", "'out.a' is read before it is written"),
])
def test_errors_are_located(source, where, message):
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(source)
    assert str(err.value).startswith(f"<string>:{where}: error: {message}")
