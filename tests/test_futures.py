"""Futures on the CPU and the interpreter (zynml/futures.py): Program.submit runs the
call on a thread pool; done/result/timeout, wait_all and wait_any. Jobs whose end the
test controls (a threading.Event) make every ordering certain: no test depends on time."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import zynml
from conftest import assert_close

AXPY = """
let y = compute(x, s) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * s + 1.0
}
"""


def gated(program, gate: threading.Event, started: threading.Event | None = None):
    """`program`, whose calls wait for `gate` before running."""
    run = program._run

    def waiting(inputs):
        if started is not None:
            started.set()
        assert gate.wait(30), "the test never opened the gate"
        return run(inputs)
    program._run = waiting
    return program


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(4) as executor:
        yield executor


def job(pool, gate, value):
    return zynml.Future(pool.submit(lambda: gate.wait(30) and value))


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_submit_gives_what_a_call_gives(device, rng):
    prog = zynml.compile(AXPY, device=device)
    x = rng.standard_normal(13).astype(np.float32)
    future = prog.submit(x=x, s=2.5)
    out = future.result(timeout=60)
    assert future.done()
    assert_close(out["y"], x.astype(np.float64) * 2.5 + 1)
    np.testing.assert_array_equal(out["y"], prog(x=x, s=2.5)["y"])


def test_a_timeout_leaves_the_work_running(rng):
    gate = threading.Event()
    prog = gated(zynml.compile(AXPY, device="cpu"), gate)
    x = rng.standard_normal(7).astype(np.float32)
    future = prog.submit(x=x, s=-1.5)
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    assert not future.done() and not future.wait(0.0)
    gate.set()
    assert_close(future.result(timeout=60)["y"], x.astype(np.float64) * -1.5 + 1)
    assert future.done() and future.wait(0.0)


def test_wait_any_gives_the_first_to_complete_and_its_index(pool):
    gates = [threading.Event() for _ in range(3)]
    futures = [job(pool, gate, value) for gate, value in zip(gates, "abc")]
    with pytest.raises(TimeoutError):
        zynml.wait_any(futures, timeout=0.01)
    gates[2].set()  # the last in the list completes first
    assert zynml.wait_any(futures, timeout=60) == ("c", 2)
    assert not futures[0].done() and not futures[1].done()  # the others go on
    gates[1].set()
    futures[1].wait(60)
    value, index = zynml.wait_any(futures)
    assert (value, index) in (("b", 1), ("c", 2))
    gates[0].set()
    assert zynml.wait_all(futures, timeout=60) == ["a", "b", "c"]


def test_wait_all_times_out_until_every_one_completes(pool):
    gates = [threading.Event() for _ in range(2)]
    futures = [job(pool, gate, value) for gate, value in zip(gates, (1, 2))]
    gates[0].set()
    with pytest.raises(TimeoutError):
        zynml.wait_all(futures, timeout=0.01)
    gates[1].set()
    assert zynml.wait_all(futures) == [1, 2]


def test_wait_any_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no futures"):
        zynml.wait_any([])


def test_two_programs_overlap_on_the_pool(rng):
    """A call of one program completes while another's is still held: they run on
    different threads of the pool (one call of a Program at a time)."""
    gate, started = threading.Event(), threading.Event()
    slow = gated(zynml.compile(AXPY, device="cpu"), gate, started)
    fast = zynml.compile(AXPY, device="cpu")
    x = rng.standard_normal(11).astype(np.float32)
    futures = [slow.submit(x=x, s=3.0), fast.submit(x=x, s=0.5)]
    assert started.wait(60)
    out, index = zynml.wait_any(futures, timeout=60)
    assert index == 1 and not futures[0].done()
    assert_close(out["y"], x.astype(np.float64) * 0.5 + 1)
    gate.set()
    results = zynml.wait_all(futures, timeout=60)
    assert_close(results[0]["y"], x.astype(np.float64) * 3 + 1)
