"""zynml/runtime/cuda/plan_at_sizes.py on the fake driver of test_cuda_executor: a plan
with run-time sizes, fixed at a call's sizes, launches what the interpreter launches,
and a Program with dynamic sizes takes the per-call fast path at each size it has seen."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from .test_cuda_executor import (SUB_SCALED, TorchLike, canonical, checked_calls,  # noqa: F401
                                 executor_for, f32, fake, k_sub_scaled, launches, tensor,
                                 upload)
from conftest import assert_close
from zynml.runtime.cuda.artifact import CudaArtifact
from zynml.runtime.cuda.device_array import DeviceArray
from zynml.runtime.cuda.executor import PlanExecutor
from zynml.runtime.cuda.function import CudaFunction
from zynml.runtime.cuda.plan_at_sizes import flat_at, held_inputs, plan_at_sizes, size_inputs

HEADS = (Path(zynml.__file__).parent / "kernels" / "src" / "attention_heads.zyn").read_text()


def split_heads_plan():
    """[tokens, width] rows viewed as [batch, seq, heads, d] (a reshape of run-time
    sizes: "dim", "collapse", "expand" steps) and permuted; batch 3 and d 5 by value."""
    prog = zynml.compile(HEADS, device="cuda:0", require_device=False)
    example = dict(x=np.zeros((12, 30), np.float32), batch=3, d=5)
    return prog.split_heads._program.artifact(**example).plan


@pytest.mark.parametrize("tokens, width", [(12, 30), (3, 5), (21, 65)])
def test_a_plan_at_fixed_sizes_launches_what_the_interpreter_does(fake, rng, tokens, width):
    plan = split_heads_plan()
    assert {"dim", "collapse", "expand"} <= {step["op"] for step in plan["body"]}
    executor = executor_for(fake, plan)
    assert executor.flat is None and held_inputs(executor) == []
    x = upload(f32(rng, tokens, width))
    flat = flat_at(executor, [(tokens, width), 3, 5])
    assert flat is not None and flat.plan["inputs"][0]["shape"] == [tokens, width]
    assert not {"dim", "scalar", "collapse", "expand", "subview"} & \
        {step["op"] for step in flat.plan["body"]}
    mark = fake.mark()
    fast_out = flat.run([x.ptr, 3, 5])
    fast = fake.since(mark)
    mark = fake.mark()
    slow_out = executor.run_plan([x, 3, 5])
    slow = fake.since(mark)
    assert len(fast.launches) == 1 and canonical(fast.launches) == canonical(slow.launches)
    assert [(i.grid, i.block) for i in fast.launches] == \
        [(i.grid, i.block) for i in slow.launches]
    assert fast_out[0].shape == slow_out[0].shape == (3, width // 5, tokens // 3, 5)
    assert flat_at(executor, [(tokens, width), 3, 5]) is flat  # made once per sizes


def test_sizes_the_program_cannot_take_and_loops_stay_with_the_interpreter(fake):
    plan = split_heads_plan()
    assert plan_at_sizes(plan, [(12, 30, 1), None, None], {}) is None  # another rank
    looped = {**plan, "body": plan["body"] + [
        {"op": "for", "lower": 0, "upper": 2, "step": 1, "iv": "%i", "inits": [],
         "iter_args": [], "yields": [], "results": [], "body": []}]}
    assert plan_at_sizes(looped, [(12, 30), None, None], {}) is None
    # sizes the program binds together must agree: the interpreter reports them
    bound = {**plan, "equal_dims": [[[0, 0], [0, 1]]]}
    assert plan_at_sizes(bound, [(12, 30), None, None], {}) is None
    assert plan_at_sizes(bound, [(30, 30), None, None], {}) is not None


def test_int_inputs_that_sizes_are_computed_from_are_held_by_value():
    plan = {"inputs": [{"kind": "tensor", "shape": [None], "dtype": "float32"},
                       {"kind": "scalar", "dtype": "int64"},
                       {"kind": "scalar", "dtype": "float32"}],
            "body": [{"op": "scalar", "result": "%1", "fn": "muli", "args": ["%in1", 2]},
                     {"op": "launch", "kernel": "k", "grid": ["%1", 1, 1],
                      "block": [32, 1, 1], "shared_bytes": 0, "args": ["%in0", "%in2"],
                      "arg_kinds": ["memref:1", "f32"]}],
            "outputs": [], "globals": []}
    assert size_inputs(plan) == [1]  # the float is a kernel parameter only
    fixed = plan_at_sizes(plan, [(7,), None, None], {1: 4})
    [launch] = fixed["body"]
    assert launch["grid"] == [8, 1, 1] and launch["args"] == ["%in0", "%in2"]
    assert plan_at_sizes(plan, [(7,), None, None], {}) is None  # its value not given


def test_a_float_that_a_host_step_computes_with_keeps_the_interpreter(fake):
    """The fast path's signature holds ints by value but not floats: a plan that computes
    on the host with a float input (here its grid, for the sake of the test) is not
    fixed, or a second call with another value would run with the first."""
    plan = {"version": 1, "input_names": ["x", "t"], "output_names": [],
            "inputs": [{"kind": "tensor", "shape": [None], "dtype": "float32"},
                       {"kind": "scalar", "dtype": "float32"}],
            "body": [{"op": "scalar", "result": "%1", "fn": "mulf", "args": ["%in1", 2.0]},
                     {"op": "launch", "kernel": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
                      "shared_bytes": 0, "args": ["%in0", "%1"],
                      "arg_kinds": ["memref:1", "f32"]}],
            "outputs": [], "globals": []}
    executor = executor_for(fake, plan)
    assert held_inputs(executor) == [1]
    assert flat_at(executor, [(7,), 0.5]) is None
    assert plan_at_sizes(plan, [(7,), None], {1: 0.5}) is not None  # fixed if asked


def test_a_dynamic_program_skips_the_checks_at_each_size_it_has_seen(fake, rng,
                                                                     checked_calls,
                                                                     monkeypatch):
    interpreted = []
    run_plan = PlanExecutor.run_plan
    monkeypatch.setattr(PlanExecutor, "run_plan", lambda self, *a, **k: (
        interpreted.append(1), run_plan(self, *a, **k))[1])
    prog = zynml.compile(SUB_SCALED, device="cuda:0", require_device=False, dynamic=True)
    example = dict(x=np.zeros(8, np.float32), y=np.zeros(8, np.float32), scale=0.5)
    for step in launches(prog.artifact(**example).plan["body"]):
        fake.kinds[step["kernel"]] = step["arg_kinds"]
        fake.kernels[step["kernel"]] = lambda fake, args: k_sub_scaled(
            *[fake.array(a, np.float32) if hasattr(a, "aligned") else np.float32(a)
              for a in args if hasattr(a, "aligned") or isinstance(a, float)])
    for n in (100, 37, 100, 1, 37, 100):
        x, y = f32(rng, n), f32(rng, n)
        out = prog(x=TorchLike(upload(x)), y=TorchLike(upload(y)), scale=0.25)["z"]
        assert isinstance(out, DeviceArray) and out.shape == (n,)
        assert_close(out.numpy(), (x.astype(np.float64) - y) * 0.25)
    # the first call at each size is checked, the others are not; none is interpreted
    # (a checked call too runs the plan fixed at its sizes)
    assert len(checked_calls) == 3 and not interpreted


def test_a_plan_that_branches_on_an_integer_takes_the_fast_path_per_value(fake, rng,
                                                                         monkeypatch):
    """A plan with fixed sizes whose launch depends on an integer input (a run-time GQA
    group: the decode kernels where it is the one they are built for, the flash kernel
    elsewhere): a CudaFunction's calls (a loaded artifact's) run the branch the value
    takes on a fast path fixed at it, one per value, not the interpreter."""
    plan = {"version": 1, "input_names": ["x", "g"], "output_names": [],
            "inputs": [tensor([4]), {"kind": "scalar", "dtype": "int64"}],
            "body": [{"op": "scalar", "result": "%1", "fn": "copy", "args": ["%in1"]},
                     {"op": "scalar", "result": "%2", "fn": "eq", "args": ["%1", 4]},
                     {"op": "if", "cond": "%2",
                      "then": [{"op": "launch", "kernel": "k_decode", "grid": [1, 1, 1],
                                "block": [32, 1, 1], "shared_bytes": 0, "args": ["%in0"],
                                "arg_kinds": ["memref:1"]}],
                      "else": [{"op": "launch", "kernel": "k_flash", "grid": [2, 1, 1],
                                "block": [64, 1, 1], "shared_bytes": 0,
                                "args": ["%in0", "%in1"], "arg_kinds": ["memref:1", "int64"]}]}],
            "outputs": [], "globals": []}
    executor_for(fake, plan)  # the fake's kernel argument kinds
    function = CudaFunction(CudaArtifact(plan=plan, ptx="//ptx", chip="sm_90a"))
    assert function.executor.flat is None and held_inputs(function.executor) == [1]
    interpreted = []
    run_plan = PlanExecutor.run_plan
    monkeypatch.setattr(PlanExecutor, "run_plan", lambda self, *a, **k: (
        interpreted.append(1), run_plan(self, *a, **k))[1])
    x = upload(f32(rng, 4))
    for g, kernel in ((4, "k_decode"), (5, "k_flash"), (4, "k_decode")):
        mark = fake.mark()
        function(x, g)
        assert [launch.kernel for launch in fake.since(mark).launches] == [kernel]
    assert not interpreted and len(function.executor._flat_at) == 2
