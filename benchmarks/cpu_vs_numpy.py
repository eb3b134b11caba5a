"""ZynML on the CPU (IREE llvm-cpu, local-task) against numpy, same inputs, one run.

    python benchmarks/cpu_vs_numpy.py [--repeat 20]

Prints one row per kernel: median wall time per call of each (inputs already in memory,
programs compiled and warmed up), speed = numpy time / ZynML time (> 1: ZynML faster),
and ZynML's achieved GB/s or GFLOP/s. Results go in docs/performance.md with the date,
the machine and this command.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

import zynml
from programs import SOFTMAX  # benchmarks/programs.py: shared with gpu_vs_torch.py

ELEMENTWISE_CHAIN = """
pipeline chain(x: tensor[n], y: tensor[n]) -> tensor[n]:
    let z = compute(x, y) {
        @kernel elementwise
        for i in 0..n:
            out[i] = tanh(x[i] * 2.0 + y[i]) * 0.5 + relu(x[i] - y[i])
    }
    return z
"""

ROW_SUM = """
pipeline row_sum(m: tensor[rows, cols]) -> tensor[rows]:
    let s = compute(m) {
        @kernel reduce(+, axis=1)
        for i in 0..rows, j in 0..cols:
            yield m[i, j]
    }
    return s
"""

MATMUL = """
pipeline matmul(A: tensor[M, K], B: tensor[K, N]) -> tensor[M, N]:
    let C = compute(A, B) {
        @kernel matmul
        for i in 0..M, j in 0..N:
            var sum = 0.0
            for k in 0..K:
                sum += A[i, k] * B[k, j]
            out[i, j] = sum
    }
    return C
"""


def median_time(fn, repeat: int) -> float:
    fn()  # warm up (compiles on first call)
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    f32 = np.float32
    x16m, y16m = (rng.standard_normal(1 << 22).astype(f32) for _ in range(2))
    m = rng.standard_normal((4096, 2048)).astype(f32)
    rows = []

    def row(name, program_fn, numpy_fn, check, work, unit):
        expected = numpy_fn()
        got = program_fn()
        err = np.max(np.abs(np.asarray(got, np.float64) - expected)) / np.max(np.abs(expected))
        assert err < check, f"{name}: relative error {err:.2e}"
        t_zyn = median_time(program_fn, args.repeat)
        t_np = median_time(numpy_fn, args.repeat)
        rows.append((name, t_zyn, t_np, work / t_zyn / 1e9, unit))

    chain = zynml.compile(ELEMENTWISE_CHAIN).chain
    row("elementwise chain 4M f32", lambda: chain(x16m, y16m),
        lambda: np.tanh(x16m * 2.0 + y16m) * 0.5 + np.maximum(x16m - y16m, 0),
        1e-5, 3 * x16m.nbytes, "GB/s")
    row_sum = zynml.compile(ROW_SUM).row_sum
    row("row sum 4096x2048 f32", lambda: row_sum(m), lambda: m.sum(axis=1), 1e-5,
        m.nbytes, "GB/s")
    softmax = zynml.compile(SOFTMAX).softmax
    row("softmax (4 blocks) 4096x2048 f32", lambda: softmax(m), lambda: softmax_numpy(m),
        1e-5, 2 * m.nbytes, "GB/s")
    matmul = zynml.compile(MATMUL).matmul
    for n in (512, 1024):
        a, b = (rng.standard_normal((n, n)).astype(f32) for _ in range(2))
        row(f"matmul {n} f32", lambda: matmul(a, b), lambda: a @ b, 1e-5, 2 * n ** 3,
            "GFLOP/s")

    # Ceilings measured in the same run: memory copy bandwidth (bytes read + written) and
    # the best matrix-product rate of numpy's BLAS on this machine.
    src, dst = m.copy(), np.empty_like(m)
    copy_rate = 2 * m.nbytes / median_time(lambda: np.copyto(dst, src), args.repeat) / 1e9
    a, b = (rng.standard_normal((1024, 1024)).astype(f32) for _ in range(2))
    blas_rate = 2 * 1024 ** 3 / median_time(lambda: a @ b, args.repeat) / 1e9

    tiny = rng.standard_normal(1024).astype(f32)
    overhead = median_time(lambda: chain(tiny, tiny), max(args.repeat, 200))

    print(f"# {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, numpy {np.__version__}, zynml {zynml.__version__}")
    print(f"ceilings: copy {copy_rate:.1f} GB/s (read + write), numpy BLAS matmul 1024 "
          f"{blas_rate:.1f} GFLOP/s")
    print("| kernel | ZynML | numpy | speed vs numpy | ZynML achieved | of ceiling |")
    print("|---|---|---|---|---|---|")
    for name, t_zyn, t_np, rate, unit in rows:
        ceiling = copy_rate if unit == "GB/s" else blas_rate
        print(f"| {name} | {t_zyn * 1e3:.2f} ms | {t_np * 1e3:.2f} ms | {t_np / t_zyn:.2f}x "
              f"| {rate:.1f} {unit} | {100 * rate / ceiling:.0f}% |")
    print(f"\nper-call overhead (1024-element chain, numpy in and out): {overhead * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
