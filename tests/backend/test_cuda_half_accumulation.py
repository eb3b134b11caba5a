"""f16 / bf16 sums on the native CUDA backend, without a GPU: a product too small for the
GEMM strategies (pointwise: a thread per output) sums in f32 and rounds once, as the
GEMM strategies do, and `var acc: f32` keeps a row kernel's sum in f32. Read off the
PTX: no 16-bit add or multiply is left in those kernels."""
from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "zynml" / "kernels" / "src" / "matmul.zyn"
RMS_NORM_INTO = ROOT / "zynml" / "kernels" / "src" / "rms_norm_into.zyn"
HALF = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _half_arithmetic(ptx: str, name: str) -> list[str]:
    """The 16-bit float adds, multiplies and FMAs of a PTX module (`add.rn.bf16x2`, ...)."""
    return re.findall(rf"\b(?:add|sub|mul|fma)(?:\.rn)?(?:\.noftz)?\.{name}(?:x2)?\b", ptx)


def _kernels(artifact) -> list[str]:
    return [step["kernel"] for step in launches(artifact.plan["body"])]


@pytest.mark.parametrize("dtype", sorted(HALF))
@pytest.mark.parametrize("m, k, n", [(1, 997, 3), (3, 40, 72)])
def test_a_small_half_product_sums_in_f32(dtype, m, k, n):
    """Decode-sized GEMMs (a row or three of tokens) fall to the pointwise strategy; with
    16-bit sums, 997 terms near 1 would stall at 256 (bf16) or 2048 (f16)."""
    rng = np.random.default_rng(0)
    program = zynml.compile(MATMUL, device="cuda", require_device=False).matmul
    artifact = program._program.artifact(a=rng.random((m, k)).astype(HALF[dtype]),
                                         b=rng.random((k, n)).astype(HALF[dtype]))
    assert all(name.endswith("_pointwise") for name in _kernels(artifact))
    assert _half_arithmetic(artifact.ptx, dtype) == []
    assert re.search(rf"cvt\.rn\.{dtype}\.f32", artifact.ptx)  # the one rounding


def test_rms_norm_into_bf16_is_one_f32_row_kernel():
    """The decoder's RMSNorm (f32 vars over bf16 rows): one row kernel, its squares and
    sum in f32 (with the sum a bf16 var, it took 3 kernels and bf16 adds)."""
    x = np.ones((3, 40), ml_dtypes.bfloat16)
    program = zynml.compile(RMS_NORM_INTO, device="cuda", require_device=False)
    artifact = program.artifact(y=x.copy(), x=x, w=np.ones(40, ml_dtypes.bfloat16),
                                eps=1e-5)
    assert [name.split("_", 1)[1] for name in _kernels(artifact)] == ["row_fused"]
    assert _half_arithmetic(artifact.ptx, "bf16") == []
