"""Typed program -> a `cir` module: the arrow "typed AST -> cir".

Layout of the module (one per program and input signature):

    func.func @main(<inputs>) -> (<outputs>) attributes {zynml.inputs, zynml.outputs}
        sizes as index values (tensor.dim of the input that binds them, or constants),
        one "cir.compute" per compute block, `|>` builtins on scalar results, return
    func.func private @<name>_body(<inputs>, <captures>, <sizes>, %out) {cir.body}
        the loop nest as written (scf/arith/math + cir.load/store/yield)

Scalar inputs and scalar outputs cross the function boundary as rank-0 tensors. Compute
results are emitted with dynamic extents (`tensor<?xf32>`) and an `out_dims` attribute
naming the operands that hold them; `cir-shape-propagation` makes them static.
"""
from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import func, linalg, tensor

from . import scalar as S
from .body import BodyEmitter
from ..dialects.cir import (EQUAL_DIMS_ATTR, MAX_COMPUTE_INPUTS, MAX_COMPUTE_OUTPUTS,
                            MUTATED_ATTR)
from ..errors import ZynMLError
from ..limits import MAX_EXPRESSION_DEPTH, recursion_room
from ..frontend import ast
from ..frontend.symbols import CheckedProgram, Kernel, Step, is_tensor
from ..frontend.types import INDEX, ScalarType, concrete

__all__ = ["emit_cir"]


def _loc(node: ast.Node) -> ir.Location:
    loc = node.loc
    return ir.Location.file(loc.file.name, loc.line, loc.col)


# IREE cannot build a host-side tensor of i1 from a scalar: bool scalars cross as i8.
_BOOL_BOUNDARY = ScalarType("i8")


def _boundary_scalar(t: ScalarType) -> ScalarType:
    t = concrete(t)
    if t == INDEX:  # the ABI has no index type
        return ScalarType("i64")
    return _BOOL_BOUNDARY if t.is_bool else t


def _boundary_type(t: Any, by_value: bool = False) -> ir.Type:
    """How a program value crosses main's signature: tensors as they are, scalars rank-0
    (or as themselves, `by_value`: the native CUDA backend's scalar inputs given as
    numbers, which its kernels then take as parameters)."""
    if is_tensor(t):
        return S.tensor_type(t)
    if by_value:
        return S.mlir_type(_boundary_scalar(t))
    return ir.RankedTensorType.get([], S.mlir_type(_boundary_scalar(t)))


def _has_run_time_size(t: ir.Type) -> bool:
    return ir.ShapedType.get_dynamic_size() in ir.RankedTensorType(t).shape


def _ranked(v: ir.Value | ir.Type) -> bool:
    return ir.RankedTensorType(v if isinstance(v, ir.Type) else v.type).rank > 0


def _reshape_to_run_time_sizes(source: ir.Value, result_type: ir.Type,
                               extents: list[ir.Value]) -> ir.Value:
    """`reshape(t, [..])` with sizes known at run time: a collapse to one dimension and
    an expand, which bufferize to views that the native CUDA backend's launch plan
    keeps (a tensor.reshape's shape operand would be a host buffer it cannot fill).
    The source is cast to all-dynamic sizes first, so the collapse stays valid when
    cir-shape-propagation makes a compute's result static later."""
    dynamic = ir.ShapedType.get_dynamic_size()
    source_type = ir.RankedTensorType(source.type)
    result = ir.RankedTensorType(result_type)
    element = source_type.element_type
    flat = tensor.CastOp(ir.RankedTensorType.get([dynamic] * source_type.rank, element),
                         source).result
    if source_type.rank != 1:
        flat = tensor.CollapseShapeOp(ir.RankedTensorType.get([dynamic], element), flat,
                                      [list(range(source_type.rank))]).result
    if result.rank == 1:
        return tensor.CastOp(result_type, flat).result
    run_time = [e for e, size in zip(extents, result.shape) if size == dynamic]
    return tensor.ExpandShapeOp(result_type, flat, [list(range(result.rank))], run_time,
                                list(result.shape)).result


def _annotation_text(annotation: ast.Annotation) -> str:
    """`@device("cuda:0")` -> "cuda:0"; `@device(["a", "b"])` -> "a,b"; `@parallel(data)`."""
    parts = []
    for arg in annotation.args:
        for item in (arg.elts if isinstance(arg, ast.ListExpr) else [arg]):
            parts.append(getattr(item, "value", getattr(item, "id", "?")))
    return ",".join(str(p) for p in parts)


def _yielded_type(kernel: Kernel):
    """The element type a reduce kernel yields (its value, for argmin/argmax)."""
    def find(stmts):
        for stmt in stmts:
            if isinstance(stmt, ast.Yield):
                value = stmt.value.elts[0] if isinstance(stmt.value, ast.TupleExpr) else stmt.value
                return concrete(value.ty) if value.ty is not None else None
            for child in (getattr(stmt, "body", None), getattr(stmt, "then_body", None),
                          getattr(stmt, "else_body", None)):
                found = find(child or [])
                if found is not None:
                    return found
        return None
    return find(kernel.body)


def emit_cir(program: CheckedProgram, context: ir.Context) -> ir.Module:
    for name, t in program.inputs.items():
        if is_tensor(t) and t.rank is None:
            raise ZynMLError(f"the rank of input '{name}' is only known from its value: "
                             "give example inputs (--input or --random) to compile it",
                             program.input_locs.get(name))
    with context, ir.Location.unknown(), recursion_room(MAX_EXPRESSION_DEPTH):
        module = ir.Module.create()
        _ProgramEmitter(program, module, "main", set()).emit()
    return module


class _ProgramEmitter:
    """Emits one program (or pipeline) as function `name` (emit), or its steps at the
    current insertion point (emit_steps, for an inlined pipeline call); `symbols` holds
    the function names already used in the module."""

    def __init__(self, program: CheckedProgram, module: ir.Module, name: str,
                 symbols: set[str]):
        self.program = program
        self.module = module
        self.name = name
        self.symbols = symbols
        self.values: dict[str, ir.Value] = {}  # program name -> value in main (scalars unboxed)
        self.types: dict[str, Any] = dict(program.inputs)
        self.size_values: dict[str, ir.Value] = {}

    def emit(self) -> None:
        program = self.program
        by_value = program.by_value
        input_types = [_boundary_type(t, n in by_value) for n, t in program.inputs.items()]
        outputs = program.flat_outputs()
        self.symbols.add(self.name)
        with ir.InsertionPoint(self.module.body):
            main = func.FuncOp(self.name, (input_types, []))  # results: set once emitted
        main.attributes["zynml.inputs"] = ir.ArrayAttr.get(
            [ir.StringAttr.get(n) for n in program.inputs])
        main.attributes["zynml.outputs"] = ir.ArrayAttr.get(
            [ir.StringAttr.get(n) for n in outputs])
        if program.mutated:  # inputs updated in place (`mut`): CUDA writes them there
            main.attributes[MUTATED_ATTR] = ir.ArrayAttr.get(
                [ir.StringAttr.get(n) for n in program.mutated])
        equal_dims = self._equal_dims()
        if equal_dims:
            main.attributes[EQUAL_DIMS_ATTR] = ir.ArrayAttr.get(equal_dims)
        block = main.add_entry_block()
        with ir.InsertionPoint(block):
            for (name, t), arg in zip(program.inputs.items(), block.arguments):
                scalar = arg if name in by_value or is_tensor(t) else \
                    tensor.ExtractOp(arg, []).result
                self.values[name] = arg if is_tensor(t) else S.convert(
                    scalar, _boundary_scalar(t), concrete(t))
            self.emit_steps()
            results, bools = [], []
            for name in outputs:
                if name in program.constants:  # `let (r, index) = await any(fs)`
                    t = concrete(next(s.ty for s in program.steps if s.target == name))
                    value = S.constant(t, program.constants[name])
                else:
                    value, t = self.values[name], self.types[name]
                if not is_tensor(t):
                    if concrete(t).is_bool:
                        bools.append(name)
                    value = S.convert(value, concrete(t), _boundary_scalar(t))
                    value = tensor.FromElementsOp(_boundary_type(t), [value]).result
                results.append(value)
            func.ReturnOp(results)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(input_types, [v.type for v in results]))
        if bools:  # i8 at the boundary: a loaded artifact's plan says they are bools
            main.attributes["zynml.bool_outputs"] = ir.ArrayAttr.get(
                [ir.StringAttr.get(n) for n in bools])

    def _equal_dims(self) -> list[ir.Attribute]:
        """For each size of run-time value bound by several input dimensions, those
        dimensions as [argument, dim, argument, dim, ...]: the call checks that they are
        equal, so the lowering may read one input over another's extent without slicing
        it (a slice whose sizes come from another input hides the equality from IREE,
        whose data tiling then fails on a dynamic matmul)."""
        position = {name: k for k, name in enumerate(self.program.inputs)}
        groups = []
        for size in self.program.sizes.values():
            if size.value is not None:
                continue
            dims = sorted({(position[b.tensor], b.dim) for b in size.bindings
                           if b.tensor in position and is_tensor(self.types[b.tensor])})
            if len(dims) > 1:
                groups.append(ir.DenseI64ArrayAttr.get([n for pair in dims for n in pair]))
        return groups

    def emit_steps(self) -> None:
        for step in self.program.steps:
            if step.kernel is not None:
                with _loc(step.kernel.node):
                    self._compute(step)
            elif step.op is not None:
                with ir.Location.file(step.loc.file.name, step.loc.line, step.loc.col):
                    self._builtin(step)

    def _unique(self, name: str) -> str:
        name = name.replace(".", "_")
        while name in self.symbols:  # a rebound `let`, or a name another function uses
            name += "_"
        self.symbols.add(name)
        return name

    # ------------------------------------------------------------------ values in main

    def _scalar(self, name: str, want: ScalarType) -> ir.Value:
        """A program-level scalar (constant or input) as an SSA value of type `want`."""
        if name in self.program.constants:
            return S.constant(want, self.program.constants[name])
        t = concrete(self.types[name])
        return S.convert(self.values[name], t, want)

    def _size(self, name: str) -> ir.Value:
        if name in self.size_values:
            return self.size_values[name]
        size = self.program.sizes[name]
        value = None
        if size.value is not None:  # known at specialization: the IR is static
            value = S.index(size.value)
        elif name in self.program.constants:
            value = S.index(int(self.program.constants[name]))
        else:
            for binding in size.bindings:
                source = self.values.get(binding.tensor)
                if source is not None and is_tensor(self.types.get(binding.tensor)):
                    value = tensor.DimOp(source, S.index(binding.dim)).result
                    break
        if value is None:  # an integer input (checker.py made it one)
            value = S.convert(self.values[name], concrete(self.types[name]), INDEX)
        self.size_values[name] = value
        return value

    def _extent(self, e: ast.Expr) -> ir.Value:
        """An out-dimension extent expression (`len`, `3*hidden`) evaluated in main."""
        if isinstance(e, ast.IntLit):
            return S.index(e.value)
        if isinstance(e, ast.Name):
            if e.id in self.program.sizes:
                return self._size(e.id)
            return self._scalar(e.id, INDEX)
        if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/", "%"):
            return S.binary(e.op, self._extent(e.left), self._extent(e.right), INDEX)
        if isinstance(e, ast.Call) and e.func.id == "max":  # extents of several writes
            values = [self._extent(a) for a in e.args]
            result = values[0]
            for v in values[1:]:
                result = S.maximum(result, v, INDEX)
            return result
        raise ZynMLError("this extent expression is not supported", e.loc)

    # ------------------------------------------------------------------ whole-value builtins

    def _builtin(self, step: Step) -> None:
        source = self.values[step.operands[0]] if step.operands else None
        result_type = _boundary_type(step.ty)
        if step.op == "zeros":  # allocate(...): a zero-filled tensor
            empty = tensor.EmptyOp(list(step.ty.shape), S.mlir_type(step.ty.dtype)).result
            self.values[step.target] = linalg.fill(S.constant(step.ty.dtype, 0), outs=[empty])
            self.types[step.target] = step.ty
            return
        if step.op == "result":  # another output of a compute: _compute bound it
            return
        if step.op == "alias":  # `await f`, `x.to_device(...)`: the value itself
            self.values[step.target] = source
            self.types[step.target] = step.ty
            return
        if step.op == "slice":
            axis, k, parts = (step.params[n] for n in ("axis", "index", "parts"))
            shape = list(self.types[step.operands[0]].shape)
            if None in shape:
                raise ZynMLError("split needs the static shape of what it splits (a size "
                                 "compiled dynamic, or no inputs given)", step.loc)
            size = shape[axis] // parts
            offsets = [0] * len(shape)
            offsets[axis] = k * size
            shape[axis] = size
            value = tensor.ExtractSliceOp(result_type, source, [], [], [], offsets, shape,
                                          [1] * len(shape)).result
        elif step.op == "reshape":
            extents = [self._extent(d) for d in step.params["dims"]]
            if _has_run_time_size(result_type) and _ranked(source) and _ranked(result_type):
                value = _reshape_to_run_time_sizes(source, result_type, extents)
            else:
                index_vector = ir.RankedTensorType.get([len(extents)], ir.IndexType.get())
                shape = tensor.FromElementsOp(index_vector, extents).result
                value = tensor.ReshapeOp(result_type, source, shape).result
        elif step.op == "call":
            value = self._call(step)
        else:
            raise AssertionError(step.op)
        self.values[step.target] = value
        self.types[step.target] = step.ty

    def _call(self, step: Step) -> ir.Value:
        """A pipeline call is inlined: the callee's steps are emitted here, its inputs
        bound to the caller's values (records and free inputs share their names). The
        value of the first name the call binds is returned; the others' (`let (a, b) =
        f(x)`: steps of op "result") are bound here."""
        callee: CheckedProgram = step.params["callee"]
        inner = _ProgramEmitter(callee, self.module, self.name, self.symbols)
        params = dict(zip(step.params["params"], step.operands))
        for input_name, t in callee.inputs.items():
            caller_name = params.get(input_name, input_name)
            value, caller_t = self.values[caller_name], self.types[caller_name]
            if not is_tensor(t):
                value = S.convert(value, concrete(caller_t), concrete(t))
            inner.values[input_name] = value
        inner.emit_steps()
        for target, output in list(zip(step.params["targets"], callee.outputs))[1:]:
            self.values[target] = inner.values[output]
            self.types[target] = inner.types[output]
        return inner.values[callee.outputs[0]]

    # ------------------------------------------------------------------ compute blocks

    def _compute(self, step: Step) -> None:
        kernel = step.kernel
        operands: list[ir.Value] = []
        for sym in kernel.arg_syms:
            t = sym.ty
            operands.append(self.values[sym.name] if is_tensor(t)
                            else self._scalar(sym.name, concrete(t)))
        for sym in kernel.capture_syms:
            operands.append(self._scalar(sym.name, concrete(sym.ty)))
        for sym in kernel.size_syms:
            operands.append(self._size(sym.name))
        out_dims = []
        for extent in (e for output in kernel.outputs for e in output.out_dims):
            if isinstance(extent, ast.Name) and extent.id in kernel.sizes:
                out_dims.append(len(kernel.arg_syms) + len(kernel.capture_syms)
                                + kernel.sizes.index(extent.id))
            else:
                operands.append(self._extent(extent))
                out_dims.append(len(operands) - 1)
        if len(operands) > MAX_COMPUTE_INPUTS:
            raise ZynMLError(f"a compute block may use at most {MAX_COMPUTE_INPUTS} inputs, "
                             f"sizes and constants; this one uses {len(operands)}",
                             kernel.node.loc)
        result_types = [S.tensor_type(o.result, dynamic_dims=True) if is_tensor(o.result)
                        else S.mlir_type(o.result) for o in kernel.outputs]
        out_types = [t if is_tensor(o.result) else ir.RankedTensorType.get([], t)
                     for t, o in zip(result_types, kernel.outputs)]
        body_name = self._body_function(kernel, [v.type for v in operands], out_types)
        attributes = self._attributes(kernel, body_name, len(operands), out_dims)
        n = len(result_types)
        if n > MAX_COMPUTE_OUTPUTS:
            raise ZynMLError(f"a compute block may have at most {MAX_COMPUTE_OUTPUTS} "
                             f"outputs; this one has {n}", kernel.node.loc)
        if any(o.init is not None for o in kernel.outputs):  # `mut x`: starts from x
            attributes["inits"] = ir.DenseI64ArrayAttr.get(
                [-1 if o.init is None else kernel.arg_syms.index(o.init)
                 for o in kernel.outputs])
        if n > 1:
            attributes["resultSegmentSizes"] = ir.DenseI32ArrayAttr.get(
                [1] * n + [0] * (MAX_COMPUTE_OUTPUTS - n))
        op = ir.Operation.create("cir.compute" if n == 1 else "cir.multi_compute",
                                 results=result_types, operands=operands,
                                 attributes=attributes)
        value = op.results[0]
        for call in step.pipes:
            value = S.builtin(call.func.id, [value], kernel.result)
        self.values[step.target] = value
        self.types[step.target] = step.ty
        for output, result in list(zip(kernel.outputs, op.results))[1:]:
            self.values[output.name] = result
            self.types[output.name] = output.result

    def _attributes(self, kernel: Kernel, body: str, n_operands: int,
                    out_dims: list[int]) -> dict[str, ir.Attribute]:
        i64 = ir.IntegerType.get_signless(64)
        attrs = {
            "kind": ir.StringAttr.get(kernel.kind),
            "body": ir.FlatSymbolRefAttr.get(body),
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get(
                [1] * n_operands + [0] * (MAX_COMPUTE_INPUTS - n_operands)),
            "out_dims": ir.DenseI64ArrayAttr.get(out_dims),
            "names": ir.ArrayAttr.get([ir.StringAttr.get(s.name) for s in
                                       kernel.arg_syms + kernel.capture_syms + kernel.size_syms]),
        }
        if kernel.reduce_op is not None:
            attrs["reduce"] = ir.StringAttr.get(kernel.reduce_op)
            yielded = _yielded_type(kernel)
            if yielded is not None and yielded.name.startswith("u"):
                attrs["unsigned"] = ir.UnitAttr.get()  # signless in MLIR: compare unsigned
        if kernel.axis is not None:
            attrs["axis"] = ir.IntegerAttr.get(i64, kernel.axis)
        ann = kernel.annotations
        if "workgroup" in ann:
            attrs["workgroup"] = ir.DenseI64ArrayAttr.get(ann["workgroup"])
        if ann.get("shared") is not None:
            attrs["shared"] = ir.IntegerAttr.get(i64, ann["shared"])
        for name in ("device", "parallel"):
            if name in ann and ann[name].args:
                attrs[name] = ir.StringAttr.get(_annotation_text(ann[name]))
        if "async" in ann:
            attrs["async"] = ir.UnitAttr.get()
        if "tile" in ann:
            attrs["tile"] = ir.DictAttr.get({
                kw.name: ir.IntegerAttr.get(i64, kw.value.value) for kw in ann["tile"].kwargs
                if isinstance(kw.value, ast.IntLit)})
        if "broadcast" in ann:
            attrs["broadcast"] = ir.DictAttr.get({
                a.args[0].id: ir.IntegerAttr.get(i64, a.kwargs[0].value.value if a.kwargs else 0)
                for a in ann["broadcast"]})
        return attrs

    def _body_function(self, kernel: Kernel, arg_types: list[ir.Type],
                       out_types: list[ir.Type]) -> str:
        name = self._unique(f"{kernel.name}_body")
        with ir.InsertionPoint(self.module.body):
            fn = func.FuncOp(name, (arg_types + out_types, []))
        fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
        fn.attributes["cir.body"] = ir.UnitAttr.get()
        block = fn.add_entry_block()
        env = {}
        syms = kernel.arg_syms + kernel.capture_syms + kernel.size_syms
        for sym, arg in zip(syms, block.arguments):
            env[sym] = arg
        args = list(block.arguments)
        outs = args[len(args) - len(kernel.outputs):]  # after the operands: extents too
        for output, arg in zip(kernel.outputs, outs):
            env[output.sym] = arg
        with ir.InsertionPoint(block):
            BodyEmitter(kernel, env, outs[0]).block(kernel.body)
            func.ReturnOp([])
        return name

