"""@device("...") on a block off the program's device (zynml/segments.py): the program
splits into per-device segments. The real CPU -> GPU -> CPU run is in
tests/runtime/test_cuda_native.py; here, the plan and the CPU-only case."""
import numpy as np
import pytest

import zynml
from conftest import assert_close

THREE = """
let a = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let b = compute(a) @device("DEVICE") {
    @kernel elementwise
    for i in 0..n:
        out[i] = a[i] + 1.0
}
let c = compute(b, x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = b[i] * x[i]
}
"""


def test_a_block_on_another_device_makes_three_segments():
    prog = zynml.compile(THREE.replace("DEVICE", "cuda:0"), device="cpu", require_device=False)
    parts = [(p.device, p.inputs, p.outputs) for p in prog._segments]
    assert parts == [("cpu", ["x"], ["a"]), ("cuda:0", ["a"], ["b"]),
                     ("cpu", ["b", "x"], ["c"])]
    assert prog._segments[1].backend == "native"
    # the block keeps its line: a mistake in it is reported where it is in the file
    assert prog._segments[1].source.text.splitlines()[6].startswith("let b = compute(a)")


def test_blocks_on_the_programs_device_make_no_segments(rng):
    prog = zynml.compile(THREE.replace("DEVICE", "cpu"), device="cpu")
    assert prog._segments == []
    x = rng.standard_normal(7).astype(np.float32)
    out = prog(x=x)
    assert_close(out["c"], (2.0 * x.astype(np.float64) + 1.0) * x)


def test_segments_need_a_program_of_blocks():
    source = THREE.replace("DEVICE", "cuda:0") + "let d = c |> sqrt()\n"
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(source.replace("let d = c |> sqrt()", "let (p, q) = split(c, 2)"),
                      device="cpu", require_device=False)
    assert str(err.value).startswith("<string>:17:1: error: blocks on different devices work "
                                     "in programs made of compute blocks")


def test_an_absent_device_on_a_block_is_a_located_error():
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(THREE.replace("DEVICE", "cuda:0"), device="cpu")
    assert "<string>:7:28: error: device 'cuda:0' is not available" in str(err.value)
