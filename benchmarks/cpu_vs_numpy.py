"""ZynML on the CPU (IREE llvm-cpu, local-task) against numpy, at 1 and 2 threads.

    python benchmarks/cpu_vs_numpy.py [--repeat 30] [--threads 1,2]

Needs the bench extra (`pip install -e '.[bench]'`: threadpoolctl). Each thread count runs
in a fresh child process whose environment is made for a fair comparison:
`OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` (set on this project's machines; they make a
current numpy's OpenBLAS pick slower kernels) are removed, numpy's BLAS is held to the
thread count by threadpoolctl and ZynML's IREE workers by `ZYNML_CPU_THREADS`. The child
reports the BLAS library, version and kernel in use (threadpoolctl) and, per kernel, the
median wall time of `--repeat` calls of each side (inputs in memory, programs compiled
and warmed up), speed = numpy time / ZynML time (> 1: ZynML faster), and ZynML's
achieved rate against a ceiling measured in the same child (memory copy bandwidth,
numpy's best BLAS matmul rate at that thread count). A rate above 105% of its ceiling is
printed as a broken measurement, not as a percentage. Results go in
docs/performance.md with the date, the machine and this command.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

# The environment variables that slow OpenBLAS here; unset in the children only.
_OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_BROKEN = 1.05  # a rate this far over its ceiling means the measurement is wrong

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


def parallel_copy(dst: np.ndarray, src: np.ndarray, threads: int) -> None:
    chunks = zip(np.array_split(dst.reshape(-1), threads), np.array_split(src.reshape(-1),
                                                                           threads))
    list(_copier(threads).map(lambda pair: np.copyto(*pair), chunks))


_copiers: dict = {}


def _copier(threads: int):
    from concurrent.futures import ThreadPoolExecutor
    return _copiers.setdefault(threads, ThreadPoolExecutor(threads))


def measure(repeat: int, threads: int) -> dict:
    """One thread count's figures (run in the child, limits already applied)."""
    import zynml
    from programs import SOFTMAX  # benchmarks/programs.py: shared with gpu_vs_torch.py

    rng = np.random.default_rng(0)
    f32 = np.float32
    x, y = (rng.standard_normal(1 << 22).astype(f32) for _ in range(2))
    m = rng.standard_normal((4096, 2048)).astype(f32)
    rows = []

    def row(name, program_fn, numpy_fn, tolerance, work, unit):
        expected = numpy_fn()
        got = np.asarray(program_fn(), np.float64)
        err = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
        assert err < tolerance, f"{name}: relative error {err:.2e}"
        t_zynml = median_time(program_fn, repeat)
        t_numpy = median_time(numpy_fn, repeat)
        rows.append({"name": name, "zynml": t_zynml, "numpy": t_numpy,
                     "rate": work / t_zynml / 1e9, "numpy_rate": work / t_numpy / 1e9,
                     "unit": unit})

    chain = zynml.compile(ELEMENTWISE_CHAIN).chain
    row("elementwise chain 4M f32", lambda: chain(x, y),
        lambda: np.tanh(x * 2.0 + y) * 0.5 + np.maximum(x - y, 0), 1e-5, 3 * x.nbytes, "GB/s")
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

    # Ceilings at this thread count: copy bandwidth (bytes read + written, the copy split
    # over `threads` threads: numpy copies without the GIL) and numpy's best BLAS rate.
    src, dst = m.copy(), np.empty_like(m)
    copy_rate = 2 * m.nbytes / median_time(lambda: parallel_copy(dst, src, threads),
                                           repeat) / 1e9
    blas_rate = max(r["numpy_rate"] for r in rows if r["unit"] == "GFLOP/s")
    tiny = rng.standard_normal(1024).astype(f32)
    per_call = median_time(lambda: chain(tiny, tiny), max(repeat, 300))
    return {"rows": rows, "ceilings": {"GB/s": copy_rate, "GFLOP/s": blas_rate},
            "per_call": per_call}


def child(threads: int, repeat: int) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=threads):
        result = measure(repeat, threads)
        result["blas"] = [{k: info.get(k) for k in ("internal_api", "version",
                                                      "architecture", "num_threads")}
                          for info in threadpool_info()]
    print(json.dumps(result))


def run_child(threads: int, repeat: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _OPENBLAS_OVERRIDES}
    env["ZYNML_CPU_THREADS"] = str(threads)
    done = subprocess.run([sys.executable, __file__, "--child", str(threads),
                           "--repeat", str(repeat)], env=env, capture_output=True,
                          text=True)
    if done.returncode:
        sys.exit(f"the {threads}-thread run failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def of_ceiling(rate: float, ceiling: float) -> str:
    share = rate / ceiling
    return f"{100 * share:.0f}%" if share <= _BROKEN else "broken measurement (over ceiling)"


def report(results: dict[int, dict], repeat: int) -> None:
    counts = sorted(results)
    print(f"# {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, numpy {np.__version__}, median of {repeat} runs; "
          f"{', '.join(_OPENBLAS_OVERRIDES)} unset")
    for t in counts:
        blas = "; ".join(f"{b['internal_api']} {b['version']} kernel {b['architecture']} "
                         f"({b['num_threads']} threads)" for b in results[t]["blas"])
        ceilings = results[t]["ceilings"]
        print(f"{t} thread(s): BLAS {blas}; ceilings: copy {ceilings['GB/s']:.1f} GB/s, "
              f"numpy's best matmul {ceilings['GFLOP/s']:.1f} GFLOP/s")
    head = " | ".join(f"ZynML {t}T | numpy {t}T | speed {t}T | of ceiling {t}T"
                      for t in counts)
    print(f"\n| kernel | {head} |")
    print("|---|" + "---|" * 4 * len(counts))
    for k, first in enumerate(results[counts[0]]["rows"]):
        cells = []
        for t in counts:
            r = results[t]["rows"][k]
            ceiling = results[t]["ceilings"][r["unit"]]
            cells.append(f"{r['zynml'] * 1e3:.2f} ms | {r['numpy'] * 1e3:.2f} ms | "
                         f"{r['numpy'] / r['zynml']:.2f}x | {r['rate']:.1f} {r['unit']}, "
                         f"{of_ceiling(r['rate'], ceiling)}")
        print(f"| {first['name']} | " + " | ".join(cells) + " |")
    print("\nper-call time of a 1024-element chain (numpy in and out): " + ", ".join(
        f"{results[t]['per_call'] * 1e6:.1f} µs at {t}T" for t in counts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", default="1,2",
                        help="comma-separated thread counts, one child process each")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child, args.repeat)
    try:
        counts = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: expected comma-separated integers, got {args.threads!r}")
    if not counts or min(counts) < 1:
        parser.error("--threads: counts must be 1 or more")
    report({t: run_child(t, args.repeat) for t in counts}, args.repeat)


if __name__ == "__main__":
    main()
