"""The driver: one function per arrow of source -> AST -> typed AST -> cir -> linalg ->
artifact, and the stages tables that chain them. `zynml compile --emit STAGE` shows what
each stage makes; `build` makes a program's artifact, through the on-disk cache.

    parse_source   source text or path -> (SourceFile, ast.Program)         stage "ast"
    check_program  ast.Program (+ input signature) -> CheckedProgram (typed AST)
    to_cir         CheckedProgram -> `cir` module          (zynml/cirgen)    stage "cir"
    lower          `cir` module -> linalg on tensors        (zynml/passes)    stage "linalg"
    then the stages of the program's backend (zynml/backend/*/stages.py)

    run_stages     a backend's table (after FRONT_STAGES) up to one stage; save_temps
                   writes every stage's output as DIR/STAGE.EXT on the way
    build          checked program + target -> artifact: the cache, else run_stages
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from . import checks, knobs
from .autotune.database import TuningDatabase, params_text
from .backend.cuda import stages as cuda_stages
from .backend.iree import stages as iree_stages
from .cache import ArtifactCache, atomic_write_bytes
from .runtime.cuda.artifact import launches
from .errors import SourceFile, SourceLocation, ZynMLError, ZynMLNote, note
from .frontend import ast
from .limits import MAX_EXPRESSION_DEPTH, recursion_room
from .frontend.checker import check
from .frontend.library import resolve_uses
from .frontend.parser import parse
from .frontend.symbols import CheckedProgram
from .stage import TEXT_MLIR, Backend, Compilation, Output, Stage

if TYPE_CHECKING:  # MLIR loads on the first compilation: running an artifact needs none
    from mlir import ir

__all__ = ["FRONT_STAGES", "BACKENDS", "CIR_TO_LINALG_PIPELINE", "CHECKED_PIPELINE",
           "Compilation", "build_checked", "parse_source", "parse_file", "check_program",
           "to_cir", "lower", "dump_ast", "stage_names",
           "find_stage", "run_stages", "emit", "check_target", "build", "artifact_key",
           "fingerprint", "compiler_files", "mlir_error_to_zynml", "ZynMLNote"]

# cir -> linalg on tensors. No canonicalize before cir-to-linalg: it would fold loops of
# one trip away and hide the loop structure the lowering reads.
CIR_TO_LINALG_PIPELINE = ("builtin.module(cir-verify,cir-shape-propagation,cir-raise-attention,"
                          "cir-join-stores,cir-to-linalg,"
                          "canonicalize,cse)")
# Checked mode (zynml/checks.py): the same, with the run-time checks added once shapes
# are static and before a body is raised to cir.attention or lowered.
CHECKED_PIPELINE = CIR_TO_LINALG_PIPELINE.replace(
    "cir-shape-propagation,", "cir-shape-propagation,cir-insert-checks,")


def parse_source(source_or_path: Union[str, os.PathLike]) -> tuple[SourceFile, ast.Program]:
    """Parse program text, or the file at a path (a str ending in `.zyn` or a PathLike)."""
    if isinstance(source_or_path, os.PathLike) or (
            isinstance(source_or_path, str) and source_or_path.endswith(".zyn")
            and "\n" not in source_or_path):
        path = Path(source_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else err
            raise ZynMLError(f"cannot read '{path}': {why}",
                             SourceLocation(SourceFile(str(path), ""), 1, 1)) from None
        src = SourceFile(str(path), text)
    else:
        src = SourceFile("<string>", source_or_path)
    return parse_file(src)


def parse_file(src: SourceFile) -> tuple[SourceFile, ast.Program]:
    """Parse `src` with the library sources it uses (`use kernels.NAME`), which the
    returned SourceFile lists (they are part of what it compiles to)."""
    program = parse(src)
    used = resolve_uses(program, parse)
    if used:
        src = dataclasses.replace(src, uses=tuple(used))
    return src, program


def check_program(src: SourceFile, program: ast.Program, signature=None,
                  scalar_values=None, records=None) -> CheckedProgram:
    return check(program, src, signature, scalar_values, records)


def to_cir(checked: CheckedProgram, context: "ir.Context | None" = None) -> "ir.Module":
    from .cirgen.program import emit_cir
    from .dialects import new_context
    return emit_cir(checked, context or new_context())


def lower(module: ir.Module, src: SourceFile | None = None,
          pipeline: str = CIR_TO_LINALG_PIPELINE) -> ir.Module:
    """Run `pipeline` on `module` in place; MLIR diagnostics become ZynMLErrors."""
    from mlir import ir
    from .passes.pipeline import PipelineError, build_pass_manager
    try:
        pm = build_pass_manager(pipeline, module.context)
        pm.run(module.operation)
    except PipelineError as err:
        raise ZynMLError(str(err)) from None
    except ir.MLIRError as err:
        raise mlir_error_to_zynml(err, src) from None
    _emit_notes(module)
    return module


def _to_linalg(cir: "ir.Module", job: Compilation) -> "ir.Module":
    """The linalg stage; in checked mode, the check table goes to `job.check_table`."""
    if not job.checks:
        return lower(cir, job.source)
    from mlir import ir
    lower(cir, job.source, CHECKED_PIPELINE)
    attrs = cir.operation.attributes
    job.check_table = []
    if "zynml.checks" in attrs:
        job.check_table = checks.table_from_json(ir.StringAttr(attrs["zynml.checks"]).value)
        del attrs["zynml.checks"]
    return cir


def _emit_notes(module: "ir.Module") -> None:
    from mlir import ir
    attrs = module.operation.attributes
    if "zynml.notes" in attrs:
        for text in ir.ArrayAttr(attrs["zynml.notes"]):
            note(ir.StringAttr(text).value)
        del attrs["zynml.notes"]


def _show_ast(program: ast.Program) -> str:
    with recursion_room(MAX_EXPRESSION_DEPTH):  # the dump recurses into expressions
        return dump_ast(program)


def dump_ast(node, indent: int = 0) -> str:
    """The AST as `--emit ast` prints it: one node a line with its location and plain
    fields, children indented (types and symbols the checker adds are left out)."""
    pad = "  " * indent
    if isinstance(node, list):
        return "".join(dump_ast(n, indent) for n in node)
    if not isinstance(node, ast.Node):
        return f"{pad}{node!r}\n"
    fields = {k: v for k, v in vars(node).items() if k not in ("loc", "ty", "sym")}
    simple = {k: v for k, v in fields.items() if not isinstance(v, (ast.Node, list))}
    head = f"{pad}{type(node).__name__} @{node.loc.line}:{node.loc.col}"
    head += "".join(f" {k}={v!r}" for k, v in simple.items() if v is not None)
    out = head + "\n"
    for k, v in fields.items():
        if isinstance(v, (ast.Node, list)) and v:
            out += f"{pad}  {k}:\n" + dump_ast(v, indent + 2)
    return out


# ------------------------------------------------------------------------ stages tables

# The stages every backend starts with. The ast stage shows the parsed program; cir starts
# again from the typed AST the compilation was given (checked for the input signature).
FRONT_STAGES = (
    Stage("ast", lambda job: parse(job.source), Output("txt", show=_show_ast), inputs=()),
    Stage("cir", lambda job: to_cir(job.checked), TEXT_MLIR, inputs=()),
    Stage("linalg", _to_linalg, TEXT_MLIR),
)

# Placement.backend -> the backend's stages and facts.
# The cir reference interpreter (zynml/interpreter) runs what the cir stage makes: a
# backend with no stages of its own, so `--emit` shows the front stages for it.
INTERPRETER = Backend(
    name="interpreter", stages=(), load=bytes, check=lambda *args: None,
    shape_generic=True, emit_device=None,
    wrong_backend="--emit {stage} is a compiled backend's stage; the interpreter runs cir "
                  "(this program is for '{device}')")

BACKENDS: dict[str, Backend] = {b.name: b for b in (iree_stages.BACKEND, cuda_stages.BACKEND,
                                                    INTERPRETER)}


def stage_names() -> list[str]:
    """Every `--emit` choice, in the order the stages run: the front, then each backend."""
    return [s.name for s in FRONT_STAGES] + [s.name for b in BACKENDS.values()
                                             for s in b.stages]


def find_stage(name: str) -> tuple[Backend | None, Stage]:
    """The stage called `name` and the backend whose table holds it (None: a front stage)."""
    for backend, table in [(None, FRONT_STAGES)] + [(b, b.stages) for b in BACKENDS.values()]:
        for stage in table:
            if stage.name == name:
                return backend, stage
    raise ValueError(f"unknown stage '{name}'; stages: {', '.join(stage_names())}")


def run_stages(job: Compilation, upto: str, given: dict[str, Any] | None = None,
               save_temps: Union[str, os.PathLike, None] = None) -> Any:
    """Run the front stages and `job.backend`'s up to `upto`; return what `upto` made.

    Only the stages `upto` reads from run, in table order. `given` holds outputs already
    made ({"linalg": module}): their stages and those above them do not run. With
    `save_temps` (a folder), every stage up to `upto` runs and its output is written there
    as STAGE.EXT as soon as it is made, so when a stage fails, its input is on disk.
    """
    table = FRONT_STAGES + job.backend.stages
    names = [s.name for s in table]
    if upto not in names:
        raise ValueError(f"the {job.backend.name} backend has no stage '{upto}'; its stages: "
                         + ", ".join(names))
    inputs = {s.name: s.inputs if s.inputs is not None else tuple(names[i - 1:i])
              for i, s in enumerate(table)}
    outputs = dict(given or {})
    first = max((names.index(n) + 1 for n in outputs), default=0)
    table = table[first:names.index(upto) + 1]
    wanted = {s.name for s in table} if save_temps is not None else \
        _needed(upto, inputs, outputs)
    if save_temps is not None:
        Path(save_temps).mkdir(parents=True, exist_ok=True)
    for stage in table:
        if stage.name not in wanted:
            continue
        with _stage_errors(job.source):
            outputs[stage.name] = stage.run(*(outputs[n] for n in inputs[stage.name]), job)
        if save_temps is not None:
            _save_temp(Path(save_temps), stage, outputs[stage.name])
    return outputs[upto]


def _needed(upto: str, inputs: dict[str, tuple[str, ...]], made: dict[str, Any]) -> set[str]:
    needed, todo = set(), [upto]
    while todo:
        name = todo.pop()
        if name not in needed and name not in made:
            needed.add(name)
            todo.extend(inputs[name])
    return needed


def _save_temp(folder: Path, stage: Stage, output: Any) -> None:
    shown = stage.output.show(output)
    if shown is not None:
        data = shown.encode() if isinstance(shown, str) else shown
        atomic_write_bytes(folder / f"{stage.name}.{stage.output.ext}", data)


def emit(job: Compilation, stage: str, save_temps: Union[str, os.PathLike, None] = None):
    """What `zynml compile --emit STAGE` shows: text, bytes for a binary stage, or None
    (the stage made nothing: its Output's `none_means` says why)."""
    output = run_stages(job, stage, save_temps=save_temps)
    return find_stage(stage)[1].output.show(output)


# ------------------------------------------------------------------------ build, cache

def installed() -> bool:
    """Whether ZynML's compiler can run here (the MLIR bindings are installed), not only
    the runtime that loads artifacts."""
    return importlib.util.find_spec("mlir") is not None


def tuned_target(checked: CheckedProgram, source: SourceFile, placement, target,
                 signature: dict, scalars: dict, pipeline_name: str = "",
                 cache: ArtifactCache | None = None):
    """The target a build uses: for the native CUDA backend, with the winners that the
    autotuning database (in `cache`'s folder) holds for this chip and compiler and for the
    kernels of this program, unless the program chose strategy parameters itself or
    ZYNML_AUTOTUNE is off. Which kernels: the strategies and problems that the untuned
    artifact launches (built, or read from the cache), so that the key of the tuned one
    holds this program's winners and no others'."""
    if placement.backend != "native" or target.params or not knobs.AUTOTUNE.get():
        return target
    cache = cache or ArtifactCache()
    entries = TuningDatabase.beside(cache).entries_for(target.chip, fingerprint())
    if not entries:
        return target
    untuned = build(checked, source, placement, target, signature, scalars, pipeline_name,
                    cache=cache, use_database=False)
    kernels = {(s.get("strategy"), s.get("problem")) for s in launches(untuned.plan["body"])}
    tuned = params_text([e for e in entries if (e.strategy, e.problem) in kernels])
    return dataclasses.replace(target, params=tuned) if tuned else target


def check_target(checked: CheckedProgram, placement, target) -> None:
    """Refuse, at `zynml.compile` (before any input is seen), a program that the target
    of `placement`'s backend cannot run: e.g. a CUDA block larger than the chip allows."""
    BACKENDS[placement.backend].check(checked, target, placement, None)


def build(checked: CheckedProgram, source: SourceFile, placement, target, signature: dict,
          scalars: dict, pipeline_name: str = "", *, cache: ArtifactCache | None = None,
          save_temps: Union[str, os.PathLike, None] = None,
          use_database: bool = True) -> Any:
    """The artifact of `checked` (the program, or its pipeline `pipeline_name`, typed for
    `signature` and the integer `scalars`) for `placement`'s backend and `target`: what
    the backend's last stage makes (a vmfb's bytes, a CudaArtifact).

    Read from `cache` (default: the user's artifact cache) when there, else compiled and
    stored. `save_temps` compiles even then, writing every stage's output in the folder.
    `use_database=False` builds with the strategies' own choices (the tuner's baseline).
    """
    return _build(checked, source, placement, target, signature, scalars, pipeline_name,
                  cache, save_temps, use_database, False)[0]


def build_checked(checked: CheckedProgram, source: SourceFile, placement, target,
                  signature: dict, scalars: dict, pipeline_name: str = "", *,
                  cache: ArtifactCache | None = None,
                  save_temps: Union[str, os.PathLike, None] = None) -> tuple[Any, list]:
    """`build` in checked mode: (the artifact, its check table). The artifact's main has
    one more result, the violation code (zynml/checks.py); the table is cached beside it,
    under a key of its own, so that a machine without the compiler reads both."""
    return _build(checked, source, placement, target, signature, scalars, pipeline_name,
                  cache, save_temps, True, True)


def _build(checked, source, placement, target, signature, scalars, pipeline_name, cache,
           save_temps, use_database, with_checks) -> tuple[Any, list | None]:
    backend = BACKENDS[placement.backend]
    backend.check(checked, target, placement, signature)
    cache = cache if cache is not None else ArtifactCache()
    if use_database:
        target = tuned_target(checked, source, placement, target, signature, scalars,
                              pipeline_name, cache)
    key = artifact_key(backend, source, pipeline_name, signature, scalars, target,
                       with_checks)
    table_key = ArtifactCache.key(key, "check table") if with_checks else None
    if save_temps is None:
        cached = cache.get(key)
        table = cache.get(table_key) if with_checks else b"[]"
        if cached is not None and table is not None:
            try:
                return backend.load(cached), \
                    checks.table_from_json(table.decode()) if with_checks else None
            except ValueError as err:  # whole (its hash holds) but not an artifact
                cache.discard(key, f"it is not an artifact: {err}")
    if not installed():
        raise ZynMLError(_cannot_compile_here(backend, cache, key))
    last = backend.stages[-1]
    job = Compilation(backend, target, source, checked, cache, checks=with_checks)
    artifact = run_stages(job, last.name, save_temps=save_temps)
    if with_checks:  # the table first: an artifact found without it is compiled again
        cache.put(table_key, checks.table_to_json(job.check_table).encode())
    cache.put(key, last.output.show(artifact))
    return artifact, job.check_table


def _cannot_compile_here(backend: Backend, cache: ArtifactCache, key: str) -> str:
    """Why a machine without the compiler (a GPU machine running cached artifacts) cannot
    go on, and what to do."""
    todo = ("ZynML's compiler (the MLIR bindings) is not installed here: compile it where "
            "it is, into a cache folder carried here (ZYNML_CACHE_DIR; e.g. run the program "
            "once there, or `zynml compile FILE --emit artifact ...`)")
    if key in cache.removed:
        return (f"the cached {backend.name} artifact {cache.path(key)} was damaged "
                f"({cache.removed[key]}) and has been removed, and it cannot be compiled "
                f"again: {todo}")
    return (f"the {backend.name} artifact of this program for these shapes is not in the "
            f"artifact cache ({cache.root}), and {todo}")


def artifact_key(backend: Backend, source: SourceFile, pipeline_name: str, signature: dict,
                 scalars: dict, target, checks: bool = False) -> str:
    """The cache key of an artifact: the source and signature, not the IR, so that a
    machine without MLIR finds what another compiled into a shared cache; the compiler's
    fingerprint, so that a changed compiler never reuses an old artifact; checked mode's
    artifacts apart from the others."""
    mode = ("checked",) if checks else ()
    return ArtifactCache.key(backend.name, fingerprint(), source.text,
                             *(used.text for used in source.uses), pipeline_name,
                             repr(sorted((n, str(t)) for n, t in signature.items())),
                             repr(sorted(scalars.items())), target.cache_key(), *mode)


# What decides an artifact besides the program, its signature and the target: the
# compiler's own source. The runtime, the API and the CLI are left out, so editing them
# keeps the cache.
COMPILER_SOURCES = ("zynml.frontend", "zynml.cirgen", "zynml.lowering", "zynml.backend",
                    "zynml.passes", "zynml.dialects", "zynml.compiler", "zynml.stage",
                    "zynml.checks")


def compiler_files() -> list[Path]:
    """The files `fingerprint` hashes: every module of COMPILER_SOURCES."""
    files = []
    for name in COMPILER_SOURCES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, f"no compiler source {name}"
        roots = [Path(p) for p in spec.submodule_search_locations or []]
        files += sorted(f for root in roots for f in root.rglob("*.py")) if roots else \
            [Path(spec.origin)]
    return files


@functools.cache
def fingerprint() -> str:
    """A hash of the compiler's source and version: a changed compiler never reuses an
    artifact of the old one; runtime edits keep them."""
    from . import __version__  # the artifact records it
    digest = hashlib.sha256(__version__.encode())
    for path in compiler_files():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class _stage_errors:
    """MLIR diagnostics and launch-plan limits raised in a stage -> located ZynMLErrors."""

    def __init__(self, src: SourceFile | None):
        self.src = src

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if err is None or isinstance(err, ZynMLError):
            return False
        try:
            from mlir import ir
        except ImportError:  # no MLIR here, so no MLIR error either
            return False
        from .backend.cuda.launch_plan import PlanError
        from .passes.pipeline import PipelineError
        if isinstance(err, PipelineError):
            raise ZynMLError(str(err)) from None
        if isinstance(err, ir.MLIRError):
            raise mlir_error_to_zynml(err, self.src) from None
        if isinstance(err, PlanError):
            loc = _source_location(err.location, self.src) if err.location else None
            raise ZynMLError(f"the native CUDA backend cannot run this yet: {err}",
                             loc) from None
        return False


def mlir_error_to_zynml(err: "ir.MLIRError", src: SourceFile | None) -> ZynMLError:
    """Turn MLIR's diagnostics into a ZynMLError located in the ZynML source."""
    diagnostics = list(getattr(err, "error_diagnostics", []) or [])
    if not diagnostics:
        return ZynMLError(str(err))
    first = diagnostics[0]
    return ZynMLError(first.message, _source_location(first.location, src),
                      notes=[(n.message, _source_location(n.location, src))
                             for d in diagnostics[1:] for n in [d]])


def _source_location(loc: ir.Location, src: SourceFile | None) -> SourceLocation | None:
    text = str(loc)  # loc("file":line:col)
    if src is None or '":' not in text:
        return None
    try:
        name, rest = text.split('"', 2)[1], text.split('":', 1)[1]
        line, col = rest.rstrip(")").split(":")[:2]
        return SourceLocation(src if name == src.name else SourceFile(name, ""), int(line),
                              int(col))
    except (ValueError, IndexError):
        return None
