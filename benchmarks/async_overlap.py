"""Two independent `@async` computes, each on a stream of its own: do they overlap?

    python benchmarks/async_overlap.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/async_overlap.py                  # on the GPU (carry the cache)
    python benchmarks/async_overlap.py --device cpu     # the same on the CPU's threads

Both GPU halves must see the same ZYNML_CACHE_DIR. Each block sums exp(-(p - c)^2) over
`--centres` centres for `--points` points, one thread per point: a few blocks of
threads that leave most of the GPU's multiprocessors idle, so two at once can run side by
side. Timed (wall clock, median of `--repeat` calls after a warm-up, inputs already on the
device, the device drained at the end of each call): each block alone as a plain
program, then the program of both as futures with `await all`. The issue's goal: both
together take less than the sum of the two alone. Results are checked against float64
numpy on a few points.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import zynml

BLOCK = """compute(NAME, c) ASYNC {
    @kernel fused
    for b in 0..points:
        var acc = 0.0
        for j in 0..centres:
            let d = NAME[b] - c[j]
            acc += exp(-d * d)
        out[b] = acc
}"""


def block(name: str, future: bool) -> str:
    """The block over input `name`; as a future, indented to sit in a list."""
    text = BLOCK.replace("NAME", name).replace("ASYNC", "@async" if future else "")
    return text.replace("\n", "\n    ") if future else text


PROGRAMS = {
    "x alone": f"let fx = {block('x', False)}\n",
    "y alone": f"let gy = {block('y', False)}\n",
    "both as futures": f"let fs = [\n    {block('x', True)},\n    {block('y', True)},\n]\n"
                       "let both = await all(fs)\n",
}


def inputs(args) -> dict:
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(size).astype(np.float32)
            for name, size in (("x", args.points), ("y", args.points), ("c", args.centres))}


def expected(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    d = points[:, None].astype(np.float64) - centres[None, :].astype(np.float64)
    return np.exp(-d * d).sum(axis=1)


def compile_only(args) -> None:
    values = inputs(args)
    for source in PROGRAMS.values():
        prog = zynml.compile(source, device="cuda:0", require_device=False)
        parts = [p.program for p in prog._async.parts if p.program is not None] \
            if prog._async is not None else [prog]
        for part in parts:
            part.artifact({name: values[name] for name in part.inputs})


def run(args) -> dict[str, float]:
    """Median seconds of a call of each program; checks each program's values."""
    values = inputs(args)
    drain = lambda: None  # noqa: E731  (the CPU's calls return when done)
    if args.device.startswith("cuda"):
        from zynml.runtime.cuda.device_array import DeviceArray
        from zynml.runtime.cuda.driver import get_device
        gpu = get_device(int(args.device.partition(":")[2] or 0))
        values = {name: DeviceArray.from_numpy(v, gpu) for name, v in values.items()}
        drain = gpu.synchronize
    host = {name: np.asarray(v) for name, v in values.items()}
    check = slice(0, min(args.points, 64))
    want = {name: expected(host[name][check], host["c"]) for name in ("x", "y")}
    seconds = {}
    for what, source in PROGRAMS.items():
        prog = zynml.compile(source, device=args.device)
        out = prog({name: values[name] for name in prog.inputs})
        drain()  # the first call compiles, loads and runs the blocks one after another
        got = out["both"] if "both" in out else [out.get("fx"), out.get("gy")]
        for name, value in zip(("x", "y"), got):
            if value is not None:
                # a sum of 2^18 f32 terms in order: a relative error near 1e-4 is rounding
                np.testing.assert_allclose(np.asarray(value)[check], want[name], rtol=1e-3)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            prog({name: values[name] for name in prog.inputs})
            drain()
            times.append(time.perf_counter() - start)
        seconds[what] = statistics.median(times)
    return seconds


def report(args, seconds: dict[str, float]) -> None:
    alone = seconds["x alone"] + seconds["y alone"]
    both = seconds["both as futures"]
    print(f"{args.points} points x {args.centres} centres per block, {args.device}\n")
    print("| calls | ms |")
    print("|---|---:|")
    for what, s in seconds.items():
        print(f"| {what} | {s * 1e3:.3f} |")
    print(f"\nboth as futures: {both / alone:.2f} of the two alone "
          f"({'overlapped' if both < alone else 'not overlapped'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=16384)
    parser.add_argument("--centres", type=int, default=1 << 18)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    if args.points < 1 or args.centres < 1 or args.repeat < 1:
        parser.error("--points, --centres and --repeat take positive numbers")
    if args.compile_only:
        compile_only(args)
        return
    report(args, run(args))


if __name__ == "__main__":
    main()
