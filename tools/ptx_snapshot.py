"""Write the PTX and launch plan of every `benchmarks/gpu_vs_torch.py` case into a folder.

    python tools/ptx_snapshot.py OUT_DIR [--only TEXT]

A refactoring of the CUDA backend that must not change the generated code is checked by
snapshotting before and after and comparing: `diff -r BEFORE AFTER`. Nothing is read from
or written to the artifact cache (a fresh temporary one is used), and no GPU is needed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", default="", metavar="TEXT",
                        help="only the cases whose name contains TEXT")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zynml-ptx-snapshot-") as cache:
        os.environ["ZYNML_CACHE_DIR"] = cache  # before zynml reads it
        import numpy as np
        import gpu_vs_torch as bench
        args.out_dir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        for case in bench._selected(args.only):
            prog = bench._program(case, "cuda:0", require_device=False)
            if case.pipeline:
                prog = getattr(prog, case.pipeline)._program
            artifact = prog.artifact(**bench._numpy_inputs(case, rng))
            slug = re.sub(r"[^a-z0-9]+", "_", case.name.lower()).strip("_")
            (args.out_dir / f"{slug}.ptx").write_text(artifact.ptx)
            (args.out_dir / f"{slug}.plan.json").write_text(
                json.dumps(artifact.plan, indent=1, sort_keys=True))
            print(f"snapshot: {case.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
