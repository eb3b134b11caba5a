"""Matmul: shared-memory tiled SIMT contraction, batched over a grid axis.

Accumulates in f32 whatever the element type (f16/bf16 results are rounded once, at the
store).

Matches a generic whose body is `out + a * b` (inputs optionally widened with extf) and
whose maps are a (batched) matrix product: A[.., i, k], B[.., k, j], C[.., i, j]. A block
of 256 threads computes a BM x BN tile of C; each thread a TM x TN sub-tile held in
registers. Per step of BK along k, the block stages A (transposed) and B tiles in shared
memory, then each thread does TM * TN FMAs per TM + TN shared reads (16-byte vector
reads). Out-of-range rows, columns and k read as 0 and are not stored, so any size works.

Not here yet (issue "ZynML's own CUDA backend"): tensor cores (mma.sync / wgmma) for
f16/bf16, multi-stage copies (cp.async / TMA), fused epilogues.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from ..gpu_kernel_builder import (REDUCTION, KernelScope, KernelSignature, apply_map,
                                  generic_operands, index_const, indexing_maps,
                                  iterator_kinds, loop_ranges, new_kernel)
from . import Launch

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
    threads_n = p.tile_n // p.thread_n
    threads = (p.tile_m // p.thread_m) * threads_n
    f32 = ir.F32Type.get()
    signature = KernelSignature.of(generic)
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    a_type = ir.MemRefType.get([p.tile_k, p.tile_m], f32, memory_space=shared)
    b_type = ir.MemRefType.get([p.tile_k, p.tile_n], f32, memory_space=shared)
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        for suffix, type_ in (("a", a_type), ("b", b_type)):
            memref.GlobalOp(f"{kernel_name}_{suffix}", ir.TypeAttr.get(type_),
                            sym_visibility="private", alignment=16)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        zero = arith.ConstantOp(f32, 0.0).result
        tid = gpu.thread_id(gpu.Dimension.x)
        tx = arith.RemUIOp(tid, index_const(threads_n)).result
        ty = arith.DivUIOp(tid, index_const(threads_n)).result
        row0 = arith.MulIOp(gpu.block_id(gpu.Dimension.y), index_const(p.tile_m)).result
        col0 = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.tile_n)).result
        batch_ivs = _delinearize_batch(gpu.block_id(gpu.Dimension.z),
                                       [ranges[d] for d in batch])
        tile_a = memref.get_global(a_type, f"{kernel_name}_a")
        tile_b = memref.get_global(b_type, f"{kernel_name}_b")

        def point(i, j, k):
            ivs = [None] * len(ranges)
            for d, v in zip(batch, batch_ivs):
                ivs[d] = v
            ivs[dim_i], ivs[dim_j], ivs[dim_k] = i, j, k
            return ivs

        def guarded_load(operand, amap, i, j, k, bound_checks):
            """operand at (i, j, k) widened to f32, 0 outside the matrix."""
            clamped = {"i": _clamp(i, m), "j": _clamp(j, n), "k": _clamp(k, kk)}
            value = scope.load(operand, apply_map(amap, point(clamped["i"], clamped["j"],
                                                              clamped["k"])))
            if str(value.type) != "f32":
                value = arith.ExtFOp(f32, value).result
            inside = None
            for name, bound in bound_checks:
                check = arith.CmpIOp(arith.CmpIPredicate.ult, {"i": i, "j": j, "k": k}[name],
                                     index_const(bound)).result
                inside = check if inside is None else arith.AndIOp(inside, check).result
            return arith.SelectOp(inside, value, zero).result

        accumulators = [zero] * (p.thread_m * p.thread_n)
        loop = scf.ForOp(index_const(0), index_const(kk), index_const(p.tile_k), accumulators)
        with ir.InsertionPoint(loop.body):
            k0 = loop.induction_variable
            per_thread_a = p.tile_m * p.tile_k // threads
            for r in range(per_thread_a):  # A[row0 + e / BK, k0 + e % BK] -> tile_a[k][row]
                e = arith.AddIOp(tid, index_const(r * threads)).result
                row = arith.DivUIOp(e, index_const(p.tile_k)).result
                kcol = arith.RemUIOp(e, index_const(p.tile_k)).result
                gi = arith.AddIOp(row0, row).result
                gk = arith.AddIOp(k0, kcol).result
                value = guarded_load(ins[0], maps[0], gi, None, gk, [("i", m), ("k", kk)])
                memref.StoreOp(value, tile_a, [kcol, row])
            per_thread_b = p.tile_n * p.tile_k // threads
            for r in range(per_thread_b):  # B[k0 + e / BN, col0 + e % BN] -> tile_b[k][col]
                e = arith.AddIOp(tid, index_const(r * threads)).result
                krow = arith.DivUIOp(e, index_const(p.tile_n)).result
                col = arith.RemUIOp(e, index_const(p.tile_n)).result
                gk = arith.AddIOp(k0, krow).result
                gj = arith.AddIOp(col0, col).result
                value = guarded_load(ins[1], maps[1], None, gj, gk, [("k", kk), ("j", n)])
                memref.StoreOp(value, tile_b, [krow, col])
            gpu.BarrierOp()
            acc = list(loop.inner_iter_args)
            a_base = arith.MulIOp(ty, index_const(p.thread_m)).result
            b_base = arith.MulIOp(tx, index_const(p.thread_n)).result
            for step in range(p.tile_k):
                a_vals = _read_row(tile_a, step, a_base, p.thread_m)
                b_vals = _read_row(tile_b, step, b_base, p.thread_n)
                for ii in range(p.thread_m):
                    for jj in range(p.thread_n):
                        idx = ii * p.thread_n + jj
                        acc[idx] = _fma(a_vals[ii], b_vals[jj], acc[idx])
            gpu.BarrierOp()
            scf.YieldOp(acc)
        results = list(loop.results)
        for ii in range(p.thread_m):
            gi = arith.AddIOp(row0, arith.AddIOp(arith.MulIOp(
                ty, index_const(p.thread_m)).result, index_const(ii)).result).result
            for jj in range(p.thread_n):
                gj = arith.AddIOp(col0, arith.AddIOp(arith.MulIOp(
                    tx, index_const(p.thread_n)).result, index_const(jj)).result).result
                inside = arith.AndIOp(
                    arith.CmpIOp(arith.CmpIPredicate.ult, gi, index_const(m)).result,
                    arith.CmpIOp(arith.CmpIPredicate.ult, gj, index_const(n)).result).result
                guard = scf.IfOp(inside)
                with ir.InsertionPoint(guard.then_block):
                    where = apply_map(maps[2], point(gi, gj, index_const(0)))
                    initial = scope.load(outs[0], where)
                    if str(initial.type) != "f32":
                        initial = arith.ExtFOp(f32, initial).result
                    total = arith.AddFOp(initial, results[ii * p.thread_n + jj]).result
                    if total.type != outs[0].type.element_type:
                        total = arith.TruncFOp(outs[0].type.element_type, total).result
                    scope.store(total, outs[0], where)
                    scf.YieldOp([])
        gpu.ReturnOp([])
    grid = (-(-n // p.tile_n), -(-m // p.tile_m), batches)
    return Launch(kernel_name, signature.values, grid, (threads, 1, 1))


def _clamp(index, bound: int):
    if index is None:
        return index_const(0)
    return arith.MinUIOp(index, index_const(bound - 1)).result


def _read_row(tile: ir.Value, step: int, base: ir.Value, count: int) -> list[ir.Value]:
    """tile[step][base : base + count] as scalars, read 4 at a time (16-byte loads)."""
    f32 = ir.F32Type.get()
    values = []
    for chunk in range(0, count, 4):
        start = arith.AddIOp(base, index_const(chunk)).result
        vec = vector.LoadOp(ir.VectorType.get([4], f32), tile, [index_const(step), start],
                            alignment=16).result
        values += [vector.ExtractOp(vec, [], [lane]).result for lane in range(4)]
    return values


def _fma(a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    from mlir.dialects import math
    return math.FmaOp(a, b, c).result


def _delinearize_batch(linear: ir.Value, sizes: list[int]) -> list[ir.Value]:
    from ..gpu_kernel_builder import delinearize
    return delinearize(linear, sizes) if sizes else []
