"""How deep a program may nest, and room on Python's stack for the walks over it.

The checker, cirgen and the lowering walk expressions and values recursively, a few
Python frames per operator. Two limits bound how deep those walks go, each refused with a
located error:

* MAX_EXPRESSION_DEPTH: operators nested in one expression. A flat sum of n terms is n
  deep (each `+` holds the sum before it), so a sum of a thousand terms compiles; the
  parser refuses a deeper expression at the operator past the limit.
* MAX_VALUE_DEPTH: operations in the longest chain that builds a body's values, through
  `let`s and assignments (`v = v * x[i]` repeated); cir-verify refuses a longer one at
  its statement.

`recursion_room(levels)` raises Python's recursion limit for a walk that many levels
deep. Python 3.11 runs Python-to-Python calls without growing the C stack, so a high
limit is safe; the limits above keep the walks (and the C recursion of comparing deep
trees) bounded.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

__all__ = ["MAX_EXPRESSION_DEPTH", "MAX_VALUE_DEPTH", "recursion_room"]

MAX_EXPRESSION_DEPTH = 2000
MAX_VALUE_DEPTH = 10000
# Python frames one level may take in the deepest walk (measured on sums, chains of
# assignments and whole-tensor expressions: at most 5), with margin.
_FRAMES_PER_LEVEL = 8


@contextmanager
def recursion_room(levels: int, frames_per_level: int = _FRAMES_PER_LEVEL) -> Iterator[None]:
    """Make sure a walk `levels` deep, each level up to `frames_per_level` Python frames,
    fits under the recursion limit while it runs."""
    needed = _stack_depth() + levels * frames_per_level + 200
    old = sys.getrecursionlimit()
    if needed > old:
        sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        if needed > old:
            sys.setrecursionlimit(old)


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth
