"""In-place programs (`compute(mut x)`) and scalar inputs on the native CUDA fast call
path (zynml/runtime/cuda/function.py): a call of GPU arrays of a signature seen before
skips the checks, yet its guard checks the aliasing of the inputs updated in place, by
pointer ranges, as zynml/inplace.py does, and returns the caller's arrays. Numbers are
kernel parameters (no copy to the device), and an integer that is not a size is a
run-time argument (a new seed compiles nothing). On the fake driver of
test_cuda_executor.py (no GPU), and on a GPU (marked `gpu`)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from philox_reference import rand as ref_rand
from test_inplace import ADAMW, HYPER, adamw_reference
from test_runtime_scalars import CAUSAL_SUM, WINDOW
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.device_array import DeviceArray
from zynml.runtime.cuda.driver import get_device
from zynml.runtime.cuda.function import _aliasing_guard, _guarded_source

from .test_cuda_executor import (TorchLike, checked_calls, f32, fake,  # noqa: F401
                                 kernel_argument, upload)

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def named_kernels(fake, prog, kernel, **example):
    """Run each kernel of `prog`'s plan for `example` as `kernel(**arguments by input
    or output name)` on the fake: numpy views of tensors, 0-d arrays of by-value scalars."""
    plan = prog.artifact(**example).plan
    for step in launches(plan["body"]):
        outputs = {o["value"]: name for o, name in zip(plan["outputs"], plan["output_names"])}
        names = [plan["input_names"][int(a[3:])] if a.startswith("%in") else outputs[a]
                 for a in step["args"]]
        fake.kinds[step["kernel"]] = step["arg_kinds"]
        fake.kernels[step["kernel"]] = lambda fake, args, names=names: kernel(
            **{n: kernel_argument(fake, a) for n, a in zip(names, args)})
    return plan


def k_adamw(param, grad, m, v, lr, beta1, beta2, eps, wd, bc1, bc2):
    """The AdamW step in float32 numpy, as the kernel computes it."""
    m[...] = beta1 * m + (1 - beta1) * grad
    v[...] = beta2 * v + (1 - beta2) * grad * grad
    update = (m / bc1) / (np.sqrt(v / bc2) + eps)
    param[...] = param - lr * (update + wd * param)


def adamw_on_fake(fake, n):
    prog = zynml.compile(ADAMW, device="cuda:0", require_device=False)
    example = dict(param=np.zeros(n, np.float32), grad=np.zeros(n, np.float32),
                   m=np.zeros(n, np.float32), v=np.zeros(n, np.float32), bc1=0.1,
                   bc2=0.001, **HYPER)
    plan = named_kernels(fake, prog, k_adamw, **example)
    return prog, plan


def test_adamw_in_place_takes_the_fast_path(fake, rng, checked_calls):  # noqa: F811
    n = 1009
    prog, plan = adamw_on_fake(fake, n)
    assert [spec["kind"] for spec in plan["inputs"]][4:] == ["scalar"] * 7  # by value
    param0 = f32(rng, n)
    grads = [f32(rng, n) for _ in range(10)]
    expected = adamw_reference(param0, np.zeros(n), np.zeros(n), grads, **HYPER)
    param, m, v = (TorchLike(upload(a)) for a in (param0, np.zeros(n, np.float32),
                                                  np.zeros(n, np.float32)))
    grad_arrays = [TorchLike(upload(g)) for g in grads]
    uploads = len(fake.uploads)
    for t, grad in enumerate(grad_arrays, start=1):
        mark = fake.mark()
        out = prog(param=param, grad=grad, m=m, v=v, bc1=1 - HYPER["beta1"] ** t,
                   bc2=1 - HYPER["beta2"] ** t, **HYPER)
        log = fake.since(mark)
        assert out["param"] is param and out["m"] is m and out["v"] is v
        assert len(log.launches) == 1 and log.copies == [] and log.allocs == []
    assert len(fake.uploads) == uploads  # the seven floats: kernel parameters
    assert len(checked_calls) == 1  # nine of the ten calls on the fast path
    for got, want in zip((param, m, v), expected):
        np.testing.assert_allclose(got.array.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["same array", "grad overlaps param", "m inside v"])
def test_aliasing_is_an_error_on_the_fast_path(fake, rng, checked_calls, case):  # noqa: F811
    n = 64
    prog, _ = adamw_on_fake(fake, n)
    big = upload(np.abs(f32(rng, 4 * n)))
    device = get_device(0)

    def at(offset):  # a 16-byte aligned view of `big`
        return TorchLike(DeviceArray(device, big.ptr + 4 * offset, (n,), "float32",
                                     owner=big))
    arrays = dict(param=at(0), grad=at(n), m=at(2 * n), v=at(3 * n))
    scalars = dict(bc1=0.1, bc2=0.001, **HYPER)
    prog(**arrays, **scalars)  # adjacent, not overlapping: fine, and now fast
    prog(**arrays, **scalars)
    assert len(checked_calls) == 1
    bad = dict(arrays)
    if case == "same array":
        bad["m"] = bad["param"]
        names = ("param", "m")
    elif case == "grad overlaps param":
        bad["grad"] = at(n - 4)
        names = ("param", "grad")
    else:
        bad["m"] = at(3 * n + 0)
        names = ("m", "v")
    with pytest.raises(zynml.ZynMLError) as err:
        prog(**bad, **scalars)
    message = str(err.value)
    assert f"inputs '{names[0]}' and '{names[1]}' share memory" in message
    assert "adamw_inplace.zyn:3:" in message  # at the `mut`
    # the fast path declined (it would have run the kernels and raised nothing), and the
    # checks raised before running anything
    assert len(checked_calls) == 1


def test_the_aliasing_guard_compares_byte_ranges():
    code = _aliasing_guard(("a",), {"a": "p0", "b": "p1", "c": "p2"},
                           {"a": 400, "b": 40, "c": 0})
    assert code == ["    if p0 < p1 + 40 and p1 < p0 + 400:", "        return None"]
    # two mutable inputs: each pair once
    code = _aliasing_guard(("a", "b"), {"a": "p0", "b": "p1"}, {"a": 8, "b": 8})
    assert len(code) == 2
    key = (("x", DeviceArray, (4,), "float32"), ("y", DeviceArray, (4,), "float32"),
           ("s", float), ("k", int, None))
    source, _ = _guarded_source(key, ["x", "y", "s", "k"], {}, ["x", "z"], ("x",),
                                {"x": "x"}, {"x": 16, "y": 16})
    assert "if p0 < p1 + 16 and p1 < p0 + 16:" in source
    assert "return {'x': v0, 'z': results[1]}" in source
    assert "type(v3) is int and -9223372036854775808 <= v3 < 9223372036854775808" \
        in source


SEEDED = (PROGRAMS / "dropout.zyn").read_text()


def test_a_new_seed_is_a_kernel_argument_on_the_fast_path(fake, rng, checked_calls):  # noqa: F811,E501
    n = 101
    prog = zynml.compile(SEEDED, device="cuda:0", require_device=False)
    seeds = []

    def k_dropout(x, dropped, seed, p):
        seeds.append(int(seed))
        keep = ref_rand(int(seed), np.arange(n, dtype=np.int64)) >= np.float32(p)
        dropped[...] = np.where(keep, x / (np.float32(1) - p), np.float32(0))
    plan = named_kernels(fake, prog, k_dropout, x=np.zeros(n, np.float32), seed=7, p=0.5)
    assert [s["kind"] for s in plan["inputs"]] == ["tensor", "scalar", "scalar"]
    x = f32(rng, n)
    xs = TorchLike(upload(x))
    for seed in (3, 2 ** 40 + 5, -1, 3, 12345):
        out = prog(x=xs, seed=seed, p=0.25)["dropped"].numpy()
        keep = ref_rand(seed, np.arange(n, dtype=np.int64)) >= np.float32(0.25)
        np.testing.assert_array_equal(out, np.where(keep, x / np.float32(0.75), 0))
    assert seeds == [3, 2 ** 40 + 5, -1, 3, 12345]
    assert len(checked_calls) == 1
    assert prog.stats().specializations == 1
    with pytest.raises(zynml.ZynMLError, match="64"):
        prog(x=xs, seed=2 ** 64, p=0.25)  # off the fast path: the checks say why


# ---------------------------------------------------------------------------- GPU

@pytest.mark.gpu
def test_adamw_in_place_on_the_fast_path_of_the_gpu(rng, monkeypatch):
    monkeypatch.delenv("ZYNML_CUDA_POISON", raising=False)  # it turns the fast path off
    n = 100003
    prog = zynml.compile(ADAMW, device="cuda:0")
    param0 = rng.standard_normal(n).astype(np.float32)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(10)]
    zeros = np.zeros(n, np.float32)
    prog.artifact(param=param0, grad=grads[0], m=zeros, v=zeros, bc1=0.1, bc2=0.001,
                  **HYPER)  # compile-only runs stop here
    torch = pytest.importorskip("torch")
    expected = adamw_reference(param0, zeros, zeros, grads, **HYPER)
    param, m, v = (torch.from_numpy(a).cuda() for a in (param0, zeros, zeros))
    for t, grad in enumerate(grads, start=1):
        out = prog(param=param, grad=torch.from_numpy(grad).cuda(), m=m, v=v,
                   bc1=1 - HYPER["beta1"] ** t, bc2=1 - HYPER["beta2"] ** t, **HYPER)
        assert out["param"] is param and out["m"] is m and out["v"] is v
    assert prog._fast_calls._last is not None  # the guarded fast call served the rest
    for got, want in zip((param, m, v), expected):
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(zynml.ZynMLError, match="inputs 'param' and 'm' share memory"):
        prog(param=param, grad=torch.from_numpy(grads[0]).cuda(), m=param, v=v,
             bc1=0.5, bc2=0.5, **HYPER)
    with pytest.raises(zynml.ZynMLError, match="inputs 'param' and 'grad' share memory"):
        prog(param=param, grad=param, m=m, v=v, bc1=0.5, bc2=0.5, **HYPER)


@pytest.mark.gpu
def test_twenty_seeds_compile_once_on_the_gpu(rng, monkeypatch):
    monkeypatch.delenv("ZYNML_CUDA_POISON", raising=False)
    n = 4099
    prog = zynml.compile(SEEDED, device="cuda:0")
    x = rng.standard_normal(n).astype(np.float32)
    prog.artifact(x=x, seed=1, p=0.5)  # compile-only runs stop here
    xs = DeviceArray.from_numpy(x)
    for seed in range(20):
        out = prog(x=xs, seed=1000 + seed, p=0.5)["dropped"]
        keep = ref_rand(1000 + seed, np.arange(n, dtype=np.int64)) >= np.float32(0.5)
        np.testing.assert_array_equal(np.asarray(out.numpy()),
                                      np.where(keep, x / np.float32(0.5), 0))
    assert prog.stats().specializations == 1 and prog.stats().compiles <= 1


def test_a_cache_offset_is_a_kernel_parameter():
    """Compiled here: the offset is a scalar input of the plan and an int64 parameter of
    the kernel; any value gives the same artifact."""
    x = np.zeros((37, 5), np.float32)
    prog = zynml.compile(CAUSAL_SUM, device="cuda:0", require_device=False)
    one, two = (prog.artifact(x=x, rows=7, cache_start=s) for s in (0, 9))
    assert one.ptx == two.ptx and one.plan == two.plan
    spec = one.plan["inputs"][one.plan["input_names"].index("cache_start")]
    assert spec == {"kind": "scalar", "dtype": "int64"}
    assert any("int64" in step["arg_kinds"] for step in launches(one.plan["body"]))


@pytest.mark.gpu
def test_twenty_cache_offsets_compile_once_on_the_gpu(rng, monkeypatch):
    monkeypatch.delenv("ZYNML_CUDA_POISON", raising=False)  # the fast path too
    rows, keys, dim, length = 7, 37, 5, 29
    causal = zynml.compile(CAUSAL_SUM, device="cuda:0")
    window = zynml.compile(WINDOW, device="cuda:0")
    x = rng.standard_normal((keys, dim)).astype(np.float32)
    cache = rng.standard_normal((length, dim)).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    causal.artifact(x=x, rows=rows, cache_start=0)  # compile-only runs stop here
    window.artifact(cache=cache, w=w, rows=rows, cache_start=0)
    xs, caches, ws = (DeviceArray.from_numpy(a) for a in (x, cache, w))
    for cache_start in range(20):  # fixed values: -3..16, and windows inside the cache
        offset = cache_start - 3
        out = causal(x=xs, rows=rows, cache_start=offset)["y"].numpy()
        allowed = np.arange(keys)[None, :] <= np.arange(rows)[:, None] + offset
        np.testing.assert_allclose(out, allowed.astype(np.float64) @ x.astype(np.float64),
                                   rtol=1e-5, atol=1e-5)
        start = cache_start % (length - rows + 1)
        out = window(cache=caches, w=ws, rows=rows, cache_start=start)["y"].numpy()
        np.testing.assert_allclose(out, cache[start:start + rows].astype(np.float64) * w,
                                   rtol=1e-6, atol=1e-6)
    assert causal.stats().specializations == 1 and window.stats().specializations == 1
