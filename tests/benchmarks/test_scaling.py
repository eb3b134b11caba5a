"""benchmarks/scaling.py without a GPU: its dry run on two CPU processes (gloo) measures
and reports, and its N-process losses are those of one process accumulating the same
global batch; the GPU counts and the in-turn shards."""
import re
import subprocess
import sys
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
    curve = re.findall(r"^\| (\d) \| (\d+\.\d+) \| (\d+\.\d+) \|", done.stdout, re.M)
    assert len(curve) == 3, done.stdout
    for _, one, two in curve:
        assert float(two) == pytest.approx(float(one), abs=2e-5)
