"""Writes of a `mut` input at a run-time position (docs/language.md §2): `cache[h, pos, e]
= v` and `rows[start + t, e] = v` update a slab of the caller's array, the rest keeping
its values, against numpy float64 on the CPU (IREE) and the interpreter; an offset out of
range is clamped on the compiled backends and an error in checked mode and the
interpreter. On CUDA (compiled here; the `gpu` test runs it) a KV cache's k and v are one
kernel writing the caller's buffers at the position."""
import numpy as np
import pytest

import conftest
import zynml
from conftest import assert_close
from zynml.runtime.cuda.artifact import launches
from zynml.runtime.cuda.device_array import DeviceArray
from zynml.runtime.cuda.driver import get_device

KV = """compute(mut k_cache, mut v_cache, k, v, pos) {
    @kernel elementwise
    for h in 0..heads, e in 0..dim:
        k_cache[h, pos, e] = k[h, e]
        v_cache[h, pos, e] = v[h, e] * 2.0
}
"""
ROWS = """compute(mut rows, x, start) {
    @kernel elementwise
    for t in 0..tokens, e in 0..dim:
        rows[start + t + 1, e] = x[t, e] + 1.0
}
"""
COLUMN = """compute(mut grid, x) {
    @kernel elementwise
    for i in 0..n:
        grid[i, 2] = x[i] * 3.0
}
"""
DEVICES = ["cpu", "interpreter"]
HEADS, POSITIONS, DIM = 3, 11, 5


def kv_inputs(rng):
    return dict(k_cache=rng.standard_normal((HEADS, POSITIONS, DIM)).astype(np.float32),
                v_cache=rng.standard_normal((HEADS, POSITIONS, DIM)).astype(np.float32),
                k=rng.standard_normal((HEADS, DIM)).astype(np.float32),
                v=rng.standard_normal((HEADS, DIM)).astype(np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_a_kv_cache_written_at_run_time_positions(rng, device):
    inputs = kv_inputs(rng)
    want_k, want_v = (inputs[n].astype(np.float64) for n in ("k_cache", "v_cache"))
    prog = zynml.compile(KV, device=device)
    for pos in (0, 7, POSITIONS - 1, 7):  # 7 again: overwritten, not added to
        inputs["k"], inputs["v"] = (rng.standard_normal((HEADS, DIM)).astype(np.float32)
                                    for _ in range(2))
        out = prog(**inputs, pos=pos)
        want_k[:, pos], want_v[:, pos] = inputs["k"], 2.0 * inputs["v"].astype(np.float64)
        assert out["k_cache"] is inputs["k_cache"] and out["v_cache"] is inputs["v_cache"]
        assert_close(inputs["k_cache"], want_k)
        assert_close(inputs["v_cache"], want_v)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("start,tokens", [(0, 1), (2, 7), (5, 7)])
def test_a_block_of_rows_at_a_run_time_start(rng, device, start, tokens):
    rows = rng.standard_normal((13, DIM)).astype(np.float32)
    x = rng.standard_normal((tokens, DIM)).astype(np.float32)
    want = rows.astype(np.float64)
    want[start + 1:start + 1 + tokens] = x.astype(np.float64) + 1.0
    zynml.run(ROWS, device=device, rows=rows, x=x, start=start)
    assert_close(rows, want)


@pytest.mark.parametrize("device", DEVICES)
def test_a_constant_index_writes_one_column(rng, device):
    grid = rng.standard_normal((7, 4)).astype(np.float32)
    x = rng.standard_normal(7).astype(np.float32)
    want = grid.astype(np.float64)
    want[:, 2] = 3.0 * x.astype(np.float64)
    zynml.run(COLUMN, device=device, grid=grid, x=x)
    assert_close(grid, want)


@pytest.mark.parametrize("pos,lands", [(POSITIONS + 3, POSITIONS - 1), (-2, 0)])
def test_an_offset_out_of_range_is_clamped_into_the_input(rng, pos, lands):
    inputs = kv_inputs(rng)
    want = inputs["k_cache"].astype(np.float64)
    want[:, lands] = inputs["k"]
    zynml.run(KV, device="cpu", **inputs, pos=pos)
    assert_close(inputs["k_cache"], want)


@pytest.mark.parametrize("device,checked", [("interpreter", False), ("cpu", True)])
def test_an_offset_out_of_range_is_an_error_where_it_is_checked(rng, device, checked):
    inputs = kv_inputs(rng)
    before = inputs["k_cache"].copy()
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(ROWS.replace("rows[start + t + 1", "rows[start + t"), device=device,
                  checked=checked, rows=inputs["k_cache"][0], x=inputs["k"], start=9)
    assert str(err.value).startswith("<string>:4:9: error: 'rows' is written out of bounds: "
                                     "index 11 of dimension 0, but that dimension of 'rows' "
                                     "has size 11")
    if device == "interpreter":  # nothing written (the compiled run writes, clamped)
        np.testing.assert_array_equal(inputs["k_cache"], before)


@pytest.mark.parametrize("device,checked", [("interpreter", False), ("cpu", True)])
def test_a_kv_position_out_of_range_is_an_error_where_it_is_checked(rng, device, checked):
    """The same in a block that updates two inputs (checked mode's check of the first
    write's position, against its own input's shape)."""
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(KV, device=device, checked=checked, **kv_inputs(rng), pos=POSITIONS + 1)
    assert str(err.value).startswith("<string>:4:9: error: 'k_cache' is written out of "
                                     "bounds: index 12 of dimension 1, but that dimension "
                                     "of 'k_cache' has size 11")


def test_an_index_that_scales_a_loop_by_a_run_time_value_says_so(rng):
    source = ROWS.replace("rows[start + t + 1, e]", "rows[start * t, e]")
    with pytest.raises(zynml.ZynMLError) as err:
        zynml.run(source, device="cpu", rows=rng.standard_normal((13, DIM)),
                  x=rng.standard_normal((7, DIM)), start=1)
    assert "<string>:4:9: error:" in str(err.value)
    assert "or by a value no loop changes" in str(err.value)


def test_a_kv_write_is_one_cuda_kernel_into_the_callers_buffers(rng):
    artifact = zynml.compile(KV, device="cuda", require_device=False).artifact(
        **kv_inputs(rng), pos=4)
    body = artifact.plan["body"]
    assert len(list(launches(body))) == 1
    assert [(o["value"], o.get("updates")) for o in artifact.plan["outputs"]] == \
        [("%in0", 0), ("%in1", 1)]
    assert not [s for s in body if s["op"] in ("alloc", "copy")]
    views = [s for s in body if s["op"] == "view"]  # at the clamped run-time position
    assert sorted(v["source"] for v in views) == ["%in0", "%in1"]
    assert all(isinstance(v["offsets"][1], str) for v in views)


def test_a_position_on_the_device_is_read_by_the_kernel(rng):
    """A 0-d GPU array as the position (what a graph replay reads in place): the host
    cannot compute the views, so the kernel does, from the caches and the position
    (zynml/backend/cuda/device_offsets.py)."""
    from zynml.compile_only import DeviceScalar
    artifact = zynml.compile(KV, device="cuda", require_device=False).artifact(
        **kv_inputs(rng), pos=DeviceScalar(np.array(4)))
    body = artifact.plan["body"]
    assert [s["op"] for s in body] == ["launch"]
    (launch,) = body
    kinds = dict(zip(launch["args"], launch["arg_kinds"]))
    assert kinds["%in0"] == kinds["%in1"] == "memref:3"  # the whole caches
    assert kinds["%in4"] == "memref:0"  # the position, read by the kernel
    assert launch["args"].count("%in4") == 1  # once, for both views


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_kv_cache_written_on_the_gpu(rng, kind):
    inputs = kv_inputs(rng)
    want_k, want_v = (inputs[n].astype(np.float64) for n in ("k_cache", "v_cache"))
    if kind == "torch":
        torch = pytest.importorskip("torch")
        inputs = {n: torch.from_numpy(a).cuda() for n, a in inputs.items()}
    prog = zynml.compile(KV, device="cuda:0")
    for pos in (3, 0, POSITIONS - 1):
        out = prog(**inputs, pos=pos)
        assert out["k_cache"] is inputs["k_cache"]
        want_k[:, pos] = np.asarray(inputs["k"].cpu() if kind == "torch" else inputs["k"])
        want_v[:, pos] = 2.0 * np.asarray(inputs["v"].cpu() if kind == "torch"
                                          else inputs["v"], np.float64)
    got = [inputs[n].cpu().numpy() if kind == "torch" else inputs[n]
           for n in ("k_cache", "v_cache")]
    assert_close(got[0], want_k)
    assert_close(got[1], want_v)


@pytest.mark.gpu
def test_a_position_on_the_device_written_on_the_gpu(rng):
    inputs = kv_inputs(rng)
    want_k, want_v = (inputs[n].astype(np.float64) for n in ("k_cache", "v_cache"))
    prog = zynml.compile(KV, device="cuda:0")
    if conftest.COMPILE_ONLY:  # no GPU here: the artifact a 0-d GPU array makes
        from zynml.compile_only import DeviceScalar, cpu_values_cuda_artifacts
        with cpu_values_cuda_artifacts():
            prog(**inputs, pos=DeviceScalar(np.array(7)))
        pytest.skip("compile-only: the artifact is in the cache")
    on_gpu = {n: DeviceArray.from_numpy(a, get_device(0)) for n, a in inputs.items()}
    for pos in (7, 0, POSITIONS - 1):
        prog(**on_gpu, pos=DeviceArray.from_numpy(np.array(pos, np.int64), get_device(0)))
        want_k[:, pos], want_v[:, pos] = inputs["k"], 2.0 * inputs["v"].astype(np.float64)
    assert_close(on_gpu["k_cache"].numpy(), want_k)
    assert_close(on_gpu["v_cache"].numpy(), want_v)


def test_a_block_of_dynamic_size_is_one_compile(rng):
    prog = zynml.compile(ROWS, device="cpu", dynamic=["tokens"])
    rows = rng.standard_normal((13, DIM)).astype(np.float32)
    want = rows.astype(np.float64)
    for start, tokens in ((3, 4), (0, 11), (8, 2)):
        x = rng.standard_normal((tokens, DIM)).astype(np.float32)
        want[start + 1:start + 1 + tokens] = x.astype(np.float64) + 1.0
        prog(rows=rows, x=x, start=start)
        assert_close(rows, want)
    assert prog.stats().compiles == 1
