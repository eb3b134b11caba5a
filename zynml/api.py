"""The Python API: `zynml.compile`, `zynml.run` and `Program`.

A Program holds a parsed, checked source. Calling it with inputs specializes it to the
inputs' shapes and dtypes (one compiled executable per signature, kept in memory; the
driver, zynml/compiler.py, builds it or reads it from the on-disk artifact cache) and
returns a dict of outputs as numpy values.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Union

from . import compiler, knobs, specialize
from .checks import CheckedFunction, saved_checks
from .async_program import plan_async
from .cache import ArtifactCache
from .runtime import call_context
from .call_values import (GpuInput, argument, as_array, check_input_names, check_outputs_fit,
                          is_gpu_array, output, scalar_outputs)
from .backend.iree.target import IREE_TARGETS
from .inplace import check_updatable, write_back
from .devices import DeviceError, Placement, host_values, resolve
from .errors import SourceLocation, ZynMLError
from .frontend import ast
from .frontend.checker import check_pipeline
from .frontend.pipeline_values import returned_names
from .frontend.symbols import CheckedProgram, is_tensor
from .frontend.types import TensorType, concrete, from_numpy
from .machine_limits import check_fits

__all__ = ["Program", "compile", "run", "load"]


def _placement(device: str, backend: str | None, loc: SourceLocation | None,
               require_present: bool = True) -> Placement:
    try:
        return resolve(device, backend, require_present)
    except DeviceError as err:
        raise ZynMLError(err.message, loc) from None


@dataclasses.dataclass
class _Executable:
    checked: CheckedProgram
    function: Any  # IreeFunction or CudaFunction: positional arrays in, arrays out


class Program:
    """A compiled ZynML program: call it with the inputs by name, get outputs by name.
    Each `pipeline` of the source is a method: `prog.mlp(x, w1, w2)` returns its value."""

    def __init__(self, source_or_path: Union[str, os.PathLike], device: str = "auto",
                 backend: str | None = None, *, target: str | None = None,
                 params: str | dict = "", require_device: bool = True,
                 checked: bool | None = None, deterministic: bool | None = None,
                 tf32: bool | None = None, _pipeline: Any = None, _parent: "Program | None" = None,
                 _part: bool = False, dynamic: Any = None, static: Any = ()):
        if _parent is not None:  # a pipeline of `_parent`
            self.source, self.ast, self._pipeline = _parent.source, _parent.ast, _pipeline
            self.generic = _parent.generic.pipelines[_pipeline.name]
        else:
            self.source, self.ast = compiler.parse_source(source_or_path)
            self._pipeline = None
            # Check once without shapes so mistakes surface at compile time.
            self.generic = compiler.check_program(self.source, self.ast)
        self._methods = {p.name: p for p in self.ast.pipelines} if _parent is None else {}
        _option("zynml.compile", "checked", checked, (bool, type(None)), "True or False")
        # checked mode (zynml/checks.py); the interpreter checks every run anyway
        self.checks = knobs.CHECK.get() if checked is None else checked
        _option("zynml.compile", "deterministic", deterministic, (bool, type(None)),
                "True or False")
        # scatters with the same bits run to run (docs/language.md, scatters)
        self.deterministic = knobs.DETERMINISTIC.get() if deterministic is None \
            else deterministic
        _option("zynml.compile", "tf32", tf32, (bool, type(None)), "True or False")
        self.tf32 = knobs.TF32.get() if tf32 is None else tf32  # cuda/tf32_operands.py
        configured = self.generic.config.get("compute_device") if _parent is None else None
        if device == "auto" and configured is not None:  # `config { compute_device: .. }`
            device, device_loc = configured
        else:
            device_loc = self._first_loc()
        self.placement = _placement(device, backend, device_loc, require_device)
        self.device, self.backend = self.placement.device, self.placement.backend
        self._require_device = require_device
        self.cuda_target = _cuda_target(target, params, self.deterministic, self.tf32)
        # what the backend compiles for: the chip, IREE's target of the device kind, or
        # nothing (the interpreter runs cir as it is)
        self.target = self.cuda_target if self.backend == "native" else \
            IREE_TARGETS[self.placement.kind] if self.backend == "iree" else None
        self._is_part = _part  # a segment, or one device's share of @parallel(data)
        self._data_parallel = None
        self._parts: list = []
        self._segments: list = []  # Programs, one per run of blocks on one device
        self._check_device_annotations(self.generic)
        compiler.check_target(self.generic, self.placement, self.target)
        if self.placement.backend == "interpreter":  # runs every block itself, as written
            self._data_parallel = None
        self._async = None if _part or _parent is not None or self._data_parallel \
            else plan_async(self)  # `@async` computes as futures: zynml/async_program.py
        if not _part and _parent is None and self._data_parallel is None \
                and self.backend != "interpreter" and self._async is None:
            self._segments = self._plan_segments()
        self._dynamic, self._static, self._cache = dynamic, static, ArtifactCache()
        self._shapes = specialize.for_program(self, dynamic, static,
                                              _parent is None and not _part)
        self._executables = self._shapes.executables  # signature key -> _Executable
        self._fast_calls = None  # calls of signatures seen before: to the executable
        if (self.backend == "native" or self.placement.kind == "cpu") and not (
                self._segments or self._data_parallel or self.generic.host_values or
                self.checks or self._async):
            self._fast_calls = self._new_fast_calls()

    def _new_fast_calls(self):
        if self.backend != "native":  # numpy arrays on the CPU (IREE): host_calls.py
            from .host_calls import HostCalls
            return HostCalls(self.generic, self._shapes)
        from .runtime.cuda.function import FastCalls
        return FastCalls(self.generic.static_scalars, tuple(self.generic.mutated))

    @property
    def inputs(self) -> list[str]:
        return list(self.generic.inputs)

    @property
    def outputs(self) -> list[str]:
        return list(self.generic.outputs)

    def __repr__(self) -> str:
        return (f"<zynml.Program {self.source.name} inputs={self.inputs} "
                f"outputs={self.outputs} device={self.device!r}>")

    def _first_loc(self) -> SourceLocation:
        return SourceLocation(self.source, 1, 1)

    def _check_device_annotations(self, checked: CheckedProgram) -> None:
        """`@device(...)` on a compute, and allocate/to_device/memory_pool, must name
        devices present (or "auto")."""
        for device, loc in checked.devices_named:
            _placement(device, None, loc, self._require_device)
        for step in checked.steps:
            annotation = step.kernel.annotations.get("device") if step.kernel else None
            if annotation is None:
                continue
            for arg in annotation.args:
                names = arg.elts if isinstance(arg, ast.ListExpr) else [arg]
                for name in names:
                    if not isinstance(name, ast.StringLit):
                        raise ZynMLError("@device takes a device name or a list of them",
                                         name.loc)
                    _placement(name.value, None, name.loc, self._require_device)
        for step in checked.steps:
            if step.kernel is not None and "parallel" in step.kernel.annotations \
                    and not self._is_part:
                from .parallel import plan_data_parallel
                self._data_parallel = plan_data_parallel(
                    checked, step, step.kernel.annotations["parallel"])

    def derived_options(self, same_chip: bool = True) -> dict:
        """The options of a Program made from this one: a pipeline, device segment,
        `@async` part, or `@parallel(data)` share (which finds its device's own chip)."""
        options = dict(require_device=self._require_device, checked=self.checks,
                       deterministic=self.deterministic, tf32=self.tf32)
        if same_chip:
            options.update(target=self.cuda_target.chip, params=self.cuda_target.params)
        return options

    def __getattr__(self, name: str):
        methods = self.__dict__.get("_methods", {})
        if name in methods:  # one Program per pipeline: its executables are reused
            pipeline = Program("", self.device, self.backend, **self.derived_options(),
                               _pipeline=methods[name], _parent=self, dynamic=self._dynamic,
                               static=self._static)
            # kept as an attribute: the next `prog.name` finds it without __getattr__
            method = self.__dict__[name] = _PipelineMethod(pipeline, methods[name])
            return method
        raise AttributeError(f"program has no pipeline '{name}'; pipelines: "
                             + (", ".join(methods) or "(none)"))

    def pipeline(self, name: str) -> "Program":
        """The Program of the source's pipeline `name` (what `prog.name(...)` calls)."""
        if name not in self.__dict__.get("_methods", {}):
            raise ZynMLError(f"the program has no pipeline '{name}'; its pipelines: "
                             + (", ".join(self._methods) or "(none)"))
        return getattr(self, name)._program

    def stats(self) -> "specialize.Stats":
        """Calls, cache hits, compiles, specializations and dynamic sizes of this Program."""
        return self._shapes.stats()

    @property
    def cache_folder(self) -> Path:
        """The artifact cache this program compiles into (and its autotuning database)."""
        return self._cache.root

    def tune(self, inputs: dict[str, Any] | None = None, /, *, limit: int | None = None,
             rounds: int = 5, compile_only: bool = False, progress: bool = True, **named):
        """Autotune the strategy parameters of this program's kernels for these inputs'
        shapes and dtypes on its GPU, keep the winners in the autotuning database, and
        return the report (`.table()`): zynml/autotune/tuner.py. `compile_only` compiles
        the candidates into the cache for a GPU machine to time (no GPU needed)."""
        from .autotune.tuner import tune
        for option, value in (("limit", limit), ("rounds", rounds)):
            _option("Program.tune", option, value, (int, type(None)), "a number")
        inputs = _merge_inputs(inputs, named)
        report = tune(self, inputs, limit=limit, rounds=rounds, compile_only=compile_only,
                      progress=progress)
        if not compile_only:  # later calls compile with the winners
            self._executables.clear()
            if self._fast_calls is not None:
                self._fast_calls = self._new_fast_calls()
        return report

    def _check(self, signature, scalars, records=None) -> CheckedProgram:
        if self._pipeline is not None:
            table = {p.name: p for p in self.ast.pipelines}
            checked = check_pipeline(self._pipeline, self.source, signature, scalars,
                                     records or {}, table)
        else:
            checked = compiler.check_program(self.source, self.ast, signature, scalars,
                                             records or {})
        return self._by_value(checked, scalars)

    def _by_value(self, checked: CheckedProgram, scalars: dict) -> CheckedProgram:
        """On the native CUDA backend, scalar inputs given as numbers cross main by value:
        each kernel takes them as parameters, so a call uploads nothing for them. A 0-d
        GPU array given for one (`scalars` marks it, `_signature`) stays a 0-d tensor that
        the kernels read, so the call need not wait for the GPU."""
        if self.backend == "native":
            checked.by_value = frozenset(
                name for name, ty in checked.inputs.items()
                if not is_tensor(ty) and f"{name}{_ON_DEVICE}" not in scalars
                and concrete(ty).name not in ("f16", "bf16"))  # no 16-bit float ABI
        return checked

    # ------------------------------------------------------------------ calling

    def __call__(self, inputs: dict[str, Any] | None = None, /, **named) -> dict[str, Any]:
        """Run on `inputs` by name: `prog(x=a)`, or `prog({"x": a})` for any input name."""
        inputs = _merge_inputs(inputs, named)
        if self._fast_calls is not None:  # GPU arrays of a signature seen before
            outputs = self._fast_calls.call(inputs)  # (`mut` ones checked for aliasing)
            if outputs is not None:
                return outputs
        context = call_context.current()  # a zynml.capture block records the call
        if context is not None and getattr(context, "records_calls", False):
            return context.call(self, inputs)
        if self.generic.mutated:  # `compute(mut x)`: x's new values go to the caller's x
            check_updatable(self.generic.mutated, inputs)
            return write_back(self._run(inputs), inputs, self.generic.mutated)
        if not self.generic.host_values:  # the usual case: nothing added to the hot path
            return self._run(inputs)
        results = self._run(inputs) if self.generic.outputs else {}
        return results | host_values(self.generic.host_values)

    def submit(self, inputs: dict[str, Any] | None = None, /, **named):
        """Start a call and return its `zynml.Future` at once (zynml/futures.py)."""
        from .futures import submit
        return submit(self, _merge_inputs(inputs, named))

    def _run(self, inputs: dict[str, Any]) -> dict[str, Any]:
        if self._data_parallel is not None:
            return self._data_parallel.run(self._device_parts(), inputs)
        if self._async is not None:
            return self._async.run(inputs)
        if self._segments:
            from .segments import run_segments
            return run_segments(self._segments, inputs, self.outputs)
        values, executable, records = self._executable_for(inputs)
        checked = executable.checked
        args = [argument(name, values[name], checked) for name in checked.inputs]
        results = dict(zip(checked.flat_outputs(), executable.function(*args)))
        if self._fast_calls is not None and not checked.list_outputs and not records:
            self._fast_calls.add(inputs, executable.function, list(checked.inputs),
                                 checked.flat_outputs(), scalar_outputs(checked))
        return {name: [output(results[n], checked, n) for n in checked.list_outputs[name]]
                if name in checked.list_outputs else output(results[name], checked, name)
                for name in checked.outputs}

    def _executable_for(self, inputs: dict[str, Any]):
        """(input values, executable, records) of a call: the one its specializations
        choose for these inputs, from memory or built (compile_only.py builds it too)."""
        values, signature, scalars, records = self._signature(inputs)
        checked = None
        if records:  # record members are inputs too: their shapes are part of the key
            checked = self._check(signature, scalars, records)
            signature = dict(checked.inputs)
            values.update(checked.record_values)
        return values, self._shapes.executable(signature, scalars, records, checked), records

    def _plan_segments(self) -> list["Program"]:
        """`@device("...")` blocks off the program's device: one Program per segment."""
        from .segments import plan_segments

        def canonical(name, loc):
            return _placement(name, None, loc, self._require_device).device

        plan = plan_segments(self, canonical)
        if plan is None:
            return []
        kind = self.placement.kind
        return [Program(seg.source, seg.device, self.backend if seg.device.split(":")[0] ==
                        kind else None, **self.derived_options(), _part=True) for seg in plan]

    def _device_parts(self) -> list["Program"]:
        """One Program per device of @parallel(data), compiled per chunk shape."""
        if not self._parts:
            source = self.source.text if self.source.name == "<string>" else \
                Path(self.source.name)
            kind = self.placement.kind  # another kind of device takes its own backend
            self._parts = [Program(source, device, self.backend if device.split(":")[0] ==
                                   kind else None, **self.derived_options(same_chip=False),
                                   _part=True)
                           for device in self._data_parallel.devices]
        return self._parts

    def _signature(self, inputs: dict[str, Any]):
        """(arrays, signature, values of the integer scalars compiled by value, records)
        of the call's inputs. Other integer scalars (a seed, an offset) are arguments of
        the compiled program: a new value compiles nothing."""
        roots = self.generic.record_roots
        records = {n: v for n, v in inputs.items() if n in roots}
        inputs = {n: v for n, v in inputs.items() if n not in roots}
        for root in roots:
            if root not in records:
                raise ZynMLError(f"missing input '{root}' (a record)",
                                 self._record_loc(root))
        known = {n for n in self.generic.inputs if not _is_record_member(n, roots)}
        check_input_names(inputs, known, self.generic.input_locs, self._first_loc(),
                          list(self._methods), _RUN_OPTIONS)
        values, signature, scalars = {}, {}, {}
        for name, value in inputs.items():
            loc = self.generic.input_locs.get(name)
            array = GpuInput(value) if is_gpu_array(value) else as_array(name, value, loc)
            values[name] = array
            dtype = from_numpy(array.dtype)
            generic = self.generic.inputs[name]
            if not isinstance(array, GpuInput):  # a broadcast view may be far larger
                check_fits(f"input '{name}'", array.shape, array.dtype, loc)
            if array.ndim == 0 and (not is_tensor(generic) or generic.rank is None):
                signature[name] = dtype
                if dtype.is_int and name in self.generic.static_scalars:
                    scalars[name] = int(array)  # a size or an index: compiled by value
                if isinstance(array, GpuInput) and self.backend == "native":
                    scalars[f"{name}{_ON_DEVICE}"] = 1  # a 0-d tensor, not by value
            else:
                signature[name] = TensorType(dtype, tuple(int(d) for d in array.shape))
                if is_tensor(generic) and generic.rank not in (None, array.ndim):
                    raise ZynMLError(f"input '{name}' has rank {array.ndim} but the program "
                                     f"indexes it with {generic.rank} indices", loc)
                if not is_tensor(generic):
                    raise ZynMLError(f"input '{name}' is used as a scalar but was given an "
                                     f"array of shape {array.shape}", loc)
        return values, signature, scalars, records

    def _record_loc(self, root: str):
        return next((loc for name, loc in self.generic.input_locs.items()
                     if _is_record_member(name, {root})), None) or self._first_loc()

    def _specialize(self, inputs: dict[str, Any]):
        """(typed AST, signature, integer scalars) of the program for these inputs."""
        _, signature, scalars, records = self._signature(inputs)
        if not records:  # sizes declared dynamic stay `?` (zynml/specialize.py)
            signature = self._shapes.generalize(signature, observe=False)
        checked = self._check(signature, scalars, records)
        return checked, dict(checked.inputs), scalars

    def _compilation(self, checked: CheckedProgram, signature=None,
                     scalars=None) -> "compiler.Compilation":
        """What the stages read; with a signature, the target the artifact's build uses
        (the autotuning database's winners for its kernels)."""
        target = self.target if signature is None else compiler.tuned_target(
            checked, self.source, self.placement, self.target, signature, scalars,
            self._pipeline_name(), self._cache)
        return compiler.Compilation(compiler.BACKENDS[self.backend], target, self.source,
                                    checked, self._cache, checks=self.checks)

    def _pipeline_name(self) -> str:
        return self._pipeline.name if self._pipeline else ""

    def stage_module(self, inputs: dict[str, Any] | None = None, upto: str = "linalg"):
        """The `cir` or linalg module of this program (or a later MLIR stage of its
        backend, e.g. "gpu"), specialized to `inputs` when given (arrays, or anything with
        .shape and .dtype); shape-generic otherwise."""
        if not inputs:
            return compiler.run_stages(self._compilation(self.generic), upto)
        return compiler.run_stages(self._compilation(*self._specialize(inputs)), upto)

    def emit(self, stage: str, inputs: dict[str, Any] | None = None, *,
             save_temps: Union[str, os.PathLike, None] = None):
        """What `zynml compile --emit STAGE` shows for these inputs' shapes and dtypes:
        text, bytes for a binary stage, or None when the stage made nothing. Without
        inputs, the shape-generic program where the stage allows it. The backend's last
        stage, the artifact, comes through the cache like a call's. `save_temps` writes
        every stage's output on the way into that folder."""
        owner = compiler.find_stage(stage)[0]
        if inputs or (owner is not None and not owner.shape_generic):
            checked, signature, scalars = self._specialize(inputs or {})
        else:
            checked, signature, scalars = self.generic, {}, {}
        backend = compiler.BACKENDS[self.backend]
        if backend.stages and stage == backend.stages[-1].name:
            artifact = self._saved_artifact(checked, signature, scalars, save_temps)
            return backend.stages[-1].output.show(artifact)
        return compiler.emit(self._compilation(checked, signature, scalars), stage,
                             save_temps=save_temps)

    def _validate(self, signature, scalars) -> None:
        """Check the program at a call's concrete shapes (a dynamic executable runs it)."""
        check_outputs_fit(self._check(signature, scalars), self.placement.kind)

    def _build(self, signature, scalars, records=None, checked=None) -> _Executable:
        checked = checked or self._check(signature, scalars, records)
        check_outputs_fit(checked, self.placement.kind)
        if self.backend == "interpreter":
            from .interpreter import InterpreterFunction
            return _Executable(checked, InterpreterFunction(compiler.to_cir(checked),
                                                            self.source))
        artifact, table = self._compile(checked, signature, scalars, with_table=True)
        if self.backend == "native":
            from .runtime.cuda.function import CudaFunction
            try:
                function = CudaFunction(artifact, self.placement.ordinal)
            except Exception as err:  # no driver or GPU, or a CUDA failure at load
                raise ZynMLError(f"cannot run on '{self.device}': {err}") from None
        else:
            from .runtime.cpu_routing import cpu_function  # iree.runtime loads on first call
            function = cpu_function(artifact, self.target.device)
        if self.checks:  # with a table, main returns the violation code last
            function = self._checked_function(function, checked, table)
        return _Executable(checked, function)

    def _checked_function(self, function, checked: CheckedProgram, table) -> CheckedFunction:
        locs = {step.target: step.loc for step in checked.steps}
        return CheckedFunction(function, table, self.source, [
            (n, locs.get(n, locs.get(n.split("[")[0]))) for n in checked.flat_outputs()])

    def _saved_artifact(self, checked: CheckedProgram, signature, scalars, save_temps=None):
        """The artifact to save; in checked mode a CUDA artifact's plan also keeps the
        check table and the source (checks.saved_checks), so that `zynml.load` raises the
        located errors a call raises instead of showing `zynml.checks` as an output."""
        artifact, table = self._compile(checked, signature, scalars, save_temps,
                                        with_table=True)
        if not self.checks or self.backend != "native":
            return artifact
        saved = saved_checks(self._checked_function(None, checked, table))
        return dataclasses.replace(artifact, plan={**artifact.plan, "checks": saved})

    def _compile(self, checked: CheckedProgram, signature, scalars, save_temps=None,
                 with_table: bool = False):
        """The artifact of this signature (a vmfb, a CudaArtifact): the driver's build,
        which reads the cache or compiles; `with_table`: (artifact, check table or None)."""
        made = (compiler.build_checked if self.checks else compiler.build)(
            checked, self.source, self.placement, self.target, signature, scalars,
            self._pipeline_name(), cache=self._cache, save_temps=save_temps)
        made = made if self.checks else (made, None)
        return made if with_table else made[0]

    def artifact(self, inputs: dict[str, Any] | None = None, /, **named):
        """The native CUDA artifact of this program for these inputs' shapes and dtypes
        (compiled, or from the cache); `.save(path)` writes it for `zynml.load`."""
        if self.backend != "native":
            raise ZynMLError(f"artifacts are made by the native CUDA backend; this program "
                             f"is for '{self.device}' with backend '{self.backend}'")
        return self._saved_artifact(*self._specialize(_merge_inputs(inputs, named)))


# In a call's `scalars` (the signature key's values), "NAME@device" marks a scalar input
# given as a 0-d GPU array (native CUDA): no input name has an '@'.
_ON_DEVICE = "@device"


def _cuda_target(chip: str | None, params: str | dict, deterministic: bool = False,
                 tf32: bool = False):
    from .backend.cuda.target import CudaTarget
    try:
        chip = CudaTarget.parse(chip).chip if chip else CudaTarget().chip
        return CudaTarget(chip, params=params, deterministic=deterministic,
                          wait_on_predecessor=knobs.PROGRAMMATIC_LAUNCH.get(), tf32=tf32)
    except ValueError as err:
        raise ZynMLError(str(err)) from None


def _is_record_member(name: str, roots) -> bool:
    """Is `name` a flattened record member such as `model.layers[0].w` of a root?"""
    return any(name.startswith(root + ".") or name.startswith(root + "[") for root in roots)


class _PipelineMethod:
    """`prog.name(*args, **kwargs)`: arguments bind to the pipeline's parameters in order;
    returns the pipeline's value, or a tuple of its values (`return (a, b)`). Compiled
    executables are cached per signature."""

    def __init__(self, program: Program, pipeline):
        self._program = program
        self._params = [p.name for p in pipeline.params]
        self._pipeline = pipeline
        self._returned = returned_names(pipeline)

    def __call__(self, /, *args, **kwargs):
        if kwargs or len(args) != len(self._params):
            inputs = self._bind(args, kwargs) if args else kwargs
        else:  # every parameter by position: nothing to check
            inputs = dict(zip(self._params, args))
        fast = self._program._fast_calls  # as Program.__call__, without a second **inputs
        outputs = fast.call(inputs) if fast is not None else None
        if outputs is None:
            outputs = self._program(**inputs)
        if len(self._returned) > 1:
            return tuple(outputs[name] for name in self._returned)
        return next(iter(outputs.values()))

    def _bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self._params):
            raise ZynMLError(f"pipeline '{self._pipeline.name}' takes {len(self._params)} "
                             f"arguments, got {len(args)}", self._pipeline.loc)
        inputs = dict(zip(self._params, args))
        for name, value in kwargs.items():
            if name in inputs:
                raise ZynMLError(f"argument '{name}' given twice", self._pipeline.loc)
            inputs[name] = value
        return inputs


def compile(source_or_path: Union[str, os.PathLike], *, device: str = "auto",
            backend: str | None = None, target: str | None = None,
            params: str | dict = "", require_device: bool = True,
            checked: bool | None = None, deterministic: bool | None = None,
            tf32: bool | None = None, dynamic: Any = None, static: Any = ()) -> Program:
    """Parse and check a ZynML program for `device` ("cpu", "cuda:N", "vulkan:N", "rocm:N",
    "metal:N", "interpreter" (the `cir` reference interpreter) or "auto") and `backend`
    ("native" or "iree"; default: the best for the device); calling it runs it. `target`:
    the native backend's CUDA chip (default sm_90a); `params`: its strategies' parameters,
    as text ("matmul_wgmma.stages=3") or {"matmul_wgmma": {"stages": 3}} (strategies/
    tuning.py). `require_device=False` compiles for a device that is not here (calling
    then needs it; `Program.artifact` and the CLI's --emit work anywhere). `checked=True`:
    checked mode (docs/language.md §11; default ZYNML_CHECK): bad indices and divisions at
    run time are located errors. `deterministic=True` (default ZYNML_DETERMINISTIC):
    scatters give the same bits run to run (native CUDA: sorted segments, not atomics).
    `tf32=True` (default ZYNML_TF32): f32 matrix products on TF32 tensor cores (10-bit
    mantissas), as PyTorch's `allow_tf32`; native CUDA on sm_90a, elsewhere f32.
    `dynamic`: sizes compiled once for any value (names, True, False; default: once a size
    took two values); `static`: sizes always specialized (zynml/specialize.py)."""
    return Program(source_or_path, device=device, backend=backend, target=target,
                   params=params, require_device=require_device, checked=checked,
                   deterministic=deterministic, tf32=tf32, dynamic=dynamic, static=static)


def run(source: Union[str, os.PathLike], inputs: dict[str, Any] | None = None, /, *,
        device: str = "auto", backend: str | None = None, checked: bool | None = None,
        deterministic: bool | None = None, **named) -> dict[str, Any]:
    """Compile `source` and run it once on its inputs; returns {output name: value}.

    Inputs are keywords, `zynml.run(src, x=a)`, or a dict, `zynml.run(src, {"x": a})`.
    `source` and the dict are positional, so inputs may be called `source` or `inputs`;
    `device`, `backend`, `checked` and `deterministic` (as in `compile`) are always the
    options: inputs of those names go in the dict, `zynml.run(src, {"device": a})`."""
    for option, value in (("device", device), ("backend", backend)):
        _option("zynml.run", option, value, (str, type(None)), "a name such as 'cpu'")
    _option("zynml.run", "checked", checked, (bool, type(None)), "True or False")
    _option("zynml.run", "deterministic", deterministic, (bool, type(None)), "True or False")
    return Program(source, device=device, backend=backend, checked=checked,
                   deterministic=deterministic)(_merge_inputs(inputs, named))


# zynml.run's keyword options: an input of one of these names must come in the dict
_RUN_OPTIONS = ("device", "backend", "checked", "deterministic")


def _option(function: str, option: str, value: Any, types: tuple, expected: str) -> None:
    """A keyword option given something of the wrong kind: most likely an input of that
    name meant for the program. Say how to pass it."""
    if isinstance(value, types) and (bool in types or not isinstance(value, bool)):
        return
    raise ZynMLError(f"{function}'s {option}= takes {expected}, not {type(value).__name__}; "
                     f"an input called '{option}' goes in the inputs dict: "
                     f"{function}(..., {{'{option}': value}})")


def _merge_inputs(inputs: Any, named: dict[str, Any]) -> dict[str, Any]:
    """The inputs given as a dict and as keywords, in one dict; a name given both ways is
    an error."""
    if inputs is None:
        return named
    if not isinstance(inputs, dict) or not all(isinstance(k, str) for k in inputs):
        raise ZynMLError(f"the inputs are a dict of input name -> value, not "
                         f"{type(inputs).__name__}")
    twice = sorted(set(inputs) & set(named))
    if twice:
        raise ZynMLError(f"input '{twice[0]}' is given twice, in the dict and as a keyword")
    return {**inputs, **named}


def load(path: Union[str, os.PathLike], device: str = "cuda:0"):
    """Load a CUDA artifact (`zynml compile --device cuda --emit artifact`); calling the
    result with inputs by name returns outputs by name. Needs only numpy and cuda-python."""
    from .runtime.cuda.loaded import LoadedProgram
    return LoadedProgram(path, device)
