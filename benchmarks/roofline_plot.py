"""The GPU rows of docs/performance.md against the H100's ceilings, as one PNG.

    python benchmarks/roofline_plot.py [-o docs/roofline.png]

No GPU: the figures are the measurements recorded in docs/performance.md (each row
names its session there), typed in below with the sizes that give their FLOPs and
bytes. Left: the memory-bound rows' achieved rate (bytes read and written per second)
against the device-to-device copy ceiling measured in the same runs. Right: a roofline
of the rows that compute, FLOP/s against arithmetic intensity (FLOPs per byte of the
inputs and outputs, each read or written once), under the copy ceiling's slope, the
tensor-core ceiling (an 8192^3 bf16 product through PyTorch on the same machine kind,
device/KINDS.md) and cuBLAS's f32 rate without TF32 (PyTorch's 4096^3 f32 matmul in
the same run as ZynML's).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from plots import save  # benchmarks/

COPY_GBS = 3010          # device-to-device copy, bytes read + written (sessions 8-14)
TENSOR_CORE_TFLOPS = 798  # bf16 8192^3 through PyTorch (device/KINDS.md, 2026-11-13)
CUBLAS_F32_TFLOPS = 2 * 4096 ** 3 / 2.670e-3 / 1e12  # session 8: PyTorch 2.670 ms

# (row, GB/s achieved, session)
MEMORY_ROWS = [
    ("GELU (tanh) 64M f32", 2977, 8),
    ("softmax 16384x2048 f32", 2877, 8),
    ("layernorm 16384x4096 f32", 2919, 8),
    ("residual + layernorm", 3001, 8),
    ("bias + residual + layernorm", 3010, 8),
    ("bias + GELU", 2973, 8),
    ("AdamW 124M f32", 2998, 10),
    ("embedding backward (scatter-add)", 1361, 10),
    ("decode products, 1 row (matvec)", 2080, 14),
]


def _attention_flops(batch, heads, seq, d, causal=False):
    flops = 4 * batch * heads * seq * seq * d
    return flops / 2 if causal else flops


# (row, FLOPs, bytes, ms, session)
COMPUTE_ROWS = [
    ("matmul 4096 f32", 2 * 4096 ** 3, 3 * 4096 ** 2 * 4, 2.970, 7),
    ("matmul 4096 f16", 2 * 4096 ** 3, 3 * 4096 ** 2 * 2, 0.188, 20),  # bf16: 0.182 ms
    ("matmul 8192x4096x11008 bf16", 2 * 8192 * 4096 * 11008,
     (8192 * 4096 + 4096 * 11008 + 8192 * 11008) * 2, 0.912, 20),
    ("matmul 8192x4096x50304 bf16 (partial tiles)", 2 * 8192 * 4096 * 50304,
     (8192 * 4096 + 4096 * 50304 + 8192 * 50304) * 2, 4.227, 26),
    ("linear + bias + GELU 4096 f16", 2 * 4096 ** 3, (3 * 4096 ** 2 + 4096) * 2, 0.200, 20),
    ("attention 8x12x512x64 f32", _attention_flops(8, 12, 512, 64),
     4 * 8 * 12 * 512 * 64 * 4, 0.197, 8),
    ("attention 8x12x512x64 f16", _attention_flops(8, 12, 512, 64),
     4 * 8 * 12 * 512 * 64 * 2, 0.026, 8),
    ("flash attention 1x16x4096 d128 f16", _attention_flops(1, 16, 4096, 128),
     4 * 16 * 4096 * 128 * 2, 0.222, 8),
    ("causal flash attention, same", _attention_flops(1, 16, 4096, 128, causal=True),
     4 * 16 * 4096 * 128 * 2, 0.142, 8),
    ("conv2d 32x64x56x56 3x3 f32", 2 * 32 * 64 * 64 * 56 * 56 * 9,
     2 * 32 * 64 * 56 * 56 * 4 + 64 * 64 * 9 * 4, 0.398, 7),
    # one decode step of the 1b Llama at position 4096: the products (2 FLOPs per
    # weight and row) and attention over the cache; bytes: the weights and the cache
    # read (the benchmark's roofline bytes)
    ("Llama 1b decode step, batch 1", 2 * 1.04e9 + 16 * 4 * 32 * 4096 * 64,
     0.734e-3 * 3009e9, 2.26, 14),
    ("Llama 1b decode step, batch 16", 16 * (2 * 1.04e9 + 16 * 4 * 32 * 4096 * 64),
     1.402e-3 * 3009e9, 4.99, 14),
]


def plot(out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (left, right) = plt.subplots(1, 2, figsize=(15, 6.5))
    names = [f"{name} (s{session})" for name, _, session in MEMORY_ROWS]
    rates = [gbs for _, gbs, _ in MEMORY_ROWS]
    left.barh(names, rates, color="tab:blue")
    left.axvline(COPY_GBS, color="black", linestyle="--", label=f"copy {COPY_GBS} GB/s")
    left.invert_yaxis()
    left.set_xlabel("GB/s (read + written)")
    left.set_title("Memory-bound rows against the copy ceiling")
    left.legend(loc="lower right")

    intensity = [10 ** (k / 20) for k in range(-10, 81)]
    copy_tflops = [min(i * COPY_GBS / 1e3, TENSOR_CORE_TFLOPS) for i in intensity]
    right.loglog(intensity, copy_tflops, color="black", label="copy slope / tensor cores")
    right.axhline(CUBLAS_F32_TFLOPS, color="gray", linestyle=":",
                  label=f"cuBLAS f32, no TF32 ({CUBLAS_F32_TFLOPS:.0f} TFLOP/s)")
    markers = "osD^v<>ph*X"  # each point its marker and colour, named in the legend
    for number, (name, flops, nbytes, ms, session) in enumerate(COMPUTE_ROWS):
        x, y = flops / nbytes, flops / (ms * 1e-3) / 1e12
        right.scatter([x], [y], s=30, marker=markers[number % len(markers)],
                      label=f"{name} (s{session}): {y:.0f} TFLOP/s")
    right.set_xlabel("FLOPs per byte")
    right.set_ylabel("TFLOP/s")
    right.set_title(f"Rows that compute (tensor cores: {TENSOR_CORE_TFLOPS} TFLOP/s)")
    right.legend(loc="lower right", fontsize=6)
    figure.suptitle("ZynML on an H100 80GB HBM3 (docs/performance.md; s = session)")
    save(figure, out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="docs/roofline.png")
    plot(Path(parser.parse_args().output))


if __name__ == "__main__":
    main()
