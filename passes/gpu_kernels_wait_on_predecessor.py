"""gpu-kernels-wait-on-predecessor: each kernel waits for the kernel before it in its
stream first, and lets the next one launch when it ends (programmatic dependent launch,
sm_90 and later).

A stream runs its kernels one after the other: the next kernel's blocks are launched
only once the last block of the one before has finished and its memory is flushed, and
a decode step of ~200 short kernels spends microseconds at each of those boundaries.
With `griddepcontrol` a kernel launched with the programmatic-serialization attribute
(runtime/cuda/driver.py does, for kernels that wait) is launched as soon as every block
of the kernel before it has signalled (`launch_dependents`, here as each block ends), and
waits for that kernel's completion and memory (`griddepcontrol.wait`) before anything
else:

    gpu.func @k0_matvec(...) kernel {
      nvvm.griddepcontrol wait
      ... (the kernel as it was)
      nvvm.griddepcontrol launch_dependents
      gpu.return

The wait comes first of all work, so no kernel reads what its predecessor writes, or
writes what it reads, before the predecessor is done: the order of the stream is kept.
(Signalling at a kernel's start instead let the next kernel's blocks take multiprocessors
early: a Llama 1b decode step 8.6% faster at batch 1 but 10% slower at batch 16, against
3.4% and 2% faster signalled at the end; docs/performance.md, Session 33.) Launched
without the attribute (an older runtime, or ZYNML_PROGRAMMATIC_LAUNCH=0 when they run),
both instructions do nothing. Runs on gpu.modules of kernels (before their lowering to
NVVM), for targets with the `griddepcontrol` feature (zynml/backend/cuda/target.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import nvvm

NAME = "gpu-kernels-wait-on-predecessor"


@dataclass
class Options:
    pass


def run(module: ir.Operation, options: Options) -> None:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name != "gpu.module":
            continue
        for func in op.regions[0].blocks[0].operations:
            func = func.operation
            if func.name == "gpu.func" and "gpu.kernel" in func.attributes:
                _wait_on_predecessor(func)


def _wait_on_predecessor(kernel: ir.Operation) -> None:
    entry = kernel.regions[0].blocks[0]
    first = next(iter(entry.operations), None)
    if first is not None and first.operation.name == "nvvm.griddepcontrol":
        return  # done already (the pass runs once per pipeline, but may be given twice)
    with ir.InsertionPoint.at_block_begin(entry), kernel.location:
        nvvm.griddepcontrol(nvvm.GridDepActionKind.wait)
    for block in kernel.regions[0].blocks:
        for op in block.operations:
            if op.operation.name == "gpu.return":
                with ir.InsertionPoint(op), kernel.location:
                    nvvm.griddepcontrol(nvvm.GridDepActionKind.launch_dependents)
