"""zynml tune / Program.tune (zynml/autotune/): the candidates, the compile-here / time-
there split, the database later compiles use. GPU timing is replaced by a fake timer that
prefers the larger blocks (the real one is tested on the GPU machine)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml import compiler
from zynml.autotune import tuner
from zynml.autotune.database import TuningDatabase
from zynml.runtime.cuda.artifact import launches

GELU = Path(__file__).resolve().parents[1] / "programs" / "examples" / "gelu.zyn"
ROOT = Path(__file__).resolve().parents[2]


def prefers_big_blocks(artifact) -> float:
    """A stand-in for the GPU: the larger the pointwise block, the faster."""
    [launch] = launches(artifact.plan["body"])
    return 1000.0 / launch["block"][0]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZYNML_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def gelu(**kwargs):
    return zynml.compile(GELU, device="cuda", require_device=False, **kwargs)


def block_of(program, x) -> int:
    [launch] = launches(program.artifact(x=x).plan["body"])
    return launch["block"][0]


def test_tune_times_every_set_and_keeps_the_fastest(cache, rng):
    x = rng.standard_normal(4096).astype(np.float32)
    program = gelu()
    assert block_of(program, x) == 512  # pointwise's own choice
    report = tuner.tune(program, {"x": x}, timer=prefers_big_blocks, progress=False)
    [kernel] = report.kernels
    assert kernel.strategy == "pointwise" and kernel.problem == "4096f32_4096f32"
    assert kernel.candidates[0] == {} and len(kernel.candidates) > 8
    assert kernel.best()[0]["vector_block"] == 1024
    assert kernel.times[0] == pytest.approx(1000 / 512)
    table = report.table()
    assert "pointwise" in table and "2.00x" in table and "vector_block=1024" in table
    [entry] = TuningDatabase.beside(program._cache).entries()
    assert (entry.chip, entry.strategy, entry.params["vector_block"]) == \
        ("sm_90a", "pointwise", 1024)
    assert entry.compiler == compiler.fingerprint()
    # a new Program (and a new process, below) compiles with the winner
    assert block_of(gelu(), x) == 1024


def test_a_win_within_timing_noise_keeps_the_strategys_own_choice():
    kernel = tuner.Kernel("pointwise", "7f32", [{}, {"vectors": 2}, {"vectors": 4}],
                          [1.000, 0.985, 0.990])  # 1.5% faster: noise
    assert kernel.best() == ({}, 1.000)
    kernel.times = [1.000, 0.970, 0.990]  # 3% faster: a win
    assert kernel.best() == ({"vectors": 2}, 0.970)
    kernel.times = [None, 0.985, 0.990]  # the default not timed: the fastest
    assert kernel.best() == ({"vectors": 2}, 0.985)


def test_a_second_process_uses_the_database(cache, rng, tmp_path):
    x = rng.standard_normal(4096).astype(np.float32)
    tuner.tune(gelu(), {"x": x}, timer=prefers_big_blocks, progress=False, limit=6)
    command = [sys.executable, "-m", "zynml.cli.main", "compile", str(GELU), "--device",
               "cuda", "--emit", "plan", "--random", "x=4096"]
    env = dict(os.environ, ZYNML_CACHE_DIR=str(cache))

    def planned_block(**extra) -> int:
        out = subprocess.run(command, env=dict(env, **extra), capture_output=True, text=True,
                             check=True).stdout
        [launch] = [s for s in json.loads(out)["body"] if s["op"] == "launch"]
        return launch["block"][0]
    assert planned_block() == 1024
    assert planned_block(ZYNML_AUTOTUNE="0") == 512  # the knob turns the database off


def test_params_the_program_sets_win_over_the_database(cache, rng):
    x = rng.standard_normal(4096).astype(np.float32)
    tuner.tune(gelu(), {"x": x}, timer=prefers_big_blocks, progress=False, limit=6)
    assert block_of(gelu(params={"pointwise": {"vector_block": 256}}), x) == 256


def test_compile_here_time_there(cache, rng, monkeypatch):
    """--compile-only fills the cache with every candidate and the tune plan; a machine
    without the compiler then times them from the cache alone."""
    x = rng.standard_normal(4096).astype(np.float32)
    planned = tuner.tune(gelu(), {"x": x}, compile_only=True, limit=4)
    assert not TuningDatabase.beside(gelu()._cache).entries()  # nothing timed yet
    monkeypatch.setattr(compiler, "installed", lambda: False)

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled on the GPU side")
    monkeypatch.setattr(compiler, "run_stages", no_compiling)
    report = tuner.tune(gelu(), {"x": x}, timer=prefers_big_blocks, progress=False, limit=4)
    assert [k.candidates for k in report.kernels] == [k.candidates for k in planned.kernels]
    assert TuningDatabase.beside(gelu()._cache).entries()


def test_without_a_compiler_or_a_plan_the_error_says_what_to_do(cache, rng, monkeypatch):
    monkeypatch.setattr(compiler, "installed", lambda: False)
    x = rng.standard_normal(4096).astype(np.float32)
    with pytest.raises(zynml.ZynMLError, match="zynml tune --compile-only"):
        tuner.tune(gelu(), {"x": x}, timer=prefers_big_blocks)


def test_tuning_needs_the_native_cuda_backend():
    program = zynml.compile(GELU, device="cpu")
    with pytest.raises(zynml.ZynMLError, match="native CUDA backend"):
        program.tune(x=np.ones(8, np.float32))


def test_the_cli_compile_only_half(cache, tmp_path):
    done = subprocess.run([sys.executable, "-m", "zynml.cli.main", "tune", str(GELU),
                           "--shape", "x=4096:f32", "--compile-only", "--limit", "3"],
                          capture_output=True, text=True,
                          env=dict(os.environ, ZYNML_CACHE_DIR=str(cache)))
    assert done.returncode == 0, done.stderr
    assert "compiled 4 parameter sets of 1 kernels" in done.stdout


def test_the_cli_refuses_a_bad_limit():
    done = subprocess.run([sys.executable, "-m", "zynml.cli.main", "tune", str(GELU),
                           "--shape", "x=4096", "--limit", "0"], capture_output=True,
                          text=True)
    assert done.returncode == 1 and "expected a positive integer" in done.stderr
    assert done.stderr.startswith("usage: zynml tune")


@pytest.mark.gpu
def test_tuning_on_the_gpu(rng, monkeypatch):
    """The real timer (CUDA events). In tools/gpu_tests.sh's compile half this compiles
    the candidates and the tune plan into the test cache and stops at the first launch;
    on the GPU it times them from that cache. A folder of its own keeps the database away
    from the other tests' artifacts."""
    from zynml import knobs
    from conftest import assert_close
    monkeypatch.setenv("ZYNML_CACHE_DIR", str(knobs.CACHE_DIR.get() / "autotune-test"))
    x = rng.standard_normal(1 << 20).astype(np.float32) * 3
    program = zynml.compile(GELU, device="cuda:0")
    report = program.tune(x=x, limit=4, rounds=3, progress=False)
    [kernel] = report.kernels
    assert all(ms is not None and 0 < ms < 10 for ms in kernel.times), kernel.times
    assert kernel.best()[1] <= kernel.times[0]
    [entry] = TuningDatabase.beside(program._cache).entries()
    assert entry.ms == kernel.best()[1] and entry.default_ms == kernel.times[0]
    # the tuned program (one kernel: its artifact is one of the candidates) is right
    out = program(x=x)["activated"]
    x64 = x.astype(np.float64)
    reference = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))
    assert_close(out, reference, rtol=1e-5, floor=1e-6)


def test_a_program_gets_only_its_own_kernels_winners(cache, rng):
    """The database holds other programs' winners too: a tuned artifact's key (and its
    params) holds its own kernels' only, so the tuned artifact of a one-kernel program is
    the winning candidate, already in the cache (a GPU machine finds it there)."""
    x = rng.standard_normal(4096).astype(np.float32)
    tuner.tune(gelu(), {"x": x}, timer=prefers_big_blocks, progress=False, limit=6)
    other = rng.standard_normal(8192).astype(np.float32)
    tuner.tune(gelu(), {"x": other}, timer=prefers_big_blocks, progress=False, limit=6)
    program = gelu()
    checked, signature, scalars = program._specialize({"x": x})
    target = compiler.tuned_target(checked, program.source, program.placement,
                                   program.target, signature, scalars, "", program._cache)
    assert target.params == "pointwise@4096f32_4096f32.vector_block=1024;" \
                            "pointwise@4096f32_4096f32.vectors=1"
    before = set(program._cache.root.iterdir())
    assert block_of(program, x) == 1024
    assert set(program._cache.root.iterdir()) == before  # nothing new compiled
