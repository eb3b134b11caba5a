"""Bodies with a loop run in order inside them (`acc = acc * a + b`, not `acc op= g`), their
float64 numpy references and random inputs: shared by tests/passes/
test_sink_loops_into_generics.py (plans, CPU) and tests/runtime/test_cuda_body_loops.py
(the GPU)."""
from __future__ import annotations

import numpy as np

# The loop count is a constant.
HORNER = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        var acc = x[i]
        for k in 0..8:
            acc = acc * a + b
        out[i] = acc
}
"""

# The loop count is an integer input (`m`).
SCALAR_COUNT = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        var acc = x[i]
        for k in 0..m:
            acc = acc * a + b
        out[i] = acc
}
"""

# The loop count is the size of an input (`d`, c's length), read at the loop variable.
SIZE_COUNT = """
let y = compute(x, c) {
    @kernel elementwise
    for i in 0..n:
        var acc = 0.0
        for k in 0..d:
            acc = acc * x[i] + c[k]
        out[i] = acc
}
"""

# Two values carried with a step, one under an `if`, and work after the loop.
TWO_VALUES = """
let y = compute(x) {
    @kernel elementwise
    for r in 0..rows:
        var e = 0.0
        var m = -inf
        for c in 0..cols step 2:
            if x[r, c] > m:
                m = x[r, c]
            e = 0.5 * e + x[r, c] * m
        out[r] = e + m
}
"""

# Loops run in order inside a loop run in order.
NESTED = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        var acc = x[i]
        for k in 0..m:
            for j in 0..3:
                acc = acc * a + b
            acc = acc * 0.5
        out[i] = acc
}
"""

# Each iteration sums its row (a reduction per point), reading the sum's variable as a
# number: the sum is a loop in the kernel.
REDUCTION_INSIDE = """
let y = compute(x) {
    @kernel elementwise
    for r in 0..rows:
        var e = 0.0
        for t in 0..steps:
            var s = 0.0
            for c in 0..cols:
                s += x[r, c] * (e + c)
            e = 0.5 * e + s + 1.0
        out[r] = e
}
"""

# The loop inside a `reduce` body: one kernel computes and sums the values.
IN_A_REDUCE = """
let y = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        var acc = x[i]
        for k in 0..3:
            acc = acc * acc * 0.5 + b
        yield acc
}
"""

# Two reductions per iteration, one from a start of its own (1.0), one from the carried
# value, the loop variable read as a number.
PRODUCT_AND_MAX = """
let y = compute(x) {
    @kernel elementwise
    for r in 0..rows:
        var e = 0.0
        for t in 0..steps:
            var s = 1.0
            var m = e
            for c in 0..cols:
                s *= x[r, c] + e
                m = max(m, x[r, c] * t)
            e = 0.5 * s + 0.25 * m
        out[r] = e
}
"""

# Each iteration fills a local array (a tensor over the points and its own dimension):
# that loop stays a host loop of kernels.
LOCAL_ARRAY = """
let y = compute(x) {
    @kernel elementwise
    for r in 0..rows:
        var e = 0.0
        for t in 0..steps:
            shared var buf[3]
            for j in 0..3:
                buf[j] = x[r, j] * e + 1.0
            e = 0.5 * e + buf[0] * buf[2]
        out[r] = e
}
"""


def _horner(x, a, b, count):
    acc = x.astype(np.float64)
    for _ in range(count):
        acc = acc * a + b
    return acc


def _size_count(x, c):
    acc = np.zeros(x.shape)
    for coefficient in c.astype(np.float64):
        acc = acc * x + coefficient
    return acc


def _two_values(x, cols):
    x = x.astype(np.float64)
    e, m = np.zeros(x.shape[0]), np.full(x.shape[0], -np.inf)
    for c in range(0, cols, 2):
        m = np.where(x[:, c] > m, x[:, c], m)
        e = 0.5 * e + x[:, c] * m
    return e + m


def _nested(x, a, b, m):
    acc = x.astype(np.float64)
    for _ in range(m):
        acc = _horner(acc, a, b, 3) * 0.5
    return acc


def _reduction_inside(x, steps):
    x = x.astype(np.float64)
    e = np.zeros(x.shape[0])
    for _ in range(steps):
        e = 0.5 * e + (x * (e[:, None] + np.arange(x.shape[1]))).sum(axis=1) + 1.0
    return e


def _in_a_reduce(x, b):
    acc = x.astype(np.float64)
    for _ in range(3):
        acc = acc * acc * 0.5 + b
    return np.float64(acc.sum())


def _product_and_max(x, steps):
    x = x.astype(np.float64)
    e = np.zeros(x.shape[0])
    for t in range(steps):
        s = np.prod(x + e[:, None], axis=1)
        m = np.maximum(e, (x * t).max(axis=1))
        e = 0.5 * s + 0.25 * m
    return e


def _local_array(x, steps):
    x = x.astype(np.float64)
    e = np.zeros(x.shape[0])
    for _ in range(steps):
        buf = x[:, :3] * e[:, None] + 1.0
        e = 0.5 * e + buf[:, 0] * buf[:, 2]
    return e


def _nonzero(rng, *shape):
    """Values away from 0, of either sign: a dropped term cannot hide."""
    return (rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def error_floor(name, inputs) -> float:
    """The scale an f32 result of `name` is only good to, for assert_close's `floor`: a
    polynomial in x with random coefficients of either sign can cancel to near 0, where
    its rounding error is relative to the sum of its terms' magnitudes, not to it."""
    if name == "size_count":
        return float(np.max(_size_count(np.abs(inputs["x"]), np.abs(inputs["c"])),
                            initial=0.0))
    if name == "two_values":  # e + m, of either sign: the sum of their magnitudes
        x = inputs["x"].astype(np.float64)
        e, m = np.zeros(x.shape[0]), np.full(x.shape[0], -np.inf)
        for c in range(0, inputs["cols"], 2):
            m = np.where(x[:, c] > m, x[:, c], m)
            e = 0.5 * e + np.abs(x[:, c] * m)
        return float(np.max(e + np.abs(m), initial=0.0))
    return 0.0


def case(name, rng, size, count=5):
    """(source, inputs, float64 reference of y) for program `name` on `size` points;
    `count` is the loop count where the program takes one (m, the length of c, steps)."""
    a, b = float(rng.uniform(0.5, 0.9)), float(rng.uniform(0.2, 0.8))
    if name == "horner":
        x = _nonzero(rng, size)
        return HORNER, dict(x=x, a=a, b=b), _horner(x, np.float32(a), np.float32(b), 8)
    if name == "scalar_count":
        x = _nonzero(rng, size)
        return SCALAR_COUNT, dict(x=x, a=a, b=b, m=count), \
            _horner(x, np.float32(a), np.float32(b), count)
    if name == "size_count":
        x, c = rng.uniform(-1.0, 1.0, size).astype(np.float32), _nonzero(rng, count)
        return SIZE_COUNT, dict(x=x, c=c), _size_count(x, c)
    if name == "two_values":
        cols = 2 * count + 1  # odd: the last column is a step's
        x = _nonzero(rng, size, cols)
        return TWO_VALUES, dict(x=x, cols=cols), _two_values(x, cols)
    if name == "nested":
        x = _nonzero(rng, size)
        return NESTED, dict(x=x, a=a, b=b, m=count), \
            _nested(x, np.float32(a), np.float32(b), count)
    if name == "reduction_inside":
        x = (rng.uniform(-1.0, 1.0, (size, 13)) / 100).astype(np.float32)
        return REDUCTION_INSIDE, dict(x=x, steps=count), _reduction_inside(x, count)
    if name == "in_a_reduce":
        x = _nonzero(rng, size)
        return IN_A_REDUCE, dict(x=x, b=b), _in_a_reduce(x, np.float32(b))
    if name == "product_and_max":
        x = rng.uniform(0.2, 0.6, (size, 5)).astype(np.float32)
        return PRODUCT_AND_MAX, dict(x=x, steps=count), _product_and_max(x, count)
    if name == "local_array":
        x = (rng.uniform(-1.0, 1.0, (size, 5)) / 3).astype(np.float32)
        return LOCAL_ARRAY, dict(x=x, steps=count), _local_array(x, count)
    raise KeyError(name)


# The programs whose loop runs inside the one kernel on CUDA.
IN_KERNEL = ["horner", "scalar_count", "size_count", "two_values", "nested",
             "reduction_inside", "product_and_max", "in_a_reduce"]
NAMES = IN_KERNEL + ["local_array"]
