"""Integer scalar inputs are run-time values unless the front end needs their value
(zynml/frontend/checker.py's `static_scalars`: sizes and record indices). A new `rand`
seed per training step or a new `cache_start` per decode step compiles nothing
(`Program.stats()`), on the CPU (IREE) and the interpreter; a size given as an integer
still specializes. Against numpy float64 references."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close
from philox_reference import rand as ref_rand

PROGRAMS = Path(__file__).resolve().parent / "programs"

DEVICES = ["cpu", "interpreter"]
DROPOUT = (PROGRAMS / "dropout.zyn").read_text()

# decode-style causal attention scores over a cache: row i sees keys j <= i + cache_start
CAUSAL_SUM = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..rows, d in 0..dim:
        var acc = 0.0
        for j in 0..keys:
            if j <= i + cache_start:
                acc += x[j, d]
        out[i, d] = acc
}
"""
# a window of the cache read at a run-time offset
WINDOW = """
let y = compute(cache, w) {
    @kernel elementwise
    for i in 0..rows, d in 0..dim:
        out[i, d] = cache[i + cache_start, d] * w[d]
}
"""
# `n` is a size (the output's extent): its value is compiled in
FIRST_N = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i + 1] * 2.0
}
"""


@pytest.mark.parametrize("device", DEVICES)
def test_twenty_seeds_compile_once(rng, device):
    n, p = 1009, 0.3
    prog = zynml.compile(DROPOUT, device=device)
    assert prog.generic.static_scalars == frozenset()
    x = rng.standard_normal(n).astype(np.float32)
    for seed in rng.integers(-2 ** 63, 2 ** 63 - 1, size=20, dtype=np.int64):
        out = prog(x=x, seed=int(seed), p=p)["dropped"]
        keep = ref_rand(int(seed), np.arange(n, dtype=np.int64)) >= np.float32(p)
        expected = np.where(keep, x.astype(np.float64) / (1 - p), 0.0)
        assert_close(out, expected)
        np.testing.assert_array_equal(out == 0, ~keep)
    stats = prog.stats()
    assert stats.specializations == 1 and stats.calls == 20 and stats.memory_hits == 19


@pytest.mark.parametrize("device", DEVICES)
def test_twenty_cache_starts_in_a_condition_compile_once(rng, device):
    rows, keys, dim = 7, 37, 5
    prog = zynml.compile(CAUSAL_SUM, device=device)
    assert prog.generic.static_scalars == {"rows"}  # no input binds it: a size
    x = rng.standard_normal((keys, dim)).astype(np.float32)
    for cache_start in range(-3, 17):
        out = prog(x=x, rows=rows, cache_start=cache_start)["y"]
        allowed = np.arange(keys)[None, :] <= np.arange(rows)[:, None] + cache_start
        assert_close(out, allowed.astype(np.float64) @ x.astype(np.float64))
    assert prog.stats().specializations == 1


@pytest.mark.parametrize("device", DEVICES)
def test_twenty_cache_starts_in_an_index_compile_once(rng, device):
    rows, dim, length = 5, 11, 29
    prog = zynml.compile(WINDOW, device=device)
    cache = rng.standard_normal((length, dim)).astype(np.float32)
    w = rng.standard_normal((dim,)).astype(np.float32)
    for cache_start in range(20):
        start = cache_start % (length - rows + 1)
        out = prog(cache=cache, w=w, rows=rows, cache_start=start)["y"]
        assert_close(out, cache[start:start + rows].astype(np.float64) * w)
    assert prog.stats().specializations == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_size_given_as_an_integer_still_specializes(rng, device):
    prog = zynml.compile(FIRST_N, device=device)
    assert prog.generic.static_scalars == {"n"}
    x = rng.standard_normal(23).astype(np.float32)
    for n in (3, 13, 3, 22, 13):
        out = prog(x=x, n=n)["y"]
        assert out.shape == (n,)
        assert_close(out, x[1:n + 1].astype(np.float64) * 2)
    assert prog.stats().specializations == 3


def test_a_seed_is_an_argument_of_the_compiled_program(rng):
    """The IR does not depend on a run-time integer's value: the same cir either way."""
    prog = zynml.compile(DROPOUT, device="cpu")
    x = rng.standard_normal(17).astype(np.float32)
    one, two = (str(prog.stage_module(dict(x=x, seed=s, p=0.5), "cir")) for s in (1, 2))
    assert one == two and "tensor<i64>" in one


def test_a_record_index_stays_static(rng):
    source = """
let w = model.layers[layer]
let y = compute(x, w.scale) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[i] * w.scale[i]
}
"""
    prog = zynml.compile(source, device="cpu")
    assert prog.generic.static_scalars == {"layer"}
    x = rng.standard_normal(5).astype(np.float32)
    layers = [{"scale": rng.standard_normal(5).astype(np.float32)} for _ in range(2)]
    for layer in (0, 1, 0):
        out = prog(x=x, model={"layers": layers}, layer=layer)["y"]
        assert_close(out, x.astype(np.float64) * layers[layer]["scale"])


def test_a_pipeline_argument_that_is_a_size_there_stays_static():
    source = """
pipeline head(x: tensor[n], k: int) -> tensor[k]:
    let y = compute(x) {
        @kernel elementwise
        for i in 0..k:
            out[i] = 2.0
    }
    return y

let z = head(x, count)
let u = compute(x, seed) {
    @kernel elementwise
    for i in 0..n:
        out[i] = rand(seed, i)
}
"""
    prog = zynml.compile(source, device="cpu")
    assert "count" in prog.generic.static_scalars
    assert "seed" not in prog.generic.static_scalars
