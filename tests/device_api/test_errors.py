"""Device's mistakes: a wrong shape, dtype or device (or an explicit size that disagrees
with the buffers) is a DeviceAPIError, a ZynMLError naming the operation and the
argument, raised before anything runs."""
import numpy as np
import pytest

import zynml


@pytest.fixture(scope="module")
def dev():
    return zynml.Device("cpu")


def f32(*shape):
    return np.ones(shape, np.float32)


class FakeGpuArray:
    """Says it lives on a CUDA GPU (no GPU is needed to be refused)."""
    __cuda_array_interface__ = {"shape": (2, 3), "typestr": "<f4", "data": (1 << 20, False),
                                "version": 3, "strides": None}


def expect(op: str, arg: str, problem: str):
    return pytest.raises(zynml.DeviceAPIError,
                         match=rf"^error: Device\.{op}: argument '{arg}' {problem}")


def test_shapes(dev):
    with expect("matmul", "b", r"has shape \(4, 2\), but its axis 0 must be the columns "
                "of 'a' \\(3\\)"):
        dev.matmul(f32(2, 3), f32(4, 2))
    with expect("matmul", "a", r"must have rank 2, got shape \(2, 3, 4\)"):
        dev.matmul(f32(2, 3, 4), f32(4, 2))
    with expect("rms_norm", "weight", r"has shape \(5,\), but its axis 0 must be the row "
                "length of 'data'"):
        dev.rms_norm(f32(2, 3), f32(5))
    with expect("softmax_backward", "grad_output", r"has shape \(2, 4\), but must have "
                r"softmax_out's shape \(2, 3\)"):
        dev.softmax_backward(f32(2, 3), f32(2, 4))
    with expect("add_assign", "src", r"has shape \(3,\), but must have dst's shape"):
        dev.add_assign(f32(4), f32(3))
    with expect("adamw_step", "v", "has shape"):
        dev.adamw_step(f32(4), f32(4), f32(4), f32(5), lr=0.1)
    with expect("embedding_backward", "grad_output", "has shape .* must be the number of "
                "ids"):
        dev.embedding_backward(f32(3, 2), np.zeros(4, np.uint32), 10)
    with expect("bias_add", "bias", "has 4 elements, but the last axis"):
        dev.bias_add(f32(2, 3), f32(4))
    with expect("reduce_sum", "axis", r"must be an axis of shape \(2, 3\), not 2"):
        dev.reduce_sum(f32(2, 3), 2)
    with expect("reduce_sum", "data", r"has 6 elements, but shape \(4, 2\) needs 8"):
        dev.reduce_sum(f32(6), 0, shape=(4, 2))


def test_explicit_sizes_are_checked(dev):
    with expect("matmul", "k", "is 4, but the buffers give 3"):
        dev.matmul(f32(2, 3), f32(3, 5), m=2, k=4, n=5)
    with expect("softmax", "row_len", "is 7, but the buffers give 3"):
        dev.softmax(f32(2, 3), row_len=7)
    with expect("matmul", "a", "has 6 elements, not m \\* k = 8"):
        dev.matmul(f32(6), f32(4, 5), m=2, k=4)
    with expect("embedding", "seq_len", "is 2, but the buffers give 3"):
        dev.embedding(f32(5, 2), np.zeros(3, np.uint32), seq_len=2)
    with expect("transpose_2d", "rows", "is a size, a non-negative integer, not 2.5"):
        dev.transpose_2d(f32(2, 3), rows=2.5)
    with expect("embedding_backward", "vocab_size", "must be a positive integer"):
        dev.embedding_backward(f32(3, 2), np.zeros(3, np.uint32), 0)


def test_dtypes(dev):
    with expect("matmul", "b", "has dtype float64, but 'a' has float32"):
        dev.matmul(f32(2, 3), np.ones((3, 2)))
    with expect("softmax", "data", "must be a float buffer .* got int32"):
        dev.softmax(np.ones((2, 3), np.int32))
    with expect("embedding", "ids", r"must hold integer ids \(u32, i32, i64, ...\), got "
                "float32"):
        dev.embedding(f32(5, 2), f32(3))
    with expect("add_assign", "src", "has dtype float64"):
        dev.add_assign(f32(3), np.ones(3))
    with expect("upload_u32", "data", "must hold integers from 0 to 2\\^32 - 1"):
        dev.upload_u32([1, -2])


def test_devices(dev):
    with expect("matmul", "a", "lives on cuda:0, but this device is cpu; download it first"):
        dev.matmul(FakeGpuArray(), f32(3, 2))
    with expect("softmax", "data", "must be a buffer of this device, not list"):
        dev.softmax([[1.0, 2.0]])
    with expect("elementwise", r"inputs\[1\]", "must be a buffer of this device, not float"):
        dev.elementwise([f32(3), 2.0], lambda x, y: x + y)


def test_in_place_buffers_must_be_distinct(dev):
    p = f32(4)
    with expect("adamw_step", "m", "is the same buffer as 'param'"):
        dev.adamw_step(p, f32(4), p, f32(4), lr=0.1)
    with expect("add_assign", "src", "is the same buffer as 'dst'"):
        dev.add_assign(p, p)
    with expect("adamw_step", "step_t", "counts steps from 1, not 0"):
        dev.adamw_step(f32(4), f32(4), f32(4), f32(4), lr=0.1, step_t=0)


def test_a_device_not_present_is_a_zynml_error():
    present = {d["id"] for d in zynml.compute_devices()}
    if "cuda:7" not in present:
        with pytest.raises(zynml.ZynMLError, match="device 'cuda:7' is not available"):
            zynml.Device("cuda:7")
    with pytest.raises(zynml.ZynMLError, match="unknown device 'tpu'"):
        zynml.Device("tpu")
