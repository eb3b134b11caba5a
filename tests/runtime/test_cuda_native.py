"""The native CUDA runtime on a GPU (marked `gpu`: CI skips these; they run on the device
machine): device arrays, zero-copy interop, saved artifacts, and programs against float64
numpy on fresh random inputs with poisoned allocations (conftest sets
ZYNML_CUDA_POISON=1)."""
from functools import partial

import numpy as np
import pytest

import zynml
import conftest
from conftest import assert_close, torch_unaligned

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


def test_a_loaded_artifact_gives_bool_scalars_as_bools(rng, tmp_path):
    prog = zynml.compile("let found = compute(x) {\n    @kernel reduce(or)\n"
                         "    for i in 0..n:\n        yield x[i] > 2.5\n}\n", device="cuda:0")
    x = rng.standard_normal(37).astype(np.float32)
    path = tmp_path / "any.zynart"
    prog.artifact(x=x).save(path)
    for data in (x, x + 3.0):
        found = zynml.load(path)(x=data)["found"]
        assert isinstance(found, np.bool_) and found == bool((data > 2.5).any())
        assert found == prog(x=data)["found"]


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


def torch_host(torch, result):
    return torch.as_tensor(result, device="cuda").cpu().numpy()


def run_example(name, target=None, params="", **inputs):
    return zynml.compile(EXAMPLES / name, device="cuda:0", target=target,
                         params=params)(**inputs)


@pytest.mark.parametrize("m,k,n", [(300, 200, 129), (128, 16, 128), (257, 31, 33)])
def test_matmul_strategy(rng, m, k, n):
    a, b = f32(rng, m, k), f32(rng, k, n)
    out = run_example("matmul.zyn", A=a, B=b)["C"]
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64))


# simt_gemm at odd sizes: one row or column, partial tiles of C both ways, K not a
# multiple of the stage (BK) nor of 4 (A element by element), N a multiple of 4 or not
# (B 16 bytes at a time or element by element)
@pytest.mark.parametrize("m,k,n", [(1, 20, 4097), (7, 300, 1024), (129, 257, 300),
                                   (257, 100, 260), (300, 17, 257), (1000, 33, 7),
                                   (129, 64, 300), (4100, 16, 1)])
def test_matmul_strategy_odd_sizes(rng, m, k, n):
    a, b = f32(rng, m, k), f32(rng, k, n)
    out = run_example("matmul.zyn", A=a, B=b)["C"]
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64))


def test_batched_matmul_strategy_16_byte_reads(rng):
    """K and N multiples of 4: both operands read 16 bytes at a time, partial tiles."""
    a, b = f32(rng, 2, 129, 68), f32(rng, 2, 68, 132)
    out = run_example("batched_matmul.zyn", A=a, B=b)["C"]
    assert_close(out, np.einsum("bik,bkj->bij", a.astype(np.float64), b.astype(np.float64)))


def test_matmul_strategy_from_unaligned_torch_views(rng):
    """f32 operands 4 bytes past a 16-byte boundary: copied before the 16-byte reads."""
    a, b = f32(rng, 130, 68), f32(rng, 68, 132)
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda:0")
    prog.artifact(A=a, B=b)  # compile-only runs stop at the skip below
    if conftest.COMPILE_ONLY:
        pytest.skip("compile-only: no GPU for torch")
    torch = pytest.importorskip("torch")
    out = prog(A=torch_unaligned(torch, a), B=torch_unaligned(torch, b))["C"]
    assert_close(torch_host(torch, out), a.astype(np.float64) @ b.astype(np.float64))


# Other Params of matmul, chosen through `params` (part of the artifact cache key)
@pytest.mark.parametrize("params,m,k,n", [
    (dict(tile_k=16), 131, 52, 260),
    (dict(warp_m=4), 133, 44, 264),
    (dict(tile_k=16, warp_m=8), 135, 37, 201),
    (dict(tile_n=64), 137, 48, 140),
    (dict(tile_m=64), 139, 56, 204),
    (dict(tile_n=64, tile_k=16), 141, 61, 67),
    (dict(vector_loads=False), 143, 64, 268),
])
def test_matmul_strategy_other_params(rng, params, m, k, n):
    a, b = f32(rng, m, k), f32(rng, k, n)
    out = run_example("matmul.zyn", params={"matmul": params}, A=a, B=b)["C"]
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
    shared memory 32 wide (K = 32) and 64 wide (K = 192, three stages) for the others.
    Compiled for sm_90 (no wgmma there), so sm_90a's matmul_wgmma does not take them."""
    a, b = (f32(rng, m, k) * 0.5).astype(np.float16), f32(rng, k, n).astype(np.float16)
    out = run_example("matmul.zyn", target="sm_90", A=a, B=b)["C"]
    assert out.dtype == np.float16
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)


@pytest.mark.parametrize("m,k,n", [(128, 64, 256), (256, 192, 128), (384, 448, 512),
                                   (128, 1024, 384), (384, 1088, 512), (1280, 256, 1920),
                                   (4096, 4096, 4096)])
def test_matmul_wgmma_f16(rng, m, k, n):
    """sm_90a: TMA copies into a ring of 4 stages, wgmma m64n256, m64n192 or m64n128 per
    warpgroup (the width gemm_waves' model picks); K of 1 to 17 steps of 64 (fewer steps
    than stages, too). The kernel is persistent (at most 132 blocks): 1280x1920 is 100
    tiles of 128x192 (the raster's last group has 2 of its 8 tile rows), 4096^3 is 512
    tiles of 128x256 (some blocks take four)."""
    a, b = (f32(rng, m, k) * 0.5).astype(np.float16), f32(rng, k, n).astype(np.float16)
    out = run_example("matmul.zyn", A=a, B=b)["C"]
    assert out.dtype == np.float16
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)


@pytest.mark.parametrize("params,m,k,n", [({"persistent": False}, 384, 320, 768),
                                           ({"tile_n": 192}, 1152, 1472, 576),
                                           ({"tile_n": 192, "persistent": False}, 256, 64, 960),
                                           ({"warpgroups": 3, "tile_n": 192, "stages": 3},
                                            576, 1088, 960),
                                           ({"warpgroups": 4, "tile_n": 128, "stages": 3},
                                            768, 320, 640)])
def test_matmul_wgmma_other_params(rng, params, m, k, n):
    """One block per tile (not persistent: the same kernel, its loop runs once); tiles
    192 wide wherever N allows (m64n192: three 64-column boxes of B and of C); 192 x 192
    tiles of three multiplying warpgroups (152 registers each: with 232, as two take,
    their setmaxnreg waited forever and the kernel hung); 256 x 128 tiles of four (104
    each: the 112 of a quarter's 512 registers hung too, the block having been launched
    with 480)."""
    a, b = (f32(rng, m, k) * 0.5).astype(np.float16), f32(rng, k, n).astype(np.float16)
    out = run_example("matmul.zyn", params={"matmul_wgmma": params}, A=a, B=b)["C"]
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)


MATMUL_FROM = """
let C = compute(A, B, bias) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = START
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
"""


@pytest.mark.parametrize("m,k,n", [(128, 192, 384), (1280, 128, 3072)])
@pytest.mark.parametrize("start,expected_init", [("1.5", lambda bias: 1.5),
                                                 ("bias[j]", lambda bias: bias[None, :])])
def test_matmul_wgmma_starts_from_a_constant_or_a_tensor(rng, start, expected_init, m, k, n):
    """A constant start folds into the kernel (fill and product are one); a tensor one
    is read back in the epilogue (1280x3072: 120 tiles of 128x256, a persistent grid of
    120 blocks)."""
    a, b = (f32(rng, m, k) * 0.5).astype(np.float16), f32(rng, k, n).astype(np.float16)
    bias = f32(rng, n).astype(np.float16)
    prog = zynml.compile(MATMUL_FROM.replace("START", start), device="cuda:0")
    out = prog(A=a, B=b, bias=bias)["C"]
    expected = expected_init(bias.astype(np.float64)) + a.astype(np.float64) @ b.astype(np.float64)
    assert_close(out, expected, rtol=1e-2)


def test_matmul_wgmma_takes_torch_views_off_16_bytes(rng):
    """TMA needs 16-byte aligned rows: a view 2 bytes in is copied before the launch."""
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda:0")
    a, b = (f32(rng, 128, 64) * 0.5).astype(np.float16), f32(rng, 64, 256).astype(np.float16)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    assert_close(prog(A=a, B=b)["C"], expected, rtol=1e-2)  # compiles (compile-only stops)
    torch = pytest.importorskip("torch")
    base = torch.empty(a.size + 1, dtype=torch.float16, device="cuda")
    view = base[1:].view(128, 64)
    view.copy_(torch.from_numpy(a))
    assert view.data_ptr() % 16
    out = prog(A=view, B=torch.from_numpy(b).cuda())["C"]
    assert_close(out.numpy(), expected, rtol=1e-2)


@pytest.mark.parametrize("m,k,n", [(256, 320, 512), (384, 1088, 512), (4096, 4096, 4096)])
def test_matmul_wgmma_bf16(rng, m, k, n):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = (f32(rng, m, k) * 0.5).astype(ml_dtypes.bfloat16)
    b = f32(rng, k, n).astype(ml_dtypes.bfloat16)
    out = run_example("matmul.zyn", A=a, B=b)["C"]
    assert out.dtype == ml_dtypes.bfloat16
    assert_close(out.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64),
                 rtol=1e-2)


def test_matmul_wgmma_reads_torch_tensors_and_new_buffers(rng):
    """Descriptors are per buffer address: calls on other buffers (and on views that
    start elsewhere) must read those, not the first call's."""
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda:0")
    a = (f32(rng, 256, 128) * 0.5).astype(np.float16)
    b = f32(rng, 128, 256).astype(np.float16)
    out = prog(A=a, B=b)["C"]  # numpy in: compiles (where compile-only runs stop)
    assert_close(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)
    torch = pytest.importorskip("torch")
    for _ in range(3):
        a = (f32(rng, 256, 128) * 0.5).astype(np.float16)
        b = f32(rng, 128, 256).astype(np.float16)
        out = prog(A=torch.from_numpy(a).cuda(), B=torch.from_numpy(b).cuda())["C"]
        assert_close(out.numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)


def test_batched_matmul_tensor_cores_f16(rng):
    a, b = (f32(rng, 3, 64, 32) * 0.5).astype(np.float16), f32(rng, 3, 32, 128).astype(np.float16)
    out = run_example("batched_matmul.zyn", A=a, B=b)["C"]
    assert_close(out, np.einsum("bik,bkj->bij", a.astype(np.float64), b.astype(np.float64)),
                 rtol=1e-2)


def test_batched_matmul_strategy(rng):
    a, b = f32(rng, 3, 130, 70), f32(rng, 3, 70, 90)
    out = run_example("batched_matmul.zyn", A=a, B=b)["C"]
    assert_close(out, np.einsum("bik,bkj->bij", a.astype(np.float64), b.astype(np.float64)))


# Convolutions as an implicit GEMM (zynml/backend/cuda/strategies/implicit_gemm.py) at odd sizes:
# partial tiles of C in both directions, one to 130 output channels, 1x1 / 3x3 / 5x5
# kernels, strides 1 and 2, padding 0 and 1, every tile configuration; the smallest one
# and the one with a single output channel (a matrix-vector product) stay with others.
def conv2d_program(stride, padding, params=""):
    source = (EXAMPLES / "conv2d.zyn").read_text()
    return zynml.compile(source.replace("let stride = 1", f"let stride = {stride}")
                         .replace("let padding = 1", f"let padding = {padding}"),
                         device="cuda:0", params=params)


def implicit_gemm_taken(prog, strategy="implicit_gemm", **inputs):
    from zynml.runtime.cuda.artifact import launches
    kernels = [s["kernel"] for s in launches(prog.artifact(**inputs).plan["body"])]
    return any(n.endswith(f"_{strategy}") for n in kernels)


@pytest.mark.parametrize("batch,in_ch,out_ch,size,k,stride,padding,gemm", [
    (1, 1, 64, 13, 3, 1, 1, True),    # 64x64 tiles, 169 columns
    (3, 3, 5, 13, 3, 1, 1, True),     # 32x128 tiles, 5 of 32 rows
    (1, 5, 3, 56, 5, 2, 1, True),     # 5x5, stride 2
    (3, 64, 64, 7, 1, 1, 0, True),    # 1x1
    (3, 64, 64, 56, 3, 1, 1, True),   # K = 576
    (1, 5, 128, 16, 3, 1, 1, True),   # 128x128 tiles
    (2, 3, 64, 16, 3, 1, 1, True),    # 64x128 tiles
    (3, 5, 1, 56, 3, 2, 0, False),    # one output channel: its loop folds away, no N
    (1, 3, 130, 13, 3, 2, 0, True),   # 130 rows: a partial third tile
    (1, 1, 1, 7, 3, 1, 1, False),     # 49 points: not worth a GEMM
    # in_ch a multiple of BK: k runs (kh, kw, ic), a stage's k share kh and kw
    (2, 16, 24, 11, 3, 1, 1, True),   # K = 144, 24 of 64 rows
    (1, 32, 65, 13, 5, 2, 0, True),   # 5x5, stride 2, 65 rows
    (3, 48, 7, 9, 3, 1, 1, True),     # three stages a (kh, kw)
])
def test_conv2d_implicit_gemm(rng, batch, in_ch, out_ch, size, k, stride, padding, gemm):
    out_size = (size + 2 * padding - k) // stride + 1
    x, kernel, bias = (f32(rng, batch, in_ch, size, size), f32(rng, out_ch, in_ch, k, k),
                       f32(rng, out_ch))
    inputs = dict(input=x, kernel=kernel, bias=bias, in_h=size, in_w=size, out_h=out_size,
                  out_w=out_size)
    prog = conv2d_program(stride, padding)
    assert implicit_gemm_taken(prog, **inputs) == gemm
    out = prog(**inputs)["output"]
    assert_close(out, conftest.conv2d_reference(x, kernel, bias, stride, padding))


@pytest.mark.parametrize("params,batch,in_ch,out_ch,size,k,stride,padding", [
    (dict(tile_m=64, tile_n=128, tile_k=16, thread_m=4, thread_n=8), 2, 7, 67, 15, 3, 1, 1),
    (dict(tile_m=64, tile_n=128, tile_k=8, thread_m=8, thread_n=8), 2, 7, 66, 17, 3, 1, 1),
    (dict(tile_m=64, tile_n=256, tile_k=8, thread_m=8, thread_n=8), 3, 5, 65, 19, 3, 2, 0),
    (dict(tile_m=64, tile_n=256, tile_k=16, thread_m=8, thread_n=8), 1, 9, 63, 21, 3, 1, 1),
    (dict(tile_m=64, tile_n=128, tile_k=8, thread_m=4, thread_n=8, warp_m=8),
     2, 6, 62, 23, 3, 1, 1),
    (dict(tile_m=64, tile_n=128, tile_k=16, thread_m=8, thread_n=8), 2, 3, 61, 25, 5, 1, 1),
    (dict(tile_m=64, tile_n=128, tile_k=8, thread_m=4, thread_n=8), 2, 8, 67, 15, 3, 1, 1),
    (dict(tile_m=64, tile_n=256, tile_k=8, thread_m=8, thread_n=8), 1, 24, 33, 19, 3, 2, 1),
])
def test_conv2d_implicit_gemm_other_params(rng, params, batch, in_ch, out_ch,
                                           size, k, stride, padding):
    """implicit_gemm with the tile set through `params`."""
    out_size = (size + 2 * padding - k) // stride + 1
    x, kernel, bias = (f32(rng, batch, in_ch, size, size), f32(rng, out_ch, in_ch, k, k),
                       f32(rng, out_ch))
    inputs = dict(input=x, kernel=kernel, bias=bias, in_h=size, in_w=size, out_h=out_size,
                  out_w=out_size)
    prog = conv2d_program(stride, padding, params={"implicit_gemm": params})
    assert implicit_gemm_taken(prog, **inputs)
    assert_close(prog(**inputs)["output"],
                 conftest.conv2d_reference(x, kernel, bias, stride, padding))


def test_conv2d_implicit_gemm_f16(rng):
    """f16 input, kernel and bias: f32 sums on tensor cores, rounded once (more in
    tests/backend/test_cuda_implicit_gemm_mma.py)."""
    x, kernel, bias = (f32(rng, 2, 8, 15, 15).astype(np.float16),
                       (f32(rng, 24, 8, 3, 3) * 0.5).astype(np.float16),
                       f32(rng, 24).astype(np.float16))
    inputs = dict(input=x, kernel=kernel, bias=bias, in_h=15, in_w=15, out_h=15, out_w=15)
    prog = conv2d_program(1, 1)
    assert implicit_gemm_taken(prog, "implicit_gemm_mma", **inputs)
    out = prog(**inputs)["output"]
    assert out.dtype == np.float16
    assert_close(out, conftest.conv2d_reference(x, kernel, bias, 1, 1), rtol=1e-2)


def test_projection_is_a_matmul(rng):
    """x[b, s, i] @ w[i, h] (two loops on A's rows): the rows collapse into one, M = b * s
    (shared_weight_matmul.py, collapse-matmul-rows), and the matmul strategy takes it."""
    from zynml.runtime.cuda.artifact import launches
    x, w = f32(rng, 3, 37, 40), f32(rng, 40, 120)
    prog = zynml.compile(EXAMPLES / "transformer_qkv_proj.zyn", device="cuda:0")
    kernels = [s["kernel"] for s in launches(prog.artifact(x=x, qkv_proj=w).plan["body"])]
    assert kernels[-1].endswith("_matmul"), kernels  # after the output's zero fill
    assert_close(prog(x=x, qkv_proj=w)["qkv"],
                 np.einsum("bsi,ih->bsh", x.astype(np.float64), w.astype(np.float64)))


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


# ------------------------------------------------------------------ rows in registers
# row_fused keeps a row in its threads' registers (zynml/backend/cuda/strategies/row_registers.py):
# each input row read once, the softmax's exp values never stored. Rows of 1 and 7 stay
# pointwise; 2048 takes 16-byte loads; 4099 a column at a time, the last chunk guarded.

SOFTMAX_PIPELINE = (EXAMPLES.parent / "softmax_pipeline.zyn").read_text()
ROWS, COLS = (1, 3, 333), (1, 7, 2048, 4099)


def softmax_ref(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm_ref(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("cols", COLS)
def test_softmax_rows_in_registers(rng, rows, cols):
    x = f32(rng, rows, cols) * 3
    probs = zynml.compile(SOFTMAX_PIPELINE, device="cuda:0").softmax(x=x)
    assert_close(np.asarray(probs), softmax_ref(x.astype(np.float64)))


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("cols", COLS)
def test_layer_norm_rows_in_registers(rng, rows, cols):
    x, gamma, beta = f32(rng, rows, cols), f32(rng, cols), f32(rng, cols)
    out = run_example("layer_norm.zyn", x=x, gamma=gamma, beta=beta, eps=1e-5)["normalized"]
    assert_close(out, layer_norm_ref(x.astype(np.float64), gamma, beta, 1e-5))


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("cols", COLS)
def test_residual_layer_norm_rows_in_registers(rng, rows, cols):
    x, projected = f32(rng, 1, rows, cols), f32(rng, 1, rows, cols)
    weight, bias = f32(rng, cols), f32(rng, cols)
    out = run_example("transformer_residual_layernorm.zyn", x=x, projected=projected,
                      ln_weight=weight, ln_bias=bias)["normed"]
    assert_close(out, layer_norm_ref(x.astype(np.float64) + projected, weight, bias, 1e-6))


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("cols", (7, 4099))
def test_bias_residual_layer_norm_chain(rng, rows, cols):
    """BERT's FFN output epilogue, layernorm(x + bias + residual) * gamma + beta, as one
    row_fused kernel (benchmarked in benchmarks/gpu_vs_torch.py)."""
    x, residual = f32(rng, 1, rows, cols), f32(rng, 1, rows, cols)
    bias, weight, ln_bias = f32(rng, cols), f32(rng, cols), f32(rng, cols)
    prog = zynml.compile(EXAMPLES.parent / "bias_residual_layernorm.zyn", device="cuda:0")
    out = prog(x=x, bias=bias, residual=residual, ln_weight=weight, ln_bias=ln_bias)["normed"]
    h = x.astype(np.float64) + bias + residual
    assert_close(out, layer_norm_ref(h, weight, ln_bias, 1e-12), rtol=1e-4)


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("cols", (7, 4099))
def test_bias_gelu_chain(rng, rows, cols):
    """The FFN's bias + GELU (tanh form) as one pointwise kernel."""
    x, bias = f32(rng, 1, rows, cols) * 3, f32(rng, cols)
    prog = zynml.compile(EXAMPLES.parent / "bias_gelu.zyn", device="cuda:0")
    out = prog(x=x, bias=bias)["activated"]
    v = x.astype(np.float64) + bias
    ref = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
    assert_close(out, ref)


@pytest.mark.parametrize("cols", [100, 2048])
def test_rows_in_registers_from_unaligned_torch_views(rng, cols):
    """Inputs 4 bytes past a 16-byte boundary: the kernels check at run time and read
    them a column at a time instead of 16 bytes at a time."""
    x, gamma, beta = f32(rng, 333, cols), f32(rng, cols), f32(rng, cols)
    softmax = zynml.compile(SOFTMAX_PIPELINE, device="cuda:0").softmax
    layer_norm = zynml.compile(EXAMPLES / "layer_norm.zyn", device="cuda:0")
    softmax._program.artifact(x=x)  # compile-only runs stop at the skip below
    layer_norm.artifact(x=x, gamma=gamma, beta=beta, eps=1e-5)
    if conftest.COMPILE_ONLY:
        pytest.skip("compile-only: no GPU for torch")
    torch = pytest.importorskip("torch")
    unaligned, host = partial(torch_unaligned, torch), partial(torch_host, torch)

    probs = softmax(x=unaligned(x))
    assert_close(host(probs), softmax_ref(x.astype(np.float64)))
    out = layer_norm(x=unaligned(x), gamma=unaligned(gamma), beta=unaligned(beta), eps=1e-5)
    assert_close(host(out["normalized"]), layer_norm_ref(x.astype(np.float64), gamma, beta, 1e-5))


def test_elementwise_many_points_per_thread(rng):
    x = f32(rng, (1 << 20) + 3) * 3
    out = run_example("gelu.zyn", x=x)["activated"]
    v = x.astype(np.float64)
    assert_close(out, 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))))


def gelu_ref(v):
    return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))


# pointwise's vector path (zynml/backend/cuda/strategies/pointwise.py): chunks of 4 f32, 16 bytes
# a load and a store; 1, 3 and 4097 take the scalar kernels; 4 * 8191 and 4 * 1000003
# (a prime count of chunks) leave the last block's last chunks out of range.
@pytest.mark.parametrize("n", [1, 3, 4, 4097, 4100, 4 * 8191, 1 << 20, (1 << 20) + 4,
                               4 * 1000003])
def test_elementwise_16_bytes_at_a_time(rng, n):
    x = f32(rng, n) * 3
    out = run_example("gelu.zyn", x=x)["activated"]
    # floor: GELU of x << 0 cancels in f32 (1 + tanh(u): at x = -4, 8e-4 from 1 - 8e-4, a
    # relative error of 1e-4 on a result of 2e-3); alone (n = 1) it would be the scale.
    # 1e-3 let a single x near -4 fail (an H100 run of 2026-11-26: 1.14e-5).
    assert_close(out, gelu_ref(x.astype(np.float64)), floor=0.1)


@pytest.mark.parametrize("rows", (1, 3, 333))
@pytest.mark.parametrize("cols", (4, 100, 4096))
def test_bias_gelu_16_bytes_at_a_time(rng, rows, cols):
    """The bias, broadcast over the rows, is loaded a 16-byte chunk at a time too."""
    x, bias = f32(rng, 1, rows, cols) * 3, f32(rng, cols)
    out = zynml.compile(EXAMPLES.parent / "bias_gelu.zyn", device="cuda:0")(
        x=x, bias=bias)["activated"]
    assert_close(out, gelu_ref(x.astype(np.float64) + bias))


# Two chunks a thread, the second `threads` chunks on: 4 * 600001 leaves the second
# chunks of the last block's threads out of range.
@pytest.mark.parametrize("n", [4 * 600001, (1 << 20) + 8])
def test_elementwise_two_chunks_a_thread(rng, n):
    x = f32(rng, n) * 3
    out = run_example("gelu.zyn", params={"pointwise": dict(vectors=2, vector_block=512)},
                      x=x)["activated"]
    assert_close(out, gelu_ref(x.astype(np.float64)))


@pytest.fixture
def grid_stride():
    """pointwise's grid-stride form: a grid of at most 4 blocks per multiprocessor whose
    threads loop over pairs of chunks."""
    return {"pointwise": dict(vectors=2, vector_block=512, blocks_per_multiprocessor=4)}


# 4 * 600007 chunks: the grid is capped (586 blocks planned, 4 x 132 launched on an
# H100) and the loop's last round leaves some threads' second chunk out of range;
# (1 << 20) + 12: fewer blocks than the cap, one round or none per thread
@pytest.mark.parametrize("n", [4 * 600007, (1 << 20) + 12])
def test_elementwise_grid_stride(rng, grid_stride, n):
    x = f32(rng, n) * 3
    out = run_example("gelu.zyn", params=grid_stride, x=x)["activated"]
    assert_close(out, gelu_ref(x.astype(np.float64)))


@pytest.mark.parametrize("rows,cols", [(41, 65540), (1, 1 << 20)])
def test_bias_gelu_grid_stride(rng, grid_stride, rows, cols):
    """The bias chunk of a chunk found from the loop's run-time index."""
    x, bias = f32(rng, 1, rows, cols) * 3, f32(rng, cols)
    out = zynml.compile(EXAMPLES.parent / "bias_gelu.zyn", device="cuda:0",
                        params=grid_stride)(x=x, bias=bias)["activated"]
    assert_close(out, gelu_ref(x.astype(np.float64) + bias))


def test_elementwise_from_unaligned_torch_views(rng):
    """Operands 4 bytes past a 16-byte boundary: the vector path checks at run time and
    reads and writes them a point at a time instead."""
    x, bias = f32(rng, 1, 333, 100) * 3, f32(rng, 100)
    gelu = zynml.compile(EXAMPLES / "gelu.zyn", device="cuda:0")
    bias_gelu = zynml.compile(EXAMPLES.parent / "bias_gelu.zyn", device="cuda:0")
    gelu.artifact(x=x.reshape(-1))  # compile-only runs stop at the skip below
    bias_gelu.artifact(x=x, bias=bias)
    if conftest.COMPILE_ONLY:
        pytest.skip("compile-only: no GPU for torch")
    torch = pytest.importorskip("torch")
    unaligned, host = partial(torch_unaligned, torch), partial(torch_host, torch)

    out = gelu(x=unaligned(x.reshape(-1)))["activated"]
    assert_close(host(out), gelu_ref(x.reshape(-1).astype(np.float64)))
    out = bias_gelu(x=unaligned(x), bias=unaligned(bias))["activated"]
    assert_close(host(out), gelu_ref(x.astype(np.float64) + bias))


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
    program = zynml.compile(DATA_PARALLEL)
    out = program(x=x, w=w)["y"]
    assert_close(out, np.tanh(x.astype(np.float64)) * w)
    np.testing.assert_array_equal(out, np.asarray(one_gpu(x=x, w=w)["y"]))
    # page-locked inputs (queued from this thread, read where they are), and a strided
    # one (made contiguous and copied by each GPU's thread)
    pinned_x = zynml.allocate(x.shape, "float32", pinned=True)
    pinned_w = zynml.allocate(w.shape, "float32", pinned=True)
    pinned_x[...], pinned_w[...] = x, w
    for _ in range(2):  # the second call finds every GPU's program loaded
        np.testing.assert_array_equal(program(x=pinned_x, w=pinned_w)["y"], out)
        wide = np.zeros((8, 66), np.float32)
        wide[:, ::2] = x
        np.testing.assert_array_equal(program(x=wide[:, ::2], w=w)["y"], out)


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


# Attention raised to cir.attention (passes/cir_raise_attention.py) runs as one
# flash-attention kernel; f32 on the register-tiled SIMT kernel
# (zynml/backend/cuda/strategies/attention_simt_tiled.py): partial key tiles (keys past the end
# -inf, V's rows zeros), rows past the last block, fully masked rows (0), head dims that
# are no multiple of 4 (scalar copies, zero-padded columns), cp.async copies otherwise,
# one key tile or several, O's columns in one chunk per lane or two (head dim 128).
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 17, 5), (1, 2, 131, 64),
                                   (2, 12, 128, 64), (1, 2, 70, 128), (1, 3, 67, 37),
                                   (1, 2, 9, 4)])
def test_attention_flash_kernel(rng, shape):
    q, k, v = (f32(rng, *shape) for _ in range(3))
    mask = rng.random(shape[2:3] * 2) < 0.7
    mask[0, :] = False
    if shape[2] > 65:
        mask[[33, 65], :] = False
    out = run_example("attention.zyn", Q=q, K=k, V=v, mask=mask)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, mask))
    assert not np.asarray(out)[:, :, ~mask.any(axis=1)].any()  # no allowed key: 0


@pytest.mark.parametrize("params,shape,e", [
    (dict(block_m=128, block_n=64, thread_m=8, thread_n=4), (1, 2, 135, 64), None),
    (dict(block_m=64, block_n=32, thread_m=4, thread_n=2), (2, 1, 97, 48), 80),
    (dict(block_m=64, block_n=64, thread_m=4, thread_n=8), (1, 2, 71, 96), None),
    (dict(block_m=32, block_n=64, thread_m=2, thread_n=4), (1, 1, 129, 36), 20),
])
def test_attention_simt_tiled_other_params(rng, params, shape, e):
    """Other tiles of attention_simt_tiled, V's head dim other than Q's."""
    q, k = f32(rng, *shape), f32(rng, *shape)
    v = f32(rng, *shape[:-1], e or shape[-1])
    mask = rng.random(shape[2:3] * 2) < 0.6
    mask[[1, shape[2] - 1], :] = False
    out = run_example("attention.zyn", params={"attention_simt_tiled": params},
                      Q=q, K=k, V=v, mask=mask)["attn"]
    # the example's head_dim, in its scale 1 / sqrt(head_dim), is V's
    assert_close(out, conftest.attention_reference(q, k, v, mask,
                                                   scale=1 / np.sqrt(v.shape[-1])))
    assert not np.asarray(out)[:, :, ~mask.any(axis=1)].any()


@pytest.mark.parametrize("shape", [(2, 3, 33, 40), (1, 2, 19, 6)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_attention_simt_tiled_f16_bf16(rng, shape, dtype):
    """f16 that the tensor cores do not take (head dims no multiple of 16) and bf16:
    widened to f32 by the threads' copies, rounded once at the end."""
    import ml_dtypes
    dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    q, k, v = ((f32(rng, *shape) * 0.5).astype(dtype) for _ in range(3))
    mask = rng.random(shape[2:3] * 2) < 0.8
    mask[2, :] = False
    out = run_example("attention.zyn", Q=q, K=k, V=v, mask=mask)["attn"]
    assert out.dtype == dtype
    assert_close(out, conftest.attention_reference(q, k, v, mask), rtol=1e-2)


@pytest.mark.parametrize("shape", [(2, 3, 17, 5), (1, 2, 70, 128), (1, 1, 33, 160)])
def test_attention_flash_kernel_f64_and_wide_heads(rng, shape):
    """What attention_simt_tiled declines keeps the `attention` kernel: f64, head dims
    over 128 (f32 here)."""
    dtype = np.float32 if shape[-1] > 128 else np.float64
    q, k, v = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    mask = rng.random(shape[2:3] * 2) < 0.7
    mask[0, :] = False
    out = run_example("attention.zyn", Q=q, K=k, V=v, mask=mask)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, mask),
                 rtol=1e-10 if dtype == np.float64 else 1e-5)


def test_attention_flash_kernel_f16(rng):
    q, k, v = ((f32(rng, 1, 2, 67, 64) * 0.5).astype(np.float16) for _ in range(3))
    mask = rng.random((67, 67)) < 0.9
    out = run_example("attention.zyn", Q=q, K=k, V=v, mask=mask)["attn"]
    assert out.dtype == np.float16
    assert_close(out, conftest.attention_reference(q, k, v, mask), rtol=1e-2)


# f16 attention with head dims that are multiples of 16 up to 128 runs on tensor cores
# (zynml/backend/cuda/strategies/attention_tensor_core.py): one key, partial query and key tiles
# (rows past the end unwritten, keys past the end -inf), several key tiles through the
# cp.async pipeline, fully masked rows (0), the mask read in 2-byte pairs (even key counts)
# or bytes (odd).
@pytest.mark.parametrize("shape", [(1, 1, 1, 16), (2, 3, 17, 64), (1, 2, 131, 64),
                                   (2, 12, 128, 64), (1, 2, 70, 128), (1, 1, 257, 128)])
def test_attention_tensor_cores_f16(rng, shape):
    q, k, v = (f32(rng, *shape).astype(np.float16) for _ in range(3))
    seq = shape[2]
    mask = rng.random((seq, seq)) < 0.7 if seq > 1 else np.ones((1, 1), bool)
    if seq == 70:
        mask[[0, 33, 69], :] = False
    # sm_90: on sm_90a, head dims 64 and 128 take attention_wgmma
    out = run_example("attention.zyn", target="sm_90", Q=q, K=k, V=v, mask=mask)["attn"]
    assert out.dtype == np.float16
    assert_close(out, conftest.attention_reference(q, k, v, mask), rtol=1e-2)
    assert not np.asarray(out)[:, :, ~mask.any(axis=1)].any()  # no allowed key: 0


@pytest.mark.parametrize("params", [dict(warps=4, m_tiles=1, block_n=64, q_shared=False),
                                    dict(warps=4, m_tiles=2, block_n=32, q_shared=False)])
def test_attention_tensor_cores_f16_other_params(rng, params):
    """Q's fragments in registers (the default reads them from shared memory), one and two
    row tiles per warp."""
    shape = (1, 3, 45 + params["m_tiles"], 96)
    q, k, v = (f32(rng, *shape).astype(np.float16) for _ in range(3))
    mask = rng.random(shape[2:3] * 2) < 0.7
    mask[5, :] = False
    out = run_example("attention.zyn", params={"attention_tensor_core": params},
                      Q=q, K=k, V=v, mask=mask)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, mask), rtol=1e-2)


# Causal attention (`if j <= i`, raised to causal_offset) on both kernels: f32 on the SIMT
# `attention`, f16 with head dims multiples of 16 on `attention_tensor_core` (sm_90; on
# sm_90a head dims 64 and 128 take attention_wgmma, tested below). Each block
# visits the key tiles up to its last row + offset only: one block, several, the last
# partial; more keys than queries (a KV cache), a negative offset (the first rows see no
# key: 0, and whole blocks visit no tile), a mask as well.
CAUSAL_SHAPES = [(1, 1, 1, 16), (2, 3, 17, 16), (1, 2, 131, 64), (1, 1, 257, 128)]


@pytest.mark.parametrize("shape", CAUSAL_SHAPES + [(2, 2, 70, 5)])
def test_causal_attention_flash_kernel(rng, shape):
    q, k, v = (f32(rng, *shape) for _ in range(3))
    out = run_example("causal_attention.zyn", Q=q, K=k, V=v)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, conftest.causal(*shape[2:3] * 2)))


@pytest.mark.parametrize("shape", CAUSAL_SHAPES)
def test_causal_attention_tensor_cores_f16(rng, shape):
    q, k, v = (f32(rng, *shape).astype(np.float16) for _ in range(3))
    out = run_example("causal_attention.zyn", target="sm_90", Q=q, K=k, V=v)["attn"]
    assert out.dtype == np.float16
    assert_close(out, conftest.attention_reference(q, k, v, conftest.causal(*shape[2:3] * 2)),
                 rtol=1e-2)


@pytest.mark.parametrize("dtype,target", [(np.float32, None), (np.float16, "sm_90"),
                                          (np.float16, None)])  # sm_90a: attention_wgmma
@pytest.mark.parametrize("condition,offset,masked", [
    ("j <= i + 16", 16, False),               # a KV cache of 16 earlier keys
    ("j <= i - 70 and mask[i, j]", -70, True),  # rows 0..69 and block 0 see no key
])
def test_causal_attention_kv_cache(rng, dtype, target, condition, offset, masked):
    rows, keys, d = 131, 147, 64
    source = conftest.conditioned_attention(condition, "Q, K, V, mask" if masked else "Q, K, V")
    q = f32(rng, 1, 2, rows, d).astype(dtype)
    k, v = (f32(rng, 1, 2, keys, d).astype(dtype) for _ in range(2))
    inputs = dict(Q=q, K=k, V=v)
    allowed = conftest.causal(rows, keys, offset)
    if masked:
        inputs["mask"] = rng.random((rows, keys)) < 0.7
        allowed = allowed & inputs["mask"]
    out = zynml.compile(source, device="cuda:0", target=target)(**inputs)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, allowed),
                 rtol=1e-2 if dtype == np.float16 else 1e-5)
    assert not np.asarray(out)[:, :, ~allowed.any(axis=1)].any()  # no allowed key: 0


@pytest.mark.parametrize("shape,target", [((1, 2, 256, 64), "sm_90"),
                                          ((2, 3, 192, 128), "sm_90"),
                                          ((1, 2, 256, 64), None), ((2, 3, 192, 128), None)])
def test_flash_attention_tensor_cores_f16(rng, shape, target):
    """The spec's tile-form flash attention (no mask, whole key tiles): the benchmark's
    path, on mma.sync (sm_90) and on wgmma (sm_90a, the default)."""
    q, k, v = (f32(rng, *shape).astype(np.float16) for _ in range(3))
    out = zynml.compile(EXAMPLES / "flash_attention.zyn", device="cuda:0",
                        target=target)(Q=q, K=k, V=v)["attn"]
    assert out.dtype == np.float16
    assert_close(out, conftest.attention_reference(q, k, v), rtol=1e-2)


# Unmasked f16 / bf16 attention with head dims 64 or 128 runs on Hopper's wgmma with TMA
# copies (zynml/backend/cuda/strategies/attention_wgmma.py): one key and one row, partial query
# tiles (rows past the end unwritten), partial key tiles (keys past the end -inf, TMA
# zero-fills them), several key tiles through the ring of stages, several heads.
ATTENTION_NO_MASK = EXAMPLES.parent / "attention_no_mask.zyn"


@pytest.mark.parametrize("shape", [(1, 1, 1, 64), (2, 3, 17, 64), (1, 2, 131, 128),
                                   (1, 1, 257, 128), (2, 2, 300, 64)])
def test_attention_wgmma(rng, shape):
    q, k, v = (f32(rng, *shape).astype(np.float16) for _ in range(3))
    out = zynml.compile(ATTENTION_NO_MASK, device="cuda:0")(Q=q, K=k, V=v)["attn"]
    assert out.dtype == np.float16
    assert_close(out, conftest.attention_reference(q, k, v), rtol=1e-2)


@pytest.mark.parametrize("params", [dict(overlap=False, stages=2),
                                    dict(block_n=64, stages=3, overlap=True)])
def test_attention_wgmma_other_params(rng, params):
    """At head dim 128: each tile's products one after the other in 2 stages (the default
    overlaps S of tile j with P V of tile j - 1, in 3), and overlapped 64-key tiles."""
    shape = (1, 2, 200 + len(params), 128)
    q, k, v = (f32(rng, *shape).astype(np.float16) for _ in range(3))
    out = zynml.compile(ATTENTION_NO_MASK, device="cuda:0",
                        params={"attention_wgmma": params})(Q=q, K=k, V=v)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v), rtol=1e-2)


def test_attention_wgmma_bf16(rng):
    q, k, v = (bf16(rng, 2, 3, 150, 128) for _ in range(3))
    out = zynml.compile(ATTENTION_NO_MASK, device="cuda:0")(Q=q, K=k, V=v)["attn"]
    assert out.dtype == q.dtype
    assert_close(out, conftest.attention_reference(q, k, v), rtol=3e-2)


# Masked and causal attention on attention_wgmma (f16 and bf16, head dims 64 and 128; at
# 64 each tile's products run one after the other, at 128 overlapped): the mask's bytes
# read per thread from global memory, fully masked rows (0: l = 0, no NaN), key counts
# that are odd (byte loads) or even (2-byte loads), partial key and row tiles; causal
# blocks that stop at their last row + offset, the diagonal tiles checked per key, more
# keys than queries and a positive offset (a KV cache), a negative offset with a mask
# (rows and whole blocks that see no key).
WGMMA_SHAPES = [(1, 1, 1, 64), (2, 3, 17, 128), (1, 2, 131, 64), (1, 1, 257, 128),
                (2, 2, 300, 64), (1, 2, 300, 128)]
# keys a multiple of 16: the mask is staged in shared memory by cp.async (whole tiles;
# a last tile of 16 keys, the rest zero-filled; a partial row block; head dim 128's 2
# stages)
STAGED_SHAPES = [(2, 4, 512, 64), (2, 2, 400, 64), (1, 2, 256, 128), (1, 3, 208, 128)]


def wgmma_inputs(rng, dtype, q_shape, keys=None):
    """Q of `q_shape`, K and V with `keys` keys (default: Q's rows), in f16 or bf16."""
    import ml_dtypes
    dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    kv_shape = q_shape[:2] + (keys or q_shape[2], q_shape[3])
    return (f32(rng, *q_shape).astype(dtype), f32(rng, *kv_shape).astype(dtype),
            f32(rng, *kv_shape).astype(dtype))


@pytest.mark.parametrize("shape", WGMMA_SHAPES + STAGED_SHAPES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_attention_wgmma_masked(rng, shape, dtype):
    q, k, v = wgmma_inputs(rng, dtype, shape)
    seq = shape[2]
    mask = rng.random((seq, seq)) < 0.6
    if seq > 1:
        mask[[0, seq // 2, seq - 1], :] = False  # no allowed key: 0
    mask[seq // 3, :] = True
    out = run_example("attention.zyn", Q=q, K=k, V=v, mask=mask)["attn"]
    assert out.dtype == q.dtype
    assert_close(out, conftest.attention_reference(q, k, v, mask), rtol=1e-2)
    assert not np.asarray(out, np.float64)[:, :, ~mask.any(axis=1)].any()


@pytest.mark.parametrize("shape", WGMMA_SHAPES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_attention_wgmma_causal(rng, shape, dtype):
    q, k, v = wgmma_inputs(rng, dtype, shape)
    out = run_example("causal_attention.zyn", Q=q, K=k, V=v)["attn"]
    assert out.dtype == q.dtype
    assert_close(out, conftest.attention_reference(q, k, v, conftest.causal(*shape[2:3] * 2)),
                 rtol=1e-2)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("rows,keys,condition,offset,masked", [
    (131, 147, "j <= i + 16", 16, False),   # a KV cache of 16 earlier keys
    (300, 257, "j <= i", 0, False),         # fewer keys than queries
    (200, 333, "j <= i - 70 and mask[i, j]", -70, True),  # block 0 and rows 0..69: none
    (144, 336, "j <= i + 100 and mask[i, j]", 100, True),  # the mask staged
])
def test_attention_wgmma_causal_offsets(rng, d, rows, keys, condition, offset, masked):
    dtype = "bfloat16" if d == 128 else "float16"
    q, k, v = wgmma_inputs(rng, dtype, (1, 2, rows, d), keys)
    source = conftest.conditioned_attention(condition, "Q, K, V, mask" if masked else "Q, K, V")
    inputs = dict(Q=q, K=k, V=v)
    allowed = conftest.causal(rows, keys, offset)
    if masked:
        inputs["mask"] = rng.random((rows, keys)) < 0.7
        allowed = allowed & inputs["mask"]
    out = zynml.compile(source, device="cuda:0")(**inputs)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, allowed), rtol=1e-2)
    assert not np.asarray(out, np.float64)[:, :, ~allowed.any(axis=1)].any()



# More work items (row blocks x heads) than an H100 or H200 has multiprocessors (132):
# persistent blocks take two or three items each, the K/V ring, the staged mask's ring
# and Q's barriers running on across them; partial row and key tiles in every item.
@pytest.mark.parametrize("shape,dtype,masked", [
    ((4, 40, 131, 64), "float16", False),    # 320 items
    ((2, 70, 200, 128), "bfloat16", False),  # 280 items
    ((3, 50, 144, 64), "float16", True),     # 300 items, the mask staged
    ((2, 75, 131, 128), "bfloat16", True),   # 300 items, the mask read from global memory
])
def test_attention_wgmma_persistent_blocks_take_several_items(rng, shape, dtype, masked):
    q, k, v = wgmma_inputs(rng, dtype, shape)
    seq = shape[2]
    inputs = dict(Q=q, K=k, V=v)
    allowed = None
    if masked:
        allowed = rng.random((seq, seq)) < 0.6
        allowed[seq // 2, :] = False  # no allowed key: 0
        inputs["mask"] = allowed
    source = EXAMPLES / "attention.zyn" if masked else ATTENTION_NO_MASK
    out = zynml.compile(source, device="cuda:0")(**inputs)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, allowed), rtol=1e-2)


def test_attention_wgmma_causal_persistent(rng):
    """Causal items differ in key tiles; with persistent blocks forced (the default
    leaves causal items a block each) each block counts its items' ring steps."""
    shape = (2, 70, 203, 64)  # 280 items of 1 or 2 key tiles
    q, k, v = wgmma_inputs(rng, "float16", shape)
    params = {"attention_wgmma": dict(block_n=128, stages=3, overlap=False, persistent=True)}
    out = run_example("causal_attention.zyn", params=params, Q=q, K=k, V=v)["attn"]
    assert_close(out, conftest.attention_reference(q, k, v, conftest.causal(203, 203)),
                 rtol=1e-2)

# ------------------------------------------------------------------ bf16: numpy
# (ml_dtypes) and torch tensors in, through DLPack; matmuls that matmul_wgmma does not
# take (sizes that do not tile, or sm_90) run on the SIMT `matmul` (f32 accumulation)

def bf16(rng, *shape, low=0.25, high=2.0):
    import ml_dtypes
    return (rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)).astype(
        ml_dtypes.bfloat16)


def test_bf16_device_array_round_trip(rng):
    from zynml.runtime.cuda.device_array import DeviceArray
    host = bf16(rng, 7, 13)
    array = DeviceArray.from_numpy(host)
    assert array.dtype == host.dtype and not hasattr(array, "__cuda_array_interface__")
    np.testing.assert_array_equal(array.numpy().view(np.uint16), host.view(np.uint16))


@pytest.mark.parametrize("n", [1, 37, 100003])
def test_bf16_elementwise(rng, n):
    x, w = bf16(rng, n), bf16(rng, n)
    source = ("let y = compute(x, w) {\n    @kernel elementwise\n    for i in 0..n:\n"
              "        out[i] = x[i] * w[i] + exp(x[i]) - x[i] / w[i]\n}\n")
    y = zynml.run(source, device="cuda:0", x=x, w=w)["y"]
    assert y.dtype == x.dtype
    X, W = x.astype(np.float64), w.astype(np.float64)
    # The body computes in bf16: each of its roundings (up to 2 per operation, 5
    # operations) is off by at most 2^-8 (bf16's unit roundoff) of a value no larger than
    # the terms, and the terms may cancel. So the bound is on the error against the
    # terms' size, not the result's (a norm-wise 1e-2 failed once at n=1).
    terms = np.abs(X * W) + np.exp(X) + np.abs(X / W)
    error = np.abs(y.astype(np.float64) - (X * W + np.exp(X) - X / W))
    assert np.all(error <= 10 * 2.0 ** -8 * terms), float((error / terms).max())


@pytest.mark.parametrize("n", [1, 61, 255])
def test_bf16_full_reduction_and_argmax(rng, n):
    """Integers whose magnitudes add up to at most 2^8 sum exactly in bf16, in any order
    and any grouping: the sum is exact."""
    import ml_dtypes
    data = (rng.integers(1, 256 // n + 1, n) * rng.choice([-1, 1], n)).astype(
        ml_dtypes.bfloat16)
    values = bf16(rng, n)
    reduce_sum, argmax = (zynml.compile(EXAMPLES / name, device="cuda:0")
                          for name in ("reduce_sum.zyn", "argmax.zyn"))
    argmax.artifact(data=values)  # both compiled before compile-only runs stop below
    total = reduce_sum(data=data)["sum"]
    assert total.dtype == data.dtype
    assert float(total) == data.astype(np.float64).sum()
    out = argmax(data=values)
    assert int(np.asarray(next(iter(out.values())))) == int(np.argmax(values.astype(np.float64)))


@pytest.mark.parametrize("m,k,n,target", [(1, 1, 1, None), (300, 200, 129, None),
                                          (257, 31, 33, None), (192, 48, 320, "sm_90")])
def test_bf16_matmul_simt(rng, m, k, n, target):
    a, b = bf16(rng, m, k), bf16(rng, k, n)
    c = run_example("matmul.zyn", target=target, A=a, B=b)["C"]
    assert c.dtype == a.dtype
    assert_close(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-2)


def test_bf16_torch_tensors_in_through_dlpack(rng):
    """torch's __cuda_array_interface__ cannot say bfloat16: the tensors come in through
    DLPack, results go out the same way (torch.from_dlpack), no copies."""
    a, b = bf16(rng, 130, 70), bf16(rng, 70, 90)
    prog = zynml.compile(EXAMPLES / "matmul.zyn", device="cuda:0")
    prog.artifact(A=a, B=b)  # compile-only runs stop at the skip below
    if conftest.COMPILE_ONLY:
        pytest.skip("compile-only: no GPU for torch")
    torch = pytest.importorskip("torch")

    def on_gpu(array):
        return torch.from_numpy(array.view(np.int16)).cuda().view(torch.bfloat16)

    ta, tb = on_gpu(a), on_gpu(b)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    for _ in range(2):  # the second call takes the fast path
        out = prog(A=ta, B=tb)["C"]
        assert out.dtype == a.dtype and out.shape == (130, 90)
        back = torch.from_dlpack(out)
        assert back.dtype == torch.bfloat16 and back.data_ptr() == out.ptr
        assert_close(back.float().cpu().numpy(), expected, rtol=1e-2)
