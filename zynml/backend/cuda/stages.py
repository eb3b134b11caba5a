"""ZynML's CUDA stages: linalg on tensors -> kernels -> PTX -> cubin -> artifact, after
the driver's shared stages (ast, cir, linalg; zynml/compiler.py). The passes are
compile.py's pipelines; the host side becomes data (launch_plan.py).

The MLIR half (compile.py, launch_plan.py) loads when a stage first runs: a machine that
only runs cached artifacts has no MLIR.
"""
from __future__ import annotations

import json

from ...runtime.cuda.artifact import CudaArtifact
from ...stage import TEXT_MLIR, Backend, Output, Stage
from . import assemble_cubin
from .launch_limits import check_launch_limits

__all__ = ["BACKEND", "STAGES"]


def _compile():
    from . import compile
    return compile


def to_gpu(linalg, job):
    return _compile().lower_to_gpu(linalg, job.target)


def to_plan(gpu_module, job):
    """(launch plan, constant arrays by name) of the host function."""
    from .launch_plan import extract_plan
    return extract_plan(gpu_module.operation)


def to_nvvm(gpu_module, job):
    return _compile().lower_to_nvvm(gpu_module, job.target)


def to_llvm_ir(nvvm_module, job):
    return _compile().llvm_ir(nvvm_module)


def to_ptx(nvvm_module, job):
    return _compile().to_ptx(nvvm_module)


def to_cubin(ptx, job):
    return assemble_cubin(ptx, job.target) if ptx else None


def to_artifact(plan, ptx, cubin, job):
    from ... import __version__
    plan, constants = plan
    return CudaArtifact(plan, ptx, job.target.chip, cubin, constants, __version__)


def _plan_json(plan) -> str:
    return json.dumps(plan[0], indent=1, sort_keys=True)


def _check(checked, target, placement, signature) -> None:
    check_launch_limits(checked, target)


STAGES = (
    # host function on memrefs + gpu.module, one gpu.func per kernel (kernel_pipeline)
    Stage("gpu", to_gpu, TEXT_MLIR),
    # the host function as a launch plan; before nvvm, which changes the module in place
    Stage("plan", to_plan, Output("json", show=_plan_json)),
    # the kernels in the LLVM and NVVM dialects (nvvm_pipeline)
    Stage("nvvm", to_nvvm, TEXT_MLIR, inputs=("gpu",)),
    # the kernels as LLVM IR: a look for people (from a copy); PTX is made from nvvm
    Stage("llvm", to_llvm_ir, Output("ll")),
    # the kernels as PTX (gpu-module-to-binary)
    Stage("ptx", to_ptx, Output("ptx"), inputs=("nvvm",)),
    # the PTX assembled by ptxas for the chip; without it the driver JIT-compiles the PTX
    Stage("cubin", to_cubin, Output("cubin", binary=True, show=lambda cubin: cubin,
                                    none_means="ptxas is not installed, or there are no "
                                               "kernels")),
    # plan + PTX + cubin + constants: the .zynart that zynml.load runs
    Stage("artifact", to_artifact, Output("zynart", binary=True, show=CudaArtifact.to_bytes),
          inputs=("plan", "ptx", "cubin")),
)

BACKEND = Backend(
    name="native", stages=STAGES,
    load=lambda data: CudaArtifact.from_bytes(data, "cached artifact"),
    check=_check, shape_generic=True, emit_device="cuda",
    wrong_backend="--emit {stage} is a stage of the native CUDA backend; use --device cuda "
                  "(this program is for '{device}' with backend '{backend}')")
