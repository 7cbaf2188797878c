// Single-threaded 2-D convolution kernels (Conv2D and DepthwiseConv2D), NHWC, Keras layouts:
// Conv2D kernel [KH,KW,C,F], DepthwiseConv2D kernel [KH,KW,C,D] (D = depth multiplier, output
// channel c*D+d). Dimension letters: N batch, H W C input, OH OW F output, KH KW kernel.
// Padding: Keras/TensorFlow "same" puts the extra pixel after (bottom/right); conv_geometry()
// computes it. Each fast kernel keeps a naive `_ref` twin used only by tests.
// conv2d_forward/conv2d_backward pick the fastest path per pass (Winograd for stride-1 3x3 layers
// with channels enough, see conv2d_winograd.h; else oneDNN's JIT convolution where it
// serves the shape, see conv2d_onednn.h; else the im2col/GEMM path, also callable directly as
// conv2d_forward_gemm/conv2d_backward_gemm). conv2d_scratch_floats is the plan step: call it
// (thread-safe) before the passes for a geometry; any later batch of at most n can then run.
// The passes are thread-safe, start no threads, and give results independent of buffer
// alignment and of the batch an image comes in.
#pragma once

#include <cstddef>

#include "kernels/activation.h"

namespace nnfleet {

struct ConvGeometry {
  int h = 0, w = 0, c = 0;        // input
  int kh = 1, kw = 1;             // kernel
  int sh = 1, sw = 1;             // strides
  int dh = 1, dw = 1;             // dilation
  int pad_top = 0, pad_left = 0;  // zero padding before (the rest of "same" padding is after)
  int oh = 0, ow = 0;             // output
  int f = 0;                      // output channels (filters, or C*D for depthwise)
};

// Fills pads and output size for "valid" (same_padding false) or "same" padding.
// Returns false when the output would be empty (the caller reports the error).
bool conv_geometry(ConvGeometry& g, bool same_padding);

// Floats of scratch conv2d_forward/backward need for a batch of n (e.g. an im2col buffer).
size_t conv2d_scratch_floats(const ConvGeometry& g, int n);

// y[N,OH,OW,F] = conv(x[N,H,W,C], w[KH,KW,C,F]) + b[F] (b may be null). With `act` (and
// `act_out`, which may be y itself), act_out = act(y) is applied chunk by chunk as y is produced,
// while each chunk is still in cache.
void conv2d_forward(const ConvGeometry& g, int n, const float* x, const float* w, const float* b,
                    float* y, float* scratch, const Activation* act = nullptr,
                    float* act_out = nullptr);
void conv2d_forward_gemm(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* b, float* y, float* scratch, const Activation* act = nullptr,
                         float* act_out = nullptr);
void conv2d_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                        const float* b, float* y);
// Accumulates (+=) dx[N,H,W,C] (skipped when null), dw[KH,KW,C,F], db[F] (skipped when null).
// With dx_fresh, dx holds no zeros: it is written whole (the bits += gives on a zeroed dx).
void conv2d_backward(const ConvGeometry& g, int n, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, float* scratch, bool dx_fresh = false);
void conv2d_backward_gemm(const ConvGeometry& g, int n, const float* x, const float* w,
                          const float* dy, float* dx, float* dw, float* db, float* scratch);
void conv2d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* dy, float* dx, float* dw, float* db);

// Depthwise: g.f == g.c * depth_multiplier; w[KH,KW,C,D], b[C*D].
void depthwise_conv2d_forward(const ConvGeometry& g, int n, const float* x, const float* w,
                              const float* b, float* y);
void depthwise_conv2d_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                  const float* b, float* y);
void depthwise_conv2d_backward(const ConvGeometry& g, int n, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db);
void depthwise_conv2d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                   const float* dy, float* dx, float* dw, float* db);

}  // namespace nnfleet
