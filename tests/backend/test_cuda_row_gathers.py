"""Chunk gathers (row_gathers.py): a row kernel whose body reads an input at computed
indices that stay in each thread's chunk of 4 columns (RoPE's interleaved pairs, written
either way) takes those values from the chunk it holds, not with a load per point;
gathers that read another chunk whole (RoPE's halves, and its angle tables of half a
row) take it from the lane holding it (a shuffle) or load it by 16 bytes, once for the
two heads a warp takes in turn. The kernels' IR here (no GPU needed); their numbers on a
GPU are tests/passes/test_cir_join_stores.py's and tests/kernels' (tools/gpu_tests.sh)."""
import re
from pathlib import Path

import numpy as np
import pytest

import zynml

PROGRAMS = Path(__file__).parents[1] / "programs"
RMS_NORM_ROPE = (PROGRAMS / "rms_norm_rope_pairs.zyn").read_text()
LIBRARY = Path(zynml.__file__).parent / "kernels" / "src" / "rms_norm_rope.zyn"


def _kernel_ir(source, pipeline, gathers, moved=True, **inputs):
    prog = zynml.compile(source, device="cuda", require_device=False,
                         params={"row_fused": {"chunk_gathers": gathers,
                                               "moved_gathers": moved}})
    program = getattr(prog, pipeline)._program if pipeline else prog
    text = program.emit("gpu", inputs)
    return text[text.index("gpu.func"):]


def _lane_shuffles(kernel_ir):
    return len(re.findall(r"gpu\.shuffle\s+idx", kernel_ir))


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


# rotate-half, two heads a warp. Shuffles: the pairs program's x[.., e % 64] and
# x[.., e % 64 + 64] (one of them the point's own chunk), 4 a row each; the library's
# x[.., (e + 64) % 128] a row and its weight's partner (held: the body also reads
# weight[e]) once. Chunk loads: the pairs program's w[e % 64], w[e % 64 + 64] and the
# library's angle tables cos[t, e % 64], sin[t, e % 64] (rows of 64: no lane holds
# them), once for both rows; each has an unaligned branch of 4 scalar loads.
@pytest.mark.parametrize("source, pipeline, weight, x_shape, shuffles, chunk_loads", [
    (RMS_NORM_ROPE, "rotate_half", "w", (2, 3, 4, 128), 2 * 2 * 4, 4),
    (LIBRARY, "rms_norm_rope_half", "weight", (3, 4, 128), 2 * 4 + 4, 2)])
def test_partners_in_another_chunk_come_from_lanes_and_chunk_loads(
        source, pipeline, weight, x_shape, shuffles, chunk_loads):
    inputs = _rope_inputs(x_shape, **{weight: np.ones(128, np.float32)})
    moved = _kernel_ir(source, pipeline, True, **inputs)
    gathers = _kernel_ir(source, pipeline, True, moved=False, **inputs)
    library = weight == "weight"
    held = 2 + library  # x's chunk a row, and the library's weight[e] once
    assert _lane_shuffles(moved) == shuffles
    assert moved.count("vector.load") == held + chunk_loads
    assert moved.count("memref.load") == 4 * (held + chunk_loads)
    # without: a row a warp (x's chunk, the library's weight's), a 4-byte load a point
    # of each gather (6 and 4)
    held, gathered = 1 + library, 4 if library else 6
    assert _lane_shuffles(gathers) == 0
    assert gathers.count("vector.load") == held
    assert gathers.count("memref.load") == 4 * held + 4 * gathered


def test_odd_head_counts_take_a_row_a_warp():
    """Rows a warp takes in turn differ in the head alone: 5 heads, a row each."""
    inputs = _rope_inputs((2, 3, 5, 128), w=np.ones(128, np.float32))
    moved = _kernel_ir(RMS_NORM_ROPE, "rotate_half", True, **inputs)
    assert _lane_shuffles(moved) == 2 * 4 and moved.count("vector.load") == 1 + 4
    assert _lane_shuffles(_kernel_ir(RMS_NORM_ROPE, "rotate_half", True, moved=False,
                                     **inputs)) == 0


# x's row turned by 4 r columns: whole chunks, but which one depends on the row, which
# the gathers' proof (body_dims: the column alone) does not take
TURNED = """
let y = compute(x) {
    @kernel fused
    for r in 0..rows:
        var total = 0.0
        for e in 0..128:
            total += x[r, e]
        for e in 0..128:
            out[r, e] = x[r, (e + 4 * r) % 128] * total
}
"""


def test_a_chunk_that_depends_on_the_row_stays_a_gather():
    inputs = dict(x=np.ones((6, 128), np.float32))
    moved = _kernel_ir(TURNED, None, True, **inputs)
    assert _lane_shuffles(moved) == 0 and moved.count("vector.load") == 1
    assert moved.count("memref.load") == 4 + 4
