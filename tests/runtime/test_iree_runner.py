"""IreeModule / IreeFunction: numpy in, list of numpy arrays out, on the CPU (local-task).

`rng` (tests/conftest.py) is freshly seeded per test; inputs stay away from zero.
"""
from __future__ import annotations

import mlir.ir  # noqa: F401  (iree.runtime must work beside the mlir bindings)
import ml_dtypes
import numpy as np
import pytest

from zynml.cache import ArtifactCache
from zynml.backend.iree.compile import compile_to_vmfb
from zynml.errors import BackendError
from zynml.backend.iree.target import CPU
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
    # IREE's INVALID_ARGUMENT, said as a BackendError (running 'add7' failed: ...)
    with pytest.raises(BackendError, match="element type mismatch"):
        add(np.ones(7, np.float64), np.ones(7, np.float64))
    with pytest.raises(BackendError, match="shape dimension 0 mismatch"):
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
        "sync func @f(%input0: tensor<?x3xf32>, %input1: i1, %input2: tensor<index>,"
        " %input3: f8E5M2, %input4: tensor<4xbf16>) -> (%output0: tensor<2xi64>, %output1: f64)")
    assert [(p.is_tensor, p.dtype) for p in params] == [
        (True, np.float32), (False, np.bool_), (True, np.int64), (False, None),
        (True, np.dtype(ml_dtypes.bfloat16))]
    assert [(r.is_tensor, r.dtype) for r in results] == [(True, np.int64), (False, np.float64)]
    assert _parse_declaration("sync func @g()") == ([], [])
    assert _parse_declaration("something else") is None


# --------------------------------------------------------------------- large inputs
# Inputs of 64 KiB and more are staged (copied into reused 64-byte aligned buffers that
# IREE imports) or, with borrow_inputs=True, imported as they are.

LARGE = """
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @twice(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %x, %c0 : tensor<?x?xf32>
  %m = tensor.dim %x, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%n, %m) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %v : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
func.func @rowsum(%x: tensor<?x?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.reduce ins(%x : tensor<?x?xf32>) outs(%f : tensor<?xf32>) dimensions = [1]
      (%v: f32, %acc: f32) {
        %s = arith.addf %v, %acc : f32
        linalg.yield %s : f32
      }
  return %r : tensor<?xf32>
}
// Rows 0..7 of b pasted over a, then row sums. IREE 3.13 does the paste in place, in
// a's buffer: an input that IREE writes.
func.func @paste(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>) -> tensor<256xf32> {
  %s = tensor.extract_slice %b[0, 0] [8, 256] [1, 1] : tensor<256x256xf32> to tensor<8x256xf32>
  %t = tensor.insert_slice %s into %a[0, 0] [8, 256] [1, 1] : tensor<8x256xf32> into tensor<256x256xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<256xf32>) -> tensor<256xf32>
  %r = linalg.reduce ins(%t : tensor<256x256xf32>) outs(%f : tensor<256xf32>) dimensions = [1]
      (%v: f32, %acc: f32) {
        %q = arith.addf %v, %acc : f32
        linalg.yield %q : f32
      }
  return %r : tensor<256xf32>
}
// The result is the input: IREE returns the input's own buffer.
func.func @same(%a: tensor<256x256xf32>) -> tensor<256x256xf32> {
  return %a : tensor<256x256xf32>
}
func.func @pick(%mask: tensor<?xi1>, %v: tensor<?xi32>) -> tensor<?xi32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %v, %c0 : tensor<?xi32>
  %e = tensor.empty(%n) : tensor<?xi32>
  %r = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%mask, %v : tensor<?xi1>, tensor<?xi32>) outs(%e : tensor<?xi32>) {
  ^bb0(%c: i1, %x: i32, %o: i32):
    %zero = arith.constant 0 : i32
    %neg = arith.subi %zero, %x : i32
    %w = arith.select %c, %x, %neg : i32
    linalg.yield %w : i32
  } -> tensor<?xi32>
  return %r : tensor<?xi32>
}
"""


@pytest.fixture(scope="module")
def large_vmfb(tmp_path_factory) -> bytes:
    return compile_to_vmfb(LARGE, CPU, cache=ArtifactCache(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def large(large_vmfb) -> IreeModule:
    return IreeModule(large_vmfb)


def assert_sums_close(actual, rows):
    """actual ~ the row sums of `rows` (f32 sums: error relative to the sum of |terms|)."""
    rows = np.asarray(rows, np.float64)
    np.testing.assert_allclose(actual, rows.sum(1), rtol=0, atol=1e-5 * np.abs(rows).sum(1).max())


def at_offset(x: np.ndarray, offset: int) -> np.ndarray:
    """A copy of x whose data starts `offset` bytes past a 64-byte boundary."""
    raw = np.empty(x.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + offset
    out = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    assert out.ctypes.data % 64 == offset
    return out


@pytest.mark.parametrize("shape", [(256, 256), (64, 300), (1024, 1100), (3, 40000)])
@pytest.mark.parametrize("offset", [0, 16, 4])      # aligned; where malloc puts big arrays; odd
def test_large_inputs_match_numpy_at_any_alignment(large, rng, shape, offset):
    # (1024, 1100): over 4 MiB, copied in parallel; (3, 40000): fewer rows than threads.
    x = at_offset(nonzero(rng, shape), offset)
    keep = x.copy()
    (y,) = large.function("twice")(x)
    np.testing.assert_array_equal(y, keep * 2)
    (s,) = large.function("rowsum")(x)
    assert_sums_close(s, keep)
    np.testing.assert_array_equal(x, keep)                  # input not modified
    assert not np.shares_memory(y, x)


def test_large_non_contiguous_big_endian_and_read_only_inputs(large, rng):
    base = nonzero(rng, (600, 400))
    for x in (base.T, base[::2, ::-1], base.astype(">f4"), base[:, 100:]):
        (y,) = large.function("twice")(x)
        np.testing.assert_array_equal(y, x.astype(np.float32) * 2)
    ro = base.copy()
    ro.flags.writeable = False
    (y,) = large.function("twice")(ro)
    np.testing.assert_array_equal(y, base * 2)


def test_large_int_and_bool_inputs(large, rng):
    v = rng.integers(-1000, 1000, size=100_000, dtype=np.int32)
    mask = rng.random(100_000) < 0.5
    (r,) = large.function("pick")(mask, v)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, np.where(mask, v, -v))


def test_staging_buffers_are_reused_and_earlier_results_survive(large, rng):
    twice = large.function("twice")
    xs = [nonzero(rng, (300, 300)) for _ in range(4)]
    outs = [twice(x)[0] for x in xs]                        # results: IREE's own buffers
    for x, y in zip(xs, outs):
        np.testing.assert_array_equal(y, x * 2)
    (param,) = [p for p in twice._params]
    assert len(param.pool) == 1                             # one buffer, reused every call
    twice.release_staging()
    assert param.pool == []
    np.testing.assert_array_equal(twice(xs[0])[0], xs[0] * 2)


def test_result_that_is_an_input_owns_its_staging_buffer(large, rng):
    same = large.function("same")
    a1, a2 = nonzero(rng, (256, 256)), nonzero(rng, (256, 256))
    (r1,) = same(a1)
    (r2,) = same(a2)                                        # must not reuse r1's memory
    np.testing.assert_array_equal(r1, a1)
    np.testing.assert_array_equal(r2, a2)
    assert not np.shares_memory(r1, a1) and not np.shares_memory(r1, r2)
    keep = a1.copy()
    del a1
    import gc
    gc.collect()
    junk = [np.full((256, 256), 7.0, np.float32) for _ in range(8)]  # reuse freed memory
    np.testing.assert_array_equal(r1, keep)
    assert junk


def test_inputs_that_iree_writes_in_place_are_not_modified(large, rng):
    a, b = nonzero(rng, (256, 256)), nonzero(rng, (256, 256))
    pasted = a.astype(np.float64)
    pasted[:8] = b[:8]
    keep = a.copy()
    for _ in range(3):
        (s,) = large.function("paste")(a, b)
        assert_sums_close(s, pasted)
        np.testing.assert_array_equal(a, keep)


def test_errors_leave_large_inputs_usable(large, rng):
    with pytest.raises(BackendError, match="shape dimension 1 mismatch"):
        large.function("paste")(nonzero(rng, (256, 300)), nonzero(rng, (256, 256)))
    a, b = nonzero(rng, (256, 256)), nonzero(rng, (256, 256))
    (s,) = large.function("paste")(a, b)
    assert s.shape == (256,)


def test_concurrent_calls(large, rng):
    from concurrent.futures import ThreadPoolExecutor
    twice = large.function("twice")
    xs = [nonzero(rng, (512, 600)) for _ in range(16)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: twice(x)[0], xs))
    for x, y in zip(xs, outs):
        np.testing.assert_array_equal(y, x * 2)


def test_unparsed_signature_stages_large_arrays_too(large_vmfb, rng):
    fresh = IreeModule(large_vmfb).function("twice")
    fresh._packers = None                                   # as when there is no declaration
    for _ in range(2):
        x = at_offset(nonzero(rng, (200, 300)), 16)
        np.testing.assert_array_equal(fresh(x)[0], x * 2)
    assert len(fresh._dynamic) == 1 and len(fresh._params[-1].pool) == 1   # reused


# borrow_inputs=True: aligned arrays imported as they are, once a staged first call has
# shown that IREE neither writes nor keeps the parameter's buffer.

@pytest.fixture
def borrowing(large_vmfb) -> IreeModule:
    return IreeModule(large_vmfb, borrow_inputs=True)


def test_borrowed_inputs_are_not_copied(borrowing, rng, monkeypatch):
    from zynml.runtime import iree_runner
    twice = borrowing.function("twice")
    x0 = at_offset(nonzero(rng, (512, 512)), 0)
    np.testing.assert_array_equal(twice(x0)[0], x0 * 2)    # the probe: staged
    assert twice._params[0].writes is False
    copies = []
    monkeypatch.setattr(iree_runner, "_copy", lambda dst, src: copies.append(dst) or np.copyto(dst, src))
    outs = []
    for _ in range(3):
        x = at_offset(nonzero(rng, (512, 512)), 0)
        keep = x.copy()
        (y,) = twice(x)
        outs.append((y, keep))
        np.testing.assert_array_equal(x, keep)
        assert not np.shares_memory(y, x)
    assert copies == []                                     # zero-copy
    for y, keep in outs:                                    # no result overwritten later
        np.testing.assert_array_equal(y, keep * 2)
    unaligned = at_offset(nonzero(rng, (512, 512)), 16)     # still correct: staged
    np.testing.assert_array_equal(twice(unaligned)[0], unaligned * 2)
    assert len(copies) == 1


def test_borrowing_refuses_parameters_iree_writes_or_keeps(borrowing, rng):
    paste, same = borrowing.function("paste"), borrowing.function("same")
    for _ in range(3):
        a, b = at_offset(nonzero(rng, (256, 256)), 0), at_offset(nonzero(rng, (256, 256)), 0)
        keep = a.copy()
        pasted = keep.astype(np.float64)
        pasted[:8] = b[:8]
        assert_sums_close(paste(a, b)[0], pasted)
        np.testing.assert_array_equal(a, keep)
        (r,) = same(a)
        np.testing.assert_array_equal(r, keep)
        assert not np.shares_memory(r, a)
    assert paste._params[0].writes is True and paste._params[1].writes is False
    assert same._params[0].writes is True


def test_results_never_share_memory_with_a_borrowed_array(large_vmfb, rng):
    # Safety net behind the probe: were `same` borrowed, its result would be the caller's
    # own array; it is copied.
    same = IreeModule(large_vmfb, borrow_inputs=True).function("same")
    same._params[0].writes = False                          # as if a probe had passed
    a = at_offset(nonzero(rng, (256, 256)), 0)
    keep = a.copy()
    (r,) = same(a)
    assert not np.shares_memory(r, a)
    a[...] = 0
    np.testing.assert_array_equal(r, keep)


# --------------------------------------------------------------------- bf16
# numpy exports no bfloat16 through DLPack: large bf16 arrays are imported as their uint16
# bits, viewed with IREE's BFLOAT_16 element type; results come back as ml_dtypes.bfloat16.
# Doubling and widening are exact, so results are compared bit for bit.

BF16 = """
#id = affine_map<(d0) -> (d0)>
func.func @twice(%x: tensor<?xbf16>, %s: tensor<bf16>) -> (tensor<?xbf16>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xbf16>
  %sv = tensor.extract %s[] : tensor<bf16>
  %e = tensor.empty(%n) : tensor<?xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<?xbf16>) outs(%e : tensor<?xbf16>) {
  ^bb0(%v: bf16, %o: bf16):
    %a = arith.addf %v, %v : bf16
    %m = arith.mulf %a, %sv : bf16
    linalg.yield %m : bf16
  } -> tensor<?xbf16>
  %e32 = tensor.empty(%n) : tensor<?xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<?xbf16>) outs(%e32 : tensor<?xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %x32 = arith.extf %v : bf16 to f32
    linalg.yield %x32 : f32
  } -> tensor<?xf32>
  return %r, %w : tensor<?xbf16>, tensor<?xf32>
}
// 16-bit float scalar parameters: the VM takes their bits.
func.func @scale(%s: bf16, %h: f16, %x: tensor<?xbf16>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xbf16>
  %e = tensor.empty(%n) : tensor<?xf32>
  %h32 = arith.extf %h : f16 to f32
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<?xbf16>) outs(%e : tensor<?xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %m = arith.mulf %v, %s : bf16
    %w = arith.extf %m : bf16 to f32
    %y = arith.mulf %w, %h32 : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


@pytest.fixture(scope="module")
def bf16_vmfb(tmp_path_factory) -> bytes:
    return compile_to_vmfb(BF16, CPU, cache=ArtifactCache(tmp_path_factory.mktemp("cache")))


def bf16(rng, n):
    return nonzero(rng, n).astype(ml_dtypes.bfloat16)


def assert_bf16_twice(out, x):
    doubled, widened = out
    assert doubled.dtype == np.dtype(ml_dtypes.bfloat16) and widened.dtype == np.float32
    np.testing.assert_array_equal(doubled.view(np.uint16), (x * 2).view(np.uint16))
    np.testing.assert_array_equal(widened, x.astype(np.float32))


# 7: copied into a fresh buffer; 40009 (80 KiB): staged, at any alignment
@pytest.mark.parametrize("n,offset", [(1, 0), (7, 0), (40009, 0), (40009, 16), (40009, 2)])
def test_bf16_buffers_in_and_out(bf16_vmfb, rng, n, offset):
    twice = IreeModule(bf16_vmfb).function("twice")
    for _ in range(2):  # the second large call reuses the staging buffer
        x = at_offset(bf16(rng, n), offset)
        keep = x.copy()
        assert_bf16_twice(twice(x, np.array(1.0, ml_dtypes.bfloat16)), keep)
        np.testing.assert_array_equal(x.view(np.uint16), keep.view(np.uint16))


def test_bf16_non_contiguous_inputs(bf16_vmfb, rng):
    twice = IreeModule(bf16_vmfb).function("twice")
    for x in (bf16(rng, 14)[::2], bf16(rng, 80018)[::-2]):
        assert_bf16_twice(twice(x, np.array(1.0, ml_dtypes.bfloat16)), np.ascontiguousarray(x))


def test_bf16_scalar_tensor_takes_a_python_number(bf16_vmfb, rng):
    """A number for a 0-d bf16 parameter becomes a bf16 array (0.5: exact)."""
    x = bf16(rng, 9)
    doubled, _ = IreeModule(bf16_vmfb).function("twice")(x, 0.5)
    np.testing.assert_array_equal(doubled.view(np.uint16), x.view(np.uint16))


def test_bf16_large_inputs_are_borrowed(bf16_vmfb, rng, monkeypatch):
    from zynml.runtime import iree_runner
    twice = IreeModule(bf16_vmfb, borrow_inputs=True).function("twice")
    one = np.array(1.0, ml_dtypes.bfloat16)
    x0 = at_offset(bf16(rng, 40009), 0)
    assert_bf16_twice(twice(x0, one), x0)                # the probe: staged
    assert twice._params[0].writes is False
    copies = []
    monkeypatch.setattr(iree_runner, "_copy",
                        lambda dst, src: copies.append(dst) or np.copyto(dst, src))
    x = at_offset(bf16(rng, 40009), 0)
    out = twice(x, one)
    assert copies == []                                   # imported as it is
    assert not any(np.shares_memory(r, x) for r in out)
    assert_bf16_twice(out, x)


@pytest.mark.parametrize("s,h", [
    (2.0, 0.375), (np.array(2.0, ml_dtypes.bfloat16), np.float16(0.375)),
    (ml_dtypes.bfloat16(2.0), np.array(0.375, np.float32))])
def test_f16_and_bf16_scalar_parameters(bf16_vmfb, rng, s, h):
    """x * 2 * 0.375 is exact: a scalar pushed wrong (as a float: the VM reads 0) shows."""
    x = bf16(rng, 11)
    (y,) = IreeModule(bf16_vmfb).function("scale")(s, h, x)
    np.testing.assert_array_equal(y, x.astype(np.float64) * 0.75)

