"""Implicit GEMM on tensor cores: implicit_gemm's kernels (a contraction whose operands
its body computes, a convolution's gathers; the same roles, k stages, masks and
run-time sizes) where both sides of the product are f16 or both bf16, the block's
products on mma.sync m16n8k16 with f32 accumulators (mma_block_gemm.py), the staged
operands kept in their own type (half the shared memory and stores of the SIMT tiles,
which widen them to f32). At static sizes A' (a convolution's weights) is first
computed into rows by a kernel of its own, which the stages read by 16-byte loads
(`copy_a`, implicit_gemm's _CopiedA). The output is C's initial value plus the f32
sum, rounded to C's type once, as in implicit_gemm (a loop nest that accumulates in
f16 rounds at every step: the f32 sum is the more accurate).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from mlir import ir

from . import Launch, implicit_gemm
from .mma_block_gemm import ELEMENTS, MmaBlockGemm, check_params, declare_tiles, threads_of

NAME = "implicit_gemm_mma"
REQUIRES = frozenset({"mma_sync", "ldmatrix"})
DYNAMIC = True


@dataclass(frozen=True)
class Params:
    tile_m: int = 64    # BM: rows of C (points of M) per block
    tile_n: int = 256   # BN: columns of C (points of N) per block
    tile_k: int = 32    # BK: k per shared-memory stage (a multiple of 16)
    warps_m: int = 2    # warps of the block along m
    warps_n: int = 4    # along n
    min_mn: int = 1024  # smaller products (M * N) are left to other strategies
    min_k: int = 8      # as are shorter reductions (as implicit_gemm)
    # static sizes, no batch loops: A' computed once by a kernel of its own into rows
    # the stages read whole (implicit_gemm's _CopiedA) instead of gathered
    copy_a: bool = True

    def __post_init__(self):
        check_params(self)


# by_cost orders them. Every tuning candidate timed on an H200 (2026-11-29), conv2d
# 3x3 f16, ms, A' copied (copy_a): 32x64x56x56 (M 64, N 100352, K 576): 64 x 256 BK 32
# 2 x 4 warps 0.056, 64 x 128 0.065, gathering A' 0.066, 16 warps 0.068; 32x128x28x28
# (M 128, N 25088, K 1152): 64 x 64 0.0665, 128 x 128 4 x 2 warps 0.068, 64 x 256 with
# 16 warps 0.068 (by_cost takes 128 x 128; `zynml tune` finds the 2%). Before A' was
# copied the loads of both sides bound it (64 x 256 0.066, 128 x 256 BK 16 best at M
# 128, 0.080).
CONFIGS = (Params(), Params(128, 128, 32, 4, 2), Params(64, 128, 32, 4, 2),
           Params(64, 64, 32, 2, 2), Params(64, 128, 16, 2, 4))
# Blocks a multiprocessor holds: the static kernel of the default tiles takes 128
# registers a thread as ptxas makes it (two blocks of 256 threads, 44 KB of shared memory
# each); with run-time sizes, whose extents and strides are arguments, it took 174 (one
# block) and ran 2.4x slower: those kernels ask ptxas for two (nvvm.minctasm; 1.9x).
RESIDENT_BLOCKS = 2


def element_of(generic: ir.Operation) -> str | None:
    """"f16" or "bf16" where both sides of the product are of that type, else None."""
    roles = implicit_gemm._roles(generic)
    if roles is None:
        return None
    types = {str(roles.a.type), str(roles.b.type)}
    return types.pop() if len(types) == 1 and types <= set(ELEMENTS) else None


def by_cost(m: int, n: int, batches: int = 1, multiprocessors: int = 132) -> list[Params]:
    """CONFIGS in the order to try: the one that pads M x N least first, then the one
    that gathers the fewest elements (a block gathers BN of them per k, and BM more
    where A' is not copied), then CONFIGS' order. (Not the wave: the loads bound a
    multiprocessor; see CONFIGS.)"""
    del batches, multiprocessors  # the signature implicit_gemm.choose_params calls
    def cost(indexed):
        index, p = indexed
        tiles = -(-m // p.tile_m) * -(-n // p.tile_n)
        gathered = p.tile_n + (0 if p.copy_a else p.tile_m)
        return (tiles * p.tile_m * p.tile_n, tiles * gathered, index)
    return [p for _, p in sorted(enumerate(CONFIGS), key=cost)]


def params_for(generic: ir.Operation, target) -> Params | None:
    if element_of(generic) is None:
        return None
    return implicit_gemm.choose_params(generic, target, NAME, CONFIGS, by_cost)


def matches(generic: ir.Operation, target) -> bool:
    return params_for(generic, target) is not None


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          target) -> Launch:
    element = ELEMENTS[element_of(generic)].get()
    kind = implicit_gemm.BlockKind(
        threads_of, functools.partial(declare_tiles, element=element),
        functools.partial(MmaBlockGemm.start, element=element), RESIDENT_BLOCKS,
        tuple(ELEMENTS))
    return implicit_gemm.build_with(generic, gpu_module, kernel_name,
                                    params_for(generic, target), kind)
