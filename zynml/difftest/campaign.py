"""A differential campaign: as many generated programs as a time budget allows, in
parallel processes, the interpreter against a compiled device.

    campaign(out_dir, seconds=2700, jobs=2)   # tools/differential.py campaign

Seeds go out in batches (one merged program per batch: one compilation); each batch's
outcomes are appended to out_dir/results.jsonl as they come, and every case that did
not pass is saved under out_dir/cases/seedN/ (corpus.py) with its outcome, to triage.
A worker that dies takes its batch with it: the batch is recorded as "worker-died" and
the pool restarted.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Optional

__all__ = ["campaign", "run_batch"]


def run_batch(seeds: list[int], device: str, out_dir: str) -> list[dict]:
    """Check the cases of `seeds` (in one process); returns one record per case."""
    from .corpus import save_case
    from .generator import case_from_seed
    from .runner import check_batch
    cases = [case_from_seed(seed, suffix=f"_{k}") for k, seed in enumerate(seeds)]
    records = []
    for outcome in check_batch(cases, device):
        record = {"seed": outcome.case.seed, "status": outcome.status,
                  "seconds": round(outcome.seconds, 3), "features": outcome.case.features}
        if outcome.status != "ok":
            record["detail"] = outcome.detail[:2000]
            alone = case_from_seed(outcome.case.seed)  # the case without its suffix
            save_case(Path(out_dir) / "cases" / alone.name, alone, status=outcome.status,
                      detail=outcome.detail)
        records.append(record)
    return records


def _worker_init(cache: str) -> None:
    os.environ["ZYNML_CACHE_DIR"] = cache  # a private artifact cache, removed at the end


def campaign(out_dir: str, seconds: float, jobs: int = 2, start: int = 0, batch: int = 8,
             device: str = "cpu", log=sys.stdout) -> dict[str, int]:
    """Run batches from seed `start` until `seconds` have passed; returns the counts."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = open(out / "results.jsonl", "a")
    counts: dict[str, int] = {}
    deadline = time.monotonic() + seconds
    next_seed = start
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zynml-difftest-cache-") as cache:
        pool: Optional[ProcessPoolExecutor] = None
        pending: dict = {}
        while True:
            if pool is None:
                pool = ProcessPoolExecutor(jobs, initializer=_worker_init, initargs=(cache,))
            while time.monotonic() < deadline and len(pending) < 2 * jobs:
                seeds = list(range(next_seed, next_seed + batch))
                next_seed += batch
                pending[pool.submit(run_batch, seeds, device, str(out))] = seeds
            if not pending:
                break
            done, _ = wait(pending, timeout=60, return_when=FIRST_COMPLETED)
            for future in done:
                seeds = pending.pop(future)
                try:
                    records = future.result()
                except BrokenProcessPool:
                    records = [{"seed": s, "status": "worker-died"} for s in seeds]
                    pool = None
                for record in records:
                    counts[record["status"]] = counts.get(record["status"], 0) + 1
                    results.write(json.dumps(record) + "\n")
                results.flush()
            if pool is None:  # its other batches died with it
                for future, seeds in pending.items():
                    for s in seeds:
                        counts["worker-died"] = counts.get("worker-died", 0) + 1
                        results.write(json.dumps({"seed": s, "status": "worker-died"}) + "\n")
                pending.clear()
            total = sum(counts.values())
            print(f"[{time.monotonic() - began:7.0f}s] {total} programs: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=log,
                  flush=True)
        if pool is not None:
            pool.shutdown()
    results.close()
    return counts
