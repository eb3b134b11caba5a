"""benchmarks/async_overlap.py without a GPU: its dry run on the CPU's thread pool checks
each program's values against float64 numpy and reports the three timings."""
import argparse
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import async_overlap  # noqa: E402  (benchmarks/ is no package)


def test_the_dry_run_on_the_cpu_checks_values_and_reports(capsys):
    args = argparse.Namespace(points=37, centres=101, repeat=2, device="cpu")
    seconds = async_overlap.run(args)
    assert set(seconds) == {"x alone", "y alone", "both as futures"}
    assert all(s > 0 for s in seconds.values())
    async_overlap.report(args, seconds)
    out = capsys.readouterr().out
    assert "| both as futures |" in out and "of the two alone" in out


def test_wrong_sizes_are_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["async_overlap.py", "--points", "0"])
    with pytest.raises(SystemExit) as info:
        async_overlap.main()
    assert info.value.code == 2 and "positive numbers" in capsys.readouterr().err
