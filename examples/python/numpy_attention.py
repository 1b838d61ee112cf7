"""A Python kernel for attnbench: attention in numpy, on the CPU.

    attnbench check --kernels py:numpy_attention:attention --suite ctest   # from this folder
    PYTHONPATH=examples/python attnbench run --kernels py:numpy_attention:attention --shape ...

attnbench hands the kernel views of its own buffers, indexed (batch, seqlen, heads, head_dim)
whatever the layout; it fills `out` (or returns an array shaped like it). The support table
below says what it accepts; inside it, attnbench checks every case against its exact reference.

The backward (`attention.backward`, attnbench --pass bwd): dq, dk and dv from dout, recomputing
the probabilities the textbook way; dk and dv of a GQA group sum its query heads.

    attnbench check --kernels py:numpy_attention:attention --suite ctest --pass bwd
"""

import numpy as np

__version__ = "1.0"


def _visible(problem, batch_index):
    """Boolean (seqlen_q, seqlen_k): which keys each query sees, as attnbench defines the masks."""
    sq, sk = problem.seqlen_q, problem.seqlen_k
    query = np.arange(sq)[:, None]
    key = np.arange(sk)[None, :]
    if problem.mask == "causal":
        return key <= query
    if problem.mask == "causal_br":
        return key <= query + (sk - sq)
    if problem.mask == "padding":
        return np.broadcast_to(key < problem.key_lengths[batch_index], (sq, sk))
    return np.ones((sq, sk), dtype=bool)


def _probabilities(qh, kh, visible, scale):
    """softmax(scale q k^T) over the visible keys; a row with no visible key is all zeros."""
    scores = np.where(visible, (qh @ kh.T) * scale, -np.inf)
    peak = scores.max(axis=1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    weights = np.exp(scores - peak)
    total = weights.sum(axis=1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)


def _heads(q, k, v, b, h, group):
    return (q[b, :, h, :].astype(np.float64), k[b, :, h // group, :].astype(np.float64),
            v[b, :, h // group, :].astype(np.float64))


def attention(q, k, v, out, problem):
    group = problem.heads_q // problem.heads_kv
    for b in range(problem.batch):
        visible = _visible(problem, b)
        for h in range(problem.heads_q):
            qh, kh, vh = _heads(q, k, v, b, h, group)
            out[b, :, h, :] = (_probabilities(qh, kh, visible, problem.scale) @ vh).astype(out.dtype)


def attention_backward(q, k, v, out, dout, dq, dk, dv, problem):
    """dS = P * (dP - rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO."""
    group = problem.heads_q // problem.heads_kv
    dk_sum = np.zeros(dk.shape)
    dv_sum = np.zeros(dv.shape)
    for b in range(problem.batch):
        visible = _visible(problem, b)
        for h in range(problem.heads_q):
            qh, kh, vh = _heads(q, k, v, b, h, group)
            doh = dout[b, :, h, :].astype(np.float64)
            probabilities = _probabilities(qh, kh, visible, problem.scale)
            dp = doh @ vh.T
            ds = probabilities * (dp - (probabilities * dp).sum(axis=1, keepdims=True))
            dq[b, :, h, :] = (problem.scale * ds @ kh).astype(dq.dtype)
            dk_sum[b, :, h // group, :] += problem.scale * ds.T @ qh
            dv_sum[b, :, h // group, :] += probabilities.T @ doh
    dk[...] = dk_sum.astype(dk.dtype)
    dv[...] = dv_sum.astype(dv.dtype)


attention.backward = attention_backward


attention.attnbench = dict(
    summary="examples/python: attention in numpy (float64 inside), one head at a time",
    dtypes=["fp32", "fp16"],
    masks=["none", "causal", "causal_br", "padding"],
    separate_v_dim=True,
    deterministic=True,
    backward_deterministic=True,
    max_flops=2e10,
)
