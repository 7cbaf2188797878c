#!/usr/bin/python3
"""Writes the attention golden fixtures of tests/model/golden_test.cpp with PyTorch.

Models, on an input [T=4, F=6] per sample, batch 4, each ending GlobalAveragePooling1D ->
Dense(3, softmax):
  mha:        MultiHeadAttention(num_heads 2, key_dim 3) self-attention (query = value = key)
  mha_causal: MultiHeadAttention(num_heads 2, key_dim 3, value_dim 2, output_shape 5,
              use_causal_mask) self-attention
  additive:   AdditiveAttention() self-attention (scale [F])
MultiHeadAttention's weights are Keras's (query/key/value kernels [F, heads, dim] with biases
[heads, dim], output kernel [heads, value_dim, out] and bias [out]); the projections are einsums
over that layout and for "mha" the attention is PyTorch's torch.nn.functional.multi_head_attention_forward with
the weights mapped (it needs key_dim == value_dim); "mha_causal" uses the written-out formula
softmax(q k^T / sqrt(key_dim)) v, checked against PyTorch's layer on "mha"'s weights, causal and
not. AdditiveAttention is Keras's sum_d scale_d tanh(q_d + k_d) written out. Outputs, the loss,
gradients and 3 Adam steps come from the shared writer of tools/make_golden_fixtures.py
(float64).

Run: /usr/bin/python3 tools/make_attention_golden_fixtures.py  (writes tests/model/fixtures/*.npy)
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from make_golden_fixtures import OUT  # noqa: E402
from make_golden_fixtures import make as make_fixture  # noqa: E402

N, T, FEAT = 4, 4, 6


def project(x, kernel, bias):
    """Keras's EinsumDense 'abc,cde->abde': x [N,T,F] -> [N,heads,T,dim] for SDPA."""
    return (torch.einsum("ntf,fhd->nhtd", x, kernel) + bias[None, :, None, :])


def mha(p, x, causal):
    """torch.nn.functional.multi_head_attention_forward with Keras's weights mapped to PyTorch's
    separate projections ([out, in] matrices over the heads' concatenated widths). PyTorch needs
    key_dim == value_dim and heads * key_dim == the output width: the "mha" model."""
    heads, kd = p[1].shape
    e = heads * kd
    q_w, k_w, v_w = (p[i].reshape(FEAT, e).T for i in (0, 2, 4))
    out_w = p[6].reshape(e, -1).T
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=x.dtype), 1) if causal else None
    xt = x.transpose(0, 1)  # [T, N, F]
    y, _ = F.multi_head_attention_forward(
        xt, xt, xt, e, heads, None, torch.cat([p[1].reshape(-1), p[3].reshape(-1),
                                                p[5].reshape(-1)]),
        None, None, False, 0.0, out_w, p[7], training=False, need_weights=False,
        attn_mask=mask, use_separate_proj_weight=True, q_proj_weight=q_w, k_proj_weight=k_w,
        v_proj_weight=v_w)
    return y.transpose(0, 1)


def mha_by_formula(p, x, causal):
    q, k, v = project(x, p[0], p[1]), project(x, p[2], p[3]), project(x, p[4], p[5])
    s = (q / np.sqrt(q.shape[-1])) @ k.transpose(-1, -2)
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return torch.einsum("nhtv,hvo->nto", torch.softmax(s, -1) @ v, p[6]) + p[7]


def additive(p, x):
    t = torch.tanh(x[:, :, None, :] + x[:, None, :, :])  # [N, Tq, Tv, F]
    return torch.softmax((t * p[0]).sum(-1), -1) @ x


def head(h, k, b):
    return torch.softmax(h.mean(1) @ k + b, dim=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261205)
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    w = lambda *shape: f32(rng.normal(scale=0.5, size=shape))
    x = f32(rng.normal(size=(N, T, FEAT)))
    labels = [0, 2, 1, 2]

    def mha_weights(heads, kd, vd, out):
        return [w(FEAT, heads, kd), w(heads, kd), w(FEAT, heads, kd), w(heads, kd),
                w(FEAT, heads, vd), w(heads, vd), w(heads, vd, out), w(out), w(out, 3), w(3)]

    for prefix, causal, (heads, kd, vd, out) in (("mha", False, (2, 3, 3, FEAT)),
                                                 ("mha_causal", True, (2, 3, 2, 5))):
        ps = mha_weights(heads, kd, vd, out)
        t64 = [torch.tensor(p, dtype=torch.float64) for p in ps]
        x64 = torch.tensor(x, dtype=torch.float64)
        if prefix == "mha":  # PyTorch's own layer, and the formula checked against it
            for c in (False, True):
                assert torch.allclose(mha(t64, x64, c), mha_by_formula(t64, x64, c), atol=1e-12)
            att = mha
        else:
            att = mha_by_formula
        make_fixture(prefix, lambda p, x, c=causal, f=att: head(f(p, x, c), p[8], p[9]), x, labels,
                     ps, sgd_momentum=False)

    make_fixture("additive", lambda p, x: head(additive(p, x), p[1], p[2]), x, labels,
                 [w(FEAT), w(FEAT, 3), w(3)], sgd_momentum=False)


if __name__ == "__main__":
    main()
