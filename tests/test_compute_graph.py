"""zynml.ComputeGraph (zynml/compute_graph.py): a decode layer as the spec's tensor
operations, replayed step after step with the input and the position written in place,
against float64 numpy; on the CPU here, on CUDA (one graph launch a step) under `gpu`."""
import numpy as np
import pytest

import conftest
import zynml
from conftest import assert_close
from zynml import OpParams, TensorOp

HEADS, KV_HEADS, D, DIM, FFN, POSITIONS = 2, 1, 4, 12, 7, 5


def rope_tables(positions, d, base=10000.0):
    angles = np.outer(np.arange(positions), base ** (-np.arange(0, d, 2) / d))
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def weights(rng):
    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    return dict(gamma=(1 + 0.1 * rng.standard_normal(DIM)).astype(np.float32),
                wq=w(DIM, HEADS * D), wk=w(DIM, KV_HEADS * D), wg=w(DIM, FFN),
                wu=w(DIM, FFN), wd=w(FFN, DIM))


def build(device, w, x, pos, cache, cos, sin):
    """A decode layer's nodes: norm, q and k with RoPE, k into the cache, SwiGLU MLP,
    residual, and a softmax of the result (to use every op kind)."""
    g = zynml.ComputeGraph(device)
    leaf = g.add_leaf(x)
    h = g.add_op(TensorOp.RMS_NORM, [leaf], OpParams(gamma=w["gamma"], scalar=1e-6))
    q = g.add_op(TensorOp.MUL_MAT, [h], OpParams(weight=w["wq"]))
    nodes = {"q": g.add_op(TensorOp.ROPE, [q], OpParams(cos=cos, sin=sin, int_param=pos))}
    k = g.add_op(TensorOp.MUL_MAT, [h], OpParams(weight=w["wk"]))
    k = g.add_op(TensorOp.ROPE, [k], OpParams(cos=cos, sin=sin, int_param=pos))
    g.add_op(TensorOp.COPY, [k], OpParams(target=cache, int_param=pos))
    gate = g.add_op(TensorOp.MUL_MAT, [h], OpParams(weight=w["wg"]))
    up = g.add_op(TensorOp.MUL_MAT, [h], OpParams(weight=w["wu"]))
    mixed = g.add_op(TensorOp.MUL, [g.add_op(TensorOp.SILU, [gate]), up])
    down = g.add_op(TensorOp.MUL_MAT, [mixed], OpParams(weight=w["wd"]))
    nodes["out"] = g.add_op(TensorOp.ADD, [leaf, down])
    nodes["probs"] = g.add_op(TensorOp.SOFT_MAX, [nodes["out"]])
    return g, nodes


def reference(w, x, pos, cos, sin):
    """(q, k, out, probs) of one step in float64."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    x = x.astype(np.float64)
    h = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * w["gamma"]

    def rope(v):
        heads = v.reshape(-1, D)
        turned = np.concatenate([-heads[:, D // 2:], heads[:, :D // 2]], axis=1)
        return (heads * cos[pos] + turned * sin[pos]).reshape(v.shape)
    gate, up = h @ w["wg"], h @ w["wu"]
    out = x + (gate / (1 + np.exp(-gate)) * up) @ w["wd"]
    probs = np.exp(out - out.max(axis=1, keepdims=True))
    return rope(h @ w["wq"]), rope(h @ w["wk"]), out, probs / probs.sum(axis=1, keepdims=True)


def steps(rng, device, upload, download):
    """Three replays of one graph: the input and the position change in place."""
    w = {k: upload(v) for k, v in weights(rng).items()}
    host_w = {k: download(v) for k, v in w.items()}
    cos, sin = rope_tables(POSITIONS, D)
    x = upload(rng.standard_normal((1, DIM)).astype(np.float32))
    pos = upload(np.array(0, np.int64))
    cache = upload(np.zeros((POSITIONS, KV_HEADS * D), np.float32))
    g, nodes = build(device, w, x, pos, cache, upload(cos), upload(sin))
    keys = []
    for step, position in enumerate((0, 1, 3)):
        x_now = rng.standard_normal((1, DIM)).astype(np.float32)
        yield g, x, pos, x_now, position
        g.replay()
        q, k, out, probs = reference(host_w, x_now, position, cos, sin)
        keys.append((position, k))
        assert_close(download(g.output(nodes["q"])), q, rtol=1e-4)
        assert_close(download(g.output(nodes["out"])), out, rtol=1e-4)
        assert_close(download(g.output(nodes["probs"])), probs, rtol=1e-4)
        want_cache = np.zeros((POSITIONS, KV_HEADS * D))
        for row, key in keys:
            want_cache[row] = key[0]
        assert_close(download(cache), want_cache, rtol=1e-4)
    assert g.n_leafs == 1 and g.n_ops == 13


def test_a_decode_layer_replayed_with_input_and_position_in_place(rng):
    for g, x, pos, x_now, position in steps(rng, "cpu", np.asarray, np.asarray):
        x[...] = x_now
        pos[...] = position


@pytest.mark.parametrize("op,inputs,params,message", [
    (TensorOp.ADD, [0], None, "Add takes 2 input nodes, got 1"),
    (TensorOp.MUL_MAT, [0], None, r"MulMat needs OpParams\(weight=...\)"),
    (TensorOp.ROPE, [0], OpParams(cos=np.ones((2, 4))), r"Rope needs OpParams\(sin=...\)"),
    (TensorOp.SILU, [1], None, r"input 1 of Silu is not an earlier node \(0..0\)"),
    (TensorOp.NONE, [0], None, "op must be a TensorOp other than NONE"),
    ("Add", [0], None, "op must be a TensorOp"),
])
def test_a_wrong_node_is_an_error_naming_it(op, inputs, params, message):
    g = zynml.ComputeGraph("cpu")
    g.add_leaf(np.ones((1, 4), np.float32))
    with pytest.raises(zynml.ZynMLError, match=message):
        g.add_op(op, inputs, params)


def test_errors_at_replay_name_the_node():
    g = zynml.ComputeGraph("cpu")
    with pytest.raises(zynml.ZynMLError, match="has no operation node"):
        g.replay()
    leaf = g.add_leaf(np.ones((1, 6), np.float32))
    cos = np.ones((3, 4), np.float32)
    g.add_op(TensorOp.ROPE, [leaf], OpParams(cos=cos, sin=cos, int_param=1))
    with pytest.raises(zynml.ZynMLError, match=r"node 1 \(Rope\): Rope: the row length 6 "
                                               r"is not a multiple of the tables' head dim 4"):
        g.replay()


@pytest.mark.gpu
def test_the_decode_layer_as_one_cuda_graph(rng):
    from zynml.runtime.cuda.device_array import DeviceArray
    if conftest.COMPILE_ONLY:  # every node's kernel compiled, values from the CPU
        from zynml.compile_only import DeviceScalar, cpu_values_cuda_artifacts

        def upload(a):  # a 0-d GPU array is read on the device, not passed by value
            return DeviceScalar(a) if a.ndim == 0 else a
        with cpu_values_cuda_artifacts():
            stand_in = zynml.Device("cpu")
            stand_in.name, stand_in.kind = "cuda:0", "cuda"
            for g, x, pos, x_now, position in steps(rng, stand_in, upload, np.asarray):
                g._run_nodes()
                break
        pytest.skip("compile-only: the graph's kernels are in the cache")
    for g, x, pos, x_now, position in steps(rng, "cuda:0", DeviceArray.from_numpy,
                                            lambda a: a.numpy()):
        x.copy_from(x_now)
        pos.copy_from(np.array(position, np.int64))
    assert g._graph is not None and g._graph.captures == 1
