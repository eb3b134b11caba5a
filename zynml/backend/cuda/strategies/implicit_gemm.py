"""Implicit GEMM: a contraction whose operands its body computes (a convolution's
gathers) as a tiled matrix product, the operands never stored.

Matches a body `out + select(c, a * b, 0)` or `out + a * b` where, by the loops each body
value depends on (body_slices.py), `a` reads parallel loops M and reduction loops K only,
`b` parallel loops N and K, and `c` the loops of one of them; loops both read are batch
loops (the grid's z). With M, N, K linearized row-major it is C[m, n] += A'[m, k] *
B'[k, n], A' and B' being `a` and `b` (0 where `c` fails), run on simt_gemm's block GEMM:
each staged element clones `a`'s (or `b`'s) backward slice at the coordinates m (n) and k
delinearize to, the part without reduction loops once, before the loop over k. The side
with the output's innermost loop is N (neighbouring threads store neighbouring outputs).

conv2d.zyn, out[b, oc, oh, ow] = bias[oc] + sum over (ic, kh, kw) of select(in_bounds,
input[b, ic, oh * s + kh - p, ow * s + kw - p] * kernel[oc, ic, kh, kw], 0):
M = (oc), N = (b, oh, ow), K = (ic, kh, kw), the bounds predicate with N.

k is staged in steps of BK along the reduction loops in the order `gemm_sides.k_plan`
gives: a loop whose extent BK divides (a convolution's channels) runs fastest, so the k
of one stage share the other loops' coordinates (kh, kw), and a staged element's
bounds, clamps and address arithmetic are computed once a stage instead of once an
element (the conv2d benchmark: 0.44 -> 0.20 ms on an H200 with the tiles retuned,
docs/performance.md, Session 31). The sides are evaluated by gemm_sides.Side.

Run-time sizes (DYNAMIC): extents are read off the arguments, the grid is host
arithmetic, and k's stages run along the first run-time reduction loop: two kernels,
the launch taking the one without per-k masks where BK divides that loop's extent and
`_partial` (the last stage of each run masked) elsewhere. Batch loops must be static
(the grid's z is checked against its limit at compile time). Their kernels ask ptxas for
RESIDENT_BLOCKS blocks a multiprocessor (`nvvm.minctasm`): the extents and strides they
hold took them past 128 registers.

Left to other strategies: plain matrix products (matmul's), an empty M or N (a depthwise
convolution reads its channel on both sides), small products (Params.min_mn, min_k;
static sizes only). A masked-out element is 0 on its side, so an inf on the other side
gives NaN where the loop nest gives 0. f16 and bf16 products run on tensor cores in
implicit_gemm_mma, which builds its kernels here with mma_block_gemm's block (a
BlockKind). Not here yet: 16-byte gathers, fused epilogues.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, memref, scf, vector

from .body_slices import RUNNING, body_dims
from ....lowering.cir_ops import defining_op
from .extents import (as_index, ceil_div, has_dynamic_extent, host_extents, kernel_extents,
                      loop_extents, product)
from .gemm_sides import KPlan, KStage, Side, coordinates, k_plan
from .kernel_builder import (PARALLEL, KernelScope, KernelSignature, apply_map,
                             generic_operands, index_const, indexing_maps, iterator_kinds,
                             loop_ranges, new_kernel)
from . import Launch, matmul
from .tuning import choose, problem_key
from .simt_gemm import BlockGemm, add_and_round, check_params, declare_tiles, threads_of

NAME = "implicit_gemm"
DYNAMIC = True  # run-time sizes: the tiles and the stages of k are bounds-checked
_FLOATS = ("f32", "f16", "bf16")
_MAX_GRID_Z = 65535


@dataclass(frozen=True)
class Params:
    tile_m: int = 64    # BM: rows of C (points of M) per block
    tile_n: int = 128   # BN: columns of C (points of N) per block
    tile_k: int = 8     # BK: k per shared-memory stage
    thread_m: int = 4   # TM: rows of C per thread
    thread_n: int = 8   # TN: columns of C per thread
    warp_m: int = 4     # threads of a warp along m (32 / warp_m along n)
    min_mn: int = 1024  # smaller products (M * N) are left to other strategies
    min_k: int = 8      # as are shorter reductions (less than one stage)
    # A' computed once into rows (_CopiedA; static sizes): 3% slower on the f32 conv2d
    # benchmark (0.205 against 0.198 ms, H200, 2026-11-29; the FMAs bound it), so off
    copy_a: bool = False

    def __post_init__(self):
        check_params(self)


# 256 threads each; by_cost orders them. tune on an H200 (2026-11-28, k as k_plan
# puts it), conv2d 3x3 f32, ms: 32x64x56x56 (M 64): 64x256 BK 16 8x8 0.198, 64x256 BK 8
# 0.219, 64x128 BK 8 8x8 0.225, 64x128 BK 16 8x4 (the default before) 0.241, 128x128
# 0.395-0.432; 32x128x28x28 (M 128): 64x128 BK 8 8x8 0.216, 64x256 BK 16 0.240 (196
# blocks, under one wave), 128x128 BK 8 (the default before) 0.333.
CONFIGS = (Params(64, 256, 16, 8, 8), Params(64, 128, 8, 8, 8), Params(32, 128, 8, 4, 4),
           Params(64, 64, 8, 4, 4))
# Blocks of 256 threads a multiprocessor holds at up to 128 registers a thread (ptxas:
# 117-128 for these tiles): what by_cost counts as one wave of blocks.
RESIDENT_BLOCKS = 2


@dataclass(frozen=True)
class BlockKind:
    """How a block multiplies its tiles: simt_gemm's BlockGemm (SIMT, below) or
    mma_block_gemm's (implicit_gemm_mma)."""
    threads: Callable       # (params) -> threads a block
    declare_tiles: Callable  # (gpu_module, kernel_name, params): its shared memory
    start: Callable         # (params, kernel_name, batch sizes) -> the block's gemm
    resident_blocks: int = 0  # nvvm.minctasm of the run-time-size kernels (0: none)
    # operand types whose A' the block can read copied (_CopiedA): its tiles' own
    copies: tuple = ()


SIMT = BlockKind(threads_of, declare_tiles, BlockGemm.start, RESIDENT_BLOCKS, ("f32",))


@dataclass(frozen=True)
class Roles:
    m: list[int]       # parallel loops of A' rows, loop order
    n: list[int]       # parallel loops of B' columns
    k: list[int]       # the reduction loops
    batch: list[int]   # parallel loops both sides read
    a: ir.Value        # body value of the M side
    b: ir.Value        # body value of the N side
    a_mask: ir.Value | None  # c, on the side whose loops it reads
    b_mask: ir.Value | None


def matches(generic: ir.Operation, target) -> bool:
    return params_for(generic, target) is not None


def params_for(generic: ir.Operation, target) -> Params | None:
    """The Params to build `generic` with: CONFIGS by cost, tuned, the first big enough.
    With run-time sizes CONFIGS' first (any size runs; the batch loops, the grid's z,
    must be static to be checked against its limit)."""
    return choose_params(generic, target, NAME, CONFIGS, by_cost)


def choose_params(generic: ir.Operation, target, name: str, configs: tuple,
                  order: Callable) -> object | None:
    """params_for's choice among `configs`, ordered by `order(m, n, batches,
    multiprocessors)` where the sizes are static."""
    roles = _roles(generic)
    if roles is None:
        return None
    try:
        m, n, kk, batches = _sizes(generic, roles)
    except ValueError:  # a loop that indexes no operand dimension alone
        return None
    if batches is None:
        return None
    if None in (m, n, kk):
        return choose(name, configs, target, problem_key(generic.operands),
                      lambda p: batches <= _MAX_GRID_Z)
    return choose(name, order(m, n, batches, target.facts.multiprocessors), target,
                  problem_key(generic.operands),
                  lambda p: m * n >= p.min_mn and kk >= p.min_k and batches <= _MAX_GRID_Z)


def by_cost(m: int, n: int, batches: int = 1, multiprocessors: int = 132) -> list[Params]:
    """CONFIGS in the order to try: the one that pads M x N least first, then one whose
    grid fills a wave (RESIDENT_BLOCKS a multiprocessor), then the most FMAs per shared
    read, then CONFIGS' order."""
    def cost(indexed):
        index, p = indexed
        tiles = -(-m // p.tile_m) * -(-n // p.tile_n)
        short_of_a_wave = tiles * batches < RESIDENT_BLOCKS * multiprocessors
        return (tiles * p.tile_m * p.tile_n, short_of_a_wave,
                -p.thread_m * p.thread_n / (p.thread_m + p.thread_n), index)
    return [p for _, p in sorted(enumerate(CONFIGS), key=cost)]


def build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str,
          target) -> Launch:
    """The kernel's Launch. With a run-time reduction extent, only where K > 0 (a staged
    read past an empty K would leave its buffer); an empty reduction leaves C as it is,
    so nothing runs where K = 0. Where k's stages run along a run-time extent, two
    kernels: one for an extent that BK divides (no per-k masks or clamps: the launch
    tests it, as Triton specializes on divisibility by 16) and `_partial`, otherwise."""
    return build_with(generic, gpu_module, kernel_name, params_for(generic, target), SIMT)


def build_with(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str, p,
               kind: BlockKind) -> Launch:
    """`build` with the Params `p` of a block of `kind`."""
    roles = _roles(generic)
    extents = loop_extents(generic)
    order, split = k_plan(roles.k, extents, p.tile_k)
    roles = dataclasses.replace(roles, k=order)
    if all(extents[d] is not None for d in order):
        return _build(generic, gpu_module, kernel_name, p, kind, roles, split, False)
    run_time_stages = split and extents[order[-1]] is None
    whole = _build(generic, gpu_module, kernel_name, p, kind, roles, True, True) \
        if run_time_stages else None
    last = _build(generic, gpu_module, kernel_name + ("_partial" if whole else ""), p,
                  kind, roles, split, False)
    with ir.InsertionPoint(generic), generic.location:
        sizes = host_extents(generic)
        last.when = arith.CmpIOp(arith.CmpIPredicate.ne, as_index(
            product([sizes[d] for d in order])), index_const(0)).result
        last.otherwise = []  # K = 0: C keeps its initial value
        if whole is None:
            return last
        divides = arith.CmpIOp(arith.CmpIPredicate.eq, arith.RemUIOp(
            as_index(sizes[order[-1]]), index_const(p.tile_k)).result, index_const(0)).result
        whole.when = arith.AndIOp(last.when, divides).result
    whole.otherwise = [last]
    return whole


def _build(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str, p,
           kind: BlockKind, roles: Roles, split: bool, whole_stages: bool) -> Launch:
    """One kernel and its Launch; `whole_stages`: take the last k loop's run-time extent
    as a multiple of BK."""
    dynamic = has_dynamic_extent(generic)
    threads = kind.threads(p)
    signature = KernelSignature.of(generic)
    _, outs = generic_operands(generic)
    out_map = indexing_maps(generic)[-1]
    copied = None if dynamic else _copied_a(generic, p, kind, roles, split, threads)
    copy_launch = None
    if copied is not None:
        signature.values.append(copied.buffer)
        copy_launch = _build_a_copy(generic, gpu_module, kernel_name + "_a_rows", p, roles,
                                    split, copied, signature)
    with generic.location:
        kind.declare_tiles(gpu_module, kernel_name, p)
    func = new_kernel(gpu_module, kernel_name, signature.types(), [threads])
    if dynamic and kind.resident_blocks:  # SIMT: extents and strides as arguments: 130
        # registers, one block resident; held to RESIDENT_BLOCKS (128, 8 bytes spilled)
        # 12% faster (H200, Session 32). The static kernel (127) ran 4% slower so: it
        # is left as ptxas makes it.
        func.attributes["nvvm.minctasm"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(32), kind.resident_blocks)
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        # numbers, or index values read off the arguments (run-time sizes)
        ranges = kernel_extents(generic, scope) if dynamic else loop_ranges(generic)
        plan = KPlan(roles.k, ranges, p.tile_k, split, whole_stages)
        gemm = kind.start(p, kernel_name, [ranges[d] for d in roles.batch])
        batch = dict(zip(roles.batch, gemm.batch_ivs))
        side_a = Side(generic, scope, ranges, gemm, roles.a, roles.a_mask, roles.m,
                      roles.k, batch)
        side_b = Side(generic, scope, ranges, gemm, roles.b, roles.b_mask, roles.n,
                      roles.k, batch)
        # Per staged element: its place in the tile, the hoisted part of its side and the
        # key of its k part (elements with equal keys share k, see simt_gemm's slots).
        a_slots, b_slots, hoisted = [], [], {}
        for r in range(p.tile_m * p.tile_k // threads if copied is None else 0):
            row, kcol = gemm.a_slot(r)
            a_slots.append((row, kcol, side_a.hoist(arith.AddIOp(gemm.row0, row).result),
                            (r * threads) % p.tile_k))
        a_reader = copied.reader(gemm, scope, p, threads) if copied is not None else None
        a_runs = a_reader.runs if a_reader is not None else []
        for r in range(p.tile_n * p.tile_k // threads):
            krow, col = gemm.b_slot(r)
            key = (r * threads) % p.tile_n
            if key not in hoisted:
                hoisted[key] = side_b.hoist(arith.AddIOp(gemm.col0, col).result)
            b_slots.append((krow, col, hoisted[key], r))

        def fetch(k0):
            """(A's runs or elements, B's elements) of the step at k0."""
            stage = KStage(k0, plan)
            k_parts: dict = {}
            a_values = [a_reader.load(run, k0) for run in a_runs]
            for row, kcol, here, key in a_slots:
                if key not in k_parts:
                    k_parts[key] = side_a.k_part(stage, kcol)
                a_values.append(side_a.at(here, k_parts[key]))
            b_values = [side_b.at(here, side_b.k_part(stage, krow))
                        for krow, col, here, key in b_slots]
            return a_values, b_values

        a_places = a_runs + [(row, kcol) for row, kcol, _, _ in a_slots]

        def put(values, stage):
            a_values, b_values = values
            for (row, kcol), value in zip(a_places, a_values):
                gemm.put_a(stage, value, row, kcol)
            for (krow, col, _, _), value in zip(b_slots, b_values):
                gemm.put_b(stage, value, krow, col)

        sums = gemm.k_loop(plan.trip, fetch, put)
        rows = [coordinates(gemm.row(ii), roles.m, ranges) for ii in range(gemm.thread_m)]
        cols = [coordinates(gemm.column(jj), roles.n, ranges)
                for jj in range(gemm.thread_n)]

        def store(ii, jj, gi, gj, total):
            ivs = [None] * len(ranges)
            for coords in (batch, rows[ii], cols[jj]):
                for d, v in coords.items():
                    ivs[d] = v
            where = apply_map(out_map, ivs)
            scope.store(add_and_round(scope.load(outs[0], where), total,
                                      outs[0].type.element_type), outs[0], where)

        gemm.epilogue(product([ranges[d] for d in roles.m]),
                      product([ranges[d] for d in roles.n]), sums, store)
        gpu.ReturnOp([])
    with ir.InsertionPoint(generic), generic.location:  # host values where run-time
        sizes = host_extents(generic) if dynamic else loop_ranges(generic)
        grid = (ceil_div(product([sizes[d] for d in roles.n]), p.tile_n),
                ceil_div(product([sizes[d] for d in roles.m]), p.tile_m),
                product([sizes[d] for d in roles.batch]))
    main = Launch(kernel_name, signature.values, grid, (threads, 1, 1))
    return main if copy_launch is None else [copy_launch, main]


@dataclass
class _CopiedA:
    """A' computed once, by a kernel of its own, into `buffer` (on the host): [rows *
    trip] of the product's operand type, row-major, a row per m (M padded to whole
    tiles) and k in the k plan's order (`trip`: its k, padded to whole stages, 0 past
    K), so that the GEMM's stages read A' as `width`-element runs of rows (16-byte loads
    at width 8) instead of gathering it element by element: a convolution's weights, 18
    bytes apart along a stage's channels, were a fifth to a third of the block's L1
    traffic (docs/performance.md, Session 34)."""
    buffer: ir.Value
    rows: int
    trip: int
    width: int

    def reader(self, gemm, scope, p, threads: int) -> "_ARuns":
        """In the GEMM's kernel: the runs this thread stages a step, k fastest."""
        per_row = p.tile_k // self.width
        runs = []
        for r in range(p.tile_m * p.tile_k // (self.width * threads)):
            e = arith.AddIOp(gemm.tid, index_const(r * threads)).result
            runs.append((arith.DivUIOp(e, index_const(per_row)).result,
                         arith.MulIOp(arith.RemUIOp(e, index_const(per_row)).result,
                                      index_const(self.width)).result))
        return _ARuns(self, scope.value(self.buffer), gemm.row0, p.tile_k, runs)


@dataclass
class _ARuns:
    """A thread's runs of copied A' in the GEMM's kernel."""
    copied: _CopiedA
    buffer: ir.Value    # the kernel's argument
    row0: ir.Value      # the block's first row
    tile_k: int
    runs: list          # (row, k) in the A tile

    def load(self, run, k0: ir.Value) -> ir.Value:
        """The run at step k0 (the last step's read, past the end, kept in the buffer)."""
        row, kcol = run
        trip, width = self.copied.trip, self.copied.width
        k0 = arith.MinUIOp(k0, index_const(trip - self.tile_k)).result
        at = arith.AddIOp(arith.MulIOp(arith.AddIOp(self.row0, row).result,
                                       index_const(trip)).result,
                          arith.AddIOp(k0, kcol).result).result
        element = ir.MemRefType(self.buffer.type).element_type
        return vector.LoadOp(ir.VectorType.get([width], element), self.buffer, [at],
                             alignment=width * ir.FloatType(element).width // 8).result


def _copied_a(generic: ir.Operation, p, kind: BlockKind, roles: Roles, split: bool,
              threads: int) -> _CopiedA | None:
    """For a generic of static sizes: where the Params ask for it (`copy_a`), no batch
    loops and A' of a type the block's tiles hold, the buffer A' is copied into
    (allocated before the generic), else None."""
    element = roles.a.type
    if not p.copy_a or roles.batch or str(element) not in kind.copies:
        return None
    ranges = loop_ranges(generic)
    # whole stages: a row starts 16-byte aligned, and a stage's read stays in its row
    trip = ceil_div(KPlan(roles.k, ranges, p.tile_k, split).trip, p.tile_k) * p.tile_k
    per_thread = p.tile_m * p.tile_k // threads
    width = math.gcd(128 // ir.FloatType(element).width, per_thread)  # 16 bytes at most
    rows = ceil_div(product([ranges[d] for d in roles.m]), p.tile_m) * p.tile_m
    with ir.InsertionPoint(generic), generic.location:
        buffer = memref.AllocOp(ir.MemRefType.get([rows * trip], element), [], [],
                                alignment=64).result
    return _CopiedA(buffer, rows, trip, width)


def _build_a_copy(generic: ir.Operation, gpu_module: ir.Operation, kernel_name: str, p,
                  roles: Roles, split: bool, copied: _CopiedA,
                  signature: KernelSignature) -> Launch:
    """The kernel that fills copied.buffer: a thread per element, A' at (m, the k of its
    place in the k plan), 0 where masked or past K, rows past M clamped to the last."""
    threads, total = 256, copied.rows * copied.trip
    func = new_kernel(gpu_module, kernel_name, signature.types(), [threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        ranges = loop_ranges(generic)
        plan = KPlan(roles.k, ranges, p.tile_k, split)
        element = roles.a.type
        side = Side(generic, scope, ranges, SimpleNamespace(
            zero=arith.ConstantOp(element, 0.0).result, operand=lambda value: value),
            roles.a, roles.a_mask, roles.m, roles.k, {})
        e = arith.AddIOp(arith.MulIOp(gpu.block_id(gpu.Dimension.x),
                                      index_const(threads)).result,
                         gpu.thread_id(gpu.Dimension.x)).result
        inside = arith.CmpIOp(arith.CmpIPredicate.ult, e, index_const(total)).result
        guard = scf.IfOp(inside)
        with ir.InsertionPoint(guard.then_block):
            m = arith.DivUIOp(e, index_const(copied.trip)).result
            k = arith.RemUIOp(e, index_const(copied.trip)).result
            offset = arith.RemUIOp(k, index_const(p.tile_k)).result
            stage = KStage(arith.SubIOp(k, offset).result, plan)
            value = side.at(side.hoist(m), side.k_part(stage, offset))
            memref.StoreOp(value, scope.value(copied.buffer), [e])
            scf.YieldOp([])
        gpu.ReturnOp([])
    return Launch(kernel_name, signature.values, (ceil_div(total, threads), 1, 1),
                  (threads, 1, 1))


def _sizes(generic: ir.Operation, roles: Roles) -> tuple:
    """(M, N, K, batches), each None where a loop of it has a run-time extent."""
    extents = loop_extents(generic)
    return tuple(None if any(extents[d] is None for d in dims) else
                 math.prod(extents[d] for d in dims)
                 for dims in (roles.m, roles.n, roles.k, roles.batch))


def _roles(generic: ir.Operation) -> Roles | None:
    ins, outs = generic_operands(generic)
    if len(outs) != 1 or not isinstance(outs[0].type, ir.MemRefType) or \
            (matmul._roles(generic) is not None and matmul._body_is_multiply_add(generic)):
        return None
    product, dims = _product(generic), body_dims(generic)
    if product is None or dims is None:
        return None
    a, b, c = product
    kinds = iterator_kinds(generic)
    parallel = {d for d, kind in enumerate(kinds) if kind == PARALLEL}
    reduction = [d for d, kind in enumerate(kinds) if kind != PARALLEL]
    out_loops = _loops_of(indexing_maps(generic)[-1])
    dims_a, dims_b, mask_dims = (dims.get(v, frozenset()) if v is not None else frozenset()
                                 for v in (a, b, c))
    if not reduction or out_loops is None or sorted(out_loops) != sorted(parallel) or \
            RUNNING in dims_a | dims_b | mask_dims:
        return None
    on_a, on_b = dims_a & parallel, dims_b & parallel
    batch = on_a & on_b
    mask_on_a = mask_dims & parallel <= on_a
    if not mask_on_a and not mask_dims & parallel <= on_b:
        return None
    # loops neither side reads go with a (its values broadcast along them)
    side_m, side_n = sorted(parallel - on_b), sorted(on_b - batch)
    if not side_m or not side_n:
        return None
    masks = (c, None) if mask_on_a else (None, c)
    if out_loops[-1] in side_m:  # the output's innermost loop goes to N
        side_m, side_n, a, b, masks = side_n, side_m, b, a, masks[::-1]
    return Roles(side_m, side_n, reduction, sorted(batch), a, b, *masks)


def _product(generic: ir.Operation):
    """(a, b, c) of a body `out + select(c, a * b, 0)`, c None for `out + a * b`."""
    block = generic.regions[0].blocks[0]
    ins, _ = generic_operands(generic)
    out = block.arguments[len(ins)]
    yielded = list(list(block.operations)[-1].operation.operands)
    add = defining_op(yielded[0]) if len(yielded) == 1 else None
    if add is None or add.name != "arith.addf" or str(out.type) not in _FLOATS or \
            sum(1 for _ in out.uses) != 1 or out not in list(add.operands):
        return None
    term = [v for v in add.operands if v != out]
    op = defining_op(term[0]) if len(term) == 1 else None
    c = None
    if op is not None and op.name == "arith.select":
        c, term[0], zero = op.operands
        if not _is_zero(zero):
            return None
        op = defining_op(term[0])
    if op is None or op.name != "arith.mulf" or str(op.results[0].type) not in _FLOATS:
        return None
    a, b = op.operands
    return a, b, c


def _is_zero(value: ir.Value) -> bool:
    op = defining_op(value)
    return op is not None and op.name == "arith.constant" and \
        isinstance(op.attributes["value"], ir.FloatAttr) and \
        ir.FloatAttr(op.attributes["value"]).value == 0.0


def _loops_of(amap: ir.AffineMap) -> list[int] | None:
    """The loops of a map's results when each is a distinct loop, else None."""
    if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
        return None
    loops = [ir.AffineDimExpr(e).position for e in amap.results]
    return loops if len(set(loops)) == len(loops) else None
