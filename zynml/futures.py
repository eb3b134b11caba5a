"""Futures: program calls that run while Python goes on (`Program.submit`), and
`wait_all` / `wait_any` over them.

On native CUDA a submitted call enqueues its launches on a stream of its own (one of a
few per device, round robin; or the stream of an enclosing `zynml.stream(s)` block) and
its future is a CUDA event recorded after them: `done()` asks the event (cuEventQuery),
`result()` waits for that event only. The future holds the call's inputs and outputs
until the event has completed, so buffers the queued kernels use cannot be freed under
them. Elsewhere (the CPU through IREE, the interpreter) the call runs on a thread pool,
one call of a Program at a time, with the same semantics.

`result(timeout)` and the waits raise TimeoutError when time runs out, and leave the
work running: a later `result()` still gives its value.
"""
from __future__ import annotations

import os
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor, TimeoutError as _PoolTimeout
from typing import Any, Sequence

from .runtime import call_context

__all__ = ["Future", "submit", "wait_all", "wait_any"]

POLL_SECONDS = 50e-6  # how long wait_any sleeps between two rounds of asking


class Future:
    """The outputs of a call that may still be running: `done()`, `result(timeout=None)`."""

    def __init__(self, work: Any, kept: Any = None, to_host: bool = False):
        self._work = work  # an Event (runtime/cuda/streams.py) or a concurrent Future
        self._kept = kept  # what the queued work reads and writes, until it completes
        self._to_host = to_host  # numpy inputs: give numpy outputs, as a plain call does

    def done(self) -> bool:
        """Has the work completed? Never waits."""
        finished = self._work.done()
        if finished and self._kept is not None:
            self._kept = (None, self._kept[1])  # the inputs may go now
        return finished

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until complete (True), or at most `timeout` seconds (False)."""
        if hasattr(self._work, "wait"):  # a CUDA event
            return self._work.wait(timeout)
        try:
            self._work.exception(timeout)
            return True
        except _PoolTimeout:
            return False

    def result(self, timeout: float | None = None) -> Any:
        """The outputs; TimeoutError if not complete within `timeout` seconds (the work
        goes on)."""
        if not self.wait(timeout):
            raise TimeoutError(f"the call did not complete within {timeout} s")
        if not hasattr(self._work, "wait"):
            return self._work.result()
        outputs = self._kept[1]
        if self._to_host:  # copied once, now that the kernels are done
            outputs = {name: _host(value) for name, value in outputs.items()}
            self._to_host = False
        self._kept = (None, outputs)  # the inputs may go now
        return outputs

    def __repr__(self) -> str:
        return f"<zynml.Future {'done' if self.done() else 'running'}>"


def _host(value: Any) -> Any:
    """A DeviceArray as a plain call with numpy inputs gives it: numpy (a scalar if 0-d)."""
    if not (callable(getattr(value, "numpy", None)) and hasattr(value, "device")):
        return value
    host = value.numpy()
    return host[()] if host.ndim == 0 else host


_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()
_program_locks: "weakref.WeakKeyDictionary[Any, threading.Lock]" = \
    weakref.WeakKeyDictionary()


def _thread_pool() -> ThreadPoolExecutor:
    with _pool_lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(max_workers=max(os.cpu_count() or 2, 2),
                                            thread_name_prefix="zynml-future"))
        return _pool[0]


def submit(program: Any, inputs: dict[str, Any]) -> Future:
    """Start `program(inputs)` and return its Future (what `Program.submit` does)."""
    if getattr(call_context.current(), "records_calls", False):
        from .errors import ZynMLError
        raise ZynMLError("Program.submit inside zynml.capture: a graph records plain "
                         "calls (replay it, then wait for it)")
    if program.backend == "native":
        return _submit_on_stream(program, inputs)
    with _pool_lock:
        lock = _program_locks.setdefault(program, threading.Lock())

    def call() -> Any:
        with lock:  # a Program serves one call at a time; different Programs overlap
            with call_context.using(None):
                return program(inputs)
    return Future(_thread_pool().submit(call))


def _submit_on_stream(program: Any, inputs: dict[str, Any]) -> Future:
    """Inside `with zynml.stream(s)`, the call goes on s; otherwise on a stream of the
    device's few for futures; an event recorded after it is the future."""
    from .runtime.cuda.device_array import is_gpu_array
    from .runtime.cuda.driver import get_device
    from .runtime.cuda.streams import Stream, stream_for_future
    stream = call_context.current()
    if not isinstance(stream, Stream) or getattr(stream, "capturing", False):
        stream = stream_for_future(get_device(program.placement.ordinal))
    with call_context.using(stream):
        outputs = program(inputs)
    event = stream.record()
    to_host = not any(is_gpu_array(v) for v in inputs.values())
    return Future(event, kept=(dict(inputs), outputs), to_host=to_host)


def wait_all(futures: Sequence[Future], timeout: float | None = None) -> list[Any]:
    """The results of all, in order; TimeoutError if they have not all completed within
    `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    results = []
    for future in futures:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        results.append(future.result(left))
    return results


def wait_any(futures: Sequence[Future], timeout: float | None = None) -> tuple[Any, int]:
    """(result, index) of the first future to complete (asking each in turn, with a short
    sleep between rounds); the others go on. TimeoutError if none completes within
    `timeout` seconds."""
    if not futures:
        raise ValueError("wait_any of no futures")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        for index, future in enumerate(futures):
            if future.done():
                return future.result(), index
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"none of {len(futures)} calls completed within {timeout} s")
        time.sleep(POLL_SECONDS)
