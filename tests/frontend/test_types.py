"""Scalar types and promotion (zynml/frontend/types.py), bf16 in particular: the table of
promotions, numpy dtypes both ways, and what the checker accepts and rejects (located)."""
import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.frontend.types import (F32, F64, FLOAT_LITERAL, INDEX, INT_LITERAL, SCALARS,
                                  TensorType, from_numpy, promote, to_numpy)

BF16, F16, I32 = SCALARS["bf16"], SCALARS["f16"], SCALARS["i32"]


@pytest.mark.parametrize("a,b,common", [
    (BF16, BF16, BF16),
    (BF16, F32, F32),
    (BF16, F64, F64),
    (BF16, F16, F32),          # neither holds the other: f32 holds both
    (BF16, FLOAT_LITERAL, BF16),
    (BF16, INT_LITERAL, BF16),
    (BF16, INDEX, BF16),
    (BF16, I32, BF16),
    (F16, F32, F32),
])
def test_promotion(a, b, common):
    assert promote(a, b) == common
    assert promote(b, a) == common


def test_bf16_never_mixes_with_bool():
    assert promote(BF16, SCALARS["bool"]) is None


def test_bf16_is_a_16_bit_float():
    assert BF16.is_float and not BF16.is_int and BF16.bits == 16
    assert str(BF16) == "bf16"


@pytest.mark.parametrize("name,dtype", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16),
                                        ("f32", np.float32)])
def test_numpy_dtypes_both_ways(name, dtype):
    assert from_numpy(np.dtype(dtype)) == SCALARS[name]
    assert to_numpy(SCALARS[name]) == np.dtype(dtype)


def test_other_two_byte_dtypes_are_not_bf16():
    """ml_dtypes' bfloat16 prints as '<V2'; a plain 2-byte void is not it."""
    assert from_numpy(np.dtype("V2")) is None
    assert from_numpy(np.dtype(np.uint16)) == SCALARS["u16"]


MIXED = """let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * y[i] + 0.5
}
"""


@pytest.mark.parametrize("other,result", [
    (ml_dtypes.bfloat16, ml_dtypes.bfloat16), (np.float16, np.float32),
    (np.float32, np.float32), (np.float64, np.float64), (np.int32, ml_dtypes.bfloat16)])
def test_checked_result_types(other, result):
    """The kernel's result type, read off the checked program (no compile)."""
    prog = zynml.compile(MIXED)
    checked = prog._check({"x": _tensor("bf16", 5), "y": _tensor(from_numpy(other).name, 5)},
                          {})
    assert to_numpy(checked.steps[0].ty.dtype) == np.dtype(result)


def _tensor(name, n):
    return TensorType(SCALARS[name], (n,))


def test_kernel_float_of_bf16_and_f16_inputs_is_f32():
    """`var s = 0.0` takes the kernel's float: with bf16 and f16 inputs, f32."""
    source = """let s = compute(x, h) {
    @kernel reduce(+)
    for i in 0..n:
        var acc = 0.0
        acc = x[i] * h[i]
        yield acc
}
"""
    checked = zynml.compile(source)._check({"x": _tensor("bf16", 3), "h": _tensor("f16", 3)}, {})
    assert checked.steps[0].kernel.default_float == F32


def test_pipeline_parameter_and_allocate_accept_bf16():
    source = """pipeline scale(x: tensor[n], s: bf16) -> tensor[n]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] * s
    }
    return y
"""
    zynml.compile(source)
    zynml.compile('let z = allocate(shape=[2, 3], dtype=bfloat16, device="cpu")\n'
                  'let w = allocate(shape=[5], dtype=bf16, device="cpu")\n')


def _located(error, where, message, source):
    text = str(error)
    assert text.startswith(f"<string>:{where}: error: {message}"), text
    line, col = (int(p) for p in where.split(":"))
    source_line, caret = text.splitlines()[1:3]
    assert source_line == source.splitlines()[line - 1]
    assert caret == " " * (col - 1) + "^"


BF16_ERRORS = {
    "bf16 + bool": ("let y = compute(x, b) {\n    @kernel elementwise\n    for i in 0..n:\n"
                    "        out[i] = x[i] + b[i]\n}\n",
                    dict(b=np.ones(3, bool)), "4:18", "operator '+' cannot combine bf16 and bool"),
    "bf16 index": ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                   "        let s = x[i]\n        out[i] = x[s]\n}\n",
                   {}, "5:20", "index must be an integer, got bf16"),
    "bf16 into an integer var": ("let y = compute(x) {\n    @kernel elementwise\n"
                                 "    for i in 0..n:\n        var k = 0\n        k = x[i]\n"
                                 "        out[i] = k\n}\n",
                                 {}, "5:13", "cannot assign a bf16 value to an integer variable"),
}


@pytest.mark.parametrize("name", sorted(BF16_ERRORS))
def test_bf16_mistakes_are_located_at_the_call(name):
    source, others, where, message = BF16_ERRORS[name]
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, x=np.ones(3, ml_dtypes.bfloat16), **others)
    _located(info.value, where, message, source)


@pytest.mark.parametrize("source,where,message", [
    ("pipeline p(x: tensor[n], s: bf17) -> tensor[n]:\n    let y = compute(x) {\n"
     "        @kernel elementwise\n        for i in 0..n:\n            out[i] = x[i] * s\n"
     "    }\n    return y\n", "1:29", "unknown parameter type 'bf17'"),
    ('let z = allocate(shape=[2, 3], dtype=bfloat17, device="cpu")\n', "1:38",
     "dtype= takes one of bf16, bfloat16, bool"),
])
def test_misspelt_bf16_is_located(source, where, message):
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.compile(source)
    _located(info.value, where, message, source)


def test_unsupported_dtype_message_lists_bf16():
    with pytest.raises(zynml.ZynMLError, match=r"does not support \(f16, bf16, f32"):
        zynml.run(MIXED, x=np.ones(3, np.complex64), y=np.ones(3, np.float32))
