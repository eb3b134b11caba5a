"""Checked mode on the native CUDA backend. The check computes are kernels like any other
and the violation code is one more output of the launch plan, read after the launches:
compiled here (no GPU needed), run by the tests marked `gpu` (tools/gpu_tests.sh)."""
import numpy as np
import pytest

import zynml
from test_checks import CASES, GATHER, MODULO, REDUCE, EMBED_MATMUL
from zynml import checks

INPUTS = {"x": np.zeros(4, np.float32), "idx": np.zeros(5, np.int64)}


def _artifact(source, checked, inputs=INPUTS):
    return zynml.compile(source, device="cuda", require_device=False,
                         checked=checked).artifact(inputs)


def _launches(artifact) -> list[str]:
    return [step["kernel"] for step in artifact.plan["body"] if step.get("op") == "launch"]


def test_the_check_kernels_and_their_output_are_in_the_launch_plan():
    checked, plain = _artifact(GATHER, True), _artifact(GATHER, False)
    assert checked.plan["output_names"] == ["y", "zynml.checks"]
    assert plain.plan["output_names"] == ["y"]
    assert len(_launches(checked)) > len(_launches(plain))
    assert checked.ptx.count(".entry") == len(set(_launches(checked)))
    assert checked.plan["outputs"][-1]["dtype"] == "int64"


def test_the_unchecked_cuda_artifact_is_unchanged_by_checked_mode_elsewhere():
    before = _artifact(GATHER, False)
    _artifact(GATHER, True)
    after = _artifact(GATHER, False)
    assert before.ptx == after.ptx and before.plan == after.plan


def _same_error(source, **inputs) -> None:
    """CUDA's error is the CPU's (the CPU's first: compile-only runs cache its vmfb, and a
    compile-only run stops at the first launch, so a test makes one such comparison)."""
    errors = []
    for device in ("cpu", "cuda"):
        with pytest.raises(zynml.ZynMLError) as info:
            zynml.run(source, device=device, checked=True, **inputs)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.gpu
@pytest.mark.parametrize("bad", [4, -1, 2 ** 31])
def test_cuda_gather_out_of_range_is_the_cpu_error(bad):
    _same_error(GATHER, x=np.arange(4, dtype=np.float32), idx=np.array([0, bad, 1], np.int64))


@pytest.mark.gpu
def test_cuda_reduce_gathers_are_checked():
    _same_error(REDUCE, x=np.ones(6, np.float32), idx=np.array([1, 2, 6], np.int64))


@pytest.mark.gpu
def test_cuda_matmul_gathers_are_checked():
    _same_error(EMBED_MATMUL, e=np.ones((5, 3), np.float32), w=np.ones((3, 7), np.float32),
                tok=np.array([0, 4, -2], np.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("m,k", [(0, 1), (3, 0)])
def test_cuda_division_by_zero_is_the_cpu_error(m, k):
    _same_error(MODULO, x=np.ones(5, np.float32), n=5, m=m, k=k)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_valid_inputs_give_the_unchecked_results(name, rng):
    source, make = CASES[name]
    inputs = make(rng)
    programs = [zynml.compile(source, device="cuda", checked=mode) for mode in (True, False)]
    for program in programs:  # both compiled before the first launch (compile-only runs)
        program.artifact(inputs)
    checked, unchecked = (program(inputs) for program in programs)
    assert checked.keys() == unchecked.keys()
    for key in unchecked:
        np.testing.assert_array_equal(np.asarray(checked[key]), np.asarray(unchecked[key]))


class _Stub:
    """CudaFunction's place in a LoadedProgram without a GPU: gives `results` (the
    program's outputs, then the violation code), as the launches would."""

    def __init__(self, artifact, ordinal):
        self.artifact, self.results = artifact, None

    def __call__(self, *args):
        return list(self.results)


def _loaded(tmp_path, monkeypatch, source=GATHER):
    from zynml.runtime.cuda import loaded
    path = tmp_path / "checked.zynart"
    _artifact(source, True).save(path)
    monkeypatch.setattr(loaded, "CudaFunction", _Stub)
    return zynml.load(path)


def test_a_saved_checked_artifact_keeps_its_check_table_and_source(tmp_path):
    from zynml.runtime.cuda.artifact import CudaArtifact
    _artifact(GATHER, True).save(tmp_path / "a.zynart")
    saved = CudaArtifact.load(tmp_path / "a.zynart").plan["checks"]
    assert saved["text"] == GATHER and saved["outputs"] == [["y", 1, 1]]
    assert [c["tensor"] for c in saved["table"]] == ["x"]
    assert "checks" not in _artifact(GATHER, False).plan


def test_a_loaded_checked_artifact_raises_the_located_error_of_a_call(tmp_path, monkeypatch):
    program = _loaded(tmp_path, monkeypatch)
    assert program.outputs == ["y"]
    x, idx = np.arange(4, dtype=np.float32), np.array([0, 9, 1], np.int64)
    with pytest.raises(zynml.ZynMLError) as on_cpu:
        zynml.run(GATHER, device="cpu", checked=True, x=x, idx=idx)
    k = 0  # the only check: the read of x; 9 is the index seen
    program.function.results = [x[[0, 0, 1]], checks.priority(k) | (9 + checks.INDEX_BIAS)]
    with pytest.raises(zynml.ZynMLError) as loaded:
        program(x=x, idx=idx)
    assert str(loaded.value) == str(on_cpu.value)
    assert str(loaded.value).startswith("<string>:4:18: error: 'x' is read out of bounds")


def test_a_loaded_checked_artifact_gives_outputs_without_the_checks(tmp_path, monkeypatch):
    program = _loaded(tmp_path, monkeypatch)
    y = np.array([1.5, 2.5, 3.5], np.float32)
    program.function.results = [y, np.int64(-1)]  # no violation
    out = program(x=np.arange(4, dtype=np.float32), idx=np.array([1, 2, 3], np.int64))
    assert list(out) == ["y"] and out["y"] is y
    program.function.results = [np.array([1.0, np.nan], np.float32), np.int64(-1)]
    with pytest.raises(zynml.ZynMLError) as info:
        program(x=np.arange(4, dtype=np.float32), idx=np.array([1, 2], np.int64))
    assert str(info.value).startswith("<string>:1:1: error: 'y' holds NaN at [1]")


@pytest.mark.gpu
def test_cuda_a_loaded_checked_artifact_raises_the_cpu_error(tmp_path):
    x, bad = np.arange(4, dtype=np.float32), np.array([0, 7, 1], np.int64)
    path = tmp_path / "checked.zynart"
    zynml.compile(GATHER, device="cuda", checked=True).artifact(x=x, idx=bad).save(path)
    program = zynml.load(path)
    assert program.outputs == ["y"]
    with pytest.raises(zynml.ZynMLError) as on_cpu:
        zynml.run(GATHER, device="cpu", checked=True, x=x, idx=bad)
    with pytest.raises(zynml.ZynMLError) as loaded:
        program(x=x, idx=bad)
    assert str(loaded.value) == str(on_cpu.value)
    good = np.array([3, 0, 2], np.int64)
    out = program(x=x, idx=good)
    assert list(out) == ["y"]
    np.testing.assert_array_equal(np.asarray(out["y"]), x[good])
