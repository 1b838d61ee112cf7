"""PyTorch as a peer: torch.sdpa_* pinned to one backend each, and the seed study's naive paths.

Shipped with attnbench as Python kernels (kernels/registry.cpp names them torch.*); loaded only
when a --kernels glob or a suite names them. Each runs on the CPU and on CUDA GPUs.

- torch.sdpa_flash / sdpa_cudnn / sdpa_efficient / sdpa_math: F.scaled_dot_product_attention
  under torch.nn.attention.sdpa_kernel(<that backend>). Where the backend declines a problem,
  the case is skipped with PyTorch's own reason (its warnings, else its error).
- torch.naive_outofplace: q k^T (fp32 scores), masked_fill (out of place: the hidden copy),
  softmax, cast to the input dtype, @ v.
- torch.naive_inplace: the same with masked_fill_ in place.

Masks: PyTorch's is_causal is top-left (attnbench's causal); causal_br, window and padding go in
as an explicit boolean mask, built once per plan. attnbench's convention for a row with no visible
key is zeros: where a mask leaves such rows (only causal_br with seqlen_q > seqlen_k, or a window)
they are zeroed after the forward, inside the timed region (the naive paths fill masked scores
with the most negative finite float, not -inf, so such a row's softmax stays finite and its
gradient zero).

The backward (every peer): torch.autograd.grad with attnbench's dO. Where the case's pass has a
backward (problem.backward), the forward takes q, k and v as leaves that require grad (views of
attnbench's buffers, no copy) and keeps its graph in the plan's cache; each backward runs
autograd.grad over that graph (retain_graph, so every timed backward reads the same forward) and
copies dQ, dK, dV into attnbench's buffers, the copy inside the timed step as the forward's is.
GQA's dK and dV come out summed over the group, as enable_gqa and repeat_interleave define them.
On the CPU each forward marks its phases for `attnbench profile` (attnbench_bridge.phase): the
naive paths scores, mask, softmax, output and copy; the fused ones sdpa and copy. On a GPU CUPTI
sees their kernels instead, so nothing is marked there.
GQA goes through enable_gqa (the naive paths expand k and v, as a naive model does). Layouts are
strides: the kernels see attnbench's (batch, seqlen, heads, dim) views and pass torch their
(batch, heads, seqlen, dim) transposes, which are views too; the copy of the result into
attnbench's output buffer is part of the timed forward.
"""

import warnings

import torch

try:
    from attnbench_bridge import phase
except ImportError:  # imported outside attnbench
    def phase(name):
        pass
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

__version__ = torch.__version__

_SUPPORT = dict(
    devices=["cpu", "cuda"],
    arrays="torch",
    dtypes=["fp32", "fp16", "bf16"],
    masks=["none", "causal", "causal_br", "window", "padding"],
    max_head_dim=256,
    separate_v_dim=True,
    deterministic=False,
    backward_deterministic=False,
    # On the CPU a size limit like cpu.flash's (3e11 FLOP over every pair: 1-2 s a step at its
    # ~200 GFLOP/s on the 2-core CI host), so a suite's GPU-sized cases skip there.
    max_flops={"cpu": 3e11},
    notes="timed: the forward and the copy into attnbench's (b, s, h, d) output buffer; the "
          "backward and the copy of dQ, dK, dV",
)


def _bhsd(x):
    return x.transpose(1, 2)


def _visible(problem, device):
    """Boolean (batch or 1, 1, seqlen_q, seqlen_k), True where a query sees a key; None for none/causal."""
    if problem.mask in ("none", "causal"):
        return None
    sq, sk = problem.seqlen_q, problem.seqlen_k
    query = torch.arange(sq, device=device)[:, None]
    key = torch.arange(sk, device=device)[None, :]
    offset = sk - sq
    if problem.mask == "causal_br":
        visible = key <= query + offset
    elif problem.mask == "window":
        visible = torch.ones(sq, sk, dtype=torch.bool, device=device)
        if problem.window_left >= 0:
            visible &= key >= query + offset - problem.window_left
        if problem.window_right >= 0:
            visible &= key <= query + offset + problem.window_right
    else:  # padding
        lengths = torch.as_tensor(problem.key_lengths, device=device).reshape(-1, 1, 1, 1)
        return key[None, None] < lengths
    return visible[None, None]


def _masks(problem, device):
    """(visible mask or None, rows with no visible key or None), built once per plan."""
    if "visible" not in problem.cache:
        visible = _visible(problem, device)
        empty = None
        if visible is not None:
            rows = ~visible.any(dim=-1, keepdim=True)  # (.., 1, seqlen_q, 1)
            if bool(rows.any()):
                empty = rows
        problem.cache["visible"], problem.cache["empty"] = visible, empty
    return problem.cache["visible"], problem.cache["empty"]


def _no_phase(name):
    pass


def _phases(tensor):
    """phase on the CPU; a no-op on a GPU, whose work CUPTI records."""
    return phase if tensor.device.type == "cpu" else _no_phase


def _write(out, result_bhsd, empty):
    result_bhsd = result_bhsd.detach()
    if empty is not None:
        result_bhsd = result_bhsd.masked_fill(empty, 0)
    out.copy_(_bhsd(result_bhsd))


def _leaves(q, k, v, problem):
    """q, k, v as leaves that require grad when the case has a backward (views: no copy)."""
    if not problem.backward:
        return q, k, v
    return tuple(x.detach().requires_grad_(True) for x in (q, k, v))


def _keep_graph(problem, leaves, result_bhsd):
    if problem.backward:
        problem.cache["graph"] = (leaves, result_bhsd)


def _backward(q, k, v, out, dout, dq, dk, dv, problem):
    """dQ, dK, dV of the last forward's graph for attnbench's dO (rows without a key get none)."""
    mark = _phases(dout)
    leaves, result = problem.cache["graph"]
    _, empty = _masks(problem, dout.device)
    grad = _bhsd(dout)
    if empty is not None:
        grad = grad.masked_fill(empty, 0)
    mark("backward")
    dq_, dk_, dv_ = torch.autograd.grad(result, leaves, grad_outputs=grad, retain_graph=True)
    mark("copy")
    dq.copy_(dq_)
    dk.copy_(dk_)
    dv.copy_(dv_)
    mark(None)


def _sdpa(q, k, v, problem, visible):
    return F.scaled_dot_product_attention(
        _bhsd(q), _bhsd(k), _bhsd(v), attn_mask=visible, is_causal=problem.mask == "causal",
        scale=problem.scale, enable_gqa=problem.heads_q != problem.heads_kv)


def _named(function, name):
    function.__name__ = function.__qualname__ = name  # as results' origin names it
    return function


def _sdpa_peer(backend):
    def forward(q, k, v, out, problem):
        mark = _phases(q)
        visible, empty = _masks(problem, q.device)
        leaves = _leaves(q, k, v, problem)
        mark("sdpa")
        with sdpa_kernel(backend):
            result = _sdpa(*leaves, problem, visible)
        _keep_graph(problem, leaves, result)
        mark("copy")
        _write(out, result, empty)
        mark(None)

    def refuse(problem):
        """PyTorch's reason when `backend` declines this problem: a probe at batch 1, one KV head."""
        device = torch.device(problem.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            return "torch sees no CUDA device"
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[problem.dtype]
        group = problem.heads_q // problem.heads_kv
        q = torch.randn(1, problem.seqlen_q, group, problem.head_dim_qk, device=device, dtype=dtype)
        k = torch.randn(1, problem.seqlen_k, 1, problem.head_dim_qk, device=device, dtype=dtype)
        v = torch.randn(1, problem.seqlen_k, 1, problem.head_dim_v, device=device, dtype=dtype)
        probe = type(problem)(**{**vars(problem), "batch": 1, "heads_q": group, "heads_kv": 1, "cache": {}})
        if problem.mask == "padding":
            probe.key_lengths = [max(1, problem.seqlen_k // 2)]
        visible, _ = _masks(probe, device)
        with warnings.catch_warnings(record=True) as caught, sdpa_kernel(backend):
            warnings.simplefilter("always")
            try:
                _sdpa(q, k, v, probe, visible)
                return None
            except RuntimeError as error:
                reasons = [str(w.message).strip() for w in caught if str(w.message).strip()]
                text = "; ".join(reasons) if reasons else str(error).strip().splitlines()[0]
                return f"torch {backend.name} declined: {text}"

    forward.attnbench = dict(_SUPPORT, refuse=refuse,
                             summary=f"PyTorch {torch.__version__} scaled_dot_product_attention, "
                                     f"{backend.name} backend only")
    forward.backward = _backward
    return forward


sdpa_flash = _named(_sdpa_peer(SDPBackend.FLASH_ATTENTION), "sdpa_flash")
sdpa_cudnn = _named(_sdpa_peer(SDPBackend.CUDNN_ATTENTION), "sdpa_cudnn")
sdpa_efficient = _named(_sdpa_peer(SDPBackend.EFFICIENT_ATTENTION), "sdpa_efficient")
sdpa_math = _named(_sdpa_peer(SDPBackend.MATH), "sdpa_math")


def _scores_fp32(qh, kh):
    """q k^T with fp32 output, as attnbench's naive kernels keep scores (cuBLAS with an fp32 C
    on a GPU: one launch; on the CPU, where bmm has no out_dtype, q and k cast first). Scores
    rounded to bf16 would miss attnbench's bound on large logits by 20x."""
    if qh.dtype == torch.float32:
        return torch.matmul(qh, kh.transpose(-2, -1))
    if qh.is_cuda:
        b, h, s, d = qh.shape
        scores = torch.bmm(qh.reshape(b * h, s, d), kh.transpose(-2, -1).reshape(b * h, d, -1),
                           out_dtype=torch.float32)
        return scores.view(b, h, s, -1)
    return torch.matmul(qh.float(), kh.float().transpose(-2, -1))


def _naive(in_place):
    def forward(q, k, v, out, problem):
        mark = _phases(q)
        visible, empty = _masks(problem, q.device)
        if problem.mask == "causal":
            if "causal" not in problem.cache:
                ones = torch.ones(problem.seqlen_q, problem.seqlen_k, dtype=torch.bool, device=q.device)
                problem.cache["causal"] = torch.tril(ones)
            visible = problem.cache["causal"]
        group = problem.heads_q // problem.heads_kv
        leaves = _leaves(q, k, v, problem)
        qh, kh, vh = (_bhsd(x) for x in leaves)
        if group > 1:
            kh, vh = kh.repeat_interleave(group, dim=1), vh.repeat_interleave(group, dim=1)
        mark("scores")
        scores = _scores_fp32(qh, kh).mul_(problem.scale)
        if visible is not None:
            mark("mask")
            lowest = torch.finfo(scores.dtype).min
            if in_place:
                scores.masked_fill_(~visible, lowest)
            else:
                scores = scores.masked_fill(~visible, lowest)
        mark("softmax")
        weights = torch.softmax(scores, dim=-1).to(vh.dtype)
        mark("output")
        result = torch.matmul(weights, vh)
        _keep_graph(problem, leaves, result)
        mark("copy")
        _write(out, result, empty)
        mark(None)

    kind = "in place (masked_fill_)" if in_place else "out of place (masked_fill: a hidden copy)"
    forward.attnbench = dict(_SUPPORT, summary=f"PyTorch {torch.__version__} naive attention, "
                                               f"mask {kind}, fp32 scores and softmax")
    forward.backward = _backward
    return forward


naive_outofplace = _named(_naive(in_place=False), "naive_outofplace")
naive_inplace = _named(_naive(in_place=True), "naive_inplace")
