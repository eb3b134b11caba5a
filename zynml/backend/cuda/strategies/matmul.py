"""Matmul: shared-memory tiled SIMT contraction, batched over a grid axis.

Accumulates in f32 whatever the element type (f16/bf16 results are rounded once, at the
store).

Matches a generic whose body is `out + a * b` (inputs optionally widened with extf) and
whose maps are a (batched) matrix product: A[.., i, k], B[.., k, j], C[.., i, j]. A block
of 256 threads computes a BM x BN tile of C; each thread a TM x TN sub-tile held in
registers. Per step of BK along k, the block stages A (transposed) and B tiles in shared
memory, two stages, the next step's read from global memory while the current one is
computed, then each thread does TM * TN FMAs per TM + TN shared reads (16-byte vector
reads) (simt_gemm.py, shared with implicit_gemm). Out-of-range rows, columns and k read
as 0 and are not stored, so any size works, run-time sizes too (a dynamic compile: the
kernel reads them off its arguments, the host sizes the grid; extents.py).

An f32 operand whose contiguous dimension is the one staged along (A's k, B's j), with a
static length a multiple of 4 and a plain row-major layout, is read 16 bytes at a time
(the runtime hands kernels 16-byte aligned buffers, INPUT_ALIGNMENT); others element by
element.

C filled with a constant just before (`C = A @ B` starts from zeros) is one kernel with
the product (a Group, `find_groups`), where this strategy is the one that would build
the product: the tiles' sums start from the constant, so C is neither filled by a kernel
of its own nor read (f32 [1024, 50304] logits: 206 MB written by the fill, then read).

Not here yet (issue "ZynML's own CUDA backend"): tensor cores (mma.sync / wgmma) for
f16/bf16, cp.async / TMA copies, fused epilogues, 16-byte epilogue stores.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, gpu, scf, vector

from .extents import (as_index, ceil_div, has_dynamic_extent, host_extents,
                      kernel_extents, minus, product)
from .kernel_builder import (REDUCTION, Group, KernelScope, KernelSignature, apply_map,
                             fill_value, filled_products, generic_operands,
                             identity_layout, index_const, indexing_maps, iterator_kinds,
                             loop_ranges, multiply_add_body, new_kernel)
from . import Launch
from .tuning import problem_key, tuned
from .row_registers import aligned, as_global
from .simt_gemm import (BlockGemm, add_and_round, check_params, clamp, declare_tiles,
                        delinearize_batch, threads_of, widen)

NAME = "matmul"
DYNAMIC = True  # run-time sizes: every point is bounds-checked already


@dataclass(frozen=True)
class Params:
    tile_m: int = 128   # BM: rows of C per block
    tile_n: int = 128   # BN: columns of C per block
    tile_k: int = 8     # BK: k per shared-memory stage
    thread_m: int = 8   # TM: rows of C per thread
    thread_n: int = 8   # TN: columns of C per thread
    warp_m: int = 8     # threads of a warp along m (32 / warp_m along n)
    min_mn: int = 4096  # smaller products (M * N) stay pointwise
    min_k: int = 16
    vector_loads: bool = True  # 16-byte global reads where the layout allows

    def __post_init__(self):
        check_params(self)


# tune_gemm_f32.py, H100, 4096^3: warp_m 8 2.99 ms, tile_k 16 2.99, warp_m 4 3.07,
# 64- or 256-row tiles 3.09 / 3.17, 64 columns 3.19, no 16-byte reads 3.29
DEFAULT_PARAMS = Params()


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
    if multiply_add_body(generic) is None:
        return False
    out = generic.regions[0].blocks[0].arguments[2]
    return str(out.type) in ("f32", "f16", "bf16")


def matches(generic: ir.Operation, target) -> bool:
    return fits(generic, tuned(NAME, DEFAULT_PARAMS, target, problem_key(generic.operands)))


def find_groups(generics: list, target) -> list[Group]:
    """C = constant, then the product into C, where this strategy is the first single
    strategy that takes the product (tensor-core ones before it keep theirs): one kernel
    whose sums start from the constant."""
    from . import single_strategies, single_takes

    def builds(product: ir.Operation) -> bool:
        first = next((s for s in single_strategies(target)
                      if single_takes(s, product, target)), None)
        return getattr(first, "NAME", None) == NAME

    return filled_products(generics, builds)


def fits(generic: ir.Operation, params: Params) -> bool:
    roles = _roles(generic)
    if roles is None or not _body_is_multiply_add(generic):
        return False
    if has_dynamic_extent(generic):
        return True  # the tiles cover any size; a thread per point only wins when tiny
    _, i, j, k = roles
    ranges = loop_ranges(generic)
    return ranges[i] * ranges[j] >= params.min_mn and ranges[k] >= params.min_k


def _vector_reads(operand: ir.Value, amap: ir.AffineMap, contiguous: int,
                  p: Params) -> str | None:
    """Whether `operand` can be read 4 f32 at a time along loop `contiguous`: "static"
    where its row length is static (and a multiple of 4), "run time" where that length
    is a run-time value the kernel tests, else None."""
    memref_type = ir.MemRefType(operand.type)
    last = memref_type.shape[-1]
    if not (p.vector_loads and str(memref_type.element_type) == "f32" and
            _row_major(memref_type) and
            ir.AffineDimExpr(amap.results[-1]).position == contiguous):
        return None
    if ir.ShapedType.is_dynamic_size(last):
        return "run time"
    return "static" if last % 4 == 0 else None


def _row_major(memref_type: ir.MemRefType) -> bool:
    """Contiguous and starting at its buffer's start (offset 0)."""
    try:
        strides, offset = memref_type.get_strides_and_offset()
    except (ValueError, RuntimeError):
        return False
    if not memref_type.has_static_shape:  # rows as long as the last size
        return identity_layout(memref_type)
    expected = [math.prod(memref_type.shape[d + 1:]) for d in range(memref_type.rank)]
    return offset == 0 and list(strides) == expected


def build(generic, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    """Kernel for a product generic, or for a Group (a constant fill and the product)."""
    initial = None  # None: the stores add C's initial value, read
    if isinstance(generic, Group):
        generic, initial = generic.product, generic.initial
    p = tuned(NAME, DEFAULT_PARAMS, target, problem_key(generic.operands))
    batch, dim_i, dim_j, dim_k = _roles(generic)
    dynamic = has_dynamic_extent(generic)
    threads = threads_of(p)
    signature = KernelSignature.of(generic)
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    with generic.location:
        declare_tiles(gpu_module, kernel_name, p)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        # numbers, or index values read off the arguments (run-time sizes)
        ranges = kernel_extents(generic, scope) if dynamic else loop_ranges(generic)
        m, n, kk = ranges[dim_i], ranges[dim_j], ranges[dim_k]
        gemm = BlockGemm.start(p, kernel_name, [ranges[d] for d in batch])
        contiguous = (dim_k, dim_j)  # the loop along A's and B's rows
        # 16-byte reads of a side: where its row length is static (and a multiple of
        # 4), or, with run-time sizes, where the kernel finds it a multiple of 4 and the
        # buffer aligned (one branch for the block: no divergence)
        reads = [_vector_reads(ins[s], maps[s], contiguous[s], p) if _slots(gemm, s) > 0
                 else None for s in (0, 1)]
        static = [r == "static" for r in reads]
        at_run_time = [r == "run time" for r in reads]
        emit = _Emitter(generic, scope, gemm, (m, n, kk), batch, (dim_i, dim_j, dim_k),
                        {s: as_global(scope.value(ins[s])) for s in (0, 1)
                         if static[s] or at_run_time[s]}, initial)
        if any(at_run_time):
            f32x4 = ir.VectorType.get([4], ir.F32Type.get())
            test = None
            for side, length in ((0, kk), (1, n)):
                if at_run_time[side]:
                    rest = arith.RemUIOp(length, index_const(4)).result
                    ok = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.eq, rest,
                                                   index_const(0)).result,
                                      aligned(scope, ins[side], f32x4)).result
                    test = ok if test is None else arith.AndIOp(test, ok).result
            branch = scf.IfOp(test, has_else=True)
            with ir.InsertionPoint(branch.then_block):
                emit([a or b for a, b in zip(static, at_run_time)])
                scf.YieldOp([])
            with ir.InsertionPoint(branch.else_block):
                emit(static)
                scf.YieldOp([])
        else:
            emit(static)
        gpu.ReturnOp([])
    when = None
    with ir.InsertionPoint(generic), generic.location:  # host values where run-time
        sizes = host_extents(generic) if dynamic else loop_ranges(generic)
        grid = (ceil_div(sizes[dim_j], p.tile_n), ceil_div(sizes[dim_i], p.tile_m),
                product([sizes[d] for d in batch]))
        if not isinstance(sizes[dim_k], int):  # no k: the tiles would read nothing
            when = arith.CmpIOp(arith.CmpIPredicate.ugt, sizes[dim_k],
                                index_const(0)).result
    return Launch(kernel_name, signature.values, grid, (threads, 1, 1), when=when)


def _slots(gemm: BlockGemm, side: int) -> int:
    return gemm.a_slots(4) if side == 0 else gemm.b_slots(4)


class _Emitter:
    """The block's tile of C: the k loop's fetches (16-byte reads on the sides asked,
    element by element on the others) and the guarded stores."""

    def __init__(self, generic, scope, gemm, sizes, batch, dims, views, initial):
        self.generic, self.scope, self.gemm = generic, scope, gemm
        self.initial = initial  # C's constant start, or None: read C
        self.m, self.n, self.kk = sizes
        self.batch, (self.dim_i, self.dim_j, self.dim_k) = batch, dims
        self.views = views
        self.ins, self.outs = generic_operands(generic)
        self.maps = indexing_maps(generic)
        self.loops = self.maps[0].n_dims
        f32x4 = ir.VectorType.get([4], ir.F32Type.get())
        self.f32x4 = f32x4
        self.zero4 = arith.ConstantOp(f32x4, ir.DenseElementsAttr.get_splat(
            f32x4, ir.FloatAttr.get(ir.F32Type.get(), 0.0))).result

    def point(self, i, j, k):
        ivs = [None] * self.loops
        for d, v in zip(self.batch, self.gemm.batch_ivs):
            ivs[d] = v
        ivs[self.dim_i], ivs[self.dim_j], ivs[self.dim_k] = i, j, k
        return ivs

    def inside(self, i, j, k, bound_checks):
        inside = None
        for name, bound in bound_checks:
            check = arith.CmpIOp(arith.CmpIPredicate.ult, {"i": i, "j": j, "k": k}[name],
                                 as_index(bound)).result
            inside = check if inside is None else arith.AndIOp(inside, check).result
        return inside

    def guarded_load(self, side, i, j, k, bound_checks):
        """operand `side` at (i, j, k) widened to f32, 0 outside the matrix."""
        m, n, kk = self.m, self.n, self.kk
        value = widen(self.scope.load(self.ins[side], apply_map(self.maps[side], self.point(
            clamp(i, m), clamp(j, n), clamp(k, kk)))))
        return arith.SelectOp(self.inside(i, j, k, bound_checks), value,
                              self.gemm.zero).result

    def vector_load(self, side, i, j, k, bound_checks):
        """4 elements along the contiguous loop from (i, j, k), 0 outside; the run
        starts at most 4 before the row's end (its length a multiple of 4)."""
        m, n, kk = self.m, self.n, self.kk
        point = self.point(clamp(i, m), clamp(j, minus(n, 3) if side else n),
                           clamp(k, kk if side else minus(kk, 3)))
        value = vector.LoadOp(self.f32x4, self.views[side],
                              apply_map(self.maps[side], point), alignment=16).result
        return arith.SelectOp(self.inside(i, j, k, bound_checks), value, self.zero4).result

    def __call__(self, vectors) -> None:
        gemm, m, n, kk = self.gemm, self.m, self.n, self.kk
        width = [4 if v else 1 for v in vectors]
        a_places = [gemm.a_slot(r, width[0]) for r in range(gemm.a_slots(width[0]))]
        b_places = [gemm.b_slot(r, width[1]) for r in range(gemm.b_slots(width[1]))]
        load = [self.vector_load if v else self.guarded_load for v in vectors]

        def fetch(k0):
            values = []
            for row, kcol in a_places:  # A[row0 + row, k0 + kcol]
                gi = arith.AddIOp(gemm.row0, row).result
                gk = arith.AddIOp(k0, kcol).result
                values.append(load[0](0, gi, None, gk, [("i", m), ("k", kk)]))
            for krow, col in b_places:  # B[k0 + krow, col0 + col]
                gk = arith.AddIOp(k0, krow).result
                gj = arith.AddIOp(gemm.col0, col).result
                values.append(load[1](1, None, gj, gk, [("k", kk), ("j", n)]))
            return values

        def put(values, stage):
            for (row, kcol), value in zip(a_places, values):
                gemm.put_a(stage, value, row, kcol)
            for (krow, col), value in zip(b_places, values[len(a_places):]):
                gemm.put_b(stage, value, krow, col)

        def store(ii, jj, gi, gj, total):
            out = self.outs[0]
            element = out.type.element_type
            where = apply_map(self.maps[2], self.point(gi, gj, index_const(0)))
            start = self.scope.load(out, where) if self.initial is None else \
                fill_value(element, self.initial)
            self.scope.store(add_and_round(start, total, element), out, where)

        gemm.epilogue(m, n, gemm.k_loop(kk, fetch, put), store)


# matmul_tensor_core's name for it
_delinearize_batch = delinearize_batch
