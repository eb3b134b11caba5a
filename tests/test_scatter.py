"""Scatter-add, `x[ids[i], d] += v` of a `mut x` (docs/language.md §2): against numpy's
`np.add.at` in float64, with repeated ids, on the CPU (IREE's iree_linalg_ext.scatter)
and the interpreter; atomics in one CUDA kernel (compiled here; the `gpu` tests run it)."""
import re
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml.backend.iree.scatter import expand_scatters
from zynml.runtime.cuda.artifact import launches

EMBEDDING = Path(__file__).parent / "programs" / "training" / "embedding_backward.zyn"
DEVICES = ["cpu", "interpreter"]

TWO_INDICES = """compute(mut table, rows, cols, v) {
    @kernel scatter
    for b in 0..batch, s in 0..seq, e in 0..dim:
        table[rows[b, s], cols[b, s], e] += v[b, s, e] * 2.0
}
"""


def embedding_case(rng, vocab, tokens, dim, dtype=np.float32):
    ids = rng.integers(0, vocab, tokens)
    ids[: tokens // 2] = ids[0]  # many repeats of one id
    grad_out = rng.standard_normal((tokens, dim)).astype(dtype)
    grad_w = rng.standard_normal((vocab, dim)).astype(dtype)
    expected = grad_w.astype(np.float64)
    np.add.at(expected, ids, grad_out.astype(np.float64))
    return grad_w, ids, grad_out, expected


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("vocab,tokens,dim", [(1, 1, 1), (7, 13, 5), (50, 257, 3)])
def test_embedding_backward_adds_repeated_ids(rng, device, vocab, tokens, dim):
    grad_w, ids, grad_out, expected = embedding_case(rng, vocab, tokens, dim)
    out = zynml.run(EMBEDDING, device=device, grad_w=grad_w, ids=ids, grad_out=grad_out)
    assert out["grad_w"] is grad_w
    np.testing.assert_allclose(grad_w, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_int32_ids_and_f64_rows(rng, device):
    grad_w, ids, grad_out, expected = embedding_case(rng, 11, 31, 4, np.float64)
    zynml.run(EMBEDDING, device=device, grad_w=grad_w, ids=ids.astype(np.int32),
              grad_out=grad_out)
    np.testing.assert_allclose(grad_w, expected, rtol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_two_data_indices_and_two_batch_loops(rng, device):
    table = rng.standard_normal((4, 3, 6)).astype(np.float32)
    rows, cols = rng.integers(0, 4, (2, 5)), rng.integers(0, 3, (2, 5))
    v = rng.standard_normal((2, 5, 6)).astype(np.float32)
    expected = table.astype(np.float64)
    np.add.at(expected, (rows, cols), 2 * v.astype(np.float64))
    zynml.run(TWO_INDICES, device=device, table=table, rows=rows, cols=cols, v=v)
    np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-5)


def test_iree_gets_its_scatter_op():
    text = ('    %0 = call @__zynml_scatter_add_d1_0(%a, %b, %c) : (tensor<3x2xf32>, '
            'tensor<3x1xi64>, tensor<5x2xf32>) -> tensor<5x2xf32>\n'
            '  func.func private @__zynml_scatter_add_d1_0(tensor<3x2xf32>, tensor<3x1xi64>, '
            'tensor<5x2xf32>) -> tensor<5x2xf32> attributes {zynml.scatter}\n')
    expanded = expand_scatters(text)
    assert '%0 = "iree_linalg_ext.scatter"(%a, %b, %c) ({' in expanded
    assert "arith.addf" in expanded and "dimension_map = array<i64: 0>" in expanded
    assert "unique_indices = false" in expanded and "func.func private" not in expanded


# ---------------------------------------------------------------------------- CUDA

def test_embedding_backward_is_atomics_in_one_cuda_kernel(rng):
    """One kernel of atomics, after one that clamps the ids into grad_w (an id outside
    it must not write another buffer)."""
    grad_w, ids, grad_out, _ = embedding_case(rng, 7, 13, 5)
    prog = zynml.compile(EMBEDDING, device="cuda", require_device=False)
    artifact = prog.artifact(grad_w=grad_w, ids=ids, grad_out=grad_out)
    clamp, atomics = launches(artifact.plan["body"])
    assert clamp["args"][0] != "%in0" and "%in0" in atomics["args"]
    assert re.search(r"\b(?:red|atom)\.global\.add\.f32\b", artifact.ptx)
    # the atomics add into the caller's grad_w itself (no copy of it)
    assert artifact.plan["outputs"][0]["updates"] == 0
    table = zynml.compile(TWO_INDICES, device="cuda", require_device=False).artifact(
        table=np.zeros((4, 3, 6), np.float32), rows=np.zeros((2, 5), np.int64),
        cols=np.zeros((2, 5), np.int64), v=np.zeros((2, 5, 6), np.float32))
    assert re.search(r"\b(?:red|atom)\.global\.add\.f32\b", table.ptx)


@pytest.mark.parametrize("rows,dim", [(1, 4), (3, 8), (2, 67), (1001, 64)])
def test_a_scatter_kernel_adds_each_point_once(rows, dim):
    """The atomics run only in threads of a point: the vector and multi-point paths let
    idle threads run point 0's body and drop its stores, which for atomics added point
    0's value once per idle thread (the H100 showed 512x in a KV-cache row)."""
    prog = zynml.compile(EMBEDDING, device="cuda", require_device=False)
    gpu = prog.emit("gpu", {"grad_w": np.zeros((50, dim), np.float32),
                            "ids": np.zeros(rows, np.int64),
                            "grad_out": np.zeros((rows, dim), np.float32)})
    scatter = gpu[gpu.rindex("gpu.func"):]
    assert scatter.count("memref.atomic_rmw") == 1
    assert "arith.select" not in scatter and "vector.load" not in scatter
    guard = scatter.index("scf.if")
    assert guard < scatter.index("memref.atomic_rmw")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_embedding_backward_on_the_gpu(rng, kind):
    grad_w, ids, grad_out, expected = embedding_case(rng, 1001, 8191, 67)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        grad_w, ids, grad_out = (torch.from_numpy(a).cuda() for a in (grad_w, ids, grad_out))
    out = zynml.run(EMBEDDING, device="cuda:0", grad_w=grad_w, ids=ids, grad_out=grad_out)
    assert out["grad_w"] is grad_w
    got = grad_w.cpu().numpy() if kind == "torch" else grad_w
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


SCATTER_PIPELINE = """
pipeline add_rows(table: tensor[vocab, c], ids: tensor[batch, seq], grad: tensor[tokens, c]) -> tensor[vocab, c]:
    compute(mut table, ids, grad) {
        @kernel scatter
        for b in 0..batch, t in 0..seq, j in 0..c:
            table[ids[b, t], j] += grad[b * seq + t, j]
    }
    return table
"""


@pytest.mark.gpu
def test_a_pipeline_returning_its_scattered_mut_input_on_the_gpu(rng):
    """The form that gave a wrong row on an H100 (2026-11-26): a pipeline's `compute(mut
    x)` scatter-add, then `return x`, on GPU arrays, called twice (the second call takes
    the per-call fast path)."""
    from zynml.runtime.cuda.device_array import DeviceArray
    prog = zynml.compile(SCATTER_PIPELINE, device="cuda:0")
    prog.add_rows._program.artifact(table=np.ones((37, 67), np.float32),
                                    ids=np.ones((3, 41), np.int64),
                                    grad=np.ones((123, 67), np.float32))
    for _ in range(2):
        ids = rng.integers(0, 37, (3, 41))
        ids[0, :5] = ids[0, 0]
        grad = rng.standard_normal((3 * 41, 67)).astype(np.float32)
        table = rng.standard_normal((37, 67)).astype(np.float32)
        expected = table.astype(np.float64)
        np.add.at(expected, ids.ravel(), grad.astype(np.float64))
        out = prog.add_rows(*(DeviceArray.from_numpy(a) for a in (table, ids, grad)))
        np.testing.assert_allclose(np.asarray(out.numpy()), expected, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------- errors

@pytest.mark.parametrize("body,where,message", [
    ("grad_w[ids[t], d] = grad_out[t, d]", "6:9",
     "a write at an index read from data is a scatter and must accumulate: write "
     "grad_w[...] += value"),
    ("grad_w[ids[t], d] *= grad_out[t, d]", "6:9",
     "a write at an index read from data is a scatter and must accumulate"),
])
def test_scatter_errors_are_located(rng, body, where, message):
    source = EMBEDDING.read_text().replace("grad_w[ids[t], d] += grad_out[t, d]", body)
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(source)
    assert str(err.value).startswith(f"<string>:{where}: error: {message}")
