"""linalg-to-gpu-kernels: outline each linalg.generic on memrefs into a GPU kernel.

Runs after bufferization. The strategies (zynml/backend/cuda/strategies/, tried in
REGISTRY's order) decide how: first the group strategies take the runs of generics that
one kernel computes (an attention's generics, a constant fill and the product
accumulating into it, consecutive generics over the same rows); then every other
`linalg.generic` of a host function goes to the first single strategy that matches it.
Each kernel is one `gpu.func` in `gpu.module @zynml_kernels`; strided `memref.copy`s
become copy generics first. Each generic (or run) is replaced by the launch that runs it:

    linalg.generic {...} ins(%x : memref<33x100xf32>) outs(%y : memref<33xf32>) {...}
  becomes
    gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in (%c33, %c1, %c1)
        threads in (%c128, %c1, %c1) args(%x : memref<33x100xf32>, %y : memref<33xf32>)
        {zynml.strategy = "row_reduce"}

Options: `chip` (the target, whose instructions and shared memory the strategies check),
`strategy` (use only this one), `params` (strategy parameters: strategies/tuning.py),
`deterministic` (scatters as sorted segments instead of atomics), `tf32` (f32 products
on TF32 tensor cores where the chip has wgmma: their B read K-major, transposed by a
kernel of its own where it is not: zynml/backend/cuda/tf32_operands.py).
A kernel that loops over its work (grid-stride) also carries
`zynml.blocks_per_multiprocessor = K`: the run time launches at most K blocks per
multiprocessor of the device.

Run-time sizes (`?` dimensions: a dynamic or shape-less compile) go to the strategies
that take them (`DYNAMIC`: pointwise, row_reduce, row_fused, matmul_wgmma, matmul,
implicit_gemm, attention, attention_simt_tiled, attention_wgmma; strategies/extents.py):
kernels read their extents from their memref arguments and grids are host arithmetic on
memref.dim of the operands. Subviews that are all of their source
fold into it first. A kernel that needs something of the sizes that only run time knows
(TMA's 16-byte rows) comes with the host's test of it (`Launch.when`): the launch runs
under `scf.if`, and the else branch runs the same generics as the strategies after it
build them.

What remains on the host (allocations, views, loops, launches) is what
zynml/backend/cuda/launch_plan.py turns into a launch plan.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, builtin, gpu, linalg, memref, nvgpu, scf

from ..backend.cuda.strategies import (BLOCKS_PER_MULTIPROCESSOR_ATTR, PROBLEM_ATTR,
                                      STRATEGY_ATTR, TensorMap, entry_of,
                                      get_strategy, group_strategies, single_strategies,
                                      single_takes, takes_dynamic)
from ..backend.cuda.strategies.extents import (as_index, fold_whole_subviews,
                                               has_dynamic_extent)
from ..backend.cuda.strategies.kernel_builder import dense_row_major, index_const, kernel_type
from ..backend.cuda.strategies.tuning import TuningError, parse, problem_of
from ..backend.cuda.device_offsets import at_device_offset, sink_device_offsets
from ..backend.cuda.inplace import write_in_place
from ..backend.cuda.scatter import SCATTER_ATTR, expand_scatter_calls
from ..backend.cuda.target import CudaTarget, DEFAULT_CHIP
from ..backend.cuda.tf32_operands import read_b_k_major_for_tf32
from ..lowering.cir_ops import ops_in
from .pipeline import fail

NAME = "linalg-to-gpu-kernels"
KERNEL_MODULE = "zynml_kernels"


@dataclass
class Options:
    # Use only this strategy (e.g. "pointwise", "attention_wgmma"); empty: the best that
    # matches each kernel.
    strategy: str = ""
    # The GPU the kernels are for (zynml/backend/cuda/target.py: CHIPS): strategies check
    # its instructions and shared memory.
    chip: str = DEFAULT_CHIP
    # Strategy parameters, `STRATEGY[@PROBLEM].FIELD=VALUE` joined by ';'
    # (zynml/backend/cuda/strategies/tuning.py).
    params: str = ""
    # Scatters whose float sums are the same bits run to run, in loop order (sorted
    # segments instead of atomics: zynml/backend/cuda/scatter.py).
    deterministic: bool = False
    # f32 matrix products on the tensor cores in TF32 (operands rounded to 10-bit
    # mantissas, as PyTorch's allow_tf32), where the chip has wgmma.
    tf32: bool = False


def run(module: ir.Operation, options: Options) -> None:
    try:
        target = CudaTarget(options.chip, params=options.params, tf32=options.tf32)
        parse(target.params)
    except (ValueError, TuningError) as err:
        raise fail(module.location, str(err))
    # x[ids[i]] += v: atomics, or sorted segments (zynml/backend/cuda/scatter.py)
    expand_scatter_calls(module, options.deterministic)
    write_in_place(module)  # `mut x` written in x's buffer where safe (cuda/inplace.py)
    for op in list(_host_ops(module)):
        if op.name == "memref.copy" and (
                not (dense_row_major(op.operands[0].type) and
                     dense_row_major(op.operands[1].type)) or
                any(at_device_offset(v) for v in op.operands)):
            _copy_as_generic(op)
    fold_whole_subviews(_host_ops(module))  # run-time sizes: slices that are the whole
    # TF32 products read B K-major (cuda/tf32_operands.py)
    read_b_k_major_for_tf32([op for op in _host_ops(module) if op.name == "linalg.generic"],
                            target)
    generics = [op for op in _host_ops(module) if op.name == "linalg.generic"]
    leftovers = [op for op in _host_ops(module)
                 if op.name.startswith("linalg.") and op.name not in ("linalg.generic",
                                                                      "linalg.yield",
                                                                      "linalg.index")]
    if leftovers:
        raise fail(leftovers[0].location, f"'{leftovers[0].name}' must be generalized "
                   "(run linalg-generalize-named-ops) before linalg-to-gpu-kernels")
    if not generics:
        return
    for generic in generics:  # before any strategy reads extents off the operands
        if any(not isinstance(v.type, ir.MemRefType) and isinstance(v.type, ir.ShapedType)
               for v in generic.operands):
            raise fail(generic.location, "linalg-to-gpu-kernels needs a bufferized module")
    groups, singles = group_strategies(target), single_strategies(target)
    if options.strategy:
        try:
            forced, entry = get_strategy(options.strategy), entry_of(options.strategy)
        except KeyError as err:
            raise fail(module.location, str(err.args[0]))
        if forced not in groups + singles:
            missing = sorted(set(forced.REQUIRES) - target.facts.features)
            raise fail(module.location, f"GPU strategy '{forced.NAME}' needs "
                       f"{', '.join(missing)}, which {target.chip} lacks")
        groups = [forced] if entry.groups else []
        singles = [forced] if entry.single else []
    module.attributes["gpu.container_module"] = ir.UnitAttr.get()
    kernels, first = _kernel_module(module)
    numbers = itertools.count(first)  # kernel k<N>_<strategy>, in the order built

    def build_single(generic: ir.Operation, skip=None) -> None:
        """`generic` as the first single strategy that takes it builds it: after `skip`
        in REGISTRY's order where `skip` is a single strategy (what a Launch's `when`
        leaves to the strategies after it: one before it would take the copy again, and
        two strategies whose launches both have a `when`, as implicit_gemm_mma's and
        implicit_gemm's, would hand it back and forth), else any but `skip`."""
        candidates = singles[singles.index(skip) + 1:] if skip in singles else \
            [s for s in singles if s is not skip]
        strategy = next((s for s in candidates if single_takes(s, generic, target)), None) \
            if SCATTER_ATTR not in generic.attributes else get_strategy("pointwise")
        if strategy is None:  # only when a strategy is forced: pointwise takes anything
            raise fail(generic.location, f"GPU strategy '{options.strategy}' does not fit "
                       "this loop nest")
        try:
            launch = strategy.build(generic, kernels, f"k{next(numbers)}_{strategy.NAME}",
                                    target)
        except ValueError as err:
            raise fail(generic.location, f"cannot map this loop nest to GPU threads: {err}")
        _replace_with_launch([generic], launch, strategy.NAME, problem_of(strategy, generic),
                             lambda g: build_single(g, skip=strategy))

    for group_strategy in groups:  # runs of generics one kernel takes: attention, rows
        for group in group_strategy.find_groups(
                [g for g in generics if SCATTER_ATTR not in g.attributes and
                 (takes_dynamic(group_strategy) or not has_dynamic_extent(g))], target):
            launch = group_strategy.build(group, kernels,
                                          f"k{next(numbers)}_{group_strategy.NAME}", target)
            _replace_with_launch(list(group), launch, group_strategy.NAME,
                                 problem_of(group_strategy, group),
                                 lambda g, skip=group_strategy: build_single(g, skip))
        generics = [op for op in _host_ops(module) if op.name == "linalg.generic"]
    for generic in generics:
        build_single(generic)
    # Views at offsets read from device memory: the kernels compute them (a decode
    # step's cache row at a position a graph replay reads in place).
    sink_device_offsets(list(_host_ops(module)), kernels)
    # Host reads of device memory that kernels now do themselves.
    for op in list(_host_ops(module)):
        if op.name == "memref.load" and not any(True for _ in op.results[0].uses):
            op.erase()


def _host_ops(module: ir.Operation):
    """Ops of the host functions in order, nested regions included; GPU code and the
    insides of generics are skipped."""
    return ops_in(module, descend=lambda op: op.name not in ("gpu.module", "linalg.generic"))


def _replace_with_launch(generics: list, launch, strategy: str, problem: str,
                         fallback) -> None:
    """Launch `launch` (or each of a list of Launches) where the last of `generics` was;
    erase them, and the buffers only they used (temporaries a fused kernel keeps on
    chip). A Launch with a `when` runs under `scf.if when`; its else branch holds its
    `otherwise` Launches (placed the same way), or copies of `generics`, each built by
    `fallback(copy)` (the strategies after this one)."""
    launches = launch if isinstance(launch, list) else [launch]
    _place(generics, generics[-1], launches, strategy, problem, fallback)
    buffers = {v for generic in generics for v in generic.operands}
    for generic in generics:
        generic.erase()
    for value in buffers:
        if isinstance(value, ir.OpResult) and \
                value.owner.operation.name == "memref.alloc" and \
                not any(True for _ in value.uses):
            value.owner.operation.erase()


def _place(generics: list, before: ir.Operation, launches: list, strategy: str,
           problem: str, fallback) -> None:
    """`launches` before `before`, under their first's `when` as _replace_with_launch
    says (none: nothing runs there)."""
    if not launches:
        return
    when = launches[0].when
    if when is None:
        for one in launches:  # several: in order
            _launch_before(before, one, strategy, problem)
        return
    with ir.InsertionPoint(before), before.location:
        branch = scf.IfOp(when, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        then_end = scf.YieldOp([]).operation
    with ir.InsertionPoint(branch.else_block):
        else_end = scf.YieldOp([]).operation
    for one in launches:
        _launch_before(then_end, one, strategy, problem)
    otherwise = launches[0].otherwise
    if otherwise is not None:
        _place(generics, else_end, otherwise, strategy, problem, fallback)
    else:
        with ir.InsertionPoint(else_end):
            copies = [generic.clone() for generic in generics]
    _allocate_in_branch(generics, branch.else_block)
    if otherwise is None:
        for copy in copies:
            fallback(copy)


def _allocate_in_branch(generics: list, branch: ir.Block) -> None:
    """Temporaries that only `generics` and the ops of an else `branch` use (a
    transposed copy's, a product's C that a fused epilogue never stores, a row
    kernel's temporary that only the slower kernel keeps in memory) are allocated where
    those ops run: the fused kernel keeps them on chip."""
    first = next(iter(branch.operations)).operation
    for op in [o for top in branch.operations for o in (top.operation, *ops_in(top.operation))]:
        for value in op.operands:
            owner = value.owner.operation if isinstance(value, ir.OpResult) else None
            if owner is not None and owner.name == "memref.alloc" and \
                    not _within(owner, branch) and \
                    all(any(use.owner == g for g in generics) or _within(use.owner, branch)
                        for use in value.uses):
                owner.move_before(first)


def _within(op, block: ir.Block) -> bool:
    """Whether `op` is in `block`, or nested in an op that is."""
    op = op.operation
    while op.parent is not None:  # (the module has no block to ask for)
        if op.block == block:
            return True
        op = op.parent.operation
    return False


def _launch_before(op: ir.Operation, launch, strategy: str, problem: str) -> None:
    with ir.InsertionPoint(op), op.location:
        grid = [as_index(n) for n in launch.grid]  # a value: computed from run-time sizes
        block = [index_const(n) for n in launch.block]
        operands = [_as_kernel_type(v) for v in launch.operands]
        shared = arith.ConstantOp(ir.IntegerType.get_signless(32),
                                  launch.shared_bytes).result if launch.shared_bytes else None
        op = gpu.LaunchFuncOp([KERNEL_MODULE, launch.kernel], grid, block,
                              kernel_operands=operands, dynamic_shared_memory_size=shared)
        op.attributes[STRATEGY_ATTR] = ir.StringAttr.get(strategy)
        op.attributes[PROBLEM_ATTR] = ir.StringAttr.get(problem)
        if launch.blocks_per_multiprocessor:
            op.attributes[BLOCKS_PER_MULTIPROCESSOR_ATTR] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), launch.blocks_per_multiprocessor)


def _kernel_module(module: ir.Operation):
    """`gpu.module @zynml_kernels` (made if absent) and the number of its next kernel."""
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "gpu.module" and \
                ir.StringAttr(op.attributes["sym_name"]).value == KERNEL_MODULE:
            count = sum(1 for k in op.regions[0].blocks[0].operations
                        if k.operation.name == "gpu.func")
            return op, count
    with ir.InsertionPoint(module.regions[0].blocks[0]):
        kernels = gpu.GPUModuleOp(KERNEL_MODULE)
    kernels.regions[0].blocks.append()
    return kernels.operation, 0


def _copy_as_generic(copy: ir.Operation) -> None:
    """A strided `memref.copy` (e.g. into a slice) -> an all-parallel copy generic."""
    source, target = copy.operands
    rank = ir.MemRefType(source.type).rank
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    with ir.InsertionPoint(copy), copy.location:
        generic = linalg.GenericOp([], [source], [target], ir.ArrayAttr.get([identity] * 2),
                                   ir.ArrayAttr.get([parallel] * rank))
        element = ir.MemRefType(source.type).element_type
        block = generic.regions[0].blocks.append(element, element)
        with ir.InsertionPoint(block):
            linalg.YieldOp([block.arguments[0]])
    copy.erase()


def _collapsed_type(type_: ir.Type, groups) -> ir.Type:
    """A dense memref type with each group of its axes made one (identity layout)."""
    memref_type = ir.MemRefType(type_)
    shape = [1] * len(groups)
    for g, axes in enumerate(groups):
        for axis in axes:
            shape[g] *= memref_type.shape[axis]
    return ir.MemRefType.get(shape, memref_type.element_type,
                             memory_space=memref_type.memory_space)


def _reassociation(groups) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, a) for a in axes])
                             for axes in groups])


def _as_kernel_type(value) -> ir.Value:
    """Host values whose kernel type differs (i1 memrefs as i8) get a host-side cast; the
    launch plan reads it as a view of the same bytes. A TensorMap becomes the host's
    nvgpu.tma.create_descriptor of its buffer (the launch plan's "tensor_map"), passed as
    the pointer kernels take it as."""
    if isinstance(value, TensorMap):
        viewed = value.source
        if value.collapse is not None:
            viewed = memref.CollapseShapeOp(_collapsed_type(viewed.type, value.collapse),
                                            viewed, _reassociation(value.collapse)).result
        source = ir.MemRefType(viewed.type)
        unranked = memref.CastOp(ir.UnrankedMemRefType.get(source.element_type,
                                                           source.memory_space),
                                 viewed).result
        descriptor = nvgpu.TmaCreateDescriptorOp(value.type, unranked,
                                                 [index_const(b) for b in value.box]).result
        return builtin.UnrealizedConversionCastOp([ir.Type.parse("!llvm.ptr")],
                                                  [descriptor]).results[0]
    wanted = kernel_type(value.type)
    if wanted == value.type:
        return value
    return builtin.UnrealizedConversionCastOp([wanted], [value]).results[0]
