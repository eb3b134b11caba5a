"""hypothesis strategies for the differential tests: the generator's choices drawn by
hypothesis, so that a failing program shrinks (fewer blocks, simpler expressions).

    @given(batches(size=4))
    def test_(cases): ...
"""
from __future__ import annotations

from typing import Sequence, TypeVar

import numpy as np
from hypothesis import strategies as st

from .generator import Case, generate

__all__ = ["cases", "batches"]

T = TypeVar("T")


class _HypothesisDraw:
    def __init__(self, draw):
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def choice(self, options: Sequence[T]) -> T:
        return self._draw(st.sampled_from(options))


@st.composite
def cases(draw, suffix: str = "") -> Case:
    """A program and its inputs (the input values come from a drawn seed)."""
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return generate(_HypothesisDraw(draw), np.random.default_rng(seed), None, suffix)


@st.composite
def batches(draw, size: int = 4) -> list[Case]:
    """`size` cases whose names are apart, to check as one merged program."""
    return [draw(cases(suffix=f"_{k}")) for k in range(size)]
