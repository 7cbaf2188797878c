#!/usr/bin/python3
"""Writes the normalization golden fixtures of tests/model/golden_test.cpp with PyTorch.

Models, on an input [T=3, F=4] per sample, batch 4:
  layer_norm:      Dense(5, relu) -> LayerNormalization(axis=-1, epsilon=1e-3) -> Flatten
                   -> Dense(3, softmax)
  layer_norm_axes: LayerNormalization(axis=1, epsilon=1e-5) (over the steps of each feature, not
                   the trailing axis) -> UnitNormalization(axis=-1) -> Flatten -> Dense(3, softmax)
                   (with center=False the unit norm would cancel gamma: its gradient would be
                   float noise, which Adam turns into full-size steps of random sign)
LayerNormalization is written out from Keras's formula (mean and biased variance over the axes,
epsilon inside the square root, gamma and beta shaped by the axes) and checked against
torch.nn.functional.layer_norm before saving; UnitNormalization is x * rsqrt(max(sum(x^2), 1e-24))
as Keras 3's ops.normalize, checked against torch.nn.functional.normalize. Outputs, the loss,
gradients and 3 Adam and 3 SGD-momentum steps come from the shared writer of
tools/make_golden_fixtures.py (float64).

Run: /usr/bin/python3 tools/make_norm_golden_fixtures.py  (writes tests/model/fixtures/*.npy)
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from make_golden_fixtures import OUT  # noqa: E402
from make_golden_fixtures import make as make_fixture  # noqa: E402

N, T, F = 4, 3, 4


def layer_norm(x, axes, eps, gamma=None, beta=None):
    """Keras: y = (x - mean) / sqrt(var + eps) * gamma + beta over `axes` (per-sample axes + 1)."""
    mean = x.mean(dim=axes, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=axes, keepdim=True)
    shape = [1] * x.dim()
    for a in axes:
        shape[a] = x.shape[a]
    y = (x - mean) / torch.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma.reshape(shape)
    if beta is not None:
        y = y + beta.reshape(shape)
    return y


def unit_norm(x, axis):
    ss = (x * x).sum(dim=axis, keepdim=True)
    return x * torch.rsqrt(torch.clamp(ss, min=1e-24))


def check_against_torch(rng):
    f64 = lambda a: torch.tensor(a, dtype=torch.float64)
    x = f64(rng.normal(size=(N, T, F)))
    g, b = f64(rng.normal(size=F)), f64(rng.normal(size=F))
    assert torch.allclose(layer_norm(x, [2], 1e-3, g, b),
                          torch.nn.functional.layer_norm(x, (F,), g, b, 1e-3), atol=1e-12)
    g = f64(rng.normal(size=T))
    xt = x.permute(0, 2, 1)  # the steps last, for torch's trailing-axes layer_norm
    want = torch.nn.functional.layer_norm(xt, (T,), g, None, 1e-5).permute(0, 2, 1)
    assert torch.allclose(layer_norm(x, [1], 1e-5, g), want, atol=1e-12)
    assert torch.allclose(unit_norm(x, 2), torch.nn.functional.normalize(x, dim=2), atol=1e-12)


def head(h, k, b):
    return torch.softmax(h.reshape(h.shape[0], -1) @ k + b, dim=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261202)
    check_against_torch(rng)
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    w = lambda *shape: f32(rng.normal(scale=0.5, size=shape))
    x = f32(rng.normal(size=(N, T, F)))
    labels = [0, 2, 1, 2]

    def ln_model(p, x):
        h = torch.relu(x @ p[0] + p[1])
        return head(layer_norm(h, [2], 1e-3, p[2], p[3]), p[4], p[5])
    # gamma and beta away from their initial 1 and 0, so that both enter the gradients.
    make_fixture("layer_norm", ln_model, x, labels,
                 [w(F, 5), w(5), f32(1 + rng.normal(scale=0.3, size=5)), w(5), w(T * 5, 3), w(3)])

    def axes_model(p, x):
        return head(unit_norm(layer_norm(x, [1], 1e-5, p[0], p[1]), 2), p[2], p[3])
    make_fixture("layer_norm_axes", axes_model, x, labels,
                 [f32(1 + rng.normal(scale=0.3, size=T)), w(T), w(T * F, 3), w(3)])


if __name__ == "__main__":
    main()
