"""bf16 end to end on the CPU (IREE): ml_dtypes.bfloat16 arrays in and out, against float64
numpy computed from the bf16 inputs, on fresh random inputs of odd sizes (1, primes,
non-multiples of tiles) that stay away from zero. bf16 keeps 8 significant bits (a
rounding is up to 2^-9 relative), so results are checked to 1e-2 of their largest
magnitude; exact operations (max, argmax, doubling, conversions) bit for bit."""
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
from conftest import assert_close

BF16 = np.dtype(ml_dtypes.bfloat16)
EXAMPLES = Path(__file__).resolve().parent / "programs" / "examples"
ROOT_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def bf16(rng, *shape, low=0.25, high=2.0):
    """Magnitudes in [low, high), random signs, rounded to bf16."""
    x = rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)
    return x.astype(BF16)


def wide(x):
    return np.asarray(x).astype(np.float64)


ELEMENTWISE = """
let y = compute(x, w) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * w[i] + x[i] / w[i] - 0.5
}
let z = compute(x, w) {
    @kernel elementwise
    for i in 0..n:
        out[i] = exp(x[i]) + tanh(w[i]) * sqrt(abs(x[i])) + max(x[i], w[i]) + x[i]^3
}
"""


@pytest.mark.parametrize("n", [1, 7, 31, 1009])
def test_elementwise(rng, n):
    x, w = bf16(rng, n), bf16(rng, n)
    out = zynml.run(ELEMENTWISE, device="cpu", x=x, w=w)
    assert out["y"].dtype == BF16 and out["z"].dtype == BF16
    X, W = wide(x), wide(w)
    assert_close(out["y"], X * W + X / W - 0.5, rtol=1e-2)
    assert_close(out["z"], np.exp(X) + np.tanh(W) * np.sqrt(np.abs(X)) + np.maximum(X, W) + X ** 3,
                 rtol=1e-2)


def test_large_inputs_are_staged(rng):
    """80 KiB inputs take IREE's import path (staging buffers through DLPack), twice."""
    prog = zynml.compile(ELEMENTWISE, device="cpu")
    for _ in range(2):
        x, w = bf16(rng, 40009), bf16(rng, 40009)
        y = prog(x=x, w=w)["y"]
        assert y.dtype == BF16
        assert_close(y, wide(x) * wide(w) + wide(x) / wide(w) - 0.5, rtol=1e-2)


REDUCTIONS = """
let total = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i]
}
let biggest = compute(x) {
    @kernel reduce(max)
    for i in 0..n:
        yield x[i]
}
let where = compute(x) {
    @kernel reduce(argmax)
    for i in 0..n:
        yield (x[i], i)
}
"""


@pytest.mark.parametrize("n", [1, 7, 61])
def test_reductions(rng, n):
    """Sums accumulate in bf16 (the kernel's float): positive terms, a few dozen of them.
    Summing n terms in any order is off by at most (n - 1) u sum|x| (u = 2^-8, bf16's
    unit roundoff), plus the final rounding: a fixed 1e-2 failed at n = 61 (8.8e-02)."""
    x = bf16(rng, n, low=0.5, high=1.5)
    x[rng.integers(n)] *= -1
    out = zynml.run(REDUCTIONS, device="cpu", x=x)
    assert out["total"].dtype == BF16 and out["biggest"].dtype == BF16
    exact, magnitude = wide(x).sum(), np.abs(wide(x)).sum()
    bound = n * 2.0 ** -8 * magnitude / abs(exact)
    assert_close(out["total"], exact, rtol=max(bound, 1e-2))
    assert wide(out["biggest"]) == wide(x).max()
    assert int(out["where"]) == int(np.argmax(wide(x)))


def test_reduction_per_axis(rng):
    m = bf16(rng, 13, 29)
    out = zynml.run("""
let row_sums = compute(m) {
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}
let col_max = compute(m) {
    @kernel reduce(max, axis=0)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}""", device="cpu", m=m)
    assert_close(out["row_sums"], wide(m).sum(axis=1), rtol=1e-2)
    np.testing.assert_array_equal(wide(out["col_max"]), wide(m).max(axis=0))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 3, 11), (17, 31, 13), (37, 101, 29)])
def test_matmul(rng, m, k, n):
    a, b = bf16(rng, m, k), bf16(rng, k, n)
    c = zynml.run(EXAMPLES / "matmul.zyn", device="cpu", A=a, B=b)["C"]
    assert c.dtype == BF16 and c.shape == (m, n)
    assert_close(c, wide(a) @ wide(b), rtol=1e-2)


def test_batched_matmul(rng):
    a, b = bf16(rng, 3, 5, 7), bf16(rng, 3, 7, 2)
    c = zynml.run(EXAMPLES / "batched_matmul.zyn", device="cpu", A=a, B=b)["C"]
    assert c.dtype == BF16
    assert_close(c, np.einsum("bik,bkj->bij", wide(a), wide(b)), rtol=1e-2)


def test_softmax(rng):
    x = bf16(rng, 5, 37)
    probs = zynml.run(ROOT_EXAMPLES / "softmax.zyn", device="cpu", x=x)["probs"]
    e = np.exp(wide(x) - wide(x).max(axis=1, keepdims=True))
    assert_close(probs, e / e.sum(axis=1, keepdims=True), rtol=1e-2)


MIXED = """
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * y[i] + 0.5
}
"""


@pytest.mark.parametrize("other,result", [
    (np.float32, np.float32), (np.float64, np.float64), (np.float16, np.float32),
    (BF16, BF16), (np.int32, BF16)])
def test_promotion(rng, other, result):
    """bf16 op f32 is f32, op f64 f64, op f16 f32 (neither holds the other), op int bf16."""
    x = bf16(rng, 13)
    y = (rng.integers(1, 5, 13) if other == np.int32 else rng.uniform(0.5, 2, 13)).astype(other)
    z = zynml.run(MIXED, device="cpu", x=x, y=y)["z"]
    assert z.dtype == np.dtype(result)
    reference = wide(x) * wide(y) + 0.5
    assert_close(z, reference, rtol=1e-2 if result in (BF16, np.float16) else 1e-6)


def test_f16_and_bf16_convert_through_f32():
    """Assignments between f16 and bf16 round once (f16 -> f32 is exact): 1 + 2^-10 is
    no bf16 (it rounds to 1), 1 + 2^-7 is (f16 keeps it), 2^20 is no f16 (inf)."""
    source = """
let as_bf16 = compute(x, h) {
    @kernel elementwise
    for i in 0..n:
        var v = x[i]
        v = h[i]
        out[i] = v
}
let as_f16 = compute(x, h) {
    @kernel elementwise
    for i in 0..n:
        var v = h[i]
        v = x[i]
        out[i] = v
}
"""
    values = np.array([1 + 2 ** -10, 1 + 2 ** -7, 0.3, -2.5, 2.0 ** 20, 1e-6])
    with np.errstate(over="ignore"):
        x, h = values.astype(BF16), values.astype(np.float16)
    out = zynml.run(source, device="cpu", x=x, h=h)
    assert out["as_bf16"].dtype == BF16 and out["as_f16"].dtype == np.float16
    np.testing.assert_array_equal(out["as_bf16"].view(np.uint16), h.astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(out["as_f16"], x.astype(np.float16))
    assert wide(out["as_bf16"])[0] == 1.0 and np.isinf(out["as_f16"][4])


SCALE = """
pipeline scale(x: tensor[n], s: TYPE) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * s
    }
    return y
"""


@pytest.mark.parametrize("type_,dtype", [("bf16", BF16), ("f16", np.float16)])
def test_declared_16_bit_scalar_parameter_takes_a_python_float(type_, dtype):
    """1.3 is no bf16 or f16: the parameter holds it rounded to its type, as the array
    arguments of that type would."""
    prog = zynml.compile(SCALE.replace("TYPE", type_), device="cpu")
    y = prog.scale(np.ones(3, dtype), 1.3)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(wide(y), [float(np.array(1.3).astype(dtype))] * 3)
    f32 = prog.scale(np.ones(3, np.float32), 1.3)  # f32 array: f32 product, s still rounded
    assert f32.dtype == np.float32
    np.testing.assert_array_equal(f32, [float(np.array(1.3).astype(dtype))] * 3)


def test_bf16_zeros_from_allocate():
    out = zynml.run('let z = allocate(shape=[2, 3], dtype=bfloat16, device="cpu")\n',
                    device="cpu")
    assert out["z"].dtype == BF16 and out["z"].shape == (2, 3) and not out["z"].any()


TYPED_SUM = """
let total = compute(x) {
    @kernel fused
    for r in 0..1:
        var acc: f32 = 0.0
        for c in 0..n:
            acc += x[c]
        out[r] = acc
}
"""


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_var_declared_f32_sums_bf16_in_f32(rng, device):
    """`var acc: f32` keeps 24 bits where the kernel's float, bf16, keeps 8: 1000 terms
    near 1 sum to f32's precision (the output takes the f32 written to it) where a bf16
    sum stalls at a few hundred (the interpreter rounds every bf16 operation, as the semantics
    say)."""
    x = np.abs(bf16(rng, 1000, low=0.9375, high=1.0625))
    exact = wide(x).sum()
    out = zynml.run(TYPED_SUM, device=device, x=x)["total"]
    assert out.dtype == np.float32
    assert abs(wide(out)[0] - exact) <= 1e-5 * exact
    untyped = zynml.run(TYPED_SUM.replace("var acc: f32", "var acc"), device="interpreter",
                        x=x)["total"]
    assert wide(untyped)[0] <= 0.6 * exact  # stuck at 256 or 512, where the spacing is 2 or 4
