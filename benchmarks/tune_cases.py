"""Tune a strategy's `Params` on rows of gpu_vs_torch.py (shared by tune_memory_bound.py and
tune_gemm_f32.py, which hold the tables: strategy -> (its cases by name, its Params sets)).

Here (MLIR), each case is compiled once per set into a cache folder of its own,
<tune dir>/<case>-<params>/ (index-<strategy>.json lists them; the cache key ignores
Params), with the strategy's Params swapped for the set (`use`). On the GPU every
folder's program runs on the same torch inputs (TF32 off), timed as gpu_vs_torch.py times
(`median_ms`: GPU time, each call queued behind a GPU sleep), next to PyTorch; each line
gives ZynML's and PyTorch's milliseconds, the ratio (> 1: ZynML faster), GB/s and the
share of a device-to-device copy measured in the same run (cases with bytes) or TFLOP/s
(cases with flops), and the relative error against PyTorch; the fastest comes first.
Both halves need the same compiler source (the cache key has its hash). The winners
belong in the strategies' Params defaults, the figures in docs/performance.md.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
from pathlib import Path
from typing import Callable, Optional

import numpy as np

import gpu_vs_torch  # benchmarks/gpu_vs_torch.py: the cases and the timing

ROOT = Path(__file__).resolve().parent.parent

# strategy -> (the gpu_vs_torch cases it runs, its Params sets: keyword arguments)
Table = dict[str, tuple[tuple[str, ...], tuple[dict, ...]]]


def grid(**values) -> tuple[dict, ...]:
    """Every combination of the given fields' values, as Params keyword arguments."""
    import itertools
    return tuple(dict(zip(values, combo)) for combo in itertools.product(*values.values()))


def strategy_module(name: str):
    return importlib.import_module(f"zynml.backend.cuda.strategies.{name}")


def use_default_params(module, values: dict) -> None:
    """Build `module`'s kernels with Params(**values) (its DEFAULT_PARAMS)."""
    module.DEFAULT_PARAMS = module.Params(**values)


def case(name: str) -> gpu_vs_torch.Case:
    return next(c for c in gpu_vs_torch._cases() if c.name == name)


def _folder(case_name: str, values: dict) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "_", case_name).strip("_")
    return f"{name}-{'-'.join(f'{k}{v}' for k, v in values.items()) or 'default'}"


def compile_all(table: Table, tune: Path, only: str,
                use: Callable = use_default_params) -> None:
    from zynml.runtime.cuda.artifact import launches
    for strategy, (cases, sets) in table.items():
        if only and only != strategy:
            continue
        index = []
        module = strategy_module(strategy)
        saved = dict(vars(module))
        for name in cases:
            row = case(name)
            inputs = {n: np.broadcast_to(np.ones(1, spec[1]), spec[0])
                      if isinstance(spec, tuple) else spec for n, spec in row.inputs.items()}
            for values in sets:
                use(module, values)
                folder = _folder(name, values)
                os.environ["ZYNML_CACHE_DIR"] = str(tune / folder)
                prog = gpu_vs_torch._program(row, "cuda:0", require_device=False)
                if row.pipeline:
                    prog = getattr(prog, row.pipeline)._program
                artifact = prog.artifact(**inputs)
                kernels = [s["kernel"] for s in launches(artifact.plan["body"])]
                if not any(re.fullmatch(rf"k\d+_{strategy}", k) for k in kernels):
                    raise SystemExit(f"{name}: {strategy} does not take it ({kernels})")
                index.append({"case": name, "strategy": strategy, "params": values,
                              "cache": folder})
                print(f"compiled {name} {values}", flush=True)
        vars(module).update(saved)  # the module's own Params again
        tune.mkdir(parents=True, exist_ok=True)
        (tune / f"index-{strategy}.json").write_text(json.dumps(index, indent=1))


def run(tune: Path, repeat: int) -> None:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    median_ms = gpu_vs_torch.median_ms
    index = [e for path in sorted(tune.glob("index-*.json"))
             for e in json.loads(path.read_text())]
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    copy_gbs: Optional[float] = None
    if any(case(e["case"]).bytes for e in index):
        big = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")
        copy_gbs = 2 * big.numel() * 4 / median_ms(lambda: big.clone(), repeat, torch) / 1e6
        print(f"# ceiling: device-to-device copy {copy_gbs:.0f} GB/s (read + write)")
    for name in dict.fromkeys(e["case"] for e in index):
        row = case(name)
        host = gpu_vs_torch._numpy_inputs(row, np.random.default_rng())
        tensors = {n: gpu_vs_torch._to_torch(torch, v) if isinstance(v, np.ndarray) else v
                   for n, v in host.items()}
        reference = row.torch_fn(torch, tensors).double()
        torch_ms = median_ms(lambda: row.torch_fn(torch, tensors), repeat, torch)
        rows = []
        for entry in (e for e in index if e["case"] == name):
            os.environ["ZYNML_CACHE_DIR"] = str(tune / entry["cache"])
            prog = gpu_vs_torch._program(row, "cuda:0", require_device=True)
            call = (lambda p=getattr(prog, row.pipeline): p(**tensors)) if row.pipeline \
                else (lambda p=prog: p(**tensors)[row.output])
            result = torch.as_tensor(call(), device="cuda").double()
            error = ((result - reference).norm() / reference.norm()).item()
            rows.append((median_ms(call, repeat, torch), error, entry))
        torch_again = median_ms(lambda: row.torch_fn(torch, tensors), repeat, torch)
        print(f"{name}: PyTorch {torch_ms:.4f} ms (again at the end: {torch_again:.4f})")
        for ms, error, entry in sorted(rows, key=lambda r: r[0]):
            if row.bytes:
                gbs = row.bytes / ms / 1e6
                rate = f"{gbs:5.0f} GB/s {100 * gbs / copy_gbs:5.1f}%"
            else:
                rate = f"{row.flops / ms / 1e9:5.1f} TFLOP/s"
            print(f"  {ms:7.4f} ms  {torch_ms / ms:5.2f}x  {rate}  err {error:.1e}  "
                  f"{entry['strategy']} {entry['params']}", flush=True)


def main(description: str, table: Table, tune: Path,
         use: Callable = use_default_params) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every case and parameter set into .tune/ and stop")
    parser.add_argument("--strategy", default="", choices=("", *table),
                        help="compile only this strategy's cases")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    if args.compile_only:
        compile_all(table, tune, args.strategy, use)
    else:
        run(tune, args.repeat)
    return 0
