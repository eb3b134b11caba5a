"""Where things happen: the source location of a cir op, and the located errors of a run.

cirgen gives every op of a body function the location of its statement (`loc("f.zyn":
5:9)`), element reads that of the indexed expression. A `Site` is one op the generated
Python can fail at (a tensor read or write, an integer division, a loop step) or print
from; the generated code names it by its number in `Sites`.

    site = sites.add("read", loc, tensor="x")
    sites.out_of_range(site, x, (2, 7))   # raises
    -> prog.zyn:5:18: error: 'x' is read out of bounds: index 7 of dimension 1, but that
       dimension of 'x' has size 7          (checked mode's words: zynml/checks.py)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NoReturn, Optional

from mlir import ir

from ..checks import division_by_zero, read_out_of_bounds
from ..errors import SourceFile, SourceLocation, ZynMLError

__all__ = ["Site", "Sites", "source_location"]

_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


def source_location(loc: ir.Location, src: Optional[SourceFile]) -> Optional[SourceLocation]:
    """The ZynML source position of an MLIR location (the first `"file":line:col` in it:
    file locations, and the innermost of call-site or fused ones)."""
    match = _FILE_LOC.search(str(loc))
    if match is None:
        return None
    name, line, col = match.group(1), int(match.group(2)), int(match.group(3))
    file = src if src is not None and name == src.name else SourceFile(name, "")
    return SourceLocation(file, line, col)


@dataclass(frozen=True)
class Site:
    what: str  # "read", "write", "division", "loop", "print", "yield", "compute", "alloc"
    loc: Optional[SourceLocation]
    tensor: str = ""  # the tensor read or written, as the source names it
    detail: Any = None  # print: the format's parts


class Sites:
    """The sites of one translated module, numbered in the order they were added."""

    def __init__(self, src: Optional[SourceFile]):
        self.src = src
        self.items: list[Site] = []

    def add(self, what: str, loc: ir.Location, tensor: str = "", detail: Any = None) -> int:
        self.items.append(Site(what, source_location(loc, self.src), tensor, detail))
        return len(self.items) - 1

    def __getitem__(self, k: int) -> Site:
        return self.items[k]

    def error(self, k: int, message: str) -> ZynMLError:
        return ZynMLError(message, self.items[k].loc)

    def out_of_range(self, k: int, array, index: tuple) -> NoReturn:
        """The first dimension whose index leaves `array`, in checked mode's words."""
        site = self.items[k]
        name = site.tensor or "a tensor"
        dim = next(d for d, (i, n) in enumerate(zip(index, array.shape)) if not 0 <= i < n)
        raise ZynMLError(read_out_of_bounds(name, dim, index[dim], array.shape[dim],
                                            written=site.what == "write"), site.loc)

    def division_by_zero(self, k: int, op: str, a) -> NoReturn:
        kind = "remainder" if op.startswith("rem") else "division"
        raise ZynMLError(division_by_zero(kind, a), self.items[k].loc)

    def bad_step(self, k: int, step: int) -> NoReturn:
        raise ZynMLError(f"a loop's step must be positive, got {step}", self.items[k].loc)

    def bad_extent(self, k: int, extents: tuple) -> NoReturn:
        site = self.items[k]
        raise ZynMLError(f"'{site.tensor}' would have a negative extent: "
                         f"[{', '.join(str(e) for e in extents)}]", site.loc)
