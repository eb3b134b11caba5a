"""Fused row kernels (row_fused.py) of run-time sizes: a row whose length only run time
knows is held in registers by the kernel whose bound it fits (rows up to 2048, up to
8192 points: the plan's nested "if" steps), and longer rows take the loops through
memory; a run-time number of rows of a known length takes the register kernel at once.
Here: the plans at fixed sizes and the interpreter on the fake driver (no GPU needed),
and the numbers against float64 on a GPU (tools/gpu_tests.sh)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.plan_at_sizes import plan_at_sizes

from conftest import COMPILE_ONLY, assert_close
from runtime.test_cuda_executor import executor_for, fake, upload  # noqa: F401

PROGRAMS = Path(__file__).parents[1] / "programs"
SOFTMAX = (PROGRAMS / "softmax_pipeline.zyn").read_text()
LAYER_NORM = (PROGRAMS / "examples" / "layer_norm.zyn").read_text()


def _softmax(dynamic=True):
    return zynml.compile(SOFTMAX, device="cuda", require_device=False, dynamic=dynamic)


def _softmax_plan(dynamic=True):
    return _softmax(dynamic).softmax._program.artifact(
        x=np.ones((3, 5), np.float32)).plan


def _kernels_at(plan, rows, length):
    fixed = plan_at_sizes(plan, [(rows, length)], {})
    assert fixed is not None
    return [s["kernel"].split("_", 1)[1] for s in launches(fixed["body"])]


def test_a_run_time_row_length_takes_the_register_kernel_it_fits():
    plan = _softmax_plan()
    [branch] = [s for s in plan["body"] if s["op"] == "if"]
    assert [s["kernel"].split("_", 1)[1] for s in branch["then"]] == ["row_fused_upto2048"]
    for length, kernel in ((1, "row_fused_upto2048"), (2048, "row_fused_upto2048"),
                           (2049, "row_fused_upto8192"), (8192, "row_fused_upto8192"),
                           (8193, "row_fused")):
        assert _kernels_at(plan, 7, length) == [kernel]


def test_only_the_memory_kernel_allocates_the_temporaries():
    """The exp values and the row max live in registers; the kernel through memory
    needs them as buffers, allocated in its branch only."""
    plan = _softmax_plan()
    outer_allocs = [s for s in plan["body"] if s["op"] == "alloc"]
    assert len(outer_allocs) == 1  # the result
    [branch] = [s for s in plan["body"] if s["op"] == "if"]
    [inner] = [s for s in branch["else"] if s["op"] == "if"]
    assert [s["op"] for s in inner["else"]].count("alloc") == 2
    assert not [s for s in inner["then"] if s["op"] == "alloc"]


def test_run_time_rows_of_a_known_length_stay_in_registers():
    prog = zynml.compile(SOFTMAX, device="cuda", require_device=False,
                         dynamic=["rows"]).softmax._program
    plan = prog.artifact(x=np.ones((3, 2048), np.float32)).plan
    assert not [s for s in plan["body"] if s["op"] == "if"]
    [launch] = launches(plan["body"])
    assert launch["strategy"] == "row_fused" and isinstance(launch["grid"][0], str)
    assert launch["args"] == ["%in0", plan["outputs"][0]["value"]]  # no temporaries


def test_the_interpreter_takes_the_kernel_the_length_chooses(fake):
    plan = _softmax_plan()
    executor = executor_for(fake, plan)
    for length, kernel in ((3, "row_fused_upto2048"), (2050, "row_fused_upto8192"),
                           (9000, "row_fused")):
        mark = fake.mark()
        out = executor.run_plan([upload(np.ones((2, length), np.float32))])
        assert [launch.kernel.split("_", 1)[1] for launch in fake.since(mark).launches] \
            == [kernel]
        assert out[0].shape == (2, length)


def _on_gpu(source, pipeline=None, **example):
    """`source` compiled with run-time sizes for the GPU; in compile-only mode
    (tools/gpu_tests.sh compile) its artifact at `example`'s dtypes goes into the cache
    and the test stops there."""
    prog = zynml.compile(source, device="cuda" if COMPILE_ONLY else "cuda:0",
                         require_device=not COMPILE_ONLY, dynamic=True)
    if COMPILE_ONLY:
        (getattr(prog, pipeline)._program if pipeline else prog).artifact(**example)
        pytest.skip("compile-only: the artifact is in the cache")
    return prog


# every kernel: 1 and 2048 (the first bound's ends), 2049 and 8192 (the second's), past
# both (the loops through memory), and lengths that are no multiple of a warp or block
LENGTHS = [(1, 1), (3, 7), (5, 2048), (2, 2049), (7, 1000), (3, 8192), (2, 8193),
           (1, 12289), (130, 257)]


@pytest.mark.gpu
def test_cuda_dynamic_softmax_matches_float64(rng):
    prog = _on_gpu(SOFTMAX, "softmax", x=np.ones((3, 5), np.float32))
    for rows, length in LENGTHS:
        x = (rng.standard_normal((rows, length)) * 3).astype(np.float32)
        wide = x.astype(np.float64)
        want = np.exp(wide - wide.max(axis=1, keepdims=True))
        want /= want.sum(axis=1, keepdims=True)
        assert_close(prog.softmax(x=x), want, rtol=1e-5)
    assert prog.softmax._program.stats().specializations == 1


@pytest.mark.gpu
def test_cuda_dynamic_layer_norm_matches_float64(rng):
    example = dict(x=np.ones((3, 5), np.float32), gamma=np.ones(5, np.float32),
                   beta=np.ones(5, np.float32), eps=1e-5)
    prog = _on_gpu(LAYER_NORM, **example)
    for rows, length in LENGTHS:
        x = (rng.standard_normal((rows, length)) + 0.5).astype(np.float32)
        gamma = rng.standard_normal(length).astype(np.float32)
        beta = rng.standard_normal(length).astype(np.float32)
        wide = x.astype(np.float64)
        mean = wide.mean(axis=1, keepdims=True)
        var = ((wide - mean) ** 2).mean(axis=1, keepdims=True)
        want = (wide - mean) / np.sqrt(var + 1e-5) * gamma + beta
        out = prog(x=x, gamma=gamma, beta=beta, eps=1e-5)["normalized"]
        assert_close(out, want, rtol=1e-4, atol=1e-4)
    assert prog.stats().specializations == 1
