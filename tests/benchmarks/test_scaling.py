"""benchmarks/scaling.py without a GPU: its dry run on two CPU processes (gloo) measures
and reports, and its N-process losses are those of one process accumulating the same
global batch; the GPU counts and the in-turn shards."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import scaling  # noqa: E402  (benchmarks/ is no package)

from zynml.models import data  # noqa: E402


def test_gpu_counts_double_up_to_all():
    assert scaling.gpu_counts(1) == [1]
    assert scaling.gpu_counts(4) == [1, 2, 4]
    assert scaling.gpu_counts(6) == [1, 2, 4, 6]


def test_in_turn_hands_out_the_global_batchs_shards():
    tokens = np.arange(500, dtype=np.int32)
    whole = data.Batches(tokens, 6, 7, seed=3)
    in_turn = scaling.InTurn(data.Batches(tokens, 6, 7, seed=3), 3)
    for _ in range(2):
        ids, targets = whole.next()
        shards = [in_turn.next() for _ in range(3)]
        np.testing.assert_array_equal(np.concatenate([s[0] for s in shards]), ids)
        np.testing.assert_array_equal(np.concatenate([s[1] for s in shards]), targets)


def test_the_dry_run_on_two_cpu_processes_reports_scaling_and_equal_losses():
    pytest.importorskip("torch.distributed")
    done = subprocess.run([sys.executable, str(BENCHMARKS / "scaling.py"), "--device", "cpu",
                           "--gpus", "2", "--config", "toy", "--batch", "2", "--seq", "13",
                           "--warmup", "1", "--steps", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = re.findall(r"^\| (\d) \| [\d.]+ \| [\d,]+ \| [\d.]+x \| ([\d.]+) \|", done.stdout, re.M)
    assert [r[0] for r in rows] == ["1", "2"], done.stdout
    assert float(rows[0][1]) == 0 and float(rows[1][1]) > 0  # only 2 processes all-reduce
    # then the steps queued back to back: their mean, rate and speed-up
    queued = re.findall(r"^\| \d \|.* \| ([\d.]+) \| [\d,]+ \| ([\d.]+)x \|$", done.stdout,
                        re.M)
    assert len(queued) == 2 and float(queued[1][1]) > 0, done.stdout
    # each process's host, GPU and wait times, and the losses of every step: the warm-up
    # step, the two timed one by one, the two queued
    assert len(re.findall(r"^2 GPUs, rank \d: host queues", done.stdout, re.M)) == 2
    curve = re.findall(r"^\| (\d) \| (\d+\.\d+) \| (\d+\.\d+) \|", done.stdout, re.M)
    assert len(curve) == 5, done.stdout
    for _, one, two in curve:
        assert float(two) == pytest.approx(float(one), abs=2e-5)


def _running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_run_past_its_time_is_stopped_with_its_children(tmp_path):
    # a launcher that ignores SIGTERM and has a worker: both must be gone afterwards
    pid_file = tmp_path / "worker.pid"
    script = ("import signal, subprocess, sys, time\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(worker.pid))\n"
              "time.sleep(60)\n")
    start = time.monotonic()
    assert scaling._run_bounded([sys.executable, "-c", script], dict(os.environ), 3.0,
                                grace=0.5) is None
    assert time.monotonic() - start < 20
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(worker)


def test_a_run_within_its_time_gives_its_exit_status():
    assert scaling._run_bounded([sys.executable, "-c", "raise SystemExit(3)"],
                                dict(os.environ), 60) == 3
