"""The GPT of zynml.models against the same model in PyTorch (f32, CPU): gradients after
one step, losses of ten optimizer steps, and a resumed run (the `torch` extra; skipped
without it)."""
from __future__ import annotations

import numpy as np
import pytest

from zynml.errors import ZynMLError
from zynml.models import data
from zynml.models.gpt import CONFIGS, GPT, GPTConfig, init_parameters, parameter_shapes
from zynml.models.train import AdamW, Schedule, Trainer

# odd sizes: a prime vocabulary and sequence, heads of 8
TINY = GPTConfig(layers=2, hidden=24, heads=3, context=16, vocab=67)


def _batches(seed, batch=2, seq=13):
    tokens = np.random.default_rng(seed).integers(0, TINY.vocab, 4000).astype(np.int32)
    return data.Batches(tokens, batch, seq, seed)


def test_gpt2_small_has_124m_parameters():
    count = sum(int(np.prod(s)) for s in parameter_shapes(CONFIGS["gpt2"]).values())
    assert count == 124_475_904  # GPT-2 small with the vocabulary padded to 50304


def test_schedule_warms_up_then_decays_to_min():
    s = Schedule(max_lr=1.0, min_lr=0.1, warmup=4, steps=20)
    assert [s.lr(i) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s.lr(19) == pytest.approx(0.1 + 0.45 * (1 + np.cos(np.pi * 15 / 16)))
    assert s.lr(100) == pytest.approx(0.1)


def test_gradients_match_pytorch_after_one_step():
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import TorchGPT
    params = init_parameters(TINY, seed=3)
    ids, targets = _batches(1).next()
    model = GPT(TINY, {n: p.copy() for n, p in params.items()}, "cpu")
    loss = float(model.forward(ids, targets))
    grads = model.backward()
    ref = TorchGPT(TINY, params)
    ref_loss = ref(torch.tensor(ids, dtype=torch.long), torch.tensor(targets, dtype=torch.long))
    ref_loss.backward()
    assert loss == pytest.approx(ref_loss.item(), rel=1e-5)
    for name, want in ref.gradients().items():
        got = np.asarray(grads[name], dtype=np.float64)
        scale = np.abs(want).max() + 1e-12
        assert np.abs(got - want).max() / scale < 1e-3, name


def test_ten_steps_match_pytorch_and_resume(tmp_path):
    pytest.importorskip("torch")
    from zynml.models.gpt_torch import reference_losses
    params = init_parameters(TINY, seed=5)
    schedule = Schedule(max_lr=3e-3, min_lr=3e-4, warmup=3, steps=10)
    trainer = Trainer(GPT(TINY, {n: p.copy() for n, p in params.items()}, "cpu"), schedule,
                      AdamW())
    ours = []
    batches = _batches(7)
    for step in range(10):
        ours.append(trainer.step(batches))
        if step == 4:
            trainer.save(tmp_path / "ckpt.npz", batches)
    theirs = reference_losses(TINY, params, schedule, _batches(7), 10)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    resumed = Trainer(GPT(TINY, init_parameters(TINY, seed=99), "cpu"), schedule, AdamW())
    batches = _batches(7)
    resumed.load(tmp_path / "ckpt.npz", batches)
    assert resumed.step_count == 5
    assert resumed.step(batches) == pytest.approx(ours[5], rel=1e-6)


@pytest.mark.parametrize("context, seq", [(16, 13), (32, 32)])
def test_bf16_mixed_precision_matches_pytorch_bf16(context, seq, tmp_path):
    """precision="bf16": bf16 weights and activations from f32 master weights, f32
    gradients and moments. Ten steps' losses within 1e-2 of the same model computing in
    bf16 in PyTorch (from f32 master weights, as autocast does), on 26 rows (the
    column sums' one-step path) and on 64 (the two-step one); and not the f32 run's."""
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import reference_losses
    ml_dtypes = pytest.importorskip("ml_dtypes")
    config = GPTConfig(layers=2, hidden=24, heads=3, context=context, vocab=67)
    params = init_parameters(config, seed=5)
    schedule = Schedule(max_lr=3e-3, min_lr=3e-4, warmup=3, steps=10)
    tokens = np.random.default_rng(7).integers(0, config.vocab, 4000).astype(np.int32)
    batches = lambda: data.Batches(tokens, 2, seq, 7)
    model = GPT(config, {n: p.copy() for n, p in params.items()}, "cpu")
    trainer = Trainer(model, schedule, AdamW(), precision="bf16")
    assert {p.dtype for p in model.params.values()} == {np.dtype(ml_dtypes.bfloat16)}
    assert {p.dtype for p in trainer.master.values()} == {np.dtype(np.float32)}
    b = batches()
    ours = []
    for step in range(10):
        ours.append(trainer.step(b))
        if step == 4:  # the checkpoint holds the f32 master weights
            trainer.save(tmp_path / "ckpt.npz", b)
    theirs = reference_losses(config, params, schedule, batches(), 10, torch.bfloat16)
    np.testing.assert_allclose(ours, theirs, rtol=1e-2)
    f32 = Trainer(GPT(config, {n: p.copy() for n, p in params.items()}, "cpu"), schedule,
                  AdamW())
    b = batches()
    assert not np.allclose(ours, [f32.step(b) for _ in range(10)], rtol=1e-6, atol=0)
    # the compute weights are the master weights rounded once
    for name, master in trainer.master.items():
        np.testing.assert_array_equal(model.params[name],
                                      np.asarray(master).astype(ml_dtypes.bfloat16))
    resumed = Trainer(GPT(config, init_parameters(config, seed=99), "cpu"), schedule, AdamW(),
                      precision="bf16")
    b = batches()
    resumed.load(tmp_path / "ckpt.npz", b)
    assert resumed.step(b) == pytest.approx(ours[5], rel=1e-6)


def test_an_unknown_precision_is_refused():
    with pytest.raises(ZynMLError, match="precision 'f16' is not one of f32, bf16"):
        Trainer(GPT(TINY, init_parameters(TINY, 0), "cpu"), Schedule(), AdamW(),
                precision="f16")


@pytest.mark.parametrize("accumulation, clip", [(1, 0.05), (2, 0.05), (2, 0.0)])
def test_clipping_and_accumulation_match_pytorch(accumulation, clip):
    """Clipping that bites (a small ceiling), a mean over micro-batches, or neither: the
    parameters after two steps are torch's clip_grad_norm_ + AdamW's."""
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import TorchGPT
    params = init_parameters(TINY, seed=11)
    schedule = Schedule(max_lr=3e-3, min_lr=3e-4, warmup=1, steps=4)
    model = GPT(TINY, {n: p.copy() for n, p in params.items()}, "cpu")
    trainer = Trainer(model, schedule, AdamW(clip=clip), accumulation=accumulation)
    batches = _batches(13)
    norms = []
    for _ in range(2):
        trainer.step(batches)
        norms.append(trainer.grad_norm)
    ref = TorchGPT(TINY, params)
    opt = ref.optimizer(lr=schedule.lr(0))
    batches, ref_norms = _batches(13), []
    for step in range(2):
        for group in opt.param_groups:
            group["lr"] = schedule.lr(step)
        opt.zero_grad()
        for _ in range(accumulation):
            ids, targets = (torch.tensor(a, dtype=torch.long) for a in batches.next())
            (ref(ids, targets) / accumulation).backward()
        ref_norms.append(float(torch.nn.utils.clip_grad_norm_(ref.parameters(), clip or 1e9)))
        opt.step()
    np.testing.assert_allclose(norms, ref_norms, rtol=1e-4)
    if clip:
        assert min(ref_norms) > clip  # the clip did bite
    for name, weight in zip(ref.names, ref.weights):  # the updates, within 1e-3 of Adam's
        moved = weight.detach().double().numpy() - params[name]
        ours = np.asarray(model.params[name], np.float64) - params[name]
        if name.endswith("attn.c_attn.bias"):
            # the keys' bias adds q . b_k to every score of a row, which softmax ignores:
            # its gradient is rounding noise, which Adam scales by 1 / (|g| + eps) into
            # moves that differ run to run. It moves little; the rest is compared.
            keys = slice(TINY.hidden, 2 * TINY.hidden)
            assert max(np.abs(ours[keys]).max(), np.abs(moved[keys]).max()) <= \
                0.1 * np.abs(moved).max(), name
            ours, moved = np.delete(ours, keys), np.delete(moved, keys)
        assert np.abs(ours - moved).max() <= 1e-3 * np.abs(moved).max(), name


def test_a_training_step_makes_few_library_calls(monkeypatch):
    """Python-side library calls per optimizer step (a Program or pipeline call, not the
    Program call a pipeline call makes inside). Per layer: forward a LayerNorm, 4
    linears (the last with the residual add in it), the head split (q, k and v in one
    call), attention, its merge, a residual add + LayerNorm in one call, GELU; backward 4 linears' gradients (one call each at 64-row
    multiples), GELU's, a head split, attention's (without running the forward again),
    the QKV merge, 2 LayerNorms' with the residual gradient added (one call each). Per
    step, whatever the number of parameters: the flat gradient's sum of squares, the
    clip factor, AdamW on each weight-decay group's flat buffers."""
    import zynml.api as api
    calls, depth = [], [0]
    for cls in (api.Program, api._PipelineMethod):
        def counted(self, *args, _original=cls.__call__, **kwargs):
            if depth[0] == 0:
                calls.append(self)
            depth[0] += 1
            try:
                return _original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
        monkeypatch.setattr(cls, "__call__", counted)
    config = GPTConfig(layers=2, hidden=24, heads=3, context=32, vocab=67)
    trainer = Trainer(GPT(config, init_parameters(config, 0), "cpu"), Schedule(), AdamW())
    tokens = np.random.default_rng(0).integers(0, config.vocab, 4000).astype(np.int32)
    batches = data.Batches(tokens, 2, 32, 0)  # 64 rows
    trainer.step(batches)
    calls.clear()
    trainer.step(batches)
    per_layer = (1 + 4 + 1 + 1 + 1 + 1 + 1) + (4 + 1 + 1 + 1 + 1 + 2)
    # embed, ln_f, the loss (one chunk, the tied weight transposed before it and its
    # gradient after); ln_f's gradients, the 2 embeddings' gradients; the global sum of
    # squares, the clip factor; AdamW on the 2 groups (decay or not)
    step = config.layers * per_layer + 5 + 3 + 2 + 2
    assert len(calls) == step


def _counting(monkeypatch, names):
    """Calls of the kernels `names` through zynml.kernels (as train.py calls them), and
    what each returned, by name."""
    import zynml.kernels as K
    calls = {name: [] for name in names}
    for name in names:
        def counted(*args, _original=getattr(K, name), _name=name, **kwargs):
            result = _original(*args, **kwargs)
            calls[_name].append(result)
            return result
        monkeypatch.setattr(K, name, counted)
    return calls


@pytest.mark.parametrize("accumulation", [1, 3])
def test_a_step_clips_and_steps_in_a_few_calls(monkeypatch, accumulation):
    """The clip's sum of squares is one call over the flat gradient, AdamW one call per
    weight-decay group, and each micro-batch after the first adds its flat gradient in
    one call: none of it grows with the number of parameters."""
    calls = _counting(monkeypatch, ["sum_squares", "clip_scale", "adamw_step",
                                    "add_assign", "add_sum_squares"])
    trainer = Trainer(GPT(TINY, init_parameters(TINY, 1), "cpu"), Schedule(), AdamW(),
                      accumulation=accumulation)
    trainer.step(_batches(3))
    assert {name: len(c) for name, c in calls.items()} == {
        "sum_squares": 1, "clip_scale": 1, "adamw_step": 2,
        "add_assign": accumulation - 1, "add_sum_squares": 0}


@pytest.mark.parametrize("clip", [0.05, 1e9])
def test_the_clip_is_torchs_clip_grad_norm(monkeypatch, clip):
    """The factor AdamW multiplies the summed gradients by is torch.nn.utils.
    clip_grad_norm_'s on their mean over micro-batches (times 1 / micro-batches): the
    same norm, the same clipped gradients, whether the clip bites or not."""
    torch = pytest.importorskip("torch")
    calls = _counting(monkeypatch, ["clip_scale"])
    trainer = Trainer(GPT(TINY, init_parameters(TINY, 2), "cpu"), Schedule(),
                      AdamW(clip=clip), accumulation=2)
    trainer.step(_batches(5))
    summed = {name: np.array(g, np.float64) for name, g in trainer.gradients.items()}
    factor = float(np.asarray(calls["clip_scale"][0]).reshape(-1)[0])
    mean = [torch.tensor(g / 2) for g in summed.values()]
    for t in mean:
        t.grad = t.clone()
    norm = float(torch.nn.utils.clip_grad_norm_(mean, clip))
    assert trainer.grad_norm == pytest.approx(norm, rel=1e-5)
    assert (norm > clip) == (clip < 1)  # the small ceiling bites, the large one does not
    for (name, g), t in zip(summed.items(), mean):
        np.testing.assert_allclose(g * factor, t.grad.numpy(), rtol=1e-5,
                                   atol=1e-7 * np.abs(g).max(), err_msg=name)
