"""cir-insert-checks: checked mode's run-time checks (zynml/checks.py), as more computes.

For every read (and write of a `mut` input: a scatter's, `x[ids[i]] += v`, or one at a
run-time position, `x[pos, i] = v`) whose index is not proven in range, and every
integer division whose divisor is not a nonzero constant, a `reduce(max)` compute over
the loops around it yields a violation code where the check fails (-1 where it holds);
main returns the largest code as one more result, named `zynml.checks`, and the check
table (kind, source position, tensor, dimension, size) goes into the module attribute
`zynml.checks`, one JSON text, for the driver to keep beside the artifact. Divisors
become `d == 0 ? 1 : d` so that the run itself cannot trap; the reads need nothing:
cir-to-linalg clamps every gather into its tensor. Run only in checked mode: the usual
pipeline never sees it.

    func.func private @y_body(%x: tensor<4xf32>, %idx: tensor<5xi64>, %out: tensor<5xf32>) {
      scf.for %i = %c0 to %c5 step %c1 {
        %j = "cir.load"(%idx, %i) ...        %j_ = arith.index_cast %j : i64 to index
        %v = "cir.load"(%x, %j_) ...         "cir.store"(%v, %out, %i) ...
  gets
    %c = "cir.compute"(%x, %idx) {kind = "reduce", reduce = "max", body = @y_body_check0}
    func.func private @y_body_check0(%x, %idx, %out: tensor<i64>) {
      scf.for %i = %c0 to %c5 step %c1 {
        %j = "cir.load"(%idx, %i) ...  %j_ = arith.index_cast ...
        %bad = (%j_ < 0) or (%j_ >= 4) ...  "cir.yield"(select(%bad, code, -1))
    func.func @main(...) -> (tensor<5xf32>, tensor<i64>)   // zynml.outputs = [.., "zynml.checks"]

A check whose index is computed from something a flat copy of the loops cannot rebuild
(a loop-carried value, a local array) is left out: its read stays clamped, unreported.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, func, scf, tensor

from ..checks import INDEX_BIAS, MAX_CHECKS, OUTPUT_NAME, Check, priority, table_to_json
from ..lowering.cir_ops import (body_of, clone_op, compute_ops, constant_int, entry_block,
                                func_by_name, set_function_type, string_array)
from .cir_verify import verify_bodies
from .pipeline import fail

NAME = "cir-insert-checks"
TABLE_ATTR = "zynml.checks"

_DIVISIONS = {"arith.divsi": "division", "arith.divui": "division",
              "arith.floordivsi": "division", "arith.ceildivsi": "division",
              "arith.ceildivui": "division", "arith.remsi": "remainder",
              "arith.remui": "remainder"}
_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


@dataclass
class Options:
    pass


@dataclass
class _Site:
    check: Check
    op: ir.Operation     # the cir.load or the division
    value: ir.Value      # the index read at, or the divisor
    size: int = 0        # a read's dimension size


class _Unsupported(Exception):
    """The check's values cannot be rebuilt in a flat loop nest."""


def run(module: ir.Operation, options: Options) -> None:
    verify_bodies(module)
    funcs = func_by_name(module)
    main_computes = [c for c in compute_ops(module) if c.parent.name == "func.func"]
    sites = [(c, site) for c in main_computes for site in _sites(c, body_of(c, funcs))]
    if not sites:
        return
    if len(sites) > MAX_CHECKS:
        raise fail(sites[0][1].op.location, f"checked mode handles at most {MAX_CHECKS} "
                                            f"checks; this program has {len(sites)}")
    for _, site in sites:
        if site.check.kind not in ("read", "write"):
            _make_divisor_safe(site.op)
    table, results = [], {}
    for compute, site in sites:
        result = _check_compute(compute, body_of(compute, funcs), site, len(table), module)
        if result is not None:
            table.append(site.check)
            main = compute.parent.operation
            results.setdefault(ir.StringAttr(main.attributes["sym_name"]).value,
                               (main, []))[1].append(result)
    if not table:
        return
    _finish_main(results.values())
    module.attributes[TABLE_ATTR] = ir.StringAttr.get(table_to_json(table))


# ------------------------------------------------------------------ finding the checks

def _sites(compute: ir.Operation, body: ir.Operation) -> list[_Site]:
    names = string_array(compute, "names") or []
    args = list(entry_block(body).arguments)
    ranges = _Ranges()
    found = []
    for op in _walk(body):
        if op.name == "cir.load":
            source = op.operands[0]
            shape = ir.RankedTensorType(source.type).shape
            name = _tensor_name(source, args, names)
            for dim, (index, size) in enumerate(zip(op.operands[1:], shape)):
                if ir.ShapedType.is_dynamic_size(size):
                    continue
                known = ranges.of(index)
                if known is not None and 0 <= known[0] and known[1] < size:
                    continue
                found.append(_Site(Check("read", *_position(op), tensor=name, dim=dim,
                                         size=size), op, index, size))
        elif op.name == "cir.store":
            found.extend(_write_sites(compute, op, args, names, ranges))
        elif op.name in _DIVISIONS:
            if constant_int(op.operands[1]) not in (None, 0):
                continue
            found.append(_Site(Check(_DIVISIONS[op.name], *_position(op)), op,
                               op.operands[1]))
    return found


def _write_sites(compute: ir.Operation, store: ir.Operation, args: list,
                 names: list[str], ranges: "_Ranges") -> list[_Site]:
    """The indices of a write into a `mut` input not proven in range: a scatter's
    (`x[ids[i], d] += v`, a store with `combine`) or a run-time position's
    (`cache[b, pos, e] = v`), checked against that input's shape (a block's outputs are
    its body's last arguments, one `inits` entry each: -1 for a new output)."""
    outs = args[len(args) - len(compute.results):]
    if "inits" not in compute.attributes or store.operands[1] not in outs:
        return []
    inits = list(ir.DenseI64ArrayAttr(compute.attributes["inits"]))
    slot = inits[outs.index(store.operands[1])]
    if slot < 0:
        return []
    init = args[slot]
    shape = ir.RankedTensorType(init.type).shape
    name = _tensor_name(init, args, names)
    found = []
    for dim, (index, size) in enumerate(zip(store.operands[2:], shape)):
        known = ranges.of(index)
        if ir.ShapedType.is_dynamic_size(size) or \
                known is not None and 0 <= known[0] and known[1] < size:
            continue
        found.append(_Site(Check("write", *_position(store), tensor=name, dim=dim,
                                 size=size), store, index, size))
    return found


def _walk(op: ir.Operation):
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child.operation
                yield from _walk(child.operation)


def _tensor_name(source: ir.Value, args: list, names: list[str]) -> str:
    if isinstance(source, ir.BlockArgument) and source.owner == args[0].owner:
        k = source.arg_number
        return "out" if k == len(args) - 1 else names[k] if k < len(names) else f"input {k}"
    owner = source.owner
    if hasattr(owner, "name") and owner.name == "cir.alloc" and "name" in owner.attributes:
        return ir.StringAttr(owner.attributes["name"]).value
    return "a tensor"


def _position(op: ir.Operation) -> tuple[str, int, int]:
    match = _FILE_LOC.search(str(op.location))
    if match is None:
        return "<unknown>", 0, 0
    return match.group(1), int(match.group(2)), int(match.group(3))


class _Ranges:
    """Intervals of index and integer values in a body: what proves a read in range."""

    def __init__(self):
        self.memo: dict = {}

    def of(self, value: ir.Value) -> Optional[tuple[int, int]]:
        if value not in self.memo:
            self.memo[value] = None  # a cycle (none in SSA, but be safe) proves nothing
            self.memo[value] = self._range(value)
        return self.memo[value]

    def _range(self, value: ir.Value) -> Optional[tuple[int, int]]:
        constant = constant_int(value)
        if constant is not None:
            return constant, constant
        if isinstance(value, ir.BlockArgument):
            loop = value.owner.owner
            if loop.name != "scf.for" or value.arg_number != 0:
                return None
            lo, hi = self.of(loop.operands[0]), self.of(loop.operands[1])
            if lo is None or hi is None:
                return None
            return lo[0], max(lo[0], hi[1] - 1)
        op = value.owner
        name = op.name
        if name in ("arith.index_cast", "arith.extsi"):
            return self.of(op.operands[0])
        if name in ("arith.index_castui", "arith.extui"):
            r = self.of(op.operands[0])
            return r if r is not None and r[0] >= 0 else None
        if name == "arith.select":
            a, b = self.of(op.operands[1]), self.of(op.operands[2])
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if name in ("arith.addi", "arith.subi", "arith.muli", "arith.maxsi", "arith.minsi"):
            a, b = self.of(op.operands[0]), self.of(op.operands[1])
            if a is None or b is None:
                return None
            if name == "arith.addi":
                return a[0] + b[0], a[1] + b[1]
            if name == "arith.subi":
                return a[0] - b[1], a[1] - b[0]
            if name == "arith.maxsi":
                return max(a[0], b[0]), max(a[1], b[1])
            if name == "arith.minsi":
                return min(a[0], b[0]), min(a[1], b[1])
            ends = [x * y for x in a for y in b]
            return min(ends), max(ends)
        if name in ("arith.remsi", "arith.remui"):
            a, c = self.of(op.operands[0]), constant_int(op.operands[1])
            if a is None or c is None or c <= 0:
                return None
            return (0, min(a[1], c - 1)) if a[0] >= 0 else (-(c - 1), c - 1)
        return None


# ------------------------------------------------------------------ building the checks

def _make_divisor_safe(op: ir.Operation) -> None:
    """`a / d` -> `a / (d == 0 ? 1 : d)`: a zero divisor is reported, never executed."""
    divisor = op.operands[1]
    with ir.InsertionPoint(op), op.location:
        zero = arith.ConstantOp(divisor.type, 0).result
        one = arith.ConstantOp(divisor.type, 1).result
        is_zero = arith.CmpIOp(arith.CmpIPredicate.eq, divisor, zero).result
        op.operands[1] = arith.SelectOp(is_zero, one, divisor).result


def _check_compute(compute: ir.Operation, body: ir.Operation, site: _Site, k: int,
                   module: ir.Operation) -> Optional[ir.Value]:
    """A reduce(max) compute yielding check `k`'s codes, before `compute`; None when its
    values cannot be rebuilt (the check is left out)."""
    i64 = ir.IntegerType.get_signless(64)
    out_type = ir.RankedTensorType.get([], i64)
    args = list(entry_block(body).arguments)
    inputs = args[:len(args) - len(compute.results)]  # the body's outputs come last
    name = f"{ir.StringAttr(body.attributes['sym_name']).value}_check{k}"
    with ir.InsertionPoint(module.regions[0].blocks[0]), body.location:
        fn = func.FuncOp(name, ([a.type for a in inputs] + [out_type], []))
    fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
    fn.attributes["cir.body"] = ir.UnitAttr.get()
    block = fn.add_entry_block()
    with ir.InsertionPoint(block), site.op.location:
        ret = func.ReturnOp([])
    try:
        _Slice(inputs, list(block.arguments)[:-1], site).build(ret, priority(k))
    except _Unsupported:
        fn.operation.erase()
        return None
    attrs = {key: compute.attributes[key] for key in ("operandSegmentSizes", "names")
             if key in compute.attributes}
    attrs.update(kind=ir.StringAttr.get("reduce"), reduce=ir.StringAttr.get("max"),
                 body=ir.FlatSymbolRefAttr.get(name), out_dims=ir.DenseI64ArrayAttr.get([]))
    with ir.InsertionPoint(compute), site.op.location:
        return ir.Operation.create("cir.compute", results=[i64],
                                   operands=list(compute.operands), attributes=attrs).result


class _Slice:
    """The loops around a check and the values it needs, copied flat into a new body:
    every `if` around it becomes part of the yielded condition."""

    def __init__(self, old_args: list, new_args: list, site: _Site):
        """`old_args`: the body's inputs (not its outputs, nor what the body computes
        from them); `new_args`: the check's, the same in order."""
        self.map = dict(zip(old_args, new_args))
        self.inputs = set(old_args)
        self.site = site

    def build(self, before: ir.Operation, high_bits: int) -> None:
        chain, op = [], self.site.op
        while op.parent.name != "func.func":
            chain.append((op.parent, op))
            op = op.parent
        point = ir.InsertionPoint(before)
        conditions = []
        for parent, child in reversed(chain):
            with point, child.location:
                if parent.name == "scf.for":
                    bounds = [self.value(v, point) for v in parent.operands[:3]]
                    loop = scf.ForOp(*bounds)
                    self.map[parent.regions[0].blocks[0].arguments[0]] = \
                        loop.induction_variable
                    with ir.InsertionPoint(loop.body):
                        point = ir.InsertionPoint(scf.YieldOp([]))
                elif parent.name == "scf.if":
                    condition = self.value(parent.operands[0], point)
                    in_then = child.block.region == parent.regions[0]
                    conditions.append(condition if in_then else _not(condition))
                else:
                    raise _Unsupported(parent.name)
        with point, self.site.op.location:
            ir.Operation.create("cir.yield", results=[],
                                operands=[self._code(point, conditions, high_bits)])

    def _code(self, point, conditions: list, high_bits: int) -> ir.Value:
        i64 = ir.IntegerType.get_signless(64)
        site = self.site
        checked = self.value(site.value, point)
        if site.check.kind in ("read", "write"):
            index = _as_i64(checked)
            bad = arith.OrIOp(_cmp("slt", index, _const(i64, 0)),
                              _cmp("sge", index, _const(i64, site.size))).result
            shown = index
        else:
            bad = _cmp("eq", checked, _const(checked.type, 0))
            shown = _as_i64(self.value(site.op.operands[0], point))
        for condition in conditions:
            bad = arith.AndIOp(bad, condition).result
        shown = arith.MinSIOp(arith.MaxSIOp(shown, _const(i64, -INDEX_BIAS)).result,
                              _const(i64, INDEX_BIAS - 1)).result
        code = arith.AddIOp(shown, _const(i64, INDEX_BIAS + high_bits)).result
        return arith.SelectOp(bad, code, _const(i64, -1)).result

    def value(self, value: ir.Value, point: ir.InsertionPoint) -> ir.Value:
        if value in self.map:
            return self.map[value]
        if isinstance(value, ir.BlockArgument):
            raise _Unsupported("a loop-carried value or `out`")
        op = value.owner
        if len(op.regions) or len(op.results) != 1 or op.name.startswith("cir.") and (
                op.name != "cir.load" or op.operands[0] not in self.inputs):
            raise _Unsupported(op.name)
        operands = [self.value(v, point) for v in op.operands]
        with point:
            self.map[value] = clone_op(op, operands).results[0]
        return self.map[value]


def _finish_main(results) -> None:
    """Main returns the largest code of its checks as one more result, `zynml.checks`."""
    for fn, values in results:
        block = entry_block(fn)
        ret = block.operations[len(block.operations) - 1]
        with ir.InsertionPoint(ret), ret.location:
            largest = values[0]
            for value in values[1:]:
                largest = arith.MaxSIOp(largest, value).result
            packed = tensor.FromElementsOp(ir.RankedTensorType.get([], largest.type),
                                           [largest]).result
            func.ReturnOp(list(ret.operands) + [packed])
        ret.erase()
        set_function_type(fn, [a.type for a in block.arguments],
                          [v.type for v in block.operations[len(block.operations) - 1].operands])
        names = string_array(fn, "zynml.outputs") or []
        fn.attributes["zynml.outputs"] = ir.ArrayAttr.get(
            [ir.StringAttr.get(n) for n in names + [OUTPUT_NAME]])


def _const(ty: ir.Type, value: int) -> ir.Value:
    return arith.ConstantOp(ty, value).result


def _cmp(predicate: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.CmpIOp(getattr(arith.CmpIPredicate, predicate), a, b).result


def _not(condition: ir.Value) -> ir.Value:
    return arith.XOrIOp(condition, _const(condition.type, 1)).result


def _as_i64(value: ir.Value) -> ir.Value:
    i64 = ir.IntegerType.get_signless(64)
    if isinstance(value.type, ir.IndexType):
        return arith.IndexCastOp(i64, value).result
    width = ir.IntegerType(value.type).width
    if width == 64:
        return value
    return (arith.ExtSIOp(i64, value) if width > 1 else arith.ExtUIOp(i64, value)).result
