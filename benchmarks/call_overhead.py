"""Per-call overhead of ZynML's native CUDA path: a cached 1024-element add, GPU arrays in,
device arrays out.

    python benchmarks/call_overhead.py --compile-only   # here (MLIR): fills the cache
    python benchmarks/call_overhead.py --fake-driver    # anywhere: the Python side alone
    python benchmarks/call_overhead.py                  # on the GPU (carry the cache)

All three must see the same ZYNML_CACHE_DIR. `--fake-driver` replaces cuda-python and
libcuda by no-ops (a launch does nothing, an allocation returns the next fake address) and
calls with fake GPU arrays: a torch-like tensor (`data_ptr()`, `is_cuda`,
`is_contiguous()`, `shape`, `dtype`) and a `__cuda_array_interface__` array; what it
reports is ZynML's Python and ctypes' cost (CPU time: other processes count least),
without the driver's own. The default mode calls with torch tensors and reports wall
clock per call over `--calls` calls (queue drained at the end), beside bare launches of
the same kernel (the fast path's prebuilt ctypes call, and KernelModule.launch) and
PyTorch's own add. `--profile` adds a cProfile top 15 (by own time) of the ZynML call.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

import numpy as np

import zynml
from fake_cuda import FakeCuda

N = 1024

ADD = """
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] + y[i]
}

pipeline add(x: tensor[n], y: tensor[n]) -> tensor[n]:
    let s = compute(x, y) {
        @kernel elementwise
        for i in 0..n:
            out[i] = x[i] + y[i]
    }
    return s
"""


def _program(require_device: bool):
    return zynml.compile(ADD, device="cuda:0", require_device=require_device)


def compile_only() -> None:
    prog = _program(require_device=False)
    host = {"x": np.ones(N, np.float32), "y": np.ones(N, np.float32)}
    prog.artifact(**host)
    prog.add._program.artifact(**host)
    print("compiled: add program and add pipeline", flush=True)


# ---------------------------------------------------------------------------- fake arrays

class _FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class _FakeSize(tuple):
    """torch.Size: a tuple subclass."""


class FakeTensor:
    """What ZynML reads of a torch.Tensor on the GPU."""
    is_cuda = True

    def __init__(self, ptr, shape, dtype="float32"):
        self._ptr, self.shape, self.dtype = ptr, _FakeSize(shape), _FakeDtype(dtype)
        self._typestr = np.dtype(dtype).str

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        return True

    @property
    def __cuda_array_interface__(self):  # torch builds it on each access too
        return {"shape": tuple(self.shape), "typestr": self._typestr,
                "data": (self._ptr, False), "version": 3, "strides": None}


class FakeCudaArray:
    """A CuPy/numba-like array: only `__cuda_array_interface__`."""

    def __init__(self, ptr, shape, dtype="float32"):
        self._iface = {"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                       "data": (ptr, False), "version": 3, "strides": None}

    @property
    def __cuda_array_interface__(self):
        return dict(self._iface)


def _per_call_us(fn, calls: int, rounds: int) -> float:
    """CPU time per call in µs, the best of `rounds` rounds of `calls` calls (CPU time
    and the best round: other processes on the machine count least)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, time.process_time() - start)
    return best / calls * 1e6


def _profile(fn, calls: int, title: str) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    print(f"\n# cProfile, {title}, {calls} calls: top 15 by own time")
    pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(15)


def fake_driver(calls: int, rounds: int, profile: bool) -> None:
    fake = FakeCuda()
    fake.install()
    prog = _program(require_device=False)
    cases = {
        "prog(**torch-like)": (prog, lambda p, s: FakeTensor(p, s)),
        "prog(**cuda-array-interface)": (prog, lambda p, s: FakeCudaArray(p, s)),
        "prog.add(**torch-like) (pipeline)": (prog.add, lambda p, s: FakeTensor(p, s)),
    }
    print(f"# fake driver ({fake.kind}): ZynML's Python, CPU time per call, best of "
          f"{rounds} x {calls} calls")
    for name, (target, make) in cases.items():
        inputs = {"x": make(0x1000_0000, (N,)), "y": make(0x2000_0000, (N,))}
        target(**inputs)  # compile (or read the cache) and take the fast path's key
        before = dict(fake.counts)
        target(**inputs)
        per_call = {k: fake.counts[k] - before[k] for k in fake.counts}
        us = _per_call_us(lambda: target(**inputs), calls, rounds)
        print(f"{name:36s} {us:7.2f} µs/call   driver calls per call: "
              + ", ".join(f"{k} {v}" for k, v in per_call.items()), flush=True)
    if profile:
        inputs = {"x": FakeTensor(0x1000_0000, (N,)), "y": FakeTensor(0x2000_0000, (N,))}
        _profile(lambda: prog(**inputs), calls, "prog(**torch-like), fake driver")


# ---------------------------------------------------------------------------- the GPU

def real(calls: int, rounds: int, profile: bool) -> None:
    import torch
    print(f"# device: {torch.cuda.get_device_name()}, torch {torch.__version__}; wall clock "
          f"per call over {calls} calls, queue drained at the end, best of {rounds} rounds")
    prog = _program(require_device=True)
    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    # results: right, and two alive at once in different memory
    first = prog(x=x, y=y)["z"]
    second = prog(x=y, y=y)["z"]
    pipeline = prog.add(x, y)
    torch.cuda.synchronize()
    assert first.ptr != second.ptr
    assert torch.equal(torch.as_tensor(first, device="cuda"), x + y)
    assert torch.equal(torch.as_tensor(second, device="cuda"), y + y)
    assert torch.equal(torch.as_tensor(pipeline, device="cuda"), x + y)
    del first, second, pipeline

    def per_call_us(fn) -> float:
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        return best / calls * 1e6

    rows = [("prog(x=, y=)", lambda: prog(x=x, y=y)),
            ("prog.add(x=, y=) (pipeline)", lambda: prog.add(x=x, y=y)),
            ("prog.add(x, y) (pipeline, positional)", lambda: prog.add(x, y)),
            ("torch x + y", lambda: x + y)]
    for name, fn in rows:
        print(f"{name:40s} {per_call_us(fn):7.2f} µs/call", flush=True)

    # the same kernel launched alone, its parameters pointing at `kept`, x and y
    flat = next(iter(prog._executables.values())).function.executor.flat
    if flat is None:
        print("(no bare launch: the plan runs in the interpreter; ZYNML_CUDA_POISON set?)")
    else:
        kept = prog(x=x, y=y)
        (call, args), = flat.steps
        function, grid, block, shared, params = flat.launches[0][:5]
        module = flat.module
        bare = [("bare launch: the fast path's ctypes call", lambda: call(*args)),
                ("bare launch: KernelModule.launch", lambda: module.launch(
                    function, grid, block, shared, params.address))]
        for name, fn in bare:
            print(f"{name:40s} {per_call_us(fn):7.2f} µs/call", flush=True)
        torch.cuda.synchronize()  # the bare launches wrote x + y into kept's buffer
        assert torch.equal(torch.as_tensor(kept["z"], device="cuda"), x + y)
    if profile:
        _profile(lambda: prog(x=x, y=y), calls, "prog(x=, y=), GPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--compile-only", action="store_true",
                      help="compile the artifacts into the cache and stop")
    mode.add_argument("--fake-driver", action="store_true",
                      help="no GPU: time ZynML's Python against a no-op driver")
    parser.add_argument("--calls", type=int, default=10000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the best counts)")
    parser.add_argument("--profile", action="store_true", help="add a cProfile top 15")
    args = parser.parse_args()
    if args.compile_only:
        compile_only()
    elif args.fake_driver:
        fake_driver(args.calls, args.rounds, args.profile)
    else:
        real(args.calls, args.rounds, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
