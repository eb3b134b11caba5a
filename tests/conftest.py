"""Shared test helpers: fresh random inputs, float64 references, GPU skipping."""
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml import knobs


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Compile for real in every test session: an empty artifact cache of our own.
    ZYNML_TEST_CACHE_DIR names a cache to use instead (GPU runs: compiled here, carried)."""
    folder = knobs.TEST_CACHE_DIR.get() or tmp_path_factory.mktemp("zynml-cache")
    with pytest.MonkeyPatch.context() as patch:  # the old value comes back at the end
        patch.setenv(knobs.CACHE_DIR.name, str(folder))
        yield


@pytest.fixture
def rng():
    """A fresh generator per test; the seed is in the test's name on failure (-rA)."""
    seed = secrets.randbits(32)
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


def assert_close(actual, expected, rtol=1e-5, floor=0.0):
    """Norm-wise relative error of `actual` against a float64 reference. `floor` is the
    smallest scale the error is measured against: for formulas that cancel in f32 (GELU's
    1 + tanh(u) for u << 0), a tiny result is only good to an absolute error."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    scale = max(np.max(np.abs(expected), initial=0.0), floor, np.finfo(np.float64).tiny)
    err = np.max(np.abs(actual - expected), initial=0.0) / scale
    assert err < rtol, f"relative error {err:.3e} >= {rtol:.0e}"


def torch_unaligned(torch, array):
    """A float32 torch copy of `array` 4 bytes past a 16-byte boundary."""
    view = torch.empty(array.size + 1, device="cuda")[1:].view(array.shape)
    view.copy_(torch.from_numpy(array))
    assert view.data_ptr() % 16 == 4
    return view


def assert_compile_error(source: str, where: str, message: str) -> None:
    """Compiling `source` fails with a located error: `<string>:WHERE: error: MESSAGE...`."""
    with pytest.raises(zynml.ZynMLError) as info:
        zynml.compile(source)
    assert str(info.value).startswith(f"<string>:{where}: error: {message}")


def conv2d_reference(x, kernel, bias, stride, padding):
    """float64 NCHW convolution with an OIHW kernel."""
    from numpy.lib.stride_tricks import sliding_window_view
    pad = ((0, 0), (0, 0), (padding, padding), (padding, padding))
    windows = sliding_window_view(np.pad(x.astype(np.float64), pad), kernel.shape[2:],
                                  axis=(2, 3))[:, :, ::stride, ::stride]
    out = np.einsum("bchwij,ocij->bohw", windows, kernel.astype(np.float64), optimize=True)
    return out + bias.astype(np.float64)[:, None, None]


def attention_reference(q, k, v, mask=None, scale=None):
    """softmax(q k^T * scale, over the keys `mask` allows) v in float64; a row with no
    allowed key is 0 (what the spec's loops give)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    s = np.where(allowed, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.where(allowed, np.exp(s - np.where(np.isfinite(m), m, 0)), 0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0) @ v


def transformer_layer(rng, hidden: int, ffn_hidden: int) -> dict:
    """Random weights of one layer of tests/programs/transformer/transformer_block.zyn,
    f32, scaled so that the activations stay of order one."""
    def w(*shape, scale=None):
        scale = 1 / np.sqrt(shape[0]) if scale is None else scale
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    return dict(qkv_proj=w(hidden, 3 * hidden), out_proj=w(hidden, hidden),
                ln1_weight=w(hidden, scale=1), ln1_bias=w(hidden),
                ffn_up=w(hidden, ffn_hidden), ffn_down=w(ffn_hidden, hidden),
                ln2_weight=w(hidden, scale=1), ln2_bias=w(hidden))


def transformer_block_reference(x, layer: dict, num_heads: int, head_dim: int):
    """tests/programs/transformer/transformer_block.zyn in float64 numpy."""
    f = {name: np.asarray(value, np.float64) for name, value in layer.items()}
    x = np.asarray(x, np.float64)
    batch, seq, hidden = x.shape
    q, k, v = np.split(x @ f["qkv_proj"], 3, axis=-1)
    q, k, v = (t.reshape(batch, seq, num_heads, head_dim).transpose(0, 2, 1, 3)
               for t in (q, k, v))
    attn = attention_reference(q, k, v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)

    def layer_norm(t, weight, bias):
        mean = t.mean(-1, keepdims=True)
        var = (t * t).mean(-1, keepdims=True) - mean * mean
        return (t - mean) / np.sqrt(var + 1e-6) * weight + bias

    normed = layer_norm(x + attn @ f["out_proj"], f["ln1_weight"], f["ln1_bias"])
    up = normed @ f["ffn_up"]
    up = up * 0.5 * (1 + np.tanh(0.7978845608 * (up + 0.044715 * up ** 3)))
    return layer_norm(normed + up @ f["ffn_down"], f["ln2_weight"], f["ln2_bias"])


def run_transformer_block(device, rng, batch, seq, heads, head_dim, ffn):
    """(result, float64 reference) of tests/programs/transformer/transformer_block.zyn on
    `device` for fresh random inputs of these sizes, layer 1 of two."""
    hidden = heads * head_dim
    layers = [transformer_layer(rng, hidden, ffn) for _ in range(2)]
    x = rng.standard_normal((batch, seq, hidden)).astype(np.float32)
    program = Path(__file__).parent / "programs" / "transformer" / "transformer_block.zyn"
    out = zynml.compile(program, device=device).transformer_block(
        x, 1, model={"layers": layers}, num_heads=heads, head_dim=head_dim)
    return out, transformer_block_reference(x, layers[1], heads, head_dim)


def conditioned_attention(condition: str, inputs: str = "Q, K, V") -> str:
    """The spec's attention (tests/programs/examples/attention.zyn) over `keys` keys (K's
    and V's own count, which may differ from the queries'), its three key loops under
    `if <condition>:`, e.g. "j <= i + 16" (causal with a KV cache of 16 earlier keys)."""
    score = "let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)"
    return f"""
let attn = compute({inputs}) {{
    @kernel attention
    for b in 0..batch, h in 0..heads, i in 0..seq_len:
        var max_score = -inf
        for j in 0..keys:
            if {condition}:
                {score}
                max_score = max(max_score, score)
        var sum_exp = 0.0
        for j in 0..keys:
            if {condition}:
                {score}
                sum_exp += exp(score - max_score)
        for d in 0..head_dim:
            var acc = 0.0
            for j in 0..keys:
                if {condition}:
                    {score}
                    acc += exp(score - max_score) / sum_exp * V[b, h, j, d]
            out[b, h, i, d] = acc
}}
"""


def decode_attention(group: str = "1", condition: str = "j <= i + cache_start",
                     inputs: str = "Q, K, V, cache_start") -> str:
    """conditioned_attention with K and V read at head `h / group` (grouped-query
    attention: K and V have heads / group heads) and scores scaled by 0.125; the default
    condition is causal with a run-time offset, the integer input `cache_start`."""
    score = f"let score = dot(Q[b, h, i], K[b, h / {group}, j]) * 0.125"
    return conditioned_attention(condition, inputs).replace(
        "let score = dot(Q[b, h, i], K[b, h, j]) / sqrt(head_dim)", score).replace(
        "V[b, h, j, d]", f"V[b, h / {group}, j, d]")


def online_attention(group: str = "1") -> str:
    """Attention as the online softmax written per element (docs/language.md), K and V
    read at head `h / group`, scores scaled by 0.125."""
    return f"""
let attn = compute(Q, K, V) {{
    @kernel flash_attention
    for b in 0..batch, h in 0..heads, i in 0..sq, d in 0..dv:
        var m = -inf
        var l = 0.0
        var o = 0.0
        for j in 0..sk:
            let s = dot(Q[b, h, i], K[b, h / {group}, j]) * 0.125
            let m_new = max(m, s)
            let scale = exp(m - m_new)
            l = scale * l + exp(s - m_new)
            o = scale * o + exp(s - m_new) * V[b, h / {group}, j, d]
            m = m_new
        out[b, h, i, d] = o / l
}}
"""


def grouped_reference(q, k, v, mask=None, scale=0.125):
    """attention_reference with each group of q's heads (axis 1) reading one head of k
    and v (grouped-query attention), in float64."""
    group = q.shape[1] // k.shape[1]
    return attention_reference(q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1),
                               mask, scale=scale)


def causal(rows: int, keys: int, offset: int = 0):
    """allowed[i, j] = j <= i + offset: causal attention's mask."""
    return np.arange(keys)[None, :] <= np.arange(rows)[:, None] + offset


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


HAS_GPU = _has_gpu()
if HAS_GPU:  # native CUDA allocations start as NaN/-1 bytes: unwritten outputs show
    os.environ[knobs.CUDA_POISON.name] = "1"


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# ZYNML_GPU_COMPILE_ONLY=1 (tools/gpu_tests.sh, on a machine without a GPU): the GPU tests
# run as far as compiling, filling ZYNML_TEST_CACHE_DIR with CUDA artifacts, and skip
# where they would touch the GPU. The device machine, which has no MLIR, then runs the
# same tests from that cache.
COMPILE_ONLY = knobs.GPU_COMPILE_ONLY.get()


def dynamic_on_gpu(source, pipeline=None, dynamic=True, target=None, **example):
    """`source` compiled with run-time sizes (`dynamic`: all, or the names given) for the
    GPU (`target`: a CUDA chip other than the default); in compile-only mode its artifact
    at `example`'s dtypes (of `pipeline`, if named) goes into the cache and the test
    stops there."""
    prog = zynml.compile(source, device="cuda" if COMPILE_ONLY else "cuda:0",
                         require_device=not COMPILE_ONLY, dynamic=dynamic, target=target)
    if COMPILE_ONLY:
        (getattr(prog, pipeline)._program if pipeline else prog).artifact(**example)
        pytest.skip("compile-only: the artifact is in the cache")
    return prog


def pytest_configure(config):
    if COMPILE_ONLY:
        global HAS_GPU
        HAS_GPU = True  # collect the GPU tests: compile, then skip at the first launch


@pytest.fixture(autouse=True)
def _gpu_compile_only(monkeypatch):
    if not COMPILE_ONLY:
        yield
        return
    import zynml.devices
    import zynml.runtime.cuda.device_array as device_array
    import zynml.runtime.cuda.driver as driver
    import zynml.runtime.cuda.function as function

    def no_gpu(*args, **kwargs):
        pytest.skip("compile-only: the artifact is in the cache; no GPU here")

    import zynml.runtime.iree_runner as iree_runner
    iree_init = iree_runner.IreeModule.__init__

    def iree_on_cpu_only(self, vmfb, driver=iree_runner.DEFAULT_DRIVER, **kwargs):
        if driver not in ("local-task", "local-sync"):
            no_gpu()
        iree_init(self, vmfb, driver, **kwargs)

    monkeypatch.setattr(zynml.devices, "_gpu_count",
                        lambda kind: 1 if kind in ("cuda", "vulkan") else 0)
    monkeypatch.setattr(iree_runner.IreeModule, "__init__", iree_on_cpu_only)
    monkeypatch.setattr(function.CudaFunction, "__init__", no_gpu)
    for module in (driver, device_array, function):
        monkeypatch.setattr(module, "get_device", no_gpu)
    yield


@pytest.fixture(autouse=True, scope="module")
def _fresh_library_programs():
    """Where GPU tests run or compile, each test module starts with no library Programs,
    so that a Program's specializations (and the ZYNML_SPECIALIZATION_LIMIT cap) follow
    the module's own calls: the same in the compile-only half as on the GPU machine,
    whichever modules ran before it in either. (CI, without either, keeps them.)"""
    if HAS_GPU or COMPILE_ONLY:
        from zynml.kernels import library, variants
        with library._lock, variants._lock:
            library._programs.clear()
            variants._programs.clear()
    yield
