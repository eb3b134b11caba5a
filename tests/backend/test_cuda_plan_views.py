"""Views in the native CUDA launch plan, without a GPU: the language's `reshape` (a
memref.reshape on the host) and a projection's collapsed rows (collapse-matmul-rows) are
"view" steps of the same buffer, no copy and no kernel; the spec's transformer block
compiles to an artifact whose projections are matrix-product kernels."""
from pathlib import Path

import numpy as np
import pytest
from mlir import ir

import zynml
from zynml.backend.cuda.launch_plan import PlanError, extract_plan
from zynml.runtime.cuda.artifact import launches

TRANSFORMER = Path(__file__).resolve().parents[1] / "programs" / "transformer" / \
    "transformer_block.zyn"
RESHAPE = TRANSFORMER.parents[1] / "reshape_views.zyn"
ROWS_TO_HEADS = TRANSFORMER.parents[1] / "rows_to_heads.zyn"


def views(body: list[dict]) -> list[dict]:
    found = []
    for step in body:
        if step["op"] == "view":
            found.append(step)
        elif step["op"] == "for":
            found += views(step["body"])
    return found


def transformer_artifact(batch, seq, heads, head_dim, ffn):
    hidden = heads * head_dim
    zeros = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731 (shapes only)
    layer = dict(qkv_proj=zeros(hidden, 3 * hidden), out_proj=zeros(hidden, hidden),
                 ln1_weight=zeros(hidden), ln1_bias=zeros(hidden),
                 ffn_up=zeros(hidden, ffn), ffn_down=zeros(ffn, hidden),
                 ln2_weight=zeros(hidden), ln2_bias=zeros(hidden))
    prog = zynml.compile(TRANSFORMER, device="cuda", require_device=False)
    return prog.pipeline("transformer_block").artifact(
        x=zeros(batch, seq, hidden), layer=0, model={"layers": [layer]}, num_heads=heads,
        head_dim=head_dim)


def test_a_reshape_is_a_view_of_the_same_buffer():
    prog = zynml.compile(RESHAPE, device="cuda", require_device=False)
    plan = prog.artifact(x=np.zeros(35, np.float32), a=5, b=7).plan
    ops = [step["op"] for step in plan["body"]]
    assert ops == ["alloc", "launch", "view", "alloc", "launch"], ops
    produce, view, consume = plan["body"][1], plan["body"][2], plan["body"][4]
    assert view == {"op": "view", "result": view["result"], "source": produce["args"][-1],
                    "offset": 0, "sizes": [5, 7], "strides": [7, 1]}
    assert view["result"] in consume["args"]


def test_the_transformer_block_compiles_with_views_and_matrix_products():
    batch, seq, heads, head_dim = 3, 67, 4, 32
    hidden, rows = heads * head_dim, batch * seq
    artifact = transformer_artifact(batch, seq, heads, head_dim, ffn=256)
    assert artifact.cubin and ".entry" in artifact.ptx
    plan = artifact.plan
    # q, k, v as [batch, seq, heads, head_dim], each a view of its own row-major buffer
    shaped = [v for v in views(plan["body"]) if v["sizes"] == [batch, seq, heads, head_dim]]
    assert len(shaped) == 3 and all(
        v["offset"] == 0 and v["strides"] == [seq * hidden, hidden, head_dim, 1]
        for v in shaped)
    # the qkv, output and FFN-up projections: one matrix product of the rows each
    problems = {step.get("problem"): step["strategy"] for step in launches(plan["body"])}
    for n in (3 * hidden, hidden, 256):
        key = f"{rows}x{hidden}f32_{hidden}x{n}f32_{rows}x{n}f32"
        assert problems.get(key, "pointwise") != "pointwise", (key, problems)
    rows_views = [v for v in views(plan["body"]) if v["sizes"][0] == rows]
    assert rows_views and all(len(v["sizes"]) == 2 for v in rows_views)


def test_a_reshape_of_a_dynamic_buffer_is_refused_by_the_plan():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse("""
func.func @main(%a: memref<?xf32>, %shape: memref<2xindex>) -> memref<?x?xf32> {
  %r = memref.reshape %a(%shape) : (memref<?xf32>, memref<2xindex>) -> memref<?x?xf32>
  return %r : memref<?x?xf32>
}""")
        with pytest.raises(PlanError, match="'memref.reshape' of a strided or dynamic"):
            extract_plan(module.operation)


def test_a_reshape_with_run_time_sizes_is_a_collapse_and_an_expand():
    """Not a memref.reshape, whose shape operand is a host buffer the plan cannot fill:
    views whose sizes the plan computes from the input's at each call."""
    prog = zynml.compile(ROWS_TO_HEADS, device="cuda", require_device=False)
    plan = prog.rows_to_heads._program.artifact(
        x=np.zeros((2 * 5, 3 * 8), np.float32), batch=2, d=8).plan
    steps = {step["op"]: step for step in plan["body"]}
    assert steps["collapse"]["source"] == "%in0" and steps["collapse"]["groups"] == [[0, 1]]
    expand = steps["expand"]
    assert expand["source"] == steps["collapse"]["result"]
    assert expand["groups"] == [[0, 1, 2, 3]]
    assert expand["sizes"][0] == 2 and expand["sizes"][3] == 8
    assert all(isinstance(s, str) for s in expand["sizes"][1:3])  # tokens / 2, width / 8
    assert not any(step["op"] in ("copy", "view") for step in plan["body"])
