"""Cases on disk: a folder per case, readable with numpy alone (for a GPU machine).

    case_dir/program.zyn     the program
    case_dir/inputs.npz      its inputs by name
    case_dir/expected.npz    the interpreter's outputs (write_corpus)
    case_dir/reference.npz   its outputs with float inputs as f64 (compare.py's triage)
    case_dir/meta.json       seed, features, and the dtypes .npz cannot say (bfloat16)

    write_corpus("corpus/", range(0, 300))   # programs, inputs and interpreter results
    load_case("corpus/seed7")                # -> (Case, expected outputs or None)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Optional

import ml_dtypes
import numpy as np

from .generator import Case, case_from_seed

__all__ = ["save_arrays", "load_arrays", "save_case", "load_case", "load_reference",
           "write_corpus"]

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def save_arrays(path: Path, values: dict[str, Any]) -> dict[str, str]:
    """Write `values` as .npz (bfloat16 as its bits); returns {name: kind} to keep: the
    dtype names .npz loses and which values were scalars."""
    arrays, kinds = {}, {}
    for name, value in values.items():
        a = np.asarray(value)
        kinds[name] = ("scalar " if not isinstance(value, np.ndarray) else "array ") + \
            a.dtype.name
        arrays[name] = a.view(np.uint16) if a.dtype == _BFLOAT16 else a
    np.savez(path, **arrays)
    return kinds


def load_arrays(path: Path, kinds: dict[str, str]) -> dict[str, Any]:
    values = {}
    with np.load(path, allow_pickle=False) as data:
        for name, kind in kinds.items():
            what, dtype = kind.split(" ")
            a = data[name]
            if dtype == "bfloat16":
                a = a.view(_BFLOAT16)
            values[name] = a[()] if what == "scalar" else a
    return values


def save_case(folder: Path, case: Case, expected: Optional[dict[str, Any]] = None,
              reference: Optional[dict[str, Any]] = None, **extra: Any) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "program.zyn").write_text(case.source)
    meta = {"seed": case.seed, "features": case.features,
            "inputs": save_arrays(folder / "inputs.npz", case.inputs)}
    if expected is not None:
        meta["outputs"] = save_arrays(folder / "expected.npz", expected)
    if reference is not None:
        meta["reference"] = save_arrays(folder / "reference.npz", reference)
    meta.update(extra)
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, default=str))


def load_case(folder: Path) -> tuple[Case, Optional[dict[str, Any]]]:
    """The case and the interpreter's outputs (None when not saved)."""
    folder = Path(folder)
    meta = json.loads((folder / "meta.json").read_text())
    case = Case((folder / "program.zyn").read_text(),
                load_arrays(folder / "inputs.npz", meta["inputs"]), meta.get("features", []),
                meta.get("seed"))
    expected = load_arrays(folder / "expected.npz", meta["outputs"]) \
        if "outputs" in meta else None
    return case, expected


def load_reference(folder: Path) -> Optional[dict[str, Any]]:
    """The float64 run of a corpus case, if saved."""
    meta = json.loads((Path(folder) / "meta.json").read_text())
    return load_arrays(Path(folder) / "reference.npz", meta["reference"]) \
        if "reference" in meta else None


def write_corpus(folder: Path, seeds: Iterable[int]) -> dict[str, int]:
    """One folder per seed: the program, its inputs and the interpreter's outputs (what
    another device's results are compared with). Returns counts: written, and skipped
    (a generated program the front end or the interpreter refused)."""
    from ..errors import ZynMLError
    from .runner import float64_inputs, run_case
    counts = {"written": 0, "skipped": 0}
    for seed in seeds:
        case = case_from_seed(seed)
        if case.invalid:
            counts["skipped"] += 1
            continue
        try:
            expected = run_case(case, "interpreter")
            reference = run_case(case, "interpreter", float64_inputs(case.inputs))
        except ZynMLError:
            counts["skipped"] += 1
            continue
        save_case(Path(folder) / case.name, case, expected, reference)
        counts["written"] += 1
    return counts
