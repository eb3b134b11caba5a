"""What the plotting scripts (roofline_plot.py, training_plot.py) share."""
from __future__ import annotations

from pathlib import Path


def save(figure, out: Path, dpi: int) -> None:
    """`figure` as the PNG `out`, written whole or not at all (a temporary file beside
    it, then a rename): no partial image on failure."""
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.png")
    figure.savefig(tmp, dpi=dpi)
    tmp.replace(out)
