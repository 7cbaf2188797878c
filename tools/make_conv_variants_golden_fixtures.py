#!/usr/bin/python3
"""Writes the golden fixtures of the convolution variants (tests/model/golden_test.cpp) with
PyTorch (python3-torch): Conv2DTranspose, SeparableConv2D, and Conv2D(groups) + bilinear
UpSampling2D + Cropping2D, each in a small model trained on one batch with the mean sparse
categorical cross-entropy: inputs, labels, initial weights (Keras layouts), outputs, loss,
gradients, the weights after 3 Adam steps (Keras's formula) and after 3 SGD-momentum steps.

Keras's geometry is written out here from its definitions, independently of nnfleet:
- Conv2DTranspose (kernel [kh, kw, out, in]): output length in*s (same), in*s + max(k - s, 0)
  (valid), or (in - 1)*s + k + p / (in - 1)*s + k % 2 + p with output_padding p. TensorFlow runs
  the input-gradient of the convolution of that length, whose "same" padding puts
  max((in - 1)*s + k - out, 0) // 2 rows before: the rows [before, before + out) of the full
  transposed convolution (zero rows added past its end).
- "same" convolutions pad max((out - 1)*s + k - in, 0), the smaller half before.
- bilinear UpSampling2D is TensorFlow's half-pixel resize, which torch's interpolate with
  align_corners=False computes too.

Run: /usr/bin/python3 tools/make_conv_variants_golden_fixtures.py  (writes tests/model/fixtures/)
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from make_golden_fixtures import OUT, make  # noqa: E402  (same loss, optimizers and file names)


def nchw(x):
    return x.permute(0, 3, 1, 2)


def nhwc(x):
    return x.permute(0, 2, 3, 1)


def same_pads(size, k, s, d=1):
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def conv2d_transpose(x, kernel, bias, s, padding, output_padding=None):
    """Keras Conv2DTranspose on NHWC x with kernel [kh, kw, out, in]."""
    kh, kw = kernel.shape[0], kernel.shape[1]
    lengths, befores = [], []
    for size, k, st, p in zip(x.shape[1:3], (kh, kw), s, output_padding or (None, None)):
        if p is None:
            out = size * st if padding == "same" else size * st + max(k - st, 0)
        else:
            out = (size - 1) * st + (k % 2 if padding == "same" else k) + p
        before = max((size - 1) * st + k - out, 0) // 2 if padding == "same" else 0
        lengths.append(out)
        befores.append(before)
    full = F.conv_transpose2d(nchw(x), kernel.permute(3, 2, 0, 1), stride=s)
    need_h = befores[0] + lengths[0] - full.shape[2]
    need_w = befores[1] + lengths[1] - full.shape[3]
    full = F.pad(full, (0, max(need_w, 0), 0, max(need_h, 0)))
    y = full[:, :, befores[0]:befores[0] + lengths[0], befores[1]:befores[1] + lengths[1]]
    return nhwc(y) + bias


def separable_conv2d(x, dk, pk, bias, s, padding, d=1):
    """Keras SeparableConv2D: depthwise [kh, kw, C, D] (channel c*D+d), pointwise [1,1,C*D,F]."""
    kh, kw, c, mult = dk.shape
    xt = nchw(x)
    if padding == "same":
        top, bottom = same_pads(x.shape[1], kh, s, d)
        left, right = same_pads(x.shape[2], kw, s, d)
        xt = F.pad(xt, (left, right, top, bottom))
    wd = dk.reshape(kh, kw, c * mult).permute(2, 0, 1).unsqueeze(1)
    mid = F.conv2d(xt, wd, stride=s, dilation=d, groups=c)
    y = F.conv2d(mid, pk.permute(3, 2, 0, 1), bias)
    return nhwc(y)


def tconv_forward(params, x):
    # [3,3,2] -> Conv2DTranspose(3, 3x3, strides 2, same, relu) -> [6,6,3]
    #         -> Conv2DTranspose(2, 3x3, strides 2, valid, output_padding 1, tanh) -> [14,14,2]
    #         -> GlobalAveragePooling2D -> Dense(3, softmax)
    k1, b1, k2, b2, k3, b3 = params
    h = torch.relu(conv2d_transpose(x, k1, b1, (2, 2), "same"))
    h = torch.tanh(conv2d_transpose(h, k2, b2, (2, 2), "valid", (1, 1)))
    return torch.softmax(h.mean(dim=(1, 2)) @ k3 + b3, dim=1)


def sepconv_forward(params, x):
    # [6,6,2] -> SeparableConv2D(4, 3x3, depth_multiplier 2, strides 2, same, relu) -> [3,3,4]
    #         -> SeparableConv2D(3, 2x2, valid) -> [2,2,3] -> Flatten -> Dense(3, softmax)
    d1, p1, b1, d2, p2, b2, k3, b3 = params
    h = torch.relu(separable_conv2d(x, d1, p1, b1, 2, "same"))
    h = separable_conv2d(h, d2, p2, b2, 1, "valid")
    return torch.softmax(h.reshape(x.shape[0], -1) @ k3 + b3, dim=1)


def grouped_forward(params, x):
    # [5,5,4] -> Conv2D(4, 3x3, groups 2, valid, relu) -> [3,3,4]
    #         -> UpSampling2D(2, bilinear) -> [6,6,4] -> Cropping2D([[1,0],[0,2]]) -> [5,4,4]
    #         -> Flatten -> Dense(3, softmax)
    k1, b1, k2, b2 = params
    w = k1.permute(3, 2, 0, 1)  # [F, C/G, kh, kw]: torch's grouped layout
    h = torch.relu(nhwc(F.conv2d(nchw(x), w, b1, groups=2)))
    h = nhwc(F.interpolate(nchw(h), scale_factor=2, mode="bilinear", align_corners=False))
    h = h[:, 1:, 0:4, :]
    return torch.softmax(h.reshape(x.shape[0], -1) @ k2 + b2, dim=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261201)
    f32 = lambda a: np.asarray(a, dtype=np.float32)
    nrm = lambda scale, *shape: f32(rng.normal(scale=scale, size=shape))
    make("conv_transpose", tconv_forward, nrm(1.0, 2, 3, 3, 2), [2, 0],
         [nrm(0.5, 3, 3, 3, 2), nrm(0.1, 3), nrm(0.5, 3, 3, 2, 3), nrm(0.1, 2),
          nrm(0.5, 2, 3), nrm(0.1, 3)])
    make("separable_conv", sepconv_forward, nrm(1.0, 3, 6, 6, 2), [1, 2, 0],
         [nrm(0.5, 3, 3, 2, 2), nrm(0.5, 1, 1, 4, 4), nrm(0.1, 4),
          nrm(0.5, 2, 2, 4, 1), nrm(0.5, 1, 1, 4, 3), nrm(0.1, 3),
          nrm(0.5, 12, 3), nrm(0.1, 3)])
    make("grouped_bilinear", grouped_forward, nrm(1.0, 2, 5, 5, 4), [0, 1],
         [nrm(0.5, 3, 3, 2, 4), nrm(0.1, 4), nrm(0.3, 80, 3), nrm(0.1, 3)])


if __name__ == "__main__":
    main()
