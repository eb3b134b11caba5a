"""ZYNML_CUDA_WATCHDOG (zynml/runtime/cuda/watchdog.py, Device.finish_within): each native
CUDA call waits for its kernels, at most that many seconds; a fault is an error naming
that call's kernels (not a later call's), and kernels still running then are an error
instead of a process that never returns. On test_cuda_executor's fake driver, whose
events report what each test says; the fast path and the interpreter alike."""
import time

import pytest

from .test_cuda_executor import (executor_for, f32, fake, flat_plan, flat_reference,  # noqa: F401
                                 k_add_row, k_scale, upload)
from conftest import assert_close
from zynml.runtime.cuda.driver import CudaError

NOT_READY, ILLEGAL_ADDRESS = 600, 700


def events_reporting(fake, status):
    """The fake's events: each query answers `status` (0: the work has finished)."""
    queries = []
    fake.driver.cuEventCreate = lambda flags: (0, "event")
    fake.driver.cuEventRecord = lambda event, stream: (0,)
    fake.driver.cuEventDestroy = lambda event: (0,)

    def query(event):
        queries.append(event)
        return (status,)
    fake.driver.cuEventQuery = query
    return queries


@pytest.fixture(params=["fast path", "interpreter"])
def watched(fake, rng, monkeypatch, request):
    """A two-kernel plan's executor made with the watchdog at 0.2 s, and its inputs."""
    monkeypatch.setenv("ZYNML_CUDA_WATCHDOG", "0.2")
    if request.param == "interpreter":
        monkeypatch.setenv("ZYNML_CUDA_POISON", "1")  # which turns the fast path off
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    x, v = f32(rng, 5, 7), f32(rng, 7)
    executor = executor_for(fake, flat_plan())
    assert (executor.flat is not None) == (request.param == "fast path")
    return executor, x, v, [upload(x), upload(v)]


def test_a_call_whose_kernels_finish_returns_its_results(fake, watched):
    executor, x, v, inputs = watched
    queries = events_reporting(fake, 0)
    out, = executor(inputs)
    assert queries  # it waited
    assert_close(out.numpy(), flat_reference(x, v))


def test_kernels_still_running_are_an_error_naming_them(fake, watched):
    executor, _, _, inputs = watched
    events_reporting(fake, NOT_READY)
    start = time.monotonic()
    with pytest.raises(CudaError, match=r"k_add_row.*k_scale.* had not finished after "
                                        r"0\.2 s \(ZYNML_CUDA_WATCHDOG\)"):
        executor(inputs)
    assert 0.2 <= time.monotonic() - start < 5


def test_a_fault_is_an_error_of_the_call_that_made_it(fake, watched):
    executor, _, _, inputs = watched
    events_reporting(fake, ILLEGAL_ADDRESS)
    with pytest.raises(CudaError, match="kernels of this call: k_add_row.* failed: "
                                        "CUDA_ERROR_ILLEGAL_ADDRESS"):
        executor(inputs)


def test_without_the_watchdog_a_call_does_not_wait(fake, rng, monkeypatch):
    monkeypatch.delenv("ZYNML_CUDA_WATCHDOG", raising=False)
    fake.kernels.update(k_add_row=k_add_row, k_scale=k_scale)
    queries = events_reporting(fake, NOT_READY)
    executor = executor_for(fake, flat_plan())
    executor([upload(f32(rng, 5, 7)), upload(f32(rng, 7))])
    assert queries == []
