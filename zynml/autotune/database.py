"""The autotuning database: the strategy parameters `zynml tune` found fastest, per chip,
kernel problem and compiler, which later compiles use.

One JSON file in the user's cache folder (`autotune.json` beside the artifacts, so that
carrying the cache folder to another machine carries it too):

    {"format": "zynml-autotune", "version": 1, "entries": [
      {"chip": "sm_90a", "compiler": "<fingerprint>", "strategy": "matmul_wgmma",
       "problem": "4096x4096f16_4096x4096f16_4096x4096f16", "params": {"group_m": 16},
       "ms": 0.211, "default_ms": 0.216, "tuned": "2026-11-25T21:00:00+00:00"}]}

An entry counts only for the compiler that tuned it (a changed compiler may build other
kernels). Writes are atomic (a reader sees the old file or the new one) and merge with
what is on disk; a file that is not a readable database is ignored with one warning,
never a failure; only a regular file of bounded size is read.
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..cache import atomic_write_bytes, default_cache_dir
from ..errors import note

__all__ = ["Entry", "TuningDatabase", "FILE_NAME", "params_text"]

FILE_NAME = "autotune.json"
FORMAT, VERSION = "zynml-autotune", 1
MAX_BYTES = 16 * 2 ** 20  # a larger file is not one this module wrote


@dataclass(frozen=True)
class Entry:
    chip: str
    compiler: str
    strategy: str
    problem: str
    params: dict = field(default_factory=dict)  # the winner's fields ({}: the defaults)
    ms: float = 0.0           # the winner's time, per call of the whole program
    default_ms: float = 0.0   # the strategy's own choice's, in the same run
    tuned: str = ""           # when (ISO 8601)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.chip, self.compiler, self.strategy, self.problem


class TuningDatabase:
    """The database file at `path` (default: `autotune.json` in the artifact cache)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_cache_dir() / FILE_NAME

    @staticmethod
    def beside(cache) -> "TuningDatabase":
        """The database in an ArtifactCache's folder."""
        return TuningDatabase(Path(cache.root) / FILE_NAME)

    def entries(self) -> list[Entry]:
        """Every entry on disk; none when the file is missing or unreadable."""
        data = self._read()
        if data is None:
            return []
        try:
            if data.get("format") != FORMAT or data.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} version {VERSION} file")
            entries = [Entry(**item) for item in data["entries"]]
            for entry in entries:
                _check_types(entry)
            return entries
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            self._ignore(f"it is not a tuning database ({err})")
            return []

    def entries_for(self, chip: str, compiler: str) -> list[Entry]:
        """The entries that `chip` and `compiler` tuned."""
        return [e for e in self.entries() if e.chip == chip and e.compiler == compiler]

    def record(self, new: list[Entry]) -> None:
        """Add `new`, replacing entries of the same chip, compiler, strategy and problem."""
        merged = {e.key: e for e in self.entries()}
        merged.update({e.key: e for e in new})
        data = {"format": FORMAT, "version": VERSION,
                "entries": [asdict(e) for e in sorted(merged.values(), key=lambda e: e.key)]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, json.dumps(data, indent=1).encode())

    def _read(self):
        try:
            info = os.stat(self.path)  # follows a link: what would be read
        except FileNotFoundError:
            return None
        except OSError as err:
            self._ignore(f"it cannot be read ({err.strerror})")
            return None
        if not stat.S_ISREG(info.st_mode):
            self._ignore("it is not a regular file")
            return None
        if info.st_size > MAX_BYTES:
            self._ignore(f"it is larger than {MAX_BYTES} bytes")
            return None
        try:
            return json.loads(self.path.read_bytes())
        except (OSError, ValueError) as err:
            self._ignore(f"it is not valid JSON ({err})")
            return None

    def _ignore(self, why: str) -> None:
        note(f"note: ignoring the autotuning database {self.path}: {why}")


def _check_types(entry: Entry) -> None:
    """JSON that parses may still hold the wrong kinds of values (a hand edit, a flipped
    byte): later code relies on these, so a wrong one makes the file unreadable here."""
    for name in ("chip", "compiler", "strategy", "problem", "tuned"):
        if not isinstance(getattr(entry, name), str):
            raise TypeError(f"entry field '{name}' is not text")
    for name in ("ms", "default_ms"):
        if not isinstance(getattr(entry, name), (int, float)):
            raise TypeError(f"entry field '{name}' is not a number")
    if not isinstance(entry.params, dict) or not all(
            isinstance(k, str) and isinstance(v, (bool, int, float, str))
            for k, v in entry.params.items()):
        raise TypeError("entry field 'params' is not a table of parameter values")


def params_text(entries: list[Entry]) -> str:
    """Entries as linalg-to-gpu-kernels' params option: `strategy@problem.field=value`,
    joined by ';' and sorted (target.params_text's canonical form)."""
    return ";".join(sorted(f"{e.strategy}@{e.problem}.{name}={_text(value)}"
                           for e in entries for name, value in e.params.items()))


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
