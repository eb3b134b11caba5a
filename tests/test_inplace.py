"""In-place updates, `compute(mut x, ...)` (docs/language.md §2): the caller's array is
updated and returned, reads see the values from before the block, aliasing is an error at
the call; AdamW as one block over 10 steps against numpy float64, on the CPU (IREE) and
the interpreter; one CUDA kernel (compiled here; the `gpu` tests run it)."""
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.runtime.cuda.artifact import launches

ADAMW = Path(__file__).parent / "programs" / "training" / "adamw_inplace.zyn"
HYPER = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01)

ADD_ASSIGN = """compute(mut acc, x) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        acc[i, j] += x[i, j]
}
"""
ZERO = """compute(mut buf) {
    @kernel elementwise
    for i in 0..n:
        buf[i] = 0.0
}
"""
DEVICES = ["cpu", "interpreter"]


def adamw_reference(param, m, v, grads, lr, beta1, beta2, eps, wd):
    param, m, v = (np.asarray(a, np.float64) for a in (param, m, v))
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        update = (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps)
        param = param - lr * (update + wd * param)
    return param, m, v


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 37, 1009])
def test_adamw_in_place_over_ten_steps(rng, device, n):
    param = rng.standard_normal(n).astype(np.float32)
    m, v = np.zeros(n, np.float32), np.zeros(n, np.float32)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(10)]
    expected = adamw_reference(param, m, v, grads, **HYPER)
    prog = zynml.compile(ADAMW, device=device)
    assert prog.outputs == ["param", "m", "v"]
    buffers = (param, m, v)
    for t, grad in enumerate(grads, start=1):
        out = prog(param=param, grad=grad, m=m, v=v, bc1=1 - HYPER["beta1"] ** t,
                   bc2=1 - HYPER["beta2"] ** t, **HYPER)
        assert all(out[k] is b for k, b in zip(("param", "m", "v"), buffers))
    for got, want in zip(buffers, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_add_assign_and_zero_update_the_callers_arrays(rng, device):
    acc = rng.standard_normal((3, 5)).astype(np.float32)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    before = acc.astype(np.float64)
    out = zynml.run(ADD_ASSIGN, device=device, acc=acc, x=x)
    assert out["acc"] is acc
    np.testing.assert_allclose(acc, before + x, rtol=1e-6)
    buf = rng.standard_normal(7).astype(np.float32) + 3
    assert zynml.run(ZERO, device=device, buf=buf)["buf"] is buf
    np.testing.assert_array_equal(buf, np.zeros(7, np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_reads_see_the_values_before_the_block(rng, device):
    src = """compute(mut x) {
    @kernel elementwise
    for i in 0..n:
        x[i] = x[(i + 1) % n] * 2.0
}
"""
    x = rng.standard_normal(11).astype(np.float32)
    expected = np.roll(x, -1) * 2
    zynml.run(src, device=device, x=x)
    np.testing.assert_array_equal(x, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_elements_not_written_keep_their_values(rng, device):
    src = """compute(mut x) {
    @kernel elementwise
    for i in 0..half:
        x[2 * i + 1] = -1.0
}
"""
    x = rng.standard_normal(9).astype(np.float32)
    expected = x.copy()
    expected[1:9:2] = -1
    zynml.run(src, device=device, x=x, half=4)
    np.testing.assert_array_equal(x, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_later_blocks_read_the_new_values_and_outputs_mix(rng, device):
    src = """let old_sum = compute(acc, x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = acc[i] + x[i]
}
let doubled = compute(mut acc, x) {
    @kernel elementwise
    for i in 0..n:
        acc[i] += x[i]
        out[i] = 2.0 * x[i]
}
let total = compute(acc) {
    @kernel reduce(+)
    for i in 0..n:
        yield acc[i]
}
"""
    acc = rng.standard_normal(13).astype(np.float32)
    x = rng.standard_normal(13).astype(np.float32)
    new = acc.astype(np.float64) + x
    out = zynml.run(src, device=device, acc=acc, x=x)
    assert list(out) == ["old_sum", "doubled", "acc", "total"] and out["acc"] is acc
    np.testing.assert_allclose(out["old_sum"], new, rtol=1e-6)
    np.testing.assert_allclose(acc, new, rtol=1e-6)
    np.testing.assert_array_equal(out["doubled"], 2 * x)
    np.testing.assert_allclose(out["total"], new.sum(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- CUDA

@pytest.mark.parametrize("dynamic", [False, True])
def test_adamw_in_place_is_one_cuda_kernel(rng, dynamic):
    """With run-time sizes too: the outputs' buffers sized by `grad` (bound to the
    same size) and copied back into the inputs are the inputs themselves."""
    n = 101
    inputs = dict(param=rng.standard_normal(n).astype(np.float32),
                  grad=rng.standard_normal(n).astype(np.float32),
                  m=np.zeros(n, np.float32), v=np.zeros(n, np.float32), bc1=0.1, bc2=0.001,
                  **HYPER)
    artifact = zynml.compile(ADAMW, device="cuda", require_device=False,
                             dynamic=dynamic).artifact(**inputs)
    assert len(list(launches(artifact.plan["body"]))) == 1
    # written in the caller's buffers: each output is its input, marked `updates`
    assert [(o["value"], o.get("updates")) for o in artifact.plan["outputs"]] == \
        [("%in0", 0), ("%in2", 2), ("%in3", 3)]
    assert not [s for s in artifact.plan["body"] if s["op"] in ("alloc", "copy")]


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_scatter_adds_into_the_callers_array_on_cuda(rng, dynamic):
    """An embedding's gradient: the atomics add into grad_w where it is, no copy of the
    whole table first (a run-time size read off grad_w for the copy's buffer did not
    count as a use of the shape only)."""
    source = (Path(__file__).parent / "programs" / "training" /
              "embedding_backward.zyn").read_text()
    inputs = dict(grad_w=rng.standard_normal((11, 5)).astype(np.float32),
                  ids=rng.integers(0, 11, 7), grad_out=rng.standard_normal((7, 5)).astype(
                      np.float32))
    artifact = zynml.compile(source, device="cuda", require_device=False,
                             dynamic=dynamic).artifact(**inputs)
    assert [(o["value"], o.get("updates")) for o in artifact.plan["outputs"]] == \
        [("%in0", 0)]
    body = artifact.plan["body"]
    assert not [s for s in body if s["op"] == "copy"]
    assert not [s for s in body if s["op"] == "alloc" and s["dtype"] == "float32"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind,dynamic", [("numpy", False), ("torch", False),
                                          ("numpy", True)])
def test_adamw_in_place_on_the_gpu(rng, kind, dynamic):
    n = 100003
    param = rng.standard_normal(n).astype(np.float32)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(10)]
    m, v = np.zeros(n, np.float32), np.zeros(n, np.float32)
    expected = adamw_reference(param, m, v, grads, **HYPER)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        param, m, v = (torch.from_numpy(a).cuda() for a in (param, m, v))
        grads = [torch.from_numpy(g).cuda() for g in grads]
    buffers = (param, m, v)
    prog = zynml.compile(ADAMW, device="cuda:0", dynamic=dynamic)
    for t, grad in enumerate(grads, start=1):
        out = prog(param=param, grad=grad, m=m, v=v, bc1=1 - HYPER["beta1"] ** t,
                   bc2=1 - HYPER["beta2"] ** t, **HYPER)
        assert all(out[k] is b for k, b in zip(("param", "m", "v"), buffers))
    for got, want in zip(buffers, expected):
        got = got.cpu().numpy() if kind == "torch" else got
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------- errors

def _error(source, **inputs):
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(source, **inputs)
    return str(err.value)


def test_the_same_array_as_two_mutable_inputs_is_an_error():
    a = np.ones(4, np.float32)
    message = _error(ADAMW, param=a, grad=np.ones(4, np.float32), m=a,
                     v=np.ones(4, np.float32), bc1=0.1, bc2=0.1, **HYPER)
    assert message.startswith("tests/programs/training/adamw_inplace.zyn:3:13: error: inputs "
                              "'param' and 'm' share memory: 'param' is updated in place "
                              "('mut') and 'm' is updated in place too") or \
        ":3:13: error: inputs 'param' and 'm' share memory" in message


def test_a_view_read_by_the_program_is_an_error():
    buffer = np.ones(8, np.float32)
    message = _error(ADD_ASSIGN.replace("rows, j in 0..cols", "rows, j in 0..cols"),
                     acc=buffer[:4].reshape(2, 2), x=buffer[2:6].reshape(2, 2))
    assert message.startswith("<string>:1:13: error: inputs 'acc' and 'x' share memory: "
                              "'acc' is updated in place ('mut') and 'x' is read by the "
                              "program")


def test_a_mutable_input_must_be_a_writable_array():
    frozen = np.ones(3, np.float32)
    frozen.flags.writeable = False
    assert _error(ZERO, buf=frozen).startswith(
        "<string>:1:13: error: input 'buf' is updated in place ('mut'), so it must be a "
        "writable numpy array or a GPU array; got a read-only array")
    assert "got a list" in _error(ZERO, buf=[1.0, 2.0])


@pytest.mark.parametrize("source,where,message", [
    ("let y = compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n        x[i] = 1.0\n"
     "        out[i] = 1.0\n}\n",
     "4:9", "cannot write to input 'x' (mark it 'mut' in compute(...) to update it in place)"),
    ("let z = compute(mut x, y) {\n    @kernel elementwise\n    for i in 0..n:\n"
     "        out[i] = x[i] + y[i]\n}\n",
     "1:21", "'x' is marked 'mut' but never written; remove 'mut'"),
    ("compute(x) {\n    @kernel elementwise\n    for i in 0..n:\n        x[i] = 1.0\n}\n",
     "1:1", "bind the compute block's value with 'let name = compute(...)'"),
    ("let t = compute(mut x) {\n    @kernel reduce(+)\n    for i in 0..n:\n        yield x[i]\n}\n",
     "1:21", "a 'reduce' kernel cannot update an input in place"),
    ("compute(mut x) {\n    @kernel elementwise\n    for i in 0..n:\n        out[i] = 1.0\n"
     "        x[i] = 0.0\n}\n",
     "4:9", "this block is not bound by a 'let', so it has no 'out'"),
])
def test_errors_are_located(source, where, message):
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(source, x=np.ones(3, np.float32), y=np.ones(3, np.float32), s=1.0)
    assert str(err.value).startswith(f"<string>:{where}: error: {message}"), str(err.value)


@pytest.mark.parametrize("device", DEVICES)
def test_a_partial_update_beside_another_output(rng, device):
    src = """let y = compute(mut x) {
    @kernel elementwise
    for i in 0..3:
        x[i] = x[i] * 3.0
        out[i] = x[i]
}
"""
    x = rng.standard_normal(5).astype(np.float32)
    before = x.copy()
    out = zynml.run(src, device=device, x=x)
    np.testing.assert_array_equal(out["y"], before[:3])  # reads see the old values
    np.testing.assert_array_equal(x, np.concatenate([before[:3] * 3, before[3:]]))


NESTED = """
pipeline accumulate(x: tensor[n], acc: tensor[n]) -> tensor[n]:
    compute(x, mut acc) {
        @kernel elementwise
        for i in 0..n:
            acc[i] = acc[i] + 2.0 * x[i]
    }
    return acc

pipeline outer(x: tensor[n], acc: tensor[n]) -> tensor[n]:
    let updated = accumulate(x, acc)
    return updated
"""


@pytest.mark.parametrize("device", DEVICES)
def test_a_parameter_handed_to_another_pipelines_mut_is_updated_in_a_new_buffer(
        rng, device):
    """docs/language.md: the outer pipeline gets the new values as the call's result;
    its caller's array keeps its own, since the outer pipeline's parameter is not `mut`
    (while `accumulate`, called by the program, updates its caller's array)."""
    x = rng.standard_normal(37).astype(np.float32)
    acc = rng.standard_normal(37).astype(np.float32)
    before = acc.copy()
    prog = zynml.compile(NESTED, device=device)
    out = prog.outer(x=x, acc=acc)
    np.testing.assert_allclose(np.asarray(out), before + 2 * x.astype(np.float64),
                               rtol=1e-6)
    np.testing.assert_array_equal(acc, before)
    prog.accumulate(x=x, acc=acc)
    np.testing.assert_allclose(acc, before + 2 * x.astype(np.float64), rtol=1e-6)


SHADOWED = """pipeline doubled(x: tensor[n], y: tensor[n]) -> tensor[n]:
    let x = compute(y) {
        @kernel elementwise
        for i in 0..n:
            out[i] = y[i] * 2.0
    }
    return x
"""
WRITTEN_WHOLE = """pipeline sum_into(parts: tensor[count, n], total: tensor[n]) -> tensor[n]:
    compute(parts, mut total) {
        @kernel fused
        for c in 0..n:
            var acc: f32 = 0.0
            for p in 0..count:
                acc += parts[p, c]
            total[c] = acc
    }
    return total
"""


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_output_named_like_an_input_it_does_not_update_is_a_new_array(rng, dynamic):
    """`let x = ...` over a parameter x: the result is a new array, the caller's x keeps
    its values, on the CPU and on CUDA (whose plan once wrote the caller's x: it took an
    output named like an input for that input's update)."""
    x, y = (rng.standard_normal(37).astype(np.float32) for _ in range(2))
    before = x.copy()
    out = zynml.compile(SHADOWED, device="cpu").doubled(x=x, y=y)
    np.testing.assert_allclose(np.asarray(out), 2 * y.astype(np.float64), rtol=1e-6)
    np.testing.assert_array_equal(x, before)
    artifact = zynml.compile(SHADOWED, device="cuda", require_device=False,
                             dynamic=dynamic).pipeline("doubled").artifact(x=x, y=y)
    assert [o.get("updates") for o in artifact.plan["outputs"]] == [None]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("count, n", [(1, 1), (3, 37), (64, 101)])
def test_an_input_written_whole_without_being_read(rng, device, count, n):
    parts = rng.standard_normal((count, n)).astype(np.float32)
    total = rng.standard_normal(n).astype(np.float32)
    out = zynml.compile(WRITTEN_WHOLE, device=device).sum_into(parts=parts, total=total)
    assert out is total
    np.testing.assert_allclose(total, parts.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_input_written_whole_is_written_where_it_is_on_cuda(rng, dynamic):
    """Nothing reads `total`'s values, so whatever kernel writes the output (here a sum
    over `count`, no elementwise update) may write the caller's array: no buffer of its
    own, no copy."""
    artifact = zynml.compile(WRITTEN_WHOLE, device="cuda", require_device=False,
                             dynamic=dynamic).pipeline("sum_into").artifact(
        parts=rng.standard_normal((5, 37)).astype(np.float32),
        total=np.zeros(37, np.float32))
    assert [(o["value"], o.get("updates")) for o in artifact.plan["outputs"]] == \
        [("%in1", 1)]
    assert not [s for s in artifact.plan["body"] if s["op"] in ("alloc", "copy")]
