"""widen-half-arithmetic in the native CUDA compile (PTX here, no GPU): a bf16 SwiGLU's
sigmoid runs in f32 between the loads and the stores, its exp one ex2.approx (not
libdevice's expf, whose range reduction is an `fma.rm`) and its division an approximate
reciprocal, with one rounding to bf16 per value written; the f32 kernel keeps
libdevice's exp and IEEE division. The numbers are the GPU tests' (the library's SwiGLU
against float64)."""
import numpy as np
import pytest

import zynml

pytest.importorskip("mlir")
ml_dtypes = pytest.importorskip("ml_dtypes")

SOURCE = """
let y = compute(gate, up) {
    @kernel elementwise
    for i in 0..rows, j in 0..d:
        out[i, j] = silu(gate[i, j]) * up[i, j]
}
"""


def _ptx(dtype) -> str:
    prog = zynml.compile(SOURCE, device="cuda", require_device=False)
    x = np.ones((7, 24), dtype)
    return prog.artifact(gate=x, up=x).ptx


def test_bf16_sigmoid_in_f32_rounded_once_per_value():
    ptx = _ptx(ml_dtypes.bfloat16)
    stores = ptx.count("st.global")
    assert "ex2.approx.f32" in ptx and "rcp.approx.f32" in ptx
    assert "fma.rm.f32" not in ptx and "div.rn.f32" not in ptx
    # a rounding per value written (packed two at a time where the path has pairs), none
    # between the operations: without the pass, 20 for these 9 stores (8 elements + 1)
    assert ptx.count("cvt.rn.bf16") <= stores
    assert "neg.bf16" not in ptx and "abs.bf16" not in ptx


def test_f32_kernel_keeps_its_exp_and_division():
    ptx = _ptx(np.float32)
    assert "fma.rm.f32" in ptx  # libdevice's expf
    assert "div.rn.f32" in ptx or "rcp.rn.f32" in ptx
    assert "rcp.approx.f32" not in ptx
