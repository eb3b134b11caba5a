"""End to end on the CPU: every kernel example of the language spec
(/work/shared/spec/compute-system.md), kept as close to the spec's text as possible in
tests/programs/examples/*.zyn, against independently written float64 numpy references on
fresh random inputs of odd sizes; then the spec's own mistakes and the common user mistakes
as located errors (FILE:LINE:COL)."""
import functools
import shutil
from pathlib import Path

import numpy as np
import pytest

import zynml
from zynml import knobs
import conftest
from conftest import assert_close

EXAMPLES = Path(__file__).resolve().parent / "programs" / "examples"
# Files in EXAMPLES that are deliberately not valid programs (tested as located errors).
INVALID_EXAMPLES = {"rope_spec_verbatim.zyn"}


_DEVICE = ["cpu"]

# Measured on an H100 through IREE 3.13's vulkan-spirv target (docs/devices.md).
_BOOL_INPUTS = "IREE's Vulkan target returns wrong rows for bool (i1) tensor inputs"
_NO_F64 = "no f64 on IREE's Vulkan target: ZynML refuses it with a clear error"
VULKAN_KNOWN_FAILURES = {
    "test_attention_with_mask": _BOOL_INPUTS,
    "test_attention_all_true_mask_is_plain_softmax_attention": _BOOL_INPUTS,
    "test_gelu_f64": _NO_F64,
    "test_layer_norm_f64": _NO_F64,
}


@pytest.fixture(autouse=True, params=["cpu", "cuda", "interpreter"] + (
    ["cuda-iree"] if knobs.TEST_IREE_GPU.get() else []) + (
    ["vulkan-iree"] if knobs.TEST_VULKAN.get() else []))
def device(request):
    """Every test runs on the CPU (IREE), through the native CUDA backend and on the `cir`
    reference interpreter. Without a GPU, the CUDA variant compiles each call's artifact
    (PTX, checked by ptxas when the toolkit is installed) and skips the run; on the device
    machine it runs.
    ZYNML_TEST_IREE_GPU=1 (tools/gpu_tests.sh) adds IREE's CUDA target on the GPU, and
    ZYNML_TEST_VULKAN=1 IREE's Vulkan target."""
    _DEVICE[0] = request.param
    known = VULKAN_KNOWN_FAILURES.get(request.node.originalname)
    if request.param == "vulkan-iree" and known:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=known))
    yield request.param
    _DEVICE[0] = "cpu"


def program(name: str):
    """One Program per example file and device, so that a shape seen twice compiles once."""
    prog = _program(name, _DEVICE[0])
    return prog if _DEVICE[0] in ("cpu", "interpreter") or conftest.HAS_GPU else \
        _CompileOnly(prog)


@functools.lru_cache(maxsize=None)
def _program(name: str, device: str) -> zynml.Program:
    if device.endswith("-iree"):
        return zynml.compile(EXAMPLES / name, device=device.split("-")[0] + ":0",
                             backend="iree", require_device=False)
    return zynml.compile(EXAMPLES / name, device=device, require_device=False)


class _CompileOnly:
    """A CUDA program on a machine without a GPU: calling it builds the artifact."""

    def __init__(self, prog: zynml.Program):
        self._prog = prog

    def __call__(self, **inputs):
        artifact = self._prog.artifact(**inputs)
        assert artifact.ptx.startswith("//") and ".entry" in artifact.ptx
        if shutil.which("ptxas"):
            assert artifact.cubin, "ptxas is installed but no cubin was made"
        pytest.skip("compiled for CUDA (PTX and cubin); no GPU here to run it")

    def __getattr__(self, name):
        return getattr(self._prog, name)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def f64(a):
    return np.asarray(a, dtype=np.float64)


def test_every_valid_example_checks_and_is_tested():
    """Each example parses and checks without inputs, and a test below runs it."""
    names = sorted(p.name for p in EXAMPLES.glob("*.zyn"))
    assert len(names) >= 25
    this_file = Path(__file__).read_text()
    for name in names:
        assert this_file.count(f'"{name}"') >= 1, f"{name} is not tested"
        if name not in INVALID_EXAMPLES:
            program(name)


# ============================================================================ element-wise

@pytest.mark.parametrize("n", [1, 37])
def test_elementwise_relu(rng, n):
    x = f32(rng, n)
    out = program("elementwise_relu.zyn")(x=x)["y"]
    assert out.dtype == np.float32
    assert_close(out, np.where(x > 0, f64(x), 0.0))


def test_elementwise_two_inputs(rng):
    x, y = f32(rng, 13), f32(rng, 13)
    out = program("elementwise_two_inputs.zyn")(x=x, y=y)["z"]
    assert out.dtype == np.float32
    assert_close(out, f64(x) * f64(y) + 1.0)


@pytest.mark.parametrize("rows,cols", [(1, 1), (7, 13)])
def test_broadcast(rng, rows, cols):
    matrix, vector = f32(rng, rows, cols), f32(rng, cols)
    out = program("broadcast.zyn")(matrix=matrix, vector=vector)["scaled"]
    expected = np.empty((rows, cols))
    for i in range(rows):
        expected[i] = f64(matrix[i]) * f64(vector)
    assert_close(out, expected)


def test_gelu(rng):
    x = (f32(rng, 19) * 3).astype(np.float32)
    out = program("gelu.zyn")(x=x)["activated"]
    v = f64(x)
    assert_close(out, 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))))


def test_gelu_f64(rng):
    x = rng.standard_normal(5) * 3
    out = program("gelu.zyn")(x=x)["activated"]
    assert out.dtype == np.float64
    assert_close(out, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                 rtol=1e-9)  # 0.7978845608 is sqrt(2/pi) to 10 digits


# ============================================================================ reductions

@pytest.mark.parametrize("n", [1, 29])
def test_reduce_sum(rng, n):
    data = f32(rng, n)
    out = program("reduce_sum.zyn")(data=data)["sum"]
    assert np.ndim(out) == 0
    # against the sum of magnitudes: a sum that cancels keeps only f32's error in it
    assert_close(out, sum(float(v) for v in data), floor=np.abs(f64(data)).sum())


@pytest.mark.parametrize("n", [1, 23])
def test_reduce_max(rng, n):
    data = f32(rng, n)
    out = program("reduce_max.zyn")(data=data)["max_val"]
    assert np.ndim(out) == 0
    assert_close(out, max(float(v) for v in data))


def test_reduce_norm_then_sqrt(rng):
    data = f32(rng, 17)
    out = program("reduce_norm.zyn")(data=data)["norm"]
    assert np.ndim(out) == 0
    assert_close(out, np.sqrt(np.dot(f64(data), f64(data))))


@pytest.mark.parametrize("rows,cols", [(1, 1), (7, 11)])
def test_row_sums(rng, rows, cols):
    matrix = f32(rng, rows, cols)
    out = program("row_sums.zyn")(matrix=matrix)["row_sums"]
    assert_close(out, f64(matrix) @ np.ones(cols))


@pytest.mark.parametrize("rows,cols", [(1, 3), (13, 7)])
def test_reduce_min_along_axis_0(rng, rows, cols):
    matrix = f32(rng, rows, cols)
    out = program("reduce_min_axis.zyn")(matrix=matrix)["col_mins"]
    assert out.shape == (cols,)
    np.testing.assert_array_equal(out, [min(matrix[:, j]) for j in range(cols)])


@pytest.mark.parametrize("n", [1, 31])
def test_argmax(rng, n):
    data = f32(rng, n)
    prog = program("argmax.zyn")
    assert int(prog(data=data)["max_idx"]) == max(range(n), key=lambda i: (data[i], -i))
    ties = rng.integers(0, 3, n).astype(np.float32)  # many equal maxima: the first wins
    assert int(prog(data=ties)["max_idx"]) == list(ties).index(ties.max())


def test_argmin(rng):
    data = f32(rng, 31)
    prog = program("argmin.zyn")
    assert int(prog(data=data)["min_idx"]) == min(range(31), key=lambda i: (data[i], i))
    ties = rng.integers(0, 3, 31).astype(np.float32)
    assert int(prog(data=ties)["min_idx"]) == list(ties).index(ties.min())


# ============================================================================ matrices

@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (17, 31, 13)])
def test_matmul(rng, m, k, n):
    a, b = f32(rng, m, k), f32(rng, k, n)
    out = program("matmul.zyn")(A=a, B=b)["C"]
    assert_close(out, np.einsum("ik,kj->ij", f64(a), f64(b)))


@pytest.mark.parametrize("batch,m,k,n", [(1, 1, 1, 1), (3, 5, 7, 2)])
def test_batched_matmul(rng, batch, m, k, n):
    a, b = f32(rng, batch, m, k), f32(rng, batch, k, n)
    out = program("batched_matmul.zyn")(A=a, B=b)["C"]
    assert_close(out, np.einsum("bik,bkj->bij", f64(a), f64(b)))


# ============================================================================ convolution

def run_conv(name, rng, stride, padding, batch, cin, h, w, cout, kh, kw):
    x, k, bias = f32(rng, batch, cin, h, w), f32(rng, cout, cin, kh, kw), f32(rng, cout)
    expected = conftest.conv2d_reference(f64(x), k, f64(bias), stride, padding)
    _, _, out_h, out_w = expected.shape
    out = program(name)(input=x, kernel=k, bias=bias,
                        out_h=out_h, out_w=out_w, in_h=h, in_w=w)["output"]
    assert_close(out, expected)


@pytest.mark.parametrize("shape", [(1, 1, 1, 3, 1, 3, 3), (2, 3, 7, 5, 4, 3, 3)])
def test_conv2d_stride1_padding1(rng, shape):
    run_conv("conv2d.zyn", rng, 1, 1, *shape)


@pytest.mark.parametrize("shape", [(1, 2, 5, 5, 1, 2, 2), (2, 3, 9, 8, 5, 3, 3)])
def test_conv2d_stride2_padding0(rng, shape):
    run_conv("conv2d_stride2_pad0.zyn", rng, 2, 0, *shape)


@pytest.mark.parametrize("batch,channels,h,w,kh,kw", [(1, 1, 1, 1, 1, 1), (2, 3, 7, 6, 2, 3)])
def test_conv2d_depthwise(rng, batch, channels, h, w, kh, kw):
    x, k = f32(rng, batch, channels, h, w), f32(rng, channels, kh, kw)
    out_h, out_w = h - kh + 1, w - kw + 1
    expected = np.zeros((batch, channels, out_h, out_w))
    for c in range(channels):
        for oh in range(out_h):
            for ow in range(out_w):
                patch = f64(x[:, c, oh:oh + kh, ow:ow + kw])
                expected[:, c, oh, ow] = (patch * f64(k[c])).sum(axis=(1, 2))
    out = program("conv2d_depthwise.zyn")(input=x, kernel=k, out_h=out_h, out_w=out_w)["output"]
    assert_close(out, expected)


# ============================================================================ attention

def attention_reference(q, k, v, mask=None):
    scores = np.einsum("bhid,bhjd->bhij", f64(q), f64(k)) / np.sqrt(v.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", weights, f64(v))


@pytest.mark.parametrize("batch,heads,seq,dim", [(1, 1, 1, 1), (2, 3, 5, 4)])
def test_attention_with_mask(rng, batch, heads, seq, dim):
    q, k, v = (f32(rng, batch, heads, seq, dim) for _ in range(3))
    mask = rng.random((seq, seq)) < 0.6
    np.fill_diagonal(mask, True)  # every row attends somewhere
    out = program("attention.zyn")(Q=q, K=k, V=v, mask=mask)["attn"]
    assert_close(out, attention_reference(q, k, v, mask))


def test_attention_all_true_mask_is_plain_softmax_attention(rng):
    q, k, v = (f32(rng, 2, 3, 5, 4) for _ in range(3))  # the shape above: no new compile
    out = program("attention.zyn")(Q=q, K=k, V=v, mask=np.ones((5, 5), dtype=bool))["attn"]
    assert_close(out, attention_reference(q, k, v))


@pytest.mark.parametrize("batch,heads,seq,dim", [(1, 1, 1, 1), (2, 3, 17, 5)])
def test_causal_attention(rng, batch, heads, seq, dim):
    """`if j <= i` in the three loops: query i attends to keys 0..i."""
    q, k, v = (f32(rng, batch, heads, seq, dim) for _ in range(3))
    out = program("causal_attention.zyn")(Q=q, K=k, V=v)["attn"]
    causal = np.tril(np.ones((seq, seq), dtype=bool))
    assert_close(out, attention_reference(q, k, v, causal))


def test_attention_dot_of_rows_of_different_lengths_is_an_error(rng):
    q, k = f32(rng, 1, 2, 5, 3), f32(rng, 1, 2, 5, 4)
    with pytest.raises(zynml.ZynMLError) as err:
        program("attention.zyn")(Q=q, K=k, V=q, mask=np.ones((5, 5), dtype=bool))
    assert str(err.value).startswith(f"{EXAMPLES / 'attention.zyn'}:")


@pytest.mark.parametrize("batch,heads,seq,dim", [(1, 1, 1, 1), (1, 2, 64, 5), (2, 3, 131, 7)])
def test_flash_attention_spec_tiles(rng, batch, heads, seq, dim):
    """The spec's tile-level flash attention, verbatim: 64-row tiles, so 131 rows end in
    a partial tile of 3 (for the queries and for the keys)."""
    q, k, v = (f32(rng, batch, heads, seq, dim) for _ in range(3))
    out = program("flash_attention.zyn")(Q=q, K=k, V=v)["attn"]
    assert out.shape == (batch, heads, seq, dim)
    assert_close(out, attention_reference(q, k, v))


@pytest.mark.parametrize("seq", [1, 23])
def test_flash_attention_block_causal_tiles(rng, seq):
    q, k, v = (f32(rng, 2, 3, seq, 7) for _ in range(3))
    out = program("flash_attention_block_causal.zyn")(Q=q, K=k, V=v)["attn"]
    i, j = np.arange(seq)[:, None], np.arange(seq)[None, :]
    allowed = (j // 8) * 8 < (i // 16) * 16 + 16  # key tiles starting before the query tile ends
    assert_close(out, attention_reference(q, k, v, allowed))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (37, 11, 5)])
def test_tiled_matmul_with_epilogue(rng, m, k, n):
    a, b, scale = f32(rng, m, k), f32(rng, k, n), f32(rng, m)
    out = program("tiled_matmul.zyn")(A=a, B=b, scale=scale)["y"]
    assert_close(out, np.maximum(f64(a) @ f64(b), 0.0) * f64(scale)[:, None])


# ============================================================================ custom kernels

@pytest.mark.parametrize("shape", [(1, 1), (2, 3, 5)])
def test_fused_softmax_over_the_whole_tensor(rng, shape):
    logits = f32(rng, *shape)
    out = program("fused_softmax.zyn")(logits=logits)["probs"]
    e = np.exp(f64(logits) - float(np.max(logits)))
    assert_close(out, e / e.sum())


def layer_norm_reference(x, gamma, beta, eps):
    mean = x.sum(axis=-1, keepdims=True) / x.shape[-1]
    var = ((x - mean) ** 2).sum(axis=-1, keepdims=True) / x.shape[-1]
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


@pytest.mark.parametrize("batch,hidden", [(1, 1), (5, 13)])
def test_layer_norm(rng, batch, hidden):
    x, gamma, beta = f32(rng, batch, hidden), f32(rng, hidden), f32(rng, hidden)
    out = program("layer_norm.zyn")(x=x, gamma=gamma, beta=beta, eps=1e-5)["normalized"]
    assert out.dtype == np.float32
    assert_close(out, layer_norm_reference(f64(x), f64(gamma), f64(beta), 1e-5))


def test_layer_norm_f64(rng):
    x, gamma, beta = rng.standard_normal((3, 17)), rng.standard_normal(17), rng.standard_normal(17)
    # A 0-d f64 array: a Python float (and np.float64, a float subclass) binds as f32.
    eps = np.array(1e-5)
    out = program("layer_norm.zyn")(x=x, gamma=gamma, beta=beta, eps=eps)["normalized"]
    assert out.dtype == np.float64
    assert_close(out, layer_norm_reference(x, gamma, beta, 1e-5), rtol=1e-12)


@pytest.mark.parametrize("batch,heads,seq,half", [(1, 1, 1, 1), (2, 3, 5, 4)])
def test_rope(rng, batch, heads, seq, half):
    x = f32(rng, batch, heads, seq, 2 * half)
    cos_cache, sin_cache = f32(rng, seq, half), f32(rng, seq, half)
    out = program("rope.zyn")(x=x, cos_cache=cos_cache, sin_cache=sin_cache,
                              head_dim=2 * half)["rotated"]
    expected = np.empty(x.shape)
    for s in range(seq):
        for d in range(half):
            x0, x1 = f64(x[:, :, s, 2 * d]), f64(x[:, :, s, 2 * d + 1])
            c, sn = float(cos_cache[s, d]), float(sin_cache[s, d])
            expected[:, :, s, 2 * d] = x0 * c - x1 * sn
            expected[:, :, s, 2 * d + 1] = x0 * sn + x1 * c
    assert_close(out, expected)


# ============================================================================ transformer block

def test_transformer_qkv_projection(rng):
    x, w = f32(rng, 2, 3, 5), f32(rng, 5, 15)
    out = program("transformer_qkv_proj.zyn")(x=x, qkv_proj=w)["qkv"]
    assert_close(out, np.einsum("bsi,ih->bsh", f64(x), f64(w)))


def test_transformer_output_projection(rng):
    x, w = f32(rng, 1, 5, 7), f32(rng, 7, 7)
    out = program("transformer_out_proj.zyn")(attn_out=x, out_proj=w)["projected"]
    assert_close(out, np.einsum("bsi,ih->bsh", f64(x), f64(w)))


@pytest.mark.parametrize("batch,seq,hidden", [(1, 1, 1), (2, 3, 13)])
def test_transformer_residual_layernorm(rng, batch, seq, hidden):
    x, projected = f32(rng, batch, seq, hidden), f32(rng, batch, seq, hidden)
    ln_weight, ln_bias = f32(rng, hidden), f32(rng, hidden)
    out = program("transformer_residual_layernorm.zyn")(
        x=x, projected=projected, ln_weight=ln_weight, ln_bias=ln_bias)["normed"]
    expected = layer_norm_reference(f64(x) + f64(projected), f64(ln_weight), f64(ln_bias), 1e-6)
    assert_close(out, expected)


@pytest.mark.parametrize("batch,seq,hidden,ffn_hidden", [(1, 1, 1, 1), (2, 3, 5, 7)])
def test_transformer_ffn(rng, batch, seq, hidden, ffn_hidden):
    normed = f32(rng, batch, seq, hidden)
    ffn_up, ffn_down = f32(rng, hidden, ffn_hidden), f32(rng, ffn_hidden, hidden)
    out = program("transformer_ffn.zyn")(normed=normed, ffn_up=ffn_up,
                                         ffn_down=ffn_down)["ffn_out"]
    up = np.einsum("bsh,hf->bsf", f64(normed), f64(ffn_up))
    up = 0.5 * up * (1 + np.tanh(np.sqrt(2 / np.pi) * (up + 0.044715 * up ** 3)))
    # With one element, a strongly negative pre-activation leaves a tiny output that GELU's
    # 1 + tanh(u) computes to about 1e-7 absolute in f32: measure against a unit scale.
    assert_close(out, np.einsum("bsf,fh->bsh", up, f64(ffn_down)), floor=1.0)


# ============================================================================ located errors

def compile_error(source) -> str:
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.compile(source)
    return str(err.value)


def test_spec_rope_indexes_with_a_float():
    """The spec's RoPE rebinds `s` to the sine (a float) and then indexes `out` with it.
    Before the call (dtypes unknown) the checker already sees that `s` is no loop variable;
    at the call, with the sine's dtype known, an index into an input says it is a float."""
    path = EXAMPLES / "rope_spec_verbatim.zyn"
    message = compile_error(path)
    assert message.startswith(f"{path}:12:19: error: cannot infer the output shape")
    assert f"{path}:11:9: note: 's' is bound by 'let' here" in message
    assert "let s = sin_cache[s, d]" in message


def test_float_index_into_an_input_names_the_rebinding():
    source = """let y = compute(x, sin_cache) {
    @kernel elementwise
    for s in 0..seq, d in 0..half:
        let s = sin_cache[s, d]
        out[d] = x[s, d]
}"""
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(source, x=np.ones((3, 2), np.float32), sin_cache=np.ones((3, 2), np.float32))
    message = str(err.value)
    assert message.startswith("<string>:5:20: error: index must be an integer, got f32\n")
    assert "<string>:4:9: note: 's' is bound to a f32 value here" in message


ERRORS = {
    "write_to_input": ("""let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        x[i] = 1.0
}""", "4:9", "cannot write to input 'x'"),
    "read_out_before_write": ("""let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] += x[i]
}""", "4:9", "'out' is read before it is written"),
    "rank_mismatch": ("""let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i] + x[i, 0]
}""", "4:25", "rank mismatch: 'x' has rank 1 but is indexed with 2 indices"),
    "unknown_kernel_parameter": ("""let row_sums = compute(matrix) {
    @kernel reduce(+, axs=1)
    for i in 0..rows, j in 0..cols:
        yield matrix[i, j]
}""", "2:23", "unknown parameter 'axs' of 'reduce'; expected 'axis'"),
    "yield_outside_reduction": ("""let y = compute(x) {
    @kernel elementwise
    for i in 0..len:
        yield x[i]
}""", "4:9", "'yield' outside a reduction"),
    "broadcast_of_a_non_input": ("""let scaled = compute(matrix, vector) {
    @kernel elementwise
    @broadcast(vectr, axis=1)
    for i in 0..rows, j in 0..cols:
        out[i, j] = matrix[i, j] * vector[j]
}""", "3:16", "@broadcast names 'vectr', which is not an input of this compute"),
    "elided_body": ("""let result = compute(data) {
    @kernel matmul
    ...
}""", "1:14", "compute body is elided ('...')"),
    "elided_body_with_device": ("""let gpu_result = compute(data) @device("cuda:0") {
    @kernel matmul
    ...
}""", "1:18", "compute body is elided ('...')"),
    "unknown_annotation": ("""let y = compute(x) {
    @kernel elementwise
    @foo
    for i in 0..len:
        out[i] = x[i]
}""", "3:5", "unknown annotation '@foo'"),
    "unknown_annotation_on_the_head": ("""let y = compute(x) @foo(1) {
    @kernel elementwise
    for i in 0..len:
        out[i] = x[i]
}""", "1:20", "unknown annotation '@foo'"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_located_error(name):
    source, where, phrase = ERRORS[name]
    message = compile_error(source)
    first = message.splitlines()[0]
    assert first.startswith(f"<string>:{where}: error: "), message
    assert phrase in first, message


def test_inline_elided_body():
    message = compile_error("let y = compute(x) { ... }")
    assert message.startswith("<string>:1:9: error: compute body is elided"), message


def test_unknown_annotation_lists_the_known_ones():
    message = compile_error(ERRORS["unknown_annotation"][0])
    assert "@broadcast" in message and "@workgroup" in message and "@shared" in message


def test_size_bound_two_ways_at_call_time():
    prog = program("elementwise_two_inputs.zyn")
    with pytest.raises(zynml.ZynMLError) as err:
        prog(x=np.ones(3, np.float32), y=np.ones(4, np.float32))
    path = EXAMPLES / "elementwise_two_inputs.zyn"
    message = str(err.value)
    assert message.startswith(f"{path}:6:27: error: size 'len' is bound two ways: "
                              "4 from dimension 0 of 'y' here, but 3 from dimension 0 of "
                              "'x' at 6:20\n"), message
    assert f"{path}:6:20: note: 'len' is first bound here" in message


def test_size_bound_two_ways_in_the_attention_mask(rng):
    q = f32(rng, 1, 2, 5, 3)
    with pytest.raises(zynml.ZynMLError) as err:
        program("attention.zyn")(Q=q, K=q, V=q, mask=np.ones((4, 5), dtype=bool))
    message = str(err.value)
    assert message.startswith(f"{EXAMPLES / 'attention.zyn'}:12:24: error: size 'seq_len' "
                              "is bound two ways: 5 from dimension 1 of 'mask' here, but 4 "
                              "from dimension 0 of 'mask' at 12:21\n"), message


def test_size_bound_two_ways_in_conv2d_channels(rng):
    with pytest.raises(zynml.ZynMLError) as err:
        program("conv2d.zyn")(input=f32(rng, 1, 2, 3, 3), kernel=f32(rng, 1, 3, 3, 3),
                              bias=f32(rng, 1), out_h=3, out_w=3, in_h=3, in_w=3)
    message = str(err.value)
    assert message.startswith(f"{EXAMPLES / 'conv2d.zyn'}:20:66: error: size 'in_channels' "
                              "is bound two ways: 3 from dimension 1 of 'kernel' here, but 2 "
                              "from dimension 1 of 'input' at 20:41\n"), message


def test_rank_mismatch_at_call_time(rng):
    with pytest.raises(zynml.ZynMLError) as err:
        program("matmul.zyn")(A=f32(rng, 2, 3, 4), B=f32(rng, 4, 5))
    assert str(err.value).startswith(
        f"{EXAMPLES / 'matmul.zyn'}:3:17: error: input 'A' has rank 3 but the program "
        "indexes it with 2 indices"), str(err.value)
