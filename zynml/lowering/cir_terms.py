"""SSA values of a cir body function as hashable trees, for recognising computations.

A body written the way the spec writes attention computes the same score in three loops;
a raising pass needs to see that those three computations are one. `Terms.of(value)`
turns a value into a nested tuple:

    ("const", 0.0, "f32")                   a constant (index values folded when static)
    ("iv", n) / ("acc", n, k)               variable / k-th accumulator of the loop n loops
                                            out from here (de Bruijn: a loop's tree reads
                                            the same wherever it is nested)
    ("for", lb, ub, step, inits, k, yields) k-th result of an scf.for
    ("if", cond, then_yields, else_yields)  an scf.if result
    ("free", n)                             a value from outside: `Terms.free[n]` is it
    (op name, attributes, operands...)      any other op

Two loops computing the same thing give equal trees, whatever their SSA names. Names set
with `Terms.name(value, tree)` (the variables of enclosing loops, say) stand for values
the caller has already identified.

A value's tree depends only on the loops being expanded around it (their variables read
as "iv"/"acc" relative to the current depth) and on the names, so trees are memoized per
(value, loops being expanded) and the memo is cleared when a name is set: each op is
expanded once per loop context, and a value read twice gives the same tuple object, so
work stays linear in the body's size (a chain of 40 unary minuses, `v = v * v` chains).
"""
from __future__ import annotations

import math

from mlir import ir

from .cir_ops import constant_int, defining_op

__all__ = ["Terms", "evaluate", "float_const", "shifted"]


class Terms:
    def __init__(self):
        self.names: dict = {}
        self.free: list[ir.Value] = []
        self._bound: dict = {}  # variables of loops being expanded -> (kind, depth, k..)
        self._depth = 0
        self._loops: tuple = ()  # induction variables of the loops being expanded
        self._memo: dict = {}  # (value, self._loops) -> tree
        self._constants: dict = {}  # constant_int's memo

    def name(self, value: ir.Value, tree: tuple) -> None:
        self.names[value] = tree
        self._memo.clear()  # trees that read `value` change

    def of(self, value: ir.Value) -> tuple:
        if value in self._bound:
            kind, depth, *k = self._bound[value]
            return (kind, self._depth - 1 - depth, *k)
        if value in self.names:
            return self.names[value]
        key = (value, self._loops)
        tree = self._memo.get(key)
        if tree is None:
            if isinstance(value.type, ir.IndexType):
                folded = constant_int(value, self._constants)
                if folded is not None:
                    tree = ("const", folded, "index")
            if tree is None:
                tree = self.expand(value)
            self._memo[key] = tree
        return tree

    def expand(self, value: ir.Value) -> tuple:
        """The tree of `value`'s defining op, even when `value` has a name."""
        op = defining_op(value)
        if op is None:
            return self._free(value)
        if op.name == "arith.constant":
            return _constant(op)
        if op.name == "scf.for":
            return self._loop(op, _result_number(op, value))
        if op.name == "scf.if":
            return self._branch(op, _result_number(op, value))
        if len(op.regions):
            return self._free(value)
        operands = tuple(self.of(v) for v in op.operands)
        if op.name == "arith.negf" and operands[0][0] == "const":
            return ("const", -operands[0][1], operands[0][2])
        attrs = tuple(sorted((name, str(attr)) for name, attr in op.attributes.items()))
        return (op.name, attrs) + operands

    def _free(self, value: ir.Value) -> tuple:
        for n, known in enumerate(self.free):
            if known == value:
                return ("free", n)
        self.free.append(value)
        return ("free", len(self.free) - 1)

    def _loop(self, op: ir.Operation, k: int) -> tuple:
        lower, upper, step, *inits = [self.of(v) for v in op.operands]
        body = op.regions[0].blocks[0]
        depth, outer_loops = self._depth, self._loops
        self._bound[body.arguments[0]] = ("iv", depth)
        for n, acc in enumerate(list(body.arguments)[1:]):
            self._bound[acc] = ("acc", depth, n)
        self._depth += 1
        self._loops = outer_loops + (body.arguments[0],)
        try:
            yields = self._yields(body)
        finally:
            self._depth -= 1
            self._loops = outer_loops
            for arg in body.arguments:
                del self._bound[arg]
        return ("for", lower, upper, step, tuple(inits), k, yields)

    def _branch(self, op: ir.Operation, k: int) -> tuple:
        then_yields = self._yields(op.regions[0].blocks[0])
        else_yields = self._yields(op.regions[1].blocks[0]) if len(op.regions[1].blocks) \
            else ()
        return ("if", self.of(op.operands[0]), then_yields[k], else_yields[k])

    def _yields(self, block: ir.Block) -> tuple:
        terminator = list(block.operations)[-1].operation
        return tuple(self.of(v) for v in terminator.operands)


def _constant(op: ir.Operation) -> tuple:
    attr = op.attributes["value"]
    type_ = str(op.results[0].type)
    if isinstance(attr, ir.FloatAttr):
        return ("const", ir.FloatAttr(attr).value, type_)
    if isinstance(attr, ir.IntegerAttr):
        return ("const", ir.IntegerAttr(attr).value, type_)
    return ("const", str(attr), type_)


def _result_number(op: ir.Operation, value: ir.Value) -> int:
    for n, result in enumerate(op.results):
        if result == value:
            return n
    raise AssertionError("value is not a result of its defining op")


def float_const(tree: tuple, value: float) -> bool:
    return tree[0] == "const" and isinstance(tree[1], float) and tree[1] == value


_FOLDS = {
    "math.sqrt": lambda a: math.sqrt(a) if a >= 0 else None,
    "math.rsqrt": lambda a: 1 / math.sqrt(a) if a > 0 else None,
    "arith.sitofp": float, "arith.uitofp": float, "arith.index_cast": lambda a: a,
    "arith.extf": lambda a: a, "arith.truncf": lambda a: a,
    "arith.mulf": lambda a, b: a * b, "arith.addf": lambda a, b: a + b,
    "arith.subf": lambda a, b: a - b, "arith.divf": lambda a, b: a / b if b else None,
}


def evaluate(tree: tuple):
    """The number a tree of constants and a few conversions and math ops always gives,
    or None."""
    if tree[0] == "const":
        return tree[1] if isinstance(tree[1], (int, float)) else None
    fold = _FOLDS.get(tree[0])
    if fold is None:
        return None
    operands = [evaluate(t) for t in tree[2:]]
    if any(v is None for v in operands):
        return None
    return fold(*operands)


def shifted(tree: tuple, by: int = 1) -> tuple:
    """`tree` as read from `by` loops further in: its references to enclosing loops
    ("iv" / "acc") count `by` more loops out. (A tree with loops of its own keeps their
    references, which stay below `depth`.)"""
    return _shift(tree, by, 0)


def _shift(tree, by: int, depth: int):
    if not isinstance(tree, tuple) or not tree:
        return tree
    if tree[0] in ("iv", "acc") and len(tree) >= 2 and isinstance(tree[1], int):
        return tree if tree[1] < depth else (tree[0], tree[1] + by, *tree[2:])
    if tree[0] == "for":  # ("for", lb, ub, step, inits, k, yields): yields are one loop in
        lower, upper, step, inits, k, yields = tree[1:]
        return ("for", _shift(lower, by, depth), _shift(upper, by, depth),
                _shift(step, by, depth), tuple(_shift(t, by, depth) for t in inits), k,
                tuple(_shift(t, by, depth + 1) for t in yields))
    return tuple(_shift(t, by, depth) for t in tree)
