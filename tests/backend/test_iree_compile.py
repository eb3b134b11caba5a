"""iree-compile as a subprocess: compile, run against numpy, cache, errors, targets."""
from __future__ import annotations

import subprocess
import sys

import mlir.ir  # noqa: F401  (the point: the backend must work beside the mlir bindings)
import numpy as np
import pytest

from zynml import knobs
from zynml.backend.iree import compile as ic
from zynml.cache import ArtifactCache
from zynml.backend.iree.compile import compile_to_vmfb, emit_vmfb_file
from zynml.errors import BackendError
from zynml.backend.iree.target import CPU, IREE_TARGETS, IreeTarget, get_target
from zynml.errors import ZynMLError
from zynml.runtime import IreeModule

MODULE = """
#id = affine_map<(d0) -> (d0)>
func.func @add7(%a: tensor<7xf32>, %b: tensor<7xf32>) -> tensor<7xf32> {
  %e = tensor.empty() : tensor<7xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<7xf32>, tensor<7xf32>) outs(%e : tensor<7xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<7xf32>
  return %r : tensor<7xf32>
}
func.func @matmul(%a: tensor<5x3xf32>, %b: tensor<3x11xf32>) -> tensor<5x11xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x11xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<5x11xf32>) -> tensor<5x11xf32>
  %r = linalg.matmul ins(%a, %b : tensor<5x3xf32>, tensor<3x11xf32>)
                     outs(%f : tensor<5x11xf32>) -> tensor<5x11xf32>
  return %r : tensor<5x11xf32>
}
"""

TINY = """
func.func @neg(%a: tensor<3xf32>) -> tensor<3xf32> {
  %r = math.absf %a : tensor<3xf32>
  return %r : tensor<3xf32>
}
"""

BAD = """
func.func @broken(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = arith.addf %a, %a : tensor<5xf32>
  return %r : tensor<4xf32>
}
"""


class CountingRun:
    """Stands in for subprocess.run, counting the calls it forwards."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, cmd, *args, **kwargs):
        self.calls.append(cmd)
        return self.real(cmd, *args, **kwargs)


def nonzero(rng, shape):
    """Random values away from zero, so a dropped term cannot hide."""
    x = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return x.astype(np.float32)


@pytest.fixture(scope="module")
def vmfb(tmp_path_factory) -> bytes:
    return compile_to_vmfb(MODULE, CPU, cache=ArtifactCache(tmp_path_factory.mktemp("cache")))


def test_compiles_without_importing_iree_compiler(vmfb):
    assert vmfb[:64] and len(vmfb) > 1000
    assert "iree.compiler" not in sys.modules   # importing it beside mlir crashes


def test_compiled_module_matches_numpy(vmfb, rng):
    module = IreeModule(vmfb)
    a, b = nonzero(rng, 7), nonzero(rng, 7)
    (out,) = module.function("add7")(a, b)
    np.testing.assert_allclose(out, a.astype(np.float64) + b.astype(np.float64), rtol=1e-6)
    x, y = nonzero(rng, (5, 3)), nonzero(rng, (3, 11))
    (out,) = module.function("matmul")(x, y)
    assert out.shape == (5, 11) and out.dtype == np.float32
    np.testing.assert_allclose(out, x.astype(np.float64) @ y.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_cache_hit_runs_no_subprocess(tmp_path, monkeypatch):
    ic.iree_compile_version()                # computed once per process, not per compile
    counter = CountingRun(subprocess.run)
    monkeypatch.setattr(ic.subprocess, "run", counter)
    cache = ArtifactCache(tmp_path)
    first = compile_to_vmfb(TINY, CPU, cache=cache)
    assert len(counter.calls) == 1
    assert len(list(tmp_path.iterdir())) == 1
    second = compile_to_vmfb(TINY, CPU, cache=cache)
    assert second == first and len(counter.calls) == 1
    # Any change of text or flags is a miss.
    compile_to_vmfb(TINY, CPU, cache=cache, extra_flags=["--iree-opt-level=O1"])
    compile_to_vmfb(TINY + "\n// changed\n", CPU, cache=cache)
    assert len(counter.calls) == 3
    # Without a cache, every call compiles.
    compile_to_vmfb(TINY, CPU)
    assert len(counter.calls) == 4


def test_cache_key_includes_compiler_version(tmp_path, monkeypatch):
    cache = ArtifactCache(tmp_path)
    compile_to_vmfb(TINY, CPU, cache=cache)
    monkeypatch.setattr(ic, "iree_compile_version", lambda: "IREE some other version")
    counter = CountingRun(subprocess.run)
    monkeypatch.setattr(ic.subprocess, "run", counter)
    compile_to_vmfb(TINY, CPU, cache=cache)
    assert len(counter.calls) == 1


def test_bad_mlir_raises_backend_error_with_iree_message(tmp_path):
    cache = ArtifactCache(tmp_path)
    with pytest.raises(BackendError) as info:
        compile_to_vmfb(BAD, CPU, cache=cache)
    err = info.value
    assert isinstance(err, ZynMLError)
    text = str(err)
    assert text.startswith("error: iree-compile failed: ")
    assert "<unknown>" not in text
    assert "<stdin>:3:19: error: use of value '%a' expects different type" in text  # iree's own
    assert "note: prior use here" in err.stderr
    assert list(tmp_path.iterdir()) == []                       # failures are not cached


def test_long_stderr_is_cut_in_the_message_but_kept_whole():
    stderr = "\n".join(f"line {i}" for i in range(100))
    err = BackendError(f"iree-compile failed: {ic._summarize(stderr)}", stderr)
    assert "line 0" in str(err) and "line 99" not in str(err) and "80 more lines" in str(err)
    assert err.stderr == stderr


def test_emit_vmfb_file_is_atomic(tmp_path, vmfb):
    out = tmp_path / "m.vmfb"
    assert emit_vmfb_file(MODULE, CPU, out) == out
    assert out.read_bytes() == vmfb                 # deterministic compile
    with pytest.raises(BackendError):
        emit_vmfb_file(BAD, CPU, out)
    assert out.read_bytes() == vmfb                 # failure leaves the old file intact
    with pytest.raises(BackendError):
        emit_vmfb_file(BAD, CPU, tmp_path / "new.vmfb")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.vmfb"]


def test_missing_executable_is_a_clear_error(monkeypatch):
    ic.iree_compile_executable.cache_clear()
    try:
        monkeypatch.setenv(knobs.IREE_COMPILE.name, "/nonexistent/iree-compile")
        with pytest.raises(BackendError, match="ZYNML_IREE_COMPILE"):
            ic.iree_compile_executable()
    finally:
        monkeypatch.delenv(knobs.IREE_COMPILE.name)
        ic.iree_compile_executable.cache_clear()
    assert ic.iree_compile_executable().endswith("iree-compile")


def test_extra_flags_must_be_a_sequence_of_strings():
    with pytest.raises(TypeError):
        compile_to_vmfb(TINY, CPU, extra_flags="--iree-opt-level=O1")


# ----------------------------------------------------------------------------- targets


def test_get_target_and_unknown_names():
    assert get_target("cpu") is CPU
    assert CPU.device == "local-task" and "--iree-llvmcpu-target-cpu=host" in CPU.flags
    with pytest.raises(ValueError, match="cpu, cuda"):
        get_target("tpu")


def test_target_validation():
    t = IreeTarget("x", "local-sync", ["--a", "--b=1"])
    assert t.flags == ("--a", "--b=1") and hash(t)
    assert t.with_flags("--c").flags == ("--a", "--b=1", "--c")
    for bad in [dict(name="", device="d"), dict(name="n", device=""),
                dict(name="n", device="d", flags="--a"), dict(name="n", device="d", flags=("-a",)),
                dict(name="n", device="d", flags=("--a b",))]:
        with pytest.raises(ValueError):
            IreeTarget(**bad)


@pytest.mark.parametrize("name", sorted(set(IREE_TARGETS) - {"cpu"}))
def test_gpu_target_flags_are_accepted_by_iree_compile(name):
    assert compile_to_vmfb(TINY, get_target(name))


DYNAMIC_MATMUL = """
func.func @main(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>)
                     outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


def _dynamic_matmul():
    from zynml.dialects import new_context
    return mlir.ir.Module.parse(DYNAMIC_MATMUL, new_context())


def _record_flags(monkeypatch, fail_with: str = ""):
    """compile_to_vmfb as stages.to_vmfb calls it, recording each call's flags and failing
    the first with `fail_with` in its stderr (when given)."""
    from zynml.backend.iree import stages
    calls = []

    def fake(text, target, cache=None):
        calls.append(target.flags)
        if fail_with and len(calls) == 1:
            raise BackendError("iree-compile failed", stderr=fail_with)
        return b"vmfb"
    monkeypatch.setattr(stages, "compile_to_vmfb", fake)
    return stages, calls


def test_a_dynamic_matmul_keeps_data_tiling(monkeypatch):
    stages, calls = _record_flags(monkeypatch)
    assert stages.to_vmfb(_dynamic_matmul(), CPU) == b"vmfb"
    assert calls == [CPU.flags] and "--iree-opt-data-tiling" in CPU.flags


@pytest.mark.filterwarnings("ignore::zynml.errors.ZynMLNote")
@pytest.mark.parametrize("stderr", [
    "error: One or more operations with large vector sizes (32768 bytes) were found",
    "Please report issues to https://github.com/iree-org/iree/issues",
])
def test_data_tiling_refused_or_crashed_compiles_without_it(monkeypatch, stderr):
    stages, calls = _record_flags(monkeypatch, fail_with=stderr)
    assert stages.to_vmfb(_dynamic_matmul(), CPU) == b"vmfb"
    assert len(calls) == 2 and "--iree-opt-data-tiling" not in calls[1]


def test_other_compile_errors_are_not_retried(monkeypatch):
    stages, calls = _record_flags(monkeypatch, fail_with="error: something else")
    with pytest.raises(BackendError):
        stages.to_vmfb(_dynamic_matmul(), CPU)
    assert len(calls) == 1


def test_a_dynamic_matmul_compiles_with_data_tiling_and_runs(rng):
    """The module zynml's lowering gives a dynamic matmul (no slices) is one IREE 3.13's
    data tiling accepts: compiled with the CPU target's own flags, run at two sizes."""
    main = IreeModule(compile_to_vmfb(DYNAMIC_MATMUL, CPU)).function("main")
    for m, k, n in [(1, 1, 1), (7, 31, 13)]:
        a, b = nonzero(rng, (m, k)), nonzero(rng, (k, n))
        (out,) = main(a, b)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
