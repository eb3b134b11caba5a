"""End to end on the CPU: every kernel kind of the main job against float64 numpy, on
fresh random inputs of odd sizes (1, primes, non-multiples of tiles)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from conftest import assert_close

SIZES = [1, 7, 31]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

ELEMENTWISE = """
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = relu(x[i])
}
"""


@pytest.mark.parametrize("n", SIZES)
def test_elementwise_relu(rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    assert_close(zynml.run(ELEMENTWISE, x=x)["y"], np.maximum(x.astype(np.float64), 0))


def test_elementwise_two_inputs(rng):
    x, y = (rng.standard_normal(13).astype(np.float32) for _ in range(2))
    out = zynml.run("""
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * y[i] + 1.0
}""", x=x, y=y)["z"]
    assert out.dtype == np.float32
    assert_close(out, x.astype(np.float64) * y + 1)


@pytest.mark.parametrize("rows,cols", [(1, 1), (5, 7), (13, 3)])
def test_broadcast_along_columns(rng, rows, cols):
    m = rng.standard_normal((rows, cols)).astype(np.float32)
    v = rng.standard_normal(cols).astype(np.float32)
    out = zynml.run("""
let scaled = compute(matrix, vector) {
    @kernel elementwise
    @broadcast(vector, axis=1)
    for i in 0..rows, j in 0..cols:
        out[i, j] = matrix[i, j] * vector[j]
}""", matrix=m, vector=v)["scaled"]
    assert_close(out, m.astype(np.float64) * v)


def test_broadcast_along_rows(rng):
    m = rng.standard_normal((11, 4)).astype(np.float32)
    v = rng.standard_normal(11).astype(np.float32)
    out = zynml.run("""
let shifted = compute(matrix, bias) {
    @kernel elementwise
    @broadcast(bias, axis=0)
    for i in 0..rows, j in 0..cols:
        out[i, j] = matrix[i, j] - bias[i]
}""", matrix=m, bias=v)["shifted"]
    assert_close(out, m.astype(np.float64) - v[:, None])


MATH = {
    "relu": np.vectorize(lambda v: max(v, 0.0)), "exp": np.exp, "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "abs": np.abs, "floor": np.floor, "ceil": np.ceil,
}


@pytest.mark.parametrize("fn", sorted(MATH))
def test_math_builtins(rng, fn):
    x = (rng.standard_normal(17) * 2).astype(np.float32)
    out = zynml.run(ELEMENTWISE.replace("relu", fn), x=x)["y"]
    assert_close(out, MATH[fn](x.astype(np.float64)))


@pytest.mark.parametrize("fn,ref", [("log", np.log), ("sqrt", np.sqrt),
                                    ("rsqrt", lambda v: 1 / np.sqrt(v))])
def test_math_builtins_positive_domain(rng, fn, ref):
    x = rng.uniform(0.5, 4.0, 19).astype(np.float32)
    assert_close(zynml.run(ELEMENTWISE.replace("relu", fn), x=x)["y"], ref(x.astype(np.float64)))


def test_binary_builtins_and_power(rng):
    x = rng.standard_normal(23).astype(np.float32)
    y = rng.uniform(0.5, 2.0, 23).astype(np.float32)
    out = zynml.run("""
let z = compute(x, y) {
    @kernel elementwise
    for i in 0..n:
        let a = min(x[i], 0.25) + max(x[i], -0.25)
        let b = clamp(x[i], -0.5, 0.5) + pow(y[i], 1.5)
        out[i] = a * b - x[i]^3
}""", x=x, y=y)["z"]
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    a = np.minimum(x64, 0.25) + np.maximum(x64, -0.25)
    b = np.clip(x64, -0.5, 0.5) + y64 ** 1.5
    assert_close(out, a * b - x64 ** 3)


REDUCTIONS = {"+": np.sum, "*": np.prod, "min": np.min, "max": np.max}


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
@pytest.mark.parametrize("n", [1, 13])
def test_full_reduction(rng, op, n):
    x = rng.uniform(0.5, 1.5, n).astype(np.float32)  # products stay in range
    out = zynml.run(f"""
let r = compute(data) {{
    @kernel reduce({op})
    for i in 0..len:
        yield data[i]
}}""", data=x)["r"]
    assert np.ndim(out) == 0
    assert_close(out, REDUCTIONS[op](x.astype(np.float64)))


@pytest.mark.parametrize("op,ref", [("and", np.all), ("or", np.any)])
def test_bool_reductions(rng, op, ref):
    x = rng.standard_normal(29).astype(np.float32)
    for threshold in (-10.0, 0.0, 10.0):
        out = zynml.run(f"""
let r = compute(data) {{
    @kernel reduce({op})
    for i in 0..len:
        yield data[i] > {threshold}
}}""", data=x)["r"]
        assert bool(out) == bool(ref(x > threshold))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions(rng, op):
    x = rng.standard_normal(37).astype(np.float32)
    out = zynml.run(f"""
let idx = compute(data) {{
    @kernel reduce({op})
    for i in 0..len:
        yield (data[i], i)
}}""", data=x)["idx"]
    assert int(out) == int(getattr(np, op)(x))


def test_argmax_ties_give_the_first_index(rng):
    x = rng.integers(0, 3, 41).astype(np.float32)  # many equal maxima
    out = zynml.run("""
let idx = compute(data) {
    @kernel reduce(argmax)
    for i in 0..len:
        yield (data[i], i)
}""", data=x)["idx"]
    assert int(out) == int(np.argmax(x)) == int(np.flatnonzero(x == x.max())[0])


def test_argmax_per_row(rng):
    m = rng.integers(0, 4, (7, 9)).astype(np.float32)
    out = zynml.run("""
let idx = compute(m) {
    @kernel reduce(argmax, axis=1)
    for i in 0..rows, j in 0..cols:
        yield (m[i, j], j)
}""", m=m)["idx"]
    np.testing.assert_array_equal(out, np.argmax(m, axis=1))


@pytest.mark.parametrize("axis", [0, 1])
def test_reduction_along_axis(rng, axis):
    m = rng.standard_normal((5, 11)).astype(np.float32)
    out = zynml.run(f"""
let sums = compute(matrix) {{
    @kernel reduce(+, axis={axis})
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}}""", matrix=m)["sums"]
    assert_close(out, m.astype(np.float64).sum(axis=axis))


def test_reduction_with_transformation_and_pipe(rng):
    x = rng.standard_normal(19).astype(np.float32)
    out = zynml.run("""
let norm = compute(data) {
    @kernel reduce(+)
    for i in 0..len:
        yield data[i] * data[i]
} |> sqrt()""", data=x)["norm"]
    assert_close(out, np.sqrt(np.sum(x.astype(np.float64) ** 2)))


MATMUL = """
let C = compute(A, B) {
    @kernel matmul
    @workgroup(16, 16)
    @shared(16 * 16 * 4 * 2)
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
"""


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 3, 11), (17, 31, 13)])
def test_matmul(rng, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    assert_close(zynml.run(MATMUL, A=a, B=b)["C"], a.astype(np.float64) @ b)


def test_matmul_f64_stays_f64(rng):
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 3))
    out = zynml.run(MATMUL, A=a, B=b)["C"]
    assert out.dtype == np.float64
    assert_close(out, a @ b, rtol=1e-12)


def test_matmul_with_epilogue(rng):
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    bias = rng.standard_normal(7).astype(np.float32)
    out = zynml.run("""
let C = compute(A, B, bias) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = relu(sum + bias[j])
}""", A=a, B=b, bias=bias)["C"]
    assert_close(out, np.maximum(a.astype(np.float64) @ b + bias, 0))


@pytest.mark.parametrize("batch,m,k,n", [(1, 1, 1, 1), (3, 5, 7, 2)])
def test_batched_matmul(rng, batch, m, k, n):
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    out = zynml.run("""
let C = compute(A, B) {
    @kernel batched_matmul
    @workgroup(16, 16, 1)
    for b in 0..batch, i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[b, i, k] * B[b, k, j]
        out[b, i, j] = sum
}""", A=a, B=b)["C"]
    assert_close(out, a.astype(np.float64) @ b)


def test_softmax_as_blocks_and_compound_assignment(rng):
    x = rng.standard_normal((7, 13)).astype(np.float32)
    prog = zynml.compile(EXAMPLES / "softmax.zyn")
    out = prog(x=x)["probs"]
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert_close(out, e / e.sum(axis=1, keepdims=True))


def test_var_let_compound_and_integer_promotion(rng):
    x = rng.standard_normal((3, 9)).astype(np.float32)
    out = zynml.run("""
let mean_sq = compute(x) {
    @kernel elementwise
    for b in 0..batch, c in 0..one:
        var acc = 0.0
        for i in 0..hidden:
            let v = x[b, i]
            acc += v * v
        acc /= hidden
        out[b, c] = acc
}""", x=x, one=1)["mean_sq"]
    assert_close(out, (x.astype(np.float64) ** 2).mean(axis=1, keepdims=True))


def test_scalar_constants_and_inputs(rng):
    x = rng.standard_normal(11).astype(np.float32)
    src = """
let eps = 0.5
let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] * scale + eps
}"""
    out = zynml.run(src, x=x, scale=3.0)
    assert set(out) == {"y"}
    assert_close(out["y"], x.astype(np.float64) * 3 + 0.5)


def test_program_is_reusable_across_shapes(rng):
    prog = zynml.compile(ELEMENTWISE)
    assert prog.inputs == ["x"] and prog.outputs == ["y"]
    for n in (3, 5, 3):
        x = rng.standard_normal(n).astype(np.float32)
        assert_close(prog(x=x)["y"], np.maximum(x, 0))


def test_pipeline_is_a_method(rng):
    prog = zynml.compile("""
pipeline mlp(x: tensor[batch, d], w1: tensor[d, h], w2: tensor[h, o]) -> tensor[batch, o]:
    let hidden = compute(x, w1) {
        @kernel matmul
        for i in 0..batch, j in 0..h:
            var sum = 0.0
            for k in 0..d:
                sum += x[i, k] * w1[k, j]
            out[i, j] = relu(sum)
    }
    let y = compute(hidden, w2) {
        @kernel matmul
        for i in 0..batch, j in 0..o:
            var sum = 0.0
            for k in 0..h:
                sum += hidden[i, k] * w2[k, j]
            out[i, j] = sum
    }
    return y
""")
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in [(3, 5), (5, 7), (7, 2)])
    expected = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
    assert_close(prog.mlp(x, w1, w2), expected)
    assert_close(prog.mlp(x=x, w1=w1, w2=w2), expected)


def test_integer_elementwise(rng):
    x = rng.integers(-50, 50, 15).astype(np.int32)
    out = zynml.run("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = abs(x[i]) * 2 + i
}""", x=x)["y"]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.abs(x) * 2 + np.arange(15))


def test_gather_with_non_affine_index(rng):
    """No loop indexes x directly, so the size n is an input of the program."""
    x = rng.standard_normal(10).astype(np.float32)
    out = zynml.run("""
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = x[(i * i) % n]
}""", x=x, n=10)["y"]
    assert_close(out, x[(np.arange(10) ** 2) % 10])


def test_a_kind_whose_body_does_not_match_is_lowered_generically_with_a_note(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    source = """
let C = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j] * 2.0
        out[i, j] = sum
}"""
    with pytest.warns(zynml.compiler.ZynMLNote, match=r"<string>:2:9: note: the body of this "
                      r"'matmul' kernel is not a plain matrix product"):
        out = zynml.run(source, A=a, B=b)["C"]
    assert_close(out, 2 * a.astype(np.float64) @ b)


# Regressions: programs that once gave wrong results or failed (each was found by running
# the documentation's examples).

@pytest.mark.parametrize("loop,expected", [
    ("for i in 0..n step 2:", lambda x: x[0::2].sum()),
    ("for i in 1..n:", lambda x: x[1:].sum()),
    ("for i in 0..n - 1:", lambda x: x[:-1].sum()),
])
def test_reduction_loops_cover_only_their_range(rng, loop, expected):
    x = rng.standard_normal(11).astype(np.float32)
    out = zynml.run(f"let s = compute(x) {{\n    @kernel reduce(+)\n    {loop}\n"
                    "        yield x[i]\n}", x=x, n=11)["s"]
    # an f32 sum that cancels is good to its terms' scale, not to its own
    x64 = x.astype(np.float64)
    assert_close(out, expected(x64), floor=np.abs(x64).sum())


def test_elementwise_loop_shorter_than_its_input(rng):
    x = rng.standard_normal(5).astype(np.float32)
    out = zynml.run("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..3:\n"
                    "        out[i] = x[i] * 2.0\n}", x=x)["y"]
    assert_close(out, 2 * x[:3].astype(np.float64))


def test_loop_past_the_end_of_an_input_is_a_located_error():
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.run("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..7:\n"
                  "        out[i] = x[i] * 2.0\n}", x=np.ones(5, np.float32))
    assert str(info.value) == (
        "<string>:4:18: error: 'x' is read out of bounds: the index of dimension 0 runs "
        "from 0 to 6, but that dimension of 'x' has size 5\n"
        "        out[i] = x[i] * 2.0\n" + " " * 17 + "^")


DOUBLE = """
pipeline double(v: tensor[n]) -> tensor[n]:
    let y = compute(v) {
        @kernel elementwise
        for i in 0..n:
            out[i] = v[i] * 2.0
    }
    return y
"""


def test_script_calls_a_pipeline_and_returns_a_reshape(rng):
    x = rng.standard_normal(6).astype(np.float32)
    out = zynml.run(DOUBLE + "let z = double(a)\nlet r = reshape(z, [2, 3])\n", a=x)
    assert_close(out["z"], 2 * x.astype(np.float64))
    assert_close(out["r"], 2 * x.astype(np.float64).reshape(2, 3))


def test_integer_division_and_remainder_floor_like_python():
    x = np.array([-5, 5, -4, 7], np.int32)
    out = zynml.run("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n"
                    "        out[i] = (x[i] % 3) * 10 + x[i] / 2\n}", x=x)["y"]
    np.testing.assert_array_equal(out, (x % 3) * 10 + x // 2)


def test_unsigned_values_compare_unsigned_and_come_back_unsigned():
    x = np.array([1, 200, 7], np.uint8)
    out = zynml.run("let m = compute(x) {\n    @kernel reduce(max)\n    for i in 0..n:\n"
                    "        yield x[i]\n}\nlet y = compute(x) {\n    @kernel elementwise\n"
                    "    for i in 0..n:\n        out[i] = x[i]\n}", x=x)
    assert out["m"] == 200 and out["m"].dtype == np.uint8
    np.testing.assert_array_equal(out["y"], x)
    assert out["y"].dtype == np.uint8


def test_a_let_of_a_bare_name_is_an_error_not_ignored():
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.compile("let y = x\n")
    assert str(info.value).startswith("<string>:1:9: error: a top-level 'let' must bind")


# Program level: config, futures, memory.

ASYNC = """
config {
    compute_device: "cpu"
}
let future = compute(data) @async {
    @kernel reduce(+)
    for i in 0..n:
        yield data[i]
}
let result = await future
let futures = [
    compute(batch1) @async {
        @kernel elementwise
        for i in 0..n1:
            out[i] = batch1[i] * 2.0
    },
    compute(batch2) @async {
        @kernel elementwise
        for i in 0..n2:
            out[i] = batch2[i] + 1.0
    },
]
let results = await all(futures)
let (first, index) = await any(futures)
let bounded = await future timeout 1000ms else 0.0
"""


def test_async_await_all_any_timeout(rng):
    data = rng.standard_normal(7).astype(np.float32)
    b1, b2 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    out = zynml.run(ASYNC, data=data, batch1=b1, batch2=b2)
    assert set(out) == {"result", "results", "first", "index", "bounded"}  # futures aren't
    total = np.abs(data).sum()  # the sum's scale: where it cancels, only f32's error is left
    assert_close(out["result"], data.astype(np.float64).sum(), floor=total)
    assert_close(out["bounded"], data.astype(np.float64).sum(), floor=total)
    assert len(out["results"]) == 2
    assert_close(out["results"][0], 2 * b1.astype(np.float64))
    assert_close(out["results"][1], b2.astype(np.float64) + 1)
    # both completed at `await all`: any gives the first of the list
    assert_close(out["first"], 2 * b1.astype(np.float64))
    assert out["index"] == 0


MEMORY = """
let zeros = allocate(shape=[4, 3], dtype=float64, device="cpu")
let on_cpu = data.to_device("cpu")
let view = data.to_device("cpu", copy=false)
let pool = memory_pool(device="cpu", size=1MB)
let tensor1 = pool.allocate(shape=[512, 256])
let tensor2 = pool.allocate(shape=[256, 256])
pool.free(tensor1)
pool.reset()
let y = compute(on_cpu) {
    @kernel elementwise
    for i in 0..n:
        out[i] = on_cpu[i] + 1.0
}
"""


def test_memory_statements_on_the_cpu(rng):
    data = rng.standard_normal(5).astype(np.float32)
    out = zynml.run(MEMORY, data=data)
    assert out["zeros"].shape == (4, 3) and out["zeros"].dtype == np.float64
    assert not out["zeros"].any()
    np.testing.assert_array_equal(out["view"], data)
    assert out["tensor1"].shape == (512, 256)
    assert_close(out["y"], data.astype(np.float64) + 1)


@pytest.mark.parametrize("source,where,message", [
    ('let p = memory_pool(device="cpu", size=1KB)\nlet t = p.allocate(shape=[512])\n',
     "2:11", "pool 'p' (1024 bytes) cannot hold 2048 more bytes"),
    ('let p = memory_pool(device="cpu", size=1MB)\nlet t = p.allocate(shape=[4])\n'
     'p.free(t)\np.free(t)\n', "4:8", "'t' is not live in pool 'p'"),
    ('let g = data.to_device("cuda:0")\n', "1:24", "device 'cuda:0' is not available"),
    ('config {\n    compute_device: "metal:0"\n}\n', "2:21", "device 'metal:0' is not available"),
    ('let y = await x\n', "1:15", "'await' takes a future"),
])
def test_program_level_mistakes(source, where, message):
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.compile(source)
    assert str(info.value).startswith(f"<string>:{where}: error: {message}")


def test_two_dimensional_attention_with_dot_compiles_around_an_iree_crash(rng):
    """IREE 3.13's data tiling crashes on this contraction; ZynML compiles it without."""
    q, k = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    v = rng.standard_normal((5, 2)).astype(np.float32)
    source = """let o = compute(Q, K, V) {
    @kernel attention
    for i in 0..sq, d in 0..dv:
        var acc = 0.0
        for j in 0..sk:
            acc += dot(Q[i], K[j]) * V[j, d]
        out[i, d] = acc
}"""
    with pytest.warns(zynml.compiler.ZynMLNote, match="compiled without"):
        out = zynml.run(source, Q=q, K=k, V=v)["o"]
    assert_close(out, (q.astype(np.float64) @ k.T) @ v)


def test_a_pipeline_method_reuses_its_compiled_executable(rng, monkeypatch):
    prog = zynml.compile(DOUBLE)
    x = rng.standard_normal(7).astype(np.float32)
    assert_close(prog.double(x), 2 * x.astype(np.float64))
    builds = []
    monkeypatch.setattr(zynml.compiler, "to_cir", lambda *a: builds.append(a))
    assert_close(prog.double(x), 2 * x.astype(np.float64))  # same signature: no new build
    assert builds == []


def test_integer_var_with_a_guarded_max_returns_integers(rng):
    """`var best = -1000` is an i64 (not an index), so the result crosses to numpy."""
    x = rng.integers(-20, 20, 13).astype(np.int32)
    out = zynml.run("""let m = compute(x) {
    @kernel fused
    for r in 0..one:
        var best = -1000
        for i in 0..n:
            if x[i] < 5:
                best = max(best, x[i])
        out[r] = best
}""", x=x, one=1)["m"]
    assert out.dtype == np.int64
    assert out[0] == max([v for v in x if v < 5], default=-1000)


def test_scalar_arithmetic_on_whole_tensor_reductions(rng):
    """`reduce(max, x) - 1.0` in a fused block is a scalar (the fuzzer found it crashing)."""
    source = ("let probs = compute(logits) {\n    @kernel fused\n"
              "    let max_val = reduce(max, logits) - 1.0\n"
              "    let e = exp(logits - max_val)\n"
              "    out = e / reduce(+, e)\n}\n")
    x = rng.standard_normal((3, 7)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - (x.max() - 1.0))
    assert_close(zynml.run(source, logits=x)["probs"], e / e.sum())
