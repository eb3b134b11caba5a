"""Matmul on Hopper's warpgroup tensor cores (sm_90a): TMA copies, wgmma, a ring of stages.

Matches f16 / bf16 products A[i, k] @ B[k, j] -> C[i, j] (row-major, no batch, f32
accumulation) whose sizes tile: M by 128, N by `tile_n`, K by 64. A block of two
warpgroups and one copying warp (288 threads) computes a 128 x tile_n tile of C:

- the copying warp's first thread copies each k step's tiles into a slot of a ring of
  `stages` slots in shared memory with the copy engine (TMA, `cp.async.bulk.tensor`):
  A's 128 x 64 as one box, B's 64 x tile_n as tile_n / 64 boxes of 64 x 64, all 128-byte
  swizzled (the layout wgmma reads without bank conflicts). A slot's copies complete on
  its "full" mbarrier; before refilling a slot it waits on the slot's "empty" mbarrier;
- warpgroup g multiplies rows 64 g .. 64 g + 63 with `wgmma.mma_async` m64 n{tile_n} k16
  (A and B read from shared memory through matrix descriptors; B is N-major, so
  transposed), accumulating in registers. Per k step it waits on the slot's full
  mbarrier, issues the step's wgmmas, waits until the previous step's have finished
  (wgmma.wait_group 1) and arrives on that step's empty mbarrier;
- epilogue: the accumulators go to shared memory as f32 (rows padded against bank
  conflicts), then each thread adds C's initial value to 8 elements at a time and
  writes them rounded (16-byte accesses).

The host makes the TMA descriptors (`TensorMap` kernel arguments; the launch plan's
"tensor_map" steps, encoded by the runtime per buffer address). Where C was just filled
with a constant (`C = A @ B` starts from zeros), fill and product are one kernel
(`find_groups`): the accumulators start from the constant and C is written once.

Not here yet: setmaxnreg (the copying warp keeps as many registers as the others),
persistent blocks, TMA stores of C, batched products, partial tiles (those use
`matmul_tensor_core` or `matmul`).
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, builtin, gpu, memref, nvgpu, nvvm, scf, vector

from ..cir_ops import defining_op
from ..gpu_kernel_builder import (KernelScope, KernelSignature, follows, generic_operands,
                                  index_const, loop_ranges, new_kernel)
from . import Launch, TensorMap
from .hopper import (WARP, WARPGROUP, aligned_dynamic_shared, barrier_group, equals, only_if,
                     parity, shared, tensor_map_type, uniform_warp, wait)
from .matmul import _body_is_multiply_add
from .matmul_tensor_core import _layout

NAME = "matmul_wgmma"
REQUIRES_CHIPS = ("sm_90a",)  # wgmma exists only in sm_90a's PTX
ROWS_PER_WARPGROUP = 64  # wgmma's m
TILE_K = 64              # a 128-byte swizzled row of f16 / bf16
EPILOGUE_PAD = 8         # f32 after each row of the staged C tile (32 bytes)
_ELEMENTS = ("f16", "bf16")


@dataclass(frozen=True)
class Params:
    tile_n: int = 256     # columns of C per block (wgmma's n; a multiple of 64, <= 256)
    warpgroups: int = 2   # each takes 64 rows: tile_m = 64 * warpgroups
    stages: int = 4       # k steps in flight
    min_mn: int = 4096    # smaller products stay on the other strategies

    @property
    def tile_m(self) -> int:
        return ROWS_PER_WARPGROUP * self.warpgroups

    def stage_bytes(self, itemsize: int = 2) -> int:
        return (self.tile_m + self.tile_n) * TILE_K * itemsize

    def shared_bytes(self) -> int:
        """The ring of stages, or the f32 tile of C in the epilogue (the same memory),
        plus room to align the ring to 1024 bytes (the 128-byte swizzle's period)."""
        epilogue = self.tile_m * (self.tile_n + EPILOGUE_PAD) * 4
        return max(self.stages * self.stage_bytes(), epilogue) + 1024


CONFIGS = (Params(tile_n=256), Params(tile_n=128))


def _params_for(generic: ir.Operation):
    roles = _layout(generic)
    if roles is None or not _body_is_multiply_add(generic):
        return None
    batch, i, j, k = roles
    ins, outs = generic_operands(generic)
    types = {str(ir.MemRefType(v.type).element_type) for v in ins}
    out = str(ir.MemRefType(outs[0].type).element_type)
    if len(types) != 1 or types.pop() not in _ELEMENTS or out not in _ELEMENTS + ("f32",):
        return None
    if batch:  # the TMA boxes are 2-d
        return None
    ranges = loop_ranges(generic)
    m, n, kk = ranges[i], ranges[j], ranges[k]
    for params in CONFIGS:
        if m % params.tile_m == 0 and n % params.tile_n == 0 and kk % TILE_K == 0 \
                and m * n >= params.min_mn:
            return params
    return None


def matches(generic: ir.Operation) -> bool:
    return _params_for(generic) is not None


@dataclass
class Group:
    """C filled with a constant, then the product accumulating into it: one kernel whose
    accumulators start from the constant, so C is neither filled nor read."""
    fill: ir.Operation
    product: ir.Operation
    initial: float

    def __iter__(self):
        return iter((self.fill, self.product))


def find_groups(generics: list) -> list[Group]:
    groups = []
    for fill, product in zip(generics, generics[1:]):
        initial = _constant_fill(fill)
        if initial is not None and matches(product) and follows(fill, product) and \
                generic_operands(fill)[1] == generic_operands(product)[1]:
            groups.append(Group(fill, product, initial))
    return groups


def _constant_fill(generic: ir.Operation):
    """The constant a generic writes to every point of its one output, or None."""
    ins, outs = generic_operands(generic)
    if len(outs) != 1 or any(isinstance(v.type, ir.ShapedType) for v in ins):
        return None
    body = generic.regions[0].blocks[0]
    [value] = list(body.operations)[-1].operands
    if isinstance(value, ir.BlockArgument) and value.owner == body:
        if value.arg_number >= len(ins):
            return None  # the output's own value
        value = ins[value.arg_number]
    owner = defining_op(value)
    if owner is None or owner.name != "arith.constant" or \
            not isinstance(owner.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(owner.attributes["value"]).value


def build(generic, gpu_module: ir.Operation, kernel_name: str,
          params: Params | None = None) -> Launch:
    """Kernel for a product generic, or for a Group (a constant fill and the product)."""
    initial = None  # None: the epilogue reads C's initial value
    if isinstance(generic, Group):
        generic, initial = generic.product, generic.initial
    p = params or _params_for(generic)
    batch, dim_i, dim_j, dim_k = _layout(generic)
    ranges = loop_ranges(generic)
    m, n, kk = ranges[dim_i], ranges[dim_j], ranges[dim_k]
    ins, outs = generic_operands(generic)
    element = ir.MemRefType(ins[0].type).element_type
    out_element = ir.MemRefType(outs[0].type).element_type
    a_box, b_box = (p.tile_m, TILE_K), (TILE_K, 64)
    a_map_type, b_map_type = tensor_map_type(a_box, element), tensor_map_type(b_box, element)
    signature = KernelSignature.of(generic)
    consumers = WARPGROUP * p.warpgroups
    threads = consumers + WARP  # the last warp copies
    pointer = ir.Type.parse("!llvm.ptr")  # how a kernel takes a descriptor's address
    func = new_kernel(gpu_module, kernel_name, signature.types() + [pointer, pointer],
                      [threads])
    steps = kk // TILE_K
    a_bytes, b_bytes = p.tile_m * TILE_K * 2, TILE_K * p.tile_n * 2
    with ir.InsertionPoint(func.regions[0].blocks[0]), generic.location:
        scope = KernelScope(signature, func)
        c = scope.value(outs[0])
        a_map, b_map = (builtin.UnrealizedConversionCastOp([t], [arg]).results[0] for t, arg
                        in zip((a_map_type, b_map_type),
                               func.regions[0].blocks[0].arguments[-2:]))
        tid = gpu.thread_id(gpu.Dimension.x)
        block_row = arith.MulIOp(gpu.block_id(gpu.Dimension.y), index_const(p.tile_m)).result
        block_col = arith.MulIOp(gpu.block_id(gpu.Dimension.x), index_const(p.tile_n)).result
        ring = aligned_dynamic_shared(p.shared_bytes() - 1024)
        full = barrier_group(p.stages)   # a slot's copies have landed
        empty = barrier_group(p.stages)  # every warpgroup is done reading a slot
        copier = equals(tid, consumers)
        with only_if(copier):
            for s in range(p.stages):
                nvgpu.mbarrier_init(full, index_const(1), index_const(s))
                nvgpu.mbarrier_init(empty, index_const(p.warpgroups), index_const(s))
            nvgpu.tma_prefetch_descriptor(a_map)
            nvgpu.tma_prefetch_descriptor(b_map)
        gpu.BarrierOp()

        def view(shape, offset):
            return memref.ViewOp(shared(shape, element), ring, offset, []).result

        def slot_offset(slot, extra_bytes):
            return arith.AddIOp(arith.MulIOp(slot, index_const(p.stage_bytes())).result,
                                extra_bytes).result

        with only_if(copier):  # the copy loop: refill each slot once it is read
            loop = scf.ForOp(index_const(0), index_const(steps), index_const(1))
            with ir.InsertionPoint(loop.body):
                step = loop.induction_variable
                slot = arith.RemUIOp(step, index_const(p.stages)).result
                with only_if(arith.CmpIOp(arith.CmpIPredicate.uge, step,
                                           index_const(p.stages)).result):
                    wait(empty, slot, parity(step, p.stages, previous=True))
                k0 = arith.MulIOp(step, index_const(TILE_K)).result
                nvgpu.mbarrier_arrive_expect_tx(full, index_const(a_bytes + b_bytes), slot)
                a_slot = view((p.tile_m, TILE_K), slot_offset(slot, index_const(0)))
                nvgpu.TmaAsyncLoadOp(a_slot, full, a_map, [k0, block_row], mbarId=slot)
                for box in range(p.tile_n // 64):  # B's 64-column boxes, one after another
                    col = arith.AddIOp(block_col, index_const(box * 64)).result
                    box_bytes = index_const(a_bytes + box * 64 * TILE_K * 2)
                    target = view((TILE_K, 64), slot_offset(slot, box_bytes))
                    nvgpu.TmaAsyncLoadOp(target, full, b_map, [col, k0], mbarId=slot)
                scf.YieldOp([])

        acc_type = ir.Type.parse("!nvgpu.warpgroup.accumulator<fragmented=vector<"
                                 f"{ROWS_PER_WARPGROUP}x{p.tile_n}xf32>>")
        a_desc_type = ir.Type.parse(
            f"!nvgpu.warpgroup.descriptor<tensor=memref<{ROWS_PER_WARPGROUP}x{TILE_K}x"
            f"{element}, #gpu.address_space<workgroup>>>")
        b_desc_type = ir.Type.parse(
            f"!nvgpu.warpgroup.descriptor<tensor=memref<{TILE_K}x{p.tile_n}x{element}, "
            "#gpu.address_space<workgroup>>>")
        warp = uniform_warp(tid)
        consumer = arith.CmpIOp(arith.CmpIPredicate.ult, warp,
                                index_const(consumers // WARP)).result
        warpgroup = arith.DivUIOp(warp, index_const(WARPGROUP // WARP)).result
        speaker = equals(arith.RemUIOp(tid, index_const(WARPGROUP)).result, 0)
        my_rows = arith.MulIOp(warpgroup, index_const(ROWS_PER_WARPGROUP * TILE_K * 2)).result
        multiply = scf.IfOp(consumer, [acc_type], has_else=True)
        with ir.InsertionPoint(multiply.then_block):  # the warpgroups' loop
            loop = scf.ForOp(index_const(0), index_const(steps), index_const(1),
                             [nvgpu.warpgroup_mma_init_accumulator(acc_type)])
            with ir.InsertionPoint(loop.body):
                step = loop.induction_variable
                slot = arith.RemUIOp(step, index_const(p.stages)).result
                wait(full, slot, parity(step, p.stages))
                my_a = view((ROWS_PER_WARPGROUP, TILE_K), slot_offset(slot, my_rows))
                a_desc = nvgpu.WarpgroupGenerateDescriptorOp(a_desc_type, my_a, a_map).result
                b_desc = nvgpu.WarpgroupGenerateDescriptorOp(
                    b_desc_type, view((TILE_K, p.tile_n),
                                      slot_offset(slot, index_const(a_bytes))), b_map).result
                acc = nvgpu.WarpgroupMmaOp(acc_type, a_desc, b_desc, loop.inner_iter_args[0],
                                           transposeB=True).result
                nvvm.WgmmaWaitGroupSyncOp(1)  # the previous step's wgmmas are done: free it
                previous = arith.SubIOp(step, index_const(1)).result
                previous_slot = arith.RemUIOp(previous, index_const(p.stages)).result
                with only_if(arith.AndIOp(speaker, arith.CmpIOp(
                        arith.CmpIPredicate.uge, step, index_const(1)).result).result):
                    nvgpu.mbarrier_arrive(empty, previous_slot)
                scf.YieldOp([acc])
            nvvm.WgmmaWaitGroupSyncOp(0)
            scf.YieldOp([loop.results[0]])
        with ir.InsertionPoint(multiply.else_block):
            scf.YieldOp([nvgpu.warpgroup_mma_init_accumulator(acc_type)])
        gpu.BarrierOp()  # every wgmma has finished reading the ring: the epilogue reuses it
        _epilogue(p, multiply.results[0], ring, c, initial, tid, consumer, block_row,
                  block_col, out_element)
        gpu.ReturnOp([])
    grid = (n // p.tile_n, m // p.tile_m, 1)
    operands = signature.values + [TensorMap(ins[0], a_map_type, a_box),
                                   TensorMap(ins[1], b_map_type, b_box)]
    return Launch(kernel_name, operands, grid, (threads, 1, 1), p.shared_bytes())


def _epilogue(p: Params, acc, ring, c, initial, tid, consumer, block_row, block_col,
              out_element):
    """C[tile] = C[tile] (or the constant `initial`) + acc, rounded once: through an f32
    tile in shared memory (rows padded by EPILOGUE_PAD floats against bank conflicts) so
    each thread reads and writes 16 contiguous bytes of C."""
    f32 = ir.F32Type.get()
    row_stride = p.tile_n + EPILOGUE_PAD
    padded = memref.ViewOp(shared((p.tile_m, row_stride), f32), ring, index_const(0),
                           []).result
    with only_if(consumer):
        # The store places a thread's values by its warp's index in the block, not in
        # its warpgroup: every warpgroup stores through a view of the tile's first 64
        # rows, and warpgroup g's land at rows 64 g.. (the ring holds the whole tile).
        first_rows = memref.ReinterpretCastOp(
            ir.MemRefType.get([ROWS_PER_WARPGROUP, p.tile_n], f32,
                              ir.Attribute.parse(f"strided<[{row_stride}, 1]>"),
                              ir.Attribute.parse("#gpu.address_space<workgroup>")),
            padded, [], [], [], [0], [ROWS_PER_WARPGROUP, p.tile_n], [row_stride, 1]).result
        nvgpu.WarpgroupMmaStoreOp(acc, first_rows)
    gpu.BarrierOp()
    width = 8
    per_row = p.tile_n // width
    threads = WARPGROUP * p.warpgroups
    with only_if(consumer):
        for r in range(p.tile_m * per_row // threads):
            flat = arith.AddIOp(tid, index_const(r * threads)).result
            row = arith.DivUIOp(flat, index_const(per_row)).result
            col = arith.MulIOp(arith.RemUIOp(flat, index_const(per_row)).result,
                               index_const(width)).result
            where = [arith.AddIOp(block_row, row).result, arith.AddIOp(block_col, col).result]
            total = vector.LoadOp(ir.VectorType.get([width], f32), padded, [row, col]).result
            if initial is None:
                start = vector.LoadOp(ir.VectorType.get([width], out_element), c, where).result
                if str(out_element) != "f32":
                    start = arith.ExtFOp(ir.VectorType.get([width], f32), start).result
                total = arith.AddFOp(start, total).result
            elif initial != 0.0:
                start = arith.ConstantOp(ir.VectorType.get([width], f32),
                                         ir.DenseElementsAttr.get_splat(
                                             ir.VectorType.get([width], f32),
                                             ir.FloatAttr.get(f32, initial))).result
                total = arith.AddFOp(start, total).result
            if str(out_element) != "f32":
                total = arith.TruncFOp(ir.VectorType.get([width], out_element), total).result
            vector.StoreOp(total, c, where)
