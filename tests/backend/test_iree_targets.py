"""The same programs compile for every IREE target from this machine (no GPU needed):
what `zynml compile FILE --device D --backend iree --emit vmfb` does."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.backend.iree.stages import to_vmfb
from zynml.backend.iree.target import IREE_TARGETS

EXAMPLES = Path(__file__).resolve().parents[1] / "programs" / "examples"
ROOT_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PROGRAMS = {
    "elementwise": (EXAMPLES / "elementwise_two_inputs.zyn",
                    {"x": np.ones(13, np.float32), "y": np.ones(13, np.float32)}),
    "reduce": (EXAMPLES / "reduce_sum.zyn", {"data": np.ones(31, np.float32)}),
    "matmul": (EXAMPLES / "matmul.zyn", {"A": np.ones((17, 31), np.float32),
                                         "B": np.ones((31, 13), np.float32)}),
    "softmax": (ROOT_EXAMPLES / "softmax.zyn", {"x": np.ones((7, 33), np.float32)}),
}


@pytest.mark.parametrize("device", ["cpu", "cuda:0", "vulkan:0", "rocm:0", "metal:0"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_iree_target_compiles(device, name):
    path, inputs = PROGRAMS[name]
    prog = zynml.compile(path, device=device, backend="iree", require_device=False)
    assert prog.backend == "iree"
    module = prog.stage_module(inputs)
    vmfb = to_vmfb(module, IREE_TARGETS[prog.placement.kind])
    assert vmfb[:2] == b"PK" and b"IREE" in vmfb[:256]  # a zip holding the FlatBuffer
    assert len(vmfb) > 1000


@pytest.mark.parametrize("device", ["vulkan:0", "metal:0"])
def test_f64_on_spirv_targets_is_a_clear_error(device):
    prog = zynml.compile(EXAMPLES / "gelu.zyn", device=device, backend="iree",
                         require_device=False)
    with pytest.raises(zynml.ZynMLError, match=f"IREE's {device[:-2]} target has no f64"):
        prog(x=np.ones(5))
