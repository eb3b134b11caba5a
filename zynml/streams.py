"""`zynml.Stream` and `with zynml.stream(s):`: program calls on a CUDA stream of one's own.

    s = zynml.Stream("cuda:0")
    with zynml.stream(s):
        out = prog(x=x)          # enqueued on s; the outputs stay on the GPU
    s.synchronize()              # or out["y"].numpy(), which waits

A Stream is blocking (runtime/cuda/streams.py): its work is ordered with the legacy
default stream, so arrays that PyTorch writes on its default stream, or that ZynML's
calls without a stream make, are safe to read on it, and the other way round; two
Streams run concurrently. Calls outside a `zynml.stream` block are unchanged (the fast
path, on the legacy default stream).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from .devices import DeviceError, parse_device
from .errors import ZynMLError
from .runtime import call_context
from .runtime.cuda import streams as cuda_streams

__all__ = ["Stream", "stream"]


class Stream(cuda_streams.Stream):
    """A new CUDA stream on `device` ("cuda:N"): `synchronize()`, `record()` (an event)."""

    def __init__(self, device: str = "cuda:0"):
        try:
            kind, ordinal = parse_device(device)
        except DeviceError as err:
            raise ZynMLError(err.message) from None
        if kind != "cuda":
            raise ZynMLError(f"streams are CUDA's: zynml.Stream('cuda:N'), not '{device}' "
                             "(on the CPU, Program.submit gives futures on a thread pool)")
        from .runtime.cuda.driver import CudaError, get_device
        try:
            super().__init__(get_device(ordinal))
        except CudaError as err:
            raise ZynMLError(f"cannot make a stream on '{device}': {err}") from None


@contextlib.contextmanager
def stream(s: Any) -> Iterator[Any]:
    """Program calls of this thread inside the block run on `s` (a zynml.Stream); their
    outputs stay on the GPU (DeviceArrays), so a call does not wait. None: the default."""
    if s is not None and not isinstance(s, cuda_streams.Stream):
        raise ZynMLError(f"zynml.stream takes a zynml.Stream, not {type(s).__name__}")
    with call_context.using(s):
        yield s
