"""Time the tensor-core attention kernel's parameters (passes/gpu_strategies/
attention_tensor_core.py).

    python benchmarks/tune_attention_tensor_core.py --compile-only   # here: .tune/attention_tc/
    python benchmarks/tune_attention_tensor_core.py                  # on the GPU (carry .tune)

Each case is compiled once per `Params` of the grid (those whose K and V tiles fit in 48 KB
of static shared memory) into a cache folder of its own (the cache key ignores Params);
on the GPU each folder's program runs on the same torch inputs through zynml.compile's
per-call path, timed as gpu_vs_torch.py times (median of 20 calls, CUDA events), next to
PyTorch's scaled_dot_product_attention, with its relative error against that. Both
halves need the same compiler source (the cache key has its hash). The winners belong in
the strategy's `CONFIGS`, with the figures in docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from gpu_vs_torch import median_ms  # benchmarks/gpu_vs_torch.py: the same timing

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "programs" / "examples"
OUT = ROOT / ".tune" / "attention_tc"
CASES = {  # name -> (program, Q/K/V shape); attention.zyn gets an all-true mask
    "bert d64 mask": ("attention.zyn", (8, 12, 512, 64)),
    "bert d64": ("flash_attention.zyn", (8, 12, 512, 64)),
    "seq4096 d128": ("flash_attention.zyn", (1, 16, 4096, 128)),
}
GRID = [dict(warps=w, m_tiles=m, block_n=n, q_shared=q)
        for w in (2, 4, 8) for m in (1, 2) for n in (16, 32, 64, 128) for q in (False, True)]


def _inputs(source: str, shape: tuple, make) -> dict:
    values = {n: make(shape) for n in "QKV"}
    if source == "attention.zyn":
        values["mask"] = make(shape[2:3] * 2, bool)
    return values


def compile_all() -> None:
    import zynml
    from zynml.passes.gpu_strategies import attention_tensor_core as strategy
    OUT.mkdir(parents=True, exist_ok=True)
    index = []
    for case, (source, shape) in CASES.items():
        inputs = _inputs(source, shape, lambda s, t=np.float16: np.ones(s, t))
        for values in GRID:
            params = strategy.Params(**values)
            if params.shared_bytes(shape[-1], shape[-1]) > strategy.MAX_STATIC_SHARED:
                continue
            strategy.CONFIGS = ((strategy.MAX_HEAD_DIM, params),)
            folder = f"{case.replace(' ', '_')}-{'-'.join(map(str, values.values()))}"
            os.environ["ZYNML_CACHE_DIR"] = str(OUT / folder)
            zynml.compile(EXAMPLES / source, device="cuda:0",
                          require_device=False).artifact(**inputs)
            index.append({"case": case, "params": values, "cache": folder})
            print(f"compiled {case} {values}", flush=True)
    (OUT / "index.json").write_text(json.dumps(index, indent=1))


def run() -> None:
    import torch
    import zynml
    index = json.loads((OUT / "index.json").read_text())
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for case, (source, shape) in CASES.items():
        tensors = _inputs(source, shape, lambda s, t=torch.float16: (
            torch.randn(s, dtype=t, device="cuda") if t != bool
            else torch.ones(s, dtype=torch.bool, device="cuda")))

        def sdpa():
            return torch.nn.functional.scaled_dot_product_attention(
                tensors["Q"], tensors["K"], tensors["V"])
        reference = sdpa().double()
        torch_ms = median_ms(sdpa, 20, torch)
        flops = 4 * np.prod(shape) * shape[2]
        rows = []
        for entry in (e for e in index if e["case"] == case):
            os.environ["ZYNML_CACHE_DIR"] = str(OUT / entry["cache"])
            program = zynml.compile(EXAMPLES / source, device="cuda:0")

            def call():
                return program(**tensors)["attn"]
            out = torch.as_tensor(call(), device="cuda").double()
            error = ((out - reference).norm() / reference.norm()).item()
            rows.append((median_ms(call, 20, torch), error, entry["params"]))
        print(f"{case}: PyTorch {torch_ms:.3f} ms")
        for ms, error, params in sorted(rows, key=lambda r: r[0]):
            print(f"  {ms:7.3f} ms  {torch_ms / ms:5.2f}x  {flops / ms / 1e9:6.1f} TFLOP/s  "
                  f"err {error:.1e}  {params}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    compile_all() if args.compile_only else run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
