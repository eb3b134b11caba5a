"""ZynML's native CUDA backend against PyTorch on the same GPU, same inputs, one run.

    python benchmarks/gpu_vs_torch.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/gpu_vs_torch.py                  # on the GPU (carry the cache)
    ... --dynamic: every size of every program compiled as a run-time size (one
    artifact for any shape), the rows at the same sizes, to compare with the static ones

Both halves must see the same ZYNML_CACHE_DIR (tools/gpu_tests.sh uses .gpucache). Each
row: median GPU time per call of ZynML (torch tensors in, device arrays out: no host
copies) and of PyTorch, the speed ratio (> 1: ZynML faster), ZynML's achieved GB/s or
TFLOP/s, the same two medians per call with the launch cost included (`median_ms`), and
the relative error of ZynML's result against PyTorch's. Ceilings are measured in
the same run: a device-to-device copy, and PyTorch's own matmul. Results go in
docs/performance.md with the date, device and command.
"""
from __future__ import annotations

import argparse
import math
from contextlib import contextmanager
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import ml_dtypes
import numpy as np

import zynml
from programs import (ADAMW_INPLACE, BIAS_GELU, BIAS_RESIDUAL_LAYERNORM,  # benchmarks/
                      CROSS_ENTROPY, DROPOUT, EMBEDDING_BACKWARD,          # programs.py
                      RMS_NORM_ROPE, SOFTMAX)

EXAMPLES = Path(__file__).resolve().parent.parent / "tests" / "programs" / "examples"
BF16 = np.dtype(ml_dtypes.bfloat16)

ADD = """
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] + y[i]
}
"""

# f32 -> bf16: a mixed-precision trainer's weight refresh (its f32 master weights
# converted into the bf16 weights it computes with)
TO_BF16 = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = cast(x[i], bf16)
}
"""

# a projection with its bias and GELU written in the product's block: one kernel, the
# bias and GELU applied to the accumulators as they are stored (matmul_wgmma's epilogue)
LINEAR_BIAS_GELU = """
let y = compute(x, w, b) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var acc = 0.0
        for k in 0..K:
            acc += x[i, k] * w[k, j]
        let v = acc + b[j]
        out[i, j] = 0.5 * v * (1.0 + tanh(0.7978845608 * (v + 0.044715 * v * v * v)))
}
"""

# x @ w^T with w [N, K] (a linear layer's weight as PyTorch keeps it): B read K-major
MATMUL_K_MAJOR = """
let C = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[j, k]
        out[i, j] = sum
}
"""


@dataclass
class Case:
    name: str
    source: str            # program text or an examples/ file name
    output: str            # the output to compare
    inputs: dict           # name -> (shape, dtype[, "abs" | integer bound]) or a scalar
    torch_fn: Callable     # (torch, tensors by name) -> tensor
    bytes: int = 0         # fewest bytes moved (for GB/s)
    flops: int = 0         # for TFLOP/s
    pipeline: str = ""     # call this pipeline of the program instead of the program
    # (torch, the tensors before ZynML's first call, ZynML's result) -> the tensor to
    # compare against; default torch_fn's (a program updating inputs in place needs it)
    reference: Callable | None = None
    # f32 products on TF32 tensor cores (zynml.compile(tf32=True)), against PyTorch with
    # allow_tf32 on for this case
    tf32: bool = False


def _cases() -> list[Case]:
    n64m, rows, cols = 64 * 2 ** 20, 16384, 2048
    f32 = "float32"

    def gelu(t, x):
        return t.nn.functional.gelu(x["x"], approximate="tanh")

    def layer_norm(t, x):
        return t.nn.functional.layer_norm(x["x"], x["x"].shape[-1:], x["gamma"], x["beta"],
                                          1e-5)

    def residual_ln(t, x):
        s = x["x"] + x["projected"]
        return t.nn.functional.layer_norm(s, s.shape[-1:], x["ln_weight"], x["ln_bias"], 1e-6)

    def bias_residual_ln(t, x):  # three kernels: two adds, then layer_norm
        h = x["x"] + x["bias"] + x["residual"]
        return t.nn.functional.layer_norm(h, h.shape[-1:], x["ln_weight"], x["ln_bias"],
                                          1e-12)

    def bias_gelu(t, x):  # two kernels: the add, then GELU
        return t.nn.functional.gelu(x["x"] + x["bias"], approximate="tanh")

    compiled = {}

    def linear_bias_gelu(t, x):  # torch.compile: the peer for a fused kernel
        if "fn" not in compiled:
            compiled["fn"] = t.compile(lambda x, w, b: t.nn.functional.gelu(
                x @ w + b, approximate="tanh"))
        return compiled["fn"](x["x"], x["w"], x["b"])

    def attention(t, x):
        return t.nn.functional.scaled_dot_product_attention(x["Q"], x["K"], x["V"])

    def masked_attention(t, x):  # the same bool mask (True: attend) as ZynML's program
        return t.nn.functional.scaled_dot_product_attention(x["Q"], x["K"], x["V"],
                                                             attn_mask=x["mask"])

    def causal_attention(t, x):
        return t.nn.functional.scaled_dot_product_attention(x["Q"], x["K"], x["V"],
                                                             is_causal=True)

    def conv(t, x):
        return t.nn.functional.conv2d(x["input"], x["kernel"], x["bias"], padding=1)

    def dropout(t, x):
        return t.nn.functional.dropout(x["x"], p=x["p"], training=True)

    def dropout_reference(t, x, result):
        # PyTorch's generator draws another mask: compare the values under ZynML's own
        # mask (its bits are checked against a numpy Philox by tests/test_random.py)
        return t.where(result != 0, x["x"] / (1 - x["p"]), t.zeros_like(x["x"]))

    n124m, vocab, tokens, dim = 124 * 2 ** 20, 50304, 8192, 768
    hyper = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "wd": 0.01}
    adamw_state = {}

    def adamw(t, x):
        # torch's fused AdamW over one flat parameter of the same size, stepping each call
        if "step" not in adamw_state:
            p = t.nn.Parameter(x["param"].clone())
            p.grad = x["grad"].clone()
            opt = t.optim.AdamW([p], lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]),
                                eps=hyper["eps"], weight_decay=hyper["wd"], fused=True)
            adamw_state["step"], adamw_state["p"] = opt.step, p
        adamw_state["step"]()
        return adamw_state["p"].detach()

    def adamw_reference(t, x, result):  # one step from the values before, in float64
        p, g, m, v = (x[n].double() for n in ("param", "grad", "m", "v"))
        m = hyper["beta1"] * m + (1 - hyper["beta1"]) * g
        v = hyper["beta2"] * v + (1 - hyper["beta2"]) * g * g
        update = (m / x["bc1"]) / ((v / x["bc2"]).sqrt() + hyper["eps"])
        return p - hyper["lr"] * (update + hyper["wd"] * p)

    def embedding_backward(t, x):
        return t.ops.aten.embedding_dense_backward(x["grad_out"], x["ids"], vocab, -1, False)

    def embedding_reference(t, x, result):
        return x["grad_w"].double().index_add(0, x["ids"], x["grad_out"].double())

    def rms_rope(form):  # torch.compile of the same RMSNorm + RoPE (the fused peer)
        def fn(t, x):
            if form not in compiled:
                def rope(x, w, cos, sin):
                    n = x * t.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
                    c, s = cos[None, :, None, :], sin[None, :, None, :]
                    if form == "interleaved":
                        a, b = n[..., 0::2], n[..., 1::2]
                        return t.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
                    a, b = n.chunk(2, dim=-1)
                    return t.cat((a * c - b * s, b * c + a * s), dim=-1)
                compiled[form] = t.compile(rope)
            return compiled[form](x["x"], x["w"], x["cos"], x["sin"])
        return fn

    def cross_entropy(t, x):  # per-row losses and their mean, torch.compile
        if "ce" not in compiled:
            def ce(logits, targets):
                loss = t.nn.functional.cross_entropy(logits, targets, reduction="none")
                return loss, loss.mean()
            compiled["ce"] = t.compile(ce)
        return compiled["ce"](x["logits"], x["targets"])[0]

    rope_shape, ce_rows, ce_vocab = (4, 2048, 32, 128), 4096, 32000
    rope_inputs = {"x": (rope_shape, f32), "w": ((128,), f32), "cos": ((2048, 64), f32),
                   "sin": ((2048, 64), f32), "eps": 1e-5}
    return [
        Case("add 1024 (per-call overhead)", ADD, "z",
             {"x": ((1024,), f32), "y": ((1024,), f32)}, lambda t, x: x["x"] + x["y"],
             bytes=3 * 4 * 1024),
        Case("GELU (tanh) 64M f32", "gelu.zyn", "activated", {"x": ((n64m,), f32)}, gelu,
             bytes=2 * 4 * n64m),
        Case("f32 -> bf16 124M (a weight refresh)", TO_BF16, "y",
             {"x": ((124 * 10 ** 6,), f32)}, lambda t, x: x["x"].to(t.bfloat16),
             bytes=6 * 124 * 10 ** 6),
        Case(f"softmax {rows}x{cols} f32", SOFTMAX, "softmax", {"x": ((rows, cols), f32)},
             lambda t, x: t.softmax(x["x"], dim=1), bytes=2 * 4 * rows * cols,
             pipeline="softmax"),
        Case("layernorm 16384x4096 f32", "layer_norm.zyn", "normalized",
             {"x": ((16384, 4096), f32), "gamma": ((4096,), f32), "beta": ((4096,), f32),
              "eps": 1e-5}, layer_norm, bytes=2 * 4 * 16384 * 4096),
        Case("residual + layernorm 8x2048x4096 f32", "transformer_residual_layernorm.zyn",
             "normed", {"x": ((8, 2048, 4096), f32), "projected": ((8, 2048, 4096), f32),
                        "ln_weight": ((4096,), f32), "ln_bias": ((4096,), f32)},
             residual_ln, bytes=3 * 4 * 8 * 2048 * 4096),
        # Fused chains (BERT's FFN epilogues), one kernel each. Bytes: what the fused
        # kernel must move (two row tensors read and one written; bias + GELU: one and
        # one); eager moves 7/3 and 2x that.
        Case("bias + residual + layernorm 8x2048x4096 f32", BIAS_RESIDUAL_LAYERNORM,
             "normed", {"x": ((8, 2048, 4096), f32), "bias": ((4096,), f32),
                        "residual": ((8, 2048, 4096), f32), "ln_weight": ((4096,), f32),
                        "ln_bias": ((4096,), f32)},
             bias_residual_ln, bytes=3 * 4 * 8 * 2048 * 4096),
        Case("bias + GELU 8x2048x4096 f32", BIAS_GELU, "activated",
             {"x": ((8, 2048, 4096), f32), "bias": ((4096,), f32)}, bias_gelu,
             bytes=2 * 4 * 8 * 2048 * 4096),
        # rand's Philox-4x32-10 per element and the scaling, one kernel; bytes: x read
        # and the result written (PyTorch also writes its mask)
        Case("dropout p=0.1 64M f32", DROPOUT, "dropped",
             {"x": ((n64m,), f32), "seed": 1234, "p": 0.1}, dropout, bytes=2 * 4 * n64m,
             reference=dropout_reference),
        # training steps (issue 18). AdamW: param, grad, m, v read, param, m, v written.
        # Embedding backward: ZynML adds into grad_w in place (a scatter of atomics; the
        # zeroing is the caller's), PyTorch returns a new zeroed-and-summed gradient.
        Case("AdamW in place 124M f32 (vs fused)", ADAMW_INPLACE, "param",
             {"param": ((n124m,), f32), "grad": ((n124m,), f32), "m": ((n124m,), f32),
              "v": ((n124m,), f32, "abs"), "bc1": 1 - hyper["beta1"],
              "bc2": 1 - hyper["beta2"], **hyper}, adamw, bytes=7 * 4 * n124m,
             reference=adamw_reference),
        Case(f"embedding backward {vocab}x{dim}, {tokens} tokens f32", EMBEDDING_BACKWARD,
             "grad_w", {"grad_w": ((vocab, dim), f32), "ids": ((tokens,), "int64", vocab),
                        "grad_out": ((tokens, dim), f32)}, embedding_backward,
             bytes=3 * 4 * tokens * dim, reference=embedding_reference),
        # issue 22: RoPE written with two stores per pair, one kernel (cir-join-stores);
        # bytes: x read and the result written
        *(Case(f"RMSNorm + RoPE {form} 4x2048x32x128 f32 (vs torch.compile)",
               RMS_NORM_ROPE, "y", rope_inputs, rms_rope(form),
               bytes=2 * 4 * math.prod(rope_shape), pipeline=form)
          for form in ("interleaved", "rotate_half")),
        Case(f"cross-entropy {ce_rows}x{ce_vocab} f32, loss and mean (vs torch.compile)",
             CROSS_ENTROPY, "loss", {"logits": ((ce_rows, ce_vocab), f32),
                                     "targets": ((ce_rows,), "int64", ce_vocab)},
             cross_entropy, bytes=4 * ce_rows * ce_vocab),
        Case("matmul 4096 f32 (no TF32)", "matmul.zyn", "C",
             {"A": ((4096, 4096), f32), "B": ((4096, 4096), f32)},
             lambda t, x: x["A"] @ x["B"], flops=2 * 4096 ** 3),
        # TF32 when asked: B [K, N] transposed by a kernel first (wgmma reads TF32 K-major
        # only), and B given as [N, K], read as it is
        Case("matmul 4096 f32 TF32", "matmul.zyn", "C",
             {"A": ((4096, 4096), f32), "B": ((4096, 4096), f32)},
             lambda t, x: x["A"] @ x["B"], flops=2 * 4096 ** 3, tf32=True),
        Case("matmul 4096 f32 TF32, x @ w^T", MATMUL_K_MAJOR, "C",
             {"A": ((4096, 4096), f32), "B": ((4096, 4096), f32)},
             lambda t, x: x["A"] @ x["B"].T, flops=2 * 4096 ** 3, tf32=True),
        Case("matmul 4096 bf16, x @ w^T", MATMUL_K_MAJOR, "C",
             {"A": ((4096, 4096), "bfloat16"), "B": ((4096, 4096), "bfloat16")},
             lambda t, x: x["A"] @ x["B"].T, flops=2 * 4096 ** 3),
        Case("matmul 4096 f16", "matmul.zyn", "C",
             {"A": ((4096, 4096), "float16"), "B": ((4096, 4096), "float16")},
             lambda t, x: x["A"] @ x["B"], flops=2 * 4096 ** 3),
        Case("matmul 4096 bf16", "matmul.zyn", "C",
             {"A": ((4096, 4096), "bfloat16"), "B": ((4096, 4096), "bfloat16")},
             lambda t, x: x["A"] @ x["B"], flops=2 * 4096 ** 3),
        # LLM-shaped products (M 8192, K 4096), against cuBLAS
        *(Case(f"matmul 8192x4096x{n} bf16", "matmul.zyn", "C",
               {"A": ((8192, 4096), "bfloat16"), "B": ((4096, n), "bfloat16")},
               lambda t, x: x["A"] @ x["B"], flops=2 * 8192 * 4096 * n)
          for n in (4096, 11008, 50304)),
        Case("linear + bias + GELU 4096 f16 (one block, vs torch.compile)",
             LINEAR_BIAS_GELU, "y",
             {"x": ((4096, 4096), "float16"), "w": ((4096, 4096), "float16"),
              "b": ((4096,), "float16")}, linear_bias_gelu, flops=2 * 4096 ** 3),
        # BERT-base self-attention, without a mask (flash_attention.zyn against SDPA's
        # plain call) and with a [seq, seq] bool mask (attention.zyn against SDPA given
        # the same mask as attn_mask): each against the same work
        *(Case(f"attention 8x12x512x64 {label}{', mask' if masked else ''}",
               "attention.zyn" if masked else "flash_attention.zyn", "attn",
               {"Q": ((8, 12, 512, 64), dtype), "K": ((8, 12, 512, 64), dtype),
                "V": ((8, 12, 512, 64), dtype),
                **({"mask": ((512, 512), "bool")} if masked else {})},
               masked_attention if masked else attention,
               flops=4 * 8 * 12 * 512 * 512 * 64)
          for dtype, label in ((f32, "f32"), ("float16", "f16"))
          for masked in (False, True)),
        Case("flash attention seq 4096 head_dim 128 f16 (1x16)", "flash_attention.zyn",
             "attn", {"Q": ((1, 16, 4096, 128), "float16"),
                      "K": ((1, 16, 4096, 128), "float16"),
                      "V": ((1, 16, 4096, 128), "float16")},
             attention, flops=4 * 16 * 4096 * 4096 * 128),
        # j <= i: half the scores (the flops of the non-causal row, halved, as
        # FlashAttention's benchmarks count them)
        Case("causal flash attention seq 4096 head_dim 128 f16 (1x16)",
             "causal_attention.zyn", "attn",
             {"Q": ((1, 16, 4096, 128), "float16"), "K": ((1, 16, 4096, 128), "float16"),
              "V": ((1, 16, 4096, 128), "float16")},
             causal_attention, flops=2 * 16 * 4096 * 4096 * 128),
        # f32 on FMAs (implicit_gemm), f16 / bf16 on tensor cores (implicit_gemm_mma),
        # against cuDNN on the same NCHW tensors
        *(Case(f"conv2d 32x64x56x56 3x3 {label}", "conv2d.zyn", "output",
               {"input": ((32, 64, 56, 56), dtype), "kernel": ((64, 64, 3, 3), dtype),
                "bias": ((64,), dtype), "in_h": 56, "in_w": 56, "out_h": 56, "out_w": 56},
               conv, flops=2 * 32 * 64 * 56 * 56 * 64 * 9)
          for dtype, label in ((f32, "f32"), ("float16", "f16"), ("bfloat16", "bf16"))),
        # a deeper layer's shape: M 128, N 25088, K 1152
        Case("conv2d 32x128x28x28 3x3 f16", "conv2d.zyn", "output",
             {"input": ((32, 128, 28, 28), "float16"), "kernel": ((128, 128, 3, 3), "float16"),
              "bias": ((128,), "float16"), "in_h": 28, "in_w": 28, "out_h": 28, "out_w": 28},
             conv, flops=2 * 32 * 128 * 28 * 28 * 128 * 9),
    ]


def _program(case: Case, device: str, require_device: bool, dynamic: bool):
    source = EXAMPLES / case.source if case.source.endswith(".zyn") else case.source
    return zynml.compile(source, device=device, require_device=require_device,
                         tf32=case.tf32, **({"dynamic": True} if dynamic else {}))


def _numpy_inputs(case: Case, rng) -> dict:
    values = {}
    for name, spec in case.inputs.items():
        if not isinstance(spec, tuple):
            values[name] = spec
        elif spec[1] == "bool":  # a mask: each pair attends with odds 0.9
            values[name] = rng.random(spec[0]) < 0.9
        elif len(spec) == 3 and spec[2] == "abs":  # e.g. AdamW's second moments
            values[name] = np.abs(rng.standard_normal(spec[0])).astype(spec[1])
        elif len(spec) == 3:  # indices below a bound (token ids)
            values[name] = rng.integers(0, spec[2], spec[0]).astype(spec[1])
        else:
            values[name] = rng.standard_normal(spec[0]).astype(spec[1])
    return values


def compile_only(only: str, dynamic: bool) -> None:
    rng = np.random.default_rng(0)
    for case in _selected(only):
        prog = _program(case, "cuda:0", require_device=False, dynamic=dynamic)
        inputs = _numpy_inputs(case, rng)
        if case.pipeline:
            prog = getattr(prog, case.pipeline)._program
        prog.artifact(**inputs)
        print(f"compiled: {case.name}", flush=True)


def _to_torch(torch, array: np.ndarray):
    """A CUDA tensor of `array`; bf16 (ml_dtypes, which torch.from_numpy does not take)
    through its bits."""
    if array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).cuda().view(torch.bfloat16)
    return torch.from_numpy(array).cuda()


# ~0.2 ms of GPU clock cycles: longer than Python takes to queue one call of any case
QUEUE_CYCLES = 400_000


def median_ms(fn, repeat: int, torch, *, queued: bool = True,
              queue_cycles: int = QUEUE_CYCLES) -> float:
    """Median milliseconds of `fn()` over `repeat` calls, timed with CUDA events (3 calls
    when one takes over 100 ms).

    queued (the default): each call is queued behind a GPU sleep, so the GPU is still busy
    while Python launches it and the events time the GPU's work alone, as in a stream of
    calls (the per-call cost from Python to the launch is measured on its own:
    call_overhead.py, and the `per call` columns). Otherwise the GPU idles when a call's
    start event is recorded, and the time includes that call's launch cost."""
    def timed() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if queued:  # `queue_cycles`: longer for a call that queues many launches
            torch.cuda._sleep(queue_cycles)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    if timed() > 100:
        repeat = 3
    return statistics.median(timed() for _ in range(repeat))


def _selected(only: str) -> list[Case]:
    return [case for case in _cases() if only in case.name]


def run(repeat: int, only: str, dynamic: bool) -> None:
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}"
          f"{', ZynML compiled dynamic (run-time sizes)' if dynamic else ''}")
    big = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")
    copy_ms = median_ms(lambda: big.clone(), repeat, torch)
    copy_gbs = 2 * big.numel() * 4 / copy_ms / 1e6
    print(f"# ceiling: device-to-device copy {copy_gbs:.0f} GB/s (read + write)")
    rng = np.random.default_rng()
    rows = []
    for case in _selected(only):
        try:
            measured = _measure(case, torch, rng, repeat, dynamic)
        except zynml.ZynMLError as err:  # e.g. an artifact not compiled for this run
            print(f"{case.name:38s} skipped: {err}", flush=True)
            continue
        rows.append(measured)
    print("\nGPU time: each call queued behind a GPU sleep (launch cost hidden); per call: "
          "the GPU idle at each call's start (launch cost included).")
    print("| kernel | ZynML ms | PyTorch ms | ZynML vs PyTorch | ZynML rate | "
          "per call: ZynML ms | PyTorch ms | ratio | rel. error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, z_ms, t_ms, rate, z_call, t_call, error in rows:
        print(f"| {name} | {z_ms:.3f} | {t_ms:.3f} | {t_ms / z_ms:.2f}x | {rate.strip()} | "
              f"{z_call:.3f} | {t_call:.3f} | {t_call / z_call:.2f}x | {error:.1e} |")


def _measure(case: Case, torch, rng, repeat: int, dynamic: bool) -> tuple:
    """One row: ZynML's and PyTorch's medians, the rate, the per-call medians, the error."""
    prog = _program(case, "cuda:0", require_device=True, dynamic=dynamic)
    host = _numpy_inputs(case, rng)
    tensors = {n: _to_torch(torch, v) if isinstance(v, np.ndarray) else v
               for n, v in host.items()}
    call = getattr(prog, case.pipeline) if case.pipeline else None

    def zynml_call():
        if call is not None:
            return call(**tensors)
        return prog(**tensors)[case.output]

    before = ({n: v.clone() if hasattr(v, "clone") else v for n, v in tensors.items()}
              if case.reference else tensors)  # in-place programs change their inputs
    result = zynml_call()
    result = torch.from_dlpack(result) if result.dtype == BF16 else \
        torch.as_tensor(result, device="cuda")  # (bf16 has no __cuda_array_interface__)
    reference = (case.reference(torch, before, result) if case.reference
                 else case.torch_fn(torch, tensors))
    ref64 = reference.double()  # TF32 off (run()): a TF32 row's error is against f32
    error = ((result.double() - ref64).norm() / ref64.norm()).item()
    z_ms = median_ms(zynml_call, repeat, torch)
    z_call = median_ms(zynml_call, repeat, torch, queued=False)
    with _allow_tf32(torch, case.tf32):
        t_ms = median_ms(lambda: case.torch_fn(torch, tensors), repeat, torch)
        t_call = median_ms(lambda: case.torch_fn(torch, tensors), repeat, torch,
                           queued=False)
    rate = (f"{case.bytes / z_ms / 1e6:7.0f} GB/s" if case.bytes
            else f"{case.flops / z_ms / 1e9:7.2f} TFLOP/s")
    print(f"{case.name:38s} zynml {z_ms:9.3f} ms  torch {t_ms:9.3f} ms  "
          f"{t_ms / z_ms:6.2f}x  {rate}  per call {z_call:.3f} / {t_call:.3f} ms "
          f"{t_call / z_call:5.2f}x  err {error:.1e}", flush=True)
    return case.name, z_ms, t_ms, rate, z_call, t_call, error



@contextmanager
def _allow_tf32(torch, allowed: bool):
    """PyTorch's f32 products on TF32 tensor cores (or not) inside the block."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="compile every case's artifact into the cache and stop")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", default="", metavar="TEXT",
                        help="only the cases whose name contains TEXT")
    parser.add_argument("--dynamic", action="store_true",
                        help="compile every size as a run-time size (zynml.compile("
                             "dynamic=True))")
    args = parser.parse_args()
    if args.compile_only:
        compile_only(args.only, args.dynamic)
    else:
        run(args.repeat, args.only, args.dynamic)
    return 0


if __name__ == "__main__":
    sys.exit(main())
