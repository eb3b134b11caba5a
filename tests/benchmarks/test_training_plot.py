"""benchmarks/training_plot.py draws its PNG (no GPU: the figures are typed in) and
writes nothing partial."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import training_plot  # noqa: E402  (benchmarks/ is no package)

pytest.importorskip("matplotlib")


def test_the_plot_is_a_png(tmp_path):
    out = tmp_path / "docs" / "training.png"
    training_plot.plot(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in out.parent.iterdir()] == ["training.png"]


def test_the_split_fits_in_its_step():
    assert sum(ms for _, ms in training_plot.BY_OPERATION) < training_plot.STEP_MS
    assert training_plot.SCALING[0][:2] == (1, 1.0)
