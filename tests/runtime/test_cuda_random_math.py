"""The math builtins (erf, log1p, expm1, sigmoid, silu) and the random builtins (rand,
randn, philox) on the native CUDA backend (marked `gpu`: CI skips these; they run on the
device machine, from artifacts compiled by tools/gpu_tests.sh). The same checks as
tests/test_math_builtins.py and tests/test_random.py make on the CPU: float64
references, and rand bit-identical to the numpy Philox, so a dropout mask is the same
on every device."""
import numpy as np
import pytest

import zynml
from philox_reference import rand as ref_rand, randn as ref_randn
from test_math_builtins import DTYPES, NAMES, assert_elementwise_close, elementwise, inputs
from test_random import (DRAWS, DROPOUT, GRID, KNOWN_ANSWERS, RANDN_ATOL, WORDS,
                         _dropout_reference, _int64)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", NAMES)
def test_math_builtin_on_cuda(rng, name, dtype):
    for size in (1, 1037):
        x = inputs(rng, name, dtype, size)
        y = zynml.run(elementwise(name), device="cuda:0", x=x)["y"]
        assert y.dtype == dtype and y.shape == x.shape
        assert_elementwise_close(y, x, name, dtype)


@pytest.mark.parametrize("counter,key,expected", KNOWN_ANSWERS)
def test_philox_known_answers_on_cuda(counter, key, expected):
    out = zynml.run(WORDS, device="cuda:0", n=4, seed=_int64(*key),
                    counter=_int64(*counter[:2]), counter_hi=_int64(*counter[2:]))["words"]
    assert [int(w) for w in out] == list(expected)


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (129, 257)])
def test_rand_on_cuda_is_bit_identical_to_the_reference(rng, shape):
    seed = int(rng.integers(-2 ** 63, 2 ** 63 - 1, dtype=np.int64))
    offset = int(rng.integers(0, 2 ** 40))
    x = rng.standard_normal(shape).astype(np.float32)
    out = zynml.run(GRID, device="cuda:0", x=x, seed=seed, offset=offset)
    counters = np.arange(x.size, dtype=np.int64).reshape(shape) + offset
    np.testing.assert_array_equal(out["u"], ref_rand(seed, counters))
    np.testing.assert_allclose(out["z"], ref_randn(seed, counters), rtol=0, atol=RANDN_ATOL)


def test_a_million_draws_on_cuda():
    out = zynml.run(DRAWS, device="cuda:0", n=1_000_000, seed=20261126)
    np.testing.assert_array_equal(out["u"], ref_rand(20261126, np.arange(1_000_000)))
    np.testing.assert_allclose(out["z"], ref_randn(20261126, np.arange(1_000_000)), rtol=0,
                               atol=RANDN_ATOL)


@pytest.mark.parametrize("n", [1, 1031, 1 << 20])
def test_dropout_mask_on_cuda_is_the_cpu_mask(rng, n):
    seed, p = int(rng.integers(0, 2 ** 31)), 0.1
    x = (rng.standard_normal(n) + 3).astype(np.float32)
    gpu = zynml.run(DROPOUT, device="cuda:0", x=x, seed=seed, p=p)["dropped"]
    # the numpy reference the CPU and the interpreter give bit for bit (tests/test_random.py)
    expected, keep = _dropout_reference(x, seed, p)
    np.testing.assert_array_equal(gpu != 0, keep)
    np.testing.assert_array_equal(gpu, expected)
