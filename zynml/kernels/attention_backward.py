"""flash_attention_backward's kernels: attention_backward.zyn's reductions, given the
forward's output. Gradients come back in the inputs' dtype; the scores, their
log-sum-exp and the row sums are f32 whatever it is.

On an NVIDIA GPU, f16 and bf16 without a mask (head dims up to 64) run on the CUDA
backend's FlashAttention-2 ukernel instead (zynml/backend/cuda/ukernels/
attention_backward.py): the same equations, no [rows, keys] array in memory; given the
rows' log-sum-exp by the forward ukernel (forward_with_lse, the library's
flash_attention_with_lse), it skips its sweep that makes them. The .zyn runs everywhere
else, and with ZYNML_UKERNELS=0."""
from __future__ import annotations

import weakref
from functools import lru_cache

import numpy as np

from .. import knobs
from ..call_values import is_gpu_array
from ..compile_only import ArtifactOnlyCall
from ..devices import resolve
from .basic import reshaped
from .variants import variant


def allowed_keys(seq_q: int, seq_k: int, causal: bool, mask) -> np.ndarray:
    """The [seq_q, seq_k] bool matrix of the keys each query sees (mask and causal)."""
    allowed = np.ones((seq_q, seq_k), bool)
    if causal:
        allowed &= np.arange(seq_k)[None, :] <= np.arange(seq_q)[:, None] + seq_k - seq_q
    if mask is not None:
        allowed &= np.asarray(mask, bool)
    return allowed


@lru_cache(maxsize=16)
def _host_allowed(seq_q: int, seq_k: int, causal: bool, group: int) -> np.ndarray:
    host = np.tile(allowed_keys(seq_q, seq_k, causal, None), (group, 1))
    host.flags.writeable = False
    return host


# GPU -> {(seq_q, seq_k, causal, group): its DeviceArray}; by Device, so that a new
# driver's Device (a test's fake) never gets another's memory
_ON_GPU: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def causal_allowed(device: str, seq_q: int, seq_k: int, causal: bool, group: int,
                   on_gpu: bool = True):
    """The `allowed` input without a mask, per group ([group * seq_q, seq_k]), where the
    kernel runs: made and uploaded once per shape. (An upload from host memory waits for
    the GPU's queued work: made at each call, it drained the queue once per layer of
    every backward pass.) Read-only on the host. `on_gpu` False (the other inputs are
    host arrays, which the call uploads itself): the host array."""
    key = (seq_q, seq_k, causal, group)
    placement = resolve(device)
    if placement.kind != "cuda" or not on_gpu:
        return _host_allowed(*key)
    from ..runtime.cuda.device_array import DeviceArray
    from ..runtime.cuda.driver import get_device
    gpu = get_device(placement.ordinal)
    kept = _ON_GPU.setdefault(gpu, {})
    if key not in kept:
        kept[key] = DeviceArray.from_numpy(_host_allowed(*key), gpu)
    return kept[key]


def backward(grad_out, q, k, v, o, sizes, causal, mask, scale, device, lse=None):
    """(dq, dk, dv), given the forward's output `o` and a [seq_q, seq_k] mask or None;
    `lse`: forward_with_lse's, where it gave one. The kernel takes the grouped layout
    (attention_backward.zyn): free views here."""
    batch, heads, kv_heads, seq_q, seq_k, d = sizes
    group = heads // kv_heads
    scale = _scale(scale, d)
    if mask is None:
        fast = _backward_on_ukernel(grad_out, q, k, v, o, sizes, causal, scale, device, lse)
        if fast is not None:
            return fast
    grouped = (batch * kv_heads, group * seq_q, d)
    keys = (batch * kv_heads, seq_k, d)
    allowed = np.tile(allowed_keys(seq_q, seq_k, causal, mask), (group, 1)) \
        if mask is not None else causal_allowed(device, seq_q, seq_k, causal, group,
                                                is_gpu_array(q))
    # sizes pinned static: IREE takes minutes over this kernel with dynamic sizes
    dq, dk, dv = variant("attention_backward", (), device).attention_backward(
        q=reshaped(q, grouped), k=reshaped(k, keys), v=reshaped(v, keys),
        dout=reshaped(grad_out, grouped), o=reshaped(o, grouped), allowed=allowed,
        scale=scale)
    return (reshaped(dq, (batch, heads, seq_q, d)), reshaped(dk, (batch, kv_heads, seq_k, d)),
            reshaped(dv, (batch, kv_heads, seq_k, d)))


def forward_with_lse(q, k, v, sizes, causal, scale, device):
    """(o, lse) from the attention forward ukernel, lse the rows' log-sum-exp in base 2
    (f32 [batch, heads, seq_q]); None where it does not apply; o None in a compile-only
    run (compile_only.py)."""
    batch, heads, kv_heads, seq_q, seq_k, d = sizes
    problem = _problem((q, k, v), sizes, causal, _scale(scale, d), device, False)
    if problem is None:
        return None
    try:
        o, lse = _function("attention_forward", problem, device)(
            reshaped(q, (batch * heads, seq_q, d)), reshaped(k, (batch * kv_heads, seq_k, d)),
            reshaped(v, (batch * kv_heads, seq_k, d)))
    except ArtifactOnlyCall:
        # compile-only: the artifact is built and the .zyn gives the output (None here);
        # lse's values are never read (the backward's ukernel is built, not run), its
        # shape asks for the backward that takes it
        return None, np.zeros((batch, heads, seq_q), np.float32)
    return reshaped(o, (batch, heads, seq_q, d)), reshaped(lse, (batch, heads, seq_q))


def forward_tokens(qkv, sizes, causal, scale, device):
    """(o [batch, seq, heads, d], lse) from the forward ukernel reading q, k and v where
    a fused projection's rows hold them (qkv [batch * seq, 3 * heads * d]); None where it
    does not apply; o None in a compile-only run, as forward_with_lse."""
    batch, heads, _, seq, _, d = sizes
    problem = _problem((qkv,), sizes, causal, _scale(scale, d), device, False, "tokens")
    if problem is None:
        return None
    packed, _ = _token_shapes(problem)
    try:
        o, lse = _function("attention_forward", problem, device)(reshaped(qkv, packed))
    except ArtifactOnlyCall:
        return None, np.zeros((batch, heads, seq), np.float32)
    return o, reshaped(lse, (batch, heads, seq))


def backward_tokens(grad_out, qkv, o, lse, sizes, causal, scale, device):
    """dqkv [batch * seq, 3 * heads * d] from the backward ukernel on forward_tokens'
    layout (grad_out and o token-major); None where it does not apply or in a
    compile-only run."""
    batch, heads, _, seq, _, d = sizes
    problem = _problem((qkv, grad_out, o), sizes, causal, _scale(scale, d), device, True,
                       "tokens")
    if problem is None:
        return None
    packed, rows = _token_shapes(problem)
    try:
        (dqkv,) = _function("attention_backward", problem, device)(
            reshaped(qkv, packed), reshaped(grad_out, rows), reshaped(o, rows),
            reshaped(lse, (batch * heads, seq)))
    except ArtifactOnlyCall:
        return None
    return reshaped(dqkv, (batch * seq, 3 * heads * d))


def _scale(scale, d: int) -> np.float32:
    """The scores' scale as the kernels take it: 1 / sqrt(d) unless given, in f32."""
    return np.float32(d ** -0.5 if scale is None else scale)


# (ukernel, problem, GPU ordinal) -> its CudaFunction: loaded once per process
_UKERNEL_FUNCTIONS: dict = {}


def _problem(arrays, sizes, causal, scale, device, lse_given: bool, layout: str = "heads"):
    """The ukernels' Problem for these arrays, or None where they do not apply (not
    CUDA, ZYNML_UKERNELS=0, a dtype or head dim they do not take)."""
    if not knobs.UKERNELS.get():
        return None
    if resolve(device).kind != "cuda":
        return None
    from ..backend.cuda.ukernels.attention_backward import Problem, supports
    batch, heads, kv_heads, seq_q, seq_k, d = sizes
    dtypes = {_dtype(x) for x in arrays}
    element = {"float16": "f16", "bfloat16": "bf16"}.get(next(iter(dtypes)), "")
    problem = Problem(batch * heads, batch * kv_heads, seq_q, seq_k, d, element,
                      bool(causal), float(scale), lse_given, layout,
                      batch if layout == "tokens" else 1)  # heads: batch in the slices
    return problem if len(dtypes) == 1 and supports(problem) is None else None


def _token_shapes(problem) -> tuple[list, list]:
    """The token layout's [batch, seq, 3, heads, d] and [batch, seq, heads, d]."""
    from ..backend.cuda.ukernels.attention_backward import token_shapes
    return token_shapes(problem)


def _function(name: str, problem, device: str):
    placement = resolve(device)
    key = (name, problem, placement.ordinal)
    function = _UKERNEL_FUNCTIONS.get(key)
    if function is None:
        from ..backend.cuda import ukernels
        from ..runtime.cuda.function import CudaFunction
        function = CudaFunction(ukernels.artifact(name, problem), placement.ordinal)
        _UKERNEL_FUNCTIONS[key] = function
    return function


def _backward_on_ukernel(grad_out, q, k, v, o, sizes, causal, scale, device, lse):
    """(dq, dk, dv) from the CUDA ukernel, or None where it does not apply."""
    problem = _problem((q, k, v, grad_out, o), sizes, causal, scale, device,
                       lse_given=lse is not None)
    if problem is None:
        return None
    batch, heads, kv_heads, seq_q, seq_k, d = sizes
    rows = (batch * heads, seq_q, d)
    keys = (batch * kv_heads, seq_k, d)
    given = [] if lse is None else [reshaped(lse, (batch * heads, seq_q))]
    try:
        dq, dk, dv = _function("attention_backward", problem, device)(
            reshaped(q, rows), reshaped(k, keys), reshaped(v, keys),
            reshaped(grad_out, rows), reshaped(o, rows), *given)
    except ArtifactOnlyCall:  # compile-only: the artifact is built; the .zyn gives values
        return None
    return (reshaped(dq, (batch, heads, seq_q, d)), reshaped(dk, (batch, kv_heads, seq_k, d)),
            reshaped(dv, (batch, kv_heads, seq_k, d)))


def _dtype(x) -> str:
    """The array's element type by name: numpy's, or a GPU array's of any library."""
    from ..runtime.cuda.device_array import dtype_name, gpu_array_spec
    return dtype_name(gpu_array_spec(x)[1] if is_gpu_array(x) else np.asarray(x).dtype)
