"""Matmul on tensor cores: f16 inputs, f32 accumulation, warp-level MMA (gpu.subgroup_mma_*,
which convert-gpu-to-nvvm lowers to the wmma instructions of sm_70 and later).

Matches what `matmul` matches when A and B are f16, the maps are plain row-major
A[.., i, k] @ B[.., k, j] -> C[.., i, j], and the sizes tile exactly (CONFIGS, largest
first). At 128 x 128 tiles of C (M, N multiples of 128, K of 32) a block of 4 warps stages
32-wide slices of A and B in shared memory with 16-byte copies, and each warp multiplies
4 x 4 fragments of 16 x 16 read from there. At 64 x 64 tiles each warp loads its 2 x 2
fragments straight from global memory (L1/L2 serve the reuse). The epilogue stages each
f32 fragment in shared memory, then adds C's initial value and rounds to C's type once,
per element.

Not here yet: double-buffered copies (cp.async / TMA), wgmma on sm_90a, bf16, partial
tiles (other sizes use the SIMT `matmul` strategy).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from .kernel_builder import (KernelScope, KernelSignature, generic_operands,
                                  index_const, indexing_maps, loop_ranges, new_kernel)
from . import Launch
from .tuning import choose, problem_key
from .matmul import _body_is_multiply_add, _delinearize_batch, _roles

NAME = "matmul_tensor_core"
REQUIRES = frozenset({"wmma"})
FRAGMENT = 16  # wmma m16n16k16


@dataclass(frozen=True)
class Params:
    warps_m: int = 2    # warps per block along M
    warps_n: int = 2    # warps per block along N
    frags_m: int = 2    # 16-row fragments per warp along M
    frags_n: int = 2    # 16-column fragments per warp along N
    min_mn: int = 4096  # smaller products stay on the SIMT strategies
    stage_k: int = 0    # k per shared-memory stage of the block's A and B tiles (0: none)

    @property
    def tile_m(self) -> int:
        return self.warps_m * self.frags_m * FRAGMENT

    @property
    def tile_n(self) -> int:
        return self.warps_n * self.frags_n * FRAGMENT


def _layout(generic: ir.Operation):
    """(batch dims, i, j, k) when A, B, C are row-major [batch.., i, k], [batch.., k, j],
    [batch.., i, j] (what subgroup_mma_load_matrix reads with a leading dimension)."""
    roles = _roles(generic)
    if roles is None:
        return None
    batch, i, j, k = roles
    maps = indexing_maps(generic)
    wanted = (batch + [i, k], batch + [k, j], batch + [i, j])
    for amap, dims in zip(maps, wanted):
        # a constant index (a unit batch axis folded to 0) is no loop: not this layout
        if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results) or \
                [ir.AffineDimExpr(e).position for e in amap.results] != dims:
            return None
    return roles


# Largest first: a warp's 4 x 4 fragments load 8 fragments per 16 MMAs (2 x 2: 4 per 4).
CONFIGS = (Params(frags_m=4, frags_n=4, stage_k=64), Params(frags_m=4, frags_n=4, stage_k=32),
           Params())
_PAD = 8  # f16 elements after each shared row: 16 bytes, against bank conflicts


def _params_for(generic: ir.Operation, target):
    """The first configuration (tuned) whose tiles cover the product exactly, or None."""
    roles = _layout(generic)
    if roles is None or not _body_is_multiply_add(generic):
        return None
    ins, outs = generic_operands(generic)
    if any(str(ir.MemRefType(v.type).element_type) != "f16" for v in ins) or \
            str(ir.MemRefType(outs[0].type).element_type) != "f16":
        return None
    _, i, j, k = roles
    ranges = loop_ranges(generic)
    m, n, kk = ranges[i], ranges[j], ranges[k]
    def tiles_it(p: Params) -> bool:
        return m % p.tile_m == 0 and n % p.tile_n == 0 and \
            kk % (p.stage_k or FRAGMENT) == 0 and m * n >= p.min_mn
    return choose(NAME, CONFIGS, target, problem_key(generic.operands), tiles_it)


def matches(generic: ir.Operation, target) -> bool:
    return _params_for(generic, target) is not None


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          target) -> Launch:
    p = _params_for(generic, target)
    batch, dim_i, dim_j, dim_k = _layout(generic)
    ranges = loop_ranges(generic)
    m, n, kk = ranges[dim_i], ranges[dim_j], ranges[dim_k]
    batches = math.prod(ranges[d] for d in batch)
    warps = p.warps_m * p.warps_n
    threads = 32 * warps
    warp_m, warp_n = p.frags_m * FRAGMENT, p.frags_n * FRAGMENT
    f32 = ir.F32Type.get()
    signature = KernelSignature.of(generic)
    ins, outs = generic_operands(generic)
    a_frag = ir.Type.parse('!gpu.mma_matrix<16x16xf16, "AOp">')
    b_frag = ir.Type.parse('!gpu.mma_matrix<16x16xf16, "BOp">')
    c_frag = ir.Type.parse('!gpu.mma_matrix<16x16xf32, "COp">')
    shared = ir.Attribute.parse("#gpu.address_space<workgroup>")
    stage_type = ir.MemRefType.get([warps, FRAGMENT, FRAGMENT], f32, memory_space=shared)
    f16 = ir.F16Type.get()
    a_tile_type = ir.MemRefType.get([p.tile_m, p.stage_k + _PAD], f16, memory_space=shared)
    b_tile_type = ir.MemRefType.get([p.stage_k, p.tile_n + _PAD], f16, memory_space=shared)
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]), generic.location:
        memref.GlobalOp(f"{kernel_name}_stage", ir.TypeAttr.get(stage_type),
                        sym_visibility="private", alignment=16)
        if p.stage_k:
            for suffix, type_ in (("a", a_tile_type), ("b", b_tile_type)):
                memref.GlobalOp(f"{kernel_name}_{suffix}", ir.TypeAttr.get(type_),
                                sym_visibility="private", alignment=32)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        a, b, c = (scope.value(v) for v in (ins[0], ins[1], outs[0]))
        tid = gpu.thread_id(gpu.Dimension.x)
        lane = arith.RemUIOp(tid, index_const(32)).result
        warp = arith.DivUIOp(tid, index_const(32)).result
        wm = arith.DivUIOp(warp, index_const(p.warps_n)).result
        wn = arith.RemUIOp(warp, index_const(p.warps_n)).result
        row0 = arith.AddIOp(
            arith.MulIOp(gpu.block_id(gpu.Dimension.y), index_const(p.tile_m)).result,
            arith.MulIOp(wm, index_const(warp_m)).result).result
        col0 = arith.AddIOp(
            arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.tile_n)).result,
            arith.MulIOp(wn, index_const(warp_n)).result).result
        batch_ivs = _delinearize_batch(gpu.block_id(gpu.Dimension.z),
                                       [ranges[d] for d in batch])

        def offset(base, fragment):
            return arith.AddIOp(base, index_const(fragment * FRAGMENT)).result

        zero = gpu.subgroup_mma_constant_matrix(c_frag, arith.ConstantOp(f32, 0.0).result)
        count = p.frags_m * p.frags_n

        def mma_step(acc, a_at, b_at):
            """acc += the warp's A fragments @ its B fragments (a_at(fm), b_at(fn): where
            each fragment starts, as (memref, indices, leading dimension))."""
            a_frags = [gpu.subgroup_mma_load_matrix(a_frag, *a_at(fm))
                       for fm in range(p.frags_m)]
            b_frags = [gpu.subgroup_mma_load_matrix(b_frag, *b_at(fn))
                       for fn in range(p.frags_n)]
            return [gpu.subgroup_mma_compute(a_frags[fm], b_frags[fn], acc[fm * p.frags_n + fn])
                    for fm in range(p.frags_m) for fn in range(p.frags_n)]

        step = p.stage_k or FRAGMENT
        loop = scf.ForOp(index_const(0), index_const(kk), index_const(step), [zero] * count)
        with ir.InsertionPoint(loop.body):
            k0 = loop.induction_variable
            acc = list(loop.inner_iter_args)
            if not p.stage_k:  # fragments straight from global memory
                acc = mma_step(acc, lambda fm: (a, batch_ivs + [offset(row0, fm), k0], kk),
                               lambda fn: (b, batch_ivs + [k0, offset(col0, fn)], n))
            else:  # the block stages A and B tiles with 16-byte copies, warps read them
                a_tile = memref.get_global(a_tile_type, f"{kernel_name}_a")
                b_tile = memref.get_global(b_tile_type, f"{kernel_name}_b")
                block_row = arith.MulIOp(gpu.block_id(gpu.Dimension.y),
                                         index_const(p.tile_m)).result
                block_col = arith.MulIOp(gpu.block_id(gpu.Dimension.x),
                                         index_const(p.tile_n)).result
                _copy_tile(a, a_tile, batch_ivs, block_row, k0, p.tile_m, p.stage_k, tid,
                           threads)
                _copy_tile(b, b_tile, batch_ivs, k0, block_col, p.stage_k, p.tile_n, tid,
                           threads)
                gpu.BarrierOp()
                warp_row = arith.MulIOp(wm, index_const(warp_m)).result
                warp_col = arith.MulIOp(wn, index_const(warp_n)).result
                for ks in range(0, p.stage_k, FRAGMENT):
                    acc = mma_step(
                        acc,
                        lambda fm: (a_tile, [offset(warp_row, fm), index_const(ks)],
                                    p.stage_k + _PAD),
                        lambda fn: (b_tile, [index_const(ks), offset(warp_col, fn)],
                                    p.tile_n + _PAD))
                gpu.BarrierOp()
            scf.YieldOp(acc)
        stage = memref.get_global(stage_type, f"{kernel_name}_stage")
        out_type = ir.MemRefType(outs[0].type).element_type
        for fm in range(p.frags_m):  # one fragment at a time through 1 KB of shared memory
            for fn in range(p.frags_n):
                gpu.subgroup_mma_store_matrix(loop.results[fm * p.frags_n + fn], stage,
                                              [warp, index_const(0), index_const(0)],
                                              FRAGMENT)
                gpu.BarrierOp()
                for e in range(FRAGMENT * FRAGMENT // 32):  # 2 rows of 16 per step
                    flat = arith.AddIOp(lane, index_const(e * 32)).result
                    r = arith.DivUIOp(flat, index_const(FRAGMENT)).result
                    col = arith.RemUIOp(flat, index_const(FRAGMENT)).result
                    where = batch_ivs + [arith.AddIOp(offset(row0, fm), r).result,
                                         arith.AddIOp(offset(col0, fn), col).result]
                    initial = memref.LoadOp(c, where).result
                    if str(initial.type) != "f32":
                        initial = arith.ExtFOp(f32, initial).result
                    staged = memref.LoadOp(stage, [warp, r, col]).result
                    total = arith.AddFOp(initial, staged).result
                    if total.type != out_type:
                        total = arith.TruncFOp(out_type, total).result
                    memref.StoreOp(total, c, where)
                gpu.BarrierOp()  # before the next fragment overwrites the stage
        gpu.ReturnOp([])
    grid = (n // p.tile_n, m // p.tile_m, batches)
    return Launch(kernel_name, signature.values, grid, (threads, 1, 1))


def _copy_tile(source, tile, batch_ivs, row0, col0, rows: int, cols: int, tid, threads: int):
    """tile[r, c] = source[.., row0 + r, col0 + c] for a rows x cols f16 tile, 8 elements
    (16 bytes) per thread and step, consecutive threads along a row (coalesced)."""
    vec = ir.VectorType.get([8], ir.F16Type.get())
    per_row = cols // 8
    for r in range(rows * per_row // threads):
        v = arith.AddIOp(tid, index_const(r * threads)).result
        row = arith.DivUIOp(v, index_const(per_row)).result
        col = arith.MulIOp(arith.RemUIOp(v, index_const(per_row)).result, index_const(8)).result
        value = vector.LoadOp(vec, source, batch_ivs + [arith.AddIOp(row0, row).result,
                                                       arith.AddIOp(col0, col).result],
                              alignment=16).result
        vector.StoreOp(value, tile, [row, col], alignment=16)
