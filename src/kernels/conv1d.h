// Single-threaded 1-D convolution kernels (Conv1D), channels last, Keras layouts. Dimension
// letters: N batch, T C input (steps, channels), OT F output, K kernel taps. Input x[N,T,C],
// kernel w[K,C,F] (Keras's Conv1D layout), output y[N,OT,F].
// A 1-D convolution is a 2-D one over an image of height 1, and w[K,C,F] is already the
// [KH=1,KW=K,C,F] kernel in memory, so the fast path is the Conv2D GEMM path (im2col chunks or
// batch-reduce GEMMs) on a ConvGeometry with h = kh = 1. Only the padding differs: besides
// valid and same (extra zero after), "causal" pads (K-1)*dilation zeros before and none after,
// so output step t sees inputs t*stride - (K-1)*d .. t*stride. The `_ref` twins are written
// directly in 1-D, independently of the Conv2D code, and serve as the tests' oracle.
#pragma once

#include <cstddef>

#include "kernels/conv2d.h"

namespace nnfleet {

enum class Padding1d { kValid, kSame, kCausal };

// Fills g (h = kh = sh = dh = 1, w = t, kw = k, ...) for a Conv1D or 1-D pool over t steps of c
// channels into f output channels. Returns false when the output would be empty.
bool conv1d_geometry(ConvGeometry& g, int t, int c, int k, int stride, int dilation,
                     Padding1d padding, int f);

// Floats of scratch conv1d_forward/backward need for a batch of n.
size_t conv1d_scratch_floats(const ConvGeometry& g, int n);

// y[N,OT,F] = conv(x[N,T,C], w[K,C,F]) + b[F] (b may be null); with `act`, act_out = act(y) as
// in conv2d_forward.
void conv1d_forward(const ConvGeometry& g, int n, const float* x, const float* w, const float* b,
                    float* y, float* scratch, const Activation* act = nullptr,
                    float* act_out = nullptr);
// Accumulates (+=) dx[N,T,C] (skipped when null), dw[K,C,F], db[F] (skipped when null).
void conv1d_backward(const ConvGeometry& g, int n, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, float* scratch);

// Naive twins (tests only); y is overwritten, dx/dw/db accumulate like the fast ones.
void conv1d_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                        const float* b, float* y);
void conv1d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* dy, float* dx, float* dw, float* db);

}  // namespace nnfleet
