"""gpu-kernels-wait-on-predecessor: with ZYNML_PROGRAMMATIC_LAUNCH, each kernel of a
native CUDA compile for a chip with griddepcontrol (sm_90 and later) waits for the
kernel before it, first of all its work, and lets the next one launch where it returns;
without it, or for sm_80, the kernels are as before. The PTX here (no GPU); the launches are
tests/runtime/test_cuda_programmatic_launch.py's, the numbers the GPU tests'."""
import re

import numpy as np
import pytest

import zynml
from zynml.backend.cuda.target import CudaTarget
from zynml.runtime.cuda.driver import kernels_that_wait

# a softmax and a matrix product: a row kernel, a fill and a wgmma kernel (TMA,
# mbarriers, warp specialization), whose first instructions the pass comes before
SOURCE = """
pipeline step(x: tensor[rows, n], w: tensor[n, m]) -> tensor[rows, m]:
    let p = compute(x) {
        @kernel fused
        for r in 0..rows:
            var top = -1.0e30
            for c in 0..n:
                top = max(top, x[r, c])
            var total = 0.0
            for c in 0..n:
                total += exp(x[r, c] - top)
            for c in 0..n:
                out[r, c] = exp(x[r, c] - top) / total
    }
    let y = compute(p, w) {
        @kernel matmul
        for i in 0..rows, j in 0..m:
            var sum = 0.0
            for k in 0..n:
                sum += p[i, k] * w[k, j]
            out[i, j] = sum
    }
    return y
"""


def _ptx(monkeypatch, knob, target="sm_90a"):
    monkeypatch.setenv("ZYNML_PROGRAMMATIC_LAUNCH", knob)
    prog = zynml.compile(SOURCE, device="cuda", target=target, require_device=False)
    inputs = dict(x=np.ones((256, 64), np.float16), w=np.ones((64, 128), np.float16))
    return prog.step._program.artifact(**inputs).ptx


def _entries(ptx):
    return re.findall(r"\.entry\s+(\w+)\s*\(", ptx)


def test_every_kernel_waits_first(monkeypatch):
    ptx = _ptx(monkeypatch, "1")
    names = _entries(ptx)
    assert len(names) >= 2 and kernels_that_wait(ptx) == set(names)
    for body in re.split(r"\.entry\s+\w+\s*\(", ptx)[1:]:
        # (declarations, and the reads of parameters and special registers aside)
        instructions = [line.strip() for line in body[body.index("{"):].splitlines()
                        if line.strip() and not line.strip().startswith(
                            (".", "//", "{", "ld.param", "mov", "cvta"))]
        assert instructions[0] == "griddepcontrol.wait;", instructions[:3]
        # each `ret` right after the signal to the next kernel
        for at, line in enumerate(instructions):
            if line == "ret;":
                assert instructions[at - 1] == "griddepcontrol.launch_dependents;"


@pytest.mark.parametrize("knob, target", [("0", "sm_90a"), ("1", "sm_80")])
def test_no_waits_without_the_knob_or_on_older_chips(monkeypatch, knob, target):
    ptx = _ptx(monkeypatch, knob, target)
    assert _entries(ptx) and "griddepcontrol" not in ptx and not kernels_that_wait(ptx)


def test_the_option_is_part_of_the_cache_key():
    keys = {CudaTarget(wait_on_predecessor=w).cache_key() for w in (False, True)}
    assert len(keys) == 2
    assert CudaTarget("sm_80", wait_on_predecessor=True).cache_key() == \
        CudaTarget("sm_80").cache_key()  # nothing to wait with: the same kernels
    with pytest.raises(ValueError, match="wait_on_predecessor must be True or False"):
        CudaTarget(wait_on_predecessor="yes")
