"""The `zynml` command: run and compile, located errors with exit code 1, nothing
written on failure, outputs written atomically."""
import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BAD = "let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n        out[i] = relu(q[i])\n}\n"


def zynml(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "zynml.cli.main", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_run_writes_each_output_and_prints_a_summary(tmp_path):
    x = np.random.default_rng().standard_normal((3, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = zynml("run", EXAMPLES / "softmax.zyn", "--device", "cpu",
                   "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["row_max", "shifted_exp", "row_sum",
                                                      "probs"]
    assert lines[3].startswith("probs: float32[3, 7] min=")
    probs = np.load(tmp_path / "out" / "probs.npy")
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_run_writes_a_device_list_as_json(tmp_path):
    """`let devices = compute_devices()` is a host value: the devices present, at the call."""
    prog = tmp_path / "devices.zyn"
    prog.write_text("let devices = compute_devices()\n")
    result = zynml("run", prog, "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    devices = json.loads((tmp_path / "out" / "devices.json").read_text())
    assert devices[-1]["id"] == "cpu" and devices[-1]["cores"] >= 1
    assert result.stdout.startswith("devices: ") and "cpu" in result.stdout


def test_user_error_exits_1_with_a_located_message_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.zyn"
    bad.write_text(BAD)
    result = zynml("run", bad, "--random", "x=5", "--output-dir", tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.startswith(f"{bad}:4:23: error: unknown name 'q'\n")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    result = zynml("compile", bad, "--emit", "cir", "-o", tmp_path / "bad.mlir")
    assert result.returncode == 1 and not (tmp_path / "bad.mlir").exists()


@pytest.mark.parametrize("args,message", [
    (["run", "/nonexistent/x.zyn"], "/nonexistent/x.zyn:1:1: error: cannot read"),
    (["run", EXAMPLES / "softmax.zyn", "--input", "x=missing.npy"],
     "zynml: error: cannot read input 'x'"),
    (["run", EXAMPLES / "softmax.zyn", "--random", "x=4x8", "--device", "cuda:0"],
     "zynml: error: --device cuda:0: device 'cuda:0' is not available"),
    (["run", EXAMPLES / "softmax.zyn", "--random", "x=4xq"], "zynml: error: --random expects"),
])
def test_bad_invocations_exit_1_without_traceback(args, message):
    result = zynml(*args)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_compile_emits_every_stage(tmp_path):
    for stage, marker in [("ast", "Compute @4:15"), ("cir", '"cir.compute"'),
                          ("linalg", "linalg.reduce")]:
        result = zynml("compile", EXAMPLES / "softmax.zyn", "--emit", stage, "--random", "x=3x5")
        assert result.returncode == 0, result.stderr
        assert marker in result.stdout
    out = tmp_path / "softmax.vmfb"
    result = zynml("compile", EXAMPLES / "softmax.zyn", "--emit", "vmfb", "--random", "x=3x5",
                   "-o", out)
    assert result.returncode == 0, result.stderr
    from zynml.runtime.iree_runner import IreeModule
    assert "main" in IreeModule.from_file(out).function_names
    assert out.stat().st_mode & 0o044  # readable like any output file, not 0600


def test_save_temps_writes_every_stage_of_the_compile(tmp_path):
    """IREE_SAVE_TEMPS-style: each stage's output as DIR/STAGE.EXT, the last one too."""
    out, temps = tmp_path / "softmax.vmfb", tmp_path / "temps"
    result = zynml("compile", EXAMPLES / "softmax.zyn", "--device", "cpu", "--emit", "vmfb",
                   "--random", "x=3x5", "-o", out, "--save-temps", temps)
    assert result.returncode == 0, result.stderr
    files = {p.name: p.read_bytes() for p in temps.iterdir()}
    assert sorted(files) == ["ast.txt", "cir.mlir", "linalg.mlir", "vmfb.vmfb"]
    assert files["vmfb.vmfb"] == out.read_bytes()
    linalg = zynml("compile", EXAMPLES / "softmax.zyn", "--device", "cpu", "--emit", "linalg",
                   "--random", "x=3x5")
    assert files["linalg.mlir"].decode() == linalg.stdout
    assert b"linalg.reduce" in files["linalg.mlir"] and b"Compute @4:15" in files["ast.txt"]


def test_save_temps_keeps_the_stages_before_a_failure(tmp_path):
    """A compile that fails in the IREE stage leaves the linalg it was given."""
    broken = tmp_path / "iree-compile"  # knows its version, rejects every module
    broken.write_text('#!/bin/sh\n[ "$1" = --version ] && echo broken 1.0 && exit 0\n'
                      "echo 'error: rejected' >&2\nexit 1\n")
    broken.chmod(0o755)
    result = subprocess.run(
        [sys.executable, "-m", "zynml.cli.main", "compile", str(EXAMPLES / "softmax.zyn"),
         "--device", "cpu", "--emit", "vmfb", "--random", "x=3x5", "-o", tmp_path / "x.vmfb",
         "--save-temps", tmp_path / "temps"], capture_output=True, text=True,
        env=dict(os.environ, ZYNML_IREE_COMPILE=str(broken)))
    assert result.returncode == 1
    assert "iree-compile failed: error: rejected" in result.stderr
    assert sorted(p.name for p in (tmp_path / "temps").iterdir()) == \
        ["ast.txt", "cir.mlir", "linalg.mlir"]
    assert not (tmp_path / "x.vmfb").exists()


def test_run_takes_random_bf16_inputs_and_writes_bf16_outputs_as_float32(tmp_path):
    """.npy has no bfloat16 ('<V2' reads back as void): bf16 outputs are written as
    float32, which holds them exactly."""
    prog = tmp_path / "double.zyn"
    prog.write_text("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                    "        out[i] = x[i] * 2.0\n}\n")
    result = zynml("run", prog, "--device", "cpu", "--random", "x=37:bf16",
                   "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("y: bfloat16[37] min=")
    y = np.load(tmp_path / "out" / "y.npy")
    assert y.dtype == np.float32 and y.shape == (37,)
    assert np.array_equal(y, y.astype(ml_dtypes.bfloat16).astype(np.float32))  # bf16 values
    assert np.abs(y).max() > 0
