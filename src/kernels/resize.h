// Single-threaded image resizing and resampling kernels, NHWC: UpSampling2D's bilinear
// interpolation, Resizing's four methods (TensorFlow's tf.image.resize without antialiasing), and
// the projective sampler of the Random* augmentation layers (TensorFlow's
// ImageProjectiveTransformV3). Plain loops over precomputed taps: each kernel is its own naive
// form, so it has no separate _ref twin; tests check it against values worked out by hand and
// against a direct per-pixel evaluation, and its backward by a numerical gradient.
// The kernels a layer calls allocate nothing: the resize taps are rebuilt on each call in a
// caller's workspace of resize_work_floats() floats (the layer's scratch); the forms without a
// workspace allocate one and are for tests and one-off callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nnfleet {

// UpSampling2D with interpolation "bilinear", as TensorFlow's resize_bilinear with half-pixel
// centers (what Keras 2.3+/tf.keras and Keras 3 run): y[N,H*sh,W*sw,C] from x[N,H,W,C]. Output
// row oy samples input row (oy + 0.5) / sh - 0.5 (clamped into the image), lerped in float in
// TensorFlow's order (top = tl + (tr - tl) * xl; bottom likewise; top + (bottom - top) * yl).
// It is resize_forward(kBilinear) over upsample_geom(), bit for bit; this form allocates its
// workspace, so layers call resize_forward with their scratch instead.
void resize_bilinear_forward(int n, int h, int w, int c, int sh, int sw, const float* x, float* y);
// The adjoint: dx[N,H,W,C] += each output pixel's gradient spread back with its four weights.
// (Computes its taps on the fly; allocates nothing.)
void resize_bilinear_backward(int n, int h, int w, int c, int sh, int sw, const float* dy,
                              float* dx);

// tf.image.resize's methods (antialias off, half-pixel centers, align_corners off).
enum class ResizeMethod { kBilinear, kNearest, kBicubic, kArea };

// A resize of the window [y0, y0+ch) x [x0, x0+cw) of x[N,H,W,C] to y[N,OH,OW,C] (a crop then a
// resize, as Keras's crop_to_aspect_ratio; the window is the whole image otherwise).
struct ResizeGeom {
  int h = 0, w = 0, c = 0;  // input image
  int y0 = 0, x0 = 0;       // window origin
  int ch = 0, cw = 0;       // window size
  int oh = 0, ow = 0;       // output size
};
// The geometry of an integer upsampling [H,W,C] -> [H*sh, W*sw, C] (the whole image).
ResizeGeom upsample_geom(int h, int w, int c, int sh, int sw);

// One axis's taps: output o reads window indices idx[off[o] .. off[o+1]) with their weights.
// (A copy of the table the kernels build in their workspace, for the ONNX exporter and tests.)
struct AxisTaps {
  std::vector<int> off, idx;
  std::vector<float> wt;
  float post = 1.0f;  // a factor applied after the sum (area: 1 / scale)
};
// The taps of an axis resized from `in` to `out` by `m`, in TensorFlow's float arithmetic:
//   bilinear  pos = (o + 0.5) * in/out - 0.5; floor/ceil clamped; weights 1 - l, l
//   nearest   min(floor((o + 0.5) * in/out), in - 1)
//   bicubic   Keys a = -0.5 from TF's 1024-entry table, taps outside the image weigh 0 and the
//             rest are renormalized (resize_bicubic with half_pixel_centers)
//   area      the input cells covering [o * s, (o + 1) * s), s = in/out, each weighted by the
//             covered fraction; the sum is divided by the box area (resize_area)
AxisTaps resize_axis_taps(ResizeMethod m, int in, int out);

// Floats of workspace resize_forward / resize_backward use for `g`: both axes' tap tables, (OH + 1)
// + 2 * taps(y) + (OW + 1) + 2 * taps(x), taps = 2, 1 or 4 per output for bilinear, nearest and
// bicubic, and the covered cells for area (about in + out). Independent of the batch size.
size_t resize_work_floats(ResizeMethod m, const ResizeGeom& g);

// y[N,OH,OW,C] = the resized window of x[N,H,W,C]. Bilinear lerps in TensorFlow's order; the
// others sum sum_y wy * (sum_x wx * v) left to right, as TensorFlow's kernels do. `work` holds
// resize_work_floats(m, g) floats; the taps are rebuilt in it on every call (O(OH + OW + taps),
// small next to the N * OH * OW * C pass), so it needs no contents and carries none out.
void resize_forward(ResizeMethod m, int n, const ResizeGeom& g, const float* x, float* y,
                    float* work);
// dx[N,H,W,C] += the adjoint (each output gradient of dy[N,OH,OW,C] spread back with its
// weights); `work` as for resize_forward.
void resize_backward(ResizeMethod m, int n, const ResizeGeom& g, const float* dy, float* dx,
                     float* work);
// The same, allocating their own workspace (tests and one-off callers; never a layer).
void resize_forward(ResizeMethod m, int n, const ResizeGeom& g, const float* x, float* y);
void resize_backward(ResizeMethod m, int n, const ResizeGeom& g, const float* dy, float* dx);

// Keras's fill modes for points sampled outside the image.
enum class FillMode { kReflect, kWrap, kConstant, kNearest };

// The projective transform of TensorFlow's ImageProjectiveTransformV3 (Keras's affine_transform):
// output pixel (x, y) samples the input at ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k =
// c0 x + c1 y + 1, with `t` = [N, 8] {a0 a1 a2 b0 b1 b2 c0 c1}; the coordinate is first mapped
// into the image by `fill` (reflect d c b a | a b c d, wrap, nearest = clamp; constant keeps it),
// then read nearest (round half away from zero) or bilinearly, neighbours outside the image
// reading `fill_value`. x and y are [N,H,W,C].
void affine_transform_forward(int n, int h, int w, int c, const float* t, bool bilinear,
                              FillMode fill, float fill_value, const float* x, float* y);
// dx += the adjoint of the same sampling (fill_value reads carry no gradient).
void affine_transform_backward(int n, int h, int w, int c, const float* t, bool bilinear,
                               FillMode fill, const float* dy, float* dx);

}  // namespace nnfleet
