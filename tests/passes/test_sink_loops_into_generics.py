"""sink-loops-into-generics: a loop run in order inside an elementwise body is one CUDA
kernel with the loop inside it, not a host loop launching a kernel per iteration
(launch plans, no GPU needed); what the pass makes computes the body (its linalg run by
IREE on the CPU), and the CPU results are the body's (float64 numpy, fresh random inputs,
odd sizes)."""
import json

import numpy as np
import pytest

import zynml
from body_loop_programs import (IN_KERNEL, NAMES, SCALAR_COUNT, SIZE_COUNT, case,
                                error_floor)
from conftest import assert_close
from zynml.backend.iree.compile import compile_to_vmfb
from zynml.backend.iree.target import CPU
from zynml.passes.pipeline import build_pass_manager
from zynml.runtime import IreeModule
from zynml.runtime.cuda.artifact import launches

SIZES = [1, 37, 1024, 1031]  # 1024: pointwise takes 16-byte chunks (a loop per lane)


def steps(body):
    """Every step of a plan's body, loop bodies included."""
    for step in body:
        yield step
        if step["op"] == "for":
            yield from steps(step["body"])


def cuda_plan(source, inputs):
    prog = zynml.compile(source, device="cuda", require_device=False)
    return prog.artifact(**inputs).plan


# The sum of IN_A_REDUCE without its loop: the loop must add no launch to it.
PLAIN_SUM = """
let y = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i] * x[i] * 0.5 + b
}
"""


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", IN_KERNEL)
def test_the_loop_runs_inside_one_kernel(rng, name, size):
    source, inputs, _ = case(name, rng, size)
    plan = cuda_plan(source, inputs)
    assert [s["op"] for s in steps(plan["body"]) if s["op"] == "for"] == []
    if name == "in_a_reduce":  # the sum's kernels (on one element, a fill kernel too)
        plain = cuda_plan(PLAIN_SUM, inputs)
        assert [s["strategy"] for s in launches(plan["body"])] == \
            [s["strategy"] for s in launches(plain["body"])]
        return
    [launch] = launches(plan["body"])
    assert launch["strategy"] == "pointwise"  # a thread per point, looping


@pytest.mark.parametrize("count", [0, 1, 6])
@pytest.mark.parametrize("name", ["scalar_count", "size_count", "two_values"])
def test_every_loop_count_is_one_kernel(rng, name, count):
    """An integer input, an input's size or a stepped constant: one launch for any count
    (a loop of no iteration may fold away: y is x, no kernel at all)."""
    source, inputs, _ = case(name, rng, 13, count)
    plan = cuda_plan(source, inputs)
    assert not any(s["op"] == "for" for s in steps(plan["body"]))
    assert len(list(launches(plan["body"]))) == (count > 0 or name != "scalar_count")


@pytest.mark.parametrize("source", [SCALAR_COUNT, SIZE_COUNT], ids=["scalar", "size"])
def test_a_shape_less_compile_reads_the_count_in_the_kernel(source):
    """Without shapes or values, the count is a run-time value: the kernel reads the
    integer input itself (the host never reads device memory) or takes the size."""
    plan = json.loads(zynml.compile(source, device="cuda", require_device=False)
                      .emit("plan"))
    assert not any(s["op"] == "for" for s in steps(plan["body"]))
    [launch] = launches(plan["body"])
    assert any(None in spec.get("shape", ()) for spec in plan["inputs"])
    assert len(launch["args"]) >= 3


def test_a_dynamic_compile_passes_the_count_to_the_kernel(rng):
    """dynamic=True: the count is c's run-time length, which the kernel takes (integer
    inputs specialize by value, so theirs is a constant)."""
    source, inputs, _ = case("size_count", rng, 37)
    prog = zynml.compile(source, device="cuda", require_device=False, dynamic=True)
    plan = prog.artifact(**inputs).plan
    assert not any(s["op"] == "for" for s in steps(plan["body"]))
    [launch] = launches(plan["body"])
    [length] = [s["result"] for s in plan["body"] if s["op"] == "dim" and s["source"] == "%in1"]
    assert length in launch["args"]


def test_a_loop_around_a_local_array_stays_a_host_loop(rng):
    """Each iteration fills a `shared var` array (a tensor over the points and its own
    dimension, not a value per point): the loop is left on the host, as before, its
    kernels launched once per iteration."""
    source, inputs, _ = case("local_array", rng, 7, 4)
    plan = cuda_plan(source, inputs)
    [loop] = [s for s in plan["body"] if s["op"] == "for"]
    assert loop["upper"] == 4
    assert any(s["op"] == "launch" for s in loop["body"])


def sunk_linalg(source, inputs):
    """The program's linalg after sink-loops-into-generics, as text."""
    module = zynml.compile(source, device="cpu").stage_module(inputs, "linalg")
    build_pass_manager("builtin.module(sink-loops-into-generics)",
                       module.context).run(module.operation)
    return str(module)


def scalar_args(inputs):
    """The inputs as main's arguments: floats bind f32, integers i64."""
    return [np.float32(v) if isinstance(v, float) else np.int64(v) if isinstance(v, int)
            else v for v in inputs.values()]


@pytest.mark.parametrize("size", [1, 37])
@pytest.mark.parametrize("name", IN_KERNEL)
def test_the_sunk_loop_computes_the_body(rng, name, size):
    """What the pass hands to the CUDA kernel pipeline, compiled by IREE for the CPU:
    the loop inside the generic gives the body's values."""
    source, inputs, expected = case(name, rng, size)
    text = sunk_linalg(source, inputs)
    host = text.split("linalg.generic")[0]
    assert "scf.for" not in host and "scf.for" in text  # the loop is inside a generic
    (out,) = IreeModule(compile_to_vmfb(text, CPU)).function("main")(*scalar_args(inputs))
    assert_close(out, expected, floor=error_floor(name, inputs))


def test_the_shared_linalg_keeps_the_host_loop(rng):
    """The pass is the CUDA pipeline's: the linalg stage that IREE compiles still has the
    loop on the host, as before."""
    source, inputs, _ = case("horner", rng, 37)
    text = str(zynml.compile(source, device="cpu").stage_module(inputs, "linalg"))
    assert "scf.for" in text.split("linalg.generic")[0]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_cpu_results_are_the_body(rng, name, size):
    source, inputs, expected = case(name, rng, size)
    y = zynml.run(source, device="cpu", **inputs)["y"]
    assert y.dtype == np.float32 and np.shape(y) == np.shape(expected)
    assert_close(y, expected, floor=error_floor(name, inputs))
