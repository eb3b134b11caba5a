"""CUDA streams, events and graphs of one device (cuda-python's driver API).

`Stream` is a stream ZynML can run a program call on (`run_plan(..., queue=stream)` in
executor.py): it allocates, frees, copies and launches on its own handle. Streams are
created *blocking* (`CU_STREAM_DEFAULT`): work on them is ordered with the legacy default
stream, which ZynML's calls without a stream use and PyTorch's and CuPy's default streams
are, so arrays made or freed there need no extra care; two such streams still run
concurrently with each other.

`CaptureStream` records instead of running: a non-blocking stream in relaxed capture
mode (cuStreamBeginCapture), so that loading modules and uploading TMA descriptors on
the legacy stream during a capture is allowed and not captured. Its allocations are the
graph's own (cuMemAlloc, freed when the graph goes), the same addresses at every replay;
its frees do nothing. `CudaGraph` is what a capture gives: cuStreamEndCapture,
cuGraphInstantiate, then cuGraphLaunch per replay.
"""
from __future__ import annotations

import time
import weakref
from typing import Any

import numpy as np

from .driver import Device, _driver, check
from . import tensor_maps

__all__ = ["Stream", "Event", "CaptureStream", "CudaGraph", "stream_for_future",
           "legacy_stream", "read_after"]


class Stream:
    """A CUDA stream of `device` (blocking: ordered with the legacy default stream)."""

    def __init__(self, device: Device, flags: Any = None):
        driver = _driver()
        self.device = device
        device.make_current()
        if flags is None:
            flags = driver.CUstream_flags.CU_STREAM_DEFAULT
        self.handle = check(driver.cuStreamCreate(int(flags)), "cuStreamCreate")
        self.tensor_maps = tensor_maps.for_device(device)

    def __repr__(self) -> str:
        return f"<zynml.Stream cuda:{self.device.ordinal} {int(self.handle):#x}>"

    # what executor.PlanExecutor.run_plan asks of a queue: the Device's calls, on this
    # stream (kernel launches go through KernelModule.launch's `stream`)
    def alloc(self, nbytes: int) -> int:
        return self.device.alloc(nbytes, self.handle)

    def free(self, ptr: int) -> None:
        self.device.free(ptr, self.handle)

    def copy_on_device(self, dst: int, src: int, nbytes: int) -> None:
        self.device.copy_on_device(dst, src, nbytes, self.handle)

    def fill_bytes(self, ptr: int, byte: int, nbytes: int) -> None:
        self.device.fill_bytes(ptr, byte, nbytes, self.handle)

    def record(self) -> "Event":
        """An event that completes when the work queued so far on this stream has."""
        return Event(self)

    def synchronize(self) -> None:
        check(_driver().cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def __del__(self):
        try:  # the stream's queued work still completes (cuStreamDestroy does not wait)
            _driver().cuStreamDestroy(self.handle)
        except Exception:
            pass


class _LegacyStream:
    """The legacy default stream (handle 0), where calls without a stream run: what an
    Event is recorded on after such a call."""

    def __init__(self):
        self.handle = _driver().CUstream(0)


def legacy_stream() -> _LegacyStream:
    return _LegacyStream()


class Event:
    """A CUDA event recorded on a stream (cuEventRecord): `done()` asks (cuEventQuery),
    `wait(timeout)` polls with short sleeps, or blocks (cuEventSynchronize) without one."""

    POLL_SECONDS = 50e-6

    def __init__(self, stream: Stream):
        driver = _driver()
        flags = driver.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self.handle = check(driver.cuEventCreate(int(flags)), "cuEventCreate")
        check(driver.cuEventRecord(self.handle, stream.handle), "cuEventRecord")

    def done(self) -> bool:
        driver = _driver()
        status = driver.cuEventQuery(self.handle)
        status = status[0] if isinstance(status, tuple) else status
        if status == driver.CUresult.CUDA_ERROR_NOT_READY:
            return False
        check((status,), "cuEventQuery")
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """True once complete; False if `timeout` seconds passed first."""
        if timeout is None:
            check(_driver().cuEventSynchronize(self.handle), "cuEventSynchronize")
            return True
        deadline = time.monotonic() + timeout
        while not self.done():
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.POLL_SECONDS)
        return True

    def __del__(self):
        try:
            _driver().cuEventDestroy(self.handle)
        except Exception:
            pass


def read_after(array, event: Event) -> np.ndarray:
    """`array` (a DeviceArray) copied to the host once `event` has completed, on a
    non-blocking stream of its device: it waits for the work queued before the event,
    not for work queued since on the legacy stream (a training loop reads one step's
    loss while the next step runs)."""
    event.wait()
    reader = _READERS.get(array.device)
    if reader is None:
        flags = _driver().CUstream_flags.CU_STREAM_NON_BLOCKING
        reader = _READERS.setdefault(array.device, Stream(array.device, flags))
    host = np.empty(array.shape, array.dtype)
    array.device.copy_to_host(host.ctypes.data, array.ptr, array.nbytes, reader.handle)
    reader.synchronize()
    return host


_READERS: "weakref.WeakKeyDictionary[Device, Stream]" = weakref.WeakKeyDictionary()


class CaptureStream(Stream):
    """A stream whose calls are captured into a CUDA graph (see the module docstring)."""

    def __init__(self, device: Device):
        driver = _driver()
        super().__init__(device, driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self.memory: list[int] = []  # the graph's buffers, freed by `release`
        # the graph's own TMA descriptors: the device's shared cache may drop them
        self.tensor_maps = tensor_maps.TensorMaps(device)
        mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        check(driver.cuStreamBeginCapture(self.handle, mode), "cuStreamBeginCapture")
        self.capturing = True
        _CAPTURING.add(id(self))

    def alloc(self, nbytes: int) -> int:
        ptr = int(check(_driver().cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))
        self.memory.append(ptr)
        return ptr

    def free(self, ptr: int) -> None:
        pass  # the graph's buffers live as long as the graph

    def end(self) -> "CudaGraph | None":
        """Stop capturing: the graph (None when the capture was invalidated)."""
        try:
            graph = check(_driver().cuStreamEndCapture(self.handle), "cuStreamEndCapture")
        finally:
            self._stop_capturing()
        return CudaGraph(graph, self)

    def _stop_capturing(self) -> None:
        """After cuStreamEndCapture: graphs that went meanwhile can free their buffers."""
        self.capturing = False
        _CAPTURING.discard(id(self))
        if not _CAPTURING:
            _release_deferred()

    def release(self) -> None:
        """Free the graph's buffers, after every replay queued so far. While any graph
        is being captured, later: waiting for the device (and cuMemFree, which waits)
        during a capture invalidates it (a graph dropped by the garbage collector in the
        middle of another's capture did: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)."""
        if not self.memory and not self.tensor_maps._kept:
            return
        memory, self.memory = self.memory, []
        _DEFERRED.append((memory, self.tensor_maps))
        if not _CAPTURING:
            _release_deferred()

    def __del__(self):
        try:
            if self.capturing:
                _driver().cuStreamEndCapture(self.handle)
                self._stop_capturing()
            self.release()
        except Exception:
            pass
        super().__del__()


_CAPTURING: set[int] = set()  # CaptureStreams capturing now (their ids)
_DEFERRED: list[tuple[list[int], Any]] = []  # (buffers, TensorMaps) of graphs gone since


def _release_deferred() -> None:
    """Free the buffers of the graphs that went, once the device is idle."""
    if not _DEFERRED:
        return
    driver = _driver()
    check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    while _DEFERRED:
        memory, maps = _DEFERRED.pop()
        for ptr in memory:
            driver.cuMemFree(driver.CUdeviceptr(ptr))
        maps.release()


class CudaGraph:
    """An instantiated CUDA graph (cuGraphInstantiate) and the capture stream whose
    memory it uses (kept alive as long as the graph)."""

    def __init__(self, graph, stream: CaptureStream):
        driver = _driver()
        self.graph, self.stream = graph, stream
        self.nodes = self._count_nodes(graph)
        self.exec = check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    @staticmethod
    def _count_nodes(graph) -> int:
        result = check(_driver().cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
        return int(result[-1] if isinstance(result, tuple) else result)

    def launch(self, stream_handle: Any = None) -> None:
        """Replay on `stream_handle` (default: the legacy default stream)."""
        driver = _driver()
        handle = driver.CUstream(0) if stream_handle is None else stream_handle
        check(driver.cuGraphLaunch(self.exec, handle), "cuGraphLaunch")

    def __del__(self):
        try:
            driver = _driver()
            driver.cuGraphExecDestroy(self.exec)
            driver.cuGraphDestroy(self.graph)
        except Exception:
            pass


# device -> [streams, index of the next to reuse]; by Device, not ordinal: a stream
# belongs to the context it was made in (a test's fake driver makes Devices of its own)
_POOLS: "weakref.WeakKeyDictionary[Device, list]" = weakref.WeakKeyDictionary()
POOL_SIZE = 8


def stream_for_future(device: Device) -> Stream:
    """A stream for the next future on `device`: one of a few, round robin, so that
    futures made one after another overlap (the ninth shares the first's stream)."""
    pool = _POOLS.get(device)
    if pool is None:
        pool = _POOLS.setdefault(device, [[], 0])
    streams, index = pool
    if len(streams) < POOL_SIZE:
        streams.append(Stream(device))
        return streams[-1]
    pool[1] = (index + 1) % POOL_SIZE
    return streams[index]
