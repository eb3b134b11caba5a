"""Pieces the sm_90a kernels share (matmul_wgmma, attention_wgmma): shared-memory rings
filled by TMA with mbarriers, warp-uniform branches, and wgmma as inline PTX.

wgmma is emitted as inline PTX (not nvgpu.warpgroup.mma) where a kernel needs its
accumulators as values (attention's softmax reads and rescales them) or takes matrix A
from registers (P of P V), neither of which the nvgpu ops offer. The accumulators are
f32 values in wgmma's fragment layout: for m64nN, thread t of the warpgroup holds N / 2 of
them, value v at row 16 * (warp % 4) + lane / 4 + 8 * (v % 4 >= 2) and column
8 * (v // 4) + 2 * (lane % 4) + v % 2 (mma.sync m16n8's C layout, once per 8 columns).
A wgmma reads its accumulators after it is issued and writes them when its group
completes, so the fence and the wait below take the values they order as operands:
LLVM cannot move the arithmetic that writes or reads them across.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

from mlir import ir
from mlir.dialects import arith, gpu, llvm, memref, nvgpu, nvvm, scf

from ..target import CHIPS
from .kernel_builder import index_const

WARP = 32
WARPGROUP = 128
SWIZZLE_BYTES = 128  # a swizzled TMA row: 64 f16 / bf16, 32 f32
SWIZZLE_PERIOD = 1024  # 8 rows of 128 bytes: where the 128-byte swizzle repeats
TMA_ROW_BYTES = 16  # a TMA descriptor's rows (its strides) are multiples of this


def shared(shape, element) -> ir.MemRefType:
    return ir.MemRefType.get(list(shape), element,
                             memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>"))


def tensor_map_type(box, element) -> ir.Type:
    """A TMA descriptor copying `box`-shaped tiles, 128-byte swizzled, zeros past the end."""
    return nvgpu.TensorMapDescriptorType.get(
        shared(box, element), nvgpu.TensorMapSwizzleKind.SWIZZLE_128B,
        nvgpu.TensorMapL2PromoKind.L2PROMO_NONE, nvgpu.TensorMapOOBKind.OOB_ZERO,
        nvgpu.TensorMapInterleaveKind.INTERLEAVE_NONE)


def acquire_tensor_maps(*tensor_maps: ir.Value) -> None:
    """Fence, then prefetch, each TMA descriptor the block's copies will read. The runtime
    writes descriptors into device memory with a host copy (through the generic proxy)
    and reuses their slots once it drops its kept ones (runtime/cuda/tensor_maps.py); the
    CUDA programming guide's TMA section asks each block to fence such a descriptor
    (fence.proxy.tensormap::generic.acquire.sys) before the copy engine reads it, or it
    may read an older descriptor of the same address."""
    for tensor_map in tensor_maps:
        nvgpu.tma_fence_descriptor(tensor_map)
        nvgpu.tma_prefetch_descriptor(tensor_map)


def uniform_warp(tid: ir.Value) -> ir.Value:
    """tid / 32, broadcast from lane 0: ptxas then knows branches on it are warp-uniform
    (a wgmma under a branch it must assume divergent gets serialized, warning C7520)."""
    i32 = ir.IntegerType.get_signless(32)
    warp = arith.IndexCastOp(i32, arith.DivUIOp(tid, index_const(WARP)).result).result
    lane0 = arith.ConstantOp(i32, 0).result
    width = arith.ConstantOp(i32, WARP).result
    shuffled = gpu.ShuffleOp(warp, lane0, width, gpu.ShuffleMode.IDX).results[0]
    return arith.IndexCastOp(ir.IndexType.get(), shuffled).result


def equals(value: ir.Value, constant: int) -> ir.Value:
    return arith.CmpIOp(arith.CmpIPredicate.eq, value, index_const(constant)).result


def parity(step: ir.Value, stages: int, previous: bool = False) -> ir.Value:
    """The phase parity of a slot's barrier that step `step` waits for: its (step //
    stages)-th completion, or the one before (a slot freed by the step `stages` back)."""
    rounds = arith.DivUIOp(step, index_const(stages)).result
    if previous:
        rounds = arith.AddIOp(rounds, index_const(1)).result  # -1 and +1: the same parity
    bit = arith.IndexCastOp(ir.IntegerType.get_signless(32), rounds).result
    return arith.TruncIOp(ir.IntegerType.get_signless(1), bit).result


def wait(barriers: ir.Value, slot, parity_bit: ir.Value) -> None:
    if isinstance(slot, int):
        slot = index_const(slot)
    nvgpu.MBarrierTryWaitParityOp(barriers, parity_bit, index_const(10_000_000), mbarId=slot)


# Registers per thread after setmaxnreg in a kernel of multiplying warpgroups and one
# copying warpgroup: the copying warpgroup gives its registers up and the others take
# them. Each of an SM's 4 quarters holds one warp of every warpgroup; a warp takes
# registers only from what the block was launched with (its threads' share of the SM's
# 64K, in 8s: `launch_registers`), so COPIER + warpgroups * CONSUMER must fit the
# quarter's warps' launch registers, or a warp's setmaxnreg.inc waits for registers
# that never come. Two multiplying warpgroups take 232 each (without it, 3 warps in a
# quarter could have at most 168 each: attention's S, O and P, or matmul's m64n256
# accumulators, spill); three take 152; four 104 (launched with 96 each, 480 a lane: 112,
# which counted the quarter's 512, hung).
COPIER_REGISTERS, MAX_CONSUMER_REGISTERS = 40, 232
# the register file of the chips with setmaxnreg (sm_90a, sm_100a: the same)
_SETMAXNREG_CHIP = CHIPS["sm_90a"]


def launch_registers(threads: int) -> int:
    """The registers a thread of a block of `threads` is launched with, where one block
    fills the SM (ptxas gives a kernel of .maxntid `threads` that many): the SM's share,
    in 8s, at most a thread's limit in 8s."""
    chip = _SETMAXNREG_CHIP
    return min(chip.max_registers_per_thread, chip.registers_per_block // threads) // 8 * 8


def consumer_registers(warpgroups: int) -> int:
    """What each of `warpgroups` multiplying warpgroups takes: its share of its quarter's
    launch registers once the copier has given its own up, a multiple of 8
    (setmaxnreg's)."""
    lane = (warpgroups + 1) * launch_registers(WARPGROUP * (warpgroups + 1))
    share = (lane - COPIER_REGISTERS) // warpgroups // 8 * 8
    return min(MAX_CONSUMER_REGISTERS, share)


def split_roles(warp: ir.Value, consumer_threads: int, copy: Callable[[], None],
                consume: Callable[[], None]) -> None:
    """Warp specialization: the warps from thread `consumer_threads` on (the copying
    warpgroup) give registers up and run `copy()`, the others take them and run
    `consume()`. One if / else on a warp-uniform `warp`, as setmaxnreg asks."""
    role = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.uge, warp,
                                 index_const(consumer_threads // WARP)).result, has_else=True)
    with ir.InsertionPoint(role.then_block):
        nvvm.SetMaxRegisterOp(COPIER_REGISTERS, nvvm.SetMaxRegisterAction.decrease)
        copy()
        scf.YieldOp([])
    with ir.InsertionPoint(role.else_block):
        nvvm.SetMaxRegisterOp(consumer_registers(consumer_threads // WARPGROUP),
                              nvvm.SetMaxRegisterAction.increase)
        consume()
        scf.YieldOp([])


def free_slot(empty: ir.Value, step: ir.Value, stages: int) -> ir.Value:
    """The ring slot that step `step` fills, once its consumers have released it: steps
    from the `stages`-th on wait on the slot's "empty" barrier for the release by the step
    `stages` back."""
    slot = arith.RemUIOp(step, index_const(stages)).result
    with only_if(arith.CmpIOp(arith.CmpIPredicate.uge, step, index_const(stages)).result):
        wait(empty, slot, parity(step, stages, previous=True))
    return slot


@contextmanager
def only_if(condition: ir.Value):
    """Ops built inside run only where `condition` holds: an scf.if rather than the ops'
    own predicates, which LLVM may fold into a constant `@0` guard that ptxas rejects."""
    branch = scf.IfOp(condition)
    with ir.InsertionPoint(branch.then_block):
        yield
        scf.YieldOp([])


def aligned_dynamic_shared(size: int) -> ir.Value:
    """`size` bytes of the dynamic shared memory from its first 1024-byte boundary (the
    swizzled TMA tiles and the wgmma descriptors assume that alignment); the launch asks
    for size + 1024."""
    i8 = ir.IntegerType.get_signless(8)
    dynamic = ir.ShapedType.get_dynamic_size()
    raw = gpu.dynamic_shared_memory(shared((dynamic,), i8))
    address = memref.ExtractAlignedPointerAsIndexOp(raw).result
    pad = arith.RemUIOp(arith.SubIOp(index_const(SWIZZLE_PERIOD), arith.RemUIOp(
        address, index_const(SWIZZLE_PERIOD)).result).result,
        index_const(SWIZZLE_PERIOD)).result
    return memref.ViewOp(shared((size,), i8), raw, pad, []).result


def barrier_group(count: int) -> ir.Value:
    return nvgpu.mbarrier_create(ir.Type.parse(
        "!nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, "
        f"num_barriers = {count}>"))


# ------------------------------------------------------------------ wgmma as inline PTX

def _i64(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(64), value).result


def descriptor_base(ring: ir.Value, box_rows: int) -> ir.Value:
    """The wgmma matrix descriptor (i64) of the 128-byte swizzled tile at byte 0 of
    `ring` whose TMA boxes have `box_rows` rows; tiles at byte offset o of the ring add
    o >> 4 (`at`). Fields: start address >> 4 (bits 0-13), leading-dimension byte offset
    >> 4 (16-29: the stride between boxes, what an MN-major operand steps by every 64
    columns), stride-dimension byte offset >> 4 (32-45: 8 rows of 128 bytes), 128-byte
    swizzle (62-63 = 1). Shared addresses stay below 2^18, so the start never carries."""
    i64 = ir.IntegerType.get_signless(64)
    address = arith.IndexCastOp(i64, memref.ExtractAlignedPointerAsIndexOp(ring).result).result
    start = arith.AndIOp(arith.ShRUIOp(address, _i64(4)).result, _i64(0x3FFF)).result
    fields = ((box_rows * SWIZZLE_BYTES >> 4) << 16) | ((SWIZZLE_PERIOD >> 4) << 32) | (1 << 62)
    return arith.OrIOp(start, _i64(fields)).result


def at(descriptor: ir.Value, byte_offset: int) -> ir.Value:
    assert byte_offset % 16 == 0, byte_offset
    return descriptor if byte_offset == 0 else \
        arith.AddIOp(descriptor, _i64(byte_offset >> 4)).result


def _struct(count: int, element: str) -> ir.Type:
    return ir.Type.parse(f"!llvm.struct<({', '.join([element] * count)})>")


def _unpack(struct: ir.Value, count: int, element: ir.Type) -> list:
    return [llvm.ExtractValueOp(element, struct, [n]).result for n in range(count)]


def _asm(text: str, operands: list = (), constraints: str = "") -> None:
    """Inline PTX `text` with no results (a fence, a barrier, a commit)."""
    llvm.InlineAsmOp(None, list(operands), text, constraints, has_side_effects=True)


def _tied_asm(text: str, values: list, extra: list = (), extra_constraints: str = "") -> list:
    """Inline PTX `text` whose first operands $0.. are `values` read and written in place
    (f32 or i32 values), then `extra` inputs; returns the values after it."""
    kinds = [("f", "f32") if isinstance(v.type, ir.F32Type) else ("r", "i32") for v in values]
    outputs = ",".join(f"={k}" for k, _ in kinds)
    tied = ",".join(str(n) for n in range(len(values)))
    constraints = ",".join(c for c in (outputs, tied, extra_constraints) if c)
    if not values:
        _asm(text, extra, constraints)
        return []
    element_names = [name for _, name in kinds]
    struct_type = ir.Type.parse(f"!llvm.struct<({', '.join(element_names)})>")
    op = llvm.InlineAsmOp(struct_type, list(values) + list(extra), text, constraints,
                          has_side_effects=True)
    return [llvm.ExtractValueOp(v.type, op.result, [n]).result for n, v in enumerate(values)]


def fence(values: list) -> list:
    """wgmma.fence: the register writes of `values` (accumulators, A fragments) come
    before the wgmmas that follow."""
    return _tied_asm("wgmma.fence.sync.aligned;", values)


def commit() -> None:
    _asm("wgmma.commit_group.sync.aligned;")


def wait_group(pending: int, values: list) -> list:
    """wgmma.wait_group `pending`: `values` (the accumulators of the groups it waits for)
    are final after it."""
    return _tied_asm(f"wgmma.wait_group.sync.aligned {pending};", values)


def _operand_list(first: int, count: int) -> str:
    return "{" + ", ".join(f"${n}" for n in range(first, first + count)) + "}"


def mma(acc: list, a, b_desc: ir.Value, n: int, element: str, trans_b: bool,
        accumulate: bool = True, trans_a: bool = False) -> list:
    """One wgmma.mma_async m64 n{n} (f32 accumulators `acc`, n / 2 of them; None when
    `accumulate` is False: D = A B) over 32 bytes of k: k16 of f16 / bf16, k8 of
    `element` "tf32" (f32 values whose low 13 mantissa bits the tensor cores ignore).
    `a`: A's descriptor (an i64 value; K-major in shared memory) or its four registers
    (i32 values, two `element`s each: mma.sync m16n8k16's A layout per warp). A in
    shared memory: K-major, or MN-major with `trans_a`. B: K-major, or MN-major with
    `trans_b`. TF32 has no MN-major mode: both operands K-major, A from shared memory."""
    tf32 = element == "tf32"
    assert not (tf32 and (trans_a or trans_b or isinstance(a, (list, tuple)))), \
        "wgmma reads TF32 operands K-major, from shared memory"
    count = n // 2
    f32 = ir.F32Type.get()
    from_registers = isinstance(a, (list, tuple))
    if accumulate:
        operands = list(acc)
        constraints = [",".join("=f" for _ in range(count)),
                       ",".join(str(i) for i in range(count))]
    else:
        operands, constraints = [], [",".join("=f" for _ in range(count))]
    first = count + len(operands)  # the index of the first operand after D
    if from_registers:
        a_text = _operand_list(first, 4)
        operands += list(a)
        constraints.append("r,r,r,r")
        b_index = first + 4
        modes = f"1, 1, {int(trans_b)}"
    else:
        a_text = f"${first}"
        operands.append(a)
        constraints.append("l")
        b_index = first + 1
        modes = "1, 1" if tf32 else f"1, 1, {int(trans_a)}, {int(trans_b)}"
    operands += [b_desc, arith.ConstantOp(ir.IntegerType.get_signless(32),
                                          int(accumulate)).result]
    constraints.append("l,r")  # scale-d: D = A B + D, or A B
    text = ("{ .reg .pred p; " + f"setp.ne.b32 p, ${b_index + 1}, 0; "
            f"wgmma.mma_async.sync.aligned.m64n{n}k{8 if tf32 else 16}.f32.{element}.{element} "
            f"{_operand_list(0, count)}, {a_text}, ${b_index}, p, {modes}; }}")
    op = llvm.InlineAsmOp(_struct(count, "f32"), operands, text, ",".join(constraints),
                          has_side_effects=True)
    return _unpack(op.result, count, f32)


# ------------------------------------------------------------------ TMA stores

def warpgroup_barrier(warpgroup: ir.Value) -> None:
    """bar.sync on named barrier 1 + warpgroup for its 128 threads (0 is the block's)."""
    i32 = ir.IntegerType.get_signless(32)
    barrier = arith.IndexCastOp(i32, arith.AddIOp(warpgroup, index_const(1)).result).result
    _asm("bar.sync $0, 128;", [barrier], "r")


def fence_shared_for_async() -> None:
    """This thread's shared-memory writes become visible to the copy engine (a TMA store
    that reads them next): fence.proxy.async.shared::cta."""
    _asm("fence.proxy.async.shared::cta;")


def commit_stores() -> None:
    """The TMA stores issued since the last commit form a bulk group."""
    _asm("cp.async.bulk.commit_group;")


def wait_stores(pending: int, read_only: bool) -> None:
    """At most `pending` of this thread's bulk groups still running; `read_only`: only
    their reads of shared memory must be done (the buffer can be written again)."""
    _asm(f"cp.async.bulk.wait_group{'.read' if read_only else ''} {pending};")


def swizzled(row: ir.Value, byte_in_row: ir.Value) -> ir.Value:
    """The byte offset of (row, byte) in a 1024-byte-aligned tile of 128-byte rows laid
    out with the 128-byte swizzle (what TMA reads and writes): 16-byte chunk c of row r
    sits at chunk c ^ (r % 8)."""
    chunk = arith.DivUIOp(byte_in_row, index_const(16)).result
    within = arith.RemUIOp(byte_in_row, index_const(16)).result
    moved = arith.XOrIOp(chunk, arith.RemUIOp(row, index_const(8)).result).result
    return arith.AddIOp(arith.MulIOp(row, index_const(SWIZZLE_BYTES)).result, arith.AddIOp(
        arith.MulIOp(moved, index_const(16)).result, within).result).result


def tma_rows(lengths: list, k, elements: int) -> ir.Value | None:
    """On the host, for a GEMM of run-time sizes: whether the rows TMA copies (of
    `lengths` elements: N for B and C, K for A, ...) are multiples of `elements`
    (TMA_ROW_BYTES bytes of the type), and k > 0 (a tile needs a k step); None where
    every size is static (the strategy checked them)."""
    tests = []
    for size in lengths:
        if not isinstance(size, int):
            rest = arith.RemUIOp(size, index_const(elements)).result
            tests.append(arith.CmpIOp(arith.CmpIPredicate.eq, rest, index_const(0)).result)
    if not isinstance(k, int):
        tests.append(arith.CmpIOp(arith.CmpIPredicate.ugt, k, index_const(0)).result)
    if not tests:
        return None
    when = tests[0]
    for test in tests[1:]:
        when = arith.AndIOp(when, test).result
    return when
