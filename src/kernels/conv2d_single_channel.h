// Conv2D on a single-channel input (a network's first layer on grey images: W1's m5, m6, m7),
// stride 1, no dilation, "valid" padding, without im2col. The GEMM path unrolls such an input
// into a [9, R] matrix and multiplies it by a [9, F] kernel: a product too thin to fill a vector
// unit (m5: 19% of its step in the unrolling, BENCHMARKS.md). Here each image is expanded once
// into E[pixel, f] = x[pixel] (F copies of every pixel), after which a tap (ky, kx) is a shift
// of E by (ky*W + kx)*F floats and every output row is a flat, fully vectorized multiply-add of
// OW*F floats per tap, at any vector width. Used by conv2d.cpp where
// conv2d_single_channel_applies says so.
#pragma once

#include <cstddef>

#include "kernels/activation.h"
#include "kernels/conv2d.h"

namespace nnfleet {

// True for C == 1, stride 1, dilation 1, valid padding, at most 49 taps, and F dividing 16 or a
// multiple of 16 up to 64 (the lane pattern of a vector then repeats every F or 16 floats).
bool conv2d_single_channel_applies(const ConvGeometry& g);

// Floats of scratch either pass needs (independent of the batch size).
size_t conv2d_single_channel_scratch_floats(const ConvGeometry& g);

// y = conv(x) + b (b may be null); with `act`, act_out = act(y) image by image.
void conv2d_forward_single_channel(const ConvGeometry& g, int n, const float* x, const float* w,
                                   const float* b, float* y, float* scratch, const Activation* act,
                                   float* act_out);

// dw[KH,KW,1,F] += the kernel gradient, and db[F] += the bias gradient unless db is null (the
// input gradient is left to the caller).
void conv2d_backward_weights_single_channel(const ConvGeometry& g, int n, const float* x,
                                            const float* dy, float* dw, float* db, float* scratch);

}  // namespace nnfleet
