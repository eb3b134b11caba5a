"""pointwise's vector sums (zynml/backend/cuda/strategies/pointwise_vector_sums.py): a
reduction of many outputs along a contiguous axis takes W neighbouring outputs a thread,
read with vector accesses, its sum unrolled. Without a GPU: which reductions take it (the
launch plan: fewer threads than outputs). On a GPU (marked `gpu`): column sums in groups,
f32 and bf16, maxima, a layer norm's two parameter gradients (per-row values beside the
vector reads), and views 4 bytes past a 16-byte boundary (the scalar branch), against
float64 numpy at odd sizes."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

from conftest import COMPILE_ONLY, assert_close, torch_unaligned

SUMS = """
let total = compute(x) {{
    @kernel reduce({op}, axis=1)
    for g in 0..groups, r in 0..rows, c in 0..cols:
        yield {value}
}}
"""
PARAM_GRADS = """
let (dw, db) = compute(x, grad, mean, rstd) {
    @kernel fused
    for g in 0..groups, c in 0..cols:
        var sx = 0.0
        var sg = 0.0
        for j in 0..rows:
            let gr = cast(grad[g, j, c], float)
            sx += gr * (x[g, j, c] - mean[g, j]) * rstd[g, j]
            sg += gr
        out.dw[g, c] = sx
        out.db[g, c] = sg
}
"""
F32_SUM = SUMS.format(op="+", value="x[g, r, c]")
BF16_SUM = SUMS.format(op="+", value="cast(x[g, r, c], f32)")


# Up to 16384 outputs take pointwise_split's kernel by default: with it off, small sizes
# reach this one too
NO_SPLIT = "pointwise.split_warps=1"


def _program(source: str, require_device: bool = False, params: str = NO_SPLIT):
    return zynml.compile(source, device="cuda:0", require_device=require_device,
                         params=params)


def _grid(source: str, params: str = NO_SPLIT, **inputs) -> tuple[int, int]:
    """(blocks, threads a block) of the program's one reduction kernel."""
    program = _program(source, params=params)
    [step] = [s for s in launches(program.artifact(**inputs).plan["body"])
              if s["strategy"] == "pointwise" and "fill" not in s["kernel"]]
    return step["grid"][0], step["block"][0]


@pytest.mark.parametrize("shape, lanes", [
    ((256, 64, 768), 4), ((3, 37, 100), 4), ((1, 1, 4), 4),
    ((200, 64, 97), 1),   # 97 columns: not whole chunks of 4
])
def test_many_outputs_along_a_contiguous_axis_take_chunks(shape, lanes):
    groups, _, cols = shape
    blocks, block = _grid(F32_SUM, x=np.ones(shape, np.float32))
    assert blocks == -(-(groups * cols // lanes) // block)


def test_bf16_inputs_to_f32_sums_take_chunks_of_four():
    """W is 16 bytes of the widest element (the f32 sums), so bf16 loads are 8 bytes."""
    blocks, block = _grid(BF16_SUM, x=np.ones((5, 64, 776), ml_dtypes.bfloat16))
    assert blocks == -(-(5 * 776 // 4) // block)


def test_row_sums_do_not_take_chunks():
    """The innermost parallel loop indexes a row, not the contiguous axis: row_reduce's
    or a thread per output, not this kernel."""
    source = """
let total = compute(x) {
    @kernel reduce(+, axis=1)
    for c in 0..cols, r in 0..rows:
        yield x[c, r] * x[c, r]
}
"""
    program = _program(source)
    steps = launches(program.artifact(x=np.ones((4096, 36), np.float32)).plan["body"])
    assert all(s["grid"][0] * s["block"][0] >= 4096 for s in steps
               if s["strategy"] == "pointwise" and "fill" not in s["kernel"])


def test_more_outputs_than_the_split_takes_take_chunks_by_default():
    blocks, block = _grid(F32_SUM, params="", x=np.ones((41, 37, 404), np.float32))
    assert blocks == -(-(41 * 404 // 4) // block)


def _run(source: str, params: str = NO_SPLIT, **inputs):
    if COMPILE_ONLY:
        _program(source, params=params).artifact(**inputs)
        pytest.skip("compile-only: the artifact is in the cache")
    return _program(source, require_device=True, params=params)(**inputs)


@pytest.mark.gpu
@pytest.mark.parametrize("shape, params", [
    ((1, 1, 4), NO_SPLIT), ((5, 64, 100), NO_SPLIT), ((7, 37, 1028), NO_SPLIT),
    ((2, 30, 12), NO_SPLIT), ((41, 37, 404), "")])
@pytest.mark.parametrize("op", ["+", "max"])
def test_cuda_vector_sums_and_maxima_match_float64(rng, shape, params, op):
    x = rng.standard_normal(shape).astype(np.float32)
    got = np.asarray(_run(SUMS.format(op=op, value="x[g, r, c]"), params, x=x)["total"])
    wide = x.astype(np.float64)
    want = wide.sum(axis=1) if op == "+" else wide.max(axis=1)
    assert_close(got, want, rtol=1e-5, floor=np.abs(wide).sum(axis=1).max() * 1e-6)


@pytest.mark.gpu
def test_cuda_bf16_column_sums_match_float64(rng):
    x = rng.standard_normal((3, 64, 776)).astype(ml_dtypes.bfloat16)
    got = np.asarray(_run(BF16_SUM, x=x)["total"])
    wide = x.astype(np.float64)
    assert_close(got, wide.sum(axis=1), rtol=1e-5, floor=np.abs(wide).sum(axis=1).max() * 1e-6)


@pytest.mark.gpu
def test_cuda_layer_norm_parameter_gradients_match_float64(rng):
    """Two outputs, bf16 vector reads beside per-row f32 values read once a point."""
    groups, rows, cols = 5, 64, 104
    x, grad = (rng.standard_normal((groups, rows, cols)).astype(ml_dtypes.bfloat16)
               for _ in range(2))
    mean = rng.standard_normal((groups, rows)).astype(np.float32)
    rstd = rng.uniform(0.5, 2.0, (groups, rows)).astype(np.float32)
    out = _run(PARAM_GRADS, x=x, grad=grad, mean=mean, rstd=rstd)
    wide_x, wide_g = x.astype(np.float64), grad.astype(np.float64)
    xhat = (wide_x - mean[..., None]) * rstd[..., None]
    assert_close(out["dw"], (wide_g * xhat).sum(axis=1), rtol=1e-5, floor=1e-2)
    assert_close(out["db"], wide_g.sum(axis=1), rtol=1e-5, floor=1e-2)


@pytest.mark.gpu
def test_cuda_vector_sums_of_unaligned_torch_views(rng):
    """An input 4 bytes past a 16-byte boundary: the kernel checks at run time and reads
    a lane at a time instead."""
    x = rng.standard_normal((5, 64, 100)).astype(np.float32)
    _program(F32_SUM).artifact(x=x)  # compile-only runs stop at the skip below
    if COMPILE_ONLY:
        pytest.skip("compile-only: no GPU for torch")
    torch = pytest.importorskip("torch")
    got = torch.as_tensor(_program(F32_SUM, require_device=True)(
        x=torch_unaligned(torch, x))["total"], device="cuda").cpu().numpy()
    assert_close(got, x.astype(np.float64).sum(axis=1), rtol=1e-5, floor=1e-3)


@pytest.mark.gpu
def test_cuda_run_time_sizes_one_compile_match_float64(rng):
    """One kernel for every size: columns in whole chunks of 4 or not (single outputs),
    sums of 64 rows (16 a trip), 37 (two trips and 5 one at a time) and 3 (one at a
    time), and the library's dynamic column sum (reduce_sum.zyn's sum_middle)."""
    program = zynml.compile(F32_SUM, device="cuda:0", require_device=not COMPILE_ONLY,
                            dynamic=True, params=NO_SPLIT)
    shapes = [(5, 64, 100), (3, 37, 97), (2, 3, 4), (1, 1, 1)]
    xs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    if COMPILE_ONLY:
        program.artifact(x=xs[0])
        pytest.skip("compile-only: the artifact is in the cache")
    for x in xs:
        got = np.asarray(program(x=x)["total"])
        wide = x.astype(np.float64)
        assert_close(got, wide.sum(axis=1), rtol=1e-5,
                     floor=np.abs(wide).sum(axis=1).max() * 1e-6)
    assert program.stats().specializations == 1
