"""`@device(["cuda:0", "cuda:1"]) @parallel(data)`: one compute block split over devices.

The spec's data parallelism splits the leading (batch) dimension. ZynML does it when the
split cannot change the result, which it checks on the block's text:

    let y = compute(x, w) @device(["cuda:0", "cuda:1"]) @parallel(data) {
        @kernel elementwise
        for b in 0..batch, i in 0..n:          # b: the first loop, from 0, step 1
            out[b, i] = x[b, i] * w[i]          # b only as the first index of out and x
    }

`x` (indexed by `b` first) is split in contiguous chunks along axis 0, one per device;
`w` (never indexed by `b`) goes whole to each device; `out` comes back as the chunks'
results concatenated along axis 0. Each device runs the same program, compiled once per
chunk shape. Anything else is a located error saying why. Model parallelism
(`@parallel(model)`) would be another `Split` kind: a plan of what each device gets and
how the results combine.

The chunks run at the same time. Each device has a thread of its own (one per device for
the whole process, so a GPU's context stays current there), which waits in the driver or
the runtime with the GIL released; the call returns when all are done. Where the inputs
are page-locked (`zynml.allocate(..., pinned=True)`) or scalars, the calling thread
queues every GPU's copies and run itself, and the devices' threads only wait and copy
the results out (four GPUs started 0.7 ms into a call instead of 1.5-1.7 ms, Session
27); where the host has copying to do (pageable arrays, which the driver stages), each
device's thread copies its own chunk, side by side.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SourceLocation, ZynMLError
from .frontend import ast

__all__ = ["DataParallel", "plan_data_parallel"]


@dataclass
class DataParallel:
    devices: list[str]
    split: list[str]       # inputs split along axis 0
    output: str            # the block's result, concatenated along axis 0
    loc: SourceLocation

    def run(self, parts: list, inputs: dict[str, Any]) -> dict[str, Any]:
        """`parts`: one Program per device (same source); returns {output: numpy}."""
        batch = {int(np.shape(inputs[name])[0]) for name in self.split}
        if len(batch) != 1:
            raise ZynMLError("inputs split by @parallel(data) must share their first "
                             f"extent; got {sorted(batch)}", self.loc)
        bounds = np.linspace(0, batch.pop(), len(parts) + 1).round().astype(int)
        chunks = [(device, part, {name: (value[start:stop] if name in self.split else value)
                                  for name, value in inputs.items()}, int(start), int(stop))
                  for device, part, start, stop in
                  zip(self.devices, parts, bounds[:-1], bounds[1:]) if stop > start]
        out = _Gathered(int(bounds[-1]))
        if all(device.startswith("cuda") for device in self.devices) and \
                not any(_needs_host_copy(value) for value in inputs.values()):
            # nothing for the host to copy: this thread queues every GPU's copies and
            # run at once (a hand-over to each GPU's thread cost more); the GPUs'
            # threads wait for the results and copy them into their rows
            launched = _queue_on_gpus([(device, part, chunk) for device, part, chunk, _, _
                                       in chunks], self.output)
            _on_each([(device, result, start, stop) for (device, _, _, start, stop), result
                      in zip(chunks, launched)],
                     lambda device, result, start, stop: out.put(result, start, stop))
        else:
            # one trip to each device's thread: its chunk copied in (the host's copies
            # side by side), run, and its result copied into its rows of the output
            # as soon as it is done, while the others still run
            _on_each(chunks, lambda device, part, chunk, start, stop: out.put(
                self._run_part(device, part, chunk), start, stop))
        return {self.output: out.array}

    def _run_part(self, device: str, part, chunk: dict):
        """One chunk on `device`, on its thread: on a GPU, its arrays uploaded from this
        thread and the result left there (a DeviceArray) for _download."""
        kind, _, number = device.partition(":")
        if kind != "cuda":
            return np.asarray(part(**chunk)[self.output])
        from .runtime.cuda.device_array import DeviceArray
        from .runtime.cuda.driver import get_device
        gpu = get_device(int(number or 0))
        gpu.make_current()  # this thread's calls, allocations and copies go to its GPU
        chunk = {name: DeviceArray.from_numpy(value, gpu)
                 if isinstance(value, np.ndarray) and value.ndim else value
                 for name, value in chunk.items()}
        return part(**chunk)[self.output]


def _needs_host_copy(value) -> bool:
    """Whether copying `value` to a GPU is work for the host: a pageable (or strided)
    host array, which the driver copies through staging memory before the GPU can.
    Page-locked, contiguous ones the GPU's copy engine reads where they are."""
    if not isinstance(value, np.ndarray) or not value.ndim or not value.nbytes:
        return False
    from .runtime.cuda.driver import get_device
    return not value.flags.c_contiguous or not get_device(0).is_page_locked(
        value.ctypes.data)


def _queued_upload(value, gpu):
    """`value` as `gpu`'s argument: a page-locked host array's copy queued, not waited
    for (the caller's array must stay alive and unchanged until the GPU's work is
    done), anything else as it is."""
    if not isinstance(value, np.ndarray) or not value.ndim:
        return value
    from .runtime.cuda.device_array import DeviceArray
    out = DeviceArray.empty(value.shape, value.dtype, gpu)
    gpu.copy_to_device(out.ptr, value.ctypes.data, value.nbytes)
    return out


def _queue_on_gpus(items: list[tuple], output: str) -> list:
    """Each (device, part, chunk): its copies and its run queued on its GPU from this
    thread, whose current context is put back afterwards; a failure waits for the GPUs
    already given work (they read the caller's arrays) before it is raised."""
    from .runtime.cuda.driver import get_device
    gpus, results, replaced = [], [], None
    try:
        for device, part, chunk in items:
            gpu = get_device(int(device.partition(":")[2] or 0))
            previous = gpu.make_current()
            replaced = previous if replaced is None else replaced
            gpus.append(gpu)
            results.append(part(**{name: _queued_upload(value, gpu)
                                   for name, value in chunk.items()})[output])
    except BaseException:
        for gpu in gpus:
            gpu.synchronize()
        raise
    finally:
        if replaced is not None:
            from .runtime.cuda.driver import _driver, _is_null, check
            if not _is_null(replaced):
                check(_driver().cuCtxSetCurrent(replaced), "cuCtxSetCurrent")
    return results


def _on_each(items: list[tuple], work) -> list:
    """`work(*item)` for every item, each on the thread of its device (item[0]); waits
    for all before raising the first failure, so that no part is left running."""
    running = [_worker(item[0]).submit(work, *item) for item in items]
    errors = [f.exception() for f in running]
    for error in errors:
        if error is not None:
            raise error
    return [f.result() for f in running]


class _Gathered:
    """The chunks' results as one array of `rows` rows, made by the first chunk to finish
    (its trailing shape and dtype), under a lock; each chunk's thread copies its own
    rows in."""

    def __init__(self, rows: int):
        self.rows, self.array, self._lock = rows, None, threading.Lock()

    def put(self, result, start: int, stop: int) -> None:
        with self._lock:
            if self.array is None:
                self.array = np.empty((self.rows,) + tuple(result.shape[1:]),
                                      dtype=result.dtype)
        _download(result, self.array[start:stop])


def _download(result, rows: np.ndarray) -> None:
    """A chunk's result into `rows` (a contiguous block of the output's rows)."""
    if isinstance(result, np.ndarray):
        np.copyto(rows, result)
        return
    if tuple(result.shape) != rows.shape or result.dtype != rows.dtype:
        raise ZynMLError(f"internal: a chunk of {result.dtype}{list(result.shape)} for "
                         f"rows of {rows.dtype}{list(rows.shape)}")
    result.device.copy_to_host(rows.ctypes.data, result.ptr, result.nbytes)
    result.device.synchronize()


_workers: dict[str, ThreadPoolExecutor] = {}
_workers_lock = threading.Lock()


def _worker(device: str) -> ThreadPoolExecutor:
    """The one thread that runs `device`'s chunks."""
    with _workers_lock:
        if device not in _workers:
            _workers[device] = ThreadPoolExecutor(1, thread_name_prefix=f"zynml-{device}")
        return _workers[device]


def plan_data_parallel(checked, step, annotation: ast.Annotation) -> DataParallel:
    kernel = step.kernel
    loc = annotation.loc
    if [a for a in annotation.args if not (isinstance(a, ast.Name) and a.id == "data")]:
        raise ZynMLError("only @parallel(data) is supported; model parallelism is not yet",
                         loc)
    devices = _devices(kernel, loc)
    if len([s for s in checked.steps if s.kernel is not None]) != 1:
        raise ZynMLError("@parallel(data) works on a program of one compute block", loc)
    node = kernel.node
    names = []
    for expr in node.inputs:
        if not isinstance(expr, ast.Name) or expr.id not in checked.inputs:
            raise ZynMLError("@parallel(data) splits program inputs: pass them to the "
                             "block by name", expr.loc)
        names.append(expr.id)
    if not node.body or not isinstance(node.body[0], ast.For) or len(node.body) != 1:
        raise ZynMLError("@parallel(data) needs the block to be one loop nest whose first "
                         "loop runs over the batch", loc)
    first = node.body[0].ranges[0]
    if not (isinstance(first.lo, ast.IntLit) and first.lo.value == 0) or first.step:
        raise ZynMLError(f"the batch loop '{first.var}' must run from 0 in steps of 1",
                         first.lo.loc)
    indexed_first, other_uses = set(), []
    _scan(node.body[0], first.var, set(names) | {"out"}, indexed_first, other_uses)
    if other_uses:
        raise ZynMLError(f"the batch variable '{first.var}' may only be the first index of "
                         "the inputs it splits and of `out`; here it is used otherwise",
                         other_uses[0].loc)
    if "out" not in indexed_first:
        raise ZynMLError(f"`out` must be written at `out[{first.var}, ...]` to split the "
                         "batch", loc)
    split = [n for n in names if n in indexed_first]
    return DataParallel(devices, split, step.target, loc)


def _devices(kernel, loc) -> list[str]:
    device = kernel.annotations.get("device")
    if device is None or len(device.args) != 1 or not isinstance(device.args[0], ast.ListExpr):
        raise ZynMLError('@parallel(data) needs @device(["cuda:0", "cuda:1", ...])', loc)
    names = []
    for item in device.args[0].elts:
        if not isinstance(item, ast.StringLit):
            raise ZynMLError("@device takes device names", item.loc)
        names.append(item.value)
    if len(set(names)) < 2:
        raise ZynMLError("@parallel(data) needs two or more different devices", loc)
    return names


def _scan(node: Any, var: str, arrays: set[str], indexed_first: set[str],
          other_uses: list) -> None:
    """Record arrays indexed by `var` first; any other use of `var` goes to other_uses."""
    if isinstance(node, ast.Index) and isinstance(node.base, ast.Name) and \
            node.base.id in arrays:
        head, *rest = node.indices
        if isinstance(head, ast.Name) and head.id == var:
            indexed_first.add(node.base.id)
        else:
            _scan(head, var, arrays, indexed_first, other_uses)
        for index in rest:
            _scan(index, var, arrays, indexed_first, other_uses)
        return
    if isinstance(node, ast.Name) and node.id == var:
        other_uses.append(node)
        return
    if isinstance(node, ast.Name) and node.id in arrays and node.id != "out":
        other_uses.append(node)  # a whole-array use (reduce(+, x)): not splittable
        return
    if isinstance(node, ast.Range):
        for part in (node.lo, node.hi, node.step):
            if part is not None:
                _scan(part, var, arrays, indexed_first, other_uses)
        return
    if isinstance(node, list):
        for item in node:
            _scan(item, var, arrays, indexed_first, other_uses)
        return
    if isinstance(node, ast.Node):
        for key, value in vars(node).items():
            if key not in ("loc", "ty", "sym") and isinstance(value, (ast.Node, list)):
                _scan(value, var, arrays, indexed_first, other_uses)
