"""`zynml.capture`: record a sequence of Program calls once, replay it many times.

    with zynml.capture(device="cuda:0") as graph:
        h = norm(x=x, w=w)["y"]          # calls inside the block are recorded
        out = proj(h=h, p=p)["z"]
    graph.replay()                       # every recorded launch again, at once
    graph.outputs[1]["z"]                # the last call's outputs, as of the last replay

On native CUDA the calls inside the block run on a capture stream (runtime/cuda/
streams.py: cuStreamBeginCapture in relaxed mode, cuStreamEndCapture, cuGraphInstantiate)
and `replay()` is one cuGraphLaunch on the legacy default stream, ordered with the
calls that name no stream and with PyTorch's default stream. What a captured call
allocates (its outputs, its temporaries) is the graph's: the same buffers at every
replay, valid as long as the graph or an output array lives. Captured calls take GPU
arrays; numbers given for scalar inputs are part of the graph as captured. To change a
value between replays, pass it as a 0-d GPU array and write it in place (a position, a
token id): the kernels read it at each replay. The graph holds the input arrays: an input
whose buffer has moved (a resized tensor) or whose shape changed since the capture makes
`replay` capture again, and the `zynml.recompiles` log says why.

On other devices (the CPU through IREE, the interpreter) there is no graph to make:
`capture` runs and records the calls, and `replay` runs them again in order on the same
input arrays (an output of an earlier call fed to a later one is the earlier call's new
output), so updating an input in place between replays works the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .devices import DeviceError, parse_device
from .errors import ZynMLError
from .runtime import call_context
from .specialize import LOGGER, _enable_log

__all__ = ["Graph", "capture"]


@dataclass
class _Call:
    program: Any
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    # input name -> (index of an earlier call, its output name, the shape it is seen
    # with: None, or a reshape of that output made between the calls): fed by the graph
    sources: dict[str, tuple[int, str, Any]] = field(default_factory=dict)
    # input name -> (pointer, shape, dtype) of a GPU array given from outside whose
    # buffer may move (a torch tensor can be resized; a DeviceArray's buffer is fixed)
    layout: dict[str, tuple] = field(default_factory=dict)


class Graph:
    """Program calls recorded by `zynml.capture` (module docstring)."""

    records_calls = True  # Program.__call__ hands calls inside the block to `call`

    def __init__(self, device: str = "cuda:0"):
        try:
            kind, ordinal = parse_device(device)
        except DeviceError as err:
            raise ZynMLError(err.message) from None
        self.device = f"{kind}:{ordinal}" if kind not in ("cpu", "interpreter", "auto") \
            else kind
        self._cuda = kind == "cuda"
        self._ordinal = ordinal
        self._calls: list[_Call] = []
        self._stream = None  # the CaptureStream while capturing (CUDA)
        self._graph = None  # the instantiated CudaGraph (CUDA)
        self._context = None
        self.captures = 0  # how many times the calls were captured (1 + re-captures)

    # ------------------------------------------------------------------ capturing

    def __enter__(self) -> "Graph":
        if self._context is not None or self.captures:
            raise ZynMLError("a Graph is captured once; make a new one with zynml.capture")
        if self._cuda:
            self._begin()
        self._context = call_context.using(self)
        self._context.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        context, self._context = self._context, None
        context.__exit__(exc_type, exc, tb)
        if self._cuda:
            self._end(keep=exc_type is None)
        self.captures += exc_type is None

    def _begin(self) -> None:
        from .runtime.cuda.driver import get_device
        from .runtime.cuda.streams import CaptureStream
        self._stream = CaptureStream(get_device(self._ordinal))

    def _end(self, keep: bool) -> None:
        stream, self._stream = self._stream, None
        try:
            graph = stream.end()
        except Exception:  # an error inside the block may have invalidated the capture:
            if keep:       # that error is the one to show
                raise
            graph = None
        self._graph = graph if keep else None

    def call(self, program: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        """A Program call inside the `with` block (Program.__call__ sends it here)."""
        self._check(program, inputs)
        record = _Call(program, dict(inputs), {})
        for name, value in inputs.items():
            source = self._source(value)
            if source is not None:
                record.sources[name] = source
            elif self._cuda and _is_gpu(value) and not _fixed(value):
                record.layout[name] = _layout(value)
        record.outputs = self._run(program, inputs)
        self._calls.append(record)
        return record.outputs

    def _run(self, program: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        with call_context.using(self._stream):  # the capture stream, or the default
            return program(inputs)

    def _source(self, value: Any) -> tuple[int, str, Any] | None:
        """Which earlier call's output `value` is, or a reshape of (numpy: on the CPU a
        replay makes new outputs, so the reshape is made again of the new one)."""
        for index, earlier in enumerate(self._calls):
            for name, output in earlier.outputs.items():
                if output is value:
                    return index, name, None
                if _same_elements(output, value):
                    return index, name, value.shape
        return None

    def _inputs_of(self, call: _Call) -> dict[str, Any]:
        """A recorded call's inputs, those fed by earlier calls taken from their outputs
        as they are now."""
        inputs = dict(call.inputs)
        for name, (index, output, shape) in call.sources.items():
            value = self._calls[index].outputs[output]
            inputs[name] = value if shape is None else np.reshape(value, shape)
        return inputs

    def _check(self, program: Any, inputs: dict[str, Any]) -> None:
        if program.device != self.device and not (
                program.device in ("cpu", "interpreter") and not self._cuda):
            raise ZynMLError(f"a call of a program for '{program.device}' inside "
                             f"zynml.capture(device='{self.device}')")
        if not self._cuda:
            return
        if program.backend != "native" or program.checks or program._segments or \
                program._data_parallel is not None or program.generic.host_values or \
                program._async is not None:
            raise ZynMLError("a captured call runs one native CUDA program without "
                             "checked mode, other devices, host values or futures")
        for name, value in inputs.items():
            if _is_gpu(value) or self._source(value) is not None:
                continue
            generic = program.generic.inputs.get(name)
            if _is_number(value) and generic is not None and not hasattr(generic, "shape") \
                    and getattr(generic, "name", "") not in ("f16", "bf16"):
                continue  # a kernel parameter: the graph keeps the captured value
            raise ZynMLError(
                f"input '{name}' of a call inside zynml.capture is on the host "
                f"({type(value).__name__}): a captured call takes GPU arrays, and numbers "
                f"for scalar inputs (kept as captured); pass a 0-d GPU array for a scalar "
                f"that changes between replays")

    # ------------------------------------------------------------------ replaying

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """The outputs of each recorded call, in order, as of the last replay (on CUDA the
        same arrays every time: the graph's buffers, overwritten by each replay)."""
        return [call.outputs for call in self._calls]

    def replay(self) -> list[dict[str, Any]]:
        """Run every recorded call again (on CUDA: one graph launch, not waited for);
        returns `outputs`."""
        if self._context is not None or not self.captures:
            raise ZynMLError("replay a Graph after its `with zynml.capture(...)` block")
        if not self._cuda:
            for call in self._calls:
                with call_context.using(None):
                    call.outputs = call.program(self._inputs_of(call))
            return self.outputs
        changed = self._changed()
        if changed:
            self._recapture(changed)
        stream = call_context.current()
        self._graph.launch(getattr(stream, "handle", None))
        return self.outputs

    def _changed(self) -> str | None:
        for index, call in enumerate(self._calls):
            for name, before in call.layout.items():
                now = _layout(call.inputs[name])
                if now[1:] != before[1:]:
                    return (f"input '{name}' of call {index + 1} changed from "
                            f"{before[2]}{list(before[1])} to {now[2]}{list(now[1])}")
                if now[0] != before[0]:
                    return (f"the buffer of input '{name}' of call {index + 1} moved "
                            f"(freed and replaced)")
        return None

    def _recapture(self, why: str) -> None:
        _enable_log()
        LOGGER.info("graph captured again: %s", why)
        calls, self._calls = self._calls, []
        old = [call.outputs for call in calls]
        self._begin()
        try:
            with call_context.using(self):
                for call in calls:
                    self.call(call.program, self._inputs_of(call))
        except BaseException:
            self._end(keep=False)
            raise
        self._end(keep=True)
        self.captures += 1
        del old

    def synchronize(self) -> None:
        """Wait for the replays queued so far (CUDA); nothing to wait for elsewhere."""
        if self._cuda:
            from .runtime.cuda.driver import get_device
            get_device(self._ordinal).synchronize()

    def __repr__(self) -> str:
        nodes = f", {self._graph.nodes} nodes" if self._graph is not None else ""
        return f"<zynml.Graph {self.device}: {len(self._calls)} calls{nodes}>"


def capture(device: str = "cuda:0") -> Graph:
    """`with zynml.capture(device="cuda:0") as graph:` records the Program calls made in
    the block; `graph.replay()` runs them again (module docstring)."""
    return Graph(device)


def _is_gpu(value: Any) -> bool:
    from .call_values import is_gpu_array
    return is_gpu_array(value)


def _is_number(value: Any) -> bool:
    import numpy as np
    return isinstance(value, (bool, int, float, np.generic))


def _same_elements(a: Any, b: Any) -> bool:
    """Two C-contiguous numpy arrays over the same elements (one a reshape of the other)."""
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
        a.size == b.size and a.dtype == b.dtype and a.flags.c_contiguous and \
        b.flags.c_contiguous and a.ctypes.data == b.ctypes.data


def _fixed(value: Any) -> bool:
    """A ZynML DeviceArray: its buffer and shape are its own for its life (the graph holds
    it), so replay need not check that it moved."""
    from .runtime.cuda.device_array import DeviceArray
    return isinstance(value, DeviceArray)


def _layout(value: Any) -> tuple:
    """(device pointer, shape, dtype) of a GPU array."""
    from .runtime.cuda.device_array import gpu_array_spec
    shape, dtype = gpu_array_spec(value)
    pointer = getattr(value, "ptr", None)
    if pointer is None:
        data_ptr = getattr(value, "data_ptr", None)
        pointer = data_ptr() if callable(data_ptr) else \
            value.__cuda_array_interface__["data"][0]
    return int(pointer), tuple(shape), str(dtype)
