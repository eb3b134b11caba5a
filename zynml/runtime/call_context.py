"""Where the calls of this thread go: the default (nothing set), a stream (a CUDA
`Stream`: calls enqueue on it), or a graph being captured (`zynml.capture`: calls are
recorded). Set for a `with` block by `using(context)`; read by `current()`.

The per-call fast path of native CUDA programs (runtime/cuda/function.py, `FastCalls`)
launches on the legacy default stream and must not read a thread-local on every call:
instead it registers a listener here, told when the first context of any thread is
entered (True) and when the last one is left (False), and swaps itself for a checking
version in between. Calls outside every context keep the fast path unchanged.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

__all__ = ["current", "using", "on_contexts_active"]

_local = threading.local()
_lock = threading.Lock()
_entered = 0  # contexts entered and not left, over all threads
_listeners: list[Callable[[bool], None]] = []
_NONE = object()  # `using(None)`: back to the default inside a context


def current() -> Any:
    """The context of this thread's calls, or None (the default)."""
    if not _entered:  # no thread is in a context: skip the thread-local (per-call cost)
        return None
    stack = getattr(_local, "stack", None)
    if not stack:
        return None
    top = stack[-1]
    return None if top is _NONE else top


def on_contexts_active(listener: Callable[[bool], None]) -> None:
    """Call `listener(True)` when some thread enters a context while none was active, and
    `listener(False)` when the last one is left."""
    with _lock:
        _listeners.append(listener)
        if _entered:
            listener(True)


@contextlib.contextmanager
def using(context: Any) -> Iterator[Any]:
    """Calls of this thread inside the block go to `context` (None: the default)."""
    global _entered
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    with _lock:
        _entered += 1
        if _entered == 1:
            for listener in _listeners:
                listener(True)
    stack.append(_NONE if context is None else context)
    try:
        yield context
    finally:
        stack.pop()
        with _lock:
            _entered -= 1
            if _entered == 0:
                for listener in _listeners:
                    listener(False)
