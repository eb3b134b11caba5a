"""linalg-to-gpu-kernels: outline each linalg.generic on memrefs into a GPU kernel.

Runs after bufferization. First, the generics of each attention (attention_lowering.py)
become one flash-attention kernel (on tensor cores for f16: attention_tensor_core); on
sm_90a a constant fill of C and the product that accumulates into it become one
`matmul_wgmma` kernel; runs of consecutive generics over
the same rows become one `row_fused` kernel each; then every other `linalg.generic` in a host function becomes
one `gpu.func` in `gpu.module @zynml_kernels`, built by the first strategy that matches
it (gpu_strategies/). Strided `memref.copy`s become copy generics first. Each generic (or
run) is replaced by the `gpu.launch_func` that runs it:

    linalg.generic {...} ins(%x : memref<33x100xf32>) outs(%y : memref<33xf32>) {...}
  becomes
    gpu.launch_func @zynml_kernels::@k0_row_reduce blocks in (%c33, %c1, %c1)
        threads in (%c128, %c1, %c1) args(%x : memref<33x100xf32>, %y : memref<33xf32>)
        {zynml.strategy = "row_reduce"}

A kernel that loops over its work (grid-stride) also carries
`zynml.blocks_per_multiprocessor = K`: the run time launches at most K blocks per
multiprocessor of the device.

What remains on the host (allocations, views, loops, launches) is what
zynml/backend/cuda/launch_plan.py turns into a launch plan.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, builtin, gpu, linalg, memref, nvgpu

from ..lowering.cir_ops import ops_in
from ..backend.cuda.strategies.kernel_builder import index_const, kernel_type
from ..backend.cuda.strategies import (BLOCKS_PER_MULTIPROCESSOR_ATTR, TensorMap, attention, attention_simt_tiled,
                              attention_tensor_core, attention_wgmma, available, choose,
                              get_strategy, matmul_wgmma, row_fused)
from .pipeline import fail

NAME = "linalg-to-gpu-kernels"
DESCRIPTION = "Outline each linalg.generic on memrefs into a gpu.func chosen by strategy"
KERNEL_MODULE = "zynml_kernels"
STRATEGY_ATTR = "zynml.strategy"


@dataclass
class Options:
    # Use only this strategy (e.g. "pointwise"); empty: the best that matches.
    strategy: str = ""
    # The GPU the kernels are for: strategies that need its instructions (wgmma) ask.
    chip: str = "sm_90a"


def run(module: ir.Operation, options: Options) -> None:
    for op in list(_host_ops(module)):
        if op.name == "memref.copy" and not (_contiguous(op.operands[0].type) and
                                             _contiguous(op.operands[1].type)):
            _copy_as_generic(op)
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
    forced = None
    if options.strategy:
        try:
            forced = get_strategy(options.strategy)
        except KeyError as err:
            raise fail(module.location, str(err.args[0]))
        if not available(forced, options.chip):
            raise fail(module.location, f"GPU strategy '{forced.NAME}' needs "
                       f"{' or '.join(forced.REQUIRES_CHIPS)}; the target is {options.chip}")
    module.attributes["gpu.container_module"] = ir.UnitAttr.get()
    kernels, number = _kernel_module(module)
    if forced is None:  # runs of generics one kernel takes: attention, fill + matmul, rows
        for group_strategy in (attention_wgmma, attention_tensor_core, attention_simt_tiled,
                               attention, matmul_wgmma, row_fused):
            if not available(group_strategy, options.chip):
                continue
            for group in group_strategy.find_groups(generics):
                launch = group_strategy.build(group, kernels,
                                              f"k{number}_{group_strategy.NAME}")
                _replace_with_launch(list(group), launch, group_strategy.NAME)
                number += 1
            generics = [op for op in _host_ops(module) if op.name == "linalg.generic"]
    for number, generic in enumerate(generics, start=number):
        if any(not isinstance(v.type, ir.MemRefType) and isinstance(v.type, ir.ShapedType)
               for v in generic.operands):
            raise fail(generic.location, "linalg-to-gpu-kernels needs a bufferized module")
        strategy = forced or choose(generic, options.chip)
        if forced is not None and not forced.matches(generic):
            raise fail(generic.location, f"GPU strategy '{forced.NAME}' does not fit this "
                       "loop nest")
        try:
            launch = strategy.build(generic, kernels, f"k{number}_{strategy.NAME}")
        except ValueError as err:
            raise fail(generic.location, f"cannot map this loop nest to GPU threads: {err}")
        _replace_with_launch([generic], launch, strategy.NAME)
    # Host reads of device memory that kernels now do themselves.
    for op in list(_host_ops(module)):
        if op.name == "memref.load" and not any(True for _ in op.results[0].uses):
            op.erase()


def _host_ops(module: ir.Operation):
    """Ops of the host functions in order, nested regions included; GPU code and the
    insides of generics are skipped."""
    return ops_in(module, descend=lambda op: op.name not in ("gpu.module", "linalg.generic"))


def _replace_with_launch(generics: list, launch, strategy: str) -> None:
    """Launch `launch` where the last of `generics` was; erase them, and the buffers only
    they used (temporaries a fused kernel keeps on chip)."""
    last = generics[-1]
    with ir.InsertionPoint(last), last.location:
        grid = [index_const(n) for n in launch.grid]
        block = [index_const(n) for n in launch.block]
        operands = [_as_kernel_type(v) for v in launch.operands]
        shared = arith.ConstantOp(ir.IntegerType.get_signless(32),
                                  launch.shared_bytes).result if launch.shared_bytes else None
        op = gpu.LaunchFuncOp([KERNEL_MODULE, launch.kernel], grid, block,
                              kernel_operands=operands, dynamic_shared_memory_size=shared)
        op.attributes[STRATEGY_ATTR] = ir.StringAttr.get(strategy)
        if launch.blocks_per_multiprocessor:
            op.attributes[BLOCKS_PER_MULTIPROCESSOR_ATTR] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), launch.blocks_per_multiprocessor)
    buffers = {v for generic in generics for v in generic.operands}
    for generic in generics:
        generic.erase()
    for value in buffers:
        if isinstance(value, ir.OpResult) and \
                value.owner.operation.name == "memref.alloc" and \
                not any(True for _ in value.uses):
            value.owner.operation.erase()


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


def _contiguous(type_: ir.Type) -> bool:
    """Row-major and dense: a copy of it is one memcpy (the launch plan's "copy")."""
    memref_type = ir.MemRefType(type_)
    strides, _ = memref_type.get_strides_and_offset()
    expected, step = [], 1
    for extent in reversed(memref_type.shape):
        expected.append(step)
        step *= extent
    return list(strides) == list(reversed(expected))


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


def _as_kernel_type(value) -> ir.Value:
    """Host values whose kernel type differs (i1 memrefs as i8) get a host-side cast; the
    launch plan reads it as a view of the same bytes. A TensorMap becomes the host's
    nvgpu.tma.create_descriptor of its buffer (the launch plan's "tensor_map"), passed as
    the pointer kernels take it as."""
    if isinstance(value, TensorMap):
        source = ir.MemRefType(value.source.type)
        unranked = memref.CastOp(ir.UnrankedMemRefType.get(source.element_type,
                                                           source.memory_space),
                                 value.source).result
        descriptor = nvgpu.TmaCreateDescriptorOp(value.type, unranked,
                                                 [index_const(b) for b in value.box]).result
        return builtin.UnrealizedConversionCastOp([ir.Type.parse("!llvm.ptr")],
                                                  [descriptor]).results[0]
    wanted = kernel_type(value.type)
    if wanted == value.type:
        return value
    return builtin.UnrealizedConversionCastOp([wanted], [value]).results[0]
