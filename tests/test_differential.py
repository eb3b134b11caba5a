"""Differential tests: random valid programs (zynml/difftest) run on the `cir` reference
interpreter and on IREE's CPU backend must agree (floats to f32 rounding, integers and
bools exactly, NaN where both are NaN).

The property runs a few batches of generated programs within a time budget (30 s; scale
both with ZYNML_FUZZ_SCALE, as the front end's fuzz tests do; ZYNML_FUZZ_SHRINK=1 lets
hypothesis shrink a failure); `tools/differential.py campaign` runs thousands. Every mismatch a campaign found is kept in
tests/programs/differential/NAME/ (program.zyn, inputs.npz, meta.json; save one with
zynml.difftest.corpus.save_case) and runs here each time; the compiler bugs not fixed
yet are in KNOWN_BUGS, as strict xfails that say what goes wrong.
"""
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from zynml import knobs
from zynml.difftest.compare import differences
from zynml.difftest.corpus import load_case, write_corpus
from zynml.difftest.generator import case_from_seed, merge
from zynml.difftest.runner import check_batch, check_case, run_case
from zynml.difftest.strategies import batches

SCALE = knobs.FUZZ_SCALE.get()
BUDGET_S = 30.0 * SCALE
REGRESSIONS = Path(__file__).resolve().parent / "programs" / "differential"

# Regressions that still fail: the bug, precisely. All are IREE bugs or limitations on
# linalg that ZynML lowers correctly (the interpreter and the linalg agree); the generator
# steers clear of them (builder.Builder.avoid_known_bugs) so that campaigns find new ones.
KNOWN_BUGS = {
    "reduce_yield_reads_no_tensor":
        "IREE 3.13 (llvm-cpu) computes a reduction linalg.generic whose region reads none "
        "of its inputs (only an i8 tensor carries the loop extents) as one iteration: "
        "reduce(*) of 1.5 over 3x2 gives 1.5, not 1.5^6",
    "reduce_yield_of_loop_index_only":
        "iree-compile 3.13 fails on a reduction linalg.generic (reduction along d1) whose "
        "region reads no input, only linalg.index: \"'vector.multi_reduction' op reduction "
        "dimension out of range: 1\"",
    "argmin_ties_in_bf16":
        "argmin/argmax of bf16 values from an inexact op (sinh): IREE's CPU code keeps the "
        "yielded value in f32 (the truncation to bf16 is skipped) and compares it with the "
        "best so far, stored rounded to bf16; values tied in bf16 compare smaller and the "
        "last tied index wins (13, not 4); ZynML promises the first",
}

_spent = {"seconds": 0.0, "failed": False}


# Shrinking recompiles each smaller program (about a second each): on request only.
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + (
    [Phase.shrink] if knobs.FUZZ_SHRINK.get() else [])


@settings(max_examples=int(8 * SCALE), deadline=None, database=None, phases=PHASES,
          suppress_health_check=list(HealthCheck))
@given(batches(size=4))
def test_generated_programs_agree_on_the_interpreter_and_the_cpu(cases):
    if _spent["seconds"] > BUDGET_S and not _spent["failed"]:
        return  # the budget is spent (hypothesis still draws the remaining examples)
    start = time.perf_counter()
    outcomes = check_batch(cases, "cpu")
    _spent["seconds"] += time.perf_counter() - start
    bad = [o for o in outcomes if o.status not in ("ok", "rejected")]
    if bad:
        _spent["failed"] = True  # shrinking must see the same failures, budget or not
    assert not bad, "\n\n".join(o.report() for o in bad)


@pytest.mark.parametrize("name", sorted(p.name for p in REGRESSIONS.iterdir() if p.is_dir()))
def test_regression(name, request):
    if name in KNOWN_BUGS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name]))
    case, _ = load_case(REGRESSIONS / name)
    outcome = check_case(case, "cpu")
    assert outcome.status == "ok", outcome.report()


def test_regressions_found_on_cuda_compile_for_cuda():
    """Cases tools/differential_cuda.py found failing to compile for the native CUDA
    backend (compiled here; tools/differential_cuda.py run checks their results)."""
    import zynml
    for name in ("abs_of_wide_integers",):
        case, _ = load_case(REGRESSIONS / name)
        program = zynml.compile(case.source, device="cuda", require_device=False)
        assert ".entry" in program.artifact(**case.inputs).ptx


def test_known_bugs_are_regressions():
    assert set(KNOWN_BUGS) <= {p.name for p in REGRESSIONS.iterdir()}


def test_a_seed_gives_the_same_program_and_inputs():
    a, b = case_from_seed(12345), case_from_seed(12345)
    assert a.source == b.source and list(a.inputs) == list(b.inputs)
    for name in a.inputs:
        np.testing.assert_array_equal(a.inputs[name], b.inputs[name])
    assert case_from_seed(12346).source != a.source


def test_generated_inputs_are_the_programs_inputs_and_floats_are_never_zero():
    import zynml
    for seed in range(40):
        case = case_from_seed(seed)
        assert case.invalid is None, case.invalid
        assert list(case.inputs) == zynml.compile(case.source).inputs
        for value in case.inputs.values():
            a = np.asarray(value)
            if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
                assert (a.astype(np.float64) != 0).all()


def test_merged_cases_give_each_case_its_outputs():
    cases = [case_from_seed(seed, suffix=f"_{k}") for k, seed in enumerate((3, 4))]
    merged = run_case(merge(cases), "interpreter")
    for case in cases:
        alone = run_case(case, "interpreter")
        mine = {n: v for n, v in merged.items() if case.owns(n)}
        assert list(mine) == list(alone) and not differences(alone, mine)


def test_corpus_round_trip(tmp_path):
    counts = write_corpus(tmp_path, range(3))
    assert counts["written"] + counts["skipped"] == 3 and counts["written"] >= 1
    for folder in sorted(tmp_path.iterdir()):
        case, expected = load_case(folder)
        assert not differences(expected, run_case(case, "interpreter"))


def test_differences_are_exact_for_integers_and_tolerant_for_floats():
    f = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    assert not differences({"y": f}, {"y": f * np.float32(1 + 1e-7)})
    assert differences({"y": f}, {"y": f * np.float32(1 + 1e-3)})
    assert differences({"y": f}, {"y": np.array([1.0, 2.0, 0.0, np.inf], np.float32)})
    assert differences({"y": f}, {"y": np.array([1.0, 2.0, np.nan, -np.inf], np.float32)})
    assert differences({"y": np.array([1, 2])}, {"y": np.array([1, 3])})
    assert differences({"y": np.int64(1)}, {"y": np.int32(1)})  # dtypes too
    assert differences({"y": f}, {"z": f})
