"""Building blocks for GPU kernels made from one `linalg.generic` on memrefs.

A strategy (gpu_strategies/) decides how the iteration space maps to blocks and threads;
this module gives what every strategy needs: the kernel's signature (the memrefs and
scalars the generic reads from outside), the loop ranges, indexing maps applied to loop
variables, and the generic's scalar body cloned at a given point.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from mlir import ir
from mlir.dialects import arith, gpu, memref

from ....lowering.cir_ops import clone_op, defining_op

PARALLEL, REDUCTION = "parallel", "reduction"


def index_const(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def iterator_kinds(generic: ir.Operation) -> list[str]:
    kinds = []
    for attr in ir.ArrayAttr(generic.attributes["iterator_types"]):
        kinds.append(REDUCTION if "reduction" in str(attr) else PARALLEL)
    return kinds


def indexing_maps(generic: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(generic.attributes["indexing_maps"])]


def generic_operands(generic: ir.Operation) -> tuple[list[ir.Value], list[ir.Value]]:
    """(ins, outs) of a linalg.generic, split by its operandSegmentSizes."""
    sizes = list(ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"]))
    operands = list(generic.operands)
    return operands[:sizes[0]], operands[sizes[0]:sizes[0] + sizes[1]]


def swaps_last_two_axes(generic: ir.Operation) -> bool:
    """All loops parallel (at least two), one memref input read with the last two axes
    swapped (any leading ones in order) and one memref output written in order: a
    transposed copy's nest, whatever its body."""
    ins, outs = generic_operands(generic)
    if len(ins) != 1 or len(outs) != 1 or \
            not all(isinstance(v.type, ir.MemRefType) for v in ins + outs):
        return False
    kinds = iterator_kinds(generic)
    n = len(kinds)
    if n < 2 or any(k != PARALLEL for k in kinds):
        return False
    in_map, out_map = indexing_maps(generic)
    positions = lambda amap: [ir.AffineDimExpr(e).position
                              if isinstance(e, ir.AffineDimExpr) else None
                              for e in amap.results]
    order = list(range(n))
    return positions(out_map) == order and positions(in_map) == order[:-2] + [n - 1, n - 2]


def multiply_add_body(generic: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """(mulf, addf) when the generic's body is `out + a * b` of its two inputs (each
    possibly widened by extf first): a contraction's body, else None."""
    ins, outs = generic_operands(generic)
    if len(ins) != 2 or len(outs) != 1:
        return None
    block = generic.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    names = [op.name for op in ops]
    if names[-3:] != ["arith.mulf", "arith.addf", "linalg.yield"] or \
            any(n != "arith.extf" for n in names[:-3]):
        return None
    mul, add = ops[-3], ops[-2]
    inputs, out = list(block.arguments)[:2], block.arguments[2]
    widened = {op.results[0]: op.operands[0] for op in ops[:-3]}
    if not all(widened.get(v, v) in inputs for v in mul.operands):
        return None
    operands = list(add.operands)
    return (mul, add) if out in operands and mul.results[0] in operands else None


def loop_dims(generic: ir.Operation) -> tuple[list[int], list[int], list[int]]:
    """(trip count of each loop, the parallel loops, the reduction loops), in loop order."""
    kinds = iterator_kinds(generic)
    parallel = [d for d, k in enumerate(kinds) if k == PARALLEL]
    reduction = [d for d, k in enumerate(kinds) if k == REDUCTION]
    return loop_ranges(generic), parallel, reduction


def loop_ranges(generic: ir.Operation) -> list[int]:
    """Static trip count of each loop, read off an operand dimension indexed by it."""
    ins, outs = generic_operands(generic)
    maps = indexing_maps(generic)
    ranges: list[int | None] = [None] * maps[0].n_dims
    for value, amap in zip(ins + outs, maps):
        if not isinstance(value.type, ir.MemRefType):
            continue
        shape = ir.MemRefType(value.type).shape
        for axis, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                dim = ir.AffineDimExpr(expr).position
                if ranges[dim] is None and shape[axis] != ir.ShapedType.get_dynamic_size():
                    ranges[dim] = shape[axis]
    if any(r is None for r in ranges):
        raise ValueError("a loop of the generic has no static extent")
    return ranges


def eval_affine(expr: ir.AffineExpr, dims: Sequence[ir.Value]) -> ir.Value:
    """An affine expression of the loop variables, as index arithmetic."""
    if isinstance(expr, ir.AffineDimExpr):
        return dims[ir.AffineDimExpr(expr).position]
    if isinstance(expr, ir.AffineConstantExpr):
        return index_const(ir.AffineConstantExpr(expr).value)
    for kind, build in ((ir.AffineAddExpr, arith.AddIOp), (ir.AffineMulExpr, arith.MulIOp),
                        (ir.AffineModExpr, arith.RemUIOp),
                        (ir.AffineFloorDivExpr, arith.DivUIOp)):
        if isinstance(expr, kind):
            binary = kind(expr)
            return build(eval_affine(binary.lhs, dims), eval_affine(binary.rhs, dims)).result
    raise ValueError(f"unsupported affine expression {expr}")


def apply_map(amap: ir.AffineMap, dims: Sequence[ir.Value]) -> list[ir.Value]:
    return [eval_affine(e, dims) for e in amap.results]


def delinearize(linear: ir.Value, sizes: Sequence) -> list[ir.Value]:
    """Row-major coordinates of `linear` in a box of `sizes` (last coordinate fastest;
    numbers, or index values for run-time sizes)."""
    coords: list[ir.Value] = []
    rest = linear
    for i, size in enumerate(reversed(sizes)):
        if i == len(sizes) - 1:
            coords.append(rest)
            break
        size_v = size if isinstance(size, ir.Value) else index_const(size)
        coords.append(arith.RemUIOp(rest, size_v).result)
        rest = arith.DivUIOp(rest, size_v).result
    return list(reversed(coords))


@dataclass
class KernelSignature:
    """What a kernel made from `generic` takes: memrefs and scalars from outside it.

    Constants defined outside are cloned into the kernel instead of passed."""
    values: list[ir.Value] = field(default_factory=list)
    constants: list[ir.Operation] = field(default_factory=list)
    # scalars the host read from device memory (`memref.load` in the host function):
    # the kernel takes the memref and reads the element itself, so the host never waits
    host_loads: list[ir.Operation] = field(default_factory=list)

    @staticmethod
    def of(generic) -> "KernelSignature":
        """The signature of a kernel running `generic` (or a list of generics, fused)."""
        generics = generic if isinstance(generic, (list, tuple)) else [generic]
        sig = KernelSignature()
        seen: set = set()

        def visit(value: ir.Value) -> None:
            if value in seen:
                return
            seen.add(value)
            owner = defining_op(value)
            if owner is not None and owner.name == "arith.constant" \
                    and not isinstance(value.type, ir.ShapedType):
                sig.constants.append(owner)
            elif owner is not None and owner.name == "memref.load":
                sig.host_loads.append(owner)
                for operand in owner.operands:
                    visit(operand)
            else:
                sig.values.append(value)

        for member in generics:
            for value in member.operands:
                visit(value)
            for captured in _captured_values(member):
                visit(captured)
        return sig

    def types(self) -> list[ir.Type]:
        return [kernel_type(v.type) for v in self.values]


def kernel_type(type_: ir.Type) -> ir.Type:
    """How a value crosses into a kernel: i1 memrefs as i8 (one byte per bool, as numpy
    stores them; LLVM cannot address i1 memory)."""
    if isinstance(type_, ir.MemRefType) and _is_i1(ir.MemRefType(type_).element_type):
        memref_type = ir.MemRefType(type_)
        return ir.MemRefType.get(memref_type.shape, ir.IntegerType.get_signless(8),
                                 memref_type.layout, memref_type.memory_space)
    return type_


def _is_i1(type_: ir.Type) -> bool:
    return isinstance(type_, ir.IntegerType) and ir.IntegerType(type_).width == 1


def _captured_values(generic: ir.Operation) -> list[ir.Value]:
    """Values the generic's region uses but does not define."""
    inside: set = set()
    used: list[ir.Value] = []

    def walk(region: ir.Region) -> None:
        for block in region.blocks:
            for arg in block.arguments:
                inside.add(arg)
            for op in block.operations:
                for operand in op.operands:
                    if operand not in inside and operand not in used:
                        used.append(operand)
                for result in op.results:
                    inside.add(result)
                for inner in op.regions:
                    walk(inner)

    walk(generic.regions[0])
    return [v for v in used if v not in inside]


class KernelScope:
    """Inside a kernel being built: maps outer values to kernel values and clones ops."""

    def __init__(self, signature: KernelSignature, func: ir.Operation):
        block = func.regions[0].blocks[0]
        self.mapping: dict = dict(zip(signature.values, block.arguments))
        for const in signature.constants:
            self.mapping[const.results[0]] = clone_op(const, []).results[0]
        for host_load in signature.host_loads:
            memref_value, *indices = host_load.operands
            self.mapping[host_load.results[0]] = self.load(
                memref_value, [self.mapping[i] for i in indices])

    def value(self, outer: ir.Value) -> ir.Value:
        return self.mapping[outer]

    def load(self, outer: ir.Value, indices: Sequence[ir.Value]) -> ir.Value:
        """Element of the outer memref `outer` at `indices`, in the outer element type."""
        loaded = load(self.mapping[outer], indices)
        if _is_i1(ir.MemRefType(outer.type).element_type):
            return arith.TruncIOp(ir.IntegerType.get_signless(1), loaded).result
        return loaded

    def store(self, value: ir.Value, outer: ir.Value, indices: Sequence[ir.Value]) -> None:
        if _is_i1(ir.MemRefType(outer.type).element_type):
            value = arith.ExtUIOp(ir.IntegerType.get_signless(8), value).result
        store(value, self.mapping[outer], indices)

    def clone_body(self, generic: ir.Operation, block_values: Sequence[ir.Value],
                   index_of: Callable[[int], ir.Value], known: dict | None = None
                   ) -> list[ir.Value]:
        """The generic's scalar body at one point: its block arguments bound to
        `block_values`, `linalg.index d` to `index_of(d)`, and the ops whose results are
        in `known` not cloned (their values are those); returns the yielded values."""
        local = self.clone_ops(generic, block_values, index_of, known=known)
        yield_op = list(generic.regions[0].blocks[0].operations)[-1].operation
        return [local[v] for v in yield_op.operands]

    def clone_ops(self, generic: ir.Operation, block_values: Sequence[ir.Value],
                  index_of: Callable[[int], ir.Value], skip: Sequence[ir.Operation] = (),
                  known: dict | None = None) -> dict:
        """Clone the body's ops (all but those in `skip`, those whose results `known`
        gives, and the yield); returns the value map."""
        local = dict(self.mapping)
        local.update(known or {})
        block = generic.regions[0].blocks[0]
        for arg, value in zip(block.arguments, block_values):
            if value is not None:
                local[arg] = value
        for op in block.operations:
            op = op.operation
            if op.name == "linalg.yield" or any(op == other for other in skip) or \
                    known and len(op.results) and all(r in known for r in op.results):
                continue
            self._clone(op, local, index_of)
        return local

    def clone_slice(self, ops: Sequence[ir.Operation], bound: dict,
                    index_of: Callable[[int], ir.Value], known: dict | None = None) -> dict:
        """Clone `ops` (part of a body, in body order, e.g. a `backward_slice`) on the
        values of `known` (a map an earlier clone returned, else the kernel's) and `bound`
        (block arguments -> values); returns the extended value map."""
        local = dict(self.mapping if known is None else known)
        local.update(bound)
        for op in ops:
            self._clone(op, local, index_of)
        return local

    def _clone(self, op: ir.Operation, local: dict, index_of: Callable[[int], ir.Value]):
        if op.name == "linalg.index":
            local[op.results[0]] = index_of(ir.IntegerAttr(op.attributes["dim"]).value)
            return
        if len(op.regions):  # scf loops and ifs, an atomic's update: cloned inside out
            self._clone_with_regions(op, local, index_of)
            return
        if op.name == "memref.load" and op.operands[0] in self.mapping:
            # a gather from a memref the kernel takes as an argument
            local[op.results[0]] = self.load(op.operands[0],
                                             [local[v] for v in list(op.operands)[1:]])
            return
        clone = clone_op(op, [local[v] for v in op.operands])
        for old, new in zip(op.results, clone.results):
            local[old] = new


    def _clone_with_regions(self, op: ir.Operation, local: dict,
                            index_of: Callable[[int], ir.Value]) -> None:
        clone = ir.Operation.create(
            op.name, results=[r.type for r in op.results],
            operands=[local[v] for v in op.operands],
            attributes={k: op.attributes[k] for k in op.attributes}, regions=len(op.regions),
            loc=op.location)
        for region, into in zip(op.regions, clone.regions):
            for block in region.blocks:
                new_block = into.blocks.append(*[a.type for a in block.arguments])
                for arg, new_arg in zip(block.arguments, new_block.arguments):
                    local[arg] = new_arg
                with ir.InsertionPoint(new_block):
                    for inner in block.operations:
                        self._clone(inner.operation, local, index_of)
        for old, new in zip(op.results, clone.results):
            local[old] = new


def new_kernel(gpu_module: ir.Operation, name: str, arg_types: Sequence[ir.Type],
               block_size: Sequence[int]) -> ir.Operation:
    """An empty `gpu.func` kernel (entry block, no terminator yet) in `gpu_module`."""
    with ir.InsertionPoint(gpu_module.regions[0].blocks[0]):
        func = gpu.GPUFuncOp(ir.TypeAttr.get(ir.FunctionType.get(list(arg_types), [])),
                             sym_name=name, kernel=True,
                             known_block_size=list(block_size) + [1] * (3 - len(block_size)))
    func.regions[0].blocks.append(*arg_types)
    return func


def identity_layout(type_: ir.Type) -> bool:
    """A memref whose rows are as long as its last size (row-major, no gaps), whatever
    its sizes: a view with run-time strides may have longer rows."""
    memref_type = ir.MemRefType(type_)
    layout = memref_type.layout
    return isinstance(layout, ir.AffineMapAttr) and \
        layout.value == ir.AffineMap.get_identity(memref_type.rank)


def dense_row_major(type_: ir.Type) -> bool:
    """A memref type whose strides are a fresh buffer's of its shape: row-major, no
    gaps (its leading axes collapse into rows; a copy of it is one memcpy). The offset
    is not looked at."""
    memref_type = ir.MemRefType(type_)
    strides, _ = memref_type.get_strides_and_offset()
    expected, step = [], 1
    for extent in reversed(memref_type.shape):
        expected.append(step)
        step *= extent
    return list(strides) == expected[::-1]


def _between(first: ir.Operation, second: ir.Operation) -> list | None:
    """The ops strictly between `first` and `second` in their block, or None when
    `second` does not come after `first` there (one walk over the block)."""
    ops = [op.operation for op in first.operation.block.operations]
    start = ops.index(first.operation)
    stop = next((i for i in range(start + 1, len(ops)) if ops[i] == second.operation), None)
    return None if stop is None else ops[start + 1:stop]


def follows(first: ir.Operation, second: ir.Operation) -> bool:
    """`second` comes after `first` in one block with only allocations and constants
    between them (nothing else can see the memory in between)."""
    between = _between(first, second)
    return between is not None and \
        all(op.name in ("memref.alloc", "arith.constant") for op in between)


def load(buffer: ir.Value, indices: Sequence[ir.Value]) -> ir.Value:
    return memref.LoadOp(buffer, list(indices)).result


def store(value: ir.Value, buffer: ir.Value, indices: Sequence[ir.Value]) -> None:
    memref.StoreOp(value, buffer, list(indices))


@dataclass
class Group:
    """C filled with a constant, then the product accumulating into it: one kernel whose
    accumulators start from the constant, so C is neither filled nor read (the GEMM
    strategies' groups: matmul_wgmma, matvec, matmul). matmul_wgmma's may have no fill (initial
    None: C is read), may read A or B from the source of a transposed copy of it
    (strategies/transposed_copies.py) and may end with an epilogue (epilogue.py). A
    reduction of several outputs (pointwise's) takes their fills, all of one constant:
    `fill` and `other_fills`."""
    fill: ir.Operation | None
    product: ir.Operation
    initial: float | None
    epilogue: object = None  # an epilogue.Epilogue
    a_transposed: ir.Operation | None = None  # the copy making A, read in place instead
    other_fills: tuple = ()  # the fills of a product's other outputs
    b_transposed: ir.Operation | None = None  # the copy making B, read in place instead

    def __iter__(self):
        members = (self.a_transposed, self.b_transposed, self.fill, *self.other_fills,
                   self.product,
                   self.epilogue.generic if self.epilogue is not None else None)
        return iter(m for m in members if m is not None)

    @property
    def operands(self):
        """The product's: a group's tuning problem is its product's (tuning.problem_of)."""
        return self.product.operands


def filled_products(generics: list, takes: Callable[[ir.Operation], bool]) -> list[Group]:
    """Each product that `takes` accepts whose outputs a constant fill wrote last (one
    constant for all of them), with nothing between them touching those buffers, as a
    Group (the fill may come earlier: one-shot bufferization puts the fills of equal
    zero tensors together)."""
    groups, used = [], set()
    for at, product in enumerate(generics):
        if not takes(product):
            continue
        fills = [_last_fill(generics[:at], product, target, used)
                 for target in generic_operands(product)[1]]
        if any(f is None for f in fills) or len({initial for _, initial in fills}) != 1:
            continue
        (first, initial), *others = fills
        groups.append(Group(first, product, initial, other_fills=tuple(f for f, _ in others)))
        used.update(id(f) for f, _ in fills)
    return groups


def _last_fill(before: list, product: ir.Operation, target: ir.Value, used: set):
    """(the constant fill that wrote `target` last before `product`, its constant), or
    None where that generic is no such fill, is taken, or something uses `target`
    between them."""
    for fill in reversed(before):
        if target not in generic_operands(fill)[1]:
            continue  # another buffer's generic: untouched_between decides
        initial = constant_fill(fill)
        if initial is not None and id(fill) not in used and \
                untouched_between(fill, product, target):
            return fill, initial
        return None
    return None


def untouched_between(first: ir.Operation, second: ir.Operation, buffer: ir.Value) -> bool:
    """`second` comes after `first` in one block, and no op between them (or inside
    one) uses `buffer`: nothing can see it change in between."""
    block = first.operation.block
    users = set()
    for use in buffer.uses:
        owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        while owner is not None and owner.block != block:  # the op of `block` it is in
            owner = owner.parent
        if owner is not None:
            users.add(owner)
    between = _between(first, second)
    return between is not None and not any(op in users for op in between)


def constant_fill(generic: ir.Operation):
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


def fill_value(element: ir.Type, value: float) -> ir.Value:
    """constant_fill's constant as a value of the (float) `element` type, in a kernel."""
    return arith.ConstantOp(element, ir.FloatAttr.get(element, value)).result
