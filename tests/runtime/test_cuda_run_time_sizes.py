"""Launch plans with run-time sizes (zynml/backend/cuda/launch_plan.py: "dim", "%N"
shapes, "subview", "collapse", "expand") through the executor, without a GPU: the fake
driver of test_cuda_executor.py runs each kernel as numpy on the descriptors it is
given, so a plan compiled once is run at many sizes and every grid and descriptor is
checked against the size of the call."""
import json
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches
from conftest import assert_close
from test_specialize import ELEMENTWISE
from runtime.test_cuda_executor import (Desc, executor_for, f32, fake, launch,  # noqa: F401
                                        plan_of, tensor, upload)

# 1, primes, non-multiples of 4, 16 and the block, multiples of 4, a large one
SIZES = [1, 2, 7, 16, 31, 97, 257, 1028, 4099]

ROW_SUMS = Path(__file__).resolve().parents[1] / "programs" / "examples" / "row_sums.zyn"


def shape_less_plan(source):
    """The plan `zynml compile --device cuda --emit plan` shows without shapes."""
    prog = zynml.compile(source, device="cuda", require_device=False)
    return json.loads(prog.emit("plan"))


def steps(plan, op):
    return [s for s in plan["body"] if s["op"] == op]


def test_a_shape_less_elementwise_plan_reads_its_size_at_run_time():
    plan = shape_less_plan(ELEMENTWISE)
    assert plan["version"] == 3
    assert [s["shape"] for s in plan["inputs"]] == [[None], [None]]
    assert plan["outputs"][0]["shape"] == [None]
    dim, = steps(plan, "dim")
    assert dim["source"] == "%in0" and dim["index"] == 0
    alloc, = steps(plan, "alloc")
    assert alloc["shape"] == [dim["result"]]
    chunks, grid = steps(plan, "scalar")  # ceil(ceil(n / 4) / block): 4-point chunks
    assert chunks["fn"] == grid["fn"] == "ceildivsi"
    assert chunks["args"] == [dim["result"], 4] and grid["args"][0] == chunks["result"]
    run, = steps(plan, "launch")
    assert run["grid"] == [grid["result"], 1, 1] and run["strategy"] == "pointwise"


def test_one_plan_runs_the_elementwise_program_at_every_size(fake, rng):
    plan = shape_less_plan(ELEMENTWISE)
    kernel = steps(plan, "launch")[0]["kernel"]

    def k_fma(fake, args):
        x, z, out = (fake.array(d, np.float32) for d in args)
        out[...] = x * z + np.float32(1.5)
    fake.kernels[kernel] = k_fma
    executor = executor_for(fake, plan)
    assert executor.flat is None  # run-time sizes: the interpreter
    block = steps(plan, "launch")[0]["block"][0]
    for n in SIZES:
        x, z = f32(rng, n), f32(rng, n)
        mark = fake.mark()
        out, = executor([upload(x), upload(z)])
        assert_close(out.numpy(), x.astype(np.float64) * z + 1.5)
        item, = fake.since(mark).launches
        assert item.grid == (-(-(-(-n // 4)) // block), 1, 1)  # 4-point chunks
        assert all(isinstance(d, Desc) and d.sizes == (n,) and d.strides == (1,)
                   for d in item.args)


def test_one_plan_runs_row_sums_at_every_shape(fake, rng):
    """The fill and the reduction: a block per row, by the kernel of the tightest
    register bound the run-time row length fits (1024 ... 8192 points, a multiple of
    4), or the loops through memory."""
    plan = shape_less_plan(ROW_SUMS)
    runs = {run["kernel"].split("_", 1)[1]: run for run in launches(plan["body"])}
    assert sorted(runs) == ["row_fused"] + [f"row_fused_upto{n}"
                                            for n in (1024, 2048, 4096, 8192)]

    def k_rows(run):
        matrix, total = run["arg_kinds"].index("memref:2"), run["arg_kinds"].index("memref:1")

        def kernel(fake, args):
            m, out = (fake.array(args[k], np.float32) for k in (matrix, total))
            out[...] = m.sum(axis=1, dtype=np.float64).astype(np.float32)
        return kernel
    for run in runs.values():
        fake.kernels[run["kernel"]] = k_rows(run)
    executor = executor_for(fake, plan)
    for rows, cols, kernel in [(1, 1, "row_fused"), (7, 31, "row_fused"),
                               (97, 4, "row_fused_upto1024"), (3, 4100, "row_fused_upto8192"),
                               (2, 8196, "row_fused")]:
        m = f32(rng, rows, cols)
        mark = fake.mark()
        out, = executor([upload(m)])
        assert_close(out.numpy(), m.astype(np.float64).sum(axis=1))
        item, = fake.since(mark).launches
        assert item.kernel.split("_", 1)[1] == kernel and item.grid == (rows, 1, 1)
        matrix = runs[kernel]["arg_kinds"].index("memref:2")
        assert item.args[matrix].sizes == (rows, cols) and item.args[matrix].strides == (cols, 1)


def test_views_of_run_time_sizes(fake, rng):
    """subview at an offset, collapse and expand, sized from "dim" steps: the kernels
    get the descriptors those views have at this call."""
    def k_double(fake, args):
        a, out = (fake.array(d, np.float32) for d in args)
        out[...] = 2 * a
    fake.kernels["k_double"] = k_double
    plan = plan_of(
        [tensor((None, None))],
        [{"op": "dim", "result": "%0", "source": "%in0", "index": 0},
         {"op": "dim", "result": "%1", "source": "%in0", "index": 1},
         {"op": "scalar", "result": "%2", "fn": "subi", "args": ["%0", 1]},
         # rows 1.. of the input, then the matrix as one row, then back as rows x cols
         {"op": "subview", "result": "%3", "source": "%in0", "offsets": [1, 0],
          "sizes": ["%2", "%1"], "steps": [1, 1], "kept": [0, 1]},
         {"op": "collapse", "result": "%4", "source": "%3", "groups": [[0, 1]]},
         {"op": "expand", "result": "%5", "source": "%4", "groups": [[0, 1]],
          "sizes": ["%2", "%1"]},
         {"op": "alloc", "result": "%6", "shape": ["%2", "%1"], "dtype": "float32"},
         launch("k_double", ["%5", "%6"], ["memref:2", "memref:2"])],
        [dict(tensor((None, None)), value="%6")])
    plan["version"] = 2
    executor = executor_for(fake, plan)
    for rows, cols in [(2, 1), (5, 7), (31, 97)]:
        m = f32(rng, rows, cols)
        mark = fake.mark()
        out, = executor([upload(m)])
        assert_close(out.numpy(), 2 * m[1:].astype(np.float64))
        source, target = fake.since(mark).launches[0].args
        assert (source.offset, source.sizes, source.strides) == (cols, (rows - 1, cols),
                                                                 (cols, 1))
        assert target.sizes == (rows - 1, cols)


def test_sizes_the_program_binds_together_must_agree_at_the_call(fake, rng):
    """x[i] and z[i] over one n: the plan says dimension 0 of both inputs is one size
    (the kernels read z over x's length, no subview checks it), and a call where they
    differ is an error before any launch, not a read past z's end."""
    plan = shape_less_plan(ELEMENTWISE)
    assert plan["equal_dims"] == [[[0, 0], [1, 0]]]
    executor = executor_for(fake, plan)
    mark = fake.mark()
    with pytest.raises(ValueError, match="the inputs' sizes disagree: dimension 0 of "
                                         "argument 1 is 8, .* argument 0, which is 9"):
        executor([upload(f32(rng, 9)), upload(f32(rng, 8))])
    assert not fake.since(mark).launches
