"""float64 numpy references of the attention and loss kernels (tests/kernels)."""
import numpy as np


def allowed(seq_q, seq_k, causal=False, mask=None):
    """The keys each query sees: bottom-right causal (j <= i + seq_k - seq_q) and mask."""
    keep = np.ones((seq_q, seq_k), bool)
    if causal:
        keep &= np.arange(seq_k)[None, :] <= np.arange(seq_q)[:, None] + seq_k - seq_q
    return keep if mask is None else keep & mask


def _probabilities(q, k, keep, scale):
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    s = np.where(keep, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def attention(q, k, v, keep, scale=None):
    """softmax(q k^T * scale over `keep`) v, q [b, h, sq, d], k and v [b, kv_heads, sk, d]."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, 1), np.repeat(v, group, 1)
    return _probabilities(q, k, keep, scale) @ v


def log_sum_exp2(q, k, keep, scale=None):
    """The rows' log2 of the sum of exp2(score * scale * log2 e) over the keys they see:
    log2(sum exp(score * scale)) = flash_attention_with_lse's lse, [b, h, sq]."""
    q, k = (np.asarray(a, np.float64) for a in (q, k))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    k = np.repeat(k, q.shape[1] // k.shape[1], 1)
    s = np.where(keep, np.einsum("bhid,bhjd->bhij", q, k) * scale, -np.inf)
    top = s.max(-1, keepdims=True)
    return (top[..., 0] + np.log(np.exp(s - top).sum(-1))) / np.log(2)


def attention_backward(dout, q, k, v, keep, scale=None):
    """(dq, dk, dv) of `attention` by its analytic gradient; dk and dv summed over each
    group of query heads."""
    q, k, v, dout = (np.asarray(a, np.float64) for a in (q, k, v, dout))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, group, 1), np.repeat(v, group, 1)
    p = _probabilities(q, kk, keep, scale)
    o = p @ vv
    ds = p * (dout @ np.swapaxes(vv, -1, -2) - (dout * o).sum(-1, keepdims=True))
    dq = ds @ kk * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    dv = np.swapaxes(p, -1, -2) @ dout

    def by_group(x):
        return x.reshape(x.shape[0], -1, group, *x.shape[2:]).sum(2)
    return dq, by_group(dk), by_group(dv)


def cross_entropy(logits, targets, pad_id=None, logit_scale=1.0):
    """(loss, grad_logits) of the mean cross-entropy over the rows whose target is not
    pad_id."""
    x = np.asarray(logits, np.float64) * logit_scale
    rows = np.arange(len(targets))
    keep = np.ones(len(targets), bool) if pad_id is None else targets != pad_id
    count = max(int(keep.sum()), 1)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1, keepdims=True)) + m
    loss = ((lse[:, 0] - x[rows, targets]) * keep).sum() / count
    grad = np.exp(x - lse)
    grad[rows, targets] -= 1
    return loss, grad * keep[:, None] * logit_scale / count
