"""cir-join-stores: a loop's stores that together write a whole range become one store.

RoPE written as users write it (two stores per pair: interleaved, or a row's halves,
after an RMSNorm of the row) and programs of three stores compute what float64 numpy
says, on the CPU at odd sizes and at run-time sizes (one compile); on CUDA each is one
kernel (launch plans, no GPU needed), and the numbers hold on a GPU
(tools/gpu_tests.sh)."""
from pathlib import Path

import numpy as np
import pytest

import conftest
import zynml
from conftest import assert_close
from kernels import fused_reference
from zynml.runtime.cuda.artifact import launches

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
RMS_NORM_ROPE = (PROGRAMS / "rms_norm_rope_pairs.zyn").read_text()
SPEC_ROPE = PROGRAMS / "examples" / "rope.zyn"
# head rows of 1, 2, 14 and 130 elements (d = 2 * half), a few tokens and heads each
SHAPES = [(1, 1, 1, 2), (2, 3, 5, 14), (1, 7, 3, 130), (3, 5, 2, 6)]

THIRDS = """
let y = compute(x) {
    @kernel elementwise
    for r in 0..rows, p in 0..n:
        out[r, 3 * p + 2] = x[r, p] * x[r, p]
        out[r, 3 * p] = x[r, p]
        out[r, 3 * p + 1] = x[r, p] + 1.0
}
"""

# three blocks of a row of length 3 n, n = len / 3 (`len`: an integer input)
BLOCKS = """
let y = compute(x) {
    @kernel elementwise
    for r in 0..rows, p in 0..len / 3:
        out[r, p + len / 3] = x[r, p] * 2.0
        out[r, p + 2 * (len / 3)] = x[r, p] - 1.0
        out[r, p] = x[r, p + len / 3] + x[r, p + 2 * (len / 3)]
}
"""


def _inputs(rng, b, s, h, d):
    x = rng.standard_normal((b, s, h, d)).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    angles = rng.uniform(-np.pi, np.pi, (s, d // 2))
    return dict(x=x, w=w, cos=np.cos(angles).astype(np.float32),
                sin=np.sin(angles).astype(np.float32), eps=1e-5)


def rms_norm_rope(form, x, w, cos, sin, eps):
    """float64 reference of the two pipelines of rms_norm_rope_pairs.zyn (x [b, s, h, d]):
    the library's reference at each b."""
    style = "interleaved" if form == "interleaved" else "half"
    return np.stack([fused_reference.rms_norm_rope(row, w, cos, sin, eps, style)
                     for row in x])


@pytest.mark.parametrize("form", ["interleaved", "rotate_half"])
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_rope_matches_float64_on_the_cpu(rng, form, shape):
    inputs = _inputs(rng, *shape)
    prog = zynml.compile(RMS_NORM_ROPE, device="cpu")
    assert_close(getattr(prog, form)(**inputs), rms_norm_rope(form, **inputs), rtol=1e-5)


@pytest.mark.parametrize("form", ["interleaved", "rotate_half"])
def test_one_compile_serves_every_size_on_the_cpu(rng, form):
    prog = zynml.compile(RMS_NORM_ROPE, device="cpu", dynamic=True)
    for shape in SHAPES:
        inputs = _inputs(rng, *shape)
        assert_close(getattr(prog, form)(**inputs), rms_norm_rope(form, **inputs),
                     rtol=1e-5)
    assert getattr(prog, form)._program.stats().specializations == 1


@pytest.mark.parametrize("rows, n", [(1, 1), (3, 7), (2, 13)])
def test_three_interleaved_stores(rng, rows, n):
    x = rng.standard_normal((rows, n)).astype(np.float32)
    wide = x.astype(np.float64)
    want = np.empty((rows, 3 * n))
    want[:, 0::3], want[:, 1::3], want[:, 2::3] = wide, wide + 1, wide * wide
    assert_close(zynml.run(THIRDS, x=x, device="cpu")["y"], want)
    assert len(_cuda_launches(THIRDS, x=x)) == 1


@pytest.mark.parametrize("rows, n", [(1, 1), (3, 7), (2, 13)])
def test_three_blocks_of_a_row(rng, rows, n):
    x = rng.standard_normal((rows, 3 * n)).astype(np.float32)
    wide = x.astype(np.float64)
    first = wide[:, :n]
    want = np.concatenate([wide[:, n:2 * n] + wide[:, 2 * n:], first * 2, first - 1], 1)
    assert_close(zynml.run(BLOCKS, x=x, len=3 * n, device="cpu")["y"], want)
    assert len(_cuda_launches(BLOCKS, x=x, len=3 * n)) == 1


def _cuda_launches(source, pipeline=None, **inputs):
    prog = zynml.compile(source, device="cuda", require_device=False)
    if pipeline:
        prog = getattr(prog, pipeline)._program
    return list(launches(prog.artifact(**inputs).plan["body"]))


@pytest.mark.parametrize("form, blocks", [("interleaved", 18), ("rotate_half", 9)])
def test_rms_norm_rope_is_one_row_kernel_on_cuda(rng, form, blocks):
    [launch] = _cuda_launches(RMS_NORM_ROPE, form, **_inputs(rng, 2, 9, 4, 128))
    assert launch["strategy"] == "row_fused"
    # a warp per 128-element row, 4 rows a block: 72 rows in 18 blocks; rotate-half's
    # warps take two heads each (their angles and weight loaded once): 9 blocks
    assert launch["block"] == [128, 1, 1] and launch["grid"] == [blocks, 1, 1]


def test_the_spec_rope_is_one_kernel_on_cuda(rng):
    x = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    angles = rng.standard_normal((5, 4)).astype(np.float32)
    [launch] = _cuda_launches(SPEC_ROPE, x=x, cos_cache=np.cos(angles),
                              sin_cache=np.sin(angles), head_dim=8)
    assert launch["strategy"] == "pointwise"


def test_stores_that_leave_gaps_stay_strided_writes(rng):
    """out[4p], out[4p + 1], out[4p + 3] leave out[4p + 2]: a kernel each after the
    zero fill, the gaps 0."""
    source = THIRDS.replace("3 * p", "4 * p").replace("4 * p + 2]", "4 * p + 3]")
    x = rng.standard_normal((2, 5)).astype(np.float32)
    want = np.zeros((2, 20))
    want[:, 0::4], want[:, 1::4] = x, x + 1.0
    want[:, 3::4] = x.astype(np.float64) ** 2
    assert_close(zynml.run(source, x=x, device="cpu")["y"], want)
    assert len(_cuda_launches(source, x=x)) == 4


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["interleaved", "rotate_half"])
@pytest.mark.parametrize("shape", SHAPES + [(4, 33, 8, 128), (1, 5, 3, 64),
                                   (3, 5, 2, 128), (2, 3, 5, 128), (1, 1, 2, 128)])
def test_cuda_rms_norm_rope_matches_float64(rng, form, shape):
    """(3, 5, 2, 128): 30 rows, two a warp, the last block's last warp idle; 5 heads:
    a row a warp."""
    inputs = _inputs(rng, *shape)
    prog = getattr(zynml.compile(RMS_NORM_ROPE, device="cuda:0"), form)
    assert_close(prog(**inputs), rms_norm_rope(form, **inputs), rtol=1e-5)


@pytest.mark.gpu
def test_cuda_rotate_half_from_unaligned_torch_views(rng):
    """Every input 4 bytes past a 16-byte boundary: the chunk loads of the weight and
    the angle tables check at run time and read a column at a time."""
    inputs = _inputs(rng, 2, 7, 4, 128)
    prog = zynml.compile(RMS_NORM_ROPE, device="cuda:0").rotate_half
    prog._program.artifact(**inputs)  # compile-only runs stop at the skip below
    if conftest.COMPILE_ONLY:
        pytest.skip("compile-only: no GPU for torch")
    torch = pytest.importorskip("torch")
    views = {name: conftest.torch_unaligned(torch, array)
             if isinstance(array, np.ndarray) else array for name, array in inputs.items()}
    got = torch.as_tensor(prog(**views), device="cuda").cpu().numpy()
    assert_close(got, rms_norm_rope("rotate_half", **inputs), rtol=1e-5)
