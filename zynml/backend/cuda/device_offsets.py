"""Views at an offset read from device memory, computed by the kernels that use them.

A write at a run-time position (`k_cache[b, h, pos, e] = ...`, docs/language.md) is a
kernel writing a subview of the cache whose offset comes from `pos`. Where `pos` is a
number, the host computes the view. Where it is a 0-d array of the device (a decode
step's position, which a graph replay reads in place, zynml/kernels/decode.py), the host
would have to read the GPU's memory: the launch plan refuses that (launch_plan.py). So
the subview moves into the kernel, with the arithmetic of its offsets and the loads
they start from: the kernel gets the view's source and the 0-d buffers, and computes

    %p = memref.load %pos[]; ...; %v = memref.subview %cache[0, 0, %p', 0] ...

at its start, in place of the view it was given. A number computed from the same load
(the clamped position, which the kernel also reads `cos[pos, e]` at) moves the same way.
Only chains of integer arithmetic, constants, `memref.load` and `memref.dim` move;
anything else stays on the host.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import gpu

from ...lowering.cir_ops import defining_op

__all__ = ["sink_device_offsets", "at_device_offset"]

_MOVABLE = ("memref.load", "memref.dim")


def sink_device_offsets(host_ops: list[ir.Operation], kernel_module: ir.Operation) -> None:
    """Rewrite each launch in `host_ops` that is given a value computed from device
    memory (a subview at such an offset, or the offset itself as a number the kernel
    reads elsewhere: `cos[pos, e]`), and its kernel in `kernel_module`."""
    kernels = {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
               for op in kernel_module.regions[0].blocks[0].operations
               if op.operation.name == "gpu.func"}
    moved: list[ir.Operation] = []
    for launch in [op for op in host_ops if op.name == "gpu.launch_func"]:
        view = launch.opview
        if view.clusterSizeX is not None or view.asyncToken is not None:
            continue
        kernel = kernels[ir.SymbolRefAttr(launch.attributes["kernel"]).value[-1]]
        while (found := _device_operand(launch)) is not None:  # each rewrite: a new launch
            k, ops = found
            launch = _sink(launch, kernel, k, ops)
            moved += ops
    for op in reversed(moved):  # the host's copies, once no launch uses them
        if op.results and not any(True for r in op.results for _ in r.uses):
            op.erase()


def at_device_offset(value: ir.Value) -> bool:
    """Is `value` a view at an offset read from device memory? (A copy into one must be
    a kernel, which can compute the view: a plain copy's addresses are the host's.)"""
    subview = defining_op(value)
    return subview is not None and subview.name == "memref.subview" and \
        _device_chain(list(subview.operands)[1:]) is not None


def _device_operand(launch: ir.Operation):
    """(k, the ops that compute kernel operand k, in program order) for the first
    operand of `launch` computed from device memory; None when there is none."""
    for k, operand in enumerate(launch.opview.kernelOperands):
        op = defining_op(operand)
        if op is None:
            continue
        if op.name == "memref.subview":
            chain = _device_chain(list(op.operands)[1:])
            if chain is not None:
                return k, chain + [op]
        elif not isinstance(operand.type, ir.MemRefType):
            chain = _device_chain([operand])
            if chain is not None:
                return k, chain
    return None


def _device_chain(roots: list[ir.Value]) -> list[ir.Operation] | None:
    """The ops computing `roots`, in program order, when they are arithmetic on
    constants, loads and dims and include a load; else None."""
    chain, seen = [], set()

    def visit(value: ir.Value) -> bool:
        if isinstance(value.type, ir.MemRefType):
            return True  # a buffer: passed to the kernel as it is
        op = defining_op(value)
        if op is None:
            return False  # a number of the host function's: stays there
        if op in seen:
            return True
        if not (op.name.startswith("arith.") or op.name in _MOVABLE) or len(op.regions):
            return False
        seen.add(op)
        if not all(visit(v) for v in op.operands):
            return False
        chain.append(op)
        return True
    if not all(visit(v) for v in roots):
        return None
    return chain if any(op.name == "memref.load" for op in chain) else None


def _sink(launch: ir.Operation, kernel: ir.Operation, k: int,
          ops: list[ir.Operation]) -> ir.Operation:
    """`launch` with kernel operand k (the last of `ops`' results) replaced by the
    buffers `ops` read, and `kernel` computing it itself from them."""
    view = launch.opview
    operands = list(view.kernelOperands)
    entry = kernel.regions[0].blocks[0]
    # the buffers `ops` read: the kernel's argument where it is given one already (the
    # position, once k's view has moved in and v's follows), else a new argument
    mapping, buffers, inside = {}, [], set(ops)
    for op in ops:
        for value in op.operands:
            if isinstance(value.type, ir.MemRefType) and value not in mapping and \
                    defining_op(value) not in inside:
                given = [j for j, o in enumerate(operands) if o == value and j != k]
                if given:
                    mapping[value] = entry.arguments[given[0]]
                else:
                    buffers.append(value)
                    mapping[value] = entry.add_argument(value.type, kernel.location)
    first = list(entry.operations)[0]
    with ir.InsertionPoint(first):
        for op in ops:
            clone = op.clone()
            for i, value in enumerate(op.operands):
                clone.operands[i] = mapping.get(value, value)
            mapping[op.results[0]] = clone.results[0]
    entry.arguments[k].replace_all_uses_with(mapping[ops[-1].results[0]])
    entry.erase_argument(k)
    inputs = [a.type for a in entry.arguments]
    kernel.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, []))
    with ir.InsertionPoint(launch), launch.location:
        grid = [view.gridSizeX, view.gridSizeY, view.gridSizeZ]
        block = [view.blockSizeX, view.blockSizeY, view.blockSizeZ]
        new = gpu.LaunchFuncOp(
            list(ir.SymbolRefAttr(launch.attributes["kernel"]).value), grid, block,
            kernel_operands=operands[:k] + operands[k + 1:] + buffers,
            dynamic_shared_memory_size=view.dynamicSharedMemorySize)
    for i in range(len(launch.attributes)):  # the strategy, its problem, ...
        named = launch.attributes[i]
        if named.name not in new.operation.attributes:
            new.operation.attributes[named.name] = named.attr
    launch.erase()
    return new.operation
