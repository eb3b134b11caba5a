"""gpu-kernels-wait-on-predecessor: each kernel lets the next kernel of its stream launch
early and waits for the one before it (programmatic dependent launch, sm_90 and later).

A stream runs its kernels one after the other: the next kernel's blocks start only once
the last block of the one before has finished, and a decode step of ~200 short kernels
spends microseconds at each of those boundaries. With `griddepcontrol` a kernel launched
with the programmatic-serialization attribute (runtime/cuda/driver.py does, for kernels
that wait) may start while the kernel before it still runs; it then waits for that
kernel's completion and memory (`griddepcontrol.wait`) before anything else, and lets
its own successor start as soon as all of its blocks run (`launch_dependents`):

    gpu.func @k0_matvec(...) kernel {
      nvvm.griddepcontrol launch_dependents
      nvvm.griddepcontrol wait
      ... (the kernel as it was)

The wait comes first of all work, so no kernel reads what its predecessor writes, or
writes what it reads, before the predecessor is done: the order of the stream is kept.
Launched without the attribute (an older runtime, or ZYNML_PROGRAMMATIC_LAUNCH=0 when
they run), both instructions do nothing. Runs on gpu.modules of kernels (before their
lowering to NVVM), for targets with the `griddepcontrol` feature
(zynml/backend/cuda/target.py).
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
        nvvm.griddepcontrol(nvvm.GridDepActionKind.launch_dependents)
        nvvm.griddepcontrol(nvvm.GridDepActionKind.wait)
