"""cast(value, T) (frontend/cast_calls.py): conversion to a scalar type or to an input's
element type, run on the CPU against numpy, and its errors."""
import ml_dtypes
import numpy as np
import pytest

import zynml

CENTRED = """
let centred = compute(x, w) {
    @kernel fused
    for r in 0..rows:
        var s: f32 = 0.0
        for c in 0..cols:
            s += x[r, c]
        for c in 0..cols:
            out[r, c] = cast(x[r, c] * w[c] - s / cols, x)
}
let truncated = compute(x) {
    @kernel elementwise
    for r in 0..rows, c in 0..cols:
        out[r, c] = cast(x[r, c] * 4.0, i32)
}
"""


def _reference(x, w):
    """The same arithmetic as the kernel: the product in x's dtype, then f32."""
    product = (x * w).astype(np.float32)
    mean = x.astype(np.float32).sum(1, keepdims=True) / x.shape[1]
    return product - mean


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 7), (5, 131)])
def test_cast_to_an_input_type_rounds_once(rows, cols):
    rng = np.random.default_rng(rows * cols)
    x = rng.normal(size=(rows, cols)).astype(ml_dtypes.bfloat16)
    w = rng.normal(size=cols).astype(ml_dtypes.bfloat16)
    r = zynml.run(CENTRED, x=x, w=w, device="cpu")
    assert r["centred"].dtype == ml_dtypes.bfloat16
    want = _reference(x, w).astype(ml_dtypes.bfloat16)  # one rounding of the f32 value
    np.testing.assert_allclose(r["centred"].astype(np.float64), want.astype(np.float64),
                               rtol=1e-2, atol=1e-2)
    assert r["truncated"].dtype == np.int32
    # x * 4 is exact in bf16; the conversion truncates toward zero, as numpy's
    np.testing.assert_array_equal(r["truncated"], (x.astype(np.float32) * 4).astype(np.int32))


def test_the_same_source_keeps_f32_inputs_f32():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(3, 13)).astype(np.float32)
    w = rng.normal(size=13).astype(np.float32)
    r = zynml.run(CENTRED, x=x, w=w, device="cpu")
    assert r["centred"].dtype == np.float32
    np.testing.assert_allclose(r["centred"], _reference(x.astype(np.float64), w), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("call,message,column", [
    ("cast(x[i])", "'cast' takes 2 arguments (cast(value, type)), got 1", 18),
    ("cast(x[i], f32, f16)", "'cast' takes 2 arguments", 18),
    ("cast(x[i], foo)", "the second argument of 'cast' is a scalar type", 29),
    ("cast(x[i], i)", "the second argument of 'cast' is a scalar type", 29),
    ("cast(x[i], bool)", "'cast' cannot make a bool of a f32 value", 23),
])
def test_errors_are_located(call, message, column):
    src = f"""
let y = compute(x) {{
    @kernel elementwise
    for i in 0..n:
        out[i] = {call}
}}
"""
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(src, x=np.ones(3, np.float32), device="cpu")
    assert message in str(err.value)
    assert f"<string>:5:{column}: error:" in str(err.value)


WIDENED = """
pipeline widened(x: tensor[n], eps: float) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = cast(x[i], float) * x[i] + eps
    }
    return y
"""


def test_cast_to_float_is_the_kernels_float():
    """`float` names the kernel's float type: with an f32 scalar read, f32 for bf16
    values (the product does not round to bf16) and f64 for f64 ones."""
    prog = zynml.compile(WIDENED, device="cpu")
    x = np.array([1.0 + 2 ** -7, 3.0], ml_dtypes.bfloat16)
    y = prog.widened(x, 0.0)
    assert y.dtype == np.float32
    assert y[0] == np.float32(1.0 + 2 ** -7) ** 2  # a bf16 product would round to 1.015625
    x64 = np.array([1.0 + 2 ** -30], np.float64)
    assert prog.widened(x64, 0.0).dtype == np.float64
    assert prog.widened(x64, 0.0)[0] == (1.0 + 2 ** -30) ** 2
