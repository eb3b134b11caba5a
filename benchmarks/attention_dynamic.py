"""Attention compiled with run-time sizes against the same program compiled static, and
PyTorch SDPA, on one GPU in one run.

    python benchmarks/attention_dynamic.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/attention_dynamic.py                  # on the GPU (carry the cache)

Both halves must see the same ZYNML_CACHE_DIR. Each row is one attention program of
tests/programs at one size, compiled twice: static (a kernel for that shape) and
dynamic (batch, heads and the sequence lengths run-time sizes, the head dim static: one
artifact for every such shape). The dynamic program is then called at every row's size
with no compile (its Program.stats() are printed). Reported: the median GPU time per
call of each (queued behind a GPU sleep: launch cost hidden), dynamic over static, SDPA's
time and the largest relative error of the dynamic result against SDPA's.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import zynml
from gpu_vs_torch import _to_torch, median_ms  # benchmarks/

PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"
DYNAMIC = ["batch", "heads", "seq_len"]  # the head dim stays static

# (name, program, causal or "mask", (batch, heads, seq, head dim))
ROWS = [
    ("BERT attention 8x12x512x64", "attention_no_mask.zyn", False, (8, 12, 512, 64)),
    ("BERT attention 8x12x512x64, mask", "examples/attention.zyn", "mask", (8, 12, 512, 64)),
    ("attention 1x16x4096x128", "attention_no_mask.zyn", False, (1, 16, 4096, 128)),
    ("causal attention 1x16x4096x128", "examples/causal_attention.zyn", True,
     (1, 16, 4096, 128)),
    ("causal attention 4x32x1000x128 (partial tiles)", "examples/causal_attention.zyn", True,
     (4, 32, 1000, 128)),
    ("causal attention 2x8x77x64 (short)", "examples/causal_attention.zyn", True,
     (2, 8, 77, 64)),
]


def _programs(require_device: bool) -> dict:
    """Per program file: (the dynamic Program, a function giving a static one)."""
    device = "cuda:0"
    made = {}
    for _, source, _, _ in ROWS:
        if source not in made:
            made[source] = zynml.compile(PROGRAMS / source, device=device,
                                         require_device=require_device, dynamic=DYNAMIC)
    return made


def _static(source: str, require_device: bool):
    return zynml.compile(PROGRAMS / source, device="cuda:0", require_device=require_device,
                         dynamic=False)


def _inputs(shape, rng, masked: bool) -> dict:
    values = {name: (rng.standard_normal(shape) * 0.5).astype(np.float16) for name in "QKV"}
    if masked:  # each pair attends with odds 0.9, as gpu_vs_torch.py's masked row
        values["mask"] = rng.random(shape[2:3] * 2) < 0.9
    return values


def compile_only() -> None:
    rng = np.random.default_rng(0)
    dynamic = _programs(require_device=False)
    for name, source, kind, shape in ROWS:
        inputs = _inputs(shape, rng, kind == "mask")
        dynamic[source].artifact(**inputs)
        _static(source, require_device=False).artifact(**inputs)
        print(f"compiled: {name}", flush=True)


def run(repeat: int) -> None:
    import torch
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rng = np.random.default_rng()
    dynamic = _programs(require_device=True)
    print("| attention | static ms | dynamic ms | dynamic / static | SDPA ms | "
          "dynamic vs SDPA | rel. error |")
    print("|---|---|---|---|---|---|---|")
    for name, source, kind, shape in ROWS:
        host = _inputs(shape, rng, kind == "mask")
        x = {n: _to_torch(torch, v) for n, v in host.items()}
        static = _static(source, require_device=True)
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
            x["Q"], x["K"], x["V"], attn_mask=x.get("mask"), is_causal=kind is True)
        out = torch.as_tensor(dynamic[source](**x)["attn"], device="cuda").double()
        want = sdpa().double()
        error = ((out - want).norm() / want.norm()).item()
        s_ms = median_ms(lambda: static(**x)["attn"], repeat, torch)
        d_ms = median_ms(lambda: dynamic[source](**x)["attn"], repeat, torch)
        t_ms = median_ms(sdpa, repeat, torch)
        print(f"| {name} | {s_ms:.3f} | {d_ms:.3f} | {d_ms / s_ms:.2f} | {t_ms:.3f} | "
              f"{t_ms / d_ms:.2f}x | {error:.1e} |", flush=True)
    for source, prog in dynamic.items():
        print(f"# {source} dynamic: {prog.stats()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every row's artifacts into the cache and stop")
    parser.add_argument("--repeat", type=int, default=50, help="timed calls per median")
    args = parser.parse_args()
    if args.compile_only:
        compile_only()
    else:
        run(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
