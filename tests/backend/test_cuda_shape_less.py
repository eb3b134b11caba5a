"""Shape-less native CUDA compiles of every spec example (no GPU needed): the kernels
take run-time sizes (`zynml compile F --device cuda --emit ptx` without shapes), and the
examples whose constructs need static sizes or known ranks are located errors, never
internal ones."""
import json
from pathlib import Path

import pytest

import zynml
from zynml.errors import ZynMLError

EXAMPLES = Path(__file__).resolve().parents[1] / "programs" / "examples"
# what needs shapes: tile-level bodies and ranks known only from values
NEED_SHAPES = {
    "flash_attention.zyn": "the rank of input 'Q' is only known from its value",
    "flash_attention_block_causal.zyn": "the rank of input 'Q' is only known from its value",
    "fused_softmax.zyn": "the rank of input 'logits' is only known from its value",
    "tiled_matmul.zyn": "the rank of input 'A' is only known from its value",
    "rope_spec_verbatim.zyn": "cannot infer the output shape",  # not a valid program
}
# integer inputs that size the program (specialized by value when given)
SIZED_BY_INTEGERS = {"conv2d.zyn", "conv2d_depthwise.zyn", "conv2d_stride2_pad0.zyn",
                     "rope.zyn"}  # (head_dim; its two stores per pair are one: cir-join-stores)
NEED_SHAPES.update({name: "an integer input sizes this program" for name in SIZED_BY_INTEGERS})
DYNAMIC = sorted(p.name for p in EXAMPLES.glob("*.zyn") if p.name not in NEED_SHAPES)


@pytest.mark.parametrize("name", DYNAMIC)
def test_shape_less_ptx_and_plan(name):
    prog = zynml.compile(EXAMPLES / name, device="cuda", require_device=False)
    plan = json.loads(prog.emit("plan"))
    assert any(None in spec.get("shape", ()) for spec in plan["inputs"]), plan["inputs"]
    assert ".entry" in prog.emit("ptx")


@pytest.mark.parametrize("name", sorted(NEED_SHAPES))
def test_examples_that_need_shapes_say_so(name):
    with pytest.raises(ZynMLError) as err:
        zynml.compile(EXAMPLES / name, device="cuda", require_device=False).emit("artifact")
    assert NEED_SHAPES[name] in str(err.value), str(err.value)
    assert err.value.loc is not None or name in SIZED_BY_INTEGERS
