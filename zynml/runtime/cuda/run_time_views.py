"""The plan steps of run-time sizes (zynml/backend/cuda/launch_plan.py: "dim",
"subview", "collapse", "expand") on the executor's views: each takes the source view and
the step's values (sizes and offsets already evaluated) and gives the new view's
(offset, sizes, strides), in elements."""
from __future__ import annotations

import math
from typing import Sequence

__all__ = ["check_equal_dims", "subview", "collapse", "expand", "divsi", "SCALAR_FNS"]


def check_equal_dims(groups, shapes: list) -> None:
    """Input dimensions that the program binds to one size (the plan's "equal_dims",
    groups of [input, dim]) must agree: the kernels read every input of a group over
    the first one's extent. `shapes`: the inputs' (None for a scalar)."""
    for group in groups:
        (first, first_dim), *rest = group
        size = shapes[first][first_dim]
        for index, dim in rest:
            if shapes[index][dim] != size:
                raise ValueError(
                    f"the inputs' sizes disagree: dimension {dim} of argument {index} is "
                    f"{shapes[index][dim]}, but the program binds it to the same "
                    f"size as dimension {first_dim} of argument {first}, which is {size}")


def subview(offset: int, sizes: Sequence[int], strides: Sequence[int],
            offsets: Sequence[int], new_sizes: Sequence[int], steps: Sequence[int],
            kept: Sequence[int]) -> tuple[int, tuple, tuple]:
    for d, (o, n, size) in enumerate(zip(offsets, new_sizes, sizes)):
        if int(n) and int(o) + (int(n) - 1) * steps[d] >= size:  # sizes that disagree
            raise ValueError(f"the inputs' sizes disagree: a view of {int(n)} elements "
                             f"from {int(o)} in dimension {d} of a tensor of size {size}")
    start = offset + sum(int(o) * s for o, s in zip(offsets, strides))
    return (start, tuple(int(new_sizes[d]) for d in kept),
            tuple(strides[d] * steps[d] for d in kept))


def collapse(offset: int, sizes: Sequence[int], strides: Sequence[int],
             groups: Sequence[Sequence[int]]) -> tuple[int, tuple, tuple]:
    """Each group of dimensions as one (contiguous within the group, as
    memref.collapse_shape requires): its size the product, its stride the innermost's."""
    new_sizes, new_strides = [], []
    for group in groups:
        count = 1
        for d in group:
            count *= sizes[d]
        new_sizes.append(count)
        new_strides.append(strides[group[-1]] if group else 1)
    return offset, tuple(new_sizes), tuple(new_strides)


def expand(offset: int, sizes: Sequence[int], strides: Sequence[int],
           groups: Sequence[Sequence[int]],
           new_sizes: Sequence[int]) -> tuple[int, tuple, tuple]:
    """Each source dimension split into its group's dimensions, row-major within it."""
    new_strides = [0] * len(new_sizes)
    for source, group in enumerate(groups):
        step = strides[source]
        for d in reversed(group):
            new_strides[d] = step
            step *= int(new_sizes[d])
    return offset, tuple(int(s) for s in new_sizes), tuple(new_strides)


# the "scalar" steps: arithmetic on sizes and numbers (launch_plan.py names them)
def divsi(a: int, b: int) -> int:
    """Integer division rounding toward zero, exact for any size (arith.divsi; the
    compiler's constant folding, lowering/cir_ops.py, takes it from here)."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


SCALAR_FNS = {
    "addi": lambda a, b: a + b, "subi": lambda a, b: a - b, "muli": lambda a, b: a * b,
    "divsi": divsi, "divui": lambda a, b: a // b,
    "remsi": lambda a, b: a - divsi(a, b) * b, "remui": lambda a, b: a % b,
    "floordivsi": lambda a, b: a // b, "ceildivsi": lambda a, b: -((-a) // b),
    "maxsi": max, "minsi": min, "copy": lambda a: a, "addf": lambda a, b: a + b,
    "subf": lambda a, b: a - b, "mulf": lambda a, b: a * b, "divf": lambda a, b: a / b,
    # comparisons give 1 or 0 ("if" steps read them); sizes are never negative, so the
    # signed and unsigned predicates of arith.cmpi agree
    "eq": lambda a, b: int(a == b), "ne": lambda a, b: int(a != b),
    "lt": lambda a, b: int(a < b), "le": lambda a, b: int(a <= b),
    "gt": lambda a, b: int(a > b), "ge": lambda a, b: int(a >= b),
    "andi": lambda a, b: a & b, "ori": lambda a, b: a | b,
    # a float computed from sizes (attention's 1 / sqrt(head_dim)), passed to a kernel
    "float": float, "sqrt": lambda a: math.sqrt(a) if a >= 0 else math.nan,
}
