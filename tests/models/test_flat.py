"""Flat buffers (zynml/models/flat.py): the layout of named arrays in one buffer, views
that share its memory, and the Trainer's parameters, gradients and moments living in
them (CPU; DeviceArrays on a fake driver; the GPU in tests/models/test_gpt_cuda.py)."""
from __future__ import annotations

import numpy as np
import pytest

from runtime.test_cuda_executor import fake, upload  # noqa: F401  (the fake driver)
from zynml.errors import ZynMLError
from zynml.models import data
from zynml.models.flat import (ALIGN, FlatLayout, copy_into, element_range, on_gpu_of,
                               zeros_like)
from zynml.models.gpt import GPT, GPTConfig, decays, init_parameters
from zynml.models.train import AdamW, Schedule, Trainer

# odd sizes: no array fills its aligned slot
SHAPES = {"a": (3, 5), "b": (7,), "c": (1,), "d": (2, 67), "e": (ALIGN,)}
GROUPS = {"a": True, "b": False, "c": False, "d": True, "e": False}
TINY = GPTConfig(layers=2, hidden=24, heads=3, context=16, vocab=67)


def test_each_group_is_one_contiguous_range_of_aligned_views():
    layout = FlatLayout(SHAPES, GROUPS)
    assert list(layout.slots) == ["a", "d", "b", "c", "e"]  # by group, in order
    # a: 1 slot, d (134 elements): 3; b, c, e: 1 each
    assert layout.groups == {True: (0, 4 * ALIGN), False: (4 * ALIGN, 7 * ALIGN)}
    assert layout.size == 7 * ALIGN
    for name, slot in layout.slots.items():
        assert slot.start % ALIGN == 0 and slot.shape == SHAPES[name]
        start, stop = layout.groups[GROUPS[name]]
        assert start <= slot.start and slot.start + slot.size <= stop


def test_ranges_merge_neighbours_and_take_the_padding_after_each():
    layout = FlatLayout(SHAPES, GROUPS)  # a 0..1, d 1..4, b 4..5, c 5..6, e 6..7 (ALIGNs)
    assert layout.ranges(["d", "a"]) == [(0, 4 * ALIGN)]
    assert layout.ranges(["b", "e"]) == [(4 * ALIGN, 5 * ALIGN), (6 * ALIGN, 7 * ALIGN)]
    assert layout.ranges(["c", "b", "e"]) == [(4 * ALIGN, 7 * ALIGN)]
    assert layout.ranges([]) == []


def test_views_share_the_flat_buffers_memory(rng):
    layout = FlatLayout(SHAPES, GROUPS)
    arrays = {n: rng.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}
    flat = layout.pack(arrays)
    views = layout.views(flat)
    for name, view in views.items():
        np.testing.assert_array_equal(view, arrays[name])
        assert np.shares_memory(view, flat)
    views["d"] *= 2  # written through to the buffer, and seen through its group
    np.testing.assert_array_equal(layout.group(flat, True)[ALIGN:ALIGN + 134],
                                  2 * arrays["d"].reshape(-1))
    padding = np.ones(layout.size, bool)
    for slot in layout.slots.values():
        padding[slot.start:slot.start + slot.size] = False
    assert padding.any() and not flat[padding].any()


def test_a_large_buffer_is_whole_rows_of_the_sum_of_squares():
    from zynml.kernels import SUM_ROW
    small = FlatLayout({"a": (3, 5)}, {"a": True})
    assert small.size == 64  # one aligned view: no rows to fill
    big = FlatLayout({"a": (SUM_ROW * 4 + 7,), "b": (11, 13)}, {"a": True, "b": False})
    assert big.size % SUM_ROW == 0 and big.size >= big.groups[False][1]
    assert big.groups[False][1] < big.size  # the rows' padding belongs to no group


def test_a_wrong_shape_is_refused():
    layout = FlatLayout(SHAPES, GROUPS)
    with pytest.raises(ZynMLError, match=r"'b' has shape \(8,\); the layout has \(7,\)"):
        layout.pack({**{n: np.zeros(s) for n, s in SHAPES.items()}, "b": np.zeros(8)})
    with pytest.raises(ZynMLError, match=r"copy_into: shape \(3,\) into \(4,\)"):
        copy_into(np.zeros(4, np.float32), np.zeros(3, np.float32))


def test_copies_and_ranges_on_the_host(rng):
    flat = zeros_like(11, np.zeros(1, np.float32))
    assert flat.dtype == np.float32 and flat.shape == (11,)
    source = rng.standard_normal(4).astype(np.float32)
    source.flags.writeable = False  # as the CPU run time's results are
    assert copy_into(element_range(flat, 3, 7), source) is not None
    np.testing.assert_array_equal(flat[3:7], source)
    assert not flat[:3].any() and not flat[7:].any()


def _batches(seed):
    tokens = np.random.default_rng(seed).integers(0, TINY.vocab, 3000).astype(np.int32)
    return data.Batches(tokens, 2, 13, seed)


def test_the_trainer_keeps_parameters_gradients_and_moments_flat():
    params = init_parameters(TINY, seed=4)
    model = GPT(TINY, {n: p.copy() for n, p in params.items()}, "cpu")
    trainer = Trainer(model, Schedule(), AdamW())
    flat = trainer._params
    for name, value in model.params.items():  # the same values, now views of one buffer
        assert np.shares_memory(value, flat)
        np.testing.assert_array_equal(value, params[name])
    trainer.step(_batches(1))
    trainer.step(_batches(2))
    layout = trainer.layout
    assert set(layout.groups) == {True, False}
    for name in model.params:
        start, stop = layout.groups[decays(name, TINY)]
        assert start <= layout.slots[name].start < stop
    # every parameter moved, every padding element of every buffer is still zero
    for name, value in model.params.items():
        assert not np.array_equal(value, params[name]), name
    padding = np.ones(layout.size, bool)
    for slot in layout.slots.values():
        padding[slot.start:slot.start + slot.size] = False
    for buffer in (trainer._params, trainer._grads):
        assert not np.asarray(buffer)[padding].any()


def test_the_moments_are_their_parameters_by_name():
    """After one unclipped step, AdamW's moments are (1 - beta1) g and (1 - beta2) g^2
    of each parameter's own gradient (so a checkpoint names them right)."""
    opt = AdamW(clip=0.0)
    trainer = Trainer(GPT(TINY, init_parameters(TINY, seed=7), "cpu"), Schedule(), opt)
    trainer.step(_batches(4))
    for name, (m, v) in trainer.moments.items():
        g = np.asarray(trainer.gradients[name], np.float64)
        assert m.shape == v.shape == g.shape == trainer.model.params[name].shape, name
        np.testing.assert_allclose(m, (1 - opt.beta1) * g, rtol=1e-5,
                                   atol=1e-7 * np.abs(g).max(), err_msg=name)
        np.testing.assert_allclose(v, (1 - opt.beta2) * g * g, rtol=1e-5,
                                   atol=1e-7 * np.abs(g * g).max(), err_msg=name)


def test_backward_into_arrays_gives_what_backward_returns():
    params = init_parameters(TINY, seed=6)
    model = GPT(TINY, params, "cpu")
    ids, targets = _batches(3).next()
    model.forward(ids, targets)
    want = model.backward()
    into = {n: np.full(p.shape, np.nan, np.float32) for n, p in params.items()}
    model.forward(ids, targets)
    assert model.backward(into=into) is into
    for name, grad in want.items():
        np.testing.assert_array_equal(into[name], grad, err_msg=name)


def test_flat_buffers_on_a_gpu_through_the_fake_driver(fake, rng):
    """The CUDA side, on the recording fake driver (tests/runtime/test_cuda_executor.py):
    a packed buffer uploaded once, views at their offsets that keep it alive, a zeroed
    buffer by one memset, and copy_into as one device-to-device copy into the view."""
    layout = FlatLayout(SHAPES, GROUPS)
    arrays = {n: rng.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}
    like = upload(arrays["a"])
    flat = on_gpu_of(layout.pack(arrays), like)
    views = layout.views(flat)
    for name, view in views.items():
        assert view.ptr == flat.ptr + 4 * layout.slots[name].start and view.ptr % 16 == 0
        np.testing.assert_array_equal(view.numpy(), arrays[name])
    group = layout.group(flat, False)
    assert group.shape == (3 * ALIGN,) and group.ptr == flat.ptr + 4 * 4 * ALIGN
    zeros = zeros_like(layout.size, like)
    assert fake.memsets[-1] == (zeros.ptr, 0, 4 * layout.size)
    source = upload(arrays["d"])
    mark = fake.mark()
    target = layout.views(zeros)["d"]
    assert copy_into(target, source) is target
    assert fake.since(mark).copies == [(target.ptr, source.ptr, source.nbytes)]
    got = zeros.numpy()
    np.testing.assert_array_equal(got[ALIGN:ALIGN + 134], arrays["d"].reshape(-1))
    assert not got[:ALIGN].any() and not got[ALIGN + 134:].any()
    with pytest.raises(ZynMLError, match="copy_into: shape"):
        copy_into(views["b"], source)
