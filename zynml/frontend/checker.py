"""Program-level checking: AST -> typed AST (a CheckedProgram).

Script mode: free tensor names passed to `compute(...)` are the program's inputs; each
top-level `let` bound to a compute is an output; a `let` bound to a number is a constant.
Sizes nobody binds (`len`, `rows`, `K`) are inferred from the loops that index inputs
(body_checker.py records those bindings) and, when a signature of run-time shapes is given,
checked against it: a size bound two different ways is an error naming both places.

`check(program)` without a signature checks everything that does not depend on shapes;
`check(program, signature)` also resolves every size and result shape (specialization).

The program checker here walks the top-level statements, checks compute blocks (their
bodies in body_checker.py) and calls of pipelines; mixins hold the rest: program_level.py
(config, futures, memory), record_inputs.py, whole_values.py (split, reshape) and
size_resolution.py.
"""
from __future__ import annotations

import copy
from typing import Any, Optional

from . import ast
from .body_checker import BodyChecker
from .body_rules import MATH_BUILTINS
from .depth import check_expression_depth
from .outputs import bind_outputs, several_outputs
from .pipeline_values import check_call_targets, returned_values
from .program_level import ProgramLevel
from .ranges import (check_arg_reduction, check_divisors, check_local_arrays,
                     check_result_size, check_steps, result_extent)
from .record_inputs import RecordInputs, first_index_rank, is_path, path_root
from .result_shapes import eval_extent
from .size_resolution import SizeResolution
from .symbols import CheckedProgram, Size, SizeBinding, Step, Symbol, is_tensor
from .types import ANY, F32, FLOAT_LITERAL, I64, INDEX, INT_LITERAL, SCALARS, ScalarType, TensorType
from .types import concrete as concrete_dtype
from .whole_values import WholeValueSteps, literal_number
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


class _ProgramChecker(ProgramLevel, RecordInputs, WholeValueSteps, SizeResolution):
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
        if self.pipeline is not None:
            self._updates_are_returned()
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

    def _updates_are_returned(self) -> None:
        """A pipeline's results are what it returns: a parameter it updates in place
        (`compute(mut x)`) and does not return would lose the update."""
        for name, loc in self.mutated.items():
            if name not in self.outputs:
                raise ZynMLError(f"pipeline '{self.pipeline.name}' updates its parameter "
                                 f"'{name}' in place ('mut') but does not return it, so "
                                 f"the update is lost: add '{name}' to its 'return'", loc)

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
                    is_path(value) and path_root(value).id not in self.values \
                    and path_root(value).id not in self.inputs:
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
                constant = literal_number(value)
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
            elif is_path(expr):
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
        rank = first_index_rank(node, name)
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

    # ------------------------------------------------------------------ pipeline calls

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


def _describe(t: Any) -> str:
    return f"a tensor of rank {t.rank}" if is_tensor(t) else f"a scalar ({t})"
