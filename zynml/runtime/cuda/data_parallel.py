"""`@parallel(data)`'s chunks on GPUs, queued from the calling thread (zynml/parallel.py).

On threads of their own, one per GPU, four GPUs' chunks of a GPU-bound call lost 1.9 ms
of 12.5 (Session 20, four H200s): each thread's driver calls hand the GIL to another,
and their pageable copies contend in the driver, so the last GPU started about 1.5 ms
after the first. Here the calling thread queues each GPU's whole chunk without waiting:
the copies in (from page-locked staging to a buffer kept on the GPU), the program's
kernels and the copy of its result out (to staging). What stays on the host, the
memcpys into and out of staging, runs on a pool of threads without the GIL, one array
each, in the order the GPUs need them. Inputs that are page-locked already
(`zynml.allocate(..., pinned=True)`) are copied from where they are, with no staging:
on four H200s that took a GPU-bound call from 3.45-3.50x one GPU to 3.59-3.62x. Where
everything goes is worked out once per call signature (`_Layout`) and kept: a call of
the same shapes only copies and launches. (On that host, the memcpys made by the
calling thread alone were slower: 3.17-3.33x; split in pieces over more threads,
slower still: the hand-overs cost more than the copies.)

Staging is page-locked memory held for the process's life, so it serves calls of up to
MAX_STAGED_BYTES; larger calls are bound by host memory anyway, and go through the
devices' threads (parallel.py) as before.
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .device_array import DeviceArray, dtype_name, is_gpu_array
from .driver import get_device
from .staging import PinnedArena

__all__ = ["MAX_STAGED_BYTES", "run_queued"]

MAX_STAGED_BYTES = 64 << 20  # each way

_INPUTS, _OUTPUTS = PinnedArena(), PinnedArena()

# (device name, its Program, first row, row after the last)
Chunk = tuple[str, Callable[..., dict], int, int]


@dataclass
class _Layout:
    """Where the inputs of calls of one signature go: their staging, regions of _INPUTS
    (valid until the next layout resets it; None for a page-locked input, copied from
    where it is), and buffers on each GPU."""
    signature: tuple
    shared: dict[str, Optional[np.ndarray]]      # the inputs every GPU gets whole
    rows: list[dict[str, Optional[np.ndarray]]]  # per chunk, its rows of the others
    on_gpu: list[dict[str, DeviceArray]]         # per chunk, its inputs on its GPU


_LAST: list[_Layout] = []  # the last call's: one at a time (each resets _INPUTS)


def run_queued(chunks: list[Chunk], inputs: dict[str, Any], split: list[str],
               output: str) -> np.ndarray | None:
    """The chunks' `output`s as one array, each chunk run by its Program on its GPU
    ("cuda:N"); `split` inputs give each chunk its rows, the others go whole to every
    GPU. None where this does not serve the call (inputs on a GPU already or larger than
    MAX_STAGED_BYTES, or staging in use by another thread's call): the caller runs it
    on the devices' threads instead."""
    if any(is_gpu_array(value) for value in inputs.values()):
        return None
    first = get_device(_ordinal(chunks[0][0]))
    copied = tuple((name, value.shape, value.dtype.str, _page_locked(first, value))
                   for name, value in inputs.items()
                   if isinstance(value, np.ndarray) and value.ndim)
    signature = (copied, tuple(split), tuple((c[0], c[2], c[3]) for c in chunks))
    if not _INPUTS.lock.acquire(blocking=False):
        return None
    try:
        layout = _LAST[0] if _LAST and _LAST[0].signature == signature else None
        if layout is None:
            layout = _new_layout(signature, chunks, inputs, split)
            if layout is None:
                return None
            _LAST[:] = [layout]
        with _OUTPUTS.lock:  # taken only with _INPUTS': never held alone
            return _Queued(chunks, inputs, output).run(layout)
    finally:
        _INPUTS.lock.release()


def _page_locked(gpu, value: np.ndarray) -> bool:
    """Can the GPU copy `value` from where it is (C-ordered in page-locked memory)?"""
    return value.flags.c_contiguous and value.nbytes > 0 and \
        gpu.is_page_locked(value.ctypes.data)


def _new_layout(signature: tuple, chunks: list[Chunk], inputs: dict[str, Any],
                split: list[str]) -> _Layout | None:
    staged = {name for name, _, _, locked in signature[0] if not locked}
    shared = [name for name, *_ in signature[0] if name not in split]
    whole = [(inputs[n].dtype, inputs[n].shape) for n in shared]
    parts = [[(inputs[n].dtype, (stop - start,) + inputs[n].shape[1:]) for n in split]
             for _, _, start, stop in chunks]
    room = PinnedArena.room([r for n, r in zip(shared, whole) if n in staged] +
                            [r for part in parts for n, r in zip(split, part) if n in staged])
    if room > MAX_STAGED_BYTES:
        return None
    _LAST.clear()  # its regions are about to be reused
    get_device(_ordinal(chunks[0][0])).make_current()  # staging's context
    _INPUTS.reset(room)

    def staging(name, dtype, shape):
        return _INPUTS.take(dtype, shape) if name in staged else None
    staged_shared = {n: staging(n, *region) for n, region in zip(shared, whole)}
    staged_rows = [{n: staging(n, *region) for n, region in zip(split, part)}
                   for part in parts]
    on_gpu = [dict(zip(shared + split, _on_gpu(get_device(_ordinal(device)), whole + part)))
              for (device, *_), part in zip(chunks, parts)]
    return _Layout(signature, staged_shared, staged_rows, on_gpu)


def _on_gpu(gpu, layout: list) -> list[DeviceArray]:
    """Arrays of `layout`'s (dtype, shape)s on `gpu`, in one allocation."""
    base = DeviceArray.empty((PinnedArena.room(layout),), "uint8", gpu)
    arrays, used = [], 0
    for dtype, shape in layout:
        used = -(-used // PinnedArena.ALIGN) * PinnedArena.ALIGN
        arrays.append(DeviceArray(gpu, base.ptr + used, shape, dtype_name(np.dtype(dtype)),
                                  owner=base))
        used += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return arrays


class _Queued:
    """One call's chunks: staged, queued on each GPU in turn, then gathered."""

    def __init__(self, chunks, inputs, output):
        self.chunks, self.inputs, self.output = chunks, inputs, output
        self.used: list = []  # the GPUs given work, to wait for on a failure
        self.queued: list[tuple[Any, DeviceArray, np.ndarray | None, int, int]] = []
        self.gathered: np.ndarray | None = None
        self.staged_output = False
        self.copies: list[Future] = []

    def run(self, layout: _Layout) -> np.ndarray:
        # the memcpys in the order the GPUs need them: what all get, then each one's rows
        shared = {n: self._stage(region, self.inputs[n]) for n, region in layout.shared.items()}
        rows = [{n: self._stage(region, self.inputs[n][start:stop])
                 for n, region in part.items()}
                for (_, _, start, stop), part in zip(self.chunks, layout.rows)]
        try:
            for k, chunk in enumerate(self.chunks):
                hosts = shared | rows[k]
                for copy in hosts.values():
                    if isinstance(copy, Future):
                        copy.result()  # raises a failed memcpy's error
                self._queue(chunk, layout.on_gpu[k], hosts)
        except BaseException:
            wait(self.copies)  # nothing may still write staging once the lock goes,
            self._wait_all()   # nor a queued copy still read it
            raise
        return self._gather()

    def _stage(self, region: Optional[np.ndarray], value: np.ndarray):
        """Where a GPU copies `value` from: `value` itself where it is page-locked
        (region None), else its staging region, filled on the pool (a Future of it)."""
        return value if region is None else self._on_pool(np.copyto, region, value,
                                                          gives=region)

    def _on_pool(self, work, *args, gives=None) -> Future:
        """`work(*args)` on the pool, a Future of `gives`."""
        future = _pool().submit(_then, work, args, gives)
        self.copies.append(future)
        return future

    def _queue(self, chunk: Chunk, on_gpu: dict[str, DeviceArray], hosts: dict) -> None:
        """Copies in, the program, the copy of its result out: all queued on the GPU."""
        device, part, start, stop = chunk
        gpu = get_device(_ordinal(device))
        gpu.make_current()  # this GPU's stream, memory and launches
        self.used.append(gpu)
        for name, array in on_gpu.items():
            host = hosts[name]
            host = host.result() if isinstance(host, Future) else host
            gpu.copy_to_device(array.ptr, host.ctypes.data, host.nbytes)
        result = part(**(self.inputs | on_gpu))[self.output]
        if not isinstance(result, DeviceArray) or result.device is not gpu or \
                result.shape[:1] != (stop - start,):
            raise ValueError(f"internal: a chunk of rows {start}:{stop} on {device} gave "
                             f"{type(result).__name__} {getattr(result, 'shape', '')}")
        if self.gathered is None:  # the first result tells the output's shape and dtype
            self._allocate_output(result)
        staged_out = None
        if self.staged_output:
            staged_out = _OUTPUTS.take(result.dtype, result.shape)
            gpu.copy_to_host(staged_out.ctypes.data, result.ptr, result.nbytes)
        self.queued.append((gpu, result, staged_out, start, stop))

    def _allocate_output(self, first: DeviceArray) -> None:
        rows = self.chunks[-1][3]  # the chunks split rows 0 to this
        self.gathered = np.empty((rows,) + tuple(first.shape[1:]), first.dtype)
        room = PinnedArena.room([(first.dtype, (stop - start,) + tuple(first.shape[1:]))
                                 for _, _, start, stop in self.chunks])
        self.staged_output = room <= MAX_STAGED_BYTES
        if self.staged_output:
            _OUTPUTS.reset(room)

    def _gather(self) -> np.ndarray:
        """Each GPU's result into its rows as soon as that GPU is done (the first queued
        finishes first, while the others still run), the memcpys on the pool. A result
        too large to stage is a pageable copy, which waits for its GPU: on the pool too,
        so that the GPUs' copies run at once."""
        outs = []
        try:
            for gpu, result, staged, start, stop in self.queued:
                rows = self.gathered[start:stop]
                if staged is None:
                    outs.append(self._on_pool(_download, gpu, rows, result))
                    continue
                gpu.synchronize()
                outs.append(self._on_pool(np.copyto, rows, staged))
        except BaseException:
            self._wait_all()
            raise
        finally:
            wait(outs)
        for out in outs:
            out.result()  # raises a failed copy's error
        return self.gathered

    def _wait_all(self) -> None:
        """Every GPU given work has finished it (a failure's path: staging is reused)."""
        for gpu in self.used:
            try:
                gpu.synchronize()
            except Exception:  # the failure being raised says more
                pass


def _then(work, args: tuple, gives):
    work(*args)
    return gives


def _download(gpu, rows: np.ndarray, result: DeviceArray) -> None:
    gpu.copy_to_host(rows.ctypes.data, result.ptr, result.nbytes)
    gpu.synchronize()


_POOL: list[ThreadPoolExecutor] = []


def _pool() -> ThreadPoolExecutor:
    """The threads of the host's copies (numpy's and the driver's release the GIL)."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(min(8, os.cpu_count() or 1),
                                        thread_name_prefix="zynml-staging"))
    return _POOL[0]


def _ordinal(device: str) -> int:
    return int(device.partition(":")[2] or 0)
