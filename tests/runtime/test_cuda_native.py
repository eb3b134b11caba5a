"""The native CUDA runtime on a GPU (marked `gpu`: CI skips these; they run on the device
machine): device arrays, zero-copy interop, saved artifacts, and programs against float64
numpy on fresh random inputs with poisoned allocations (conftest sets
ZYNML_CUDA_POISON=1)."""
import numpy as np
import pytest

import zynml
import conftest
from conftest import assert_close

pytestmark = pytest.mark.gpu

SOFTMAX = """
let row_max = compute(x) {
    @kernel reduce(max, axis=1)
    for i in 0..rows, j in 0..cols:
        yield x[i, j]
}
let probs = compute(x, row_max) {
    @kernel elementwise
    for i in 0..rows, j in 0..cols:
        out[i, j] = exp(x[i, j] - row_max[i])
}
"""


def test_device_array_round_trip(rng):
    from zynml.runtime.cuda.device_array import DeviceArray
    host = rng.standard_normal((7, 13)).astype(np.float32)
    array = DeviceArray.from_numpy(host)
    assert array.shape == (7, 13) and array.dtype == np.float32
    np.testing.assert_array_equal(array.numpy(), host)
    np.testing.assert_array_equal(np.asarray(array.to_device("cuda:0")), host)


def test_numpy_in_numpy_out(rng):
    x = rng.standard_normal((37, 129)).astype(np.float32)
    out = zynml.run(SOFTMAX, device="cuda:0", x=x)
    assert isinstance(out["probs"], np.ndarray)
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert_close(out["probs"], ref)
    assert_close(out["row_max"], x.max(axis=1))


def test_torch_tensors_in_device_arrays_out(rng):
    x = rng.standard_normal((5, 31)).astype(np.float32)
    zynml.compile(SOFTMAX, device="cuda:0").artifact(x=x)  # compile-only runs stop here
    torch = pytest.importorskip("torch")
    result = zynml.run(SOFTMAX, device="cuda:0", x=torch.from_numpy(x).cuda())
    probs = result["probs"]
    assert hasattr(probs, "__cuda_array_interface__")
    back = torch.as_tensor(probs, device="cuda")  # zero copy through the interface
    assert_close(back.cpu().numpy(), np.exp(x - x.max(axis=1, keepdims=True)))


def test_saved_artifact_runs_through_load(rng, tmp_path):
    prog = zynml.compile(SOFTMAX, device="cuda:0")
    x = rng.standard_normal((3, 17)).astype(np.float32)
    path = tmp_path / "softmax.zynart"
    prog.artifact(x=x).save(path)
    loaded = zynml.load(path)
    assert loaded.inputs == ["x"]
    out = loaded(x=x)
    assert_close(out["probs"], np.exp(x - x.max(axis=1, keepdims=True)))


def test_auto_picks_the_gpu():
    if conftest.COMPILE_ONLY:
        pytest.skip("compile-only: no GPU to pick")
    assert zynml.compile(SOFTMAX).device == "cuda:0"
    assert any(d["id"] == "cuda:0" and d["memory"] > 0 for d in zynml.compute_devices())
