"""Cross-entropy, and fused linear + cross-entropy.

Both mean over the rows whose target is not `pad_id` and return the gradients that mean
gives. The kernels are zynml/kernels/src/cross_entropy.zyn and linear_cross_entropy.zyn;
on a GPU every result stays on the device (the loss a 0-d array), so nothing waits.
Losses and gradients are f32 whatever the logits' precision (the sums are f32).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ZynMLError
from .basic import _placement, row_range, transpose_2d
from .library import device_of
from .training import SPLIT_MULTIPROCESSORS, SUM_US
from .variants import variant

__all__ = ["cross_entropy", "fused_linear_cross_entropy"]

NO_PAD = -1  # pad_id=None: no target equals it (targets are in 0..vocab)


class LossError(ZynMLError, ValueError):
    """Arguments of a loss that do not go together."""


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(n) for n in x.shape)


def _check_targets(fn: str, targets, rows: int) -> None:
    if _shape(targets) != (rows,):
        raise LossError(f"{fn}: targets must be [{rows}] (one per row), got "
                        f"{_shape(targets)}")
    if not np.issubdtype(np.dtype(str(targets.dtype).replace("torch.", "")), np.integer):
        raise LossError(f"{fn}: targets must be integers, got {targets.dtype}")


# The losses' row kernels hold up to 64 values a thread in registers (row_fused's
# max_points; 32 by default): a row of up to 65536 logits (GPT-2's 50304) then fits one
# block of 1024 threads, and the log-sum-exp reads it from memory once instead of twice
# (docs/performance.md, Session 24). H200, the fused loss's 4096-row bf16 chunk: that
# kernel 272 -> 168 us; H100, cross_entropy over 8192 x 50304: f32 2.20 -> 1.65 ms, bf16
# 1.81 -> 1.51 ms (32000 logits, which fit before, unchanged).
ROW_PARAMS = "row_fused.max_points=64"

# f32 on CUDA: grad_hidden summed over the vocabulary in parts (linear_cross_entropy.zyn's
# linear_cross_entropy_split). Its products run on SIMT tiles of SIMT_TILE x SIMT_TILE
# (the matmul strategy's default), and a 1024-row chunk of 768 makes 48 of them for 132
# multiprocessors: unsplit, that product took 5.8 ms of a chunk's 9.9 against 1.9 for
# each of the other two, over the same multiply-adds (H200, docs/performance.md Session
# 39). The parts: a power of two up to VOCAB_SPLIT_MAX, dividing the vocabulary into
# parts of at least VOCAB_PART_MIN, chosen by kernels.training's model: the tiles run
# in rounds of the multiprocessors, a round lasting SIMT_ROW_US per row of a part (the
# chunk's logits product: 24 rounds of k = 768 in 1.9 ms), and the parts' f32 sums
# SUM_US per element of a part; a split that saves under SPLIT_MIN_GAIN of the
# product's time is not worth its parts' memory (splits x rows x width f32). The
# tensor-core products (f16 / bf16) pick tile widths that fill the rounds instead
# (gemm_waves.py).
SIMT_TILE = 128
SIMT_ROW_US = 1.9e3 / 24 / 768
VOCAB_SPLIT_MAX, VOCAB_PART_MIN = 16, 1024
SPLIT_MIN_GAIN = 0.1


def vocab_splits(rows: int, width: int, vocab: int,
                 multiprocessors: int = SPLIT_MULTIPROCESSORS) -> int:
    """The parts grad_hidden = grad_logits @ weight ([rows, vocab] @ [vocab, width]) is
    summed in on SIMT tiles (1: unsplit)."""
    tiles = math.ceil(rows / SIMT_TILE) * math.ceil(width / SIMT_TILE)

    def cost(splits: int) -> float:
        rounds = math.ceil(tiles * splits / multiprocessors)
        return rounds * vocab / splits * SIMT_ROW_US + splits * rows * width * SUM_US

    candidates = [s for s in (2 ** n for n in range(VOCAB_SPLIT_MAX.bit_length()))
                  if vocab % s == 0 and (s == 1 or vocab // s >= VOCAB_PART_MIN)]
    best = min(candidates, key=lambda s: (cost(s), s))
    return best if cost(best) < (1 - SPLIT_MIN_GAIN) * cost(1) else 1


def cross_entropy(logits, targets, *, pad_id: int | None = None, logit_scale: float = 1.0,
                  device: str | None = None):
    """(loss, grad_logits) of the mean cross-entropy of logits [rows, vocab] against
    integer targets [rows], over the rows whose target != pad_id; grad_logits is
    (softmax - onehot) / count, zero on padded rows (and everything 0 when every row is
    padded). `logit_scale` multiplies the logits first (1 / temperature)."""
    fn = "cross_entropy"
    if len(_shape(logits)) != 2:
        raise LossError(f"{fn}: logits must be [rows, vocab], got {_shape(logits)}")
    _check_targets(fn, targets, _shape(logits)[0])
    prog = variant("cross_entropy", (), device or device_of([logits, targets]), ROW_PARAMS)
    out = prog(logits=logits, targets=targets, logit_scale=np.float32(logit_scale),
               pad_id=np.int64(NO_PAD if pad_id is None else pad_id))
    return out["loss"], out["grad"]


def fused_linear_cross_entropy(hidden, weight, targets, *, pad_id: int | None = None,
                               chunk_size: int = 1024, device: str | None = None):
    """(loss, grad_hidden, grad_weight) of cross_entropy(hidden @ weight.T, targets),
    hidden [tokens, hidden_size], weight [vocab, hidden_size] (a tied LM head), without
    ever holding the [tokens, vocab] logits: `chunk_size` rows at a time, each chunk's
    logits, loss and gradients computed by one compiled program and grad_weight summed
    over the chunks (Liger-Kernel's FusedLinearCrossEntropy)."""
    fn = "fused_linear_cross_entropy"
    if len(_shape(hidden)) != 2 or len(_shape(weight)) != 2 or \
            _shape(hidden)[1] != _shape(weight)[1]:
        raise LossError(f"{fn}: hidden {_shape(hidden)} and weight {_shape(weight)} must "
                        "be [tokens, hidden_size] and [vocab, hidden_size]")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise LossError(f"{fn}: chunk_size must be a positive integer, got {chunk_size!r}")
    tokens, width = _shape(hidden)
    vocab = _shape(weight)[0]
    _check_targets(fn, targets, tokens)
    device = device or device_of([hidden, weight, targets])
    # Every chunk but a shorter last one has one shape: at most two compiles.
    prog = variant("linear_cross_entropy", (), device, ROW_PARAMS)
    split = {}  # linear_cross_entropy_split's parts, for f32 on CUDA
    if _placement(device)[1] == "cuda" and \
            str(hidden.dtype).replace("torch.", "") == "float32":
        splits = vocab_splits(min(chunk_size, tokens), width, vocab)
        split = {"splits": splits, "part": vocab // splits} if splits > 1 else {}
    run = prog.linear_cross_entropy_split if split else prog.linear_cross_entropy
    # Python's numbers, not numpy's: a call with numpy scalars among GPU arrays takes the
    # checked path (about 1 ms a chunk)
    pad = int(NO_PAD if pad_id is None else pad_id)
    # the weight transposed once, and its gradient summed transposed (the chunk says why)
    weight_t = transpose_2d(weight, device=device)
    loss, grad_weight_t = 0.0, _zeros_like_device((width, vocab), hidden)
    grad_hidden = []
    for start in range(0, tokens, chunk_size):
        stop = min(tokens, start + chunk_size)
        loss, chunk_grad, grad_weight_t = run(
            hidden=row_range(hidden, start, stop), weight=weight, weight_t=weight_t,
            targets=row_range(targets, start, stop), all_targets=targets, pad_id=pad,
            loss_in=loss, grad_weight_t_in=grad_weight_t, **split)
        grad_hidden.append(chunk_grad)
    return loss, _concat_rows(grad_hidden), transpose_2d(grad_weight_t, device=device)


def _zeros_like_device(shape: tuple[int, ...], like):
    """f32 zeros of `shape` where `like` lives (the first chunk's grad_weight_t_in)."""
    from ..call_values import is_gpu_array
    from ..runtime.cuda.device_array import DeviceArray, from_cuda_array
    if not is_gpu_array(like):
        return np.zeros(shape, np.float32)
    device = like.device if isinstance(like, DeviceArray) else \
        from_cuda_array(like, _device(like)).device
    zeros = DeviceArray.empty(shape, "float32", device)
    device.fill_bytes(zeros.ptr, 0, zeros.nbytes)
    return zeros


def _device(array):
    from ..runtime.cuda.driver import get_device
    from .library import _cuda_ordinal
    return get_device(_cuda_ordinal(array))


def _concat_rows(parts: list):
    """The chunks' rows as one array, on their device (copies on the GPU, no host trip)."""
    from ..runtime.cuda.device_array import DeviceArray
    if len(parts) == 1:
        return parts[0]
    if not isinstance(parts[0], DeviceArray):
        return np.concatenate([np.asarray(p) for p in parts])
    first = parts[0]
    rows = sum(p.shape[0] for p in parts)
    out = DeviceArray.empty((rows, *first.shape[1:]), first._dtype_name, first.device)
    offset = 0
    for part in parts:
        first.device.copy_on_device(out.ptr + offset, part.ptr, part.nbytes)
        offset += part.nbytes
    return out
