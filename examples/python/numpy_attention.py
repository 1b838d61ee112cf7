"""A Python kernel for attnbench: attention in numpy, on the CPU.

    attnbench check --kernels py:numpy_attention:attention --suite ctest   # from this folder
    PYTHONPATH=examples/python attnbench run --kernels py:numpy_attention:attention --shape ...

attnbench hands the kernel views of its own buffers, indexed (batch, seqlen, heads, head_dim)
whatever the layout; it fills `out` (or returns an array shaped like it). The support table
below says what it accepts; inside it, attnbench checks every case against its exact reference.
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


def attention(q, k, v, out, problem):
    group = problem.heads_q // problem.heads_kv
    for b in range(problem.batch):
        visible = _visible(problem, b)
        for h in range(problem.heads_q):
            qh = q[b, :, h, :].astype(np.float64)
            kh = k[b, :, h // group, :].astype(np.float64)
            vh = v[b, :, h // group, :].astype(np.float64)
            scores = np.where(visible, (qh @ kh.T) * problem.scale, -np.inf)
            peak = scores.max(axis=1, keepdims=True)
            peak = np.where(np.isfinite(peak), peak, 0.0)
            weights = np.exp(scores - peak)
            total = weights.sum(axis=1, keepdims=True)
            rows = np.divide(weights @ vh, total, out=np.zeros((problem.seqlen_q, vh.shape[1])),
                             where=total > 0)
            out[b, :, h, :] = rows.astype(out.dtype)


attention.attnbench = dict(
    summary="examples/python: attention in numpy (float64 inside), one head at a time",
    dtypes=["fp32", "fp16"],
    masks=["none", "causal", "causal_br", "padding"],
    separate_v_dim=True,
    deterministic=True,
    max_flops=2e10,
)
