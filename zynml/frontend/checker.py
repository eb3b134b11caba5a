"""Program-level checking: AST -> typed AST (a CheckedProgram).

Script mode: free tensor names passed to `compute(...)` are the program's inputs; each
top-level `let` bound to a compute is an output; a `let` bound to a number is a constant.
Sizes nobody binds (`len`, `rows`, `K`) are inferred from the loops that index inputs
(body_checker.py records those bindings) and, when a signature of run-time shapes is given,
checked against it: a size bound two different ways is an error naming both places.

`check(program)` without a signature checks everything that does not depend on shapes;
`check(program, signature)` also resolves every size and result shape (specialization).
"""
from __future__ import annotations

import copy
import math
from typing import Any, Optional

from . import ast
from .body_checker import BodyChecker, eval_extent
from .depth import check_expression_depth
from .lexer import MAX_INT
from .outputs import bind_outputs, several_outputs
from .pipeline_values import check_call_targets, returned_values
from .program_level import ProgramLevel
from .ranges import (check_arg_reduction, check_divisors, check_extent_divisors,
                     check_local_arrays, check_result_size, check_steps, result_extent)
from .symbols import CheckedProgram, Size, SizeBinding, Step, Symbol, is_tensor
from .types import ANY, F32, from_numpy, FLOAT_LITERAL, I64, INDEX, INT_LITERAL, SCALARS, ScalarType, TensorType
from .types import concrete as concrete_dtype
from ..errors import SourceFile, ZynMLError
from ..limits import MAX_EXPRESSION_DEPTH, recursion_room

__all__ = ["check", "check_pipeline", "Signature"]

# name -> TensorType (concrete shape) | ScalarType, plus the values of integer scalars.
Signature = dict


def check(program: ast.Program, source: SourceFile,
          signature: Optional[Signature] = None,
          scalar_values: Optional[dict[str, Any]] = None,
          records: Optional[dict[str, Any]] = None) -> CheckedProgram:
    """Check the script part of `program`; every pipeline is checked too (shape-generic)
    and attached as `pipelines`."""
    check_expression_depth(program)
    with recursion_room(MAX_EXPRESSION_DEPTH):  # the walks over expressions recurse
        return _check(program, source, signature, scalar_values, records)


def _check(program: ast.Program, source: SourceFile, signature: Optional[Signature],
           scalar_values: Optional[dict[str, Any]],
           records: Optional[dict[str, Any]]) -> CheckedProgram:
    table = {}
    for pipeline in program.pipelines:
        if pipeline.name in table:
            raise ZynMLError(f"pipeline '{pipeline.name}' is defined twice", pipeline.loc)
        table[pipeline.name] = pipeline
    checker = _ProgramChecker(program.body, source, signature, scalar_values or {},
                              records=records, pipelines=table)
    settings = checker.check_config(program.configs)
    checked = checker.run()
    checked.config = settings
    for pipeline in program.pipelines:
        checked.pipelines[pipeline.name] = check_pipeline(pipeline, source, pipelines=table)
    return checked


def check_pipeline(pipeline: ast.Pipeline, source: SourceFile,
                   signature: Optional[Signature] = None,
                   scalar_values: Optional[dict[str, Any]] = None,
                   records: Optional[dict[str, Any]] = None,
                   pipelines: Optional[dict[str, ast.Pipeline]] = None,
                   _depth: int = 0) -> CheckedProgram:
    """A pipeline is a sub-program: its parameters are the inputs (typed dimensions bind
    sizes), its `return` value the one output."""
    checker = _ProgramChecker(pipeline.body, source, signature, scalar_values or {},
                              pipeline=pipeline, records=records, pipelines=pipelines,
                              depth=_depth)
    with recursion_room(MAX_EXPRESSION_DEPTH):
        checked = checker.run()
    checked.name = pipeline.name
    return checked


class _ProgramChecker(ProgramLevel):
    def __init__(self, body: list[ast.Stmt], source: SourceFile,
                 signature: Optional[Signature], scalar_values: dict[str, Any],
                 pipeline: Optional[ast.Pipeline] = None,
                 records: Optional[dict[str, Any]] = None,
                 pipelines: Optional[dict[str, ast.Pipeline]] = None, depth: int = 0):
        self.body = body
        self.pipeline = pipeline
        self.records = records  # record roots given at the call (None: not known yet)
        self.pipeline_table = pipelines or {}
        self.depth = depth
        self.aliases: dict[str, ast.Expr] = {}  # `let weights = model.layers[layer]`
        self.record_roots: set[str] = set()
        self.record_values: dict[str, Any] = {}
        self._init_program_level()
        self.source = source
        self.signature = signature
        self.scalar_values = scalar_values
        self.values: dict[str, Any] = {}  # program-level name -> type
        self.inputs: dict[str, Any] = {}
        self.input_locs: dict = {}
        self.constants: dict[str, Any] = {}
        self.sizes: dict[str, Size] = {}
        # size -> the results defined before the first block that uses it: a binding to a
        # later result cannot give that block its value (cirgen emits blocks in order)
        self.results_at_first_use: dict[str, frozenset] = {}
        self.steps: list[Step] = []
        self.outputs: list[str] = []
        # integer inputs whose value the front end reads (record indices, and sizes of
        # pipelines called with them): compiled by value, the rest are run-time values
        self.index_names: set[str] = set()

    def run(self) -> CheckedProgram:
        if self.pipeline is not None:
            self._parameters(self.pipeline)
        for stmt in self.body:
            self._top_level(stmt)
        if self.pipeline is not None and not self.outputs:
            raise ZynMLError(f"pipeline '{self.pipeline.name}' has no 'return'",
                             self.pipeline.loc)
        self._unbound_sizes_are_inputs()
        if self.signature is not None:
            for name in self.sizes:  # also sizes only parameter types name
                self._resolve_size(name)
        return CheckedProgram(self.source, self.inputs, self.outputs, self.steps, self.sizes,
                              self.constants, self.input_locs,
                              record_roots=self.record_roots,
                              record_values=self.record_values,
                              list_outputs=self.list_outputs,
                              devices_named=self.devices_named,
                              host_values=self.host_values, mutated=self.mutated,
                              static_scalars=self._static_scalars())

    def _static_scalars(self) -> frozenset:
        """The scalar inputs whose value this program needs to compile: sizes (loop
        bounds, extents, shapes) and record indices. Other integer inputs are run-time
        arguments (a `rand` seed, a causal offset) and stay out of the signature key."""
        return frozenset(name for name, ty in self.inputs.items()
                         if (not is_tensor(ty) or ty.rank is None)  # maybe a scalar
                         and (name in self.sizes or name in self.index_names))

    # ------------------------------------------------------------------ statements

    def _parameters(self, pipeline: ast.Pipeline) -> None:
        for param in pipeline.params:
            if param.name in self.inputs:
                raise ZynMLError(f"parameter '{param.name}' is declared twice", param.loc)
            ty = self._param_type(param)
            if self.signature is not None:
                if param.name not in self.signature:
                    raise ZynMLError(f"missing argument '{param.name}'", param.loc)
                given = self.signature[param.name]
                if is_tensor(ty) != is_tensor(given) or (is_tensor(ty) and ty.rank != given.rank):
                    raise ZynMLError(f"argument '{param.name}' should be {_describe(ty)}, "
                                     f"got {_describe(given)}", param.loc)
                ty = given if is_tensor(given) or not ty.is_float else ty
            self.inputs[param.name] = ty
            self.input_locs[param.name] = param.loc
            if param.type is not None and param.type.dims:
                for dim, expr in enumerate(param.type.dims):
                    if isinstance(expr, ast.Name):
                        size = self.sizes.setdefault(expr.id, Size(expr.id, expr.loc))
                        size.bindings.append(SizeBinding(param.name, dim, expr.loc))

    @staticmethod
    def _param_type(param: ast.Param) -> Any:
        t = param.type
        if t is None:
            raise ZynMLError(f"parameter '{param.name}' needs a type "
                             "(tensor[dims], int or float)", param.loc)
        if t.name == "tensor":
            # its dtype is the argument's (ANY until a call gives one), as a script input's
            return TensorType(ANY, (None,) * len(t.dims or []))
        if t.name == "int":
            return I64
        if t.name == "float":
            return F32
        if t.name in SCALARS:
            return SCALARS[t.name]
        raise ZynMLError(f"unknown parameter type '{t.name}'; expected tensor[...], int, "
                         "float or a scalar type", t.loc)

    def _top_level(self, stmt: ast.Stmt) -> None:
        if isinstance(stmt, ast.Return) and self.pipeline is not None:
            self.outputs[:] = returned_values(stmt, self.values)
            return
        if isinstance(stmt, ast.Let) and (self.async_let(stmt) or self.memory_let(stmt)):
            return
        if isinstance(stmt, ast.ExprStmt) and self.memory_statement(stmt):
            return
        if (isinstance(stmt, ast.Let) and len(stmt.targets) > 1 or
                isinstance(stmt, ast.ExprStmt)) and isinstance(stmt.value, ast.Compute):
            several_outputs(self, stmt)
            return
        if isinstance(stmt, ast.Let) and len(stmt.targets) == 1:
            name = stmt.targets[0]
            value, pipes = stmt.value, []
            while isinstance(value, ast.Pipe):
                pipes.insert(0, value.call)
                value = value.value
            if isinstance(value, ast.Compute):
                step = self._compute(name, value, stmt)
                step.pipes = [self._check_pipe(call, step.ty) for call in pipes]
                self.steps.append(step)
                bind_outputs(self, step, stmt)  # and the inputs it updates (`mut x`)
                return
            if not pipes and isinstance(value, (ast.Attribute, ast.Index)) and \
                    _is_path(value) and _root(value).id not in self.values \
                    and _root(value).id not in self.inputs:
                self.aliases[name] = value  # a record (`let weights = model.layers[i]`)
                return
            if not pipes and self.host_value_let(name, value):
                return
            if not pipes and isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                if value.func.id == "reshape":
                    self._add_step(self._reshape(name, value, stmt))
                    return
                if value.func.id in self.pipeline_table:
                    self._call(value, stmt)
                    return
            if not pipes:
                constant = _constant(value)
                if constant is not None:
                    self.constants[name] = constant
                    ty = INT_LITERAL if isinstance(constant, int) else FLOAT_LITERAL
                    self.values[name] = ty
                    self.steps.append(Step(name, stmt.loc, constant=constant, ty=ty))
                    return
            raise ZynMLError("a top-level 'let' must bind a compute block or a number "
                             "(other expressions are not supported yet)", value.loc)
        if isinstance(stmt, ast.Let) and isinstance(stmt.value, ast.Call) and \
                isinstance(stmt.value.func, ast.Name) and \
                stmt.value.func.id in self.pipeline_table:
            self._call(stmt.value, stmt)  # `let (da, db) = backward(x, dy)`
            return
        if isinstance(stmt, ast.Let) and isinstance(stmt.value, ast.Call) and \
                isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "split":
            for step in self._split(stmt):
                self._add_step(step)
            return
        raise ZynMLError("this statement is not supported at the top level yet", stmt.loc)

    def _check_pipe(self, call: ast.Call, ty: Any) -> ast.Call:
        from .body_checker import MATH_BUILTINS
        if not isinstance(call.func, ast.Name) or call.func.id not in MATH_BUILTINS:
            raise ZynMLError("'|>' needs a scalar builtin on its right (e.g. |> sqrt())",
                             call.loc)
        lo, _ = MATH_BUILTINS[call.func.id]
        if lo != 1 or call.args or call.kwargs:
            raise ZynMLError(f"'{call.func.id}' cannot be applied with '|>': it takes "
                             f"{lo} arguments", call.loc)
        if is_tensor(ty) or not (ty.is_float or ty.is_any):
            raise ZynMLError("'|>' applies to a float scalar result (a full reduction)",
                             call.loc)
        return call

    # ------------------------------------------------------------------ compute blocks

    def _compute(self, name: str, node: ast.Compute, stmt: ast.Let,
                 outputs: Optional[list[str]] = None) -> Step:
        args = []
        for expr in node.inputs:
            if isinstance(expr, ast.Name) and expr.id not in self.aliases:
                args.append((expr.id, self._input_type(expr, node)))
            elif _is_path(expr):
                args.append(self._record_input(expr, node))
            else:
                raise ZynMLError("a compute input must be a name or a record field such as "
                                 "weights.qkv_proj", expr.loc)
        tensors = frozenset(n for n, t in {**self.inputs, **self.values}.items() if is_tensor(t))
        checker = BodyChecker(node, name, args, self._resolve_outer, self.sizes, tensors,
                              outputs)
        kernel = checker.check()
        for size_name in kernel.sizes:
            self.results_at_first_use.setdefault(size_name, frozenset(self.values))
        if self.signature is not None:
            self._resolve_sizes(kernel)
            self._check_tile_extents(kernel)
        check_divisors(kernel, self.sizes, self.constants)
        check_steps(kernel, self.sizes, self.constants)
        check_local_arrays(kernel, self.sizes, self.constants)
        check_arg_reduction(kernel, self.sizes, self.constants)
        for output in kernel.outputs:
            result = output.result
            # rank None: `out = x * 2.0` of an input whose rank only the call gives
            if is_tensor(result) and result.rank is not None:
                dims = tuple(result_extent(eval_extent(d, self.sizes, self.constants), d, k)
                             for k, d in enumerate(output.out_dims))
                check_result_size(dims, concrete_dtype(result.dtype), node)
                output.result = TensorType(result.dtype, dims)
        return Step(name, stmt.loc, kernel=kernel, ty=kernel.result)

    def _input_type(self, expr: ast.Name, node: ast.Compute) -> Any:
        name = expr.id
        if name in self.values:
            ty = self.values[name]
            if isinstance(ty, ScalarType) and ty.is_literal:
                ty = F32 if ty == FLOAT_LITERAL else INDEX
            return ty
        if name not in self.inputs:
            self.inputs[name] = self._signature_type(name, expr, node)
            self.input_locs[name] = expr.loc
        return self.inputs[name]

    def _signature_type(self, name: str, expr: ast.Name, node: ast.Compute) -> Any:
        rank = _first_index_rank(node, name)
        if self.signature is None:
            return TensorType(ANY, (None,) * rank if rank is not None else None)
        if name not in self.signature:
            raise ZynMLError(f"missing input '{name}'", expr.loc)
        return self.signature[name]

    def _resolve_outer(self, name: str, loc) -> Optional[Symbol]:
        """Program-level names a body may read: constants, outputs, scalar inputs.

        A free name a body reads as a value (not a size) is a scalar input of the program
        (`eps`); with a signature it must be among the inputs given.
        """
        if name in self.host_values:
            raise ZynMLError(f"'{name}' is the list of devices compute_devices() returns; a "
                             "compute body reads numbers and tensors", loc)
        if name in self.values or name in self.inputs:
            ty = self.values.get(name, self.inputs.get(name))
            if isinstance(ty, ScalarType) and ty.is_literal:
                ty = F32 if ty == FLOAT_LITERAL else INDEX
            return Symbol("capture", name, ty)
        if self.signature is None:
            ty = ANY
        elif name in self.signature:
            ty = self.signature[name]
        else:
            return None
        if not is_tensor(ty):
            self.inputs[name] = ty
            self.input_locs[name] = loc
        return Symbol("capture", name, ty)

    # ------------------------------------------------------------------ records

    def _record_input(self, expr: ast.Expr, node: ast.Compute) -> tuple[str, Any]:
        """`weights.qkv_proj` with `let weights = model.layers[layer]` -> the input
        `model.layers[0].qkv_proj` (the index's value is known at the call)."""
        root, segments = self._expand(expr)
        self.record_roots.add(root.id)
        flat = root.id + "".join(f".{s}" if isinstance(s, str) else f"[{s}]"
                                 for s in (self._segment(x) for x in segments))
        if flat in self.inputs:
            return flat, self.inputs[flat]
        local = BodyChecker._arg_local_name(expr)
        if self.records is None:
            rank = _first_index_rank(node, local)
            ty = TensorType(ANY, (None,) * rank if rank is not None else None)
        else:
            if root.id not in self.records:
                raise ZynMLError(f"missing input '{root.id}' (a record)", root.loc)
            value = _resolve(self.records[root.id], root, segments, self._segment)
            dtype = from_numpy(value.dtype)
            if dtype is None:
                raise ZynMLError(f"'{flat}' has dtype {value.dtype}, which ZynML does not "
                                 "support", expr.loc)
            ty = TensorType(dtype, tuple(int(d) for d in value.shape))
            self.record_values[flat] = value
        self.inputs[flat] = ty
        self.input_locs[flat] = expr.loc
        return flat, ty

    def _expand(self, expr: ast.Expr):
        """(root Name, [field name | index Expr]) of a path, through `let` aliases."""
        segments = []
        while isinstance(expr, (ast.Attribute, ast.Index)):
            if isinstance(expr, ast.Attribute):
                segments.append(expr.name)
            else:
                if len(expr.indices) != 1 or isinstance(expr.indices[0], ast.Slice):
                    raise ZynMLError("a record member takes one index", expr.loc)
                segments.append(expr.indices[0])
            expr = expr.base
        segments.reverse()
        if expr.id in self.aliases:
            root, head = self._expand(self.aliases[expr.id])
            return root, head + segments
        return expr, segments

    def _segment(self, segment):
        if isinstance(segment, str):
            return segment
        if isinstance(segment, ast.IntLit):
            return segment.value
        if isinstance(segment, ast.Name):
            if segment.id in self.constants:
                return self.constants[segment.id]
            self.index_names.add(segment.id)
            if segment.id in self.scalar_values:
                return int(self.scalar_values[segment.id])
            if self.signature is None:
                self.inputs.setdefault(segment.id, I64)
                self.input_locs.setdefault(segment.id, segment.loc)
                return segment.id
            if segment.id in self.inputs and not is_tensor(self.inputs[segment.id]):
                raise ZynMLError(f"the index '{segment.id}' must be an integer input",
                                 segment.loc)
            raise ZynMLError(f"missing input '{segment.id}'", segment.loc)
        raise ZynMLError("a record index must be a name or an integer", segment.loc)

    # ------------------------------------------------------------------ whole-value builtins

    def _add_step(self, step: Step) -> None:
        self.values[step.target] = step.ty
        self.steps.append(step)
        if self.pipeline is None and step.target not in self.outputs:
            self.outputs.append(step.target)

    def _value_type(self, expr: ast.Expr, what: str) -> tuple[str, Any]:
        if not isinstance(expr, ast.Name):
            raise ZynMLError(f"{what} takes a value's name", expr.loc)
        if expr.id in self.values:
            return expr.id, self.values[expr.id]
        if expr.id in self.inputs:
            return expr.id, self.inputs[expr.id]
        if self.pipeline is None:  # script mode: a free name is an input of the program
            if self.signature is None:
                ty = TensorType(ANY, None)
            elif expr.id in self.signature:
                ty = self.signature[expr.id]
            else:
                raise ZynMLError(f"missing input '{expr.id}'", expr.loc)
            self.inputs[expr.id] = ty
            self.input_locs[expr.id] = expr.loc
            return expr.id, ty
        raise ZynMLError(f"unknown name '{expr.id}'", expr.loc)

    def _split(self, stmt: ast.Let) -> list[Step]:
        """`let (q, k, v) = split(t, 3, axis=-1)`: equal parts along an axis."""
        call = stmt.value
        if len(call.args) != 2 or not isinstance(call.args[1], ast.IntLit):
            raise ZynMLError("split takes a tensor and a number of parts: "
                             "split(t, 3, axis=-1)", call.loc)
        name, ty = self._value_type(call.args[0], "split")
        parts = call.args[1].value
        axis = -1
        for kw in call.kwargs:
            axis_value = _constant(kw.value)
            if kw.name != "axis" or not isinstance(axis_value, int):
                raise ZynMLError("split takes axis=<integer>", kw.loc)
            axis = axis_value
        if not is_tensor(ty) or ty.rank is None:
            raise ZynMLError(f"'{name}' must be a tensor of known rank to split it",
                             call.args[0].loc)
        if not -ty.rank <= axis < ty.rank:
            raise ZynMLError(f"axis {axis} is out of range for rank {ty.rank}", call.loc)
        axis %= ty.rank
        if len(stmt.targets) != parts:
            raise ZynMLError(f"split into {parts} parts is bound to {len(stmt.targets)} "
                             "names", stmt.loc)
        extent = ty.shape[axis]
        if extent is not None and extent % parts:
            raise ZynMLError(f"cannot split dimension {axis} of '{name}' ({extent}) into "
                             f"{parts} equal parts", call.loc)
        shape = list(ty.shape)
        shape[axis] = None if extent is None else extent // parts
        return [Step(target, stmt.loc, ty=TensorType(ty.dtype, tuple(shape)), op="slice",
                     operands=[name], params={"axis": axis, "index": k, "parts": parts})
                for k, target in enumerate(stmt.targets)]

    def _reshape(self, target: str, call: ast.Call, stmt: ast.Let) -> Step:
        if len(call.args) != 2 or not isinstance(call.args[1], ast.ListExpr):
            raise ZynMLError("reshape takes a tensor and a list of extents: "
                             "reshape(t, [a, b])", call.loc)
        name, ty = self._value_type(call.args[0], "reshape")
        dims = call.args[1].elts
        for d in dims:
            for n in _names_in(d):
                if n.id in self.constants:
                    continue
                size = self.sizes.setdefault(n.id, Size(n.id, n.loc))
                if not size.bindings:  # nothing binds it yet: an integer input
                    self.inputs.setdefault(n.id, I64)
                    self.input_locs.setdefault(n.id, n.loc)
        if self.signature is not None:
            for d in dims:
                for n in _names_in(d):
                    if n.id in self.sizes:
                        self._resolve_size(n.id)
        check_extent_divisors(dims, lambda e: eval_extent(e, self.sizes, self.constants))
        shape = tuple(eval_extent(d, self.sizes, self.constants) for d in dims)
        for d, extent in zip(dims, shape):
            if extent is not None and not 0 <= extent <= MAX_INT:
                raise ZynMLError(f"a reshape extent must be from 0 to {MAX_INT}, got {extent}",
                                 ast.leftmost(d).loc)
        if is_tensor(ty) and ty.shape is not None and None not in ty.shape and None not in shape:
            if math.prod(ty.shape) != math.prod(shape):
                raise ZynMLError(f"cannot reshape '{name}' of shape {list(ty.shape)} to "
                                 f"{list(shape)}: the sizes differ", call.loc)
        return Step(target, stmt.loc, ty=TensorType(ty.dtype, shape), op="reshape",
                    operands=[name], params={"dims": dims})

    def _call(self, call: ast.Call, stmt: ast.Let) -> None:
        """`let y = mlp(x, w1, w2)` or `let (a, b) = f(x)`: a call of another pipeline,
        checked for these arguments (and inlined); a step per name the call binds."""
        # The checker annotates AST nodes (ty, sym), so each call site checks its own copy:
        # a pipeline called with two signatures must not share annotations.
        callee = copy.deepcopy(self.pipeline_table[call.func.id], {id(self.source): self.source})
        if self.depth > 16:
            raise ZynMLError(f"pipeline calls nest too deep (is '{callee.name}' recursive?)",
                             call.loc)
        if len(call.args) != len(callee.params) or call.kwargs:
            raise ZynMLError(f"pipeline '{callee.name}' takes {len(callee.params)} arguments, "
                             f"got {len(call.args)}", call.loc)
        names, signature, scalars = [], {}, {}
        for arg, param in zip(call.args, callee.params):
            name, ty = self._value_type(arg, "a pipeline argument")
            names.append(name)
            signature[param.name] = ty
            if name in self.scalar_values:
                scalars[param.name] = self.scalar_values[name]
        checked = check_pipeline(callee, self.source,
                                 signature if self.signature is not None else None, scalars,
                                 self.records, self.pipeline_table, self.depth + 1)
        params = [p.name for p in callee.params]
        self.index_names.update(name for name, param in zip(names, params)
                                if param in checked.static_scalars)
        for extra, ty in checked.inputs.items():  # records and free inputs of the callee
            if extra not in params:
                self.inputs.setdefault(extra, ty)
                self.input_locs.setdefault(extra, checked.input_locs.get(extra))
        self.record_roots |= checked.record_roots
        self.record_values.update(checked.record_values)
        check_call_targets(callee.name, checked.outputs, stmt)
        types: dict[str, Any] = {}
        for s in checked.steps:
            types.setdefault(s.target, s.ty)
        for k, (target, result) in enumerate(zip(stmt.targets, checked.outputs)):
            self._add_step(Step(target, stmt.loc, ty=types[result], op="call", operands=names,
                                params={"callee": checked, "params": params,
                                        "targets": stmt.targets})
                           if k == 0 else
                           Step(target, stmt.loc, ty=types[result], op="result",
                                operands=[stmt.targets[0]], params={"index": k}))

    # ------------------------------------------------------------------ sizes

    def _check_tile_extents(self, kernel) -> None:
        """Extents of tiles that the rewriting could only compare by name (frontend/tiles.py)."""
        for check in kernel.tile_checks:
            for name in _names_in(check.left) + _names_in(check.right):
                if name.id in self.sizes:
                    self._resolve_size(name.id)
            left, right = (eval_extent(e, self.sizes, self.constants)
                           for e in (check.left, check.right))
            shown = [_shown(e, v) for e, v in ((check.left, left), (check.right, right))]
            if check.inside:
                if left is None or right is None:
                    raise ZynMLError(f"{check.what}: cannot tell before running whether "
                                     f"index {shown[0]} < {shown[1]}", check.loc)
                if not left < right:
                    raise ZynMLError(f"{check.what}: index {shown[0]} is not below "
                                     f"{shown[1]}", check.loc)
            elif left is not None and right is not None and left != right:
                raise ZynMLError(f"{check.what} differ: {shown[0]} and {shown[1]}", check.loc)

    def _resolve_sizes(self, kernel) -> None:
        """Give every size this kernel uses a value, checking all its bindings agree."""
        for name in kernel.sizes:
            self._resolve_size(name)

    def _resolve_size(self, name: str) -> None:
        size = self.sizes[name]
        sources = []  # (value, description, loc)
        if name in self.constants and isinstance(self.constants[name], int):
            sources.append((self.constants[name], f"'let {name}'", None))
        if name in self.scalar_values:
            sources.append((int(self.scalar_values[name]), f"input '{name}'", None))
        for b in size.bindings:
            ty = self.inputs.get(b.tensor, self.values.get(b.tensor))
            if is_tensor(ty) and ty.shape[b.dim] is not None:
                sources.append((ty.shape[b.dim],
                                f"dimension {b.dim} of '{b.tensor}'", b.loc))
        for value, what, loc in sources[1:]:
            first_value, first_what, first_loc = sources[0]
            if value != first_value:
                where = f" at {first_loc.line}:{first_loc.col}" if first_loc else ""
                raise ZynMLError(
                    f"size '{name}' is bound two ways: {value} from {what} here, but "
                    f"{first_value} from {first_what}{where}",
                    loc or size.loc, notes=[(f"'{name}' is first bound here", first_loc)]
                    if first_loc else None)
        if sources:
            size.value = sources[0][0]

    def _early_bindings(self, size: Size) -> list:
        """The bindings of `size` known when its first block runs: to inputs and to results
        of earlier blocks (`for i in 0..n` before the block whose result `y[i]` binds n:
        y's extent is n itself, so n is an input)."""
        before = self.results_at_first_use.get(size.name)
        return [b for b in size.bindings if before is None or b.tensor in self.inputs or
                b.tensor not in self.values or b.tensor in before]

    def _unbound_sizes_are_inputs(self) -> None:
        """A size no input dimension, earlier result or constant binds is an integer input
        of the program."""
        for size in self.sizes.values():
            if self._early_bindings(size) or size.name in self.constants or \
                    size.name in self.inputs:
                continue
            if self.signature is not None and size.name not in self.scalar_values:
                raise ZynMLError(
                    f"cannot infer size '{size.name}': no input dimension is indexed by a loop "
                    f"over 0..{size.name}; pass '{size.name}' as an input", size.loc)
            self.inputs[size.name] = I64
            self.input_locs[size.name] = size.loc


def _is_path(e: ast.Expr) -> bool:
    while isinstance(e, (ast.Attribute, ast.Index)):
        e = e.base
    return isinstance(e, ast.Name)


def _root(e: ast.Expr) -> ast.Name:
    while isinstance(e, (ast.Attribute, ast.Index)):
        e = e.base
    return e


def _resolve(obj: Any, root: ast.Name, segments: list, segment_value) -> Any:
    """Follow fields (dict keys or attributes) and indices from a record object."""
    import numpy as np
    path = root.id
    for seg in segments:
        key = segment_value(seg)
        try:
            if isinstance(key, int):
                obj = obj[key]
            elif isinstance(obj, dict):
                obj = obj[key]
            else:
                obj = getattr(obj, key)
        except (KeyError, IndexError, AttributeError, TypeError):
            loc = seg.loc if isinstance(seg, ast.Node) else root.loc
            what = f"[{key}]" if isinstance(key, int) else f".{key}"
            raise ZynMLError(f"'{path}' has no member {what}", loc) from None
        path += f"[{key}]" if isinstance(key, int) else f".{key}"
    try:
        return np.asarray(obj)
    except Exception:
        raise ZynMLError(f"'{path}' is not an array", root.loc) from None


def _names_in(e: ast.Expr) -> list[ast.Name]:
    if isinstance(e, ast.Name):
        return [e]
    if isinstance(e, ast.Binary):
        return _names_in(e.left) + _names_in(e.right)
    return []


def _shown(e: ast.Expr, value: Optional[int]) -> str:
    """`x.shape[0] = 3`, or just `3` for an extent written as a number."""
    if eval_extent(e, {}, {}) is not None or value is None:
        return str(eval_extent(e, {}, {})) if value is not None else _text(e)
    return f"{_text(e)} = {value}"


_text = ast.extent_text


def _describe(t: Any) -> str:
    return f"a tensor of rank {t.rank}" if is_tensor(t) else f"a scalar ({t})"


def _constant(e: ast.Expr):
    if isinstance(e, (ast.IntLit, ast.FloatLit)):
        return e.value
    if isinstance(e, ast.Unary) and e.op == "-":
        inner = _constant(e.operand)
        return -inner if inner is not None else None
    return None


def _first_index_rank(node: ast.Compute, name: str) -> Optional[int]:
    """Rank of input `name` from its first indexing in the body (None if never indexed)."""
    found: list[int] = []

    def visit(x, row: bool = False):
        if found:
            return
        if isinstance(x, ast.Index) and _is_path(x.base) and \
                BodyChecker._arg_local_name(x.base) == name and \
                not any(isinstance(i, ast.Slice) for i in x.indices):  # a slice keeps whole
            # trailing dimensions: its index count is not the rank
            found.append(len(x.indices) + row)  # a row (dot's argument) drops one index
            return
        if isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id == "dot":
            for arg in x.args:
                visit(arg, row=True)
            return
        if isinstance(x, list):
            for item in x:
                visit(item)
        elif isinstance(x, ast.Node):
            for value in vars(x).values():
                if isinstance(value, (ast.Node, list)):
                    visit(value)
    visit(node.body)
    return found[0] if found else None
