#!/usr/bin/env python3
"""Differential testing of ZynML's native CUDA backend against the `cir` interpreter, in
two halves, because the GPU machine has no MLIR (as tools/gpu_tests.sh):

    # here: programs, inputs, the interpreter's results, and each program's artifact
    python3 tools/differential_cuda.py compile --seeds 0:300 --out .difftest-cuda
    # on the GPU machine (.difftest-cuda carried; numpy and cuda-python suffice)
    python3 tools/differential_cuda.py run .difftest-cuda [--device cuda:0]

`compile` writes one folder per seed (zynml/difftest/corpus.py: program.zyn, inputs.npz,
expected.npz, reference.npz, meta.json) and beside them cuda.artifact, or cuda.json
saying why there is none (the backend declined the program with a located error:
"rejected"; or it failed otherwise: "crash"). `run` loads each artifact, runs it on the
inputs and compares with the interpreter's results (compare.py, the float64 reference
judging float noise); it prints each difference and a count per outcome, and exits 1
when a case differs or crashes.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import traceback
import warnings
from pathlib import Path


def _seeds(text: str) -> range:
    first, _, last = text.partition(":")
    return range(int(first), int(last))


def _compile(args) -> int:
    import zynml
    from zynml.difftest.corpus import load_case, write_corpus
    out = Path(args.out)
    start = time.perf_counter()
    counts = write_corpus(out, _seeds(args.seeds))
    corpus_s = time.perf_counter() - start
    outcomes: collections.Counter = collections.Counter()
    start = time.perf_counter()
    for folder in sorted(p for p in out.iterdir() if (p / "meta.json").exists()):
        case, _ = load_case(folder)
        began = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program = zynml.compile(case.source, device="cuda", require_device=False,
                                        target=args.target)
                program.artifact(**case.inputs).save(folder / "cuda.artifact")
            status, detail = "compiled", ""
        except zynml.ZynMLError as err:
            status, detail = ("crash" if "internal error" in str(err) else "rejected"), str(err)
        except Exception:
            status, detail = "crash", traceback.format_exc()
        (folder / "cuda.json").write_text(json.dumps(
            {"status": status, "detail": detail, "seconds": time.perf_counter() - began}))
        outcomes[status] += 1
        if status == "crash":
            print(f"{folder.name}: crash\n{detail}")
    compile_s = time.perf_counter() - start
    print(f"corpus: {counts} in {corpus_s:.0f} s; CUDA: {dict(outcomes)} in {compile_s:.0f} s "
          f"({compile_s / max(1, sum(outcomes.values())):.2f} s a program)")
    return 1 if outcomes["crash"] else 0


def _run(args) -> int:
    import zynml
    from zynml.difftest.compare import differences
    from zynml.difftest.corpus import load_case, load_reference
    outcomes: collections.Counter = collections.Counter()
    for folder in sorted(p for p in Path(args.corpus).iterdir() if (p / "meta.json").exists()):
        compiled = json.loads((folder / "cuda.json").read_text()) \
            if (folder / "cuda.json").exists() else {"status": "not compiled"}
        if compiled["status"] != "compiled":
            outcomes[compiled["status"]] += 1
            continue
        case, expected = load_case(folder)
        try:
            actual = zynml.load(folder / "cuda.artifact", args.device)(**case.inputs)
            found = differences(expected, actual)
            if found:
                found = differences(expected, actual, load_reference(folder))
            status = "mismatch" if found else "ok"
            detail = "\n".join(found)
        except Exception:
            status, detail = "crash", traceback.format_exc()
        outcomes[status] += 1
        if status != "ok":
            print(f"{folder.name}: {status}\n{detail}\n{case.source}")
    print(dict(outcomes))
    return 1 if outcomes["mismatch"] or outcomes["crash"] else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    comp = sub.add_parser("compile", help="write the corpus and compile it for CUDA (here)")
    comp.add_argument("--seeds", default="0:300", help="FIRST:LAST (LAST excluded)")
    comp.add_argument("--out", default=".difftest-cuda")
    comp.add_argument("--target", default=None, help="CUDA chip (default: sm_90a)")
    run = sub.add_parser("run", help="run the artifacts and compare (on the GPU machine)")
    run.add_argument("corpus")
    run.add_argument("--device", default="cuda:0")
    args = parser.parse_args(argv)
    return {"compile": _compile, "run": _run}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
