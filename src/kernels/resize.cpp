// Bilinear upsampling by integer factors, TensorFlow's half-pixel resize_bilinear (see resize.h).
#include "kernels/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace nnfleet {
namespace {

// Where output index o of an axis resized from `in` to `out` samples the input: the two
// neighbours and the weight of the upper one, computed in float exactly as TensorFlow's
// compute_interpolation_weights with its HalfPixelScaler and scale in / out.
struct Tap {
  int lo, hi;
  float lerp;
};
Tap axis_tap(int o, int in, int out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  const float pos = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
  const float base = std::floor(pos);
  return {std::max(static_cast<int>(base), 0), std::min(static_cast<int>(std::ceil(pos)), in - 1),
          pos - base};
}

}  // namespace

void resize_bilinear_forward(int n, int h, int w, int c, int sh, int sw, const float* x, float* y) {
  const int oh = h * sh, ow = w * sw;
  std::vector<Tap> xt(static_cast<size_t>(ow));
  for (int ox = 0; ox < ow; ++ox) xt[static_cast<size_t>(ox)] = axis_tap(ox, w, ow);
  for (int img = 0; img < n; ++img) {
    const float* image = x + int64_t{img} * h * w * c;
    for (int oy = 0; oy < oh; ++oy) {
      const Tap ty = axis_tap(oy, h, oh);
      const float* top = image + int64_t{ty.lo} * w * c;
      const float* bottom = image + int64_t{ty.hi} * w * c;
      float* out = y + ((int64_t{img} * oh + oy) * ow) * c;
      for (int ox = 0; ox < ow; ++ox) {
        const Tap& tx = xt[static_cast<size_t>(ox)];
        const float* tl = top + int64_t{tx.lo} * c;
        const float* tr = top + int64_t{tx.hi} * c;
        const float* bl = bottom + int64_t{tx.lo} * c;
        const float* br = bottom + int64_t{tx.hi} * c;
        float* __restrict o = out + int64_t{ox} * c;
        for (int ch = 0; ch < c; ++ch) {
          const float t = tl[ch] + (tr[ch] - tl[ch]) * tx.lerp;
          const float b = bl[ch] + (br[ch] - bl[ch]) * tx.lerp;
          o[ch] = t + (b - t) * ty.lerp;
        }
      }
    }
  }
}

// y = (1-yl)((1-xl) tl + xl tr) + yl((1-xl) bl + xl br), so each corner gets its product of
// weights times dy (neighbours that coincide at the border receive both shares).
void resize_bilinear_backward(int n, int h, int w, int c, int sh, int sw, const float* dy,
                              float* dx) {
  const int oh = h * sh, ow = w * sw;
  for (int img = 0; img < n; ++img) {
    float* image = dx + int64_t{img} * h * w * c;
    for (int oy = 0; oy < oh; ++oy) {
      const Tap ty = axis_tap(oy, h, oh);
      for (int ox = 0; ox < ow; ++ox) {
        const Tap tx = axis_tap(ox, w, ow);
        const float* g = dy + ((int64_t{img} * oh + oy) * ow + ox) * c;
        const float wy[2] = {1.0f - ty.lerp, ty.lerp}, wx[2] = {1.0f - tx.lerp, tx.lerp};
        const int ys[2] = {ty.lo, ty.hi}, xs[2] = {tx.lo, tx.hi};
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            float* __restrict d = image + (int64_t{ys[a]} * w + xs[b]) * c;
            const float k = wy[a] * wx[b];
            for (int ch = 0; ch < c; ++ch) d[ch] += k * g[ch];
          }
      }
    }
  }
}

}  // namespace nnfleet
