"""Index forms cir-raise-attention reads on `Terms` trees: the causal comparison, the
key/value head index of grouped-query attention, and which output loop is the query row.

    causal_offset(`j <= i + cache_start - 1`, i)  -> (-1, ("free", n))   n: cache_start
    kv_divisor(`h / 4`, ("P", 1))                 -> 4
    kv_divisor(`h`, ("P", 1))                     -> 1

Trees are those of zynml/lowering/cir_terms.py; the loops' variables are named by the
caller (("P", axis) for the output's loops, ("iv", 0) for the key loop). Integer scalar
inputs compare in i64 (`arith.index_cast` of the loop variables), constants in index or
i64: both read the same here.
"""
from __future__ import annotations

from typing import Optional

__all__ = ["RowOrder", "causal_offset", "kv_divisor"]

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


def kv_divisor(tree: tuple, loop: tuple) -> Optional[int]:
    """The index `loop` (1) or `loop / g` with g a constant >= 1 (g) that a key or value
    load reads along a leading axis; None for anything else. The loop variable is never
    negative, so floor, signed and unsigned division agree."""
    if tree == loop:
        return 1
    while tree[0] in _CASTS:
        tree = tree[2]
    if tree[0] in ("arith.floordivsi", "arith.divsi", "arith.divui"):
        dividend, divisor = tree[2], tree[3]
        while dividend[0] in _CASTS:
            dividend = dividend[2]
        if dividend == loop and divisor[0] == "const" and isinstance(divisor[1], int) and \
                divisor[1] >= 1:
            return divisor[1]
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
