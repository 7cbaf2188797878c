// Naive max pooling, the oracle of pool.cpp's fast paths (tests only): one output value at a time,
// every tap bounds-checked.
#include <cstdint>
#include <limits>

#include "kernels/pool.h"

namespace nnfleet {
namespace {

// Calls tap(at) for the offset in x of each in-image tap of output (img, oy, ox, ch), in
// row-major window order, until tap returns false.
template <typename Tap>
void for_each_tap(const ConvGeometry& g, int img, int oy, int ox, int ch, Tap tap) {
  for (int ky = 0; ky < g.kh; ++ky) {
    for (int kx = 0; kx < g.kw; ++kx) {
      const int iy = oy * g.sh - g.pad_top + ky * g.dh, ix = ox * g.sw - g.pad_left + kx * g.dw;
      if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
      if (!tap(((int64_t{img} * g.h + iy) * g.w + ix) * g.c + ch)) return;
    }
  }
}

template <typename Out>
void for_each_output(const ConvGeometry& g, int n, Out body) {
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox)
        for (int ch = 0; ch < g.c; ++ch)
          body(img, oy, ox, ch, ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c + ch);
}

}  // namespace

void max_pool2d_forward_ref(const ConvGeometry& g, int n, const float* x, float* y) {
  for_each_output(g, n, [&](int img, int oy, int ox, int ch, int64_t out) {
    float m = -std::numeric_limits<float>::infinity();
    bool any = false;
    for_each_tap(g, img, oy, ox, ch, [&](int64_t at) {
      m = m < x[at] ? x[at] : m;
      any = true;
      return true;
    });
    y[out] = any ? m : 0.0f;
  });
}

void max_pool2d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* y,
                             const float* dy, float* dx) {
  for_each_output(g, n, [&](int img, int oy, int ox, int ch, int64_t out) {
    for_each_tap(g, img, oy, ox, ch, [&](int64_t at) {
      if (x[at] != y[out]) return true;
      dx[at] += dy[out];
      return false;
    });
  });
}

}  // namespace nnfleet
