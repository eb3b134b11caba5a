"""What one block of a CUDA target allows, checked against a program's `@workgroup` and
`@shared` before anything is compiled: a kernel that cannot launch on the chip is an error
at `zynml.compile`, located at its annotation, not a CUDA failure at the first call."""
from __future__ import annotations

from ...errors import ZynMLError
from .target import MAX_THREADS_PER_BLOCK, CudaTarget

__all__ = ["check_launch_limits"]


def check_launch_limits(checked, target: CudaTarget) -> None:
    """`@workgroup` and `@shared` of every kernel of `checked` must fit one block."""
    for step in checked.steps:
        kernel = step.kernel
        if kernel is None:
            continue
        nodes = {a.name: a for a in kernel.node.outer + kernel.node.inner}
        sizes = kernel.annotations.get("workgroup") or []
        if sizes and all(isinstance(v, int) for v in sizes):
            threads = 1
            for v in sizes:
                threads *= v
            if threads > MAX_THREADS_PER_BLOCK:
                raise ZynMLError(f"@workgroup asks for {threads} threads per block; a CUDA "
                                 f"block has at most {MAX_THREADS_PER_BLOCK}",
                                 nodes["workgroup"].loc)
        shared = kernel.annotations.get("shared")
        if isinstance(shared, int) and shared > target.max_shared_per_block:
            raise ZynMLError(f"@shared asks for {shared} bytes; a block on {target.chip} has at "
                             f"most {target.max_shared_per_block}", nodes["shared"].loc)
