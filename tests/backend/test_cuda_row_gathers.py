"""Gathers within a point's own chunk (row_gathers.py): a row kernel whose body reads an
input at computed indices that stay in each thread's chunk of 4 columns (RoPE's
interleaved pairs, written either way) takes those values from the chunk it holds, not
with a load per point; gathers that leave the chunk (RoPE's halves) stay loads. The
kernels' IR here (no GPU needed); their numbers on a GPU are
tests/passes/test_cir_join_stores.py's and tests/kernels' (tools/gpu_tests.sh)."""
from pathlib import Path

import numpy as np
import pytest

import zynml

PROGRAMS = Path(__file__).parents[1] / "programs"
RMS_NORM_ROPE = (PROGRAMS / "rms_norm_rope_pairs.zyn").read_text()
LIBRARY = Path(zynml.__file__).parent / "kernels" / "src" / "rms_norm_rope.zyn"


def _kernel_ir(source, pipeline, gathers, **inputs):
    prog = zynml.compile(source, device="cuda", require_device=False,
                         params={"row_fused": {"chunk_gathers": gathers}})
    text = getattr(prog, pipeline)._program.emit("gpu", inputs)
    return text[text.index("gpu.func"):]


def _rope_inputs(x_shape=(2, 3, 5, 128), **extra):
    """x [.., tokens, heads, 128], the angle tables [tokens, 64]."""
    tokens = x_shape[-3]
    return dict(x=np.ones(x_shape, np.float32), cos=np.ones((tokens, 64), np.float32),
                sin=np.ones((tokens, 64), np.float32), eps=1e-5, **extra)


# (the loads without: every gather at each of 4 points, x's and the weight's partners,
# cos and sin, and 4 for each buffer read by chunks, where it is not aligned)
@pytest.mark.parametrize("source, pipeline, weight, x_shape, loads_without", [
    (RMS_NORM_ROPE, "interleaved", "w", (2, 3, 5, 128), 28),  # x[.., 2 (e / 2)], + 1
    (LIBRARY, "rms_norm_rope", "weight", (3, 5, 128), 24)])   # x[.., e + 1 - 2 (e % 2)]
def test_interleaved_partners_come_from_the_chunk_held(source, pipeline, weight, x_shape,
                                                       loads_without):
    inputs = _rope_inputs(x_shape, **{weight: np.ones(128, np.float32)})
    held = _kernel_ir(source, pipeline, True, **inputs)
    loaded = _kernel_ir(source, pipeline, False, **inputs)
    # x and the weight by 16-byte chunks (4 scalar loads each where a buffer is not
    # aligned); only the angle tables' gathers are left, cos and sin 4 each
    assert held.count("vector.load") == 2 and held.count("memref.load") == 16
    assert loaded.count("memref.load") == loads_without


def test_partners_in_another_chunk_stay_gathers():
    inputs = _rope_inputs(w=np.ones(128, np.float32))
    assert _kernel_ir(RMS_NORM_ROPE, "rotate_half", True, **inputs) == \
        _kernel_ir(RMS_NORM_ROPE, "rotate_half", False, **inputs)
