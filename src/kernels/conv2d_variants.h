// Single-threaded kernels of the convolution variants built on the Conv2D ones: the transposed
// convolution (Keras Conv2DTranspose) and the grouped convolution (Conv2D with groups > 1),
// NHWC with Keras weight layouts. Each keeps a naive `_ref` twin used only by tests.
//
// A transposed convolution is the input-gradient of an ordinary convolution, so it is described
// by that convolution's ConvGeometry g: the transposed layer's OUTPUT [H,W,C] is g's input and
// its INPUT [OH,OW,F] is g's output; its kernel [KH,KW,C,F] is g's kernel, which is exactly
// Keras's Conv2DTranspose layout (kh, kw, filters, input channels). The transposed layer's bias
// has one value per output channel: b[C].
//
// A grouped convolution splits the C input channels and F filters into G groups: output channel
// f (of group f / (F/G)) sees only input channels [grp*C/G, (grp+1)*C/G); kernel [KH,KW,C/G,F]
// (Keras's layout), bias [F]. g.c and g.f are the full C and F.
#pragma once

#include <cstddef>

#include "kernels/conv2d.h"

namespace nnfleet {

// Floats of scratch conv2d_transpose_forward/backward need for a batch of n.
size_t conv2d_transpose_scratch_floats(const ConvGeometry& g, int n);

// y[N,H,W,C] = conv^T(x[N,OH,OW,F], w[KH,KW,C,F]) + b[C] (b may be null): every input pixel
// adds x[n,oy,ox,:] . w[ky,kx,c,:] onto y[n, oy*sh - pad_top + ky*dh, ox*sw - pad_left + kx*dw, c]
// (taps that land in the padding are dropped).
void conv2d_transpose_forward(const ConvGeometry& g, int n, const float* x, const float* w,
                              const float* b, float* y, float* scratch);
void conv2d_transpose_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                  const float* b, float* y);
// Accumulates (+=) dx[N,OH,OW,F] (skipped when null), dw[KH,KW,C,F] and db[C] (skipped when
// null) from dy[N,H,W,C].
void conv2d_transpose_backward(const ConvGeometry& g, int n, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db, float* scratch);
void conv2d_transpose_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                   const float* dy, float* dx, float* dw, float* db);

// Floats of scratch conv2d_grouped_forward/backward need for a batch of n and `groups` groups.
size_t conv2d_grouped_scratch_floats(const ConvGeometry& g, int groups, int n);

// y[N,OH,OW,F] = grouped conv(x[N,H,W,C], w[KH,KW,C/G,F]) + b[F] (b may be null).
void conv2d_grouped_forward(const ConvGeometry& g, int groups, int n, const float* x,
                            const float* w, const float* b, float* y, float* scratch);
void conv2d_grouped_forward_ref(const ConvGeometry& g, int groups, int n, const float* x,
                                const float* w, const float* b, float* y);
// Accumulates (+=) dx[N,H,W,C] (skipped when null), dw[KH,KW,C/G,F], db[F] (skipped when null).
void conv2d_grouped_backward(const ConvGeometry& g, int groups, int n, const float* x,
                             const float* w, const float* dy, float* dx, float* dw, float* db,
                             float* scratch);
void conv2d_grouped_backward_ref(const ConvGeometry& g, int groups, int n, const float* x,
                                 const float* w, const float* dy, float* dx, float* dw, float* db);

}  // namespace nnfleet
