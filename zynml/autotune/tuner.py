"""Time the strategy parameters of a program's kernels on the GPU and keep the winners.

For each kernel of the program (a launch of its artifact: the strategy that built it and
its tuning problem), each parameter set of the strategy's SEARCH is compiled as that
kernel's own params (`strategy@problem.field=value`: the other kernels keep theirs), and
the whole program is timed with CUDA events; the fastest set, the strategy's own choice
included, goes to the database (database.py) for later compiles.

Compiling needs MLIR, timing a GPU. Where one machine has only the first (this project's
CPU machines), `compile_only=True` compiles every candidate into the artifact cache with
the list of candidates (the tune plan); the GPU machine, given the cache folder, times
them without compiling and writes the database there, to be carried back.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from .. import compiler
from ..cache import ArtifactCache
from ..errors import ZynMLError
from .database import Entry, TuningDatabase

__all__ = ["Kernel", "Report", "tune"]

Timer = Callable[[Any], float]  # artifact -> milliseconds per call of the program

# A set must beat the strategy's own choice by this fraction to win: closer is timing
# noise. Seen on an H100: BERT attention's winner by 0.4% in `zynml tune` was 10% slower
# than the default in the benchmark that followed.
MIN_GAIN = 0.02


@dataclass
class Kernel:
    strategy: str
    problem: str
    candidates: list[dict]            # field sets to try; {} (the strategy's own) first
    times: list[Optional[float]] = field(default_factory=list)  # ms per candidate

    def best(self) -> tuple[dict, float] | None:
        """The fastest set and its time; the strategy's own ({}, first) unless another
        is faster by more than MIN_GAIN."""
        timed = [(ms, i) for i, ms in enumerate(self.times) if ms is not None]
        if not timed:
            return None
        ms, index = min(timed)
        default = self.times[0] if self.times else None
        if default is not None and ms > default * (1 - MIN_GAIN):
            return self.candidates[0], default
        return self.candidates[index], ms


@dataclass
class Report:
    chip: str
    kernels: list[Kernel]
    compiled: int = 0     # candidates compiled (or found in the cache)
    declined: int = 0     # candidates the strategy declined (another took the kernel)

    def table(self) -> str:
        """The summary: a row per kernel."""
        rows = [("kernel", "default ms", "best ms", "speed-up", "best params", "tried")]
        for k in self.kernels:
            best = k.best()
            default = k.times[0] if k.times else None
            if best is None or default is None:
                rows.append((k.strategy, "-", "-", "-", "not timed", str(len(k.candidates))))
                continue
            params, ms = best
            rows.append((k.strategy, f"{default:.4f}", f"{ms:.4f}", f"{default / ms:.2f}x",
                         _fields(params) or "(its own)",
                         str(sum(t is not None for t in k.times))))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        problems = [f"  {k.strategy}: {k.problem}" for k in self.kernels]
        return "\n".join(lines + ["problems:"] + problems)


def tune(program, inputs: dict[str, Any], *, limit: int | None = None, rounds: int = 5,
         compile_only: bool = False, progress: bool = True, timer: Timer | None = None,
         record: bool = True) -> Report:
    """Tune `program` (a native-CUDA zynml.Program) for these inputs' shapes and dtypes:
    at most `limit` sets per kernel, each timed as the median of `rounds` rounds.
    `timer` replaces the GPU timing (tests); `record=False` leaves the database as it is.
    """
    if program.backend != "native":
        raise ZynMLError(f"autotuning needs the native CUDA backend; this program is for "
                         f"'{program.device}' with backend '{program.backend}'")
    checked, signature, scalars = program._specialize(inputs)
    job = _Job(program, checked, signature, scalars)
    kernels = job.plan(limit)
    report = Report(program.target.chip, kernels)
    if compile_only:
        return report
    timer = timer or _gpu_timer(program, checked, inputs, rounds)
    bar = _bar(sum(len(k.candidates) for k in kernels), progress)
    for kernel in kernels:
        kernel.times = []
        for candidate in kernel.candidates:
            artifact = job.artifact(kernel, candidate)
            kernel.times.append(None if artifact is None else timer(artifact))
            bar.update(1)
    bar.close()
    if record:
        _record(job, kernels)
    return report


class _Job:
    """One program and signature: its artifacts per candidate, and its tune plan."""

    def __init__(self, program, checked, signature, scalars):
        self.program, self.checked = program, checked
        self.signature, self.scalars = signature, scalars
        self.cache = program._cache
        self.can_compile = compiler.installed()

    def build(self, params: str):
        target = dataclasses.replace(self.program.target, params=params)
        return compiler.build(self.checked, self.program.source, self.program.placement,
                              target, self.signature, self.scalars, self._pipeline(),
                              cache=self.cache, use_database=False)

    def _pipeline(self) -> str:
        return self.program._pipeline.name if self.program._pipeline else ""

    def params(self, kernel: Kernel, candidate: dict) -> str:
        own = ";".join(f"{kernel.strategy}@{kernel.problem}.{name}={_value(value)}"
                       for name, value in candidate.items())
        return ";".join(filter(None, (self.program.target.params, own)))

    def artifact(self, kernel: Kernel, candidate: dict):
        """The artifact with `candidate` for `kernel`; None when its strategy declined
        the kernel then (another built it)."""
        artifact = self.build(self.params(kernel, candidate))
        if not any(s.get("strategy") == kernel.strategy and s.get("problem") == kernel.problem
                   for s in _launches(artifact.plan)):
            return None
        return artifact

    def plan(self, limit: int | None) -> list[Kernel]:
        """The kernels and the candidates that build, compiled here, or read from the
        cache where this machine has no compiler."""
        key = ArtifactCache.key("tune-plan", self._default_key(), str(limit))
        if not self.can_compile:
            saved = self.cache.get(key)
            if saved is None:
                raise ZynMLError("no tuning plan for this program and these shapes in the "
                                 f"artifact cache ({self.cache.root}), and no compiler here: "
                                 "run `zynml tune --compile-only` (or Program.tune("
                                 "compile_only=True)) where ZynML's compiler is installed, "
                                 "and carry the cache folder")
            try:
                return [Kernel(**k) for k in json.loads(saved)]
            except (ValueError, TypeError) as err:  # whole (hash checked), yet not a plan
                self.cache.discard(key, f"it is not a tune plan: {err}")
                raise ZynMLError("the tuning plan in the artifact cache "
                                 f"({self.cache.root}) was not readable and has been "
                                 "removed: run `zynml tune --compile-only` again where "
                                 "ZynML's compiler is installed, and carry the cache "
                                 "folder") from None
        from ..backend.cuda.strategies.tuning import SEARCH  # needs MLIR: compile side only
        kernels, seen = [], set()
        for step in _launches(self.build(self.program.target.params).plan):
            found = (step.get("strategy"), step.get("problem"))
            if None in found or found in seen:
                continue
            seen.add(found)
            sets = [{}] + list(SEARCH.get(found[0], ()))[:limit]
            kernel = Kernel(*found, sets)
            kernel.candidates = [c for c in sets if self._builds(kernel, c)]
            kernels.append(kernel)
        self.cache.put(key, json.dumps([dataclasses.asdict(k) for k in kernels]).encode())
        return kernels

    def _builds(self, kernel: Kernel, candidate: dict) -> bool:
        try:
            return self.artifact(kernel, candidate) is not None
        except ZynMLError:  # a set the strategy refuses for this chip (its checks)
            return False

    def _default_key(self) -> str:
        backend = compiler.BACKENDS[self.program.backend]
        return compiler.artifact_key(backend, self.program.source, self._pipeline(),
                                     self.signature, self.scalars, self.program.target)


def _launches(plan: dict):
    from ..runtime.cuda.artifact import launches
    return launches(plan["body"])


def _gpu_timer(program, checked, inputs: dict, rounds: int) -> Timer:
    """Time an artifact on the program's GPU: the inputs uploaded once, two calls to warm
    up, then `rounds` rounds of back-to-back calls (enough for about 20 ms each)."""
    from ..runtime.cuda.device_array import DeviceArray
    from ..runtime.cuda.function import CudaFunction
    from ..runtime.cuda.driver import get_device
    device = get_device(program.placement.ordinal)
    arguments = [inputs[name] for name in checked.inputs]
    uploaded = [DeviceArray.from_numpy(a, device) if getattr(a, "ndim", 0) else a
                for a in arguments]

    def time(artifact) -> float:
        function = CudaFunction(artifact, program.placement.ordinal)
        for _ in range(2):
            function(*uploaded)
        estimate = device.time_ms(lambda: function(*uploaded), 1)
        calls = max(1, min(1000, int(20 / max(estimate, 1e-3))))
        return statistics.median(device.time_ms(lambda: function(*uploaded), calls)
                                 for _ in range(rounds))
    return time


def _record(job: _Job, kernels: list[Kernel]) -> None:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    entries = []
    for kernel in kernels:
        best = kernel.best()
        if best is None or kernel.times[0] is None:
            continue
        params, ms = best
        entries.append(Entry(job.program.target.chip, compiler.fingerprint(),
                             kernel.strategy, kernel.problem, params, ms,
                             kernel.times[0], now))
    TuningDatabase.beside(job.cache).record(entries)


def _bar(total: int, shown: bool):
    from tqdm import tqdm
    return tqdm(total=total, desc="zynml tune", unit="set", disable=not shown)


def _value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _fields(params: dict) -> str:
    return " ".join(f"{k}={_value(v)}" for k, v in params.items())
