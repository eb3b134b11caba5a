"""Checked mode (`ZYNML_CHECK=1`, `zynml.compile(..., checked=True)`): what a run reports.

The pass cir-insert-checks (passes/cir_insert_checks.py) gives every read at an index
not proven in range, and every integer division or remainder whose divisor is not a
nonzero constant, a check: an entry of the program's check table (`Check`) and a small
`reduce(max)` compute over the loops around the read that yields a violation code for
each iteration where the check fails (-1 where it holds). Main returns the largest code
as one more, hidden, i64 result; the API reads it after the run (on CUDA: after the
launches) and raises the located error of `describe`. Codes order the checks by program
order, so that when several fail the first in the source is reported, every time:

    code = (MAX_CHECKS - k) << INDEX_BITS  |  (value clamped to +-INDEX_BIAS) + INDEX_BIAS

`value` is the offending index of a read, or the dividend of a division. This module is
plain Python: the runtime (no MLIR) decodes what the compiler encoded. The interpreter
(zynml/interpreter) says the same words. After the run, a float output holding NaN when
no input does is an error at the block that makes it (`nan_produced`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from .errors import SourceFile, SourceLocation, ZynMLError

__all__ = ["Check", "INDEX_BITS", "INDEX_BIAS", "MAX_CHECKS", "priority", "decode",
           "read_out_of_bounds", "division_by_zero", "raise_violation", "table_to_json",
           "table_from_json", "OUTPUT_NAME", "CheckedFunction",
           "nan_produced", "saved_checks", "loaded_checks"]

INDEX_BITS = 40
INDEX_BIAS = 1 << (INDEX_BITS - 1)  # values in [-INDEX_BIAS, INDEX_BIAS - 1] are exact
MAX_CHECKS = (1 << (63 - INDEX_BITS)) - 1
# main's hidden result (its name in `zynml.outputs`, so that the launch plan names it)
OUTPUT_NAME = "zynml.checks"


@dataclass(frozen=True)
class Check:
    """One check: `kind` "read", "write" (a scatter's index), "division" or "remainder";
    where (the access's or the operator's source position); for an access, the tensor's
    source name, the dimension and its size."""

    kind: str
    file: str
    line: int
    col: int
    tensor: str = ""
    dim: int = 0
    size: int = 0


def priority(k: int) -> int:
    """The high bits of check `k`'s codes: the first check wins."""
    return (MAX_CHECKS - k) << INDEX_BITS


def decode(code: int) -> Optional[tuple[int, int, bool]]:
    """(check number, value, whether the value was clamped) of a violation code; None for
    a run with no violation (a negative code)."""
    if code < 0:
        return None
    k = MAX_CHECKS - (code >> INDEX_BITS)
    low = code & ((1 << INDEX_BITS) - 1)
    value = low - INDEX_BIAS
    return k, value, value in (-INDEX_BIAS, INDEX_BIAS - 1)


def read_out_of_bounds(tensor: str, dim: int, index: int, size: int, written: bool = False,
                       clamped: bool = False) -> str:
    """The words of cir-to-linalg's compile-time error (zynml/lowering/bounds.py), for one
    index seen at run time."""
    shown = f"{index}" if not clamped else f"{'<= ' if index < 0 else '>= '}{index}"
    verb = "written" if written else "read"
    return (f"'{tensor}' is {verb} out of bounds: index {shown} of dimension {dim}, but "
            f"that dimension of '{tensor}' has size {size}")


def division_by_zero(kind: str, dividend, clamped: bool = False) -> str:
    """`kind` "division" or "remainder"; the words of the compile-time error for a divisor
    known to be 0, with the dividend seen at run time."""
    sign = "/" if kind == "division" else "%"
    shown = f"{dividend}" if not clamped else "a large number"
    return f"integer {kind} by zero: the divisor is 0 (in {shown} {sign} 0)"


def raise_violation(table: list[Check], code: int, src: Optional[SourceFile]) -> None:
    """Raise the located ZynMLError that a run's violation code stands for, if any."""
    found = decode(int(code))
    if found is None:
        return
    k, value, clamped = found
    if not 0 <= k < len(table):
        raise ZynMLError(f"checked mode: a run reported check {k}, which the program does "
                         f"not have (of {len(table)}): the artifact and its table disagree")
    check = table[k]
    # the program's own file: the cache shares an artifact between files of one text
    file = src if src is not None else SourceFile(check.file, "")
    loc = SourceLocation(file, check.line, check.col)
    if check.kind in ("read", "write"):
        raise ZynMLError(read_out_of_bounds(check.tensor, check.dim, value, check.size,
                                            written=check.kind == "write",
                                            clamped=clamped), loc)
    raise ZynMLError(division_by_zero(check.kind, value, clamped), loc)


def table_to_json(table: list[Check]) -> str:
    return json.dumps([asdict(c) for c in table])


def table_from_json(text: str) -> list[Check]:
    return [Check(**entry) for entry in json.loads(text)]


class CheckedFunction:
    """A compiled main in checked mode: runs `function` (positional arrays in, results
    out, with a check table the violation code last), raises the violation's located
    error, then `nan_produced`'s; else returns the program's own results. `outputs`:
    (name, location of the block that makes it) per result, in order."""

    def __init__(self, function, table: list[Check], src: Optional[SourceFile],
                 outputs: list[tuple[str, Optional[SourceLocation]]]):
        self.function, self.table, self.src, self.outputs = function, table, src, outputs

    def __call__(self, *args):
        results = list(self.function(*args))
        if self.table:
            code = results.pop()
            raise_violation(self.table, int(np.asarray(code).reshape(())), self.src)
        nan_produced(args, results, self.outputs)
        return results


def saved_checks(function: CheckedFunction) -> dict:
    """What a saved artifact keeps (its plan's "checks", JSON) so that `zynml.load` reports
    as the compile path does: the table, the program's text, where each output is made."""
    src = function.src or SourceFile("<string>", "")
    return {"table": [asdict(c) for c in function.table], "file": src.name,
            "text": src.text,
            "outputs": [[name] + ([loc.line, loc.col] if loc is not None else [])
                        for name, loc in function.outputs]}


def loaded_checks(function, saved: dict) -> CheckedFunction:
    """`function` (a loaded artifact's main: the violation code last) raising what the
    compile path raises; `saved`: saved_checks's."""
    src = SourceFile(saved["file"], saved["text"])
    outputs = [(o[0], SourceLocation(src, o[1], o[2]) if len(o) == 3 else None)
               for o in saved["outputs"]]
    return CheckedFunction(function, [Check(**c) for c in saved["table"]], src, outputs)


def nan_produced(args, results, outputs) -> None:
    """Raise when a float result holds NaN though no input does: located at the block
    that makes the result (the run's kernels keep no NaN flags of their own)."""
    try:
        if any(_nan_at(np.asarray(a)) is not None for a in args):
            return
        arrays = [np.asarray(r) for r in results]
    except (TypeError, ValueError, RuntimeError):  # a GPU array numpy cannot read
        return
    for (name, loc), array in zip(outputs, arrays):
        where = _nan_at(array)
        if where is not None:
            shown = f" at [{', '.join(map(str, where))}]" if where else ""
            raise ZynMLError(f"'{name}' holds NaN{shown}, but no input holds NaN: this "
                             "block produced it (0/0, inf - inf, 0 * inf, log or sqrt of "
                             "a negative number, ...)", loc)


def _nan_at(array) -> Optional[tuple]:
    """The index of the first NaN of `array`, or None (also for non-float arrays)."""
    if array.dtype.kind not in "fcV":
        return None
    try:
        mask = np.isnan(array)
    except TypeError:
        return None
    if not mask.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))
