"""The attention backward pass at GPT-2 small's shapes, one GPU: ZynML's FlashAttention-2
ukernel, the library's .zyn form (ZYNML_UKERNELS=0), and PyTorch's flash backward
(`aten._scaled_dot_product_flash_attention_backward`, given the forward's log-sum-exp,
as autograd calls it), in the same run.

    python benchmarks/attention_backward.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/attention_backward.py                  # on the GPU (carry the cache)

GPU time per call (median, CUDA events, each call queued behind a GPU sleep:
gpu_vs_torch.median_ms), TFLOP/s counting the five products of the backward (2.5x the
forward's flops, halved when causal), the ratio against PyTorch (> 1: ZynML faster) and
the largest difference from PyTorch's gradients, relative to their largest magnitude.
ZynML's ukernel computes the log-sum-exp again from Q and K (its forward does not keep
it); PyTorch's is handed the forward's.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import zynml.kernels as K

SHAPES = {"gpt2": (16, 12, 1024, 64), "small": (2, 4, 256, 64)}


def _inputs(batch, heads, seq, d):
    import ml_dtypes
    rng = np.random.default_rng(0)
    return [rng.standard_normal((batch, heads, seq, d), np.float32).astype(ml_dtypes.bfloat16)
            for _ in range(5)]  # q, k, v, dout, out


def compile_only(shape) -> None:
    """Both forms' artifacts on a driver that does nothing (benchmarks/fake_cuda.py)."""
    from fake_cuda import FakeCuda
    FakeCuda().install()
    from zynml.runtime.cuda.device_array import DeviceArray
    from zynml.runtime.cuda.driver import get_device
    gpu = get_device(0)
    arrays = [DeviceArray.from_numpy(x, gpu) for x in _inputs(*shape)]
    q, k, v, dout, out = arrays
    for ukernels in ("1", "0"):
        os.environ["ZYNML_UKERNELS"] = ukernels
        K.flash_attention_backward(dout, q, k, v, causal=True, out=out)
        print(f"compiled: ZYNML_UKERNELS={ukernels}", flush=True)


def run(shape, repeat: int) -> None:
    import torch
    from gpu_vs_torch import _to_torch, median_ms  # benchmarks/
    batch, heads, seq, d = shape
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"q, k, v [{batch}, {heads}, {seq}, {d}] bf16, causal")
    q, k, v, dout, _ = (_to_torch(torch, x) for x in _inputs(*shape))
    out, lse, cq, ck, mq, mk, seed, offset, _ = \
        torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True)

    def theirs():
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, out, lse, cq, ck, mq, mk, 0.0, True, seed, offset)[:3]

    def ours():
        return K.flash_attention_backward(dout, q, k, v, causal=True, out=out)

    flops = 2.5 * 4 * batch * heads * seq * seq * d / 2  # causal: half the scores
    reference = [g.float() for g in theirs()]
    print("| form | ms | TFLOP/s | vs PyTorch | max rel. diff dq / dk / dv |")
    print("|---|---|---|---|---|")
    torch_ms = median_ms(theirs, repeat, torch)
    for name, knob in (("ZynML ukernel", "1"), ("ZynML .zyn", "0")):
        os.environ["ZYNML_UKERNELS"] = knob
        ms = median_ms(ours, repeat, torch)
        diffs = [float((torch.from_dlpack(g).float() - r).abs().max() /
                       r.abs().max()) for g, r in zip(ours(), reference)]
        print(f"| {name} | {ms:.3f} | {flops / ms / 1e9:.0f} | {torch_ms / ms:.2f}x | "
              + " / ".join(f"{x:.1e}" for x in diffs) + " |", flush=True)
    print(f"| PyTorch flash backward | {torch_ms:.3f} | {flops / torch_ms / 1e9:.0f} | "
          f"1.00x | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="gpt2")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    compile_only(SHAPES[args.shape]) if args.compile_only else \
        run(SHAPES[args.shape], args.repeat)


if __name__ == "__main__":
    main()
