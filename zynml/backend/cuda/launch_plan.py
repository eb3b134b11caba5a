"""Host function after linalg-to-gpu-kernels -> launch plan (JSON-able data).

After bufferization and kernel outlining, what a host function does is: allocate buffers,
take views of them, launch kernels, copy, loop, return. The plan records exactly that, so
that running it needs only a CUDA driver binding (zynml/runtime/cuda/executor.py), not
MLIR. The format, one dict per op, values named "%N":

    {"op": "alloc",  "result": "%3", "shape": [33, 100], "dtype": "float32"}
    {"op": "global", "result": "%4", "name": "g0"}                 (constant data)
    {"op": "view",   "result": "%5", "source": "%3", "offset": X, "sizes": [X..],
                     "strides": [X..]}                             (elements, X: int | "%N";
                     a subview, expand/collapse_shape or reshape: no copy)
    {"op": "launch", "kernel": "k0_pointwise", "grid": [X, X, X], "block": [X, X, X],
                     "shared_bytes": 0, "args": ["%3", "%5", "%6"]}
                     (+ "blocks_per_multiprocessor": K for a grid-stride kernel: the
                     grid's x is capped at K blocks per multiprocessor at run time;
                     + "strategy", "problem": what built the kernel, for tuning)
    {"op": "copy",   "source": "%3", "target": "%7"}
    {"op": "scalar", "result": "%8", "fn": "addi", "args": [X, X]}
    {"op": "tensor_map", "result": "%8", "source": "%3", "box": [128, 64],
                     "swizzle": 128}                               (a TMA descriptor)
    {"op": "for",    "lower": X, "upper": X, "step": X, "iv": "%9", "inits": [X..],
                     "iter_args": ["%10"], "body": [...], "yields": [X..], "results": [..]}
    {"op": "if",     "cond": X, "then": [...], "else": [...]}
                     (a kernel for sizes it needs, and what runs otherwise: a TMA
                     kernel's 16-byte rows; X a "scalar" comparison, 0 or 1)

Run-time sizes (a dynamic dimension, `?` in the IR) take three more steps; a "shape"
of an alloc, an input or an output may then hold "%N" (a value) or None (an input's or
output's size, known only at the call):

    {"op": "dim",    "result": "%8", "source": "%in0", "index": 0}  (a view's size)
    {"op": "alloc",  "result": "%9", "shape": ["%8", 64], "dtype": "float32"}
    {"op": "subview", "result": "%10", "source": "%9", "offsets": [X..],
                     "sizes": [X..], "steps": [int..], "kept": [int..]}
                     (strides: the source's run-time strides times "steps", for the
                     source dimensions in "kept"; offset: the source's + sum(offset_i *
                     source stride_i))
    {"op": "collapse", "result": "%11", "source": "%10", "groups": [[0, 1], [2]]}
    {"op": "expand", "result": "%12", "source": "%10", "groups": [[0, 1], [2]],
                     "sizes": [X..]}           (collapse_shape and expand_shape: views)

Grids and loop bounds from run-time sizes are "scalar" steps. Kernels take every memref
by descriptor, whose sizes and strides are the view's at run time.

Inputs are "%in0".., outputs a list of values; tensor dtypes are static. A
"tensor_map" is the device address of a TMA descriptor of its source view (boxes in the
view's dimension order, 128-byte swizzle or none, out-of-bounds elements read as zero);
kernels take it as a pointer (arg kind "pointer").
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
from mlir import ir

from ...dialects.cir import EQUAL_DIMS_ATTR
from ...lowering.cir_ops import defining_op
from .strategies import BLOCKS_PER_MULTIPROCESSOR_ATTR, PROBLEM_ATTR, STRATEGY_ATTR
from .plan_sizes import (RUN_TIME_VIEWS as _RUN_TIME_VIEWS, PlanError, dim_step,
                         run_time_subview)

# 2: run-time sizes ("dim", "subview", "collapse", "expand"; "%N"/None in shapes)
# 3: "if" steps, and comparisons among the "scalar" fns
PLAN_VERSION = 3

# arith ops on host scalars (index arithmetic of views and loops) -> plan "scalar" fn.
_SCALAR_FNS = {
    "arith.addi": "addi", "arith.subi": "subi", "arith.muli": "muli",
    "arith.divsi": "divsi", "arith.divui": "divui", "arith.remsi": "remsi",
    "arith.remui": "remui", "arith.floordivsi": "floordivsi", "arith.ceildivsi": "ceildivsi",
    "arith.maxsi": "maxsi", "arith.minsi": "minsi", "arith.index_cast": "copy",
    "arith.index_castui": "copy", "arith.extsi": "copy", "arith.extui": "copy",
    "arith.trunci": "copy", "arith.addf": "addf", "arith.subf": "subf", "arith.mulf": "mulf",
    "arith.divf": "divf", "arith.andi": "andi", "arith.ori": "ori",
    "arith.sitofp": "float", "arith.uitofp": "float", "arith.extf": "copy",
    "arith.truncf": "copy", "math.sqrt": "sqrt",
}
# arith.cmpi's predicates on sizes -> plan "scalar" fn (1 or 0)
_COMPARE_FNS = {"eq": "eq", "ne": "ne", "slt": "lt", "sle": "le", "sgt": "gt", "sge": "ge",
                "ult": "lt", "ule": "le", "ugt": "gt", "uge": "ge"}
# arith.cmpf's ordered predicates (false where an operand is NaN, as Python's compare):
# a kernel's test of a scale computed on the host
_FLOAT_COMPARE_FNS = {"oeq": "eq", "one": "ne", "olt": "lt", "ole": "le", "ogt": "gt",
                      "oge": "ge"}


def element_dtype(type_: ir.Type) -> str:
    text = str(type_)
    table = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
             "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
             "index": "int64", "ui8": "uint8", "ui16": "uint16", "ui32": "uint32",
             "ui64": "uint64"}
    if text not in table:
        raise PlanError(f"element type {text} has no plan dtype")
    return table[text]


class _Extractor:
    def __init__(self, module: ir.Operation):
        self.names: dict = {}
        self.globals: dict[str, dict[str, Any]] = {}
        self.global_data: dict[str, np.ndarray] = {}
        self._global_ops = {}
        for op in module.regions[0].blocks[0].operations:
            op = op.operation
            if op.name == "memref.global":
                self._global_ops[ir.StringAttr(op.attributes["sym_name"]).value] = op

    def name(self, value: ir.Value) -> Any:
        if value in self.names:
            return self.names[value]
        owner = defining_op(value)
        if owner is not None and owner.name == "arith.constant":
            return _constant(owner)
        raise PlanError("a host value the plan does not know",
                        owner.location if owner is not None else None)

    def define(self, value: ir.Value) -> str:
        name = f"%{len(self.names)}"
        self.names[value] = name
        return name

    def block(self, block: ir.Block) -> list[dict]:
        ops: list[dict] = []
        for op in block.operations:
            op = op.operation
            step = self.op(op)
            if step is not None:
                ops.append(step)
        return ops

    def op(self, op: ir.Operation) -> dict | None:
        name = op.name
        if name in ("arith.constant", "memref.dealloc", "scf.yield", "func.return"):
            return None
        if name in ("memref.alloc", "memref.alloca"):
            memref = ir.MemRefType(op.results[0].type)
            sizes = iter(op.operands)  # one per dynamic dimension, in order
            shape = [self.name(next(sizes)) if _dynamic(d) else d for d in memref.shape]
            return {"op": "alloc", "result": self.define(op.results[0]),
                    "shape": shape, "dtype": element_dtype(memref.element_type)}
        if name == "memref.dim":
            return self._dim(op)
        if name == "memref.get_global":
            return None if _only_a_shape(op) else self._global(op)
        if name == "memref.cast" and isinstance(op.results[0].type, ir.UnrankedMemRefType):
            self.names[op.results[0]] = self.name(op.operands[0])  # what a TMA map reads
            return None
        if name == "nvgpu.tma.create.descriptor":
            return self._tensor_map(op)
        if name in ("memref.subview", "memref.expand_shape", "memref.collapse_shape",
                    "memref.cast", "memref.reinterpret_cast"):
            return self._view(op)
        if name == "memref.reshape":
            return self._reshape(op)
        if name == "builtin.unrealized_conversion_cast":  # i1 memref seen as i8: same bytes
            self.names[op.results[0]] = self.name(op.operands[0])
            return None
        if name == "gpu.launch_func":
            return self._launch(op)
        if name == "memref.copy":
            return {"op": "copy", "source": self.name(op.operands[0]),
                    "target": self.name(op.operands[1])}
        if name in _SCALAR_FNS:
            return {"op": "scalar", "result": self.define(op.results[0]),
                    "fn": _SCALAR_FNS[name], "args": [self.name(v) for v in op.operands]}
        if name == "arith.cmpi":
            return {"op": "scalar", "result": self.define(op.results[0]),
                    "fn": _COMPARE_FNS[_predicate(op)],
                    "args": [self.name(v) for v in op.operands]}
        if name == "arith.cmpf" and _float_predicate(op) in _FLOAT_COMPARE_FNS:
            return {"op": "scalar", "result": self.define(op.results[0]),
                    "fn": _FLOAT_COMPARE_FNS[_float_predicate(op)],
                    "args": [self.name(v) for v in op.operands]}
        if name == "scf.for":
            return self._for(op)
        if name == "scf.if" and not list(op.results):
            return {"op": "if", "cond": self.name(op.operands[0]),
                    "then": self.block(op.regions[0].blocks[0]),
                    "else": self.block(op.regions[1].blocks[0])
                    if len(op.regions[1].blocks) else []}
        if name == "memref.load":  # an integer input's value, in device memory
            raise PlanError("an integer input sizes this program, and a compile that does "
                            "not know its value would read it from the GPU on the host: "
                            "give its value and the inputs' shapes (zynml compile "
                            "--set NAME=VALUE --shape NAME=DIMS[:DTYPE])", op.location)
        raise PlanError(f"'{name}' on the host has no launch-plan equivalent", op.location)

    def _dim(self, op: ir.Operation) -> dict:
        return dim_step(self, op)

    def _global(self, op: ir.Operation) -> dict:
        symbol = ir.FlatSymbolRefAttr(op.attributes["name"]).value
        if symbol not in self.globals:
            decl = self._global_ops[symbol]
            memref = ir.MemRefType(ir.TypeAttr(decl.attributes["type"]).value)
            dtype = element_dtype(memref.element_type)
            data = _dense_to_numpy(decl.attributes["initial_value"], memref.shape, dtype)
            key = f"g{len(self.globals)}"
            self.globals[symbol] = {"name": key, "shape": list(memref.shape), "dtype": dtype}
            self.global_data[key] = data
        return {"op": "global", "result": self.define(op.results[0]),
                "name": self.globals[symbol]["name"]}

    def _tensor_map(self, op: ir.Operation) -> dict:
        descriptor = str(op.results[0].type)
        swizzle = re.search(r"swizzle\s*=\s*(\w+)", descriptor)
        swizzle = {"none": 0, "swizzle_32b": 32, "swizzle_64b": 64,
                   "swizzle_128b": 128}.get(swizzle.group(1) if swizzle else "", None)
        if swizzle is None or not re.search(r"oob\s*=\s*zero", descriptor) or \
                not re.search(r"interleave\s*=\s*none", descriptor):
            raise PlanError(f"a TMA descriptor the runtime cannot make: {descriptor}",
                            op.location)
        return {"op": "tensor_map", "result": self.define(op.results[0]),
                "source": self.name(op.operands[0]),
                "box": [self.name(v) for v in list(op.operands)[1:]], "swizzle": swizzle}

    def _view(self, op: ir.Operation) -> dict:
        result = ir.MemRefType(op.results[0].type)
        strides, offset = result.get_strides_and_offset()
        dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
        if offset == dynamic or any(s == dynamic for s in strides) or \
                any(d == ir.ShapedType.get_dynamic_size() for d in result.shape):
            if op.name in _RUN_TIME_VIEWS:
                return _RUN_TIME_VIEWS[op.name](self, op)
            if op.name != "memref.subview":
                raise PlanError(f"'{op.name}' with a dynamic layout on the host", op.location)
            return self._dynamic_subview(op)
        return {"op": "view", "result": self.define(op.results[0]),
                "source": self.name(op.operands[0]), "offset": offset,
                "sizes": list(result.shape), "strides": list(strides), "absolute": True}

    def _reshape(self, op: ir.Operation) -> dict:
        """`memref.reshape` (the language's `reshape`) of a row-major buffer: the same
        elements, read with the new shape's row-major strides, from where the source
        starts (a relative view of offset 0)."""
        source = ir.MemRefType(op.operands[0].type)
        result = ir.MemRefType(op.results[0].type)
        strides, _ = source.get_strides_and_offset()
        dynamic = ir.ShapedType.get_dynamic_size()
        if dynamic in list(source.shape) + list(result.shape) or \
                list(strides) != _row_major(list(source.shape)):
            raise PlanError("'memref.reshape' of a strided or dynamic buffer on the host",
                            op.location)
        return {"op": "view", "result": self.define(op.results[0]),
                "source": self.name(op.operands[0]), "offset": 0,
                "sizes": list(result.shape), "strides": _row_major(list(result.shape))}

    def _dynamic_subview(self, op: ir.Operation) -> dict:
        """A subview whose offsets are loop variables: offset = source offset +
        sum(offset_i * source stride_i), computed by the executor."""
        source = ir.MemRefType(op.operands[0].type)
        src_strides, _ = source.get_strides_and_offset()
        dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
        static_offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
        static_sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
        static_strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
        segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        dyn_offsets = list(op.operands)[1:1 + segments[1]]
        if segments[2] or segments[3] or dynamic in src_strides:
            return run_time_subview(self, op)
        offsets = []
        for value in static_offsets:
            offsets.append(self.name(dyn_offsets.pop(0)) if value == dynamic else value)
        result = ir.MemRefType(op.results[0].type)
        kept = _kept_dims(static_sizes, list(result.shape))
        return {"op": "view", "result": self.define(op.results[0]),
                "source": self.name(op.operands[0]), "offsets": offsets,
                "sizes": list(result.shape),
                "strides": [src_strides[d] * static_strides[d] for d in kept],
                "source_strides": src_strides}

    # gpu.launch_func's operand groups, in order (its operandSegmentSizes).
    _LAUNCH_SEGMENTS = ("async", "gx", "gy", "gz", "bx", "by", "bz", "cx", "cy", "cz",
                        "shared", "args", "object")

    def _launch(self, op: ir.Operation) -> dict:
        sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        if len(sizes) != len(self._LAUNCH_SEGMENTS):
            raise PlanError("unexpected gpu.launch_func operand layout", op.location)
        groups, operands, start = {}, list(op.operands), 0
        for key, size in zip(self._LAUNCH_SEGMENTS, sizes):
            groups[key] = operands[start:start + size]
            start += size
        if groups["async"] or groups["object"] or groups["cx"]:
            raise PlanError("async or clustered gpu.launch_func on the host", op.location)
        kernel = str(ir.SymbolRefAttr(op.attributes["kernel"])).split("::@")[-1]
        shared = groups["shared"]
        step = {"op": "launch", "kernel": kernel,
                "grid": [self.name(groups[k][0]) for k in ("gx", "gy", "gz")],
                "block": [self.name(groups[k][0]) for k in ("bx", "by", "bz")],
                "shared_bytes": self.name(shared[0]) if shared else 0,
                "args": [self.name(v) for v in groups["args"]],
                "arg_kinds": [_param_kind(v.type) for v in groups["args"]]}
        if BLOCKS_PER_MULTIPROCESSOR_ATTR in op.attributes:
            step["blocks_per_multiprocessor"] = ir.IntegerAttr(
                op.attributes[BLOCKS_PER_MULTIPROCESSOR_ATTR]).value
        for key, attr in (("strategy", STRATEGY_ATTR), ("problem", PROBLEM_ATTR)):
            if attr in op.attributes:  # what built the kernel, for `zynml tune`
                step[key] = ir.StringAttr(op.attributes[attr]).value
        return step

    def _for(self, op: ir.Operation) -> dict:
        lower, upper, step, *inits = op.operands
        body = op.regions[0].blocks[0]
        iv, *iter_args = body.arguments
        step_dict = {"op": "for", "lower": self.name(lower), "upper": self.name(upper),
                     "step": self.name(step), "inits": [self.name(v) for v in inits],
                     "iv": self.define(iv), "iter_args": [self.define(a) for a in iter_args]}
        step_dict["body"] = self.block(body)
        terminator = list(body.operations)[-1].operation
        step_dict["yields"] = [self.name(v) for v in terminator.operands]
        step_dict["results"] = [self.define(r) for r in op.results]
        return step_dict


def extract_plan(module: ir.Operation, func_name: str = "main") -> tuple[dict, dict]:
    """(plan, global arrays by name) for the host function `func_name` of `module`."""
    extractor = _Extractor(module)
    func = None
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == func_name:
            func = op
    if func is None:
        raise PlanError(f"no host function '{func_name}'")
    entry = func.regions[0].blocks[0]
    inputs = []
    for i, arg in enumerate(entry.arguments):
        extractor.names[arg] = f"%in{i}"
        inputs.append(_value_spec(arg.type))
    body = extractor.block(entry)
    terminator = list(entry.operations)[-1].operation
    outputs = [extractor.name(v) for v in terminator.operands]
    attrs = func.attributes
    input_names = _string_list(attrs, "zynml.inputs")
    output_names = _string_list(attrs, "zynml.outputs")
    plan = {
        "version": PLAN_VERSION,
        "input_names": input_names,
        "output_names": output_names,
        "inputs": inputs,
        "outputs": [dict(_value_spec(v.type), value=name,
                         **_updates(name, k, input_names, output_names))
                    for k, (v, name) in enumerate(zip(terminator.operands, outputs))],
        # bool scalars cross the boundary as 0-d i8 (cirgen): a loaded artifact gives bools
        "bool_outputs": _string_list(attrs, "zynml.bool_outputs"),
        # run-time sizes the call must check equal (cirgen's cir.equal_dims): the kernels
        # read each input over the size's one value
        "equal_dims": equal_dims(attrs),
        "globals": list(extractor.globals.values()),
        "body": body,
    }
    return plan, extractor.global_data


def _updates(value: Any, k: int, input_names: list, output_names: list) -> dict:
    """`{"updates": i}` for output k when it is input i's own buffer, written in place
    (`compute(mut x)`, zynml/backend/cuda/inplace.py): the run time returns the caller's
    array. Else nothing."""
    if not isinstance(value, str) or not value.startswith("%in") or k >= len(output_names):
        return {}
    i = int(value[3:])
    return {"updates": i} if i < len(input_names) and \
        input_names[i] == output_names[k] else {}


def _float_predicate(op: ir.Operation) -> str:
    """arith.cmpf's predicate by name."""
    value = ir.IntegerAttr(op.attributes["predicate"]).value
    return ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
            "ult", "ule", "une", "uno", "true")[value]


def _predicate(op: ir.Operation) -> str:
    """arith.cmpi's predicate by name (its attribute is an i64 enum value)."""
    value = ir.IntegerAttr(op.attributes["predicate"]).value
    return ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")[value]


def _value_spec(type_: ir.Type) -> dict:
    if isinstance(type_, ir.MemRefType):
        memref = ir.MemRefType(type_)
        return {"kind": "tensor", "shape": [None if _dynamic(d) else d for d in memref.shape],
                "dtype": element_dtype(memref.element_type)}
    return {"kind": "scalar", "dtype": element_dtype(type_)}


def _param_kind(type_: ir.Type) -> str:
    """How a kernel argument is passed: "memref:RANK" (a descriptor), "pointer" (a device
    address: a TMA descriptor's) or a scalar dtype."""
    if isinstance(type_, ir.MemRefType):
        return f"memref:{ir.MemRefType(type_).rank}"
    if str(type_) == "!llvm.ptr":
        return "pointer"
    return element_dtype(type_)


def equal_dims(attrs) -> list[list[list[int]]]:
    """cir.equal_dims as groups of [input, dim]."""
    if EQUAL_DIMS_ATTR not in attrs:
        return []
    groups = [list(ir.DenseI64ArrayAttr(g)) for g in ir.ArrayAttr(attrs[EQUAL_DIMS_ATTR])]
    return [[[flat[k], flat[k + 1]] for k in range(0, len(flat), 2)] for flat in groups]


def _string_list(attrs, key: str) -> list[str]:
    if key not in attrs:
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[key])]


def _constant(op: ir.Operation) -> Any:
    attr = op.attributes["value"]
    if isinstance(attr, ir.IntegerAttr):
        return ir.IntegerAttr(attr).value
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    raise PlanError(f"host constant {attr} is not a scalar", op.location)


def _dynamic(size: int) -> bool:
    return size == ir.ShapedType.get_dynamic_size()


def _only_a_shape(op: ir.Operation) -> bool:
    """Is this constant read only as the shape of reshapes (static: views need none)?"""
    uses = list(op.results[0].uses)
    return bool(uses) and all(use.owner.name == "memref.reshape" and use.operand_number == 1
                              for use in uses)


def _row_major(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


def _kept_dims(static_sizes: list[int], result_shape: list[int]) -> list[int]:
    """Which source dims a (possibly rank-reducing) subview keeps."""
    kept, r = [], 0
    for d, size in enumerate(static_sizes):
        if r < len(result_shape) and size == result_shape[r] and \
                (size != 1 or len(static_sizes) - d <= len(result_shape) - r):
            kept.append(d)
            r += 1
    return kept


def _dense_to_numpy(attr: ir.Attribute, shape: list[int], dtype: str) -> np.ndarray:
    """A constant's elements; bfloat16 as their bits (uint16: .npy has no bfloat16)."""
    if dtype == "bfloat16":
        return _bfloat16_bits(attr).reshape(shape)
    np_dtype = np.dtype(dtype)
    dense = ir.DenseElementsAttr(attr)
    if dense.is_splat:
        splat = dense.get_splat_value()
        value = splat.value if hasattr(splat, "value") else splat
        return np.full(shape, value, dtype=np_dtype)
    return np.array(dense, copy=True).astype(np_dtype).reshape(shape)


def _bfloat16_bits(attr: ir.Attribute) -> np.ndarray:
    """The bits of a bf16 constant. The bindings read no bf16 elements (no buffer format,
    no Python float), so `arith.bitcast` to i16, which canonicalize folds, reads them."""
    from mlir.passmanager import PassManager
    with attr.context, ir.Location.unknown():
        tensor_type = ir.RankedTensorType(ir.DenseElementsAttr(attr).type)
        bits_type = ir.RankedTensorType.get(tensor_type.shape, ir.IntegerType.get_signless(16))
        module = ir.Module.parse(
            f"func.func @bits() -> {bits_type} {{\n"
            f"  %c = arith.constant {attr}\n"
            f"  %b = arith.bitcast %c : {tensor_type} to {bits_type}\n"
            f"  return %b : {bits_type}\n}}")
        PassManager.parse("builtin.module(canonicalize)").run(module.operation)
    func = module.body.operations[0]
    value = func.regions[0].blocks[0].operations[-1].operands[0].owner
    folded = ir.DenseElementsAttr(value.attributes["value"])
    if folded.is_splat:
        return np.full(tensor_type.shape, folded.get_splat_value().value, np.int64).astype(
            np.uint16)
    return np.array(folded, copy=True).view(np.uint16)
