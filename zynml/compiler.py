"""The driver: one function per arrow of source -> AST -> typed AST -> cir -> linalg ->
artifact. `zynml compile --emit STAGE` prints what each arrow produces.

    parse_source   source text or path -> (SourceFile, ast.Program)
    check_program  ast.Program (+ input signature) -> CheckedProgram (typed AST)
    emit_cir       CheckedProgram -> `cir` module          (zynml/cirgen)
    lower          `cir` module -> linalg on tensors        (zynml/passes, CPU_PIPELINE)
    to_vmfb        linalg text -> IREE vmfb                 (zynml/backend)
"""
from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Union

from typing import TYPE_CHECKING

from .cache import ArtifactCache
from .backend.iree.compile import compile_to_vmfb
from .errors import BackendError
from .backend.iree.target import IreeTarget, for_module
from .errors import SourceFile, SourceLocation, ZynMLError
from .frontend import ast
from .frontend.checker import check
from .frontend.parser import parse
from .frontend.symbols import CheckedProgram

if TYPE_CHECKING:  # MLIR loads on the first compilation: running an artifact needs none
    from mlir import ir

__all__ = ["STAGES", "CIR_TO_LINALG_PIPELINE", "parse_source", "check_program", "to_cir",
           "lower", "to_vmfb", "to_cuda_artifact", "to_cuda_stage", "mlir_error_to_zynml", "ZynMLNote"]

STAGES = ("ast", "cir", "linalg", "vmfb")

# cir -> linalg on tensors. No canonicalize before cir-to-linalg: it would fold loops of
# one trip away and hide the loop structure the lowering reads.
CIR_TO_LINALG_PIPELINE = ("builtin.module(cir-verify,cir-shape-propagation,cir-raise-attention,"
                          "cir-to-linalg,"
                          "canonicalize,cse)")


def parse_source(source_or_path: Union[str, os.PathLike]) -> tuple[SourceFile, ast.Program]:
    """Parse program text, or the file at a path (a str ending in `.zyn` or a PathLike)."""
    if isinstance(source_or_path, os.PathLike) or (
            isinstance(source_or_path, str) and source_or_path.endswith(".zyn")
            and "\n" not in source_or_path):
        path = Path(source_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ZynMLError(f"cannot read '{path}': {err}",
                             SourceLocation(SourceFile(str(path), ""), 1, 1)) from None
        src = SourceFile(str(path), text)
    else:
        src = SourceFile("<string>", source_or_path)
    return src, parse(src)


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


class ZynMLNote(UserWarning):
    """A remark about how a program was compiled (e.g. a kind lowered generically)."""


def _emit_notes(module: "ir.Module") -> None:
    from mlir import ir
    attrs = module.operation.attributes
    if "zynml.notes" in attrs:
        for note in ir.ArrayAttr(attrs["zynml.notes"]):
            warnings.warn(ir.StringAttr(note).value, ZynMLNote, stacklevel=3)
        del attrs["zynml.notes"]


# IREE 3.13's data tiling crashes the compiler on some contractions (seen: a generic
# whose output has a parallel loop no input uses, as `dot` in a per-element attention
# gives); the same module compiles without it, only slower on matmul-like ops.
_DATA_TILING = "--iree-opt-data-tiling"


def to_vmfb(linalg_module: ir.Module, target: IreeTarget,
            cache: ArtifactCache | None = None) -> bytes:
    text = str(linalg_module)
    target = for_module(target, text)
    try:
        return compile_to_vmfb(text, target, cache=cache)
    except BackendError as err:
        crashed = "Please report issues" in err.stderr
        if not crashed or _DATA_TILING not in target.flags:
            raise
        warnings.warn(f"note: iree-compile crashed with {_DATA_TILING}; compiled without it",
                      ZynMLNote, stacklevel=2)
        fallback = dataclasses.replace(
            target, flags=tuple(f for f in target.flags if f != _DATA_TILING))
        return compile_to_vmfb(text, fallback, cache=cache)


def to_cuda_artifact(linalg_module: "ir.Module", target, src: SourceFile | None = None):
    """linalg on tensors -> CudaArtifact (PTX, cubin, launch plan) for a CudaTarget."""
    from .backend.cuda import build_artifact
    with _native_errors(src):
        return build_artifact(linalg_module, target)


def to_cuda_stage(linalg_module: "ir.Module", stage: str, target,
                  src: SourceFile | None = None) -> str:
    """What `--device cuda --emit STAGE` prints: "gpu" (host + gpu.module of kernels),
    "nvvm" (kernels in the LLVM/NVVM dialects), "llvm" (LLVM IR) or "ptx"."""
    from .backend.cuda import compile as cuda
    with _native_errors(src):
        cuda.lower_to_gpu(linalg_module, target)
        if stage == "gpu":
            return str(linalg_module)
        cuda.lower_to_nvvm(linalg_module, target)
        if stage == "nvvm":
            return str(linalg_module)
        return cuda.llvm_ir(linalg_module) if stage == "llvm" else cuda.to_ptx(linalg_module)


class _native_errors:
    """MLIR diagnostics and launch-plan limits of the native path -> located ZynMLErrors."""

    def __init__(self, src: SourceFile | None):
        self.src = src

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        from mlir import ir
        from .backend.cuda.launch_plan import PlanError
        from .passes.pipeline import PipelineError
        if err is None:
            return False
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
