"""The exact backward reference against an independent one: torch.autograd in float64.

attnbench's fp64 gradients (reference/attention_backward.h, dumped by `attnbench check --dump`)
must equal what autograd computes from the same inputs, the same upstream gradient and the
textbook forward written here from the masks' definitions, to 1e-12: the two share no code, so a
wrong formula, a missing scale, an unsummed GQA group or a misplaced row shows.
"""
import os
import pathlib
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")

CLI = os.environ.get("ATTNBENCH_CLI", "build/bin/attnbench")
TOLERANCE = 1e-12


def visible(mask, sq, sk):
    """(sq, sk) booleans: which keys each query sees, from the masks' definitions."""
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    if mask == "none":
        return np.ones((sq, sk), dtype=bool)
    if mask == "causal":  # top-left aligned: query i sees keys 0..i
        return j <= i
    if mask == "causal_br":  # bottom-right aligned: the last query sees every key
        return j <= i + (sk - sq)
    raise ValueError(mask)


def autograd_gradients(q, k, v, dout, mask, scale):
    """dQ, dK, dV of sum(dout * softmax(scale q k^T, masked) v), all float64, (b, s, h, d)."""
    q, k, v = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    group = q.shape[2] // k.shape[2]
    keys = k.repeat_interleave(group, dim=2)  # query head h reads kv head h // group
    values = v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, keys) * scale
    allowed = torch.tensor(visible(mask, q.shape[1], k.shape[1]))
    scores = scores.masked_fill(~allowed, float("-inf"))
    out = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(scores, dim=-1), values)
    out.backward(torch.tensor(dout, dtype=torch.float64))
    return q.grad.numpy(), k.grad.numpy(), v.grad.numpy()


@pytest.mark.parametrize("shape,mask", [
    ("b=2,hq=4,hkv=2,sq=7,sk=9,dqk=8,dv=6,dtype=fp32,mask=causal_br,pass=bwd", "causal_br"),
    ("b=1,hq=3,hkv=1,sq=11,sk=5,d=16,dtype=bf16,scale=0.3,pass=bwd", "none"),
    ("b=1,hq=2,hkv=2,sq=6,sk=6,d=4,dtype=fp16,mask=causal,pass=bwd", "causal"),
])
def test_reference_gradients_equal_autograd_in_float64(tmp_path, shape, mask):
    dump = tmp_path / "dump"
    checked = subprocess.run(
        [CLI, "check", "--devices", "cpu", "--kernels", "cpu.naive", "--shape", shape,
         "--dump", str(dump), "--db", str(tmp_path / "db.sqlite")],
        capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (case,) = [p for p in dump.iterdir() if p.is_dir()]
    load = lambda name: np.load(case / f"{name}.npy")  # noqa: E731
    q, k, v, dout = load("q"), load("k"), load("v"), load("dout")
    scale = float(shape.split("scale=")[1].split(",")[0]) if "scale=" in shape else q.shape[3] ** -0.5
    dq, dk, dv = autograd_gradients(q, k, v, dout, mask, scale)

    rows = load("ref_dq_rows")
    assert len(rows) == q.shape[0] * q.shape[1] * q.shape[2], "a small problem checks every row"
    expected_dq = np.stack([dq[b, i, h] for b, i, h in rows])
    np.testing.assert_allclose(load("ref_dq"), expected_dq, rtol=0, atol=TOLERANCE)
    key_rows = load("ref_key_rows")
    assert len(key_rows) == k.shape[0] * k.shape[1] * k.shape[2]
    np.testing.assert_allclose(load("ref_dk"), np.stack([dk[b, j, h] for b, j, h in key_rows]),
                               rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(load("ref_dv"), np.stack([dv[b, j, h] for b, j, h in key_rows]),
                               rtol=0, atol=TOLERANCE)
    # Not vacuous: the gradients are of order one, and the kernel's own are close to them.
    assert np.abs(expected_dq).max() > 1e-2 and np.abs(dk).max() > 1e-2
    np.testing.assert_allclose(load("dq"), dq, atol=5e-2)
