"""One differential test: a case on the interpreter and on a compiled device, compared.

    outcome = check_case(case_from_seed(7), device="cpu")
    outcome.status   # "ok", or what went wrong:

    mismatch           both ran, the results differ (compare.py)
    rejected           the device's compiler refused the program with a located error
                       (a documented limitation, such as a write inside an `if`)
    backend-error      the toolchain below ZynML failed (iree-compile): a compiler bug
    crash              the device's path raised something other than a ZynMLError
    interpreter-error  the interpreter refused a program the front end accepts (an index
                       out of range: a generator bug, or an interpreter one)
    invalid            the front end rejected the generated program: a generator bug

check_batch runs many cases as one merged program (one compilation: iree-compile costs
about a second whatever the program), then checks alone each case that did not pass.
"""
from __future__ import annotations

import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import BackendError, ZynMLError
from .compare import differences
from .generator import Case, merge

__all__ = ["Outcome", "check_case", "check_batch", "run_case", "float64_inputs"]


@dataclass
class Outcome:
    status: str
    case: Case
    detail: str = ""
    seconds: float = 0.0

    def report(self) -> str:
        head = f"{self.case.name}: {self.status}"
        return f"{head}\n{self.detail}\n--- program ---\n{self.case.source}"


def run_case(case: Case, device: str, inputs: Optional[dict] = None) -> dict[str, Any]:
    from .. import api
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ZynMLNotes: a kind lowered generically, ...
        program = api.compile(case.source, device=device)
        return program(**(case.inputs if inputs is None else inputs))


def float64_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs with every float (f16, bf16, f32) as f64: the program then computes in
    f64, a reference for the rounding of its f32 run."""
    out = {}
    for name, value in inputs.items():
        a = np.asarray(value)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            a = a.astype(np.float64)
            out[name] = a if a.ndim else a[()]
        else:
            out[name] = value
    return out


def _front_end_status(case: Case) -> str:
    """After the interpreter refused `case`: "invalid" when the front end rejects it for
    these inputs (a generator bug), else "interpreter-error"."""
    from .. import api
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            api.compile(case.source, device="interpreter").stage_module(case.inputs, "cir")
    except ZynMLError:
        return "invalid"
    return "interpreter-error"


def check_case(case: Case, device: str = "cpu") -> Outcome:
    start = time.perf_counter()

    def done(status: str, detail: str = "") -> Outcome:
        return Outcome(status, case, detail, time.perf_counter() - start)

    if case.invalid:
        return done("invalid", case.invalid)
    try:
        expected = run_case(case, "interpreter")
    except ZynMLError as err:
        return done(_front_end_status(case), str(err))
    except Exception:
        return done("interpreter-error", traceback.format_exc())
    try:
        actual = run_case(case, device)
    except BackendError as err:
        return done("backend-error", str(err)[:4000])
    except ZynMLError as err:  # a located refusal, or a compiler bug reported as one
        return done("crash" if "internal error" in str(err) else "rejected", str(err))
    except Exception:
        return done("crash", traceback.format_exc())
    found = differences(expected, actual)
    if found:
        try:
            reference = run_case(case, "interpreter", float64_inputs(case.inputs))
        except Exception:
            reference = None
        found = differences(expected, actual, reference)
    return done("mismatch", "\n".join(found)) if found else done("ok")


def check_batch(cases: list[Case], device: str = "cpu") -> list[Outcome]:
    """Outcomes of `cases` (distinct suffixes), run merged; a case that fails in the
    batch, or every case when the batch cannot run, is checked alone."""
    valid = [c for c in cases if not c.invalid]
    outcomes = {id(c): check_case(c, device) for c in cases if c.invalid}
    start = time.perf_counter()
    try:
        merged = merge(valid)
        expected = run_case(merged, "interpreter")
        actual = run_case(merged, device)
    except Exception:
        expected = actual = None
    share = (time.perf_counter() - start) / max(1, len(valid))
    for case in valid:
        if expected is not None:
            mine = [n for n in expected if case.owns(n)]
            if not differences({n: expected[n] for n in mine},
                               {n: actual.get(n) for n in mine}):
                outcomes[id(case)] = Outcome("ok", case, "", share)
                continue
        alone = check_case(case, device)
        if expected is not None and alone.status == "ok":
            # differs merged, agrees alone: a real difference, or float noise the float64
            # reference (only check_case computes it) explains; check_case decided
            alone.detail = "agrees when run alone"
        outcomes[id(case)] = alone
    return [outcomes[id(c)] for c in cases]
