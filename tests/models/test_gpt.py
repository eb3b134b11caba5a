"""The GPT of zynml.models against the same model in PyTorch (f32, CPU): gradients after
one step, losses of ten optimizer steps, and a resumed run (the `torch` extra; skipped
without it)."""
from __future__ import annotations

import numpy as np
import pytest

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
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import TorchGPT
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
    ref = TorchGPT(TINY, params)
    opt = ref.optimizer(lr=schedule.lr(0))
    theirs, batches = [], _batches(7)
    for step in range(10):
        ids, targets = (torch.tensor(a, dtype=torch.long) for a in batches.next())
        for group in opt.param_groups:
            group["lr"] = schedule.lr(step)
        opt.zero_grad()
        loss = ref(ids, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt.step()
        theirs.append(loss.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    resumed = Trainer(GPT(TINY, init_parameters(TINY, seed=99), "cpu"), schedule, AdamW())
    batches = _batches(7)
    resumed.load(tmp_path / "ckpt.npz", batches)
    assert resumed.step_count == 5
    assert resumed.step(batches) == pytest.approx(ours[5], rel=1e-6)


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
        assert np.abs(ours - moved).max() <= 1e-3 * np.abs(moved).max(), name


def test_a_training_step_makes_few_library_calls(monkeypatch):
    """Python-side library calls per optimizer step (a Program or pipeline call, not the
    Program call a pipeline call makes inside). Per layer: forward a LayerNorm, 4
    linears, 3 head splits, attention, its merge, a residual add + LayerNorm in one call,
    a residual add, GELU; backward 4 linears' gradients (one call each at 64-row
    multiples), GELU's, a head split, attention's (without running the forward again),
    the QKV merge, 2 LayerNorms' with the residual gradient added (one call each). Per
    parameter: its sum of squares for the clip, AdamW."""
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
    per_layer = (1 + 4 + 3 + 1 + 1 + 1 + 1 + 1) + (4 + 1 + 1 + 1 + 1 + 2)
    # embed, ln_f, the loss (one chunk); ln_f's gradients, the 2 embeddings' gradients;
    # zeroing the global sum of squares, the clip factor
    step = config.layers * per_layer + 3 + 3 + 2 + 2 * len(parameter_shapes(config))
    assert len(calls) == step
