"""A `cir` module -> one Python module: each func.func as a Python function, op by op.

The interpreter walks the MLIR module once and writes what each op does as Python
(`scf.for` a `for` over `range`, `scf.if` an `if`, arith/math ops expressions on numpy
scalars, ops.py); running the program is then running that Python, with no MLIR in the
loop. Every tensor read and write is bounds-checked, every integer division checks its
divisor; a failure raises a ZynMLError at the op's source location (sites.py).

    scf.for %i = %c0 to %n step %c1 {                for v3 in range(0, v1, 1):
      %v = "cir.load"(%x, %i) : ... -> f32     ->        if not (0 <= v3 < a0_0): _oob(0, a0, (v3,))
      %r = math.exp %v : f32                             v4 = a0[v3]
      "cir.store"(%r, %out, %i) : ...                    v5 = np.exp(v4)
    }                                                    if not (0 <= v3 < a1_0): _oob(1, a1, (v3,))
                                                         a1[v3] = v5

Loop-carried values (`iter_args`) and the loop's results share one Python name: the
`scf.yield` at the end of an iteration assigns it, and after the loop it holds the last
value (or the initial one, when the loop ran zero times). `python_source(module)` shows
the translation.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

from mlir import ir

from ..errors import SourceFile, ZynMLError
from ..lowering import SCATTER_KINDS, scatter_combiner
from ..lowering.cir_ops import func_by_name, i64_array, int_attr, string_attr
from . import scalars
from .ops import DIVISIONS, SCALAR_OPS
from .scalars import dtype_of, is_index, scalar_constant
from .sites import Sites

__all__ = ["Translation", "ComputeSpec", "translate"]


class ComputeSpec:
    """What running one `cir.compute` needs besides its body function (runtime.py)."""

    def __init__(self, op: ir.Operation, body_name: str, sites: Sites, yield_site):
        self.body = body_name
        self.kind = string_attr(op, "kind")
        self.reduce = string_attr(op, "reduce")
        self.axis = int_attr(op, "axis")
        self.unsigned = "unsigned" in op.attributes
        self.out_dims = i64_array(op, "out_dims") or []
        result = op.results[0].type
        self.scalar_result = not isinstance(result, ir.RankedTensorType)
        element = result if self.scalar_result else ir.RankedTensorType(result).element_type
        self.dtype = dtype_of(element)
        # a cir.multi_compute: (dtype, rank) of every result (scalar results are reduce's)
        self.results = [(dtype_of(ir.RankedTensorType(r.type).element_type),
                         ir.RankedTensorType(r.type).rank) for r in op.results] \
            if len(op.results) > 1 or "inits" in op.attributes else None
        # `mut x`: per result, the operand it starts from (-1: zero-filled)
        self.inits = i64_array(op, "inits") or [-1] * len(op.results)
        self.site = sites.add("compute", op.location, tensor="out")
        self.yield_site = yield_site  # the cir.yield of a reduction
        self.yield_dtype: Optional[np.dtype] = None


class Translation:
    """The Python text of a module, the globals it runs with, its sites and computes."""

    def __init__(self, src: Optional[SourceFile]):
        self.sites = Sites(src)
        self.lines: list[str] = []
        self.globals: dict[str, object] = {"np": np, "_s": scalars}
        self.computes: list[ComputeSpec] = []
        self.entry_dtypes: list[np.dtype] = []  # element types of the entry's arguments
        self._names: set[str] = set()
        self._constants: dict[tuple, str] = {}

    def global_name(self, prefix: str, value: object, key: tuple | None = None) -> str:
        """A global of the generated module holding `value` (one per distinct key)."""
        key = key if key is not None else (prefix, type(value).__name__, repr(value))
        if key in self._constants:
            return self._constants[key]
        name = f"{prefix}{len(self._constants)}"
        self._constants[key] = name
        self.globals[name] = value
        return name

    def function_name(self, symbol: str) -> str:
        name = "f_" + re.sub(r"\W", "_", symbol)
        while name in self._names:
            name += "_"
        self._names.add(name)
        return name

    @property
    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


def translate(module: ir.Module, src: Optional[SourceFile]) -> tuple[Translation, str]:
    """The Translation of `module` and the Python name of its entry function (`main`, or
    the one public function)."""
    t = Translation(src)
    funcs = func_by_name(module.operation)
    public = [n for n, f in funcs.items() if "cir.body" not in f.attributes]
    entry = "main" if "main" in public else (public[0] if len(public) == 1 else None)
    if entry is None:
        raise ZynMLError("the interpreter needs a module with one entry function (main); "
                         f"this one has: {', '.join(public) or 'none'}")
    fn = funcs[entry]
    t.entry_dtypes = [dtype_of(ir.RankedTensorType(a.type).element_type
                               if isinstance(a.type, ir.RankedTensorType) else a.type)
                      for a in fn.regions[0].blocks[0].arguments]
    name = FunctionWriter(t, funcs, fn).write()
    return t, name


class FunctionWriter:
    """Writes one func.func as a Python function into a Translation."""

    def __init__(self, t: Translation, funcs: dict, fn: ir.Operation,
                 spec: Optional[ComputeSpec] = None, names: Optional[list[str]] = None):
        self.t = t
        self.funcs = funcs
        self.fn = fn
        self.spec = spec  # set for a body function: the compute that runs it
        self.arg_names = names or []  # source names of a body's arguments
        self.names: dict[ir.Value, str] = {}
        self.shapes: dict[str, list[str]] = {}  # tensor name -> names of its extents
        self.tensor_names: dict[str, str] = {}  # tensor name -> its name in the source
        self.loops: list[tuple[str, str, str]] = []  # enclosing scf.for: (iv, lb, step)
        self.lines: list[str] = []
        self.depth = 1
        self._count = 0

    # ------------------------------------------------------------------ naming

    def value(self, v: ir.Value) -> str:
        return self.names[v]

    def define(self, v: ir.Value, name: Optional[str] = None) -> str:
        if name is None:
            name = f"v{self._count}"
            self._count += 1
        self.names[v] = name
        return name

    def type_name(self, dtype: np.dtype) -> str:
        return self.t.global_name("_t", dtype.type, ("type", str(dtype)))

    def dtype_name(self, dtype: np.dtype) -> str:
        return self.t.global_name("_d", dtype, ("dtype", str(dtype)))

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def site(self, what: str, op: ir.Operation, tensor: str = "", detail=None) -> int:
        return self.t.sites.add(what, op.location, tensor, detail)

    # ------------------------------------------------------------------ functions

    def write(self) -> str:
        symbol = ir.StringAttr(self.fn.attributes["sym_name"]).value
        name = self.t.function_name(symbol)
        block = self.fn.regions[0].blocks[0]
        params = [self.define(arg, f"a{k}") for k, arg in enumerate(block.arguments)]
        self.lines.append(f"def {name}({', '.join(params)}"
                          f"{', _red' if self.spec is not None else ''}):")
        for k, (arg, param) in enumerate(zip(block.arguments, params)):
            if isinstance(arg.type, ir.RankedTensorType):
                self._shape(param, ir.RankedTensorType(arg.type).rank)
                outs = len(self.spec.results) if self.spec and self.spec.results else 1
                is_out = self.spec is not None and k >= len(params) - outs
                if is_out:  # a `mut` input's result goes by the input's name
                    result = k - (len(params) - outs)
                    init = self.spec.inits[result] if result < len(self.spec.inits) else -1
                    shown = self.arg_names[init] if 0 <= init < len(self.arg_names) else "out"
                else:
                    shown = self.arg_names[k] if k < len(self.arg_names) else f"argument {k}"
                self.tensor_names[param] = shown
        self.block(block)
        if len(self.lines) == 1:
            self.line("pass")
        self.t.lines.extend(self.lines + [""])
        return name

    def _shape(self, tensor: str, rank: int) -> None:
        extents = [f"{tensor}_{d}" for d in range(rank)]
        self.shapes[tensor] = extents
        if rank == 1:
            self.line(f"{extents[0]}, = {tensor}.shape")
        elif rank:
            self.line(f"{', '.join(extents)} = {tensor}.shape")

    def block(self, block: ir.Block) -> None:
        for op in block.operations:
            self.op(op.operation)

    def op(self, op: ir.Operation) -> None:
        name = op.name
        if name == "arith.constant":
            self._constant(op)
        elif name in SCALAR_OPS:
            self._scalar(op)
        else:
            method = getattr(self, "_" + name.replace(".", "_"), None)
            if method is None:
                loc = self.t.sites[self.site("op", op)].loc
                raise ZynMLError(f"the interpreter does not run '{name}'", loc)
            method(op)

    # ------------------------------------------------------------------ scalars

    def _constant(self, op: ir.Operation) -> None:
        result = op.results[0]
        value = scalar_constant(op.attributes["value"], result.type)
        if type(value) in (int, bool):  # index and i1 constants: written as literals
            self.define(result, repr(value) if value >= 0 else f"({value})")
            return
        self.define(result, self.t.global_name("_k", value, ("k", str(result.type),
                                                             repr(value))))

    def _scalar(self, op: ir.Operation) -> None:
        operands = [self.value(v) for v in op.operands]
        if op.name in DIVISIONS:
            k = self.site("division", op)
            self.line(f"if {operands[1]} == 0: _sites.division_by_zero({k}, "
                      f"'{op.name[6:]}', {operands[0]})")
        emitter = SCALAR_OPS[op.name]
        if isinstance(emitter, str):
            dtype = None if is_index(op.results[0].type) else dtype_of(op.results[0].type)
            expr = emitter.format(*operands, T=self.type_name(dtype) if dtype else "int")
        else:
            expr = emitter(op, operands, self)
        self.line(f"{self.define(op.results[0])} = {expr}")

    # ------------------------------------------------------------------ control flow

    def _scf_for(self, op: ir.Operation) -> None:
        lb, ub, step = (self.value(v) for v in op.operands[:3])
        body = op.regions[0].blocks[0]
        args = list(body.arguments)
        for init, arg, result in zip(op.operands[3:], args[1:], op.results):
            name = self.define(result)  # the result and the carried value share a name
            self.names[arg] = name
            self.line(f"{name} = {self.value(init)}")
        step_constant = _constant_int(op.operands[2])
        if step_constant is None or step_constant <= 0:
            k = self.site("loop", op)
            self.line(f"if {step} <= 0: _sites.bad_step({k}, {step})")
        iv = self.define(args[0])
        self.line(f"for {iv} in range({lb}, {ub}, {step}):")
        self.depth += 1
        mark = len(self.lines)
        self.loops.append((iv, lb, step))
        self.block(body)
        self.loops.pop()
        if len(self.lines) == mark:
            self.line("pass")
        self.depth -= 1

    def _scf_if(self, op: ir.Operation) -> None:
        for result in op.results:
            self.define(result)
        self.line(f"if {self.value(op.operands[0])}:")
        self._branch(op.regions[0], op)
        if len(op.regions[1].blocks):
            self.line("else:")
            self._branch(op.regions[1], op)

    def _branch(self, region: ir.Region, owner: ir.Operation) -> None:
        self.depth += 1
        mark = len(self.lines)
        self.block(region.blocks[0])
        if len(self.lines) == mark:
            self.line("pass")
        self.depth -= 1

    def _scf_yield(self, op: ir.Operation) -> None:
        parent = op.parent.operation if op.parent is not None else None
        if parent is None or not len(op.operands):
            return
        targets = [self.value(r) for r in parent.results]
        values = [self.value(v) for v in op.operands]
        self.line(f"{', '.join(targets)} = {', '.join(values)}")

    def _func_return(self, op: ir.Operation) -> None:
        values = [self.value(v) for v in op.operands]
        self.line(f"return [{', '.join(values)}]" if self.spec is None else "return")

    # ------------------------------------------------------------------ tensors in bodies

    def _check(self, what: str, op: ir.Operation, tensor: str, indices: list[str]) -> str:
        """A bounds check of `tensor[indices]`; returns the subscript."""
        if not indices:
            return "()"
        extents = self.shapes[tensor]
        conds = " and ".join(f"0 <= {i} < {e}" for i, e in zip(indices, extents))
        k = self.site(what, op, self.tensor_names.get(tensor, "a tensor"))
        subscript = ", ".join(indices)
        self.line(f"if not ({conds}): _sites.out_of_range({k}, {tensor}, ({subscript},))")
        return subscript

    def _cir_load(self, op: ir.Operation) -> None:
        tensor = self.value(op.operands[0])
        index = self._check("read", op, tensor, [self.value(v) for v in op.operands[1:]])
        self.line(f"{self.define(op.results[0])} = {tensor}[{index}]")

    def _cir_store(self, op: ir.Operation) -> None:
        value, tensor = self.value(op.operands[0]), self.value(op.operands[1])
        index = self._check("write", op, tensor, [self.value(v) for v in op.operands[2:]])
        if "combine" in op.attributes:  # a scatter's `x[ids[i]] += v` (min, max): in order
            kind = SCATTER_KINDS[string_attr(op, "combine")]
            template = SCALAR_OPS["arith." + scatter_combiner(
                kind, isinstance(op.operands[0].type, ir.FloatType))]
            self.line(f"{tensor}[{index}] = " + template.format(f"{tensor}[{index}]", value))
            return
        self.line(f"{tensor}[{index}] = {value}")

    def _cir_alloc(self, op: ir.Operation) -> None:
        result = op.results[0]
        name = self.define(result)
        source = string_attr(op, "name") or "a local array"
        self.tensor_names[name] = source
        extents = [self.value(v) for v in op.operands]
        shape = "(" + "".join(f"{e}, " for e in extents) + ")"
        k = self.site("alloc", op, source)
        if extents:
            self.line(f"if min({shape}) < 0: _sites.bad_extent({k}, {shape})")
        dtype = dtype_of(ir.RankedTensorType(result.type).element_type)
        self.line(f"{name} = np.zeros({shape}, {self.dtype_name(dtype)})")
        self._shape(name, len(extents))

    def _cir_barrier(self, op: ir.Operation) -> None:
        """Iterations run one after another: every write before a barrier is done."""

    def _cir_yield(self, op: ir.Operation) -> None:
        spec = self.spec
        if spec is None or spec.reduce is None:
            raise ZynMLError("'cir.yield' outside the body of a reduction",
                             self.t.sites[self.site("yield", op)].loc)
        spec.yield_site = self.site("yield", op, "out")
        spec.yield_dtype = dtype_of(op.operands[0].type)
        trips = [iv if (lb, step) == ("0", "1") else
                 f"({iv} - {lb}) // {step}" for iv, lb, step in self.loops]
        if spec.axis is not None:
            if not 0 <= spec.axis < len(trips):
                raise ZynMLError(f"reduction axis {spec.axis} is out of range: the yield is "
                                 f"inside {len(trips)} loops",
                                 self.t.sites[spec.yield_site].loc)
            trips.pop(spec.axis)
        else:
            trips = []
        position = "(" + "".join(f"{p}, " for p in trips) + ")"
        values = ", ".join(self.value(v) for v in op.operands)
        self.line(f"_red({position}, {values})")

    def _cir_print(self, op: ir.Operation) -> None:
        text = string_attr(op, "format") or ""
        k = self.site("print", op, detail=text)
        values = "".join(f"{self.value(v)}, " for v in op.operands)
        self.line(f"_print({k}, ({values}))")

    def _tensor_dim(self, op: ir.Operation) -> None:
        tensor, axis = (self.value(v) for v in op.operands)
        self.line(f"{self.define(op.results[0])} = {tensor}.shape[{axis}]")

    # ------------------------------------------------------------------ the program function

    def _cir_multi_compute(self, op: ir.Operation) -> None:
        self._cir_compute(op)

    def _cir_compute(self, op: ir.Operation) -> None:
        body_name = ir.FlatSymbolRefAttr(op.attributes["body"]).value
        body = self.funcs.get(body_name)
        if body is None:
            raise ZynMLError(f"'cir.compute' names @{body_name}, which is not in the module")
        spec = ComputeSpec(op, "", self.t.sites, None)
        names = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["names"])] \
            if "names" in op.attributes else []
        writer = FunctionWriter(self.t, self.funcs, body, spec, names)
        spec.body = writer.write()
        self.t.computes.append(spec)
        operands = ", ".join(self.value(v) for v in op.operands)
        results = ", ".join(self.define(r) for r in op.results)
        self.line(f"{results}{',' if len(op.results) > 1 else ''} = "
                  f"_compute{len(self.t.computes) - 1}({operands})")

    def _tensor_extract(self, op: ir.Operation) -> None:
        tensor = self.value(op.operands[0])
        if tensor not in self.shapes:
            self._shape(tensor, ir.RankedTensorType(op.operands[0].type).rank)
        index = self._check("read", op, tensor, [self.value(v) for v in op.operands[1:]])
        self.line(f"{self.define(op.results[0])} = {tensor}[{index}]")

    def _tensor_from_elements(self, op: ir.Operation) -> None:
        t = ir.RankedTensorType(op.results[0].type)
        dtype = self.dtype_name(dtype_of(t.element_type))
        values = ", ".join(self.value(v) for v in op.operands)
        self.line(f"{self.define(op.results[0])} = np.array([{values}], {dtype})"
                  f".reshape({tuple(t.shape)})")

    def _tensor_empty(self, op: ir.Operation) -> None:
        t = ir.RankedTensorType(op.results[0].type)
        dynamic = iter(self.value(v) for v in op.operands)
        shape = [next(dynamic) if ir.ShapedType.is_dynamic_size(d) else str(d)
                 for d in t.shape]
        dtype = self.dtype_name(dtype_of(t.element_type))
        self.line(f"{self.define(op.results[0])} = np.zeros(({''.join(s + ', ' for s in shape)})"
                  f", {dtype})")

    def _linalg_fill(self, op: ir.Operation) -> None:
        value, init = (self.value(v) for v in op.operands)
        self.line(f"{self.define(op.results[0])} = np.full({init}.shape, {value}, "
                  f"{init}.dtype)")

    def _tensor_cast(self, op: ir.Operation) -> None:
        self.define(op.results[0], self.value(op.operands[0]))

    def _tensor_reshape(self, op: ir.Operation) -> None:
        source, shape = (self.value(v) for v in op.operands)
        self.line(f"{self.define(op.results[0])} = {source}.reshape("
                  f"tuple(int(d) for d in {shape}))")

    def _tensor_collapse_shape(self, op: ir.Operation) -> None:
        """Each group of the source's dimensions becomes one (cirgen's reshape with
        run-time sizes collapses all of them)."""
        source = self.value(op.operands[0])
        groups = [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(group)]
                  for group in ir.ArrayAttr(op.attributes["reassociation"])]
        sizes = "".join(f"int(np.prod({source}.shape[{g[0]}:{g[-1] + 1}])), " for g in groups)
        self.line(f"{self.define(op.results[0])} = {source}.reshape(({sizes}))")

    def _tensor_expand_shape(self, op: ir.Operation) -> None:
        """From one dimension (cirgen's reshape with run-time sizes)."""
        dynamic = iter(self.value(v) for v in op.operands[1:])
        sizes = [f"int({next(dynamic)})" if ir.ShapedType.is_dynamic_size(d) else str(d)
                 for d in ir.DenseI64ArrayAttr(op.attributes["static_output_shape"])]
        self.line(f"{self.define(op.results[0])} = {self.value(op.operands[0])}"
                  f".reshape(({''.join(s + ', ' for s in sizes)}))")

    def _tensor_extract_slice(self, op: ir.Operation) -> None:
        source = self.value(op.operands[0])
        dynamic = iter(self.value(v) for v in op.operands[1:])
        parts = []
        for name in ("static_offsets", "static_sizes", "static_strides"):
            values = list(ir.DenseI64ArrayAttr(op.attributes[name]))
            parts.append("(" + "".join(
                (next(dynamic) if v == ir.ShapedType.get_dynamic_size() else str(v)) + ", "
                for v in values) + ")")
        shape = tuple(ir.RankedTensorType(op.results[0].type).shape)
        self.line(f"{self.define(op.results[0])} = _extract_slice({source}, {parts[0]}, "
                  f"{parts[1]}, {parts[2]}, {shape})")


def _constant_int(value: ir.Value) -> Optional[int]:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name != "arith.constant" or not is_index(value.type):
        return None
    return int(ir.IntegerAttr(op.attributes["value"]).value)
