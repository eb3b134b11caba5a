"""convert-nvgpu-kernels-to-nvvm: lower the nvgpu ops (TMA, mbarriers, wgmma, mma.sync) of
the kernels that use them, before scf is lowered, without touching the other kernels.

Upstream's convert-nvgpu-to-nvvm must run while loops are still `scf.for`: it converts
the nvgpu types a loop carries (wgmma accumulators) only through scf's structural type
conversion, and once loops are `cf` branches their block arguments stay unconverted. But
that same conversion rejects a loop carrying a type it cannot convert, such as the
`!gpu.mma_matrix` fragments of the wmma kernels (convert-gpu-to-nvvm lowers those later).
So this pass runs convert-nvgpu-to-nvvm on each gpu.module with the kernels that use no
nvgpu op set aside for the duration, then puts them back where they were:

    gpu.module @zynml_kernels {
      gpu.func @k0_matmul_tensor_core(...) { scf.for ... iter_args(!gpu.mma_matrix) }  (kept)
      gpu.func @k1_matmul_wgmma(...) { nvgpu.tma.async.load ...; nvgpu.warpgroup.mma ... }
    }
  k1's nvgpu ops become nvvm ops (and the memref.globals its mbarriers live in).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.passmanager import PassManager

NAME = "convert-nvgpu-kernels-to-nvvm"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "gpu.module":
            _convert(op.operation)


def _convert(kernels: ir.Operation) -> None:
    block = kernels.regions[0].blocks[0]
    funcs = [op.operation for op in block.operations if op.operation.name == "gpu.func"]
    if not any(_uses_nvgpu(f) for f in funcs):
        return
    aside = [f for f in funcs if not _uses_nvgpu(f)]
    followers = [_next_op(f) for f in aside]
    parking = ir.Module.create(kernels.location)
    for func in aside:
        func.detach_from_parent()
        ir.InsertionPoint(parking.body).insert(func)
    try:
        PassManager.parse("gpu.module(convert-nvgpu-to-nvvm)",
                          kernels.context).run(kernels)
    finally:
        for func, follower in zip(aside, followers):
            if follower is not None:
                func.move_before(follower)
            else:
                func.move_after(list(block.operations)[-1].operation)


def _uses_nvgpu(func: ir.Operation) -> bool:
    found = False

    def visit(op):
        nonlocal found
        if op.name.startswith("nvgpu."):
            found = True
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    return found


def _next_op(op: ir.Operation):
    """The op after `op` in its block that stays there (not another kernel set aside)."""
    ops = [o.operation for o in op.parent.regions[0].blocks[0].operations]
    later = ops[ops.index(op) + 1:]
    return next((o for o in later if _uses_nvgpu(o) or o.name != "gpu.func"), None)

