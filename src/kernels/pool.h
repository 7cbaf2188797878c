// Single-threaded pooling and padding kernels, NHWC. Geometry reuses ConvGeometry with f == c
// (kh/kw the pool size, sh/sw the strides). Padded positions never win a max and are not counted
// in an average (Keras/TensorFlow semantics). Backward accumulates (+=) into dx.
#pragma once

#include "kernels/conv2d.h"

namespace nnfleet {

// y[N,OH,OW,C] = max over each window of x[N,H,W,C].
void max_pool2d_forward(const ConvGeometry& g, int n, const float* x, float* y);
// Routes dy to the first maximal element of each window (recomputed from x and y). With
// dx_fresh, dx holds no zeros: it is written whole (the bits += gives on a zeroed dx).
void max_pool2d_backward(const ConvGeometry& g, int n, const float* x, const float* y,
                         const float* dy, float* dx, bool dx_fresh = false);
// Naive twins of the two above, the oracle of their fast paths (tests only).
void max_pool2d_forward_ref(const ConvGeometry& g, int n, const float* x, float* y);
void max_pool2d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* y,
                             const float* dy, float* dx);
void avg_pool2d_forward(const ConvGeometry& g, int n, const float* x, float* y);
void avg_pool2d_backward(const ConvGeometry& g, int n, const float* dy, float* dx);

// y[N,C] = mean / max of x[N,S,C] over the S = H*W positions.
void global_avg_pool_forward(int n, int s, int c, const float* x, float* y);
void global_avg_pool_backward(int n, int s, int c, const float* dy, float* dx);
void global_max_pool_forward(int n, int s, int c, const float* x, float* y);
void global_max_pool_backward(int n, int s, int c, const float* x, const float* y, const float* dy,
                              float* dx);

// y[N,H+top+bottom,W+left+right,C] = x zero-padded; backward adds the interior of dy into dx.
void zero_pad2d_forward(int n, int h, int w, int c, int top, int bottom, int left, int right,
                        const float* x, float* y);
void zero_pad2d_backward(int n, int h, int w, int c, int top, int bottom, int left, int right,
                         const float* dy, float* dx);

}  // namespace nnfleet
