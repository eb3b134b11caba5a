"""Index forms cir-raise-attention reads on `Terms` trees: the causal comparison, the
key/value head index of grouped-query attention, and which output loop is the query row.

    causal_offset(`j <= i + cache_start - 1`, i)  -> (-1, ("free", n))   n: cache_start
    kv_divisor(`h / 4`, ("P", 1))                 -> 4
    kv_divisor(`h / g`, ("P", 1))                 -> ("free", n)   n: g, read at run time
    kv_divisor(`h`, ("P", 1))                     -> 1

and the shapes of trees the attention forms are built of (a reduction loop, a guarded
update, a sum with the accumulator, a rescaled accumulator). Trees are those of
zynml/lowering/cir_terms.py; the loops' variables are named by the
caller (("P", axis) for the output's loops, ("iv", 0) for the key loop). Integer scalar
inputs compare in i64 (`arith.index_cast` of the loop variables), constants in index or
i64: both read the same here.
"""
from __future__ import annotations

from typing import Optional

from .cir_terms import float_const

__all__ = ["RowOrder", "causal_offset", "either", "guarded", "kv_divisor", "reduction",
           "rescaled", "strip", "sum_with_acc"]

# arith.cmpi's signed predicates (index comparisons are signed: `i - 2` may be negative)
_SIGNED = {"2 : i64": "slt", "3 : i64": "sle", "4 : i64": "sgt", "5 : i64": "sge"}

# Integer conversions that keep the value (of an index or i64 that fits)
_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extsi")


def causal_offset(cond: tuple, row: tuple) -> Optional[tuple[int, Optional[tuple]]]:
    """`j <= i + c [+ s]` in any arrangement of sums and differences of i, j, integer
    constants and at most one free scalar s (a tree ("free", n)) on either side of <=,
    <, >= or > -> (c, s or None); None when `cond` is not that (j's and i's coefficients
    must be 1 and -1 once moved to one side, s's that of i)."""
    name = _SIGNED.get(dict(cond[1]).get("predicate")) if cond[0] == "arith.cmpi" else None
    lhs, rhs = (_linear(t, row) for t in cond[2:4]) if name else (None, None)
    if lhs is None or rhs is None:
        return None
    if name in ("sge", "sgt"):  # a >= b is b <= a
        lhs, rhs = rhs, lhs
    diff = {term: lhs.get(term, 0) - rhs.get(term, 0) for term in set(lhs) | set(rhs)}
    if name in ("slt", "sgt"):  # over the integers, a < b is a - b + 1 <= 0
        diff[1] = diff.get(1, 0) + 1
    if diff.get("j", 0) != 1 or diff.get("i", 0) != -1:  # j - i + k <= 0 is j <= i - k
        return None
    scalars = [(term, k) for term, k in diff.items() if term not in ("i", "j", 1) and k]
    if len(scalars) > 1 or (scalars and scalars[0][1] != -1):
        return None
    return -diff.get(1, 0), (scalars[0][0] if scalars else None)


def _linear(tree: tuple, row: tuple) -> Optional[dict]:
    """An integer tree built of the row loop's i, the key loop's j, integer constants,
    free scalars, `+` and `-` -> its coefficients {"i": .., "j": .., 1: constant,
    ("free", n): ..}; None otherwise."""
    while tree[0] in _CASTS:
        tree = tree[2]
    if tree == row:
        return {"i": 1}
    if tree == ("iv", 0):
        return {"j": 1}
    if tree[0] == "const" and isinstance(tree[1], int) and \
            (tree[2] == "index" or tree[2].startswith("i")):
        return {1: tree[1]}
    if tree[0] == "free":
        return {tree: 1}
    if tree[0] not in ("arith.addi", "arith.subi"):
        return None
    a, b = _linear(tree[2], row), _linear(tree[3], row)
    if a is None or b is None:
        return None
    sign = 1 if tree[0] == "arith.addi" else -1
    return {term: a.get(term, 0) + sign * b.get(term, 0) for term in set(a) | set(b)}


def kv_divisor(tree: tuple, loop: tuple):
    """The index `loop` (1), `loop / g` with g a constant >= 1 (g) or `loop / s` with s a
    free scalar (the tree ("free", n)) that a key or value load reads along a leading
    axis; None for anything else. The loop variable is never negative, so floor, signed
    and unsigned division agree on the index the load reads once clamped into the
    tensor (a negative s gives 0 each way, s = 0 the loop itself: safe-integer-division)."""
    if tree == loop:
        return 1
    while tree[0] in _CASTS:
        tree = tree[2]
    if tree[0] in ("arith.floordivsi", "arith.divsi", "arith.divui"):
        dividend, divisor = tree[2], tree[3]
        while dividend[0] in _CASTS:
            dividend = dividend[2]
        while divisor[0] in _CASTS:
            divisor = divisor[2]
        if dividend != loop:
            return None
        if divisor[0] == "const" and isinstance(divisor[1], int) and divisor[1] >= 1:
            return divisor[1]
        if divisor[0] == "free":
            return divisor
    return None


class RowOrder(list):
    """The output's row loops (("P", axis) trees) in attention's order, lead.. then the
    query row i, which need not be the last of the output's: the transformer block's
    `out[b, i, h, d]` reads `q[b, i, h]` and `k[b, j, h]`, rows (b, h, i). `perm[k]`
    is the output axis of the k-th; `physical` puts trees in that order back."""

    def __init__(self, rank: int, row_axis: int):
        self.perm = [a for a in range(rank - 1) if a != row_axis] + [row_axis]
        super().__init__(("P", a) for a in self.perm)

    @property
    def identity(self) -> bool:
        return self.perm == sorted(self.perm)

    def physical(self, logical: list) -> list:
        """Trees given in attention's order (lead.., i) -> in the tensors' order."""
        out = [None] * len(logical)
        for k, axis in enumerate(self.perm):
            out[axis] = logical[k]
        return out

    def logical_shape(self, shape: list) -> list:
        """A tensor's shape in the output's axis order -> in attention's ([P.., S, D])."""
        return [shape[a] for a in self.perm] + list(shape[len(self.perm):])


# ---------------------------------------------------------------- tree shapes

def reduction(tree: tuple, init: float):
    """A loop 0..n step 1 with one accumulator starting at `init` -> (n's tree, the
    update): n a constant or a run-time extent (body_extents.py reads which)."""
    if tree[0] != "for" or tree[1] != ("const", 0, "index") or \
            tree[3] != ("const", 1, "index") or len(tree[4]) != 1 or \
            not float_const(tree[4][0], init) or tree[5] != 0:
        return None
    return tree[2], tree[6][0]


def guarded(update: tuple):
    """`if c: acc = f` (acc unchanged otherwise) -> (c, f); an unguarded f -> (None, f)."""
    if update[0] == "if" and update[3] == ("acc", 0, 0):
        return update[1], update[2]
    return None, update


def sum_with_acc(tree: tuple):
    """acc + x (either order) -> x."""
    if tree[0] != "arith.addf":
        return None
    for acc, other in ((tree[2], tree[3]), (tree[3], tree[2])):
        if acc == ("acc", 0, 0):
            return other
    return None


def either(tree: tuple, name: str):
    """Both operand orders of a commutative binary op."""
    if tree[0] != name:
        return []
    return [(tree[2], tree[3]), (tree[3], tree[2])]


def rescaled(tree: tuple, alpha: tuple, acc: tuple):
    """exp(m - m_new) * acc + x (operands in either order) -> x."""
    if tree[0] != "arith.addf":
        return None
    for product, rest in either(tree, "arith.addf"):
        for a, b in either(product, "arith.mulf"):
            if strip(a) == alpha and b == acc:
                return rest
    return None


def strip(tree):
    """`tree` without op attributes: ("math.exp", x) for ("math.exp", attrs, x)."""
    if not isinstance(tree, tuple) or not tree or not isinstance(tree[0], str) or \
            tree[0] in ("const", "iv", "acc", "free", "P", "E", "for", "if") or \
            len(tree) < 2 or not isinstance(tree[1], tuple):
        return tree
    return (tree[0],) + tuple(strip(t) for t in tree[2:])
