"""IREE's stages: linalg on tensors -> vmfb by one `iree-compile` run (compile.py), after
the driver's shared stages (ast, cir, linalg; zynml/compiler.py)."""
from __future__ import annotations

import dataclasses

from ...errors import BackendError, SourceLocation, ZynMLError, note
from ...stage import Backend, Output, Stage
from .compile import compile_to_vmfb
from .read_only import annotate
from .scatter import expand_scatters
from .target import IreeTarget, for_module

__all__ = ["BACKEND", "STAGES", "to_vmfb", "refuse_f64"]

# IREE 3.13's data tiling crashes the compiler on some contractions (seen: a generic
# whose output has a parallel loop no input uses, as `dot` in a per-element attention
# gives), refuses some of dynamic sizes ("large vector sizes": it vectorizes a `?` as
# 2^53 elements; seen: a matmul of slices whose sizes come from other inputs' dims), and
# packs a 0-d value with 2-d tiles (seen: batch_matmuls of extent-1 sizes, as the
# attention backward of one token and one head gives); the same module compiles without
# it, only slower on matmul-like ops.
_DATA_TILING = "--iree-opt-data-tiling"
_DATA_TILING_REFUSED = ("large vector sizes",
                        "tiling factors must be less than or equal to the input rank")


# fold-scalar-tensors: scalar islands (`|> sqrt()` of a reduction) as 0-d generics, as on
# CUDA: IREE runs scalar math on its host side, which cannot load an f16 or bf16
# (iree-compile 3.13 fails to legalize the tensor.extract); a generic runs in a dispatch.
# safe-integer-division: x86 traps (SIGFPE, the process dies) on a division by 0 or
# i64_min / -1 at run time; CUDA does not.
# pack-loop-carried-tensors: iree-compile 3.13 packs the tensors an scf.for carries into
# one allocation, wrongly when two start from one value (run-time sizes: the online
# softmax's o / l gave 1); carried as one tensor, they are not packed by it.
IREE_INPUT_PIPELINE = "builtin.module(fold-scalar-tensors,safe-integer-division," \
    "pack-loop-carried-tensors)"


def iree_input(linalg_module, alignment: int = 64) -> str:
    """The text iree-compile gets: the module after IREE_INPUT_PIPELINE, its entry
    functions' reflection telling the runtime which inputs are only read and the buffer
    `alignment` the kernels assume (read_only.py). The stage's module, what `--emit
    linalg` shows, is unchanged."""
    from mlir import ir  # here: a machine that only runs cached artifacts has no MLIR
    from ...passes.pipeline import build_pass_manager
    text = str(linalg_module)
    with linalg_module.context:
        module = ir.Module.parse(text)
    build_pass_manager(IREE_INPUT_PIPELINE, module.context).run(module.operation)
    annotate(module, alignment)
    return str(module)


def to_vmfb(linalg_module, target: IreeTarget, cache=None) -> bytes:
    """linalg on tensors -> vmfb; `cache` keeps iree-compile's results by MLIR text."""
    # iree_linalg_ext.scatter: IREE's own
    text = expand_scatters(iree_input(linalg_module, target.binding_alignment()))
    target = for_module(target, text)
    try:
        return compile_to_vmfb(text, target, cache=cache)
    except BackendError as err:
        crashed = "Please report issues" in err.stderr
        refused = any(reason in err.stderr for reason in _DATA_TILING_REFUSED)
        if not (crashed or refused) or \
                _DATA_TILING not in target.flags:
            raise
        if crashed:
            note(f"note: iree-compile crashed with {_DATA_TILING}; compiled without it")
        fallback = dataclasses.replace(
            target, flags=tuple(f for f in target.flags if f != _DATA_TILING))
        return compile_to_vmfb(text, fallback, cache=cache)


def refuse_f64(checked, target: IreeTarget, placement, signature) -> None:
    """IREE's SPIR-V targets demote f64 to f32: refuse an f64 signature there rather than
    compute it in another precision."""
    if signature is None or target.f64:
        return
    types = list(signature.values()) + [step.ty for step in checked.steps]
    if any("f64" in str(t) for t in types):
        raise ZynMLError(f"IREE's {placement.kind} target has no f64 (it would compute in "
                         f"f32); give '{placement.device}' f32 inputs",
                         SourceLocation(checked.source, 1, 1))


STAGES = (
    # linalg text -> IREE VM bytecode for one of target.py's IREE_TARGETS
    Stage("vmfb", lambda linalg, job: to_vmfb(linalg, job.target, job.cache),
          Output("vmfb", binary=True, show=bytes)),
)

BACKEND = Backend(
    name="iree", stages=STAGES, load=bytes, check=refuse_f64, shape_generic=True,
    emit_device=None,
    wrong_backend="--emit {stage} is IREE's artifact: add --backend iree "
                  "(or use --emit artifact for the native CUDA backend)")
