"""The attention backward pass at GPT-2 small's shapes (or head dim 128's), one GPU: ZynML's FlashAttention-2
ukernel (making the log-sum-exp itself, or given the forward ukernel's), the library's
.zyn form (ZYNML_UKERNELS=0), and PyTorch's flash backward
(`aten._scaled_dot_product_flash_attention_backward`, given the forward's log-sum-exp,
as autograd calls it), in the same run; then the forwards (the compiler's
attention_wgmma, the forward ukernel that also writes the log-sum-exp, PyTorch's flash
forward), and a transformer block's attention from its qkv rows to its output and back
(split_heads, flash_attention_with_lse, merge_heads and their backward, against
fused_qkv_attention, which reads and writes the token-major rows).

    python benchmarks/attention_backward.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/attention_backward.py                  # on the GPU (carry the cache)

GPU time per call (median, CUDA events, each call queued behind a 2 ms GPU sleep, longer
than any side's Python takes to launch it: gpu_vs_torch.median_ms), the call's time when
the GPU is idle as it starts (host cost included), TFLOP/s counting the five products of
the backward (2.5x the forward's flops, halved when causal), the ratio against PyTorch
(> 1: ZynML faster) and the largest difference from PyTorch's gradients, relative to
their largest magnitude.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import zynml.kernels as K

QUEUE_CYCLES = 4_000_000  # ~2 ms of GPU sleep before each timed call
SHAPES = {"gpt2": (16, 12, 1024, 64), "small": (2, 4, 256, 64),
          "d128": (8, 16, 2048, 128)}  # head dim 128: 16k tokens of a 2048-wide model


def _inputs(batch, heads, seq, d):
    import ml_dtypes
    rng = np.random.default_rng(0)
    return [rng.standard_normal((batch, heads, seq, d), np.float32).astype(ml_dtypes.bfloat16)
            for _ in range(5)]  # q, k, v, dout, out


def _rows(batch, heads, seq, d):
    """A fused projection's qkv rows and the output's gradient, token-major."""
    import ml_dtypes
    rng = np.random.default_rng(1)
    return [rng.standard_normal((batch * seq, parts * heads * d), np.float32)
            .astype(ml_dtypes.bfloat16) for parts in (3, 1)]


def _split_pair(qkv, grad, shape):
    """qkv rows -> out rows -> d qkv through split and merged heads."""
    batch, heads = shape[:2]
    q, k, v = K.split_heads(qkv, batch, heads)
    o, lse = K.flash_attention_with_lse(q, k, v, causal=True)
    out = K.merge_heads(o)
    (do,) = K.split_heads(grad, batch, heads, parts=1)
    dq, dk, dv = K.flash_attention_backward(do, q, k, v, causal=True, out=o, lse=lse)
    return out, K.merge_qkv(dq, dk, dv)


def _fused_pair(qkv, grad, shape):
    out, saved = K.fused_qkv_attention(qkv, *shape[:2])
    return out, K.fused_qkv_attention_backward(grad, saved)


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
    os.environ["ZYNML_UKERNELS"] = "1"
    K.flash_attention(q, k, v, causal=True)
    _, lse = K.flash_attention_with_lse(q, k, v, causal=True)
    K.flash_attention_backward(dout, q, k, v, causal=True, out=out, lse=lse)
    qkv, grad = (DeviceArray.from_numpy(x, gpu) for x in _rows(*shape))
    _split_pair(qkv, grad, shape)
    K.fused_qkv_attention_backward(grad, K.fused_qkv_attention(qkv, *shape[:2])[1])
    print("compiled: forwards, lse given, fused qkv", flush=True)


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
    print("| form | GPU ms | call ms | TFLOP/s | vs PyTorch | max rel. diff dq / dk / dv |")
    print("|---|---|---|---|---|---|")

    def timed(fn):
        return (median_ms(fn, repeat, torch, queue_cycles=QUEUE_CYCLES),
                median_ms(fn, repeat, torch, queued=False))
    torch_ms, torch_call = timed(theirs)
    for name, knob in (("ZynML ukernel", "1"), ("ZynML .zyn", "0")):
        os.environ["ZYNML_UKERNELS"] = knob
        ms, call = timed(ours)
        diffs = [float((torch.from_dlpack(g).float() - r).abs().max() /
                       r.abs().max()) for g, r in zip(ours(), reference)]
        print(f"| {name} | {ms:.3f} | {call:.3f} | {flops / ms / 1e9:.0f} | "
              f"{torch_ms / ms:.2f}x | " + " / ".join(f"{x:.1e}" for x in diffs) + " |",
              flush=True)
    os.environ["ZYNML_UKERNELS"] = "1"
    _, lse = K.flash_attention_with_lse(q, k, v, causal=True)
    given = lambda: K.flash_attention_backward(dout, q, k, v, causal=True, out=out, lse=lse)
    ms, call = timed(given)
    print(f"| ZynML ukernel, given lse | {ms:.3f} | {call:.3f} | {flops / ms / 1e9:.0f} | "
          f"{torch_ms / ms:.2f}x | |")
    print(f"| PyTorch flash backward | {torch_ms:.3f} | {torch_call:.3f} | "
          f"{flops / torch_ms / 1e9:.0f} | 1.00x | |")
    _kernel_times(torch, ours)
    _kernel_times(torch, given)
    print("\n| forward | GPU ms | vs PyTorch |\n|---|---|---|")
    pytorch_forward = median_ms(lambda: torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, v, 0.0, True), repeat, torch, queue_cycles=QUEUE_CYCLES)
    for name, fn in (("ZynML flash_attention (attention_wgmma)",
                      lambda: K.flash_attention(q, k, v, causal=True)),
                     ("ZynML flash_attention_with_lse (forward ukernel)",
                      lambda: K.flash_attention_with_lse(q, k, v, causal=True))):
        ms = median_ms(fn, repeat, torch, queue_cycles=QUEUE_CYCLES)
        print(f"| {name} | {ms:.3f} | {pytorch_forward / ms:.2f}x |")
    print(f"| PyTorch flash forward | {pytorch_forward:.3f} | 1.00x |")
    qkv, grad = (_to_torch(torch, x) for x in _rows(*shape))
    print("\n| qkv rows -> out -> d qkv | GPU ms | largest difference |\n|---|---|---|")
    split, fused = _split_pair(qkv, grad, shape), _fused_pair(qkv, grad, shape)
    difference = max(float((torch.from_dlpack(a).float() - torch.from_dlpack(b).float())
                           .abs().max()) for a, b in zip(split, fused))
    for name, fn in (("split and merged heads", _split_pair),
                     ("fused_qkv_attention", _fused_pair)):
        ms = median_ms(lambda: fn(qkv, grad, shape), repeat, torch,
                       queue_cycles=QUEUE_CYCLES)
        print(f"| {name} | {ms:.3f} | {difference:.1e} |")


def _kernel_times(torch, fn, calls: int = 5) -> None:
    """GPU time of each kernel of `fn`'s calls, by PyTorch's profiler (CUPTI)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    for event in prof.key_averages():
        if event.device_type.name == "CUDA" and event.count:
            print(f"#   kernel {event.key}: {event.device_time_total / event.count / 1e3:.3f} "
                  f"ms a call ({event.count // calls} a call)")


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
