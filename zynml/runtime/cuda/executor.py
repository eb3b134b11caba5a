"""Runs a launch plan (zynml/backend/cuda/launch_plan.py) on one GPU.

Values while a plan runs: a tensor is a `View` of a root buffer (an input, an allocation
of this call, or a constant uploaded once), in elements; a scalar is a Python number.
A kernel takes each memref as MLIR's descriptor (allocated pointer, aligned pointer,
offset, sizes, strides; 64-bit each) and each scalar by value. Parameter blocks are built
once per launch and only their values change from call to call, so one executor serves
one thread at a time (compile a Program per thread to call from several).
"""
from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ... import knobs
from .device_array import DeviceArray, _numpy_dtype
from . import run_time_views, tensor_maps
from .driver import Device, ctype_of
from .watchdog import watched

__all__ = ["PlanExecutor", "View"]


@dataclass(frozen=True)
class View:
    root: "Buffer"
    offset: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    def is_whole(self) -> bool:
        return self.offset == 0 and self.strides == _row_major(self.sizes) and \
            self.root.elements == _count(self.sizes)


class Buffer:
    """A root allocation; owned ones are freed (stream-ordered) when unreferenced, by
    `device`: the Device, or the Stream it was allocated on."""

    def __init__(self, device: Any, ptr: int, elements: int, owner: Any = None,
                 owned: bool = False):
        self.ptr, self.elements, self._owner = ptr, elements, owner
        if owned:
            weakref.finalize(self, _free, device, ptr)


def _free(device: Any, ptr: int) -> None:
    try:
        device.free(ptr)
    except Exception:
        pass


def _row_major(sizes: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for extent in reversed(sizes):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _count(sizes: Sequence[int]) -> int:
    return int(np.prod(sizes, dtype=np.int64))


class _Params:
    """One launch's parameter block: ctypes slots and the void** array CUDA reads."""

    def __init__(self, kinds: Sequence[str]):
        self.slots: list = []
        for kind in kinds:
            if kind.startswith("memref:"):
                rank = int(kind.split(":")[1])
                self.slots.extend(ctypes.c_uint64() for _ in range(3 + 2 * rank))
            else:
                self.slots.append(ctype_of(kind)())
        self.array = (ctypes.c_void_p * max(len(self.slots), 1))(
            *[ctypes.addressof(s) for s in self.slots])
        self.address = ctypes.addressof(self.array)

    def fill(self, values: Sequence[Any]) -> None:
        i = 0
        for value in values:
            if isinstance(value, View):
                ptr = value.root.ptr
                fields = (ptr, ptr, value.offset) + value.sizes + value.strides
                for field in fields:
                    self.slots[i].value = field
                    i += 1
            else:
                self.slots[i].value = value
                i += 1


class PlanExecutor:
    def __init__(self, plan: dict, image: bytes, globals_: dict[str, np.ndarray],
                 device: Device, ptx: str = ""):
        self.plan, self.device = plan, device
        self._queue: Any = device  # where run_plan's work goes (a Stream while on one)
        self.module = device.load_module(
            image, ptx, knobs.PROGRAMMATIC_LAUNCH.get()) if image else None
        self._globals = {}
        for spec in plan["globals"]:
            array = DeviceArray.from_numpy(globals_[spec["name"]], device)
            self._globals[spec["name"]] = Buffer(device, array.ptr, array.size, owner=array)
        self._params: dict[int, _Params] = {}
        self._functions: dict[str, Any] = {}
        self._shared_limit: dict[str, int] = {}  # kernel -> dynamic shared bytes opted into
        self.tensor_maps = tensor_maps.for_device(device)
        # Tests set ZYNML_CUDA_POISON=1: every allocation starts as 0xFF bytes (NaN, -1),
        # so an element no kernel wrote cannot pass for a result.
        self.poison = knobs.CUDA_POISON.get()
        self.watchdog = knobs.CUDA_WATCHDOG.get()  # > 0: each call waits, at most this

    # ------------------------------------------------------------------ calls

        self.flat = _FlatPlan.build(self) if not self.poison else None
        # run-time sizes or branches: fast paths per sizes and held ints (plan_at_sizes.py)
        self._flat_at: dict[tuple, "_FlatPlan | None"] = {}
        self._size_inputs: list[int] | None = None

    def __call__(self, inputs: Sequence[Any], flat: "_FlatPlan | None" = None) -> list[Any]:
        """`inputs`: DeviceArrays (C-contiguous, the plan's shapes) and numbers; `flat`: the
        plan fixed at their sizes (flat_at) where they are run-time. Gives the outputs."""
        flat = self.flat if self.flat is not None else flat
        if flat is not None:
            results = flat.run([getattr(v, "ptr", v) for v in inputs])
            for k, i in flat.updates:  # written in place: the input is the output
                results[k] = inputs[i]
            return results
        if self.watchdog > 0:
            return watched(self.run_plan, self.device, self.plan, self.watchdog)(inputs)
        return self.run_plan(inputs)

    def run_plan(self, inputs: Sequence[Any], queue: Any = None) -> list[Any]:
        """Interpret the plan step by step (loops, dynamic views, poisoned allocations).
        `queue`: a Stream (streams.py) to allocate, copy and launch on, or a
        CaptureStream recording a graph; default: the device's legacy default stream."""
        self.device.make_current()
        self._queue = self.device if queue is None else queue
        try:
            return self._run_plan(inputs)
        finally:
            self._queue = self.device

    def _run_plan(self, inputs: Sequence[Any]) -> list[Any]:
        run_time_views.check_equal_dims(self.plan.get("equal_dims", ()),
                                        [getattr(v, "shape", None) for v in inputs])
        env: dict[str, Any] = {}
        for i, (spec, value) in enumerate(zip(self.plan["inputs"], inputs)):
            if spec["kind"] == "tensor":
                root = Buffer(self.device, value.ptr, value.size, owner=value)
                env[f"%in{i}"] = View(root, 0, tuple(value.shape), _row_major(value.shape),
                                      spec["dtype"])
            else:
                env[f"%in{i}"] = value
        self._run(self.plan["body"], env)
        return [inputs[spec["updates"]] if "updates" in spec else self._output(env, spec)
                for spec in self.plan["outputs"]]  # updates: the input, written in place

    def _output(self, env: dict, spec: dict) -> Any:
        value = self._value(env, spec["value"])
        if not isinstance(value, View):
            return value
        inputs_and_globals = {id(v.root) for k, v in env.items()
                              if k.startswith("%in") and isinstance(v, View)}
        inputs_and_globals |= {id(b) for b in self._globals.values()}
        if value.is_whole() and id(value.root) not in inputs_and_globals:
            return DeviceArray(self.device, value.root.ptr, value.sizes, value.dtype,
                               owner=value.root)
        # A view of an input, a constant, or part of a buffer: the caller gets a copy.
        elements = _count(value.sizes)
        root = Buffer(self._queue, self._queue.alloc(
            elements * _numpy_dtype(value.dtype).itemsize), elements, owned=True)
        self._copy(value, View(root, 0, value.sizes, _row_major(value.sizes), value.dtype))
        return DeviceArray(self.device, root.ptr, value.sizes, value.dtype, owner=root)

    # ------------------------------------------------------------------ interpretation

    def _value(self, env: dict, ref: Any) -> Any:
        return env[ref] if isinstance(ref, str) else ref

    def _run(self, body: list[dict], env: dict) -> None:
        for step in body:
            run_step = getattr(self, "_op_" + step["op"], None)
            if run_step is None:  # an artifact from a newer ZynML
                raise RuntimeError(f"this ZynML cannot run launch-plan steps "
                                   f"'{step['op']}'; the artifact needs a newer one")
            run_step(step, env)

    def _op_alloc(self, step: dict, env: dict) -> None:
        sizes = tuple(int(self._value(env, s)) for s in step["shape"])
        elements = _count(sizes)
        nbytes = elements * _numpy_dtype(step["dtype"]).itemsize
        root = Buffer(self._queue, self._queue.alloc(nbytes), elements, owned=True)
        if self.poison:
            self._queue.fill_bytes(root.ptr, 0xFF, nbytes)
        env[step["result"]] = View(root, 0, sizes, _row_major(sizes), step["dtype"])

    def _op_global(self, step: dict, env: dict) -> None:
        spec = next(g for g in self.plan["globals"] if g["name"] == step["name"])
        sizes = tuple(spec["shape"])
        env[step["result"]] = View(self._globals[step["name"]], 0, sizes, _row_major(sizes),
                                   spec["dtype"])

    def _op_view(self, step: dict, env: dict) -> None:
        source = env[step["source"]]
        if "offsets" in step:  # a subview at loop-dependent offsets
            offset = source.offset + sum(int(self._value(env, o)) * s for o, s in
                                         zip(step["offsets"], step["source_strides"]))
        elif step.get("absolute"):
            offset = int(step["offset"])
        else:
            offset = source.offset + int(step["offset"])
        env[step["result"]] = View(source.root, offset, tuple(step["sizes"]),
                                   tuple(step["strides"]), source.dtype)

    # run-time sizes (zynml/runtime/cuda/run_time_views.py)
    def _op_dim(self, step: dict, env: dict) -> None:
        env[step["result"]] = env[step["source"]].sizes[int(self._value(env, step["index"]))]

    def _op_subview(self, step: dict, env: dict) -> None:
        values = [[self._value(env, v) for v in step[k]] for k in ("offsets", "sizes")]
        self._reshaped(step, env, run_time_views.subview, *values, step["steps"],
                       step["kept"])

    def _op_collapse(self, step: dict, env: dict) -> None:
        self._reshaped(step, env, run_time_views.collapse, step["groups"])

    def _op_expand(self, step: dict, env: dict) -> None:
        self._reshaped(step, env, run_time_views.expand, step["groups"],
                       [self._value(env, v) for v in step["sizes"]])

    def _reshaped(self, step: dict, env: dict, how, *args) -> None:
        source = env[step["source"]]
        offset, sizes, strides = how(source.offset, source.sizes, source.strides, *args)
        env[step["result"]] = View(source.root, offset, sizes, strides, source.dtype)

    def _op_tensor_map(self, step: dict, env: dict) -> None:
        view = env[step["source"]]
        itemsize = _numpy_dtype(view.dtype).itemsize
        maps = self.tensor_maps if self._queue is self.device else self._queue.tensor_maps
        env[step["result"]] = maps.address(
            view.dtype, view.root.ptr + view.offset * itemsize, view.sizes, view.strides,
            step["box"], step["swizzle"])

    def _op_scalar(self, step: dict, env: dict) -> None:
        args = [self._value(env, a) for a in step["args"]]
        env[step["result"]] = run_time_views.SCALAR_FNS[step["fn"]](*args)

    def _op_launch(self, step: dict, env: dict) -> None:
        key = id(step)
        if key not in self._params:
            self._params[key] = _Params(step["arg_kinds"])
        params = self._params[key]
        params.fill([self._value(env, a) for a in step["args"]])
        name = step["kernel"]
        shared = int(self._value(env, step["shared_bytes"]))
        if name not in self._functions:
            self._functions[name] = self.module.function(name)
        if shared > 48 * 1024 and self._shared_limit.get(name, 0) < shared:
            self.module.set_max_shared(self._functions[name], shared)
            self._shared_limit[name] = shared
        grid = _capped_grid([int(self._value(env, g)) for g in step["grid"]], step,
                            self.device)
        block = [int(self._value(env, b)) for b in step["block"]]
        if min(grid) <= 0:
            return  # an empty iteration space
        stream = None if self._queue is self.device else self._queue.handle
        self.module.launch(self._functions[name], grid, block, shared, params.address, stream)

    def _op_copy(self, step: dict, env: dict) -> None:
        self._copy(env[step["source"]], env[step["target"]])

    def _copy(self, source: View, target: View) -> None:
        itemsize = _numpy_dtype(source.dtype).itemsize
        contiguous = source.strides == _row_major(source.sizes) and \
            target.strides == _row_major(target.sizes)
        if not contiguous:
            raise RuntimeError("strided copy on the host: the compiler should have made "
                               "it a kernel (linalg.copy)")
        self._queue.copy_on_device(target.root.ptr + target.offset * itemsize,
                                   source.root.ptr + source.offset * itemsize,
                                   _count(source.sizes) * itemsize)

    def _op_if(self, step: dict, env: dict) -> None:
        self._run(step["then"] if int(self._value(env, step["cond"])) else step["else"], env)

    def _op_for(self, step: dict, env: dict) -> None:
        lower, upper, stride = (int(self._value(env, step[k]))
                                for k in ("lower", "upper", "step"))
        carried = [self._value(env, v) for v in step["inits"]]
        for iv in range(lower, upper, stride):
            env[step["iv"]] = iv
            for name, value in zip(step["iter_args"], carried):
                env[name] = value
            self._run(step["body"], env)
            carried = [self._value(env, v) for v in step["yields"]]
        for name, value in zip(step["results"], carried):
            env[name] = value


class _FlatPlan:
    """A plan without loops, compiled once into straight-line Python (`run`, see
    `_source`): per call it allocates (one arena for temporaries; a buffer per output
    from the device's bin of its size, given back when the output's DeviceArray goes),
    writes the buffers' addresses into the prepared parameter blocks, launches through
    ctypes with arguments converted once, and frees the arena (stream-ordered). This is
    the per-call fast path; the interpreter above handles everything else."""

    ALIGN = 256

    @staticmethod
    def build(executor: "PlanExecutor") -> "_FlatPlan | None":
        plan = executor.plan
        if any(step["op"] not in ("alloc", "global", "view", "tensor_map", "launch", "copy")
               for step in plan["body"]) or any(
                None in spec.get("shape", ()) for spec in plan["inputs"]):
            return None  # loops, run-time sizes: the interpreter
        try:
            return _FlatPlan(executor)
        except _NotFlat:
            return None

    def __init__(self, executor: "PlanExecutor"):
        plan, self.device = executor.plan, executor.device
        self.plan = plan  # with fixed sizes where the executor's has run-time ones
        self.module, self._executor = executor.module, executor
        self.tensor_maps = executor.tensor_maps
        n_inputs = len(plan["inputs"])
        # roots: inputs, then globals, then allocations; a view is (root, offset, sizes,
        # strides, dtype) with everything static
        env: dict[str, tuple] = {}
        for i, spec in enumerate(plan["inputs"]):
            if spec["kind"] == "tensor":
                sizes = tuple(spec["shape"])
                env[f"%in{i}"] = (i, 0, sizes, _row_major(sizes), spec["dtype"])
            else:
                env[f"%in{i}"] = ("scalar", i)
        self.global_ptrs = [executor._globals[g["name"]].ptr for g in plan["globals"]]
        global_index = {g["name"]: n_inputs + k for k, g in enumerate(plan["globals"])}
        first_alloc = n_inputs + len(self.global_ptrs)
        allocs: list[tuple[int, str]] = []  # (nbytes, result)
        self.launches: list[tuple] = []
        self.copies: list[tuple] = []
        self._order: list[tuple] = []  # ("launch", i) / ("copy", i) in plan order
        for step in plan["body"]:
            op = step["op"]
            if op == "alloc":
                sizes = tuple(step["shape"])
                root = first_alloc + len(allocs)
                allocs.append((_count(sizes) * _numpy_dtype(step["dtype"]).itemsize,
                               step["result"]))
                env[step["result"]] = (root, 0, sizes, _row_major(sizes), step["dtype"])
            elif op == "global":
                spec = next(g for g in plan["globals"] if g["name"] == step["name"])
                sizes = tuple(spec["shape"])
                env[step["result"]] = (global_index[step["name"]], 0, sizes,
                                       _row_major(sizes), spec["dtype"])
            elif op == "view":
                if "offsets" in step:
                    raise _NotFlat()
                source = env[step["source"]]
                offset = step["offset"] if step.get("absolute") else source[1] + step["offset"]
                env[step["result"]] = (source[0], offset, tuple(step["sizes"]),
                                       tuple(step["strides"]), source[4])
            elif op == "tensor_map":
                root, offset, sizes, strides, dtype = env[step["source"]]
                env[step["result"]] = _MapArg(root, offset * _numpy_dtype(dtype).itemsize,
                                              (dtype, sizes, strides, tuple(step["box"]),
                                               step["swizzle"]))
            elif op == "launch":
                self._order.append(("launch", len(self.launches)))
                self.launches.append(self._launch(step, env))
            else:
                source, target = env[step["source"]], env[step["target"]]
                if source[3] != _row_major(source[2]) or target[3] != _row_major(target[2]):
                    raise _NotFlat()  # strided: the interpreter reports it
                itemsize = _numpy_dtype(source[4]).itemsize
                self._order.append(("copy", len(self.copies)))
                self.copies.append((source[0], source[1] * itemsize, target[0],
                                    target[1] * itemsize, _count(source[2]) * itemsize))
        # outputs that are whole allocations get their own buffer; the rest share an arena
        self.outputs: list[tuple | None] = []  # (root, shape, numpy dtype, dtype name)
        self.updates: list[tuple[int, int]] = []  # (output, input it is): `mut` in place
        owned = set()
        for spec in plan["outputs"]:
            if "updates" in spec:  # the kernels wrote the input: `run` returns None
                self.updates.append((len(self.outputs), spec["updates"]))
                self.outputs.append(None)
                continue
            value = env.get(spec["value"]) if isinstance(spec["value"], str) else None
            if value is None or value[0] == "scalar":
                raise _NotFlat()  # scalar outputs: the interpreter returns them
            root, offset, sizes, strides, dtype = value
            nbytes = allocs[root - first_alloc][0] if root >= first_alloc else -1
            itemsize = _numpy_dtype(dtype).itemsize
            size = _count(sizes) * itemsize
            whole = (offset == 0 and strides == _row_major(sizes) and root not in owned
                     and nbytes == size)
            if not whole:
                if strides != _row_major(sizes):
                    raise _NotFlat()  # a strided view: the interpreter copies it
                # an input (written in place by the kernels, or returned as it is), a
                # constant, part of a buffer or another output's: the caller gets a
                # copy of it, as from the interpreter (_output)
                copy_root = first_alloc + len(allocs)
                allocs.append((size, f"copy of output {len(self.outputs)}"))
                self._order.append(("copy", len(self.copies)))
                self.copies.append((root, offset * itemsize, copy_root, 0, size))
                root = copy_root
            owned.add(root)
            self.outputs.append((root, tuple(int(s) for s in sizes), _numpy_dtype(dtype),
                                 dtype))
        self.arena_offsets: list[tuple[int, int]] = []  # (root, byte offset in arena)
        self.output_allocs: list[tuple[int, Any]] = []  # (root, BufferBin of its size)
        arena = 0
        for k, (nbytes, _) in enumerate(allocs):
            root = first_alloc + k
            if root in owned:
                self.output_allocs.append((root, self.device.buffers(nbytes)))
            else:
                self.arena_offsets.append((root, arena))
                arena += -(-max(nbytes, 1) // self.ALIGN) * self.ALIGN
        self.arena_bytes = arena
        # What a call does, in plan order: (call, args) launches with their parameter
        # blocks (the blocks' pointer slots are patched first), or (None, copy).
        self.steps: list[tuple] = []
        self.patches: list[tuple[Any, int]] = []  # (ctypes slot, root or scalar input)
        self.map_patches: list[tuple[Any, "_MapArg"]] = []  # (ctypes slot, its descriptor)
        for kind, index in self._order:
            if kind == "copy":
                self.steps.append((None, self.copies[index]))
                continue
            function, grid, block, shared, params, patches, map_patches = self.launches[index]
            self.patches += patches
            self.map_patches += map_patches
            if grid[0] and grid[1] and grid[2]:  # else an empty iteration space
                self.steps.append(self.module.launcher(function, grid, block, shared,
                                                       params.address))
        self.n_inputs = n_inputs
        self.source, namespace = self._source()
        exec(compile(self.source, "<zynml flat plan>", "exec"), namespace)
        self.run = namespace["run"]  # run(inputs) -> outputs, see _source
        if executor.watchdog > 0:
            self.run = watched(self.run, self.device, executor.plan, executor.watchdog)

    def _launch(self, step: dict, env: dict) -> tuple:
        params = _Params(step["arg_kinds"])
        patches: list[tuple[Any, int]] = []  # (ctypes slot, root index)
        map_patches: list[tuple[Any, _MapArg]] = []
        i = 0
        for arg, kind in zip(step["args"], step["arg_kinds"]):
            value = env[arg] if isinstance(arg, str) else arg
            if isinstance(value, _MapArg):
                map_patches.append((params.slots[i], value))
                i += 1
            elif kind.startswith("memref:"):
                root, offset, sizes, strides, _ = value
                patches += [(params.slots[i], root), (params.slots[i + 1], root)]
                for k, field in enumerate((offset,) + sizes + strides):
                    params.slots[i + 2 + k].value = field
                i += 3 + 2 * len(sizes)
            elif isinstance(value, tuple):  # a scalar input
                patches.append((params.slots[i], value[1]))
                i += 1
            else:
                params.slots[i].value = value
                i += 1
        grid, block = tuple(step["grid"]), tuple(step["block"])
        if not all(isinstance(v, int) for v in grid + block) or \
                not isinstance(step["shared_bytes"], int):
            raise _NotFlat()
        grid = tuple(_capped_grid(list(grid), step, self.device))
        function = self.module.function(step["kernel"])
        if step["shared_bytes"] > 48 * 1024:
            self.module.set_max_shared(function, step["shared_bytes"])
        return (function, grid, block, step["shared_bytes"], params, patches, map_patches)

    def _source(self) -> tuple[str, dict[str, Any]]:
        """`run(inputs) -> outputs` as straight-line Python, and the values it names
        (parameter slots, launch calls, buffer bins): `inputs` a device pointer per
        tensor input and a number per scalar, in plan order; the outputs DeviceArrays
        (None for an input updated in place, `updates`: the caller has that array).
        No loop and no lookup is left for a call to do. For a one-kernel add:

            def run(inputs):
                make_current()
                r0, r1 = inputs
                r2 = 0
                arena = 0
                try:
                    try:
                        r2 = kept2.pop()
                    except IndexError:
                        r2 = take2()
                    slot0.value = r0
                    ...
                    status = call0(*args0)
                    if status:
                        raise_launch_error(status)
                except BaseException:
                    if r2:
                        give2(r2)
                    raise
                finally:
                    if arena:
                        free(arena)
                return [owning(device, r2, shape0, dtype0, 'float32', give2)]
        """
        bound = {"owning": DeviceArray.owning, "device": self.device,
                 "make_current": self.device.make_current,
                 # `run` makes the device current first, once: these need not check
                 "free": self.device.free_in_current, "alloc": self.device.alloc_in_current,
                 "copy": self.device.copy_on_device,
                 # a plan without kernels (a copy, an input returned) loads no module
                 "raise_launch_error": self.module.raise_launch_error
                 if self.module is not None else None}
        n_inputs = self.n_inputs
        # the launches, allocations and frees are the current context's: this device's
        code = ["def run(inputs):", "    make_current()"]
        if n_inputs:
            code.append("    " + ", ".join(f"r{i}" for i in range(n_inputs)) +
                        (", = inputs" if n_inputs == 1 else " = inputs"))
        for k, ptr in enumerate(self.global_ptrs):
            code.append(f"    r{n_inputs + k} = {int(ptr)}")
        for root, _ in self.output_allocs:
            code.append(f"    r{root} = 0")
        code += ["    arena = 0", "    try:"]
        if self.arena_bytes:
            code.append(f"        arena = alloc({self.arena_bytes})")
            code += [f"        r{root} = arena + {offset}" for root, offset in self.arena_offsets]
        for root, buffers in self.output_allocs:
            bound[f"kept{root}"], bound[f"take{root}"] = buffers.kept, buffers.take
            bound[f"give{root}"] = buffers.give
            code += ["        try:", f"            r{root} = kept{root}.pop()",
                     "        except IndexError:  # none kept (or another thread took it)",
                     f"            r{root} = take{root}()"]
        for k, (slot, root) in enumerate(self.patches):
            bound[f"slot{k}"] = slot
            code.append(f"        slot{k}.value = r{root}")
        if self.map_patches:
            bound["map_address"] = self.tensor_maps.address
        for k, (slot, arg) in enumerate(self.map_patches):
            bound[f"map_slot{k}"], bound[f"layout{k}"] = slot, arg.layout
            code.append(f"        map_slot{k}.value = map_address(layout{k}[0], "
                        f"r{arg.root} + {arg.offset}, *layout{k}[1:])")
        for k, (call, args) in enumerate(self.steps):
            if call is None:
                src, src_off, dst, dst_off, nbytes = args
                code.append(f"        copy(r{dst} + {dst_off}, r{src} + {src_off}, {nbytes})")
                continue
            bound[f"call{k}"], bound[f"args{k}"] = call, args
            code += [f"        status = call{k}(*args{k})", "        if status:",
                     "            raise_launch_error(status)"]
        if code[-1] == "    try:":  # nothing to do: every output is an input, in place
            code.append("        pass")
        code += ["    except BaseException:"]
        for root, _ in self.output_allocs:
            code += [f"        if r{root}:", f"            give{root}(r{root})"]
        code += ["        raise", "    finally:", "        if arena:",
                 "            free(arena)"]
        results = []
        for k, output in enumerate(self.outputs):
            if output is None:  # an input updated in place: the caller fills it in
                results.append("None")
                continue
            root, shape, dtype, name = output
            bound[f"shape{k}"], bound[f"dtype{k}"] = shape, dtype
            results.append(f"owning(device, r{root}, shape{k}, dtype{k}, {name!r}, "
                           f"give{root})")  # back to its bin when the DeviceArray goes
        code.append("    return [" + ", ".join(results) + "]")
        return "\n".join(code) + "\n", bound


def _capped_grid(grid: list[int], step: dict, device) -> list[int]:
    """A grid-stride kernel's grid: x at most its "blocks_per_multiprocessor" (a launch
    step's optional key) times the device's multiprocessors, so every block stays
    resident and works until the end."""
    per_multiprocessor = step.get("blocks_per_multiprocessor", 0)
    if per_multiprocessor > 0:
        grid[0] = min(grid[0], per_multiprocessor * device.info.multiprocessors)
    return grid


class _NotFlat(Exception):
    """The plan needs the interpreter."""


@dataclass(frozen=True)
class _MapArg:
    """A "tensor_map" in a flat plan: its descriptor depends on the call's root address."""
    root: int
    offset: int  # bytes
    layout: tuple  # (dtype, sizes, strides, box, swizzle)

