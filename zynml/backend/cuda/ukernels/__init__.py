"""ukernels: kernels the CUDA backend builds by hand for a library operation whose ZynML
definition the compiler does not yet turn into one fast kernel (IREE's word for the same
thing). The library's .zyn source stays the definition and runs everywhere else; a
ukernel is its fast form on NVIDIA GPUs, tested against it.

A ukernel NAME is two modules: NAME.py, its problem (a frozen dataclass) and what it
supports, which the library reads without MLIR; and NAME_kernels.py, whose
`build_module(problem, kernel_module)` makes what linalg-to-gpu-kernels makes of a
program (a host function `main` launching kernels of a gpu.module), so the CUDA stages
go on from "gpu" as for any program: launch plan, NVVM, PTX, cubin, artifact.
`artifact` compiles one per problem and target and keeps it in the artifact cache
(atomic writes, checked reads), keyed by the compiler's fingerprint, as programs are.

    attention_backward   FlashAttention-2's backward pass (zynml.kernels'
                         flash_attention_backward)
    attention_forward    its forward pass, which also writes the rows' log-sum-exp
                         for the backward (zynml.kernels' flash_attention_with_lse)

Both build on tile_kernel.py (the kernels' frame) and tile_stage.py (their tiles in
shared memory and products: wgmma through strategies/hopper.py, or mma.sync through
strategies/warp_mma.py, one warp's products, which the strategies' mma_block_gemm.py
uses too).
"""
from __future__ import annotations

import importlib
from typing import Any

from ....cache import ArtifactCache
from ....errors import ZynMLError

__all__ = ["artifact", "UKERNELS"]

UKERNELS = ("attention_backward", "attention_forward")


def artifact(name: str, problem: Any, target=None, cache: ArtifactCache | None = None):
    """The CudaArtifact of ukernel `name` for `problem` (a frozen dataclass of its
    module) and `target` (a CudaTarget; default sm_90a): from the cache, else built."""
    from .... import compiler
    from ..stages import BACKEND
    from ..target import CudaTarget
    if name not in UKERNELS:
        raise ZynMLError(f"no ukernel '{name}'; there are: {', '.join(UKERNELS)}")
    target = target or CudaTarget()
    cache = cache if cache is not None else ArtifactCache()
    key = ArtifactCache.key(BACKEND.name, compiler.fingerprint(), "ukernel", name,
                            repr(problem), target.cache_key())
    cached = cache.get(key)
    if cached is not None:
        try:
            return BACKEND.load(cached)
        except ValueError as err:
            cache.discard(key, f"it is not an artifact: {err}")
    if not compiler.installed():
        raise ZynMLError(f"the ukernel {name} for {problem} is not in the artifact cache "
                         f"({cache.root}), and ZynML's compiler (the MLIR bindings) is not "
                         f"installed here: compile it where it is, into a cache folder "
                         f"carried here (ZYNML_CACHE_DIR)")
    made = compiler.run_stages(_job(target), BACKEND.stages[-1].name,
                               given={"gpu": module(name, problem, target)})
    cache.put(key, BACKEND.stages[-1].output.show(made))
    return made


def module(name: str, problem: Any, target=None):
    """The ukernel's host function and kernels for `target` (default sm_90a; a new MLIR
    module, its "gpu" stage)."""
    from mlir import ir
    from ....dialects.cir import new_context
    from ....passes.linalg_to_gpu_kernels import KERNEL_MODULE
    from ..target import CudaTarget
    kernels = importlib.import_module(f"{__name__}.{name}_kernels")
    with new_context(), ir.Location.unknown():
        return kernels.build_module(problem, target or CudaTarget(), KERNEL_MODULE)


def _job(target):
    from ....stage import Compilation
    from ..stages import BACKEND
    return Compilation(BACKEND, target)
