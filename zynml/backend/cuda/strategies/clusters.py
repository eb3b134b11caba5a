"""Thread-block clusters (sm_90): a kernel's compile-time cluster shape, the cluster-wide
barrier, and loads from another block's shared memory (distributed shared memory).

A kernel marked with `set_cluster_shape` is launched in clusters by a plain launch (PTX
`.reqnctapercluster`); its grid must be a multiple of the shape. A block reads a peer's
shared memory only between two `cluster_sync`s: after the one that publishes the peer's
stores, and before the one that lets the peer exit.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, llvm, memref, nvvm

__all__ = ["set_cluster_shape", "cluster_sync", "shared_address", "load_from_block"]

# the largest cluster every sm_90 part launches (larger ones are opt-in per kernel)
PORTABLE_CLUSTER_BLOCKS = 8


def set_cluster_shape(func: ir.Operation, shape: tuple[int, int, int]) -> None:
    """Launch `func` (a gpu.func kernel) in clusters of `shape` blocks."""
    assert 1 <= shape[0] * shape[1] * shape[2] <= PORTABLE_CLUSTER_BLOCKS, shape
    func.attributes["nvvm.cluster_dim"] = ir.DenseI32ArrayAttr.get(list(shape))


def cluster_sync() -> None:
    """Every thread of every block of the cluster arrives (its shared-memory stores
    released) and waits for the others (acquiring theirs)."""
    nvvm.cluster_arrive(aligned=True)
    nvvm.cluster_wait(aligned=True)


def shared_address(buffer: ir.Value) -> ir.Value:
    """The 32-bit shared-memory address (this block's window) of a workgroup memref's
    first element."""
    i32 = ir.IntegerType.get_signless(32)
    pointer = memref.ExtractAlignedPointerAsIndexOp(buffer).result
    return arith.IndexCastOp(i32, pointer).result


def load_from_block(address: ir.Value, block_rank: ir.Value) -> ir.Value:
    """The f32 at shared address `address` (an i32, as `shared_address` gives, plus a
    byte offset) of the cluster's block `block_rank` (an i32)."""
    f32 = ir.F32Type.get()
    # side effects: the load stays after the cluster_sync that publishes it
    return llvm.InlineAsmOp(
        f32, [address, block_rank],
        "{ .reg .b32 remote; mapa.shared::cluster.u32 remote, $1, $2; "
        "ld.shared::cluster.f32 $0, [remote]; }",
        "=f,r,r", has_side_effects=True).result
