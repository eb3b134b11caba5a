"""Comparing two runs of a program: exact for integers and bools, f32-appropriate for
floats. Needs only numpy (a GPU machine compares CUDA results with it).

    differences(expected, actual)                 -> [] when they agree, else messages
    differences(expected, actual, reference=r64)  -> float outputs judged against r64

Floats agree when NaNs and infinities sit at the same places and the finite values are
close norm-wise: max |a - e| <= RTOL[dtype] * max |e|. An output that fails that is
judged again against `reference`, the interpreter's run of the program in float64 when
the caller has one: it is noise, not a bug, when `actual` is about as close to the
float64 result as the interpreter's own rounding is, max |a - r| <= 10 max |e - r| +
RTOL * max |r| (badly conditioned values, sums with cancellation).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

__all__ = ["RTOL", "differences", "summarize"]

# f64 results get f32's tolerance: a float literal with no float beside it computes in
# f32 (`i * 0.5`, `tan(0.5)`; frontend/types.py), and its rounding reaches f64 results.
RTOL = {"float64": 2e-5, "float32": 2e-5, "float16": 2e-2, "bfloat16": 8e-2}


def _float_kind(a: np.ndarray) -> Optional[str]:
    name = a.dtype.name
    return name if name in RTOL else None


def differences(expected: dict[str, Any], actual: dict[str, Any],
                reference: Optional[dict[str, Any]] = None) -> list[str]:
    """What differs between two {output: value} results (lists of values compare item by
    item)."""
    found = []
    if list(expected) != list(actual):
        return [f"outputs {list(actual)} != {list(expected)}"]
    for name in expected:
        e, a = expected[name], actual[name]
        r = reference.get(name) if reference else None
        if isinstance(e, list) or isinstance(a, list):
            if not (isinstance(e, list) and isinstance(a, list) and len(e) == len(a)):
                found.append(f"{name}: list {a!r} != {e!r}")
                continue
            for k, (ek, ak) in enumerate(zip(e, a)):
                rk = r[k] if isinstance(r, list) else None
                found += [f"{name}[{k}]: {m}" for m in _one(ek, ak, rk)]
            continue
        found += [f"{name}: {m}" for m in _one(e, a, r)]
    return found


def _one(expected: Any, actual: Any, reference: Any) -> list[str]:
    if isinstance(expected, dict) or isinstance(actual, dict):  # host values: as they are
        return [] if expected == actual else [f"{actual!r} != {expected!r}"]
    e, a = np.asarray(expected), np.asarray(actual)
    if e.dtype != a.dtype:
        return [f"dtype {a.dtype} != {e.dtype}"]
    if e.shape != a.shape:
        return [f"shape {a.shape} != {e.shape}"]
    kind = _float_kind(e)
    if kind is None:  # integers and bools: exact
        wrong = np.argwhere(e != a)
        if len(wrong):
            at = tuple(int(i) for i in wrong[0])
            return [f"{len(wrong)} of {e.size} elements differ, first at {list(at)}: "
                    f"{a[at]!r} != {e[at]!r}"]
        return []
    e64, a64 = e.astype(np.float64), a.astype(np.float64)
    nan_e, nan_a = np.isnan(e64), np.isnan(a64)
    if (nan_e != nan_a).any():
        at = tuple(int(i) for i in np.argwhere(nan_e != nan_a)[0])
        return [f"NaN at different places, first at {list(at)}: {a[at]!r} != {e[at]!r}"]
    inf_e, inf_a = np.isinf(e64), np.isinf(a64)
    if (inf_e != inf_a).any() or (e64[inf_e] != a64[inf_e]).any():
        at = tuple(int(i) for i in np.argwhere((inf_e != inf_a) | (inf_e & (e64 != a64)))[0])
        return [f"infinities differ, first at {list(at)}: {a[at]!r} != {e[at]!r}"]
    finite = ~(nan_e | inf_e)
    if not finite.any():
        return []
    err = np.abs(a64[finite] - e64[finite])
    scale = max(np.abs(e64[finite]).max(), np.finfo(np.float64).tiny)
    if err.max() <= RTOL[kind] * scale:
        return []
    if reference is not None and _noise(e64, a64, np.asarray(reference, np.float64), finite,
                                        RTOL[kind]):
        return []
    flat = np.flatnonzero(finite)[int(np.argmax(err))]
    at = tuple(int(i) for i in np.unravel_index(flat, e.shape)) if e.shape else ()
    return [f"relative error {err.max() / scale:.2e} > {RTOL[kind]:.0e}, worst at "
            f"{list(at)}: {a64[at]!r} != {e64[at]!r}"]


def _noise(e64, a64, r64, finite, rtol: float) -> bool:
    """Is `a` as close to the float64 result `r` as the interpreter's own rounding?"""
    if r64.shape != e64.shape or not np.isfinite(r64[finite]).all():
        return False
    own = np.abs(e64[finite] - r64[finite]).max()
    theirs = np.abs(a64[finite] - r64[finite]).max()
    return theirs <= 10 * own + rtol * np.abs(r64[finite]).max()


def summarize(value: Any) -> str:
    a = np.asarray(value)
    if a.ndim == 0:
        return f"{a.dtype} {a[()]!r}"
    return f"{a.dtype}{list(a.shape)}"
