"""examples/decode_llama.py on the CPU: greedy tokens by graph replay, the same as the
calls one by one, equal to PyTorch's (--check), and usage errors that exit with 1."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "decode_llama.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=600)


def test_tiny_model_generates_by_replay_as_by_calls():
    pytest.importorskip("torch")
    common = ("--config", "tiny", "--device", "cpu", "--prompt", "3,14,15", "--tokens", "5",
              "--batch", "2", "--seed", "4")
    replayed, eager = _run(*common, "--check"), _run(*common, "--eager")
    assert replayed.returncode == 0 and eager.returncode == 0, replayed.stderr + eager.stderr
    tokens = replayed.stdout.splitlines()[:2]
    assert tokens == eager.stdout.splitlines()[:2]
    assert all(len(line.split()) == 5 for line in tokens)
    assert re.search(r"14 tokens in .* s \(.* tokens/s\), 1 capture, 23 calls per step",
                     replayed.stdout)
    difference = float(re.search(r"from PyTorch: (\S+)", replayed.stdout).group(1))
    assert difference < 1e-4


@pytest.mark.parametrize("args, message", [
    (("--tokens", "0"), "--tokens must be at least 1"),
    (("--prompt", "3,x"), "'3,x' is not a comma-separated list"),
    (("--prompt", "67"), "--prompt ids must be in 0..66"),
    (("--device", "tpu"), "unknown device 'tpu'"),
])
def test_mistakes_exit_with_1(args, message):
    done = _run(*args)
    assert done.returncode == 1 and message in done.stderr
    assert "Traceback" not in done.stderr
