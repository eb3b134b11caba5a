"""Matmul: shared-memory tiled SIMT contraction, batched over a grid axis.

Accumulates in f32 whatever the element type (f16/bf16 results are rounded once, at the
store).

Matches a generic whose body is `out + a * b` (inputs optionally widened with extf) and
whose maps are a (batched) matrix product: A[.., i, k], B[.., k, j], C[.., i, j]. A block
of 256 threads computes a BM x BN tile of C; each thread a TM x TN sub-tile held in
registers. Per step of BK along k, the block stages A (transposed) and B tiles in shared
memory, then each thread does TM * TN FMAs per TM + TN shared reads (16-byte vector
reads) (simt_gemm.py, shared with implicit_gemm). Out-of-range rows, columns and k read
as 0 and are not stored, so any size works.

Not here yet (issue "ZynML's own CUDA backend"): tensor cores (mma.sync / wgmma) for
f16/bf16, multi-stage copies (cp.async / TMA), fused epilogues.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref

from ..gpu_kernel_builder import (REDUCTION, KernelScope, KernelSignature, apply_map,
                                  generic_operands, index_const, indexing_maps,
                                  iterator_kinds, loop_ranges, new_kernel)
from . import Launch
from .simt_gemm import (BlockGemm, add_and_round, clamp, declare_tiles, delinearize_batch,
                        threads_of, widen)

NAME = "matmul"


@dataclass(frozen=True)
class Params:
    tile_m: int = 128   # BM: rows of C per block
    tile_n: int = 128   # BN: columns of C per block
    tile_k: int = 8     # BK: k per shared-memory stage
    thread_m: int = 8   # TM: rows of C per thread
    thread_n: int = 8   # TN: columns of C per thread
    min_mn: int = 4096  # smaller products (M * N) stay pointwise
    min_k: int = 16


def _roles(generic: ir.Operation):
    """(batch dims, i, j, k) when the maps are a batched matrix product, else None."""
    ins, outs = generic_operands(generic)
    if len(ins) != 2 or len(outs) != 1 or \
            not all(isinstance(v.type, ir.MemRefType) for v in ins + outs):
        return None
    maps = indexing_maps(generic)
    dims = []
    for amap in maps:
        if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
            return None
        dims.append([e.position for e in amap.results])
    kinds = iterator_kinds(generic)
    reduction = [d for d, k in enumerate(kinds) if k == REDUCTION]
    if len(reduction) != 1:
        return None
    k = reduction[0]
    a, b, c = (set(d) for d in dims)
    if k not in a or k not in b or k in c:
        return None
    batch = a & b & c
    only_a, only_b = (a & c) - batch, (b & c) - batch
    if len(only_a) != 1 or len(only_b) != 1 or a | b | c != set(range(len(kinds))):
        return None
    if len(dims[2]) != len(set(dims[2])) or dims[2][-2:] != [*only_a, *only_b]:
        return None
    return sorted(batch), only_a.pop(), only_b.pop(), k


def _body_is_multiply_add(generic: ir.Operation) -> bool:
    block = generic.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    names = [op.name for op in ops]
    if names[-3:] != ["arith.mulf", "arith.addf", "linalg.yield"] or \
            any(n != "arith.extf" for n in names[:-3]):
        return False
    mul, add = ops[-3], ops[-2]
    out = block.arguments[2]
    return out in list(add.operands) and mul.results[0] in list(add.operands) and \
        str(out.type) in ("f32", "f16", "bf16")


def matches(generic: ir.Operation, params: Params = Params()) -> bool:
    roles = _roles(generic)
    if roles is None or not _body_is_multiply_add(generic):
        return False
    _, i, j, k = roles
    ranges = loop_ranges(generic)
    return ranges[i] * ranges[j] >= params.min_mn and ranges[k] >= params.min_k


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          params: Params = Params()) -> Launch:
    p = params
    batch, dim_i, dim_j, dim_k = _roles(generic)
    ranges = loop_ranges(generic)
    m, n, kk = ranges[dim_i], ranges[dim_j], ranges[dim_k]
    batches = math.prod(ranges[d] for d in batch)
    threads = threads_of(p)
    signature = KernelSignature.of(generic)
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    with generic.location:
        declare_tiles(gpu_module, kernel_name, p)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        gemm = BlockGemm.start(p, kernel_name, [ranges[d] for d in batch])

        def point(i, j, k):
            ivs = [None] * len(ranges)
            for d, v in zip(batch, gemm.batch_ivs):
                ivs[d] = v
            ivs[dim_i], ivs[dim_j], ivs[dim_k] = i, j, k
            return ivs

        def guarded_load(operand, amap, i, j, k, bound_checks):
            """operand at (i, j, k) widened to f32, 0 outside the matrix."""
            clamped = {"i": clamp(i, m), "j": clamp(j, n), "k": clamp(k, kk)}
            value = widen(scope.load(operand, apply_map(amap, point(
                clamped["i"], clamped["j"], clamped["k"]))))
            inside = None
            for name, bound in bound_checks:
                check = arith.CmpIOp(arith.CmpIPredicate.ult, {"i": i, "j": j, "k": k}[name],
                                     index_const(bound)).result
                inside = check if inside is None else arith.AndIOp(inside, check).result
            return arith.SelectOp(inside, value, gemm.zero).result

        def stage(k0):
            for r in range(p.tile_m * p.tile_k // threads):  # A[row0 + row, k0 + kcol]
                row, kcol = gemm.a_slot(r)
                gi = arith.AddIOp(gemm.row0, row).result
                gk = arith.AddIOp(k0, kcol).result
                value = guarded_load(ins[0], maps[0], gi, None, gk, [("i", m), ("k", kk)])
                memref.StoreOp(value, gemm.tile_a, [kcol, row])
            for r in range(p.tile_n * p.tile_k // threads):  # B[k0 + krow, col0 + col]
                krow, col = gemm.b_slot(r)
                gk = arith.AddIOp(k0, krow).result
                gj = arith.AddIOp(gemm.col0, col).result
                value = guarded_load(ins[1], maps[1], None, gj, gk, [("k", kk), ("j", n)])
                memref.StoreOp(value, gemm.tile_b, [krow, col])

        def store(ii, jj, gi, gj, total):
            where = apply_map(maps[2], point(gi, gj, index_const(0)))
            scope.store(add_and_round(scope.load(outs[0], where), total,
                                      outs[0].type.element_type), outs[0], where)

        gemm.epilogue(m, n, gemm.k_loop(kk, stage), store)
        gpu.ReturnOp([])
    grid = (-(-n // p.tile_n), -(-m // p.tile_m), batches)
    return Launch(kernel_name, signature.values, grid, (threads, 1, 1))


# matmul_tensor_core's name for it
_delinearize_batch = delinearize_batch
