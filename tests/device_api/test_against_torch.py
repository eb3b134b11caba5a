"""Device's backward operations and AdamW on the CPU against torch.autograd and
torch.optim.AdamW in float64 (skipped where torch is not installed)."""
import numpy as np
import pytest

import zynml
from conftest import assert_close

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def dev():
    return zynml.Device("cpu")


def leaf(array):
    return torch.tensor(np.asarray(array, np.float64), requires_grad=True)


def test_softmax_backward(dev, rng):
    x, dy = rng.standard_normal((13, 37)), rng.standard_normal((13, 37))
    xt = leaf(x)
    torch.softmax(xt, dim=1).backward(torch.tensor(dy))
    y = dev.softmax(dev.upload(x))
    assert_close(dev.softmax_backward(y, dev.upload(dy)), xt.grad.numpy(), rtol=1e-5)


def test_rms_norm_backward(dev, rng):
    x, dy, w = (rng.standard_normal((11, 29)), rng.standard_normal((11, 29)),
                rng.standard_normal(29))
    xt, wt = leaf(x), leaf(w)
    torch.nn.functional.rms_norm(xt, (29,), wt, eps=1e-5).backward(torch.tensor(dy))
    grad_input, grad_weight = dev.rms_norm_backward(dev.upload(x), dev.upload(w),
                                                    dev.upload(dy), eps=1e-5)
    assert_close(grad_input, xt.grad.numpy(), rtol=1e-4)
    assert_close(grad_weight, wt.grad.numpy(), rtol=1e-4)


def test_embedding_backward(dev, rng):
    vocab, ids = 17, rng.integers(0, 17, 23)
    weight, dy = leaf(rng.standard_normal((vocab, 5))), rng.standard_normal((23, 5))
    torch.nn.functional.embedding(torch.tensor(ids), weight).backward(torch.tensor(dy))
    grad = dev.embedding_backward(dev.upload(dy), dev.upload_u32(ids), vocab)
    assert_close(grad, weight.grad.numpy())


def test_adamw_step_matches_torch_optim(dev, rng):
    param = rng.standard_normal((7, 13))
    reference = torch.nn.Parameter(torch.tensor(param))
    optimizer = torch.optim.AdamW([reference], lr=0.02, betas=(0.9, 0.98), eps=1e-8,
                                  weight_decay=0.1)
    P, M, V = dev.upload(param), dev.alloc((7, 13)), dev.alloc((7, 13))
    for step in range(1, 6):
        grad = rng.standard_normal((7, 13))
        reference.grad = torch.tensor(grad)
        optimizer.step()
        dev.adamw_step(P, dev.upload(grad), M, V, lr=0.02, beta1=0.9, beta2=0.98,
                       eps=1e-8, weight_decay=0.1, step_t=step)
        assert_close(P, reference.detach().numpy())
