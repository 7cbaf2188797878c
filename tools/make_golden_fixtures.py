#!/usr/bin/python3
"""Writes the golden fixtures of tests/model/golden_test.cpp with PyTorch (Debian python3-torch).

For one Dense model and one Conv2D model: inputs, labels, initial weights (Keras layouts), the
outputs, the gradients of the mean sparse categorical cross-entropy, and the weights after 3 Adam
steps and after 3 SGD-momentum steps on the same batch. Computed in float64. Where PyTorch's
optimizers differ from Keras (Adam adds epsilon to the uncorrected square root in Keras), the
update is written out here with Keras's formula, using PyTorch only for the gradients.

Run: /usr/bin/python3 tools/make_golden_fixtures.py  (writes tests/model/fixtures/*.npy)
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "model", "fixtures")
EPS = 1e-7  # Keras's clipping epsilon


def keras_sparse_ce(probs, labels, mask=None):
    """Keras's sparse CE along the last axis ([N,K] or per timestep [N,T,K] with labels [N,T]),
    reduced as Keras 3 does: the mean over every step, or with a mask sum(loss*mask)/sum(mask)."""
    p = probs / probs.sum(dim=-1, keepdim=True)
    p = p.clamp(EPS, 1 - EPS)
    loss = -torch.log(torch.gather(p, -1, labels.unsqueeze(-1)).squeeze(-1))
    if mask is None:
        return loss.mean()
    return (loss * mask).sum() / mask.sum()


def dense_forward(params, x):
    k1, b1, k2, b2 = params
    h = torch.relu(x @ k1 + b1)
    return torch.softmax(h @ k2 + b2, dim=1)


def conv_forward(params, x):
    # x is NHWC; Keras kernel [kh, kw, cin, cout] -> torch [cout, cin, kh, kw].
    k1, b1, k2, b2 = params
    xn = x.permute(0, 3, 1, 2)
    y = torch.nn.functional.conv2d(xn, k1.permute(3, 2, 0, 1), b1)
    y = torch.relu(y)
    y = torch.nn.functional.max_pool2d(y, 2)
    y = y.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # Keras flattens NHWC
    return torch.softmax(y @ k2 + b2, dim=1)


def grads(forward, params, x, labels, mask=None):
    ps = [p.clone().requires_grad_(True) for p in params]
    loss = keras_sparse_ce(forward(ps, x), labels, mask)
    loss.backward()
    return [p.grad.detach() for p in ps], loss.item()


def adam_steps(forward, params, x, labels, steps=3, lr=1e-3, b1=0.9, b2=0.999, eps=1e-7,
               mask=None):
    ps = [p.clone() for p in params]
    m = [torch.zeros_like(p) for p in ps]
    v = [torch.zeros_like(p) for p in ps]
    for t in range(1, steps + 1):
        g, _ = grads(forward, ps, x, labels, mask)
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        for i in range(len(ps)):
            m[i] = m[i] + (g[i] - m[i]) * (1 - b1)
            v[i] = v[i] + (g[i] * g[i] - v[i]) * (1 - b2)
            ps[i] = ps[i] - alpha * m[i] / (torch.sqrt(v[i]) + eps)
    return ps


def sgd_momentum_steps(forward, params, x, labels, steps=3, lr=0.05, momentum=0.9):
    ps = [p.clone() for p in params]
    vel = [torch.zeros_like(p) for p in ps]
    for _ in range(steps):
        g, _ = grads(forward, ps, x, labels)
        for i in range(len(ps)):
            vel[i] = momentum * vel[i] - lr * g[i]
            ps[i] = ps[i] + vel[i]
    return ps


def save(name, arr):
    np.save(os.path.join(OUT, name + ".npy"), np.asarray(arr, dtype=np.float32))


def make(prefix, forward, x, labels, params, sgd_momentum=True, mask=None):
    """Writes <prefix>_x, _y, _w<i>, _out, _loss, _grad<i>, _adam<i> (and _sgdm<i>) in OUT.
    With `mask` ([N,T], the Keras mask on the output), the loss is weighted by it."""
    x_t = torch.tensor(x, dtype=torch.float64)
    lab = torch.tensor(labels, dtype=torch.int64)
    ps = [torch.tensor(p, dtype=torch.float64) for p in params]
    save(prefix + "_x", x)
    np.save(os.path.join(OUT, prefix + "_y.npy"), np.asarray(labels, dtype=np.int32))
    for i, p in enumerate(params):
        save(f"{prefix}_w{i}", p)
    save(prefix + "_out", forward(ps, x_t).numpy())
    g, loss = grads(forward, ps, x_t, lab, mask)
    save(prefix + "_loss", np.array([loss]))
    for i, gi in enumerate(g):
        save(f"{prefix}_grad{i}", gi.numpy())
    for i, p in enumerate(adam_steps(forward, ps, x_t, lab, mask=mask)):
        save(f"{prefix}_adam{i}", p.numpy())
    if sgd_momentum:
        for i, p in enumerate(sgd_momentum_steps(forward, ps, x_t, lab)):
            save(f"{prefix}_sgdm{i}", p.numpy())


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261129)
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    # Dense: 5 -> Dense(6, relu) -> Dense(3, softmax), batch 4. Weights stored as float32 so that
    # both sides start from exactly the same values.
    x = f32(rng.normal(size=(4, 5)))
    make("dense", dense_forward, x, [0, 2, 1, 2],
         [f32(rng.normal(scale=0.5, size=(5, 6))), f32(rng.normal(scale=0.1, size=6)),
          f32(rng.normal(scale=0.5, size=(6, 3))), f32(rng.normal(scale=0.1, size=3))])
    # Conv: 6x6x1 -> Conv2D(2, 3x3, relu) -> MaxPooling2D(2) -> Flatten -> Dense(3, softmax).
    x = f32(rng.uniform(size=(2, 6, 6, 1)))
    make("conv", conv_forward, x, [1, 0],
         [f32(rng.normal(scale=0.5, size=(3, 3, 1, 2))), f32(rng.normal(scale=0.1, size=2)),
          f32(rng.normal(scale=0.5, size=(8, 3))), f32(rng.normal(scale=0.1, size=3))])


if __name__ == "__main__":
    main()
