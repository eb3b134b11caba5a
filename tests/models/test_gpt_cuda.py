"""The GPT of zynml.models on CUDA against PyTorch on the same GPU (f32): the loss and
every gradient after one step, and three optimizer steps. Under ZYNML_GPU_COMPILE_ONLY
(tools/gpu_tests.sh compile, no GPU) every CUDA kernel call compiles its artifact and
the chain goes on with the CPU's values (zynml/compile_only.py), so the GPU machine,
which has no MLIR, finds them all in the carried cache."""
from __future__ import annotations

import numpy as np
import pytest

from zynml.models import data
from zynml.models.flat import FlatLayout, zeros_like
from zynml.models.gpt import GPT, GPTConfig, decays, init_parameters, on_device
from zynml.models.train import AdamW, Schedule, Trainer

from conftest import COMPILE_ONLY

CONFIG = GPTConfig(layers=2, hidden=64, heads=4, context=32, vocab=257)


def _batches(seed):
    tokens = np.random.default_rng(seed).integers(0, CONFIG.vocab, 5000).astype(np.int32)
    return data.Batches(tokens, 3, 31, seed)


@pytest.mark.gpu
def test_cuda_gpt_step_matches_pytorch(device):
    params = init_parameters(CONFIG, seed=11)
    ids, targets = _batches(2).next()
    model = GPT(CONFIG, on_device({n: p.copy() for n, p in params.items()}, device), device)
    loss = float(model.forward(ids, targets))
    grads = {n: np.asarray(g, dtype=np.float64) for n, g in model.backward().items()}
    if COMPILE_ONLY:
        pytest.skip("compile-only: the artifacts are in the cache")
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import TorchGPT
    ref = TorchGPT(CONFIG, params, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    ref_loss = ref(torch.tensor(ids, dtype=torch.long, device="cuda"),
                   torch.tensor(targets, dtype=torch.long, device="cuda"))
    ref_loss.backward()
    assert loss == pytest.approx(ref_loss.item(), rel=1e-4)
    for name, want in ref.gradients().items():
        scale = np.abs(want).max() + 1e-12
        assert np.abs(grads[name] - want).max() / scale < 1e-3, name


@pytest.mark.gpu
def test_cuda_backward_into_flat_views_gives_what_backward_returns(device):
    """The Trainer's path: each gradient copied on the device into its view of one flat
    DeviceArray (the token embedding's scattered into its view), padding left zero."""
    params = init_parameters(CONFIG, seed=8)
    model = GPT(CONFIG, on_device({n: p.copy() for n, p in params.items()}, device), device)
    ids, targets = _batches(4).next()
    model.forward(ids, targets)
    want = {n: np.asarray(g) for n, g in model.backward().items()}
    layout = FlatLayout({n: p.shape for n, p in params.items()},
                        {n: decays(n, CONFIG) for n in params})
    flat = zeros_like(layout.size, model.params["wte"])
    model.forward(ids, targets)
    model.backward(into=layout.views(flat))
    if COMPILE_ONLY:
        pytest.skip("compile-only: the artifacts are in the cache")
    got, padding = np.asarray(flat), np.ones(layout.size, bool)
    for name, slot in layout.slots.items():
        padding[slot.start:slot.start + slot.size] = False
        # the same kernels; the embedding's scatter adds in the atomics' order
        np.testing.assert_allclose(got[slot.start:slot.start + slot.size].reshape(slot.shape),
                                   want[name], rtol=1e-5,
                                   atol=1e-6 * np.abs(want[name]).max(), err_msg=name)
    assert not got[padding].any()


@pytest.mark.gpu
def test_cuda_gpt_trains(device):
    model = GPT(CONFIG, on_device(init_parameters(CONFIG, seed=4), device), device)
    trainer = Trainer(model, Schedule(max_lr=3e-3, min_lr=3e-4, warmup=1, steps=3), AdamW())
    # a periodic text, which three steps do learn (random tokens could not be)
    tokens = (np.arange(5000) * 7 % 31).astype(np.int32)
    batches = data.Batches(tokens, 3, 31, 5)
    losses = [trainer.step(batches) for _ in range(3)]
    if COMPILE_ONLY:
        pytest.skip("compile-only: the artifacts are in the cache")
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.gpu
def test_cuda_clipped_accumulated_steps_match_pytorch(device):
    """64-row micro-batches (the one-call linear and LayerNorm gradients), two per step,
    and a clip that bites, applied on the device inside AdamW: the global norms and the
    parameters after two steps against torch's clip_grad_norm_ + AdamW on the same GPU."""
    params = init_parameters(CONFIG, seed=13)
    schedule = Schedule(max_lr=3e-3, min_lr=3e-4, warmup=1, steps=4)
    model = GPT(CONFIG, on_device({n: p.copy() for n, p in params.items()}, device), device)
    trainer = Trainer(model, schedule, AdamW(clip=0.05), accumulation=2)
    tokens = np.random.default_rng(3).integers(0, CONFIG.vocab, 5000).astype(np.int32)
    batches, norms = data.Batches(tokens, 2, 32, 3), []
    for _ in range(2):
        trainer.step(batches)
        norms.append(trainer.grad_norm)
    if COMPILE_ONLY:
        pytest.skip("compile-only: the artifacts are in the cache")
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import TorchGPT
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = TorchGPT(CONFIG, params, device="cuda")
    opt = ref.optimizer(lr=schedule.lr(0))
    batches, ref_norms = data.Batches(tokens, 2, 32, 3), []
    for step in range(2):
        for group in opt.param_groups:
            group["lr"] = schedule.lr(step)
        opt.zero_grad()
        for _ in range(2):
            ids, targets = (torch.tensor(a, dtype=torch.long, device="cuda")
                            for a in batches.next())
            (ref(ids, targets) / 2).backward()
        ref_norms.append(float(torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.05)))
        opt.step()
    np.testing.assert_allclose(norms, ref_norms, rtol=1e-3)
    assert min(ref_norms) > 0.05  # the clip did bite
    for name, weight in zip(ref.names, ref.weights):
        moved = weight.detach().double().cpu().numpy() - params[name]
        ours = np.asarray(model.params[name], np.float64) - params[name]
        assert np.abs(ours - moved).max() <= 1e-2 * np.abs(moved).max(), name


# sizes the tensor-core strategies tile (rows, widths and vocabulary multiples of 128)
BF16_CONFIG = GPTConfig(layers=2, hidden=128, heads=2, context=64, vocab=512)


@pytest.mark.gpu
@pytest.mark.parametrize("seq", [64, 61])
def test_cuda_bf16_mixed_precision_matches_pytorch_bf16(device, seq):
    """precision="bf16" on the GPU: ten steps' losses within 1e-2 of PyTorch's same
    model computing in bf16 from f32 master weights, at tiled sizes (2 x 64 rows: the
    products on wgmma) and at odd ones (2 x 61)."""
    params = init_parameters(BF16_CONFIG, seed=17)
    schedule = Schedule(max_lr=3e-3, min_lr=3e-4, warmup=3, steps=10)
    tokens = (np.arange(9000) * 7 % 31).astype(np.int32)  # periodic: ten steps learn it
    model = GPT(BF16_CONFIG, on_device({n: p.copy() for n, p in params.items()}, device),
                device)
    trainer = Trainer(model, schedule, AdamW(), precision="bf16")
    batches = data.Batches(tokens, 2, seq, 5)
    ours = [trainer.step(batches) for _ in range(10)]
    if COMPILE_ONLY:
        pytest.skip("compile-only: the artifacts are in the cache")
    torch = pytest.importorskip("torch")
    from zynml.models.gpt_torch import reference_losses
    theirs = reference_losses(BF16_CONFIG, params, schedule, data.Batches(tokens, 2, seq, 5),
                              10, torch.bfloat16, device="cuda")
    np.testing.assert_allclose(ours, theirs, rtol=1e-2)
    assert ours[-1] < ours[0]
