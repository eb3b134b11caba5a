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


# ------------------------------------------------------------------ each strategy, at
# sizes that take it (the spec examples' small sizes stay pointwise)

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[1] \
    / "programs" / "examples"


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def run_example(name, **inputs):
    return zynml.compile(EXAMPLES / name, device="cuda:0")(**inputs)


@pytest.mark.parametrize("m,k,n", [(300, 200, 129), (128, 16, 128), (257, 31, 33)])
def test_matmul_strategy(rng, m, k, n):
    a, b = f32(rng, m, k), f32(rng, k, n)
    out = run_example("matmul.zyn", A=a, B=b)["C"]
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64))


def test_matmul_strategy_f16_inputs(rng):
    a, b = (f32(rng, 130, 70) * 0.5).astype(np.float16), (f32(rng, 70, 90)).astype(np.float16)
    out = run_example("matmul.zyn", A=a, B=b)["C"]
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)


@pytest.mark.parametrize("m,k,n", [(64, 16, 64), (192, 48, 320), (256, 32, 384),
                                   (128, 192, 256)])
def test_matmul_tensor_cores_f16(rng, m, k, n):
    """Sizes that tile exactly take the tensor cores (wmma, f32 accumulation): 64x64
    block tiles straight from global memory for the first two; 128x128 tiles staged in
    shared memory 32 wide (K = 32) and 64 wide (K = 192, three stages) for the others."""
    a, b = (f32(rng, m, k) * 0.5).astype(np.float16), f32(rng, k, n).astype(np.float16)
    out = run_example("matmul.zyn", A=a, B=b)["C"]
    assert out.dtype == np.float16
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)


def test_batched_matmul_tensor_cores_f16(rng):
    a, b = (f32(rng, 3, 64, 32) * 0.5).astype(np.float16), f32(rng, 3, 32, 128).astype(np.float16)
    out = run_example("batched_matmul.zyn", A=a, B=b)["C"]
    assert_close(out, np.einsum("bik,bkj->bij", a.astype(np.float64), b.astype(np.float64)),
                 rtol=1e-2)


def test_batched_matmul_strategy(rng):
    a, b = f32(rng, 3, 130, 70), f32(rng, 3, 70, 90)
    out = run_example("batched_matmul.zyn", A=a, B=b)["C"]
    assert_close(out, np.einsum("bik,bkj->bij", a.astype(np.float64), b.astype(np.float64)))


@pytest.mark.parametrize("rows,cols", [(37, 1000), (1, 4099), (5, 33)])
def test_row_reduce_strategy(rng, rows, cols):
    x = f32(rng, rows, cols)
    out = zynml.run(SOFTMAX, device="cuda:0", x=x)
    assert_close(out["row_max"], x.max(axis=1))
    assert_close(out["probs"], np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True)))


def test_layer_norm_rows(rng):
    x, gamma, beta = f32(rng, 33, 4097), f32(rng, 4097), f32(rng, 4097)
    out = run_example("layer_norm.zyn", x=x, gamma=gamma, beta=beta, eps=1e-5)["normalized"]
    v = x.astype(np.float64)
    mean = v.mean(axis=1, keepdims=True)
    ref = (v - mean) / np.sqrt(((v - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    assert_close(out, ref * gamma + beta, rtol=1e-4)


def test_elementwise_many_points_per_thread(rng):
    x = f32(rng, (1 << 20) + 3) * 3
    out = run_example("gelu.zyn", x=x)["activated"]
    v = x.astype(np.float64)
    assert_close(out, 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))))


def test_full_reduction(rng):
    data = f32(rng, 100003)
    assert_close(run_example("reduce_sum.zyn", data=data)["sum"], data.astype(np.float64).sum(),
                 rtol=1e-4)


def test_argmax_long(rng):
    data = f32(rng, 100003)
    out = run_example("argmax.zyn", data=data)
    assert int(np.asarray(next(iter(out.values())))) == int(np.argmax(data))


def test_memory_api_on_the_gpu(rng):
    a = zynml.allocate((7, 5), "float32", device="cuda:0")
    assert a.shape == (7, 5) and not np.asarray(a).any()
    host = zynml.allocate((7, 5), "float32")
    host[...] = rng.standard_normal((7, 5))
    on_gpu = host.to_device("cuda:0")
    np.testing.assert_array_equal(on_gpu.to_device("cpu"), host)
    pool = zynml.memory_pool("cuda:0", 1 << 20)
    x = pool.allocate((3, 17), "float32")
    y = pool.allocate((3, 17), "float32")
    assert y.ptr - x.ptr == 256 and pool.used == 512
    pinned = zynml.allocate((3, 17), "float32", pinned=True)
    pinned[...] = rng.standard_normal((3, 17))
    out = zynml.run(SOFTMAX, device="cuda:0", x=pinned.to_device("cuda:0"))
    assert_close(np.asarray(out["probs"]),
                 np.exp(pinned - pinned.max(axis=1, keepdims=True)).astype(np.float64))
    pool.free(x)
    pool.reset()
    assert pool.used == 0


DATA_PARALLEL = """
let y = compute(x, w) @device(["cuda:0", "cuda:1"]) @parallel(data) {
    @kernel elementwise
    for b in 0..batch, i in 0..n:
        out[b, i] = tanh(x[b, i]) * w[i]
}
"""


def test_data_parallel_over_two_gpus(rng):
    x, w = f32(rng, 8, 33), f32(rng, 33)
    one_gpu = zynml.compile(DATA_PARALLEL, require_device=False)._device_parts()[0]
    one_gpu.artifact(x=x[:4], w=w)  # each GPU's half (compile-only runs stop at the skip)
    one_gpu.artifact(x=x, w=w)      # the whole batch on one GPU
    if sum(d["id"].startswith("cuda:") for d in zynml.compute_devices()) < 2:
        pytest.skip("needs two GPUs (nvidia-h200-x2)")
    out = zynml.compile(DATA_PARALLEL)(x=x, w=w)["y"]
    assert_close(out, np.tanh(x.astype(np.float64)) * w)
    np.testing.assert_array_equal(out, np.asarray(one_gpu(x=x, w=w)["y"]))


def test_blocks_on_the_cpu_and_the_gpu_in_one_program(rng):
    from test_segments import THREE
    x = f32(rng, 37)
    prog = zynml.compile(THREE.replace("DEVICE", "cuda:0"), device="cpu",
                         require_device=False)
    cpu_a, gpu_b, cpu_c = prog._segments
    a = cpu_a(x=x)["a"]
    cpu_c(b=a + 1.0, x=x)  # compiled here before the GPU segment (compile-only stops there)
    b = gpu_b(a=a)["b"]
    assert_close(b, 2.0 * x.astype(np.float64) + 1.0)
    out = zynml.compile(THREE.replace("DEVICE", "cuda:0"), device="cpu")(x=x)
    assert_close(out["c"], (2.0 * x.astype(np.float64) + 1.0) * x)


def test_dlpack_export_to_torch(rng):
    torch = pytest.importorskip("torch")
    from zynml.runtime.cuda.device_array import DeviceArray
    host = f32(rng, 5, 7)
    array = DeviceArray.from_numpy(host)
    tensor = torch.from_dlpack(array)
    assert tensor.device.type == "cuda" and tuple(tensor.shape) == (5, 7)
    assert tensor.data_ptr() == array.ptr  # no copy
    np.testing.assert_array_equal(tensor.cpu().numpy(), host)
    del array  # the tensor keeps the memory alive
    np.testing.assert_array_equal(tensor.cpu().numpy(), host)


def test_memory_api_on_vulkan(rng):
    import zynml.memory as memory
    host = zynml.allocate((3, 17), "float32")
    host[...] = rng.standard_normal((3, 17))
    try:
        on_vulkan = host.to_device("vulkan:0")
    except Exception as err:  # no Vulkan loader on this machine (tools/gpu_tests.sh has it)
        pytest.skip(f"no Vulkan device: {err}")
    assert isinstance(on_vulkan, memory.IreeArray) and on_vulkan.shape == (3, 17)
    np.testing.assert_array_equal(on_vulkan.to_device("cpu"), host)
    zeros = zynml.allocate((4,), "float32", device="vulkan:0")
    assert not np.asarray(zeros).any()
    np.testing.assert_array_equal(np.asarray(on_vulkan.to_device("cuda:0")), host)


def test_memory_pool_on_vulkan():
    try:
        pool = zynml.memory_pool("vulkan:0", 4096)
        a = pool.allocate((100,), "float32")
    except Exception as err:  # no Vulkan loader on this machine (tools/gpu_tests.sh has it)
        pytest.skip(f"no Vulkan device: {err}")
    b = pool.allocate((10, 10), "float64")
    assert pool.used == 512 + 1024 and not np.asarray(a).any() and b.shape == (10, 10)
    pool.free(a)
    with pytest.raises(zynml.memory.PoolError):
        pool.free(a)
    with pytest.raises(zynml.memory.PoolError, match="cannot hold"):
        pool.allocate((4096,), "uint8")
    pool.reset()
    assert pool.used == 0
