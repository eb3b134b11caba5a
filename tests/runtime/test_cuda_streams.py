"""Streams, futures and graphs of the native CUDA runtime (zynml/streams.py, futures.py,
graphs.py, runtime/cuda/streams.py). Without a GPU, on the fake driver of
test_cuda_executor.py taught streams, events and stream capture: a launch on a capturing
stream is recorded, not run, and cuGraphLaunch runs the recorded launches; an event
recorded on a held stream is not ready until the test releases it. On a GPU (marked
`gpu`), the same against float64 numpy, and futures over a long and a short kernel."""
import itertools
import logging
import types

import numpy as np
import pytest

import zynml
from conftest import assert_close
from zynml.runtime.cuda import driver

from .test_cuda_executor import (TorchLike, _CUresult, decode_params, f32, fake,  # noqa: F401
                                 program_on_fake, upload)

AXPY = """
let y = compute(x, s) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * s + 1.0
}
"""


def k_axpy(x, out, s):
    out[...] = x * s + 1


class _Result(_CUresult):
    CUDA_ERROR_NOT_READY = 600


@pytest.fixture
def cuda(fake):
    """`fake` with streams, events and graphs (module docstring)."""
    handles = itertools.count(0x5000)
    fake.capturing, fake.held, fake.pending = {}, set(), set()
    fake.recorded_on = []  # (call, stream) of launches, copies and allocations
    d = fake.driver
    launch, copy, alloc = d.cuLaunchKernel, d.cuMemcpyDtoDAsync, d.cuMemAllocAsync

    def on_stream(call, stream, node, run):
        fake.recorded_on.append((call, int(stream)))
        if int(stream) in fake.capturing:
            fake.capturing[int(stream)].append(node)
            return (0,)
        return run()

    def launch_kernel(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        node = ("launch", function, decode_params(params, fake.kinds[function.name]))
        return on_stream("launch", stream, node, lambda: launch(
            function, gx, gy, gz, bx, by, bz, shared, stream, params, extra))

    def copy_async(dst, src, nbytes, stream):
        return on_stream("copy", stream, ("copy", dst, src, nbytes),
                         lambda: copy(dst, src, nbytes, stream))

    def alloc_async(nbytes, stream):
        if int(stream) in fake.capturing:
            fake.errors.append("a stream-ordered allocation inside a capture")
        return alloc(nbytes, stream)

    def record(event, stream):
        if int(stream) in fake.held:
            fake.pending.add(event)
        return (0,)

    def replay(graph, stream):
        for node in graph:
            if node[0] == "launch":
                fake.launches.append(node[2])
                fake.kernels[node[1].name](fake, node[2])
            else:
                fake.write(node[1], fake.read(node[2], node[3]))
        return (0,)

    def end_capture(stream):
        return (0, fake.capturing.pop(int(stream)))

    d.CUresult = _Result
    d.CUstream_flags = types.SimpleNamespace(CU_STREAM_DEFAULT=0, CU_STREAM_NON_BLOCKING=1)
    d.CUevent_flags = types.SimpleNamespace(CU_EVENT_DISABLE_TIMING=2)
    d.CUstreamCaptureMode = types.SimpleNamespace(CU_STREAM_CAPTURE_MODE_RELAXED=2)
    d.cuLaunchKernel, d.cuMemcpyDtoDAsync, d.cuMemAllocAsync = \
        launch_kernel, copy_async, alloc_async
    d.cuStreamCreate = lambda flags: (0, next(handles))
    d.cuStreamDestroy = lambda stream: (0,)
    d.cuEventCreate = lambda flags: (0, next(handles))
    d.cuEventRecord = record
    d.cuEventQuery = lambda event: (_Result(600 if event in fake.pending else 0),)
    d.cuEventSynchronize = lambda event: fake.pending.discard(event) or (0,)
    d.cuEventDestroy = lambda event: (0,)
    d.cuStreamBeginCapture = lambda stream, mode: fake.capturing.setdefault(
        int(stream), []) and None or (0,)
    d.cuStreamEndCapture = end_capture
    d.cuGraphGetNodes = lambda graph, count: (0, None, len(graph))
    d.cuGraphInstantiate = lambda graph, flags: (0, graph)
    d.cuGraphLaunch = replay
    d.cuGraphExecDestroy = d.cuGraphDestroy = lambda graph: (0,)
    d.cuMemAlloc = lambda nbytes: alloc(nbytes, 0)
    d.cuMemFree = lambda ptr: d.cuMemFreeAsync(ptr, 0)
    d.cuCtxSynchronize = lambda: (0,)
    fake.release = lambda: fake.pending.clear()
    return fake


def axpy(cuda, **example):
    return program_on_fake(cuda, AXPY, k_axpy, **example)


def expected(x, s):
    return x.astype(np.float64) * s + 1


def test_calls_in_a_stream_block_launch_on_the_stream(cuda, rng, monkeypatch):
    checked = []
    run = zynml.api.Program._run
    monkeypatch.setattr(zynml.api.Program, "_run",
                        lambda self, inputs: checked.append(1) or run(self, inputs))
    x = f32(rng, 37)
    prog = axpy(cuda, x=x, s=2.0)
    xs = TorchLike(upload(x))
    prog(x=xs, s=2.0)  # through the checks once: later calls take the fast path
    stream = zynml.Stream("cuda:0")
    with zynml.stream(stream):
        out = prog(x=xs, s=-0.5)["y"]
    assert cuda.recorded_on[-1] == ("launch", int(stream.handle)) and len(checked) == 2
    assert_close(out.numpy(), expected(x, -0.5))
    assert_close(prog(x=xs, s=3.0)["y"].numpy(), expected(x, 3.0))
    assert len(checked) == 2  # outside the block: the fast path again
    assert zynml.runtime.cuda.function.FastCalls.call is \
        zynml.runtime.cuda.function.FastCalls._call_fast


def test_futures_wait_for_their_event_only(cuda, rng):
    x = f32(rng, 19)
    prog = axpy(cuda, x=x, s=1.0)
    xs = TorchLike(upload(x))
    slow_stream = zynml.Stream("cuda:0")
    cuda.held.add(int(slow_stream.handle))
    with zynml.stream(slow_stream):
        slow = prog.submit(x=xs, s=4.0)  # its event stays pending until released
    fast = prog.submit(x=xs, s=-2.0)  # a stream of the pool
    assert not slow.done() and fast.done()
    with pytest.raises(TimeoutError):
        slow.result(timeout=0.001)
    out, index = zynml.wait_any([slow, fast])
    assert index == 1
    assert_close(out["y"].numpy(), expected(x, -2.0))
    cuda.release()
    results = zynml.wait_all([slow, fast], timeout=5)
    assert_close(results[0]["y"].numpy(), expected(x, 4.0))


def test_each_device_object_has_streams_of_its_own_for_futures(cuda):
    """A new Device of the same ordinal (another driver's: a test's fake, a process
    that starts over) must not be handed the old one's streams, whose context is not
    its own (on an H100 that ended in cuCtxSetCurrent on a stale context)."""
    from zynml.runtime.cuda.streams import POOL_SIZE, stream_for_future
    first = driver.get_device(0)
    assert all(stream_for_future(first).device is first for _ in range(POOL_SIZE + 1))
    driver._devices.clear()  # the next get_device makes a new Device of ordinal 0
    second = driver.get_device(0)
    assert second is not first
    assert all(stream_for_future(second).device is second for _ in range(POOL_SIZE + 1))


def test_a_future_keeps_its_inputs_until_its_event_completes(cuda, rng):
    x = f32(rng, 23)
    prog = axpy(cuda, x=x, s=1.0)
    stream = zynml.Stream("cuda:0")
    cuda.held.add(int(stream.handle))
    array = upload(x)
    address = array.ptr
    with zynml.stream(stream):
        future = prog.submit(x=array, s=0.5)
    del array
    import gc
    gc.collect()
    assert address not in cuda.frees  # the queued kernel still reads it
    cuda.release()
    assert future.done()
    gc.collect()
    assert address in cuda.frees


def test_numpy_inputs_give_numpy_results_from_a_future(cuda, rng):
    x = f32(rng, 11)
    prog = axpy(cuda, x=x, s=1.0)
    out = prog.submit(x=x, s=1.25).result()
    assert isinstance(out["y"], np.ndarray)
    assert_close(out["y"], expected(x, 1.25))


def scalar_program(cuda, x):
    return axpy(cuda, x=x, s=upload(np.array(1.0, np.float32)))


def test_graph_replay_equals_the_direct_call_and_reads_a_scalar_updated_in_place(cuda, rng):
    x = f32(rng, 41)
    prog = scalar_program(cuda, x)
    xs, s = TorchLike(upload(x)), upload(np.array(1.5, np.float32))
    direct = prog(x=xs, s=s)["y"].numpy()
    launches = len(cuda.launches)
    with zynml.capture(device="cuda:0") as graph:
        out = prog(x=xs, s=s)["y"]
    assert len(cuda.launches) == launches  # captured, not run
    assert "1 calls, 1 nodes" in repr(graph)
    assert graph.replay()[0]["y"] is out
    np.testing.assert_array_equal(out.numpy(), direct)
    s.copy_from(np.array(-3.0, np.float32))  # a parameter changed between replays
    graph.replay()
    assert_close(out.numpy(), expected(x, -3.0))
    x2 = f32(rng, 41)
    xs.array.copy_from(x2)
    graph.replay()
    assert_close(graph.outputs[0]["y"].numpy(), expected(x2, -3.0))
    assert graph.captures == 1


COPY_INTO = """
compute(mut dst, src) {
    @kernel elementwise
    for i in 0..n:
        dst[i] = src[i]
}
"""


def test_an_update_written_back_by_a_copy_is_in_the_graph(cuda, rng):
    """A `mut` input whose new values are another buffer (here src itself: the program
    has no kernel) is copied into the caller's array after the call: on the capture
    stream, so that each replay copies again. (On the default stream the copy ran once,
    at the capture, and replays left dst as it was: a Llama step's residual stream.)"""
    prog = program_on_fake(cuda, COPY_INTO, None, dst=f32(rng, 23), src=f32(rng, 23))
    dst, src = upload(f32(rng, 23)), upload(f32(rng, 23))
    with zynml.capture(device="cuda:0") as graph:
        assert prog(dst=dst, src=src)["dst"] is dst
    fresh = f32(rng, 23)
    src.copy_from(fresh)
    graph.replay()
    np.testing.assert_array_equal(dst.numpy(), fresh)


def test_a_graph_is_captured_again_when_an_input_moves(cuda, rng, caplog):
    x = f32(rng, 17)
    prog = scalar_program(cuda, x)
    xs, s = TorchLike(upload(x)), upload(np.array(2.0, np.float32))
    with zynml.capture(device="cuda:0") as graph:
        prog(x=xs, s=s)
    x2 = f32(rng, 17)
    xs.array = upload(x2)  # the tensor's storage was replaced
    with caplog.at_level(logging.INFO, logger="zynml.recompiles"):
        outputs = graph.replay()
    assert "graph captured again: the buffer of input 'x' of call 1 moved" in caplog.text
    assert graph.captures == 2
    assert_close(outputs[0]["y"].numpy(), expected(x2, 2.0))


def test_a_host_input_inside_a_capture_is_an_error_naming_it(cuda, rng):
    x = f32(rng, 7)
    prog = scalar_program(cuda, x)
    s = upload(np.array(2.0, np.float32))
    with pytest.raises(zynml.ZynMLError, match="input 'x' of a call inside zynml.capture "
                                               "is on the host"):
        with zynml.capture(device="cuda:0"):
            prog(x=x, s=s)
    assert not cuda.capturing  # the capture was ended


def test_graph_memory_is_the_graphs_own(cuda, rng):
    """Buffers allocated in a capture are cuMemAlloc'd (not stream-ordered) and freed
    with the graph, not when the call's temporaries go."""
    x = f32(rng, 5)
    prog = scalar_program(cuda, x)
    xs, s = TorchLike(upload(x)), upload(np.array(2.0, np.float32))
    with zynml.capture(device="cuda:0") as graph:
        out = prog(x=xs, s=s)["y"]
    address = out.ptr
    graph.replay()
    assert address not in cuda.frees
    del graph, out
    import gc
    gc.collect()
    assert address in cuda.frees


# ---------------------------------------------------------------------- on a GPU

def gpu_like(shape, dtype):
    """Something with a CUDA array interface: compiles the signature of a GPU argument
    without a GPU (compile-only runs)."""
    return types.SimpleNamespace(__cuda_array_interface__={
        "shape": shape, "typestr": np.dtype(dtype).str, "data": (0, False), "version": 3,
        "strides": None})


def on_the_gpu():
    """Past compiling: in compile-only runs this skips (conftest patches get_device)."""
    driver.get_device(0)
    return pytest.importorskip("torch")


def _axpy_on_the_gpu(rng):
    """(torch, x on the host, AXPY compiled for cuda:0, x and s = 1.5 as torch GPU
    tensors)."""
    x = rng.standard_normal(1001).astype(np.float32)
    prog = zynml.compile(AXPY, device="cuda:0")
    prog.artifact(x=gpu_like((1001,), np.float32), s=gpu_like((), np.float32))
    torch = on_the_gpu()
    return torch, x, prog, torch.from_numpy(x).cuda(), torch.tensor(1.5, device="cuda")


@pytest.mark.gpu
def test_gpu_graph_replay_and_a_scalar_between_replays(rng):
    torch, x, prog, xs, s = _axpy_on_the_gpu(rng)
    direct = torch.as_tensor(prog(x=xs, s=s)["y"], device="cuda").cpu().numpy()
    with zynml.capture(device="cuda:0") as graph:
        out = prog(x=xs, s=s)["y"]
    graph.replay()
    np.testing.assert_array_equal(out.numpy(), direct)  # bit for bit
    for value in (-2.0, 0.75):
        s.fill_(value)
        graph.replay()
        assert_close(out.numpy(), expected(x, value))
    with pytest.raises(zynml.ZynMLError, match="input 'x' .* on the host"):
        with zynml.capture(device="cuda:0"):
            prog(x=x, s=s)


@pytest.mark.gpu
def test_gpu_a_graph_dropped_during_another_capture_leaves_it_valid(rng):
    """A graph whose last reference goes while another is being captured (the garbage
    collector can run at any allocation) frees its buffers after that capture: freeing
    them at once synchronized the device and invalidated the capture (the decode
    benchmark's batch-16 capture, 2026-11-26)."""
    import gc
    _, x, prog, xs, s = _axpy_on_the_gpu(rng)
    prog(x=xs, s=s)  # loaded before any capture
    with zynml.capture(device="cuda:0") as first:
        prog(x=xs, s=s)
    first.replay()
    with zynml.capture(device="cuda:0") as second:
        out = prog(x=xs, s=s)["y"]
        del first
        gc.collect()  # the first graph's buffers go in the middle of this capture
    second.replay()
    assert_close(out.numpy(), expected(x, 1.5))


# The long kernel: a 4096^3 f32 product (about 5 ms on an H100). (A body loop such as
# `for k in 0..steps: acc = acc * 0.999 + s` runs as one launch per step on CUDA today,
# millions of launches: that made these tests hang on 2026-11-26.)
SIDE = 4096
LONG = """
let y = compute(a, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += a[i, k] * b[k, j]
        out[i, j] = sum
}
"""


@pytest.mark.gpu
def test_gpu_future_any_picks_the_short_kernel_and_timeout_fires(rng):
    n = 1 << 16
    x = rng.standard_normal(n).astype(np.float32)
    long = zynml.compile(LONG, device="cuda:0")
    short = zynml.compile(AXPY, device="cuda:0")
    square = gpu_like((SIDE, SIDE), np.float32)
    long.artifact(a=square, b=square)
    short.artifact(x=gpu_like((n,), np.float32), s=0.5)
    torch = on_the_gpu()
    xs = torch.from_numpy(x).cuda()
    a = torch.randn(SIDE, SIDE, device="cuda") / 64
    b = torch.randn(SIDE, SIDE, device="cuda") / 64
    long(a=a, b=b), short(x=xs, s=0.5)
    torch.cuda.synchronize()
    slow = long.submit(a=a, b=b)
    fast = short.submit(x=xs, s=0.5)
    out, index = zynml.wait_any([slow, fast])
    assert index == 1
    assert_close(out["y"].numpy(), expected(x, 0.5))
    with pytest.raises(TimeoutError):
        long.submit(a=a, b=b).result(timeout=1e-4)
    late = long.submit(a=b, b=a)
    with pytest.raises(TimeoutError):
        late.result(timeout=1e-4)
    reference = long(a=b, b=a)["y"].numpy()
    np.testing.assert_array_equal(late.result()["y"].numpy(), reference)
    assert slow.result()["y"].shape == (SIDE, SIDE)


ASYNC = """
let fs = [
    compute(a) @async {
        @kernel matmul
        for i in 0..M, j in 0..N:
            var sum = 0.0
            for k in 0..K:
                sum += a[i, k] * a[k, j]
            out[i, j] = sum
    },
    compute(a) @async {
        @kernel elementwise
        for i in 0..M, j in 0..N:
            out[i, j] = a[i, j] * 0.5 + 1.0
    },
]
let g = compute(a) @async {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += a[k, i] * a[k, j]
        out[i, j] = sum
}
let (first, index) = await any(fs)
let safe = await g timeout 100us else a
"""


@pytest.mark.gpu
def test_gpu_async_computes_any_and_timeout_in_the_language(rng):
    """Each block on a stream of its own: the short block completes first while the
    products run. From the second call on: the first, in a fresh process, ran the blocks
    one after the other on an H100 (docs/devices.md)."""
    prog = zynml.compile(ASYNC, device="cuda:0")
    for part in prog._async.parts:
        if part.program is not None:
            part.program.artifact(a=gpu_like((SIDE, SIDE), np.float32))
    torch = on_the_gpu()
    a = torch.randn(SIDE, SIDE, device="cuda") / 64
    prog(a=a)
    torch.cuda.synchronize()
    out = prog(a=a)
    assert int(out["index"]) == 1  # the short block, second in the list
    assert_close(out["first"].numpy(), expected(a.cpu().numpy(), 0.5))
    assert out["safe"] is a  # g had not completed: the default
    torch.cuda.synchronize()
