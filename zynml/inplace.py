"""Inputs updated in place (`compute(mut x, ...)`, docs/language.md §2) at the call.

A program that writes an input marked `mut` returns that input's new values as an output
of the same name; the call then writes them into the caller's array, which the result
holds (`out["x"] is x`). On the CPU (IREE) and the interpreter the new values are
computed into a buffer of the run time and copied back once per call.

Before running, aliasing is checked: an array updated in place may share no memory with
another input of the call (the same array passed twice, or views of one buffer), since
on a device that writes in place, a read of the other input could see the writes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import SourceLocation, ZynMLError

__all__ = ["check_updatable", "write_back"]


def check_updatable(mutated: dict[str, SourceLocation], inputs: dict[str, Any]) -> None:
    """Each input the program updates is a writable numpy array sharing memory with no
    other input: else a ZynMLError at its `mut`, naming both."""
    for name, loc in mutated.items():
        array = inputs.get(name)
        if not isinstance(array, np.ndarray) or not array.flags.writeable:
            what = "a read-only array" if isinstance(array, np.ndarray) else \
                f"a {type(array).__name__}"
            raise ZynMLError(f"input '{name}' is updated in place ('mut'), so it must be a "
                             f"writable numpy array; got {what}", loc)
        for other, value in inputs.items():
            if other != name and isinstance(value, np.ndarray) and \
                    np.may_share_memory(array, value):
                kind = "updated in place too" if other in mutated else "read by the program"
                raise ZynMLError(f"inputs '{name}' and '{other}' share memory: '{name}' is "
                                 f"updated in place ('mut') and '{other}' is {kind}; pass "
                                 f"separate arrays (e.g. {other}.copy())", loc)


def write_back(results: dict[str, Any], inputs: dict[str, Any],
               mutated: dict[str, SourceLocation]) -> dict[str, Any]:
    """`results` with each updated input's new values written into the caller's array,
    which then is that output."""
    for name in mutated:
        if name in results:
            np.copyto(inputs[name], np.asarray(results[name]), casting="no")
            results[name] = inputs[name]
    return results
