#!/usr/bin/env python3
"""Differential testing of a compiled device against the `cir` reference interpreter.

    python3 tools/differential.py campaign --seconds 2700 --jobs 2 --out difftest-out
    python3 tools/differential.py check 0 100          # seeds 0..99, one by one, verbose
    python3 tools/differential.py show 1234            # a seed's program and inputs
    python3 tools/differential.py summary difftest-out  # counts by status and feature

`campaign` runs random valid programs (zynml/difftest) in batches, in parallel, until the
time is up; every case that does not pass is saved as difftest-out/cases/seedN/ with its
outcome (results.jsonl has them all). A mismatch found is kept as a regression test in
tests/programs/differential/ (tests/test_differential.py says how).
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path


def _campaign(args) -> int:
    from zynml.difftest.campaign import campaign
    counts = campaign(args.out, args.seconds, args.jobs, args.start, args.batch, args.device)
    print(json.dumps(counts))
    return 0 if set(counts) <= {"ok", "rejected"} else 1


def _check(args) -> int:
    from zynml.difftest.generator import case_from_seed
    from zynml.difftest.runner import check_case
    failed = 0
    for seed in range(args.first, args.last):
        outcome = check_case(case_from_seed(seed), args.device)
        print(f"seed {seed}: {outcome.status} ({outcome.seconds:.2f} s)")
        if outcome.status != "ok":
            failed += 1
            print(outcome.report())
    return 1 if failed else 0


def _show(args) -> int:
    from zynml.difftest.generator import case_from_seed
    case = case_from_seed(args.seed)
    print(case.source)
    for name, value in case.inputs.items():
        print(f"// {name} = {value!r}")
    return 0


def _summary(args) -> int:
    statuses = collections.Counter()
    features = collections.defaultdict(collections.Counter)
    with open(Path(args.out) / "results.jsonl") as results:
        for line in results:
            record = json.loads(line)
            statuses[record["status"]] += 1
            for feature in record.get("features", []):
                features[feature.split("/")[0]][record["status"]] += 1
    print(f"{sum(statuses.values())} programs: {dict(statuses)}")
    for name, counts in sorted(features.items()):
        print(f"  {name:12s} {dict(counts)}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("campaign", help="run programs until the time is up")
    run.add_argument("--seconds", type=float, default=600)
    run.add_argument("--jobs", type=int, default=2)
    run.add_argument("--start", type=int, default=0, help="first seed")
    run.add_argument("--batch", type=int, default=8, help="programs per compilation")
    run.add_argument("--device", default="cpu")
    run.add_argument("--out", default="difftest-out")
    check = sub.add_parser("check", help="check seeds [first, last) one by one")
    check.add_argument("first", type=int)
    check.add_argument("last", type=int)
    check.add_argument("--device", default="cpu")
    show = sub.add_parser("show", help="print a seed's program and inputs")
    show.add_argument("seed", type=int)
    summary = sub.add_parser("summary", help="counts of a campaign's results")
    summary.add_argument("out")
    args = parser.parse_args(argv)
    return {"campaign": _campaign, "check": _check, "show": _show,
            "summary": _summary}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
