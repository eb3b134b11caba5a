"""zynml.kernels' losses: cross_entropy and fused_linear_cross_entropy against float64
numpy on fresh random inputs of odd sizes (padding excluded from the mean, chunks that do
not divide the rows), on the CPU; their CUDA plans, compiled without a GPU."""
import json

import numpy as np
import pytest

import zynml
from zynml import kernels
from zynml.kernels import losses, variants
from zynml.runtime.cuda.artifact import launches
from conftest import assert_close

from .references import cross_entropy


def logits_and_targets(rng, rows, vocab):
    logits = (3 * rng.standard_normal((rows, vocab))).astype(np.float32)
    return logits, rng.integers(0, vocab, rows)


@pytest.mark.parametrize("rows,vocab", [(1, 5), (7, 13), (13, 101)])
@pytest.mark.parametrize("padded", [False, True])
def test_cross_entropy_matches_numpy(rng, rows, vocab, padded):
    logits, targets = logits_and_targets(rng, rows, vocab)
    pad = int(targets[0]) if padded else None
    loss, grad = kernels.cross_entropy(logits, targets, pad_id=pad, device="cpu")
    want_loss, want_grad = cross_entropy(logits, targets, pad)
    assert np.shape(loss) == ()
    # where a row's target logit is far the largest, lse - logit and softmax - 1 cancel
    # (1 seed in 50 for rows=1): the loss is then good to f32's rounding at the logits'
    # size (lse's), the gradient (softmax - onehot) / count to f32's rounding at 1 / count
    count = rows if pad is None else max(int(np.sum(targets != pad)), 1)
    assert_close(loss, want_loss, floor=np.abs(logits).max())
    assert_close(grad, want_grad, floor=1 / count)
    if padded:
        assert not np.asarray(grad)[targets == pad].any()


def test_cross_entropy_with_a_logit_scale(rng):
    logits, targets = logits_and_targets(rng, 7, 13)
    loss, grad = kernels.cross_entropy(logits, targets, logit_scale=0.5, device="cpu")
    want_loss, want_grad = cross_entropy(logits, targets, logit_scale=0.5)
    assert_close(loss, want_loss)
    assert_close(grad, want_grad)


def test_every_row_padded_gives_zeros(rng):
    logits, _ = logits_and_targets(rng, 7, 13)
    loss, grad = kernels.cross_entropy(logits, np.full(7, 2), pad_id=2, device="cpu")
    assert float(loss) == 0.0 and not np.asarray(grad).any()


@pytest.mark.parametrize("tokens,hidden,vocab,chunk", [(7, 5, 13, 3), (1, 8, 7, 4),
                                                       (13, 16, 101, 13), (13, 16, 101, 5)])
def test_fused_linear_cross_entropy_matches_numpy(rng, tokens, hidden, vocab, chunk):
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    w = rng.standard_normal((vocab, hidden)).astype(np.float32)
    targets = rng.integers(0, vocab, tokens)
    pad = int(targets[-1])
    loss, grad_hidden, grad_weight = kernels.fused_linear_cross_entropy(
        x, w, targets, pad_id=pad, chunk_size=chunk, device="cpu")
    want_loss, g = cross_entropy(x.astype(np.float64) @ w.T.astype(np.float64), targets, pad)
    assert_close(loss, want_loss)
    assert_close(grad_hidden, g @ w.astype(np.float64))
    assert_close(grad_weight, g.T @ x.astype(np.float64))


def test_fused_linear_cross_entropy_agrees_with_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((13, 16)).astype(np.float32)
    w = rng.standard_normal((101, 16)).astype(np.float32)
    targets = rng.integers(0, 101, 13)
    targets[3] = -100
    loss, grad_hidden, grad_weight = kernels.fused_linear_cross_entropy(
        x, w, targets, pad_id=-100, chunk_size=4, device="cpu")
    tx, tw = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w))
    want = torch.nn.functional.cross_entropy(tx @ tw.T, torch.tensor(targets),
                                             ignore_index=-100)
    want.backward()
    assert_close(loss, want.item())
    assert_close(grad_hidden, tx.grad.numpy())
    assert_close(grad_weight, tw.grad.numpy())


@pytest.mark.parametrize("splits,part", [(1, 13), (3, 5)])
def test_the_chunk_with_grad_hidden_in_parts_matches_numpy(rng, splits, part):
    """linear_cross_entropy_split (the f32 chunk on CUDA, fused_linear_cross_entropy's
    choice there) on the CPU: the vocabulary in `splits` parts of `part`."""
    tokens, hidden, vocab = 7, 5, splits * part
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    w = rng.standard_normal((vocab, hidden)).astype(np.float32)
    targets = rng.integers(0, vocab, tokens)
    grad_weight_t = rng.standard_normal((hidden, vocab)).astype(np.float32)
    chunk = variants.variant("linear_cross_entropy", (), "cpu")
    loss, grad_hidden, grad_weight_t_out = chunk.linear_cross_entropy_split(
        hidden=x, weight=w, weight_t=np.ascontiguousarray(w.T), targets=targets,
        all_targets=targets, pad_id=np.int64(-1), loss_in=np.float32(0.5),
        grad_weight_t_in=grad_weight_t.copy(), splits=splits, part=part)
    want_loss, g = cross_entropy(x.astype(np.float64) @ w.T.astype(np.float64), targets)
    assert_close(loss, want_loss + 0.5)
    assert_close(grad_hidden, g @ w.astype(np.float64))
    assert_close(grad_weight_t_out, grad_weight_t + x.T.astype(np.float64) @ g)


def test_grad_hidden_is_split_where_its_tiles_leave_multiprocessors_idle():
    # a 1024-row chunk of GPT-2's head: 48 tiles for 132 multiprocessors, 8 parts
    assert losses.vocab_splits(1024, 768, 50304) == 8
    assert losses.vocab_splits(4096, 768, 50304) == 2
    # enough tiles already, or gains too small for the parts' memory
    assert losses.vocab_splits(8192, 768, 50304) == 1
    assert losses.vocab_splits(4096, 4096, 32000) == 1
    # parts divide the vocabulary and hold VOCAB_PART_MIN rows at least
    assert losses.vocab_splits(1024, 768, 50257) == 1  # odd
    assert losses.vocab_splits(37, 64, 4096) == 4


def test_cuda_split_chunk_takes_the_gemm_strategy_for_its_parts():
    """The f32 chunk with grad_hidden in 8 parts: the parts' batched product (its batch
    axis grad_logits' middle one) runs on the SIMT matmul tiles, a grid layer a part, not
    on a generic kernel."""
    chunk = zynml.compile(variants.variant_source("linear_cross_entropy", ()), device="cuda",
                          require_device=False, dynamic=False
                          ).pipeline("linear_cross_entropy_split")
    f32 = np.float32
    plan = json.loads(chunk.emit("plan", dict(
        hidden=np.ones((1024, 768), f32), weight=np.ones((50304, 768), f32),
        weight_t=np.ones((768, 50304), f32), targets=np.zeros(1024, np.int64),
        all_targets=np.zeros(2048, np.int64), pad_id=np.int64(-1), loss_in=f32(0),
        grad_weight_t_in=np.zeros((768, 50304), f32), splits=8, part=6288)))
    products = [launch for launch in launches(plan["body"]) if launch["strategy"] == "matmul"]
    assert len(products) == 3, [launch["strategy"] for launch in launches(plan["body"])]
    assert [launch["grid"] for launch in products if launch["grid"][2] == 8] == [[6, 8, 8]]


@pytest.mark.parametrize("call,message", [
    (lambda x, t: kernels.cross_entropy(x[0], t), "logits must be [rows, vocab]"),
    (lambda x, t: kernels.cross_entropy(x, t[:3]), "targets must be [7]"),
    (lambda x, t: kernels.cross_entropy(x, t.astype(np.float32)), "must be integers"),
    (lambda x, t: kernels.fused_linear_cross_entropy(x, x[:, :3], t), "hidden (7, 13)"),
    (lambda x, t: kernels.fused_linear_cross_entropy(x, x, t, chunk_size=0), "chunk_size"),
])
def test_mismatched_arguments_are_named(rng, call, message):
    x, t = logits_and_targets(rng, 7, 13)
    with pytest.raises(zynml.ZynMLError, match="cross_entropy") as info:
        call(x, t)
    assert message in str(info.value)


def test_cuda_plans_keep_the_sums_in_f32():
    """bf16 logits: lse, loss and gradient come out f32 (4 kernels, no host step); the
    fused chunk's products are plain ones, on tensor cores (tiled sizes): loss and
    the weight's gradient f32, the hidden states' gradient bf16."""
    prog = zynml.compile(variants.variant_source("cross_entropy", ()), device="cuda",
                         require_device=False, dynamic=False)
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    art = prog.artifact(logits=np.ones((61, 1031), bf16), targets=np.zeros(61, np.int64),
                        pad_id=np.int64(-1), logit_scale=np.float32(1))
    assert [o["dtype"] for o in art.plan["outputs"]] == ["float32"] * 4
    assert len(list(launches(art.plan["body"]))) == 4
    chunk = zynml.compile(variants.variant_source("linear_cross_entropy", ()), device="cuda",
                          require_device=False, dynamic=False).pipeline("linear_cross_entropy")
    plan = json.loads(chunk.emit("plan", dict(
        hidden=np.ones((1024, 384), bf16), weight=np.ones((4096, 384), bf16),  # GPT small's
        weight_t=np.ones((384, 4096), bf16),
        targets=np.zeros(1024, np.int64), all_targets=np.zeros(2048, np.int64),
        pad_id=np.int64(-1), loss_in=np.float32(0),
        grad_weight_t_in=np.zeros((384, 4096), np.float32))))
    strategies = [launch["strategy"] for launch in launches(plan["body"])]
    # the three products on tensor cores: the logits (weight transposed by the caller,
    # rounded to bf16 as they are stored) and the two gradients (the logits' gradient
    # rounded to bf16 by `cast`); the chunk's hidden states are read MN-major by the
    # weight's gradient, not copied transposed
    assert "transpose" not in strategies, strategies
    assert strategies.count("matmul_wgmma") == 3, strategies
    assert "matmul" not in strategies, strategies
    assert [o["dtype"] for o in plan["outputs"]] == ["float32", "bfloat16", "float32"]
    assert plan["outputs"][2].get("updates") == 7  # grad_weight_t_in, added into in place
    logits = [step for step in plan["body"] if step["op"] == "alloc"
              and step["shape"] == [1024, 4096]]
    assert [step["dtype"] for step in logits] == ["bfloat16"]  # one buffer: the gradient's too


@pytest.mark.parametrize("params,block", [("", 256), (losses.ROW_PARAMS, 1024)])
def test_cuda_chunk_holds_a_gpt2_row_of_logits_in_registers(params, block):
    """With the chunk's params a row of GPT-2's 50304 logits fits one block of 1024
    threads' registers (up to 64 values a thread), and the log-sum-exp reads it once;
    with row_fused's defaults (32) the row is too long and its blocks of 256 threads
    loop over memory, once for the max and once for the sum."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    chunk = zynml.compile(variants.variant_source("linear_cross_entropy", ()), device="cuda",
                          require_device=False, dynamic=False,
                          params=params).pipeline("linear_cross_entropy")
    plan = json.loads(chunk.emit("plan", dict(
        hidden=np.ones((128, 64), bf16), weight=np.ones((50304, 64), bf16),
        weight_t=np.ones((64, 50304), bf16),
        targets=np.zeros(128, np.int64), all_targets=np.zeros(128, np.int64),
        pad_id=np.int64(-1), loss_in=np.float32(0),
        grad_weight_t_in=np.zeros((64, 50304), np.float32))))
    [lse] = [step for step in launches(plan["body"])
             if step["strategy"] == "row_fused" and step["grid"] == [128, 1, 1]]
    assert lse["block"] == [block, 1, 1]
