// Pooling and zero-padding kernels, NHWC, single-threaded. Every loop keeps the channel axis
// innermost, where NHWC is contiguous, so window reductions vectorize across channels.
// Windows follow ConvGeometry (pool size kh/kw, strides, dilation, "same" pads); padded positions
// never win a max and are not counted in an average, as in Keras/TensorFlow.
#include "kernels/pool.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

// The 64-byte vectors pass between this file's own inline helpers only (no interface).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace nnfleet {
namespace {

// The in-image part of one window: taps ky in [ky0, ky1), kx in [kx0, kx1).
struct Window {
  int ky0, ky1, kx0, kx1;
  int count() const { return std::max(ky1 - ky0, 0) * std::max(kx1 - kx0, 0); }
};

// First and one-past-last tap k with 0 <= start + k*step < size.
void tap_range(int start, int step, int taps, int size, int& k0, int& k1) {
  k0 = start >= 0 ? 0 : (-start + step - 1) / step;
  k1 = start >= size ? 0 : std::min(taps, (size - 1 - start) / step + 1);
  k0 = std::min(k0, k1);
}

Window window_at(const ConvGeometry& g, int oy, int ox) {
  Window win{};
  tap_range(oy * g.sh - g.pad_top, g.dh, g.kh, g.h, win.ky0, win.ky1);
  tap_range(ox * g.sw - g.pad_left, g.dw, g.kw, g.w, win.kx0, win.kx1);
  return win;
}

// The common pooling of CNNs: 2x2 windows, stride 2, no dilation, every window inside the image
// (valid padding, or "same" on even sizes). Its kernels take the four taps of a window as four
// contiguous channel rows, with no window arithmetic.
bool is_full_2x2(const ConvGeometry& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 &&
         g.pad_top == 0 && g.pad_left == 0 && 2 * g.oh <= g.h && 2 * g.ow <= g.w;
}

// Calls tap(out, x0, x1, x2, x3) for every output pixel of a full 2x2 pooling, with out the offset
// of its channel row in y and x0..x3 those of its window's taps in x, in row-major window order.
template <typename Tap>
void for_each_2x2(const ConvGeometry& g, int n, Tap tap) {
  const int64_t row = int64_t{g.w} * g.c;
  for (int img = 0; img < n; ++img) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        const int64_t out = ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
        const int64_t x0 = ((int64_t{img} * g.h + 2 * oy) * g.w + 2 * ox) * g.c;
        tap(out, x0, x0 + g.c, x0 + row, x0 + row + g.c);
      }
    }
  }
}

// Channels too few for a vector (C = 1, 2, 4, 8: m5's pooling has 8) leave most lanes of a
// channel-wise loop idle, and a 16-lane loop over 8 channels runs its scalar remainder only. Then
// a row of output pixels is taken as one flat run of OW*C floats instead: each vector of 16
// outputs comes from 32 consecutive floats of each of the window's two input rows, split by a
// fixed permutation into the left taps (pixel 2*ox) and the right ones (2*ox + 1). Every
// element sees the same operations in the same order as in the channel-wise loop, so the bits
// are the same. GCC vector extensions: 512-bit with AVX-512, two 256-bit halves with AVX2.
typedef float V16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
constexpr int kLanes = 16;

bool is_narrow_2x2(const ConvGeometry& g) {
  return is_full_2x2(g) && g.c < kLanes && kLanes % g.c == 0;
}

inline V16 load16(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store16(float* p, V16 v) { std::memcpy(p, &v, sizeof v); }
inline V16 vmax(V16 a, V16 b) { return a < b ? b : a; }  // std::max(a, b) lane by lane

// Lane l of the result is lane idx[l] of the 32 floats a then b. GCC compiles __builtin_shuffle
// to one vpermt2ps; clang (the fuzz builds) has no run-time-index shuffle, so it takes the plain
// loop, which moves the same floats and so gives the same bits.
inline V16 shuffle2(V16 a, V16 b, I16 idx) {
#if defined(__clang__)
  V16 r;
  for (int l = 0; l < kLanes; ++l) r[l] = idx[l] < kLanes ? a[idx[l]] : b[idx[l] - kLanes];
  return r;
#else
  return __builtin_shuffle(a, b, idx);
#endif
}

// For output lane l (pixel l / C, channel l % C of a 16-float block): the positions of its left
// tap in the 32 input floats (2l - l % C) and of its right tap (that + C).
struct NarrowMasks {
  I16 left, right, back_lo, back_hi;
  explicit NarrowMasks(int c) {
    for (int l = 0; l < kLanes; ++l) {
      left[l] = 2 * l - l % c;
      right[l] = left[l] + c;
    }
    // The inverse: input float i (pixel i / C, channel i % C) came from lane (i/C/2)*C + i%C of
    // the left taps (even pixels: index l) or of the right taps (odd: 16 + l).
    for (int i = 0; i < 2 * kLanes; ++i) {
      const int pix = i / c, lane = (pix / 2) * c + i % c + (pix % 2) * kLanes;
      if (i < kLanes) {
        back_lo[i] = lane;
      } else {
        back_hi[i - kLanes] = lane;
      }
    }
  }
};

// The narrow-channel 2x2 pooling, row by row (see is_narrow_2x2): whole vectors of 16 outputs,
// then the row's last pixels through `pixel` (the channel-wise body, for_each_2x2's arguments).
template <typename Body>
void for_each_narrow_row(const ConvGeometry& g, int n, Body body, const auto& pixel) {
  const int64_t row = int64_t{g.w} * g.c, out_row = int64_t{g.ow} * g.c;
  const int64_t full = out_row / kLanes;
  for (int img = 0; img < n; ++img) {
    for (int oy = 0; oy < g.oh; ++oy) {
      const int64_t out = (int64_t{img} * g.oh + oy) * out_row;
      const int64_t top = (int64_t{img} * g.h + 2 * oy) * row;
      for (int64_t u = 0; u < full; ++u) body(out + u * kLanes, top + 2 * u * kLanes, row);
      for (int64_t ox = full * kLanes / g.c; ox < g.ow; ++ox) {
        const int64_t x0 = top + 2 * ox * g.c;
        pixel(out + ox * g.c, x0, x0 + g.c, x0 + row, x0 + row + g.c);
      }
    }
  }
}

template <typename Pixel>
void max_pool2d_forward_narrow(const ConvGeometry& g, int n, const float* x, float* y,
                               const Pixel& pixel) {
  const NarrowMasks m(g.c);
  const V16 lowest = V16{} - std::numeric_limits<float>::infinity();
  for_each_narrow_row(
      g, n,
      [&](int64_t out, int64_t top, int64_t row) {
        const V16 t0 = load16(x + top), t1 = load16(x + top + kLanes);
        const V16 b0 = load16(x + top + row), b1 = load16(x + top + row + kLanes);
        const V16 a = shuffle2(t0, t1, m.left), b = shuffle2(t0, t1, m.right);
        const V16 c = shuffle2(b0, b1, m.left), d = shuffle2(b0, b1, m.right);
        store16(y + out, vmax(vmax(vmax(vmax(lowest, a), b), c), d));
      },
      pixel);
}

// The backward twin: each lane's gradient goes to the first tap (in window order) equal to the
// output, added as gk or 0 like the channel-wise loop, and the four taps' additions are put back
// in input order by the inverse permutation.
template <bool Fresh, typename Pixel>
void max_pool2d_backward_narrow(const ConvGeometry& g, int n, const float* x, const float* y,
                                const float* dy, float* dx, const Pixel& pixel) {
  // Fresh: dx holds no zeros to add to; adding to zero vectors gives the same bits.
  const auto dx_at = [](const float* p) { return Fresh ? V16{} : load16(p); };
  const NarrowMasks m(g.c);
  for_each_narrow_row(
      g, n,
      [&](int64_t out, int64_t top, int64_t row) {
        const V16 t0 = load16(x + top), t1 = load16(x + top + kLanes);
        const V16 b0 = load16(x + top + row), b1 = load16(x + top + row + kLanes);
        const V16 a = shuffle2(t0, t1, m.left), b = shuffle2(t0, t1, m.right);
        const V16 c = shuffle2(b0, b1, m.left), d = shuffle2(b0, b1, m.right);
        const V16 t = load16(y + out), gk = load16(dy + out), zero = {};
        const I16 ea = a == t, eb = b == t, ec = c == t, ed = d == t;
        const I16 hb = eb & ~ea, hc = ec & ~(ea | eb), hd = ed & ~(ea | eb | ec);
        const V16 ga = ea ? gk : zero, gb = hb ? gk : zero, gc = hc ? gk : zero,
                  gd = hd ? gk : zero;
        float* top_dx = dx + top;
        float* bottom_dx = dx + top + row;
        store16(top_dx, dx_at(top_dx) + shuffle2(ga, gb, m.back_lo));
        store16(top_dx + kLanes, dx_at(top_dx + kLanes) + shuffle2(ga, gb, m.back_hi));
        store16(bottom_dx, dx_at(bottom_dx) + shuffle2(gc, gd, m.back_lo));
        store16(bottom_dx + kLanes, dx_at(bottom_dx + kLanes) + shuffle2(gc, gd, m.back_hi));
      },
      pixel);
}
}  // namespace

// y[n,oy,ox,c] = max over the window's in-image taps of x[n,iy,ix,c]; the running max lives in
// the output row, updated tap by tap with a contiguous channel loop.
void max_pool2d_forward(const ConvGeometry& g, int n, const float* x, float* y) {
  // Same fold as the general loop (from -inf, taps in order), so results are identical.
  auto pixel = [&](int64_t out, int64_t t0, int64_t t1, int64_t t2, int64_t t3) {
    float* __restrict o = y + out;
    const float* __restrict a = x + t0, * __restrict b = x + t1, * __restrict c = x + t2, * __restrict d = x + t3;
    for (int k = 0; k < g.c; ++k) {
      const float m = std::max(std::max(-std::numeric_limits<float>::infinity(), a[k]), b[k]);
      o[k] = std::max(std::max(m, c[k]), d[k]);
    }
  };
  if (is_narrow_2x2(g)) {
    max_pool2d_forward_narrow(g, n, x, y, pixel);
    return;
  }
  if (is_full_2x2(g)) {
    for_each_2x2(g, n, pixel);
    return;
  }
  for (int img = 0; img < n; ++img) {
    const float* image = x + int64_t{img} * g.h * g.w * g.c;
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        float* __restrict out = y + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
        const Window win = window_at(g, oy, ox);
        if (win.count() == 0) {
          std::fill_n(out, g.c, 0.0f);
          continue;
        }
        std::fill_n(out, g.c, -std::numeric_limits<float>::infinity());
        for (int ky = win.ky0; ky < win.ky1; ++ky) {
          const int iy = oy * g.sh - g.pad_top + ky * g.dh;
          for (int kx = win.kx0; kx < win.kx1; ++kx) {
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            const float* __restrict in = image + (int64_t{iy} * g.w + ix) * g.c;
            for (int c = 0; c < g.c; ++c) out[c] = std::max(out[c], in[c]);
          }
        }
      }
    }
  }
}

namespace {

// The full 2x2 pooling's backward (is_full_2x2), adding to dx or, Fresh, writing it: 0 + the
// gradient, the bits += gives on a zeroed dx. Fresh needs every x under a window.
template <bool Fresh>
void max_pool2d_backward_2x2(const ConvGeometry& g, int n, const float* x, const float* y,
                             const float* dy, float* dx) {
  auto pixel = [&](int64_t out, int64_t t0, int64_t t1, int64_t t2, int64_t t3) {
    const float* __restrict target = y + out, * __restrict grad = dy + out;
    const float* __restrict a = x + t0, * __restrict b = x + t1, * __restrict c = x + t2, * __restrict d = x + t3;
    float* __restrict da = dx + t0, * __restrict db = dx + t1, * __restrict dc = dx + t2, * __restrict dd = dx + t3;
    // Adding 0 where a tap does not win keeps the loop a branch-free vector select-and-add; it
    // can only turn a -0 gradient into +0.
#if defined(__GNUC__) && !defined(__clang__)  // the fuzz build uses clang
#pragma GCC ivdep
#endif
    for (int k = 0; k < g.c; ++k) {
      const float t = target[k], gk = grad[k];
      const bool ea = a[k] == t, eb = b[k] == t, ec = c[k] == t, ed = d[k] == t;
      const bool ha = ea, hb = eb & !ea, hc = ec & !(ea | eb), hd = ed & !(ea | eb | ec);
      da[k] = (Fresh ? 0.0f : da[k]) + (ha ? gk : 0.0f);
      db[k] = (Fresh ? 0.0f : db[k]) + (hb ? gk : 0.0f);
      dc[k] = (Fresh ? 0.0f : dc[k]) + (hc ? gk : 0.0f);
      dd[k] = (Fresh ? 0.0f : dd[k]) + (hd ? gk : 0.0f);
    }
  };
  if (is_narrow_2x2(g)) {
    max_pool2d_backward_narrow<Fresh>(g, n, x, y, dy, dx, pixel);
    return;
  }
  for_each_2x2(g, n, pixel);
}

}  // namespace

// For each output value, dy goes to the first tap (row-major window order) whose x equals the
// max y, as TensorFlow's MaxPoolGrad does. Channels are handled in blocks of kBlock with the
// block's targets in a small array; once a channel is routed its target becomes NaN, which no x
// equals, so later taps skip it without a branch and the channel loops vectorize.
void max_pool2d_backward(const ConvGeometry& g, int n, const float* x, const float* y,
                         const float* dy, float* dx, bool dx_fresh) {
  if (is_full_2x2(g)) {
    // Fresh where the windows cover x (m7's 24 x 24), else zeroed first like any other pooling.
    const bool covered = 2 * g.oh == g.h && 2 * g.ow == g.w;
    if (dx_fresh && covered) {
      max_pool2d_backward_2x2<true>(g, n, x, y, dy, dx);
      return;
    }
    if (dx_fresh) std::fill_n(dx, int64_t{n} * g.h * g.w * g.c, 0.0f);
    max_pool2d_backward_2x2<false>(g, n, x, y, dy, dx);
    return;
  }
  if (dx_fresh) std::fill_n(dx, int64_t{n} * g.h * g.w * g.c, 0.0f);
  constexpr int kBlock = 64;
  const float routed = std::numeric_limits<float>::quiet_NaN();
  float target[kBlock];
  for (int img = 0; img < n; ++img) {
    const int64_t image_offset = int64_t{img} * g.h * g.w * g.c;
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        const int64_t out = ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
        const Window win = window_at(g, oy, ox);
        for (int c0 = 0; c0 < g.c; c0 += kBlock) {
          const int len = std::min(kBlock, g.c - c0);
          const float* __restrict grad = dy + out + c0;
          std::copy_n(y + out + c0, len, target);
          for (int ky = win.ky0; ky < win.ky1; ++ky) {
            const int iy = oy * g.sh - g.pad_top + ky * g.dh;
            for (int kx = win.kx0; kx < win.kx1; ++kx) {
              const int ix = ox * g.sw - g.pad_left + kx * g.dw;
              const int64_t at = image_offset + (int64_t{iy} * g.w + ix) * g.c + c0;
              const float* __restrict in = x + at;
              float* __restrict d = dx + at;
              for (int c = 0; c < len; ++c) {
                const bool hit = in[c] == target[c];
                d[c] = hit ? d[c] + grad[c] : d[c];
                target[c] = hit ? routed : target[c];
              }
            }
          }
        }
      }
    }
  }
}

// y[n,oy,ox,c] = (sum of the window's in-image x[n,iy,ix,c]) / (number of in-image taps).
void avg_pool2d_forward(const ConvGeometry& g, int n, const float* x, float* y) {
  for (int img = 0; img < n; ++img) {
    const float* image = x + int64_t{img} * g.h * g.w * g.c;
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        float* __restrict out = y + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
        const Window win = window_at(g, oy, ox);
        std::fill_n(out, g.c, 0.0f);
        for (int ky = win.ky0; ky < win.ky1; ++ky) {
          const int iy = oy * g.sh - g.pad_top + ky * g.dh;
          for (int kx = win.kx0; kx < win.kx1; ++kx) {
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            const float* __restrict in = image + (int64_t{iy} * g.w + ix) * g.c;
            for (int c = 0; c < g.c; ++c) out[c] += in[c];
          }
        }
        const int count = win.count();
        const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
        for (int c = 0; c < g.c; ++c) out[c] *= scale;
      }
    }
  }
}

// dx[n,iy,ix,c] += dy[n,oy,ox,c] / count for every in-image tap of every window.
void avg_pool2d_backward(const ConvGeometry& g, int n, const float* dy, float* dx) {
  for (int img = 0; img < n; ++img) {
    float* image = dx + int64_t{img} * g.h * g.w * g.c;
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        const float* __restrict grad = dy + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.c;
        const Window win = window_at(g, oy, ox);
        const int count = win.count();
        if (count == 0) continue;
        const float scale = 1.0f / static_cast<float>(count);
        for (int ky = win.ky0; ky < win.ky1; ++ky) {
          const int iy = oy * g.sh - g.pad_top + ky * g.dh;
          for (int kx = win.kx0; kx < win.kx1; ++kx) {
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            float* __restrict in = image + (int64_t{iy} * g.w + ix) * g.c;
            for (int c = 0; c < g.c; ++c) in[c] += grad[c] * scale;
          }
        }
      }
    }
  }
}

// y[n,c] = mean over s of x[n,s,c]: rows of C added in order, then scaled.
void global_avg_pool_forward(int n, int s, int c, const float* x, float* y) {
  const float scale = s > 0 ? 1.0f / static_cast<float>(s) : 0.0f;
  for (int img = 0; img < n; ++img) {
    float* __restrict out = y + int64_t{img} * c;
    std::fill_n(out, c, 0.0f);
    for (int p = 0; p < s; ++p) {
      const float* __restrict in = x + (int64_t{img} * s + p) * c;
      for (int k = 0; k < c; ++k) out[k] += in[k];
    }
    for (int k = 0; k < c; ++k) out[k] *= scale;
  }
}

// dx[n,s,c] += dy[n,c] / S.
void global_avg_pool_backward(int n, int s, int c, const float* dy, float* dx) {
  const float scale = s > 0 ? 1.0f / static_cast<float>(s) : 0.0f;
  for (int img = 0; img < n; ++img) {
    const float* __restrict grad = dy + int64_t{img} * c;
    for (int p = 0; p < s; ++p) {
      float* __restrict in = dx + (int64_t{img} * s + p) * c;
      for (int k = 0; k < c; ++k) in[k] += grad[k] * scale;
    }
  }
}

// y[n,c] = max over s of x[n,s,c].
void global_max_pool_forward(int n, int s, int c, const float* x, float* y) {
  for (int img = 0; img < n; ++img) {
    float* __restrict out = y + int64_t{img} * c;
    if (s == 0) {
      std::fill_n(out, c, 0.0f);
      continue;
    }
    std::copy_n(x + int64_t{img} * s * c, c, out);
    for (int p = 1; p < s; ++p) {
      const float* __restrict in = x + (int64_t{img} * s + p) * c;
      for (int k = 0; k < c; ++k) out[k] = std::max(out[k], in[k]);
    }
  }
}

// dy[n,c] goes to the first position p (lowest s) with x[n,p,c] == y[n,c].
void global_max_pool_backward(int n, int s, int c, const float* x, const float* y, const float* dy,
                              float* dx) {
  for (int img = 0; img < n; ++img) {
    for (int k = 0; k < c; ++k) {
      const float target = y[int64_t{img} * c + k];
      for (int p = 0; p < s; ++p) {
        const int64_t at = (int64_t{img} * s + p) * c + k;
        if (x[at] == target) {
          dx[at] += dy[int64_t{img} * c + k];
          break;
        }
      }
    }
  }
}

// y = x framed by zeros; each input row of W*C floats is contiguous in both tensors.
void zero_pad2d_forward(int n, int h, int w, int c, int top, int bottom, int left, int right,
                        const float* x, float* y) {
  const int ph = h + top + bottom, pw = w + left + right;
  const int64_t out_row = int64_t{pw} * c;
  for (int img = 0; img < n; ++img) {
    float* out = y + int64_t{img} * ph * out_row;
    std::fill_n(out, int64_t{top} * out_row, 0.0f);
    for (int iy = 0; iy < h; ++iy) {
      float* row = out + int64_t{top + iy} * out_row;
      std::fill_n(row, int64_t{left} * c, 0.0f);
      std::copy_n(x + (int64_t{img} * h + iy) * w * c, int64_t{w} * c, row + int64_t{left} * c);
      std::fill_n(row + int64_t{left + w} * c, int64_t{right} * c, 0.0f);
    }
    std::fill_n(out + int64_t{top + h} * out_row, int64_t{bottom} * out_row, 0.0f);
  }
}

// dx[n,h,w,c] += dy[n, top+h, left+w, c]; the border of dy belongs to no input.
void zero_pad2d_backward(int n, int h, int w, int c, int top, int bottom, int left, int right,
                         const float* dy, float* dx) {
  const int ph = h + top + bottom, pw = w + left + right;
  const int64_t row_len = int64_t{w} * c;
  for (int img = 0; img < n; ++img) {
    for (int iy = 0; iy < h; ++iy) {
      const float* __restrict src = dy + ((int64_t{img} * ph + top + iy) * pw + left) * c;
      float* __restrict dst = dx + (int64_t{img} * h + iy) * row_len;
      for (int64_t i = 0; i < row_len; ++i) dst[i] += src[i];
    }
  }
}

}  // namespace nnfleet
