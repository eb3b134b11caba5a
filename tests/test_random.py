"""The random builtins (rand, randn, philox; zynml/cirgen/philox.py) on the interpreter and
the CPU: Random123's known answers, bit-identical to a numpy Philox
(tests/philox_reference.py), randn within its documented tolerance, a dropout mask,
statistics over a million draws with fixed seeds, located errors, and PTX for CUDA
(tests/runtime/test_cuda_random_math.py runs them on the GPU)."""
import math
import re
from pathlib import Path

import numpy as np
import pytest

import zynml
from philox_reference import philox4x32_10, rand as ref_rand, randn as ref_randn

DEVICES = ["interpreter", "cpu"]
# randn agrees with the float64 reference (and so backends with each other) to this
# absolute error: log and cos are rounded differently by each backend's libm
# (docs/language.md, "Random numbers")
RANDN_ATOL = 2e-6

WORDS = """
let words = compute(seed, counter, counter_hi) {
    @kernel elementwise
    for w in 0..n:
        var v = philox(seed, counter, counter_hi, 0)
        if w == 1:
            v = philox(seed, counter, counter_hi, 1)
        else if w == 2:
            v = philox(seed, counter, counter_hi, 2)
        else if w == 3:
            v = philox(seed, counter, counter_hi, 3)
        out[w] = v
}
"""

GRID = """
let u = compute(x, seed, offset) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = rand(seed, i * cols + j + offset) + 0.0 * x[i, j]
}
let z = compute(x, seed, offset) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = randn(seed, i * cols + j + offset) + 0.0 * x[i, j]
}
"""

DROPOUT = (Path(__file__).resolve().parent / "programs" / "dropout.zyn").read_text()

DRAWS = """
let u = compute(seed) {
    @kernel elementwise
    for i in 0..n:
        out[i] = rand(seed, i)
}
let z = compute(seed) {
    @kernel elementwise
    for i in 0..n:
        out[i] = randn(seed, i)
}
"""

# Random123's kat_vectors for philox4x32_10: (counter words, key words) -> output words
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _int64(low: int, high: int) -> int:
    """The signed 64-bit integer whose words are (low, high)."""
    v = (high << 32) | low
    return v - (1 << 64) if v >= 1 << 63 else v


@pytest.mark.parametrize("counter,key,expected", KNOWN_ANSWERS)
def test_reference_known_answers(counter, key, expected):
    assert [int(w) for w in philox4x32_10(counter, key)] == list(expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("counter,key,expected", KNOWN_ANSWERS)
def test_philox_builtin_known_answers(device, counter, key, expected):
    out = zynml.run(WORDS, device=device, n=4, seed=_int64(*key),
                    counter=_int64(*counter[:2]), counter_hi=_int64(*counter[2:]))["words"]
    assert out.dtype == np.uint32
    assert [int(w) for w in out] == list(expected)


def _random_int64(rng) -> int:
    return int(rng.integers(-2 ** 63, 2 ** 63 - 1, dtype=np.int64))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (3, 37)])
def test_rand_is_bit_identical_to_the_reference(rng, device, shape):
    seed = _random_int64(rng)
    offset = int(rng.integers(0, 2 ** 40))  # counters past 2^32: the high word matters
    x = rng.standard_normal(shape).astype(np.float32)
    out = zynml.run(GRID, device=device, x=x, seed=seed, offset=offset)
    counters = np.arange(x.size, dtype=np.int64).reshape(shape) + offset
    np.testing.assert_array_equal(out["u"], ref_rand(seed, counters))
    assert out["u"].dtype == np.float32 and out["u"].min() >= 0 and out["u"].max() < 1
    np.testing.assert_allclose(out["z"], ref_randn(seed, counters), rtol=0, atol=RANDN_ATOL)


def test_rand_interpreter_and_cpu_agree_on_the_same_seed(rng):
    seed, x = _random_int64(rng), rng.standard_normal((11, 29)).astype(np.float32)
    a = zynml.run(GRID, device="interpreter", x=x, seed=seed, offset=-5)
    b = zynml.run(GRID, device="cpu", x=x, seed=seed, offset=-5)
    np.testing.assert_array_equal(a["u"], b["u"])
    np.testing.assert_allclose(a["z"], b["z"], rtol=0, atol=2 * RANDN_ATOL)


def test_seeds_and_counters_give_different_streams():
    u = zynml.run(DRAWS, device="cpu", n=1000, seed=1)["u"]
    v = zynml.run(DRAWS, device="cpu", n=1000, seed=2)["u"]
    assert len(np.unique(u)) == 1000 and np.mean(u == v) < 0.01


def _dropout_reference(x, seed, p):
    keep = ref_rand(seed, np.arange(x.size, dtype=np.int64)) >= np.float32(p)
    return np.where(keep, x / (np.float32(1) - np.float32(p)), np.float32(0)), keep


@pytest.mark.parametrize("n", [1, 97, 1031])
def test_dropout_mask_is_the_same_on_cpu_and_interpreter(rng, n):
    seed, p = int(rng.integers(0, 2 ** 31)), 0.1
    x = (rng.standard_normal(n) + 3).astype(np.float32)  # never 0: the mask is visible
    outs = {d: zynml.run(DROPOUT, device=d, x=x, seed=seed, p=p)["dropped"]
            for d in DEVICES}
    expected, keep = _dropout_reference(x, seed, p)
    for out in outs.values():
        np.testing.assert_array_equal(out != 0, keep)
        np.testing.assert_array_equal(out, expected)  # x / (1 - p), rounded once in f32


# ------------------------------------------------------------------ statistics: fixed
# seeds, so each test is one deterministic computation (it cannot flake); the bounds are
# those a true generator passes with probability 1 - 1e-6 or more.

N = 1_000_000


@pytest.fixture(scope="module")
def draws():
    return zynml.run(DRAWS, device="cpu", n=N, seed=20261126)


def test_a_million_uniforms(draws):
    u = draws["u"].astype(np.float64)
    np.testing.assert_array_equal(draws["u"], ref_rand(20261126, np.arange(N)))
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 5 * math.sqrt(1 / 180 / N)  # var of (u - 1/2)^2
    counts = np.bincount((u * 100).astype(int), minlength=100)
    chi2 = ((counts - N / 100) ** 2 / (N / 100)).sum()
    assert chi2 < 170, chi2  # 99 degrees of freedom: P(chi2 > 170) < 1e-6
    assert u.min() >= 0 and u.max() < 1


def _normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def test_a_million_normals(draws):
    z = draws["z"].astype(np.float64)
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    assert abs((z ** 3).mean()) < 5 * math.sqrt(15 / N)  # skewness
    edges = np.linspace(-4, 4, 81)
    counts = np.histogram(z, bins=np.concatenate([[-np.inf], edges, [np.inf]]))[0]
    expected = N * np.diff(np.concatenate([[0.0], _normal_cdf(edges), [1.0]]))
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 160, chi2  # 81 degrees of freedom: P(chi2 > 160) < 1e-6
    np.testing.assert_allclose(z[:4096], ref_randn(20261126, np.arange(4096)), rtol=0,
                               atol=RANDN_ATOL)


# ------------------------------------------------------------------ errors

def _body(line: str) -> str:
    return (f"let y = compute(x, seed) {{\n    @kernel elementwise\n    for i in 0..n:\n"
            f"        {line}\n}}\n")


ERRORS = {
    "a float counter": ("out[i] = rand(seed, 1.5)", "4:29",
                        "the counter of 'rand' must be an integer, got float"),
    "a float seed": ("out[i] = randn(0.5 * 2.0, i)", "4:24",
                     "the seed of 'randn' must be an integer, got float"),
    "one argument": ("out[i] = rand(i)", "4:18",
                     "'rand' takes 2 arguments (rand(seed, counter)), got 1"),
    "three arguments": ("out[i] = rand(seed, i, i)", "4:18",
                        "'rand' takes 2 arguments (rand(seed, counter)), got 3"),
    "a keyword": ("out[i] = rand(seed, counter=i)", "4:29",
                  "'rand' takes no keyword arguments"),
    "a bool counter": ("out[i] = rand(seed, i > 2)", "4:29",
                       "the counter of 'rand' must be an integer, got bool"),
    "philox's word not a literal": ("out[i] = philox(seed, i, 0, i)", "4:37",
                                    "the word of 'philox' must be a literal 0, 1, 2 or 3"),
    "philox's word out of range": ("out[i] = philox(seed, i, 0, 4)", "4:37",
                                   "the word of 'philox' must be a literal 0, 1, 2 or 3"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_located_error(name):
    line, where, message = ERRORS[name]
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.compile(_body(line))
    assert str(info.value).startswith(f"<string>:{where}: error: {message}")


def test_float_counter_from_an_input_is_an_error_at_the_call(rng):
    source = _body("out[i] = rand(seed, x[i])")
    x = rng.standard_normal(5).astype(np.float32)
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run(source, device="cpu", x=x, seed=3)
    assert str(info.value).startswith(
        "<string>:4:29: error: the counter of 'rand' must be an integer, got f32")
    with pytest.raises(zynml.ZynMLError, match="the seed of 'rand' must be an integer"):
        zynml.run(_body("out[i] = rand(seed, i) + x[i]"), device="cpu", x=x, seed=0.5)


def test_unknown_function_lists_the_random_builtins():
    with pytest.raises(zynml.ZynMLError, match=r"builtins are .*philox.*rand, randn"):
        zynml.compile(_body("out[i] = random(seed, i)"))


# ------------------------------------------------------------------ CUDA, compiled here

def test_random_builtins_compile_to_ptx(rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    artifact = zynml.compile(GRID, device="cuda", require_device=False).artifact(
        x=x, seed=3, offset=0)
    assert ".entry" in artifact.ptx and artifact.cubin is not None
    # the rounds' high products stay 32-bit (mul.hi.u32), not emulated 64-bit multiplies:
    # two per round past the first (whose factor comes from the 64-bit counter)
    assert len(re.findall(r"\bmul\.hi\.u32\b", artifact.ptx)) >= 2 * 9


def test_interpreter_shifts_right_logically():
    """arith.shrui, which the rounds use, on the interpreter's signless integers."""
    from zynml.interpreter.scalars import shrui
    assert shrui(np.int32(-1), np.int32(8)) == np.int32(0x00FFFFFF)
    assert shrui(np.int64(-2), np.int64(32)) == np.int64(0xFFFFFFFF)
    assert shrui(-1, 60) == 15 and shrui(np.int32(5), np.int32(32)) == 0
    assert shrui(np.int32(-1), np.int32(8)).dtype == np.int32
