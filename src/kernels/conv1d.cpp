// Conv1D through the Conv2D GEMM path on images of height 1 (see conv1d.h for why that is exact).
#include "kernels/conv1d.h"

namespace nnfleet {

bool conv1d_geometry(ConvGeometry& g, int t, int c, int k, int stride, int dilation,
                     Padding1d padding, int f) {
  g = ConvGeometry{};
  g.h = 1;
  g.w = t;
  g.c = c;
  g.kh = 1;
  g.kw = k;
  g.sh = 1;
  g.sw = stride;
  g.dh = 1;
  g.dw = dilation;
  g.f = f;
  if (padding != Padding1d::kCausal) return conv_geometry(g, padding == Padding1d::kSame);
  // Causal: Keras pads (k-1)*d zeros on the left and runs a valid convolution, so the output has
  // ceil(t / stride) steps (the dilated window always fits the padded input).
  if (t < 1 || c < 1 || k < 1 || stride < 1 || dilation < 1) return false;
  g.pad_left = (k - 1) * dilation;
  g.oh = 1;
  g.ow = (t - 1) / stride + 1;
  return true;
}

size_t conv1d_scratch_floats(const ConvGeometry& g, int n) { return conv2d_scratch_floats(g, n); }

void conv1d_forward(const ConvGeometry& g, int n, const float* x, const float* w, const float* b,
                    float* y, float* scratch, const Activation* act, float* act_out) {
  conv2d_forward(g, n, x, w, b, y, scratch, act, act_out);
}

void conv1d_backward(const ConvGeometry& g, int n, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, float* scratch) {
  conv2d_backward(g, n, x, w, dy, dx, dw, db, scratch);
}

}  // namespace nnfleet
