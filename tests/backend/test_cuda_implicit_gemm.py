"""implicit_gemm's plan of k (zynml/backend/cuda/strategies/gemm_sides.py: `k_plan`)
and its kernels at run-time sizes, compiled without a GPU (they run in
tests/runtime/test_cuda_dynamic.py)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.backend.cuda.strategies.gemm_sides import k_plan
from zynml.runtime.cuda.artifact import launches

CONV2D = Path(__file__).resolve().parents[1] / "programs" / "examples" / "conv2d.zyn"
# a convolution's loops: b, oc, oh, ow, then the reduction loops ic, kh, kw
K = [4, 5, 6]


@pytest.mark.parametrize("extents,tile_k,plan", [
    ([2, 64, 56, 56, 64, 3, 3], 16, ([5, 6, 4], True)),  # (ic, kh, kw) -> (kh, kw, ic)
    ([2, 64, 56, 56, 64, 3, 3], 8, ([5, 6, 4], True)),
    ([2, 64, 9, 9, 24, 3, 3], 16, ([4, 5, 6], False)),   # none a multiple of BK
    ([2, 64, 9, 9, 8, 16, 16], 8, ([4, 5, 6], True)),    # equals: the latest stays last
    ([2, 64, 9, 9, 32, 16, 3], 16, ([5, 6, 4], True)),   # the longest that BK divides
    ([None] * 7, 16, ([5, 6, 4], True)),                 # run time: the first run-time one
    ([None] * 4 + [3, None, None], 16, ([4, 6, 5], True)),
    ([None] * 4 + [None, 3, 32], 16, ([4, 5, 6], True)),  # a static multiple wins
])
def test_k_plan(extents, tile_k, plan):
    assert k_plan(K, extents, tile_k) == plan


def test_a_convolution_of_run_time_sizes_is_an_implicit_gemm():
    """Every size run-time: the GEMM's grid is host arithmetic, the kernels use no local
    memory in the PTX (before: a thread per output, 576 FMAs each at the benchmark's
    size), and ask ptxas for two resident blocks (.minnctapersm 2: its extents and
    strides as arguments took it to 130 registers, one block a multiprocessor; held to
    128, 0.305 -> 0.268 ms at the benchmark's size on an H200, Session 32)."""
    prog = zynml.compile(CONV2D, device="cuda", require_device=False, dynamic=True)
    ones = lambda *shape: np.ones(shape, np.float32)  # noqa: E731 (only shapes matter)
    artifact = prog.artifact(input=ones(2, 20, 11, 11), kernel=ones(24, 20, 3, 3),
                             bias=ones(24), in_h=11, in_w=11, out_h=11, out_w=11)
    steps = list(launches(artifact.plan["body"]))
    # k's stages run along the input channels: a kernel for a channel count that BK
    # divides, which the launch tests, one with the last stage of each run partial; for
    # no channels at all (K = 0) none (the output keeps the bias)
    assert [s["kernel"].split("_", 1)[1] for s in steps] == \
        ["pointwise", "implicit_gemm", "implicit_gemm_partial"]
    grid = steps[1]["grid"]
    assert isinstance(grid[0], str) and isinstance(grid[1], str) and grid[2] == 1, grid
    assert None in artifact.plan["inputs"][0]["shape"]
    whole, partial = (artifact.ptx.split(f".entry {s['kernel']}(", 1)[1].split(".entry")[0]
                      for s in steps[1:3])
    assert "local" not in whole and "local" not in partial
    assert ".minnctapersm 2" in whole and ".minnctapersm 2" in partial
    # the whole-stage kernel masks and clamps no k (the partial one each staged element's)
    assert whole.count("selp.") < partial.count("selp.") / 2


def test_a_run_time_window_launches_only_where_k_is_not_empty():
    """64 input channels (static, the stages' loop) and a run-time window: one kernel,
    launched where K = channels x window > 0, none elsewhere."""
    prog = zynml.compile(CONV2D, device="cuda", require_device=False,
                         dynamic=["kernel_h", "kernel_w"])
    ones = lambda *shape: np.ones(shape, np.float32)  # noqa: E731 (only shapes matter)
    artifact = prog.artifact(input=ones(2, 64, 11, 11), kernel=ones(24, 64, 3, 3),
                             bias=ones(24), in_h=11, in_w=11, out_h=11, out_w=11)
    steps = list(launches(artifact.plan["body"]))
    assert [s["kernel"].split("_", 1)[1] for s in steps] == ["pointwise", "implicit_gemm"]


def test_a_static_convolution_leaves_ptxas_its_registers():
    """The static kernel (127 registers, two blocks a multiprocessor anyway) ran slower
    with .minnctapersm 2 (0.213 against 0.204 ms, H200, Session 32): it has none."""
    prog = zynml.compile(CONV2D, device="cuda", require_device=False)
    ones = lambda *shape: np.ones(shape, np.float32)  # noqa: E731 (only shapes matter)
    artifact = prog.artifact(input=ones(2, 64, 11, 11), kernel=ones(24, 64, 3, 3),
                             bias=ones(24), in_h=11, in_w=11, out_h=11, out_w=11)
    assert any(s["kernel"].endswith("implicit_gemm") for s in launches(artifact.plan["body"]))
    assert ".minnctapersm" not in artifact.ptx
