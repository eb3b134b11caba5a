"""`@async` computes as futures and `await` in the language (zynml/async_program.py), on
the CPU and the interpreter: the program runs in parts, each future on the thread pool.
A part whose call the test holds (a threading.Event) makes every ordering certain."""
import threading

import numpy as np
import pytest

import zynml
from conftest import assert_close
from test_futures import gated

TWO = """
let f = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * 2.0
}
let g = compute(x) @async {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] + 3.0
}
let doubled = await f
let later = await g timeout 10ms else x
let total = compute(doubled) {
    @kernel reduce(+)
    for i in 0..n:
        yield doubled[i]
}
"""

ANY = """
let fs = [
    compute(x) @async { @kernel reduce(+) for i in 0..n: yield x[i] },
    compute(x) @async {
        @kernel reduce(max)
        for i in 0..n:
            yield x[i]
    },
]
let (first, index) = await any(fs)
"""


def parts(prog):
    return [(p.kind, p.targets) for p in prog._async.parts]


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_timeout_gives_the_default_and_leaves_the_work_running(device, rng):
    prog = zynml.compile(TWO, device=device)
    assert parts(prog) == [("submit", ["f"]), ("submit", ["g"]), ("await", ["doubled"]),
                           ("await", ["later"]), ("run", [])]
    gate, started, finished = threading.Event(), threading.Event(), []
    held = gated(prog._async.parts[1].program, gate, started)  # g is held
    run = held._run
    held._run = lambda inputs: finished.append(run(inputs)) or finished[-1]
    x = rng.standard_normal(13).astype(np.float32)
    out = prog(x=x)
    assert started.is_set() and not gate.is_set()
    assert list(out) == ["doubled", "later", "total"]
    np.testing.assert_array_equal(out["later"], x)  # the default: g had not completed
    assert_close(out["doubled"], 2 * x.astype(np.float64))
    # against the sum of magnitudes: a sum that cancels keeps only f32's error in it
    assert_close(out["total"], 2 * x.astype(np.float64).sum(), floor=2 * np.abs(x).sum())
    gate.set()  # the call has returned; g's work goes on and completes
    for _ in range(3000):
        if finished:
            break
        threading.Event().wait(0.01)
    assert_close(finished[0]["g"], x.astype(np.float64) + 3)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_await_any_gives_the_future_that_completes_first(device, rng):
    prog = zynml.compile(ANY, device=device)
    assert parts(prog) == [("submit", ["fs[0]"]), ("submit", ["fs[1]"]),
                           ("any", ["first", "index"])]
    gate = threading.Event()
    gated(prog._async.parts[0].program, gate)  # the first in the list is held
    x = rng.standard_normal(11).astype(np.float32)
    out = prog(x=x)
    assert out["index"] == 1 and isinstance(out["index"], np.int64)
    assert_close(out["first"], x.max())
    gate.set()


def test_without_futures_a_program_is_one_invocation():
    prog = zynml.compile(TWO.replace("@async", "").replace(
        "let doubled = await f\nlet later = await g timeout 10ms else x\n", "")
        .replace("yield doubled[i]", "yield f[i]").replace("compute(doubled)", "compute(f)"))
    assert prog._async is None
