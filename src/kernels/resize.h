// Single-threaded image resizing kernels (UpSampling2D's bilinear interpolation), NHWC.
// Plain loops: the kernel is its own naive form, so it has no separate _ref twin; tests check it
// against values worked out by hand and its backward by a numerical gradient.
#pragma once

namespace nnfleet {

// UpSampling2D with interpolation "bilinear", as TensorFlow's resize_bilinear with half-pixel
// centers (what Keras 2.3+/tf.keras and Keras 3 run): y[N,H*sh,W*sw,C] from x[N,H,W,C]. Output
// row oy samples input row (oy + 0.5) / sh - 0.5 (clamped into the image), lerped in float in
// TensorFlow's order (top = tl + (tr - tl) * xl; bottom likewise; top + (bottom - top) * yl).
void resize_bilinear_forward(int n, int h, int w, int c, int sh, int sw, const float* x, float* y);
// The adjoint: dx[N,H,W,C] += each output pixel's gradient spread back with its four weights.
void resize_bilinear_backward(int n, int h, int w, int c, int sh, int sw, const float* dy,
                              float* dx);

}  // namespace nnfleet
