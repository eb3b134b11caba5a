"""Small CPU calls run on the caller's thread; large ones on IREE's worker threads.

IREE's `local-task` device runs a call on a pool of worker threads: the caller posts
the work and sleeps until a worker has done it. For a small call that hand-off is most
of the time: a 1024-element chain takes 9 µs on `local-sync` (inline, on the caller's
thread) against 13 µs on `local-task` on an idle 2-core machine, and 70 µs or more on a
busy one, where the sleeping worker waits for a core. Both devices run the same vmfb
(the `local` HAL device's executables) and give the same bits: the work's split into
workgroups is compiled in, not chosen by the thread count.

`RoutedFunction` therefore loads a module on both devices and routes each call by the
bytes it moves, inputs and results: at or under `ZYNML_CPU_SYNC_BYTES`, the call runs
on `local-sync`. Results' sizes are known only after a call, so the first call of each
set of input shapes runs on `local-task` and fixes the route of those shapes. A
scalar that sets the work (a loop count) is not part of the route: work of a few
input bytes that loops long runs on one thread.
"""
from __future__ import annotations

import numpy as np

from .. import knobs
from .iree_runner import IreeFunction, IreeModule

__all__ = ["RoutedFunction", "cpu_function"]

_ROUTES_MAX = 256  # shape sets remembered per function (a program rarely sees more)
_ndarray = np.ndarray


def cpu_function(vmfb: bytes, driver: str, name: str = "main"):
    """The callable of function `name` of `vmfb` on `driver`: routed between local-sync
    and local-task when the driver is local-task and small calls may run inline."""
    sync_bytes = knobs.CPU_SYNC_BYTES.get()
    if driver != "local-task" or sync_bytes == 0:
        return IreeModule(vmfb, driver).function(name)
    return RoutedFunction(vmfb, name, sync_bytes)


class RoutedFunction:
    """An IreeFunction's interface over one vmfb loaded on local-task and local-sync."""

    __slots__ = ("name", "signature", "sync_bytes", "_vmfb", "_task", "_sync", "_routes")

    def __init__(self, vmfb: bytes, name: str, sync_bytes: int):
        self._task: IreeFunction = IreeModule(vmfb, "local-task").function(name)
        self.name, self.signature = self._task.name, self._task.signature
        self.sync_bytes = sync_bytes
        self._vmfb = vmfb  # loaded on local-sync at the first small call
        self._sync: IreeFunction | None = None
        self._routes: dict[tuple, IreeFunction] = {}

    def __repr__(self) -> str:
        return f"<RoutedFunction {self.signature or self.name}: <= {self.sync_bytes} B inline>"

    def __call__(self, *args) -> list[np.ndarray]:
        shapes = tuple(a.shape if type(a) is _ndarray else None for a in args)
        function = self._routes.get(shapes)
        if function is not None:
            return function(*args)
        results = self._task(*args)
        moved = sum(a.nbytes for a in (*args, *results) if isinstance(a, _ndarray))
        if len(self._routes) >= _ROUTES_MAX:
            self._routes.clear()
        self._routes[shapes] = self._inline() if moved <= self.sync_bytes else self._task
        return results

    def routed(self, *args):
        """The function that calls of these arguments' shapes go to (a fast path that
        already keys calls by shape calls it directly), or self before the first."""
        return self._routes.get(tuple(a.shape if type(a) is _ndarray else None
                                      for a in args), self)

    def route(self, *args) -> str | None:
        """The driver that calls of these arguments' shapes go to; None before the first."""
        function = self._routes.get(tuple(a.shape if type(a) is _ndarray else None
                                          for a in args))
        return None if function is None else "local-sync" if function is self._sync \
            else "local-task"

    def release_staging(self) -> None:
        for function in (self._task, self._sync):
            if function is not None:
                function.release_staging()

    def _inline(self) -> IreeFunction:
        if self._sync is None:
            self._sync = IreeModule(self._vmfb, "local-sync").function(self.name)
        return self._sync
