#!/usr/bin/python3
"""Writes the recurrent golden fixtures of tests/model/golden_test.cpp with PyTorch.

Models: an input [T=5, F=3] sequence into one recurrent layer (LSTM, GRU reset_after true, GRU
reset_after false, SimpleRNN, Bidirectional LSTM concat), then Dense(3, softmax); and a masked
case, Masking(0) + LSTM(return_sequences false). Weights are in Keras's layouts and gate orders
(LSTM i f c o, GRU z r h). The cells are written out from Keras's equations in float64 torch, and
where PyTorch has the same cell (nn.LSTM, nn.GRU = GRU reset_after true, nn.RNN) this script
checks the written-out cell against it before saving. GRU reset_after false and the mask rules
(a masked step keeps h and c) have no PyTorch module: they are the written-out formulas only.
The loss, gradients and 3 Adam steps are computed as tools/make_golden_fixtures.py does.

Run: /usr/bin/python3 tools/make_recurrent_golden_fixtures.py  (writes tests/model/fixtures/*.npy)
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from make_golden_fixtures import OUT  # noqa: E402
from make_golden_fixtures import make as make_fixture  # noqa: E402

T, F, U, N = 5, 3, 4, 4


def lstm(x, k, r, b, mask=None, backwards=False):
    n = x.shape[0]
    h = torch.zeros(n, U, dtype=x.dtype)
    c = torch.zeros(n, U, dtype=x.dtype)
    outs = []
    steps = range(T - 1, -1, -1) if backwards else range(T)
    for t in steps:
        z = x[:, t] @ k + h @ r + b
        i, f, g, o = (z[:, j * U:(j + 1) * U] for j in range(4))
        i, f, o = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o)
        cn = f * c + i * torch.tanh(g)
        hn = o * torch.tanh(cn)
        if mask is not None:  # Keras: a masked step carries the state over
            m = mask[:, t:t + 1]
            hn = m * hn + (1 - m) * h
            cn = m * cn + (1 - m) * c
        h, c = hn, cn
        outs.append(h)
    return h, torch.stack(outs, dim=1)


def gru(x, k, r, b, reset_after):
    n = x.shape[0]
    h = torch.zeros(n, U, dtype=x.dtype)
    bi, br = (b[0], b[1]) if reset_after else (b, None)
    for t in range(T):
        xz = x[:, t] @ k + bi
        if reset_after:
            rz = h @ r + br
            z = torch.sigmoid(xz[:, :U] + rz[:, :U])
            rr = torch.sigmoid(xz[:, U:2 * U] + rz[:, U:2 * U])
            hh = torch.tanh(xz[:, 2 * U:] + rr * rz[:, 2 * U:])
        else:
            rz = h @ r[:, :2 * U]
            z = torch.sigmoid(xz[:, :U] + rz[:, :U])
            rr = torch.sigmoid(xz[:, U:2 * U] + rz[:, U:])
            hh = torch.tanh(xz[:, 2 * U:] + (rr * h) @ r[:, 2 * U:])
        h = z * h + (1 - z) * hh
    return h


def simple_rnn(x, k, r, b):
    h = torch.zeros(x.shape[0], U, dtype=x.dtype)
    for t in range(T):
        h = torch.tanh(x[:, t] @ k + h @ r + b)
    return h


def head(h, k2, b2):
    return torch.softmax(h @ k2 + b2, dim=-1)


def check_against_torch_modules(x, rng):
    """The written-out cells equal PyTorch's own modules (float64)."""
    f64 = lambda a: torch.tensor(a, dtype=torch.float64)
    k, r, b = f64(rng.normal(size=(F, 4 * U))), f64(rng.normal(size=(U, 4 * U))), f64(
        rng.normal(size=4 * U))
    m = torch.nn.LSTM(F, U, batch_first=True).double()
    with torch.no_grad():
        m.weight_ih_l0.copy_(k.T), m.weight_hh_l0.copy_(r.T)
        m.bias_ih_l0.copy_(b), m.bias_hh_l0.zero_()
    assert torch.allclose(m(x)[0][:, -1], lstm(x, k, r, b)[0], atol=1e-12)
    k, r = f64(rng.normal(size=(F, 3 * U))), f64(rng.normal(size=(U, 3 * U)))
    b = f64(rng.normal(size=(2, 3 * U)))
    # Keras z r h -> PyTorch r z n.
    perm = lambda w: torch.cat([w[..., U:2 * U], w[..., :U], w[..., 2 * U:]], dim=-1)
    g = torch.nn.GRU(F, U, batch_first=True).double()
    with torch.no_grad():
        g.weight_ih_l0.copy_(perm(k).T), g.weight_hh_l0.copy_(perm(r).T)
        g.bias_ih_l0.copy_(perm(b[0])), g.bias_hh_l0.copy_(perm(b[1]))
    assert torch.allclose(g(x)[0][:, -1], gru(x, k, r, b, True), atol=1e-12)
    k, r, b = f64(rng.normal(size=(F, U))), f64(rng.normal(size=(U, U))), f64(rng.normal(size=U))
    s = torch.nn.RNN(F, U, batch_first=True).double()
    with torch.no_grad():
        s.weight_ih_l0.copy_(k.T), s.weight_hh_l0.copy_(r.T)
        s.bias_ih_l0.copy_(b), s.bias_hh_l0.zero_()
    assert torch.allclose(s(x)[0][:, -1], simple_rnn(x, k, r, b), atol=1e-12)


def make(prefix, forward, x, labels, params, mask=None):
    """The shared fixture writer (outputs, loss, gradients, 3 Adam steps), without SGD steps."""
    make_fixture(prefix, forward, x, labels, params, sgd_momentum=False, mask=mask)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261201)
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    w = lambda *shape: f32(rng.normal(scale=0.5, size=shape))
    x = f32(rng.normal(size=(N, T, F)))
    check_against_torch_modules(torch.tensor(x, dtype=torch.float64), rng)
    labels = [0, 2, 1, 2]
    make("lstm", lambda p, x: head(lstm(x, p[0], p[1], p[2])[0], p[3], p[4]), x, labels,
         [w(F, 4 * U), w(U, 4 * U), w(4 * U), w(U, 3), w(3)])
    make("gru", lambda p, x: head(gru(x, p[0], p[1], p[2], True), p[3], p[4]), x, labels,
         [w(F, 3 * U), w(U, 3 * U), w(2, 3 * U), w(U, 3), w(3)])
    make("gru_plain", lambda p, x: head(gru(x, p[0], p[1], p[2], False), p[3], p[4]), x, labels,
         [w(F, 3 * U), w(U, 3 * U), w(3 * U), w(U, 3), w(3)])
    make("simple_rnn", lambda p, x: head(simple_rnn(x, p[0], p[1], p[2]), p[3], p[4]), x, labels,
         [w(F, U), w(U, U), w(U), w(U, 3), w(3)])

    # Bidirectional(LSTM, concat): the backward half runs over reversed time with its own
    # weights; without return_sequences its output is its last state.
    def bilstm(p, x):
        hf = lstm(x, p[0], p[1], p[2])[0]
        hb = lstm(x, p[3], p[4], p[5], backwards=True)[0]
        return head(torch.cat([hf, hb], dim=1), p[6], p[7])
    make("bilstm", bilstm, x, labels,
         [w(F, 4 * U), w(U, 4 * U), w(4 * U), w(F, 4 * U), w(U, 4 * U), w(4 * U), w(2 * U, 3),
          w(3)])

    # Masking(mask_value=0) + LSTM: rows post-padded with zeros (lengths 5, 3, 1, 4) and one
    # all-zero step inside row 3, which Keras masks too.
    xm = x.copy()
    for row, length in enumerate([5, 3, 1, 4]):
        xm[row, length:] = 0
    xm[3, 1] = 0
    mask = torch.tensor((np.abs(xm).sum(axis=2) != 0).astype(np.float64))
    make("masked_lstm", lambda p, x: head(lstm(x, p[0], p[1], p[2], mask=mask)[0], p[3], p[4]),
         xm, labels, [w(F, 4 * U), w(U, 4 * U), w(4 * U), w(U, 3), w(3)])

    # Per-timestep classifier: LSTM(return_sequences) + Dense(3, softmax) on every step, labels
    # [N,T]; the loss is the mean over every step of every sample (Keras's sum_over_batch_size).
    seq_labels = rng.integers(0, 3, size=(N, T)).tolist()
    make("seq_lstm", lambda p, x: head(lstm(x, p[0], p[1], p[2])[1], p[3], p[4]), x, seq_labels,
         [w(F, 4 * U), w(U, 4 * U), w(4 * U), w(U, 3), w(3)])

    # Embedding(6, 3, mask_zero) + LSTM(return_sequences) + Dense(3, softmax): id 0 pads (rows of
    # lengths 5, 3, 1, 4, and one 0 inside row 3); the mask reaches the output, so the loss is
    # sum(loss*mask)/sum(mask) (Keras 3 and tf.keras >= 2.11). A masked step's output is the
    # carried state.
    ids = rng.integers(1, 6, size=(N, T))
    for row, length in enumerate([5, 3, 1, 4]):
        ids[row, length:] = 0
    ids[3, 1] = 0
    id_mask = torch.tensor((ids != 0).astype(np.float64))
    lookup = torch.tensor(ids, dtype=torch.int64)

    def embedded_seq(p, _x):
        return head(lstm(p[0][lookup], p[1], p[2], p[3], mask=id_mask)[1], p[4], p[5])
    make("masked_seq_lstm", embedded_seq, f32(ids), seq_labels,
         [w(6, 3), w(F, 4 * U), w(U, 4 * U), w(4 * U), w(U, 3), w(3)], mask=id_mask)


if __name__ == "__main__":
    main()
