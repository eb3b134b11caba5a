"""Matmul on Hopper's warpgroup tensor cores (sm_90a): a persistent, warp-specialized
kernel with TMA copies into a ring of stages and wgmma.

Matches f16 / bf16 products A[i, k] @ B[k, j] -> C[i, j] (row-major, f32 accumulation),
and batched ones A[b, i, k] @ B[b, k, j] -> C[b, i, j] (one batch axis, dense operands:
the attention backward's), whose sizes tile: M by 128, N by `tile_n`, K by 64. B may
also be given K-major, [.., N, K] (`x @ w^T` of a weight w [N, K], or the source of a
transposed copy of it made only for the product, which is then never made), and f32
products run as TF32 where the compilation asks (CudaTarget.tf32; B must then be K-major:
tf32_operands.py makes it so). A ring slot holds a 128-byte row of k of each operand
whatever the element (64 f16 / bf16, 32 f32) and a wgmma takes 32 bytes of it (k16, or
k8 of TF32), so the ring, its descriptors and the schedule do not change with the
element. A batched operand's TMA descriptor sees it as a matrix of B * M (or B * K, or
B * N) rows (a host-side collapse_shape, no copy): tiles never straddle two batch
entries, so a tile of entry b reads rows b * M + .. of A and b * K + .. (b * N + .. where
K-major) of B. C is cut into 128 x tile_n tiles per
batch entry; the grid has min(tiles, multiprocessors) blocks (one per SM: the ring
takes most of an SM's shared memory; the run time caps the planned grid of one block per
tile at the device's multiprocessor count, Launch.blocks_per_multiprocessor), and
block b takes tiles b, b + grid, b + 2 grid, ... in a
grouped raster order (`group_m` tile rows at a time, column after column within a group:
the blocks running together share A's rows and B's columns in L2). A block has
128 * (warpgroups + 1) threads (384):

- the last warpgroup copies, and gives most of its registers to the others with
  setmaxnreg (40 left; the multiplying warpgroups take 232, room for m64n256's 128 f32
  accumulators per thread; 3 warps per SM quarter without it could have 168). Its first
  thread copies each k step's tiles, of every tile of the block one after another, into
  a slot of a ring of `stages` slots in shared memory with the copy engine (TMA,
  `cp.async.bulk.tensor`): A's 128 x 64 as one box, B's 64 x tile_n as tile_n / 64 boxes
  of 64 x 64 (a K-major B: tile_n x 64 as one box), all 128-byte swizzled (the layout
  wgmma reads without bank conflicts). A
  slot's copies complete on its "full" mbarrier; before refilling a slot it waits on the
  slot's "empty" mbarrier. It runs ahead across tiles: the next tile's first k steps
  land while the warpgroups still store the last one;
- warpgroup g multiplies the tile's rows 64 g .. 64 g + 63 with `wgmma.mma_async` m64
  n{tile_n} k16 as inline PTX (hopper.mma: A and B read from shared memory through
  matrix descriptors; an N-major B in wgmma's transposed mode), accumulating in
  registers. Per k
  step it waits on the slot's full mbarrier, issues the step's wgmmas, waits until the
  previous step's have finished (wgmma.wait_group 1) and arrives on that step's empty
  mbarrier;
- epilogue: each thread rounds its pairs of adjacent columns to C's type (after adding
  C's initial value where C is read) and runs the epilogue generic on them, if any.
  Where C is not read first, the pairs go through shared memory: each warpgroup writes
  its 64 rows a chunk of 128-byte rows at a time into one of its two buffers (128-byte
  swizzled), fences them for the async proxy, and its first thread stores the chunk
  with TMA (`cp.async.bulk.tensor`, committed as a bulk group), which runs on while the
  warpgroup writes the next chunk and starts its next tile; a buffer is written again
  once the store from it has read it (`cp.async.bulk.wait_group.read`). Otherwise each
  thread loads, adds and stores its pairs itself (4 bytes per pair for f16 / bf16).
  The next tile's first slots are usually full by then. Storing from registers cost
  about 5 us a tile: at K = 768 the products ran at 0.67x cuBLAS, through TMA 1.04-1.08x
  (docs/performance.md, Session 20).

The host makes the TMA descriptors (`TensorMap` kernel arguments; the launch plan's
"tensor_map" steps, encoded by the runtime per buffer address). Where C was just filled
with a constant (`C = A @ B` starts from zeros), fill and product are one kernel
(`find_groups`): the accumulators start from the constant and C is written once. A group
may also take the elementwise generic after the product (epilogue.py: C's value never
stored where nothing else reads it) and a transposed copy made only for A, whose source
is then read MN-major (transposed_copies.py: boxes of 64 columns, as B's, and wgmma's
transposed-A mode).

Run-time sizes (a dynamic compile: `?` in M, N or K; extents.py): the kernel reads M, N
and K from its arguments and the host sizes the grid, ceil(M / tile_m) * ceil(N /
tile_n) tiles. Partial tiles cost nothing extra: TMA reads the elements past M, N or K
as zeros (a zero column of A meets a zero row of B) and drops the stores past M and N;
the epilogue reads its other inputs at points clamped into C. Such a kernel takes a
product whose fill it fuses (C is written, not read), of one matrix (no batch axis),
with row-major operands of identity layout: their rows are K and N elements long, which
TMA needs in multiples of 16 bytes, so the launch runs where K % 8 == N % 8 == 0 (and
M % 8 == 0 where A is read from the source of a transposed copy, [K, M]) and K > 0
(`Launch.when`, a test on the host); elsewhere the generics run on the strategies after
this one (the product on `matmul`'s SIMT tiles). The tile width is the first that fits
(256; tunable per problem): the wave model needs the sizes.

Static sizes take partial tiles the same way where C is written (a fused fill), M, N, K
are multiples of 8 and M and N hold a whole tile (a decode step's few rows stay on
matvec), so the wave model may rank a width that does not divide N: 8192 x
4096 x 50304 ran 4.32 ms in 256-wide tiles (196.5 of them a row) against 4.62 ms in
192-wide ones (H100, docs/performance.md Session 26).

Not here yet: the two warpgroups taking turns on different tiles (ping-pong), more than
one batch axis, partial tiles where C is read (those use `matmul_tensor_core` or
`matmul`). Clusters of 2 blocks with B multicast by TMA were built (commit 5f93ee4 on
branch matmul-persistent: `.reqnctapercluster`, so a plain launch makes the clusters;
remote empty-mbarrier arrives through mapa) and were correct, but 2x slower on an H100
(4096 f16 0.42 ms against 0.214 ms; cause not found: maybe how many clusters of two
~193 KB blocks fit at once), so they were taken out again.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, builtin, gpu, memref, nvgpu, scf, vector

from .extents import ceil_div, has_dynamic_extent, loop_extents, product as product_of
from .kernel_builder import (Group, KernelScope, KernelSignature, dense_row_major,
                             filled_products, generic_operands, identity_layout, index_const,
                             new_kernel)
from . import Launch, TensorMap
from . import hopper
from .epilogue import EpilogueValues, find_epilogue
from .transposed_copies import transposed_copy
from .wgmma_tiles import IndexOps, as_index, tile_origin
from .simt_gemm import clamp as clamp_index
from .matmul_wgmma_params import (  # noqa: F401  (NAME: the strategy's, tuning's key)
    ELEMENTS, K_STEP_BYTES, NAME, ROWS_PER_WARPGROUP, STORE_BUFFER_BYTES, STORE_BUFFERS,
    Params, itemsize as _itemsize, operand_layout, params_for, row_elements, tile_k,
    wgmma_element)
from .hopper import (SWIZZLE_BYTES, WARP, WARPGROUP, aligned_dynamic_shared, barrier_group,
                     commit_stores, equals, fence_shared_for_async, free_slot, only_if,
                     parity, shared, split_roles, swizzled, tensor_map_type, tma_rows,
                     uniform_warp, wait, wait_stores, warpgroup_barrier)

REQUIRES = frozenset({"wgmma", "tma", "setmaxnreg"})
DYNAMIC = True  # run-time M, N, K where C is written (module docstring)


def matches(generic: ir.Operation, target) -> bool:
    return params_for(generic, target) is not None


def find_groups(generics: list, target) -> list[Group]:
    """Each product this strategy takes that has a constant fill before it, a
    transposed copy making A or B, or an elementwise epilogue after it: one kernel for
    them. B made by a transposed copy is read K-major from the copy's source."""
    b_copies = {id(product): _b_transposed(product, generics) for product in generics}

    def takes(product, c_written=False):
        k_major = True if b_copies[id(product)] is not None else None
        return params_for(product, target, c_written, b_k_major=k_major) is not None
    filled = {id(g.product): g for g in filled_products(
        generics, lambda product: takes(product, c_written=True))}
    groups = []
    for product in generics:
        group = filled.get(id(product))
        if group is None and not takes(product):
            continue
        b_transposed = b_copies[id(product)]
        fill = group.fill if group is not None else None
        epilogue = find_epilogue(product, generics, fill)
        if epilogue is not None and (
                str(ir.MemRefType(epilogue.target.type).element_type) not in
                ELEMENTS + ("f32",) or  # TMA stores it: rows of N, the plan tests N
                has_dynamic_extent(product) and not identity_layout(epilogue.target.type)):
            epilogue = None
        a_transposed = transposed_copy(product, generics)
        if a_transposed is not None and wgmma_element(
                ir.MemRefType(product.operands[0].type).element_type) == "tf32":
            a_transposed = None  # TF32 reads A K-major only
        if a_transposed is not None and has_dynamic_extent(product) and \
                not identity_layout(generic_operands(a_transposed)[0][0].type):
            a_transposed = None  # TMA reads A^T's rows (M long): the plan tests M
        if group is not None or epilogue is not None or a_transposed is not None or \
                b_transposed is not None:
            groups.append(Group(fill, product, group.initial if group else None, epilogue,
                                a_transposed, b_transposed=b_transposed))
    return groups


def _b_transposed(product: ir.Operation, generics: list) -> ir.Operation | None:
    """The transposed copy that makes the product's MN-major B ([.., K, N]) from a
    K-major source ([.., N, K]: `w^T` of a weight), which the kernel reads instead, or
    None."""
    layout = operand_layout(product)
    if layout is None or layout[1]:
        return None
    copy = transposed_copy(product, generics, operand=1)
    if copy is not None and has_dynamic_extent(product) and \
            not identity_layout(generic_operands(copy)[0][0].type):
        return None  # TMA reads the source's rows (K long): the plan tests K
    return copy


def build(generic, gpu_module: ir.Operation, kernel_name: str, target) -> Launch:
    """Kernel for a product generic, or for a Group (a constant fill, the product and an
    epilogue, the first or last of them possibly absent)."""
    initial, epilogue, a_transposed, b_transposed = None, None, None, None  # C is read
    if isinstance(generic, Group):
        generic, initial, epilogue, a_transposed, b_transposed = (
            generic.product, generic.initial, generic.epilogue, generic.a_transposed,
            generic.b_transposed)
    (batch, dim_i, dim_j, dim_k), b_k_major = operand_layout(generic)
    b_k_major = b_k_major or b_transposed is not None
    p = params_for(generic, target, c_written=initial is not None, b_k_major=b_k_major)
    dynamic = has_dynamic_extent(generic)
    ranges = loop_extents(generic)  # None: a run-time size (kernel_extents reads it)
    m, n, kk = ranges_mnk = ranges[dim_i], ranges[dim_j], ranges[dim_k]
    batches = ranges[batch[0]] if batch else 1
    ins, outs = generic_operands(generic)
    element = ir.MemRefType(ins[0].type).element_type
    out_element = ir.MemRefType(outs[0].type).element_type
    # A K-major: boxes of its 128 rows; A as the source of a transposed copy (MN-major,
    # [.., K, M]): boxes of 64 of its columns, as B's. B MN-major ([.., K, N]): boxes of
    # 64 of its columns; K-major ([.., N, K]): one box of its tile_n rows
    k_tile = tile_k(element)
    a_box = (p.tile_m, k_tile) if a_transposed is None else (k_tile, 64)
    b_box = (p.tile_n, k_tile) if b_k_major else (k_tile, 64)
    a_map_type, b_map_type = tensor_map_type(a_box, element), tensor_map_type(b_box, element)
    stored = epilogue.target if epilogue is not None else outs[0]  # what the kernel writes
    store_element = ir.MemRefType(stored.type).element_type
    # through TMA: C is not read first, and is a dense row-major buffer TMA can address
    by_tma = p.tma_store and initial is not None and dense_row_major(stored.type) and \
        str(store_element) in ELEMENTS + ("f32",)
    c_box = (ROWS_PER_WARPGROUP, SWIZZLE_BYTES // _itemsize(store_element))
    c_map_type = tensor_map_type(c_box, store_element) if by_tma else None
    signature = KernelSignature.of([generic] + ([epilogue.generic] if epilogue else []))
    if epilogue is not None and not epilogue.stores_source:
        signature.values.remove(outs[0])  # C is a temporary the kernel never stores
    a_source, b_source = ins[0], ins[1]
    if a_transposed is not None:  # the copy is never made: TMA reads its source
        signature.values.remove(ins[0])
        [a_source] = generic_operands(a_transposed)[0]
    if b_transposed is not None:  # the same for B, read K-major; the kernel takes the
        [b_source] = generic_operands(b_transposed)[0]  # source (run-time K: its size)
        if b_source in signature.values:
            signature.values.remove(ins[1])
        else:
            signature.values[signature.values.index(ins[1])] = b_source
    pointer = ir.Type.parse("!llvm.ptr")  # how a kernel takes a descriptor's address
    func = new_kernel(gpu_module, kernel_name,
                      signature.types() + [pointer] * (3 if by_tma else 2), [p.threads])
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        if dynamic:  # read off what the kernel takes: A may be a copy never made
            m, n, kk = _sizes((m, n, kk), stored, b_source, b_k_major, scope.value)
        maps = [a_map_type, b_map_type] + ([c_map_type] if by_tma else [])
        a_map, b_map, *c_map = (builtin.UnrealizedConversionCastOp([t], [arg]).results[0]
                                for t, arg in zip(maps, func.regions[0].blocks[0]
                                                  .arguments[-len(maps):]))
        kernel = _Kernel(p, m, n, kk, element, out_element, initial, batches, bool(batch),
                         a_mn_major=a_transposed is not None, b_k_major=b_k_major,
                         c_map=c_map[0] if c_map else None, store_element=store_element)
        if epilogue is not None:
            kernel.epilogue = EpilogueValues(epilogue, scope)
            c = scope.value(epilogue.target)
        else:
            c = scope.value(outs[0])
        kernel.emit(c, a_map, b_map)
        gpu.ReturnOp([])
    rows = ((0, 1), (2,)) if batch else None  # [b, rows, cols] seen as [b * rows, cols]
    operands = signature.values + [TensorMap(a_source, a_map_type, a_box, rows),
                                   TensorMap(b_source, b_map_type, b_box, rows)]
    if by_tma:
        operands.append(TensorMap(stored, c_map_type, c_box, rows))
    if not dynamic:
        grid, when = batches * p.tiles(m, n), None
    else:
        assert by_tma, "run-time sizes store C through TMA (_dynamic_params)"
        with ir.InsertionPoint(generic), generic.location:
            m, n, kk = _sizes(ranges_mnk, stored, b_source, b_k_major, lambda value: value)
            grid = product_of([ceil_div(m, p.tile_m), ceil_div(n, p.tile_n)])
            rows = [n, kk] + ([m] if a_transposed is not None else [])  # TMA copies
            when = tma_rows(rows, kk, row_elements(element))
    # persistent: the run time launches min(tiles, multiprocessors) blocks
    return Launch(kernel_name, operands, (grid, 1, 1), (p.threads, 1, 1),
                  p.shared_bytes(), blocks_per_multiprocessor=1 if p.persistent else 0,
                  when=when)


def _sizes(static, c: ir.Value, b: ir.Value, b_k_major: bool, value) -> list:
    """M, N and K: the number where static, else memref.dim of what takes that size
    (C's rows and columns, B's rows, or its columns where it is K-major; `value` maps
    them into the kernel, or not), since A may be a transposed copy the kernel never
    makes."""
    return [size if size is not None else
            memref.DimOp(value(source), index_const(axis)).result
            for size, source, axis in zip(static, (c, c, b), (0, 1, int(b_k_major)))]


def _add(a: ir.Value, b) -> ir.Value:
    return a if isinstance(b, int) and b == 0 else arith.AddIOp(a, as_index(b)).result


def _mul(a: ir.Value, b) -> ir.Value:
    return arith.MulIOp(a, as_index(b)).result


@dataclass
class _Kernel:
    p: Params
    m: int | ir.Value  # an index value: a run-time size
    n: int | ir.Value
    k: int | ir.Value
    element: ir.Type      # A's and B's: f16 or bf16, or f32 multiplied as TF32
    out_element: ir.Type  # C's: f16, bf16 or f32
    initial: float | None  # C's constant start (the fill fused in), or None: read C
    batches: int = 1       # the batch axis' extent (C [batches, m, n]), 1 without one
    batched: bool = False  # C has a batch axis (of any extent, 1 included)
    a_mn_major: bool = False  # A given as [.., K, M] (the source of a transposed copy)
    b_k_major: bool = False   # B given as [.., N, K] (else [.., K, N]: MN-major)
    epilogue: EpilogueValues | None = None  # then `c` is the epilogue's target
    c_map: ir.Value | None = None  # C's store descriptor: C stored through TMA
    store_element: ir.Type | None = None  # the element type of what the kernel stores

    def emit(self, c, a_map, b_map):
        p = self.p
        # a static size is a multiple of its tile; a run-time one may end in a part
        self.tile_k = tile_k(self.element)
        self.steps = ceil_div(self.k, self.tile_k)
        self.tiles_m, self.tiles_n = ceil_div(self.m, p.tile_m), ceil_div(self.n, p.tile_n)
        tid = gpu.thread_id(gpu.Dimension.x)
        consumers = WARPGROUP * p.warpgroups
        self.ring = aligned_dynamic_shared(p.shared_bytes() - 1024)
        self.full = barrier_group(p.stages)   # a slot's copies have landed
        self.empty = barrier_group(p.stages)  # every warpgroup is done reading a slot
        copier = equals(tid, consumers)
        with only_if(copier):
            for s in range(p.stages):
                nvgpu.mbarrier_init(self.full, index_const(1), index_const(s))
                nvgpu.mbarrier_init(self.empty, index_const(p.warpgroups), index_const(s))
            hopper.acquire_tensor_maps(a_map, b_map, *([self.c_map] if self.c_map else []))
        gpu.BarrierOp()
        # This block's tiles: block, block + grid, ... below tiles_m * tiles_n (the grid
        # never has more blocks than tiles)
        self.block = gpu.block_id(gpu.Dimension.x)
        self.blocks = gpu.grid_dim(gpu.Dimension.x)
        tiles = product_of([self.batches, self.tiles_m, self.tiles_n])
        self.my_tiles = arith.DivUIOp(arith.SubIOp(
            _add(self.blocks, IndexOps.sub(tiles, 1)), self.block).result, self.blocks).result
        warp = uniform_warp(tid)

        def copy():
            with only_if(copier):
                self._copy(a_map, b_map)
        split_roles(warp, consumers, copy, lambda: self._consume(tid, warp, c))

    # ------------------------------------------------------------ the tile schedule

    def _tile_origin(self, local: ir.Value):
        """The batch entry, first row and first column of C of this block's `local`-th
        tile."""
        t = arith.AddIOp(self.block, arith.MulIOp(local, self.blocks).result).result
        return tile_origin(self.p, self.tiles_m, self.tiles_n, t, IndexOps)

    # ------------------------------------------------------------ the copying thread

    def _view(self, shape, offset: ir.Value) -> ir.Value:
        return memref.ViewOp(shared(shape, self.element), self.ring, offset, []).result

    def _copy(self, a_map, b_map):
        p = self.p
        a_bytes, b_bytes = p.tile_m * SWIZZLE_BYTES, p.tile_n * SWIZZLE_BYTES
        k_tile = self.tile_k
        tiles = scf.ForOp(index_const(0), self.my_tiles, index_const(1))
        with ir.InsertionPoint(tiles.body):
            local = tiles.induction_variable
            entry, row0, col0 = self._tile_origin(local)
            # the rows of the collapsed operands where this batch entry starts
            a_row = arith.AddIOp(_mul(entry, self.m), row0).result
            # A^T's and an MN-major B's rows (k) where this entry starts; a K-major B's
            # row (n) where this tile starts
            k_row0 = _mul(entry, self.k)
            if self.b_k_major:
                b_row0 = arith.AddIOp(_mul(entry, self.n), col0).result
            first_step = _mul(local, self.steps)
            loop = scf.ForOp(index_const(0), as_index(self.steps), index_const(1))
            with ir.InsertionPoint(loop.body):
                k = loop.induction_variable
                step = arith.AddIOp(first_step, k).result  # counted over the block's tiles
                slot = free_slot(self.empty, step, p.stages)
                k0 = _mul(k, k_tile)
                nvgpu.mbarrier_arrive_expect_tx(self.full, index_const(a_bytes + b_bytes), slot)
                base = _mul(slot, p.stage_bytes())
                k_row = arith.AddIOp(k_row0, k0).result
                if self.a_mn_major:  # A's 64-column boxes
                    for box in range(p.tile_m // 64):
                        target = self._view((k_tile, 64), _add(base, box * 64 * SWIZZLE_BYTES))
                        nvgpu.TmaAsyncLoadOp(target, self.full, a_map,
                                             [_add(row0, box * 64), k_row], mbarId=slot)
                else:
                    nvgpu.TmaAsyncLoadOp(self._view((p.tile_m, k_tile), base), self.full,
                                         a_map, [k0, a_row], mbarId=slot)
                if self.b_k_major:  # B's tile_n rows, one box
                    nvgpu.TmaAsyncLoadOp(self._view((p.tile_n, k_tile), _add(base, a_bytes)),
                                         self.full, b_map, [k0, b_row0], mbarId=slot)
                for box in range(0 if self.b_k_major else p.tile_n // 64):
                    # an MN-major B's 64-column boxes, one after another
                    target = self._view((k_tile, 64),
                                        _add(base, a_bytes + box * 64 * SWIZZLE_BYTES))
                    nvgpu.TmaAsyncLoadOp(target, self.full, b_map, [_add(col0, box * 64), k_row],
                                         mbarId=slot)
                scf.YieldOp([])
            scf.YieldOp([])

    # ------------------------------------------------------------ the warpgroups

    def _consume(self, tid, warp, c):
        p = self.p
        i64 = ir.IntegerType.get_signless(64)
        f32 = ir.F32Type.get()
        warpgroup = arith.DivUIOp(warp, index_const(WARPGROUP // WARP)).result
        speaker = equals(arith.RemUIOp(tid, index_const(WARPGROUP)).result, 0)
        # wgmma descriptors of slot 0: A's box has tile_m rows (this warpgroup's start
        # 64 rows, 8 KB, further per warpgroup); B's follow A's: an MN-major B's boxes
        # have 64 rows, a K-major B's one box tile_n. MN-major A: a warpgroup's 64 rows
        # are one 64 x 64 box (8 KB), laid out as an MN-major B's.
        a_rows = self.tile_k if self.a_mn_major else p.tile_m
        a_desc = arith.AddIOp(hopper.descriptor_base(self.ring, a_rows), arith.MulIOp(
            arith.IndexCastOp(i64, warpgroup).result,
            arith.ConstantOp(i64, ROWS_PER_WARPGROUP * SWIZZLE_BYTES >> 4).result
        ).result).result
        b_desc = hopper.at(hopper.descriptor_base(
            self.ring, p.tile_n if self.b_k_major else self.tile_k), p.tile_m * SWIZZLE_BYTES)
        lane = arith.RemUIOp(tid, index_const(WARP)).result
        # this thread's first accumulator: row 16 (warp % 4) + lane / 4, column 2 (lane % 4)
        self.row_in_tile = arith.AddIOp(_mul(warp, 16), arith.DivUIOp(
            lane, index_const(4)).result).result
        self.col_in_tile = _mul(arith.RemUIOp(lane, index_const(4)).result, 2)
        count = p.tile_n // 2
        start = arith.ConstantOp(f32, 0.0 if self.initial is None else self.initial).result

        tiles = scf.ForOp(index_const(0), self.my_tiles, index_const(1))
        with ir.InsertionPoint(tiles.body):
            local = tiles.induction_variable
            entry, row0, col0 = self._tile_origin(local)
            first_step = _mul(local, self.steps)
            loop = scf.ForOp(index_const(0), as_index(self.steps), index_const(1),
                             [start] * count)
            with ir.InsertionPoint(loop.body):
                k = loop.induction_variable
                step = arith.AddIOp(first_step, k).result
                slot = arith.RemUIOp(step, index_const(p.stages)).result
                wait(self.full, slot, parity(step, p.stages))
                offset = arith.MulIOp(arith.IndexCastOp(i64, slot).result, arith.ConstantOp(
                    i64, p.stage_bytes() >> 4).result).result
                slot_a = arith.AddIOp(a_desc, offset).result
                slot_b = arith.AddIOp(b_desc, offset).result
                acc = hopper.fence(list(loop.inner_iter_args))
                # a wgmma's 32 bytes of k: along a K-major operand's rows, or that
                # many rows (k16 of halves) down an MN-major one
                mn_step = K_STEP_BYTES // _itemsize(self.element) * SWIZZLE_BYTES
                a_step = mn_step if self.a_mn_major else K_STEP_BYTES
                b_step = K_STEP_BYTES if self.b_k_major else mn_step
                for kk in range(SWIZZLE_BYTES // K_STEP_BYTES):
                    acc = hopper.mma(acc, hopper.at(slot_a, kk * a_step),
                                     hopper.at(slot_b, kk * b_step), p.tile_n,
                                     wgmma_element(self.element),
                                     trans_b=not self.b_k_major, trans_a=self.a_mn_major)
                hopper.commit()
                acc = hopper.wait_group(1, acc)  # the previous step's are done: free it
                previous = arith.RemUIOp(arith.AddIOp(step, index_const(p.stages - 1)).result,
                                         index_const(p.stages)).result
                with only_if(arith.AndIOp(speaker, arith.CmpIOp(
                        arith.CmpIPredicate.uge, k, index_const(1)).result).result):
                    nvgpu.mbarrier_arrive(self.empty, previous)
                scf.YieldOp(acc)
            acc = hopper.wait_group(0, list(loop.results))
            last = arith.RemUIOp(_add(first_step, IndexOps.sub(self.steps, 1)),
                                 index_const(p.stages)).result
            with only_if(speaker):
                nvgpu.mbarrier_arrive(self.empty, last)
            if self.c_map is not None:
                self._store_by_tma(acc, entry, row0, col0, warpgroup, lane, speaker)
            else:
                self._store(c, acc, entry, row0, col0)
            scf.YieldOp([])
        if self.c_map is not None:
            with only_if(speaker):  # the block's last stores are done before it exits
                wait_stores(0, read_only=False)

    def _store(self, c, acc, entry, row0, col0):
        """C[tile] = C[tile] (or the constant start, already in acc) + acc, rounded once:
        accumulators v and v + 1 (v even) are adjacent columns of one row, stored (and
        read) as a pair. With an epilogue, its body runs on each rounded value and `c`
        (its target) gets what it yields."""
        f32 = ir.F32Type.get()
        out = self.out_element
        pair = ir.VectorType.get([2], out)
        row = arith.AddIOp(row0, self.row_in_tile).result
        col = arith.AddIOp(col0, self.col_in_tile).result
        rows = (row, _add(row, 8))
        lead = [entry] if self.batched else []
        for j in range(self.p.tile_n // 8):
            column = _add(col, 8 * j)
            columns = (column, _add(column, 1))  # shared by both rows: loads are kept
            for r in (0, 1):
                v = 4 * j + 2 * r
                where = lead + [rows[r], column]
                before = None
                if self.initial is None:
                    before = vector.LoadOp(pair, c, where, alignment=2 * _itemsize(out)).result
                    if str(out) != "f32":
                        before = arith.ExtFOp(ir.VectorType.get([2], f32), before).result
                total = self._final(acc[v:v + 2], before,
                                    [lead + [rows[r], columns[e]] for e in (0, 1)])
                vector.StoreOp(total, c, where, alignment=2 * _itemsize(
                    ir.VectorType(total.type).element_type))

    def _final(self, pair: list, before, points: list) -> ir.Value:
        """The pair of values stored for accumulators `pair`: plus C's values `before`
        (f32, or None), rounded to C's type, through the epilogue at `points`."""
        f32 = ir.F32Type.get()
        total = vector.FromElementsOp(ir.VectorType.get([2], f32), pair).result
        if before is not None:
            total = arith.AddFOp(before, total).result
        if str(self.out_element) != "f32":
            total = arith.TruncFOp(ir.VectorType.get([2], self.out_element), total).result
        if self.epilogue is None:
            return total
        results = [self.epilogue.at(vector.ExtractOp(total, [], [e]).result, points[e])
                   for e in (0, 1)]
        return vector.FromElementsOp(ir.VectorType.get([2], results[0].type), results).result

    def _store_by_tma(self, acc, entry, row0, col0, warpgroup, lane, speaker):
        """The tile through shared memory: each warpgroup writes its 64 rows a chunk of
        128-byte rows at a time into one of its two buffers (128-byte swizzled, as TMA
        reads them), and its first thread stores the chunk with TMA, which runs on while
        the warpgroup writes the next chunk and goes on to its next tile. A buffer is
        written again once the store from it has read it (wait_group.read)."""
        p, out = self.p, self.store_element
        itemsize = _itemsize(out)
        chunk_cols = SWIZZLE_BYTES // itemsize
        chunks, groups = p.tile_n // chunk_cols, chunk_cols // 8
        pending = 1 if chunks % STORE_BUFFERS == 0 else 0  # the other buffer's store
        tile_row = arith.AddIOp(row0, self.row_in_tile).result
        col = arith.AddIOp(col0, self.col_in_tile).result
        lead = [entry] if self.batched else []
        in_buffer = arith.SubIOp(self.row_in_tile, _mul(warpgroup, ROWS_PER_WARPGROUP)).result
        lane_byte = _mul(arith.RemUIOp(lane, index_const(4)).result, 2 * itemsize)
        first_row = arith.AddIOp(row0, _mul(warpgroup, ROWS_PER_WARPGROUP)).result
        if self.batched:
            first_row = arith.AddIOp(_mul(entry, self.m), first_row).result
        own = _add(_mul(warpgroup, STORE_BUFFERS * STORE_BUFFER_BYTES),
                   p.stages * p.stage_bytes())
        for chunk in range(chunks):
            buffer = _add(own, (chunk % STORE_BUFFERS) * STORE_BUFFER_BYTES)
            with only_if(speaker):
                wait_stores(pending, read_only=True)
            warpgroup_barrier(warpgroup)
            flat = memref.ViewOp(shared((STORE_BUFFER_BYTES // itemsize,), out), self.ring,
                                 buffer, []).result
            for group in range(groups):
                j = chunk * groups + group
                column = _add(col, 8 * j)
                columns = (column, _add(column, 1))
                for r in (0, 1):
                    row = _add(in_buffer, 8 * r)
                    points = [lead + self._inside(_add(tile_row, 8 * r), columns[e])
                              for e in (0, 1)]
                    total = self._final(acc[4 * j + 2 * r:4 * j + 2 * r + 2], None, points)
                    byte = swizzled(row, _add(lane_byte, 8 * group * itemsize))
                    vector.StoreOp(total, flat, [arith.DivUIOp(byte, index_const(
                        itemsize)).result], alignment=2 * itemsize)
            fence_shared_for_async()
            warpgroup_barrier(warpgroup)
            with only_if(speaker):
                box = memref.ViewOp(shared((ROWS_PER_WARPGROUP, chunk_cols), out),
                                    self.ring, buffer, []).result
                nvgpu.TmaAsyncStoreOp(box, self.c_map,
                                      [_add(col0, chunk * chunk_cols), first_row])
                commit_stores()


    def _inside(self, row: ir.Value, col: ir.Value) -> list:
        """[row, col], clamped into C where tiles may be partial (run-time sizes, or
        static ones that are not multiples of the tile): a partial tile's epilogue reads
        its inputs there (TMA drops what it yields)."""
        def clamp(index, size, tile):
            whole = isinstance(size, int) and size % tile == 0
            return index if whole else clamp_index(index, size)
        return [clamp(row, self.m, self.p.tile_m), clamp(col, self.n, self.p.tile_n)]
