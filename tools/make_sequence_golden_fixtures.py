#!/usr/bin/python3
"""Writes the Conv1D golden fixtures of tests/model/golden_test.cpp with PyTorch (python3-torch).

Two small models, one causal and one dilated (causal and valid), each trained on one batch with
the mean sparse categorical cross-entropy: inputs, labels, initial weights (Keras layouts: Conv1D
kernel [k, in, out]), outputs, loss, gradients, and the weights after 3 Adam steps (Keras's
formula, epsilon added to the uncorrected square root) and 3 SGD-momentum steps. Float64 math on
float32 starting values. Keras's causal padding is (k - 1) * dilation zeros before the sequence.

Run: /usr/bin/python3 tools/make_sequence_golden_fixtures.py  (writes tests/model/fixtures/*.npy)
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from make_golden_fixtures import OUT, make  # noqa: E402  (same loss, optimizers and file names)


def conv1d(x, kernel, bias, padding, dilation=1):
    """Keras Conv1D on x [N, T, C] with kernel [k, C, F]; returns [N, T', F]."""
    k = kernel.shape[0]
    xt = x.permute(0, 2, 1)
    if padding == "causal":
        xt = F.pad(xt, ((k - 1) * dilation, 0))
    y = F.conv1d(xt, kernel.permute(2, 1, 0), bias, dilation=dilation)
    return y.permute(0, 2, 1)


def causal_forward(params, x):
    # [7, 2] -> Conv1D(3, k3, causal, relu) -> Flatten -> Dense(3, softmax)
    k1, b1, k2, b2 = params
    h = torch.relu(conv1d(x, k1, b1, "causal"))
    return torch.softmax(h.reshape(x.shape[0], -1) @ k2 + b2, dim=1)


def dilated_forward(params, x):
    # [11, 2] -> Conv1D(3, k3, causal, dilation 2, tanh) -> Conv1D(2, k2, valid, dilation 3)
    #         -> GlobalAveragePooling1D -> Dense(3, softmax)
    k1, b1, k2, b2, k3, b3 = params
    h = torch.tanh(conv1d(x, k1, b1, "causal", 2))
    h = conv1d(h, k2, b2, "valid", 3)
    return torch.softmax(h.mean(dim=1) @ k3 + b3, dim=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261201)
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    make("conv1d_causal", causal_forward, f32(rng.normal(size=(3, 7, 2))), [2, 0, 1],
         [f32(rng.normal(scale=0.5, size=(3, 2, 3))), f32(rng.normal(scale=0.1, size=3)),
          f32(rng.normal(scale=0.5, size=(21, 3))), f32(rng.normal(scale=0.1, size=3))])
    make("conv1d_dilated", dilated_forward, f32(rng.normal(size=(2, 11, 2))), [1, 2],
         [f32(rng.normal(scale=0.5, size=(3, 2, 3))), f32(rng.normal(scale=0.1, size=3)),
          f32(rng.normal(scale=0.5, size=(2, 3, 2))), f32(rng.normal(scale=0.1, size=2)),
          f32(rng.normal(scale=0.5, size=(2, 3))), f32(rng.normal(scale=0.1, size=3))])


if __name__ == "__main__":
    main()
