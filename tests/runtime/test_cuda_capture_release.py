"""A CUDA graph that goes while another is being captured (zynml/runtime/cuda/streams.py)
frees its buffers after that capture ends: cuCtxSynchronize and cuMemFree in the middle
of a capture invalidate it (seen: the decode benchmark's batch-16 capture failed after
the batch-1 model's graph was collected during it). On the fake driver of
test_cuda_executor, with the capture calls added."""
from __future__ import annotations

import types

from runtime.test_cuda_executor import fake  # noqa: F401  (the fake driver)
from zynml.runtime.cuda import streams
from zynml.runtime.cuda.driver import get_device


def _with_capture_calls(fake):
    log = fake.calls
    addresses = iter(range(0x9000_0000, 0xA000_0000, 0x1000))

    def recorded(name, result=None):
        def call(*args):
            log.append((name, args))
            return (0,) if result is None else (0, result(*args))
        return call

    fake.driver.CUstream_flags = types.SimpleNamespace(CU_STREAM_NON_BLOCKING=1,
                                                       CU_STREAM_DEFAULT=0)
    fake.driver.CUstreamCaptureMode = types.SimpleNamespace(CU_STREAM_CAPTURE_MODE_RELAXED=2)
    fake.driver.cuStreamCreate = recorded("cuStreamCreate", lambda flags: "stream")
    fake.driver.cuStreamDestroy = recorded("cuStreamDestroy")
    fake.driver.cuStreamBeginCapture = recorded("cuStreamBeginCapture")
    fake.driver.cuStreamEndCapture = recorded("cuStreamEndCapture", lambda handle: "graph")
    fake.driver.cuGraphGetNodes = recorded("cuGraphGetNodes", lambda graph, n: 3)
    fake.driver.cuGraphInstantiate = recorded("cuGraphInstantiate", lambda g, flags: "exec")
    fake.driver.cuGraphExecDestroy = recorded("cuGraphExecDestroy")
    fake.driver.cuGraphDestroy = recorded("cuGraphDestroy")
    fake.driver.cuCtxSynchronize = recorded("cuCtxSynchronize")
    fake.driver.cuMemAlloc = recorded("cuMemAlloc", lambda nbytes: next(addresses))
    fake.driver.cuMemFree = recorded("cuMemFree")


def _names(calls):
    return [name for name, _ in calls if name in ("cuStreamEndCapture", "cuCtxSynchronize",
                                                  "cuMemFree")]


def test_a_graph_dropped_during_a_capture_frees_its_buffers_after_it(fake):
    _with_capture_calls(fake)
    device = get_device(0)
    first = streams.CaptureStream(device)
    buffer = first.alloc(256)
    graph = first.end()
    second = streams.CaptureStream(device)  # capturing now
    start = len(fake.calls)
    del graph
    first.release()  # as the garbage collector would, in the middle of the capture
    assert _names(fake.calls[start:]) == []
    second.end()
    assert _names(fake.calls[start:]) == ["cuStreamEndCapture", "cuCtxSynchronize",
                                          "cuMemFree"]
    assert [args for name, args in fake.calls if name == "cuMemFree"][0][0] == buffer
    assert streams._DEFERRED == [] and streams._CAPTURING == set()


def test_outside_a_capture_a_graph_frees_at_once(fake):
    _with_capture_calls(fake)
    stream = streams.CaptureStream(get_device(0))
    stream.alloc(64)
    stream.end()
    start = len(fake.calls)
    stream.release()
    assert _names(fake.calls[start:]) == ["cuCtxSynchronize", "cuMemFree"]
