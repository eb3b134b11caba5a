"""The device API's operations and the library's kernels against PyTorch, one GPU.

    python benchmarks/device_ops.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/device_ops.py                  # on the GPU (carry the cache)

Both halves must see the same ZYNML_CACHE_DIR. Each row runs one operation at an LLM
size on the same inputs: ZynML (zynml.Device or zynml.kernels on torch tensors, no host
copies), PyTorch eager and torch.compile; GPU time per call (median, CUDA events, each
call queued behind a 2 ms GPU sleep: gpu_vs_torch.median_ms), the ratios (> 1: ZynML faster),
ZynML's GB/s for memory-bound rows, and for the losses the peak memory of each side
above what it held before one call (torch.cuda.max_memory_allocated; ZynML's allocations
come from the device's default memory pool: its used-memory high-water mark, reset
before the call). Copy ceiling
measured in the same run.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

import numpy as np

import zynml
import zynml.kernels as K
from zynml.compile_only import cpu_values_cuda_artifacts

TOKENS, HIDDEN, FFN, VOCAB = 8192, 4096, 11008, 50304
# ~2 ms of GPU sleep before each timed call: longer than the host side of any row's call
# (the library's calls check and reshape their arguments in Python)
QUEUE_CYCLES = 4_000_000
HEADS, KV_HEADS, HEAD_DIM, SEQ = 32, 8, 128, 4096


@dataclass
class Case:
    name: str
    inputs: dict          # name -> (shape, dtype) or ("ids", shape, bound)
    zynml: Callable       # (dev, inputs) -> result
    torch_fn: Callable    # (torch, F, inputs) -> result
    bytes: int = 0        # fewest bytes moved, for GB/s
    memory: bool = False  # report peak memory
    compiled: bool = True  # torch.compile as a peer (not of autograd's backward alone)


def _cases() -> list[Case]:
    f32, bf16 = "float32", "bfloat16"
    n = TOKENS * HIDDEN
    rope_x = (TOKENS, HEADS, HEAD_DIM)
    return [
        Case("rms_norm 8192x4096 f32", {"x": ((TOKENS, HIDDEN), f32), "w": ((HIDDEN,), f32)},
             lambda d, a: d.rms_norm(a["x"], a["w"], eps=1e-5),
             lambda t, F, a: F.rms_norm(a["x"], (HIDDEN,), a["w"], 1e-5), bytes=8 * n),
        Case("softmax 8192x32000 f32", {"x": ((TOKENS, 32000), f32)},
             lambda d, a: d.softmax(a["x"]), lambda t, F, a: t.softmax(a["x"], -1),
             bytes=8 * TOKENS * 32000),
        Case("swiglu 8192x11008 bf16", {"g": ((TOKENS, FFN), bf16), "u": ((TOKENS, FFN), bf16)},
             lambda d, a: K.swiglu(a["g"], a["u"]), lambda t, F, a: F.silu(a["g"]) * a["u"],
             bytes=6 * TOKENS * FFN),
        *(Case(f"rms_norm+rope {style} 8192x32x128 f32",
               {"x": (rope_x, f32), "w": ((HEAD_DIM,), f32),
                "cos": ((TOKENS, HEAD_DIM // 2), f32), "sin": ((TOKENS, HEAD_DIM // 2), f32)},
               lambda d, a, style=style: K.rms_norm_rope(a["x"], a["w"], a["cos"], a["sin"],
                                                         style=style),
               lambda t, F, a, style=style: _torch_rms_rope(t, F, a, style),
               bytes=8 * TOKENS * HEADS * HEAD_DIM)
          for style in ("half", "interleaved")),
        Case("cross_entropy 8192x50304 f32 (+grad)",
             {"logits": ((TOKENS, VOCAB), f32), "t": ("ids", (TOKENS,), VOCAB)},
             lambda d, a: K.cross_entropy(a["logits"], a["t"]), _torch_cross_entropy,
             bytes=8 * TOKENS * VOCAB, memory=True),
        Case("linear+cross_entropy 8192x768->50304 f32 (+grads)",
             {"h": ((TOKENS, 768), f32), "w": ((VOCAB, 768), f32),
              "t": ("ids", (TOKENS,), VOCAB)},
             lambda d, a: K.fused_linear_cross_entropy(a["h"], a["w"], a["t"]),
             _torch_linear_cross_entropy, memory=True),
        Case("causal attention 1x32x4096x128 bf16 GQA 8",
             {"q": ((1, HEADS, SEQ, HEAD_DIM), bf16), "k": ((1, KV_HEADS, SEQ, HEAD_DIM), bf16),
              "v": ((1, KV_HEADS, SEQ, HEAD_DIM), bf16)},
             lambda d, a: K.flash_attention(a["q"], a["k"], a["v"], causal=True),
             lambda t, F, a: F.scaled_dot_product_attention(a["q"], a["k"], a["v"],
                                                            is_causal=True, enable_gqa=True)),
        # backward operations: PyTorch's side written out as a training graph's backward
        # is (what Inductor fuses), attention's through SDPA's autograd
        Case("rms_norm backward 8192x4096 f32",
             {"x": ((TOKENS, HIDDEN), f32), "w": ((HIDDEN,), f32), "g": ((TOKENS, HIDDEN), f32)},
             lambda d, a: d.rms_norm_backward(a["x"], a["w"], a["g"], eps=1e-5),
             lambda t, F, a: _torch_rms_norm_backward(t, a), bytes=12 * n),
        Case("softmax backward 8192x32000 f32",
             {"y": ((TOKENS, 32000), f32), "g": ((TOKENS, 32000), f32)},
             lambda d, a: d.softmax_backward(a["y"], a["g"]),
             lambda t, F, a: a["y"] * (a["g"] - (a["g"] * a["y"]).sum(-1, keepdim=True)),
             bytes=12 * TOKENS * 32000),
        Case("swiglu backward 8192x11008 bf16",
             {"g": ((TOKENS, FFN), bf16), "u": ((TOKENS, FFN), bf16), "d": ((TOKENS, FFN), bf16)},
             lambda d, a: K.swiglu_backward(a["g"], a["u"], a["d"]),
             lambda t, F, a: _torch_swiglu_backward(t, a), bytes=10 * TOKENS * FFN),
        *(Case(f"causal attention backward {b}x{h}x{s}x{dim} bf16" + (" GQA 8" if kv != h else ""),
               {"q": ((b, h, s, dim), bf16), "k": ((b, kv, s, dim), bf16),
                "v": ((b, kv, s, dim), bf16), "do": ((b, h, s, dim), bf16)},
               _zynml_attention_backward, _torch_attention_backward, compiled=False)
          for b, h, kv, s, dim in ((1, HEADS, KV_HEADS, SEQ, HEAD_DIM), (16, 12, 12, 1024, 64))),
        Case("adamw 124M f32", {"p": ((124_475_904,), f32), "g": ((124_475_904,), f32),
                                "m": ((124_475_904,), f32), "v": ((124_475_904,), f32)},
             lambda d, a: d.adamw_step(a["p"], a["g"], a["m"], a["v"], lr=1e-4, beta1=0.9,
                                       beta2=0.95, eps=1e-8, weight_decay=0.1, step_t=3),
             _torch_adamw, bytes=28 * 124_475_904),
    ]


def _torch_rms_rope(t, F, a, style):
    x = F.rms_norm(a["x"], (HEAD_DIM,), a["w"], 1e-6)
    cos, sin = a["cos"][:, None, :], a["sin"][:, None, :]
    if style == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return t.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)
    x1, x2 = x[..., :HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    return t.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def _torch_rms_norm_backward(t, a):
    x, w, g = a["x"], a["w"], a["g"]
    r = t.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    xhat = x * r
    dxhat = g * w
    dx = r * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdim=True))
    return dx, (g * xhat).sum(0)


def _torch_swiglu_backward(t, a):
    g, u, d = a["g"].float(), a["u"].float(), a["d"].float()
    s = t.sigmoid(g)
    return ((d * u * s * (1 + g * (1 - s))).to(t.bfloat16), (d * g * s).to(t.bfloat16))


def _zynml_attention_backward(d, a):
    """flash_attention_backward given the forward's output and log-sum-exp (kept in the
    row's inputs from one forward, as a training step keeps them)."""
    if "zynml forward" not in a:
        a["zynml forward"] = K.flash_attention_with_lse(a["q"], a["k"], a["v"], causal=True)
    out, lse = a["zynml forward"]
    return K.flash_attention_backward(a["do"], a["q"], a["k"], a["v"], causal=True, out=out,
                                      lse=lse)


def _torch_attention_backward(t, F, a):
    """SDPA's backward (autograd, the graph kept from one forward)."""
    if "torch forward" not in a:
        q, k, v = (a[n].detach().requires_grad_() for n in "qkv")
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             enable_gqa=k.shape[1] != q.shape[1])
        a["torch forward"] = (out, (q, k, v))
    out, inputs = a["torch forward"]
    return t.autograd.grad(out, inputs, a["do"], retain_graph=True)


def _torch_cross_entropy(t, F, a):
    logits = a["logits"].detach().requires_grad_()
    loss = F.cross_entropy(logits, a["t"].long())
    (grad,) = t.autograd.grad(loss, logits)
    return loss, grad


def _torch_linear_cross_entropy(t, F, a):
    h, w = a["h"].detach().requires_grad_(), a["w"].detach().requires_grad_()
    loss = F.cross_entropy(F.linear(h, w), a["t"].long())
    return (loss, *t.autograd.grad(loss, (h, w)))


_OPTIMIZERS: dict = {}


def _torch_adamw(t, F, a):
    """PyTorch's fused AdamW (one multi-tensor kernel) on the same parameter."""
    opt = _OPTIMIZERS.get(id(a["p"]))
    if opt is None:
        p = t.nn.Parameter(a["p"])
        p.grad = a["g"]
        opt = _OPTIMIZERS[id(a["p"])] = t.optim.AdamW(
            [p], lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    opt.step()


def _numpy_inputs(case: Case, rng) -> dict:
    import ml_dtypes
    out = {}
    for name, spec in case.inputs.items():
        if spec[0] == "ids":
            out[name] = rng.integers(0, spec[2], spec[1]).astype(np.int32)
        else:
            shape, dtype = spec
            x = rng.standard_normal(shape, dtype=np.float32)
            out[name] = x.astype(ml_dtypes.bfloat16) if dtype == "bfloat16" else x
    out.update({k: np.abs(v) for k, v in out.items() if k == "v"})  # AdamW's second moment
    return out


def compile_only(only: str) -> None:
    rng = np.random.default_rng(0)
    # a stand-in device, as tests/device_api/test_device_cuda.py's: host buffers, CUDA
    # programs (the driver is not needed to compile)
    dev = zynml.Device("cpu")
    dev.name, dev.kind = "cuda:0", "cuda"
    dev.alloc = lambda shape, dtype=np.float32: np.zeros(shape, dtype)
    with cpu_values_cuda_artifacts():
        for case in _cases():
            if only in case.name:
                case.zynml(dev, _numpy_inputs(case, rng))
                print(f"compiled: {case.name}", flush=True)


def run(only: str, repeat: int) -> None:
    import torch
    import torch.nn.functional as F
    from gpu_vs_torch import _to_torch, median_ms  # benchmarks/
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    big = torch.empty(2 ** 28, dtype=torch.float32, device="cuda")
    copy_gbs = 2 * big.numel() * 4 / median_ms(lambda: big.clone(), repeat, torch) / 1e6
    print(f"# ceiling: device-to-device copy {copy_gbs:.0f} GB/s (read + write)")
    print("| operation | ZynML ms | eager ms | compile ms | vs eager | vs compile | GB/s "
          "| peak MB ZynML / eager |")
    print("|---|---|---|---|---|---|---|---|")
    dev, rng = zynml.Device("cuda:0"), np.random.default_rng(0)
    for case in _cases():
        if only not in case.name:
            continue
        a = {k: _to_torch(torch, v) for k, v in _numpy_inputs(case, rng).items()}
        ours = median_ms(lambda: case.zynml(dev, a), repeat, torch, queue_cycles=QUEUE_CYCLES)
        eager = median_ms(lambda: case.torch_fn(torch, F, a), repeat, torch,
                          queue_cycles=QUEUE_CYCLES)
        compiled = None
        if case.compiled:
            # each row's own compile: the rows' lambdas share one code object, and
            # dynamo stops compiling a code object after its cache limit (eager then)
            torch._dynamo.reset()
            compiled_fn = torch.compile(lambda a: case.torch_fn(torch, F, a))
            compiled = median_ms(lambda: compiled_fn(a), repeat, torch,
                                 queue_cycles=QUEUE_CYCLES)
        gbs = f"{case.bytes / ours / 1e6:.0f}" if case.bytes else ""
        memory = _peaks(torch, F, case, dev, a) if case.memory else ""
        versus = ("", "") if compiled is None else (f"{compiled:.3f}", f"{compiled / ours:.2f}x")
        print(f"| {case.name} | {ours:.3f} | {eager:.3f} | {versus[0]} | "
              f"{eager / ours:.2f}x | {versus[1]} | {gbs} | {memory} |", flush=True)


def _peaks(torch, F, case, dev, a) -> str:
    from cuda.bindings import driver
    pool = _default_pool(driver)
    attribute = driver.CUmemPool_attribute
    pool_bytes = lambda which: int(driver.cuMemPoolGetAttribute(pool, which)[1])
    torch.cuda.synchronize()
    # the pool's high-water mark restarts at what it holds now
    driver.cuMemPoolSetAttribute(pool, attribute.CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                                 driver.cuuint64_t(0))
    before = pool_bytes(attribute.CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    result = case.zynml(dev, a)
    dev.sync()
    ours = pool_bytes(attribute.CU_MEMPOOL_ATTR_USED_MEM_HIGH) - before
    del result
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    case.torch_fn(torch, F, a)
    theirs = torch.cuda.max_memory_allocated() - base
    return f"{ours / 2**20:.0f} / {theirs / 2**20:.0f}"


def _default_pool(driver):
    """GPU 0's default memory pool, which ZynML's allocations (cuMemAllocAsync) draw
    from and PyTorch's caching allocator does not."""
    _, device = driver.cuDeviceGet(0)
    return driver.cuDeviceGetDefaultMemPool(device)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--only", default="", help="rows whose name contains this")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    compile_only(args.only) if args.compile_only else run(args.only, args.repeat)


if __name__ == "__main__":
    main()
