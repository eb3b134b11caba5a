"""Time an attention strategy's parameters (zynml/backend/cuda/strategies/attention*.py).

    python benchmarks/tune_attention.py --strategy NAME --compile-only   # here (MLIR)
    python benchmarks/tune_attention.py --strategy NAME                  # on the GPU

NAME is a key of STRATEGIES: `attention` (SIMT, f64), `attention_simt_tiled` (SIMT,
register-tiled, f32), `attention_tensor_core` (mma.sync) or `attention_wgmma` (sm_90a).
Each case of the strategy is compiled once per `Params` of its grid (those that fit) into a
cache folder of its own, .tune/NAME/ (the cache key ignores Params; carry .tune to the
GPU). On the GPU each folder's program runs on the same torch inputs through
zynml.compile's per-call path, timed as gpu_vs_torch.py times (median of 20 calls, CUDA
events), next to PyTorch's scaled_dot_product_attention, with its relative error against
that; the fastest comes first. Both halves need the same compiler source (the cache key
has its hash). The winners belong in the strategy's defaults (`DEFAULT_PARAMS` or
`CONFIGS`), with the figures in docs/performance.md. `--limit N` takes the first N sets
of the grid (a quick check of both halves), `--only TEXT` the cases whose name holds
TEXT (as tune_matmul.py and gpu_vs_torch.py take it).

A strategy is one entry of STRATEGIES: its module (with a frozen `Params` dataclass, and
`params_for(d, e)` or `DEFAULT_PARAMS`, which this script replaces to build with a given
set), its grid, its cases, and which sets fit. A compiled case whose plan does not launch
the strategy's kernel is an error: another strategy took it.
"""
from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from gpu_vs_torch import median_ms  # benchmarks/gpu_vs_torch.py: the same timing

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "programs" / "examples"
TUNE = ROOT / ".tune"


def _grid(**values) -> tuple[dict, ...]:
    """Every combination of the fields' values, the first field varying slowest."""
    return tuple(dict(zip(values, combo)) for combo in itertools.product(*values.values()))


def _fits_static_shared(module, params, shape) -> bool:
    """K and V tiles (and Q's) within a block's static shared memory."""
    return params.shared_bytes(shape[-1], shape[-1]) <= module.MAX_STATIC_SHARED


def _fits_dynamic_shared(module, params, shape) -> bool:
    return params.shared_bytes(shape[-1], shape[-1]) <= module.MAX_SHARED


@dataclass(frozen=True)
class Strategy:
    grid: tuple[dict, ...]   # keyword arguments of Params, one dict per set
    # name -> (program in tests/programs/examples, Q/K/V shape, dtype); attention.zyn gets
    # an all-true mask, and SDPA the same as attn_mask
    cases: dict[str, tuple[str, tuple, str]]
    fits: Optional[Callable] = None  # (module, params, Q shape) -> bool; None: all fit
    module: str = ""         # zynml/backend/cuda/strategies/<module>.py; empty: the key
    target: str = "sm_90a"   # the chip compiled for (a strategy for older chips says so)


STRATEGIES: dict[str, Strategy] = {
    "attention": Strategy(
        grid=_grid(rows_per_block=(32, 64, 128), block_k=(16, 32, 64),
                   max_per_lane=(16, 32)),
        # f64: f32 goes to attention_simt_tiled, f16 with these head dims to
        # attention_tensor_core
        cases={"bert f64": ("attention.zyn", (8, 12, 512, 64), "float64"),
               "seq4096 d128 f64": ("attention.zyn", (1, 16, 4096, 128), "float64")}),
    "attention_simt_tiled": Strategy(
        grid=_grid(block_m=(64, 128), block_n=(32, 64), thread_m=(4, 8),
                   thread_n=(2, 4, 8)),
        cases={"bert f32": ("attention.zyn", (8, 12, 512, 64), "float32"),
               "seq4096 d128 f32": ("attention.zyn", (1, 16, 4096, 128), "float32")},
        fits=lambda module, params, shape: params.valid() and
        params.shared_bytes(shape[-1], shape[-1]) <= module.MAX_SHARED),
    "attention_tensor_core": Strategy(
        grid=_grid(warps=(2, 4, 8), m_tiles=(1, 2), block_n=(16, 32, 64, 128),
                   q_shared=(False, True)),
        cases={"bert d64 mask": ("attention.zyn", (8, 12, 512, 64), "float16"),
               "bert d64": ("flash_attention.zyn", (8, 12, 512, 64), "float16"),
               "seq4096 d128": ("flash_attention.zyn", (1, 16, 4096, 128), "float16")},
        fits=_fits_static_shared, target="sm_90"),  # sm_90a: unmasked cases take wgmma
    "attention_wgmma": Strategy(
        grid=_grid(block_n=(64, 128, 192), stages=(2, 3), overlap=(True, False),
                   persistent=(True, False)),
        cases={"bert d64": ("flash_attention.zyn", (8, 12, 512, 64), "float16"),
               "bert d64 mask": ("attention.zyn", (8, 12, 512, 64), "float16"),
               "seq4096 d128": ("flash_attention.zyn", (1, 16, 4096, 128), "float16"),
               "seq4096 d128 causal": ("causal_attention.zyn", (1, 16, 4096, 128),
                                       "float16"),
               "seq4096 d128 mask": ("attention.zyn", (1, 16, 4096, 128), "float16")},
        fits=_fits_dynamic_shared),
}


def _strategy_module(name: str):
    return importlib.import_module(
        f"zynml.backend.cuda.strategies.{STRATEGIES[name].module or name}")


def _use(module, params) -> None:
    """Make linalg-to-gpu-kernels build `module`'s kernels with `params`."""
    if hasattr(module, "params_for"):
        module.params_for = lambda *shape: params
    if hasattr(module, "DEFAULT_PARAMS") or not hasattr(module, "params_for"):
        module.DEFAULT_PARAMS = params


def _inputs(source: str, shape: tuple, make) -> dict:
    values = {n: make(shape) for n in "QKV"}
    if source == "attention.zyn":
        values["mask"] = make(shape[2:3] * 2, bool)
    return values


def _folder(case: str, values: dict) -> str:
    return f"{case.replace(' ', '_')}-{'-'.join(map(str, values.values()))}"


def _cases(name: str, only: str) -> dict:
    return {case: spec for case, spec in STRATEGIES[name].cases.items() if only in case}


def compile_all(name: str, limit: Optional[int], only: str = "") -> None:
    import zynml
    from zynml.runtime.cuda.artifact import launches
    strategy, module = STRATEGIES[name], _strategy_module(name)
    out = TUNE / name
    out.mkdir(parents=True, exist_ok=True)
    index = []
    for case, (source, shape, dtype) in _cases(name, only).items():
        inputs = _inputs(source, shape, lambda s, t=np.dtype(dtype): np.ones(s, t))
        for values in strategy.grid[:limit]:
            params = module.Params(**values)
            if strategy.fits is not None and not strategy.fits(module, params, shape):
                continue
            _use(module, params)
            folder = _folder(case, values)
            os.environ["ZYNML_CACHE_DIR"] = str(out / folder)
            artifact = zynml.compile(EXAMPLES / source, device="cuda:0", target=strategy.target,
                                     require_device=False).artifact(**inputs)
            kernels = [s["kernel"] for s in launches(artifact.plan["body"])]
            if not any(re.fullmatch(rf"k\d+_{module.NAME}", k) for k in kernels):
                raise SystemExit(f"{case}: {module.NAME} does not take it (kernels: "
                                 f"{', '.join(kernels)})")
            index.append({"case": case, "params": values, "cache": folder})
            print(f"compiled {case} {values}", flush=True)
    (out / "index.json").write_text(json.dumps(index, indent=1))


def run(name: str, only: str = "") -> None:
    import torch
    import zynml
    out = TUNE / name
    index = json.loads((out / "index.json").read_text())
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for case, (source, shape, dtype) in _cases(name, only).items():
        tensors = _inputs(source, shape, lambda s, t=getattr(torch, dtype): (
            torch.randn(s, dtype=t, device="cuda") if t != bool
            else torch.ones(s, dtype=torch.bool, device="cuda")))

        causal = source == "causal_attention.zyn"  # SDPA's is_causal; half the flops

        def sdpa():
            return torch.nn.functional.scaled_dot_product_attention(
                tensors["Q"], tensors["K"], tensors["V"], attn_mask=tensors.get("mask"),
                is_causal=causal)
        reference = sdpa().double()
        torch_ms = median_ms(sdpa, 20, torch)
        flops = 4 * np.prod(shape) * shape[2] // (2 if causal else 1)
        rows = []
        for entry in (e for e in index if e["case"] == case):
            os.environ["ZYNML_CACHE_DIR"] = str(out / entry["cache"])
            program = zynml.compile(EXAMPLES / source, device="cuda:0",
                                    target=STRATEGIES[name].target)

            def call():
                return program(**tensors)["attn"]
            result = torch.as_tensor(call(), device="cuda").double()
            error = ((result - reference).norm() / reference.norm()).item()
            rows.append((median_ms(call, 20, torch), error, entry["params"]))
        print(f"{case}: PyTorch {torch_ms:.3f} ms")
        for ms, error, params in sorted(rows, key=lambda r: r[0]):
            print(f"  {ms:7.3f} ms  {torch_ms / ms:5.2f}x  {flops / ms / 1e9:6.1f} TFLOP/s  "
                  f"err {error:.1e}  {params}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", required=True, choices=sorted(STRATEGIES),
                        help="the strategy whose parameters to time")
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every case and parameter set into .tune/NAME and stop")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N parameter sets of the grid")
    parser.add_argument("--only", default="", metavar="TEXT",
                        help="only the cases whose name contains TEXT")
    args = parser.parse_args()
    if args.compile_only:
        compile_all(args.strategy, args.limit, args.only)
    else:
        run(args.strategy, args.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
