"""A user's Triton attention kernel, measured by attnbench like any kernel (a GPU with Triton).

    PYTHONPATH=examples/python build/bin/attnbench run --devices gpu \\
        --kernels 'py:triton_attention:attention,cudnn.sdpa' --shape b=2,hq=16,s=4096,d=128,dtype=bf16

attnbench passes torch tensors over its own device buffers, indexed (batch, seqlen, heads,
head_dim) through their strides, and runs the call on its stream (Triton launches on torch's
current stream). A FlashAttention-style forward: one program per (128-query block, head, batch),
online softmax in exp2, K and V tiles of 64 keys.
"""

import torch
import triton
import triton.language as tl

__version__ = "1.0"


@triton.jit
def _forward(Q, K, V, O, q_b, q_s, q_h, k_b, k_s, k_h, v_b, v_s, v_h, o_b, o_s, o_h,
             seqlen_q, seqlen_k, heads_per_kv, scale_log2,
             CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    block = tl.program_id(0)
    head = tl.program_id(1)
    batch = tl.program_id(2)
    kv_head = head // heads_per_kv
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    keys = tl.arange(0, BLOCK_N)
    q = tl.load(Q + batch * q_b + head * q_h + rows[:, None] * q_s + dims[None, :],
                mask=rows[:, None] < seqlen_q, other=0.0)
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    end = seqlen_k
    if CAUSAL:  # top-left: query i sees keys 0..i
        end = tl.minimum(seqlen_k, (block + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        cols = start + keys
        k = tl.load(K + batch * k_b + kv_head * k_h + cols[None, :] * k_s + dims[:, None],
                    mask=cols[None, :] < seqlen_k, other=0.0)
        scores = tl.dot(q, k) * scale_log2
        visible = cols[None, :] < seqlen_k
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        scores = tl.where(visible, scores, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(scores, 1))
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)  # rows with no key yet
        p = tl.math.exp2(scores - safe_max[:, None])
        rescale = tl.math.exp2(row_max - safe_max)
        row_sum = row_sum * rescale + tl.sum(p, 1)
        v = tl.load(V + batch * v_b + kv_head * v_h + cols[:, None] * v_s + dims[None, :],
                    mask=cols[:, None] < seqlen_k, other=0.0)
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)
        row_max = new_max
    acc = acc / tl.where(row_sum == 0.0, 1.0, row_sum)[:, None]
    tl.store(O + batch * o_b + head * o_h + rows[:, None] * o_s + dims[None, :],
             acc.to(O.dtype.element_ty), mask=rows[:, None] < seqlen_q)


def attention(q, k, v, out, problem):
    block_m, block_n = 128, 64
    grid = (triton.cdiv(problem.seqlen_q, block_m), problem.heads_q, problem.batch)
    _forward[grid](q, k, v, out, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
                   problem.seqlen_q, problem.seqlen_k, problem.heads_q // problem.heads_kv,
                   problem.scale * 1.4426950408889634,
                   CAUSAL=problem.mask == "causal", BLOCK_M=block_m, BLOCK_N=block_n,
                   HEAD_DIM=problem.head_dim_qk, num_warps=8 if problem.head_dim_qk == 128 else 4,
                   num_stages=2)


attention.attnbench = dict(
    summary=f"examples/python: a user's Triton FlashAttention-style forward (triton {triton.__version__})",
    devices=["cuda"],
    dtypes=["fp16", "bf16"],
    head_dims=[64, 128],
    masks=["none", "causal"],
    deterministic=True,
)
