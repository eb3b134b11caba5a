"""`zynml.capture` on devices without CUDA graphs (zynml/graphs.py): the calls are
recorded and `replay` runs them again in order, on the same input arrays, with outputs of
earlier calls fed to later ones; results equal the direct calls."""
import numpy as np
import pytest

import zynml
from conftest import assert_close

NORM = """
let y = compute(x, w) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * w[i] + 0.25
}
"""
SCALE = """
let z = compute(y, s) {
    @kernel elementwise
    for i in 0..n:
        out[i] = y[i] * s
}
"""


def reference(x, w, s):
    return (x.astype(np.float64) * w + 0.25) * s


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_replay_equals_the_direct_calls_and_sees_inputs_updated_in_place(device, rng):
    norm, scale = (zynml.compile(src, device=device) for src in (NORM, SCALE))
    x, w = (rng.standard_normal(29).astype(np.float32) for _ in range(2))
    with zynml.capture(device=device) as graph:
        y = norm(x=x, w=w)["y"]
        z = scale(y=y, s=1.5)["z"]
    assert_close(z, reference(x, w, 1.5))
    direct = scale(y=norm(x=x, w=w)["y"], s=1.5)["z"]
    outputs = graph.replay()
    np.testing.assert_array_equal(outputs[1]["z"], direct)
    x[:] = rng.standard_normal(29)  # in place: the next replay reads the new values
    graph.replay()
    assert_close(graph.outputs[1]["z"], reference(x, w, 1.5))
    assert_close(graph.outputs[0]["y"], x.astype(np.float64) * w + 0.25)
    assert "2 calls" in repr(graph)


ROWS = """
let r = compute(m) {
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield m[i, j]
}
"""


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_reshape_of_an_earlier_output_is_made_again_from_the_new_one(device, rng):
    """The CPU's replay makes new outputs: a view of one taken between the calls must be
    of the new output, not of the first replay's."""
    norm, rows = (zynml.compile(src, device=device) for src in (NORM, ROWS))
    x, w = (rng.standard_normal(35).astype(np.float32) for _ in range(2))
    with zynml.capture(device=device) as graph:
        y = norm(x=x, w=w)["y"]
        rows(m=y.reshape(5, 7))
    x[:] = rng.standard_normal(35)
    graph.replay()
    want = (x.astype(np.float64) * w + 0.25).reshape(5, 7).sum(axis=1)
    assert_close(graph.outputs[1]["r"], want)


def test_capture_is_once_and_replay_after_the_block():
    graph = zynml.capture(device="cpu")
    with pytest.raises(zynml.ZynMLError, match="after its"):
        graph.replay()
    with graph:
        pass
    with pytest.raises(zynml.ZynMLError, match="captured once"):
        with graph:
            pass


def test_a_program_of_another_device_inside_is_an_error(rng):
    prog = zynml.compile(NORM, device="cuda:0", require_device=False)
    x = rng.standard_normal(3).astype(np.float32)
    with pytest.raises(zynml.ZynMLError, match="for 'cuda:0' inside"):
        with zynml.capture(device="cpu"):
            prog(x=x, w=x)


def test_an_unknown_device_is_an_error():
    with pytest.raises(zynml.ZynMLError, match="unknown device"):
        zynml.capture(device="tpu:0")


def test_streams_are_cuda_only():
    with pytest.raises(zynml.ZynMLError, match="streams are CUDA's"):
        zynml.Stream("cpu")
    with pytest.raises(zynml.ZynMLError, match="takes a zynml.Stream"):
        with zynml.stream("cuda:0"):
            pass


def test_submit_inside_a_capture_is_an_error(rng):
    prog = zynml.compile(NORM, device="cpu")
    x = rng.standard_normal(3).astype(np.float32)
    with pytest.raises(zynml.ZynMLError, match="submit inside zynml.capture"):
        with zynml.capture(device="cpu"):
            prog.submit(x=x, w=x)
