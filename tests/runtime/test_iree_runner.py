"""IreeModule / IreeFunction: numpy in, list of numpy arrays out, on the CPU (local-task).

`rng` (tests/conftest.py) is freshly seeded per test; inputs stay away from zero.
"""
from __future__ import annotations

import mlir.ir  # noqa: F401  (iree.runtime must work beside the mlir bindings)
import numpy as np
import pytest

from zynml.backend.cache import ArtifactCache
from zynml.backend.iree_compile import BackendError, compile_to_vmfb
from zynml.backend.targets import CPU
from zynml.runtime import IreeModule, runtime_config

MODULE = """
#id = affine_map<(d0) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @add7(%a: tensor<7xf32>, %b: tensor<7xf32>) -> tensor<7xf32> {
  %e = tensor.empty() : tensor<7xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<7xf32>, tensor<7xf32>) outs(%e : tensor<7xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<7xf32>
  return %r : tensor<7xf32>
}
func.func @matmul(%a: tensor<5x3xf32>, %b: tensor<3x11xf32>) -> tensor<5x11xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x11xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<5x11xf32>) -> tensor<5x11xf32>
  %r = linalg.matmul ins(%a, %b : tensor<5x3xf32>, tensor<3x11xf32>)
                     outs(%f : tensor<5x11xf32>) -> tensor<5x11xf32>
  return %r : tensor<5x11xf32>
}
// y = s * x + t[]: a scalar parameter, a 0-d tensor, a dynamic shape, two results.
func.func @axpy(%s: f32, %t: tensor<f32>, %x: tensor<?x3xf64>) -> (tensor<?x3xf64>, f32) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x3xf64>
  %tv = tensor.extract %t[] : tensor<f32>
  %s64 = arith.extf %s : f32 to f64
  %t64 = arith.extf %tv : f32 to f64
  %e = tensor.empty(%n) : tensor<?x3xf64>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x3xf64>) outs(%e : tensor<?x3xf64>) {
  ^bb0(%v: f64, %o: f64):
    %m = arith.mulf %s64, %v : f64
    %a = arith.addf %m, %t64 : f64
    linalg.yield %a : f64
  } -> tensor<?x3xf64>
  %sum = arith.addf %s, %tv : f32
  return %r, %sum : tensor<?x3xf64>, f32
}
// Integer and boolean scalars and tensors: where(mask, k + i, i).
func.func @ints(%k: i32, %i: tensor<4xi32>, %mask: tensor<4xi1>) -> tensor<4xi32> {
  %e = tensor.empty() : tensor<4xi32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%i, %mask : tensor<4xi32>, tensor<4xi1>) outs(%e : tensor<4xi32>) {
  ^bb0(%v: i32, %c: i1, %o: i32):
    %a = arith.addi %v, %k : i32
    %w = arith.select %c, %a, %v : i32
    linalg.yield %w : i32
  } -> tensor<4xi32>
  return %r : tensor<4xi32>
}
"""


@pytest.fixture(scope="module")
def vmfb(tmp_path_factory) -> bytes:
    return compile_to_vmfb(MODULE, CPU, cache=ArtifactCache(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def module(vmfb) -> IreeModule:
    return IreeModule(vmfb)


def nonzero(rng, shape, dtype=np.float32):
    x = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return x.astype(dtype)


def test_module_lists_its_functions(module):
    assert sorted(module.function_names) == ["add7", "axpy", "ints", "matmul"]
    assert module.function("add7") is module.function("add7")
    with pytest.raises(ValueError, match="add7, matmul"):
        module.function("nope")


def test_elementwise_and_matmul_match_numpy(module, rng):
    a, b = nonzero(rng, 7), nonzero(rng, 7)
    out = module.function("add7")(a, b)
    assert isinstance(out, list) and len(out) == 1 and type(out[0]) is np.ndarray
    np.testing.assert_allclose(out[0], a.astype(np.float64) + b.astype(np.float64), rtol=1e-6)
    x, y = nonzero(rng, (5, 3)), nonzero(rng, (3, 11))
    (c,) = module.function("matmul")(x, y)
    np.testing.assert_allclose(c, x.astype(np.float64) @ y.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_non_contiguous_inputs(module, rng):
    big = nonzero(rng, (11, 3))
    x = nonzero(rng, (3, 5)).T                        # Fortran-ordered view
    y = big.T                                         # (3, 11), not C-contiguous
    assert not x.flags.c_contiguous and not y.flags.c_contiguous
    (c,) = module.function("matmul")(x, y)
    np.testing.assert_allclose(c, x.astype(np.float64) @ y.astype(np.float64), rtol=1e-5, atol=1e-5)
    (c,) = module.function("matmul")(x.astype(">f4"), y.astype(">f4"))   # big-endian
    np.testing.assert_allclose(c, x.astype(np.float64) @ y.astype(np.float64), rtol=1e-5, atol=1e-5)
    a = nonzero(rng, 14)[::2]                         # strided
    b = nonzero(rng, 7)[::-1]                         # negative stride
    (s,) = module.function("add7")(a, b)
    np.testing.assert_allclose(s, a.astype(np.float64) + b.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("scale, shift", [
    (np.float32(1.5), np.array(-0.25, dtype=np.float32)),   # numpy scalar, 0-d array
    (np.array(1.5, dtype=np.float32), np.float32(-0.25)),   # 0-d array for a scalar parameter
    (1.5, -0.25),                                           # Python floats
    (np.float64(1.5), -0.25),
])
def test_scalars_and_0d_arrays(module, rng, scale, shift):
    x = nonzero(rng, (9, 3), np.float64)
    y, total = module.function("axpy")(scale, shift, x)
    assert y.dtype == np.float64 and y.shape == (9, 3)      # f64 kept as f64, dynamic dim
    np.testing.assert_allclose(y, 1.5 * x - 0.25, rtol=1e-12)
    assert type(total) is np.ndarray and total.shape == () and total.dtype == np.float32
    assert float(total) == pytest.approx(1.25)


def test_python_int_for_a_float_parameter_is_converted(module):
    # Pushed as raw bits, 2 would be read as a denormal float; the runner converts it.
    y, total = module.function("axpy")(2, 1, np.ones((1, 3)))
    np.testing.assert_array_equal(y, np.full((1, 3), 3.0))
    assert float(total) == 3.0


def test_integer_and_boolean_arguments(module):
    i = np.array([10, -20, 30, -40], dtype=np.int32)
    mask = np.array([True, False, False, True])
    (r,) = module.function("ints")(np.int32(5), i, mask)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, np.where(mask, i + 5, i))
    (r,) = module.function("ints")(-3, i, mask.tolist())     # list -> i1 tensor
    np.testing.assert_array_equal(r, np.where(mask, i - 3, i))


def test_results_of_successive_calls_are_independent(module, rng):
    add = module.function("add7")
    a, b = nonzero(rng, 7), nonzero(rng, 7)
    (first,) = add(a, b)
    keep = first.copy()
    for _ in range(5):
        add(b, b)
    np.testing.assert_array_equal(first, keep)


def test_wrong_arguments_raise(module):
    add = module.function("add7")
    with pytest.raises(TypeError, match="takes 2 arguments but 1"):
        add(np.ones(7, np.float32))
    with pytest.raises(ValueError, match="element type mismatch"):
        add(np.ones(7, np.float64), np.ones(7, np.float64))
    with pytest.raises(ValueError, match="shape dimension 0 mismatch"):
        add(np.ones(8, np.float32), np.ones(8, np.float32))


def test_device_is_created_once_per_driver(module):
    assert runtime_config("local-task") is runtime_config("local-task")
    assert module._config is runtime_config("local-task")


def test_other_driver_and_bad_inputs(vmfb, module, rng):
    sync = IreeModule(vmfb, driver="local-sync")
    a, b = nonzero(rng, 7), nonzero(rng, 7)
    np.testing.assert_array_equal(sync.function("add7")(a, b)[0], module.function("add7")(a, b)[0])
    with pytest.raises(BackendError, match="cannot load the vmfb"):
        IreeModule(b"definitely not a flatbuffer")
    with pytest.raises(BackendError, match="no-such-driver"):
        IreeModule(vmfb, driver="no-such-driver")


def test_results_copied_when_device_memory_is_not_mappable(vmfb, rng):
    # GPU drivers return device-local buffers; force that path on the CPU.
    fresh = IreeModule(vmfb).function("axpy")
    fresh._mappable = False
    x = nonzero(rng, (4, 3), np.float64)
    y, total = fresh(2.0, 1.0, x)
    assert type(y) is np.ndarray
    np.testing.assert_allclose(y, 2.0 * x + 1.0, rtol=1e-12)
    assert float(total) == 3.0


def test_signature_parsing():
    from zynml.runtime.iree_runner import _parse_declaration
    params, results = _parse_declaration(
        "sync func @f(%input0: tensor<?x3xf32>, %input1: i1, %input2: tensor<index>, %input3: bf16)"
        " -> (%output0: tensor<2xi64>, %output1: f64)")
    assert [(p.is_tensor, p.dtype) for p in params] == [
        (True, np.float32), (False, np.bool_), (True, np.int64), (False, None)]
    assert [(r.is_tensor, r.dtype) for r in results] == [(True, np.int64), (False, np.float64)]
    assert _parse_declaration("sync func @g()") == ([], [])
    assert _parse_declaration("something else") is None
