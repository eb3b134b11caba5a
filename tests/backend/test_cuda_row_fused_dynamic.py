"""Fused row kernels (row_fused.py) of run-time sizes: a row whose length only run time
knows, a multiple of 4, is held in registers by the kernel of the tightest bound it fits
(rows up to 1024, 2048, 4096, 8192 points: the plan's nested "if" steps); longer rows
and other lengths take the loops through memory; a run-time number of rows of a known
length takes the register kernel at once. Here: the plans at fixed sizes and the
interpreter on the fake driver (no GPU needed), and the numbers against float64 on a
GPU (tools/gpu_tests.sh)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.plan_at_sizes import plan_at_sizes

from conftest import assert_close, dynamic_on_gpu
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
    assert [s["kernel"].split("_", 1)[1] for s in branch["then"]] == ["row_fused_upto1024"]
    for length, kernel in ((4, "row_fused_upto1024"), (1024, "row_fused_upto1024"),
                           (1028, "row_fused_upto2048"), (2048, "row_fused_upto2048"),
                           (4096, "row_fused_upto4096"), (4100, "row_fused_upto8192"),
                           (8192, "row_fused_upto8192"), (8196, "row_fused"),
                           (1, "row_fused"), (2050, "row_fused")):  # no multiple of 4
        assert _kernels_at(plan, 7, length) == [kernel]


def _innermost_else(steps):
    """The steps where every branch's test failed."""
    branches = [s for s in steps if s["op"] == "if"]
    return _innermost_else(branches[0]["else"]) if branches else steps


def test_only_the_memory_kernel_allocates_the_temporaries():
    """The exp values and the row max live in registers; the kernel through memory
    needs them as buffers, allocated in its branch only."""
    plan = _softmax_plan()
    outer_allocs = [s for s in plan["body"] if s["op"] == "alloc"]
    assert len(outer_allocs) == 1  # the result
    memory = _innermost_else(plan["body"])
    assert [s["op"] for s in memory].count("alloc") == 2
    allocs = [s for s in _walk(plan["body"]) if s["op"] == "alloc"]
    assert len(allocs) == 3


def _walk(steps):
    for step in steps:
        yield step
        if step["op"] == "if":
            yield from _walk(step["then"])
            yield from _walk(step["else"])


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
    for length, kernel in ((3, "row_fused"), (2048, "row_fused_upto2048"),
                           (4100, "row_fused_upto8192"), (9000, "row_fused")):
        mark = fake.mark()
        out = executor.run_plan([upload(np.ones((2, length), np.float32))])
        assert [launch.kernel.split("_", 1)[1] for launch in fake.since(mark).launches] \
            == [kernel]
        assert out[0].shape == (2, length)


# every kernel at its bound's ends (4 and 1024, 1028 and 2048, 4096, 4100 and 8192),
# lengths that are no multiple of 4 or past every bound (the loops through memory), and
# rows of no multiple of a warp or a block
LENGTHS = [(1, 1), (3, 4), (3, 7), (2, 1024), (4, 1028), (5, 2048), (2, 2049), (7, 1000),
           (3, 4096), (6, 4100), (3, 8192), (2, 8193), (2, 8196), (1, 12289), (130, 256),
           (33, 768)]


@pytest.mark.gpu
def test_cuda_dynamic_softmax_matches_float64(rng):
    prog = dynamic_on_gpu(SOFTMAX, "softmax", x=np.ones((3, 5), np.float32))
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
    prog = dynamic_on_gpu(LAYER_NORM, **example)
    for rows, length in LENGTHS:
        x = (rng.standard_normal((rows, length)) + 0.5).astype(np.float32)
        gamma = rng.standard_normal(length).astype(np.float32)
        beta = rng.standard_normal(length).astype(np.float32)
        wide = x.astype(np.float64)
        mean = wide.mean(axis=1, keepdims=True)
        var = ((wide - mean) ** 2).mean(axis=1, keepdims=True)
        want = (wide - mean) / np.sqrt(var + 1e-5) * gamma + beta
        out = prog(x=x, gamma=gamma, beta=beta, eps=1e-5)["normalized"]
        assert_close(out, want, rtol=1e-4)
    assert prog.stats().specializations == 1


RESIDUAL_LAYER_NORM = (PROGRAMS / "examples" / "transformer_residual_layernorm.zyn").read_text()


@pytest.mark.gpu
def test_cuda_dynamic_residual_layer_norm_matches_float64(rng):
    """Two inputs added, then normalized with E[x^2] - E[x]^2, over [batch, seq] rows."""
    example = dict(x=np.ones((2, 3, 8), np.float32), projected=np.ones((2, 3, 8), np.float32),
                   ln_weight=np.ones(8, np.float32), ln_bias=np.ones(8, np.float32))
    prog = dynamic_on_gpu(RESIDUAL_LAYER_NORM, **example)
    for rows, length in LENGTHS:
        batch = 2 if rows % 2 == 0 else 1
        shape = (batch, rows // batch, length)
        x, projected = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        weight, bias = (rng.standard_normal(length).astype(np.float32) for _ in range(2))
        val = x.astype(np.float64) + projected
        mean = val.mean(axis=-1, keepdims=True)
        var = (val * val).mean(axis=-1, keepdims=True) - mean * mean
        want = (val - mean) / np.sqrt(var + 1e-6) * weight + bias
        out = prog(x=x, projected=projected, ln_weight=weight, ln_bias=bias)["normed"]
        assert_close(out, want, rtol=1e-4)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
def test_cuda_dynamic_row_sums_filled_elsewhere_are_read_before_they_are_stored(rng):
    """At run-time sizes the sums' zero fill runs as a kernel of its own, so the register
    kernel reads each row's starting sum from memory while thread 0 stores the new one:
    read after the block's barrier, a warp now and then took the stored sum as its
    start (one row in a few thousand, a whole warp's columns wrong). Many rows, twice."""
    example = dict(x=np.ones((2, 3, 8), np.float32), projected=np.ones((2, 3, 8), np.float32),
                   ln_weight=np.ones(8, np.float32), ln_bias=np.ones(8, np.float32))
    prog = dynamic_on_gpu(RESIDUAL_LAYER_NORM, **example)
    shape = (1, 16384, 1024)
    x, projected = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    weight, bias = (rng.standard_normal(1024).astype(np.float32) for _ in range(2))
    val = x.astype(np.float64) + projected
    mean = val.mean(axis=-1, keepdims=True)
    want = (val - mean) / np.sqrt((val * val).mean(axis=-1, keepdims=True) - mean * mean
                                  + 1e-6) * weight + bias
    for _ in range(2):
        out = prog(x=x, projected=projected, ln_weight=weight, ln_bias=bias)["normed"]
        assert_close(out, want, rtol=1e-4)
