"""pointwise's vector path over operands of different widths (f32 read, bf16 written: a
mixed-precision trainer's master weights converted into its compute weights): a chunk
is 16 bytes of the widest element and as many points of the others (4 points: 16 bytes
of f32, 8 of bf16). Which accesses the kernels make (here, compile-only), and exact
results on a GPU (tools/gpu_tests.sh) at sizes off the chunk, at run-time sizes, and
from views 1 element past an aligned start (scalar accesses, checked at run time)."""
import re

import ml_dtypes
import numpy as np
import pytest

import zynml
import zynml.kernels as K
from zynml.compile_only import cpu_values_cuda_artifacts
from zynml.models.flat import element_range
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.device_array import DeviceArray

from conftest import COMPILE_ONLY, dynamic_on_gpu

CASTS = """
let narrow = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = cast(x[i] * 2.0, bf16)
}
let wide = compute(narrow, x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = cast(narrow[i], f32) - x[i]
}
"""

# 16-byte and 8-byte global accesses (vector loads and stores of 4 and 2 words)
V4_LOAD = r"\bld\.global(?:\.\w+)*\.v4\.[bf]32\b"
V2_LOAD = r"\bld\.global(?:\.\w+)*\.v2\.[bf]32\b"
V4_STORE = r"\bst\.global(?:\.\w+)*\.v4\.[bf]32\b"
V2_STORE = r"\bst\.global(?:\.\w+)*\.v2\.[bf]32\b"


def _count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_chunk_is_16_bytes_of_the_widest_element(dynamic):
    """narrow: x's 16 bytes loaded, 8 bytes of bf16 stored; wide: 8 bytes of bf16 and 16
    of f32 loaded, 16 bytes stored (before, mixed widths took a point a thread)."""
    prog = zynml.compile(CASTS, device="cuda", require_device=False, dynamic=dynamic)
    artifact = prog.artifact(x=np.ones(4096, np.float32))
    assert [s["strategy"] for s in launches(artifact.plan["body"])] == ["pointwise"] * 2
    kernels = re.split(r"(?=\.visible \.entry)", artifact.ptx)[1:]
    narrow, wide = sorted(kernels, key=lambda k: re.search(r"\.entry (\w+)", k).group(1))
    assert (_count(narrow, V4_LOAD), _count(narrow, V2_STORE)) == (1, 1)
    assert (_count(wide, V2_LOAD), _count(wide, V4_LOAD), _count(wide, V4_STORE)) == (1, 1, 1)


def _expected(x: np.ndarray):
    narrow = (x * 2).astype(ml_dtypes.bfloat16)
    return narrow, narrow.astype(np.float32) - x


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 3, 4, 4097, 4100, 4 * 100003])
def test_cuda_mixed_width_elementwise_is_exact(rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    if COMPILE_ONLY:
        zynml.compile(CASTS, device="cuda", require_device=False).artifact(x=x)
        pytest.skip("compile-only: the artifact is in the cache")
    out = zynml.compile(CASTS, device="cuda:0")(x=x)
    narrow, wide = _expected(x)
    np.testing.assert_array_equal(np.asarray(out["narrow"]), narrow)
    np.testing.assert_array_equal(np.asarray(out["wide"]), wide)


@pytest.mark.gpu
def test_cuda_mixed_width_elementwise_at_run_time_sizes(rng):
    prog = dynamic_on_gpu(CASTS, x=np.ones(4096, np.float32))
    for n in (1, 3, 4097, 4100, 4 * 100003):
        x = rng.standard_normal(n).astype(np.float32)
        out = prog(x=x)
        narrow, wide = _expected(x)
        np.testing.assert_array_equal(np.asarray(out["narrow"]), narrow)
        np.testing.assert_array_equal(np.asarray(out["wide"]), wide)
    assert prog.stats().specializations == 1


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 1, 4])
def test_cuda_convert_into_views(rng, offset):
    """The library's convert_into (f32 master weights into bf16 compute weights) into
    and from views `offset` elements into their buffers: 1 is unaligned for both (the
    kernel's scalar accesses), 0 and 4 aligned (its vector ones)."""
    n = 4 * 10007
    src = rng.standard_normal(n + 8).astype(np.float32)
    dst = np.zeros(n + 8, ml_dtypes.bfloat16)
    if COMPILE_ONLY:  # the CPU's values, the kernel compiled for the GPU
        with cpu_values_cuda_artifacts():
            K.convert_into(element_range(dst, offset, offset + n),
                           element_range(src, offset, offset + n), device="cuda:0")
        pytest.skip("compile-only: the artifact is in the cache")
    source, target = DeviceArray.from_numpy(src), DeviceArray.from_numpy(dst)
    K.convert_into(element_range(target, offset, offset + n),
                   element_range(source, offset, offset + n), device="cuda:0")
    got = target.numpy()
    np.testing.assert_array_equal(got[offset:offset + n],
                                  src[offset:offset + n].astype(ml_dtypes.bfloat16))
    untouched = np.concatenate([got[:offset], got[offset + n:]]).astype(np.float32)
    assert not untouched.any()
