// Single-channel Conv2D without im2col (see conv2d_single_channel.h for the idea).
// Lane l of the v-th 16-float vector of an output row is q = 16v + l, i.e. pixel q / F, filter
// q % F; since F divides 16 or is a multiple of it, the filter of a lane depends only on
// v mod P (P = 1, or F / 16), so each tap needs P weight vectors. The vectors are GCC's
// vector extensions: one 512-bit register with AVX-512, two 256-bit ones in the AVX2 build;
// every lane does the same arithmetic in the same order either way, and nothing depends on where
// a buffer starts (loads and stores go through memcpy).
#include "kernels/conv2d_single_channel.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

// The 64-byte vectors pass between this file's own inline helpers only, so the AVX2 build's
// note that their calling convention differs from an AVX-512 build's concerns no interface.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace nnfleet {
namespace {

typedef float V16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
constexpr int kLanes = 16;
constexpr int kMaxTaps = 49;
constexpr int kMaxF = 64;
constexpr int kChains = 4;
constexpr int64_t kBlockFloats =
    8 * 1024;  // 32 KB of E per block of output rows (backward)  // independent accumulators per
               // kernel-gradient sum (FMA latency 4)

inline V16 load(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V16 v) { std::memcpy(p, &v, sizeof v); }
inline V16 splat(float s) { return V16{} + s; }

int patterns(const ConvGeometry& g) { return g.f % kLanes == 0 ? g.f / kLanes : 1; }

// Floats of one expanded image: F copies of each pixel, then 16 zeros that the last row's last
// vector may read past the image (at most H*W*F + 15, see conv2d_single_channel_scratch_floats).
int64_t expanded_floats(const ConvGeometry& g) { return int64_t{g.h} * g.w * g.f + kLanes; }

// e[i*F + f] = x[i] for the image's H*W pixels, then the zero tail.
void expand(const ConvGeometry& g, const float* x, float* e) {
  const int64_t pixels = int64_t{g.h} * g.w;
  if (g.f % kLanes == 0) {
    for (int64_t i = 0; i < pixels; ++i) {
      const V16 v = splat(x[i]);
      for (int j = 0; j < g.f; j += kLanes) store(e + i * g.f + j, v);
    }
  } else if (g.f == 8) {
    const I16 low = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 1 < pixels; i += 2) store(e + i * 8, low ? splat(x[i]) : splat(x[i + 1]));
    for (; i < pixels; ++i) std::fill_n(e + i * 8, 8, x[i]);
  } else {
    for (int64_t i = 0; i < pixels; ++i) std::fill_n(e + i * g.f, g.f, x[i]);
  }
  std::fill_n(e + pixels * g.f, kLanes, 0.0f);
}

// Offsets in E of each tap (ky, kx) relative to the output pixel's own position.
void tap_shifts(const ConvGeometry& g, int64_t* shift) {
  for (int ky = 0; ky < g.kh; ++ky)
    for (int kx = 0; kx < g.kw; ++kx) shift[ky * g.kw + kx] = (int64_t{ky} * g.w + kx) * g.f;
}

// pattern[j][l] = src[(16j + l) % F] for j < P: F values laid out as the lanes of vector j see
// them.
void lane_pattern(int f, int p, const float* src, float* pattern) {
  for (int j = 0; j < p; ++j)
    for (int l = 0; l < kLanes; ++l) pattern[j * kLanes + l] = src[(j * kLanes + l) % f];
}

// c0..c3 += E[v] * dy[v] over one row's vectors v = j, j + P, ...: four at a time round-robin
// (four FMA chains in flight), then the row's last ones, and its partial vector (dy's lanes past
// the row read as zeros), into c0. The order depends on the geometry alone.
inline void accumulate_row(const float* e_row, const float* dy_row, int64_t j, int p, int64_t full,
                           int rem, V16& c0, V16& c1, V16& c2, V16& c3) {
  int64_t v = j;
  for (; v + 3 * p < full; v += 4 * p) {
    c0 += load(e_row + v * kLanes) * load(dy_row + v * kLanes);
    c1 += load(e_row + (v + p) * kLanes) * load(dy_row + (v + p) * kLanes);
    c2 += load(e_row + (v + 2 * p) * kLanes) * load(dy_row + (v + 2 * p) * kLanes);
    c3 += load(e_row + (v + 3 * p) * kLanes) * load(dy_row + (v + 3 * p) * kLanes);
  }
  for (; v < full; v += p) c0 += load(e_row + v * kLanes) * load(dy_row + v * kLanes);
  if (rem != 0) {  // then P = 1 and v == full
    V16 d = {};
    std::memcpy(&d, dy_row + v * kLanes, sizeof(float) * rem);
    c0 += load(e_row + v * kLanes) * d;
  }
}

// lanes[16] summed into out[F] by filter (lane l holds filter (16j + l) % F), lanes in order.
void add_lanes(const float* lanes, int f, int j, float* out) {
  if (f >= kLanes) {
    for (int l = 0; l < kLanes; ++l) out[j * kLanes + l] += lanes[l];
    return;
  }
  for (int k = 0; k < f; ++k) {
    float s = lanes[k];
    for (int l = k + f; l < kLanes; l += f) s += lanes[l];
    out[k] += s;
  }
}

// db[f] += the sum of dy over every pixel of the batch: dy is one flat run of n*OH*OW*F floats
// whose v-th vector has pattern v % P; four chains per pattern, then the lanes of each filter.
void bias_gradient(const ConvGeometry& g, int n, const float* dy, float* db) {
  const int p = patterns(g);
  const int64_t total = int64_t{n} * g.oh * g.ow * g.f, full = total / kLanes;
  const int rem = static_cast<int>(total % kLanes);
  for (int j = 0; j < p; ++j) {
    V16 c0 = {}, c1 = {}, c2 = {}, c3 = {};
    int64_t v = j;
    for (; v + 3 * p < full; v += 4 * p) {
      c0 += load(dy + v * kLanes);
      c1 += load(dy + (v + p) * kLanes);
      c2 += load(dy + (v + 2 * p) * kLanes);
      c3 += load(dy + (v + 3 * p) * kLanes);
    }
    for (; v < full; v += p) c0 += load(dy + v * kLanes);
    if (rem != 0) {
      V16 d = {};
      std::memcpy(&d, dy + v * kLanes, sizeof(float) * rem);
      c0 += d;
    }
    float lanes[kLanes];
    store(lanes, (c0 + c1) + (c2 + c3));
    add_lanes(lanes, g.f, j, db);
  }
}

}  // namespace

bool conv2d_single_channel_applies(const ConvGeometry& g) {
  const bool f_ok = g.f >= 1 && g.f <= kMaxF && (kLanes % g.f == 0 || g.f % kLanes == 0);
  return g.c == 1 && f_ok && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.pad_top == 0 &&
         g.pad_left == 0 && g.oh == g.h - g.kh + 1 && g.ow == g.w - g.kw + 1 &&
         g.kh * g.kw <= kMaxTaps;
}

// E, then the weight patterns [taps][P][16] and the bias pattern [P][16] (forward), or the
// kernel gradient's accumulators [taps][P][chains][16] (backward): the larger of the two.
size_t conv2d_single_channel_scratch_floats(const ConvGeometry& g) {
  const int64_t taps = int64_t{g.kh} * g.kw, p = patterns(g);
  const int64_t forward = (taps + 1) * p * kLanes, backward = taps * p * kChains * kLanes;
  return static_cast<size_t>(expanded_floats(g) + std::max(forward, backward));
}

// Per output row, vector by vector: acc = bias, then acc += E[row + q + shift_t] * w_t for the
// taps in order (the same fold for every lane); a row's last partial vector is stored in part.
void conv2d_forward_single_channel(const ConvGeometry& g, int n, const float* x, const float* w,
                                   const float* b, float* y, float* scratch, const Activation* act,
                                   float* act_out) {
  const int taps = g.kh * g.kw, p = patterns(g);
  float* e = scratch;
  float* w_pat = e + expanded_floats(g);
  float* b_pat = w_pat + int64_t{taps} * p * kLanes;
  for (int t = 0; t < taps; ++t) lane_pattern(g.f, p, w + int64_t{t} * g.f, w_pat + t * p * kLanes);
  if (b != nullptr)
    lane_pattern(g.f, p, b, b_pat);
  else
    std::fill_n(b_pat, p * kLanes, 0.0f);
  int64_t shift[kMaxTaps];
  tap_shifts(g, shift);
  const int64_t row_floats = int64_t{g.ow} * g.f, full = row_floats / kLanes;
  const int rem = static_cast<int>(row_floats % kLanes);
  const int64_t y_image = int64_t{g.oh} * row_floats;
  for (int img = 0; img < n; ++img) {
    expand(g, x + int64_t{img} * g.h * g.w, e);
    for (int oy = 0; oy < g.oh; ++oy) {
      const float* e_row = e + int64_t{oy} * g.w * g.f;
      float* y_row = y + img * y_image + oy * row_floats;
      for (int64_t v = 0, j = 0; v <= full; ++v, j = j + 1 == p ? 0 : j + 1) {
        if (v == full && rem == 0) break;
        V16 acc = load(b_pat + j * kLanes);
        for (int t = 0; t < taps; ++t)
          acc += load(e_row + v * kLanes + shift[t]) * load(w_pat + (t * p + j) * kLanes);
        if (v < full)
          store(y_row + v * kLanes, acc);
        else
          std::memcpy(y_row + v * kLanes, &acc, sizeof(float) * rem);
      }
    }
    if (act)
      activation_forward(*act, int64_t{g.oh} * g.ow, g.f, y + img * y_image,
                         act_out + img * y_image);
  }
}

// dw[t, f] = sum over output lanes of E[q + shift_t] * dy[q] for the lanes of filter f. Each
// (tap, pattern) sums its vectors over the whole batch into four chains (accumulate_row), a
// block of output rows at a time, kept in scratch between blocks and images; the chains, then the
// lanes of each filter in increasing order, are added to dw at the end. db: bias_gradient.
void conv2d_backward_weights_single_channel(const ConvGeometry& g, int n, const float* x,
                                            const float* dy, float* dw, float* db, float* scratch) {
  if (db != nullptr) bias_gradient(g, n, dy, db);
  const int taps = g.kh * g.kw, p = patterns(g);
  float* e = scratch;
  float* acc = e + expanded_floats(g);  // [taps][P][chains][16]
  std::fill_n(acc, int64_t{taps} * p * kChains * kLanes, 0.0f);
  int64_t shift[kMaxTaps];
  tap_shifts(g, shift);
  const int64_t row_floats = int64_t{g.ow} * g.f, full = row_floats / kLanes;
  const int rem = static_cast<int>(row_floats % kLanes);
  // Output rows per pass over the taps: their KH - 1 + rows rows of E stay in L1 (kBlockFloats)
  // while every tap walks them; m7's F = 32 makes an image's E 100 KB, past Zen's 32-48 KB L1.
  const int block =
      static_cast<int>(std::max<int64_t>(1, kBlockFloats / (int64_t{g.w} * g.f) - (g.kh - 1)));
  for (int img = 0; img < n; ++img) {
    expand(g, x + int64_t{img} * g.h * g.w, e);
    const float* dy_image = dy + int64_t{img} * g.oh * row_floats;
    for (int oy0 = 0; oy0 < g.oh; oy0 += block) {
      const int oy1 = std::min(g.oh, oy0 + block);
      for (int t = 0; t < taps; ++t) {
        for (int j = 0; j < p; ++j) {
          float* a = acc + (int64_t{t} * p + j) * kChains * kLanes;
          V16 c0 = load(a), c1 = load(a + kLanes), c2 = load(a + 2 * kLanes),
              c3 = load(a + 3 * kLanes);
          for (int oy = oy0; oy < oy1; ++oy)
            accumulate_row(e + int64_t{oy} * g.w * g.f + shift[t], dy_image + oy * row_floats, j, p,
                           full, rem, c0, c1, c2, c3);
          const V16 chain[kChains] = {c0, c1, c2, c3};
          for (int c = 0; c < kChains; ++c) store(a + c * kLanes, chain[c]);
        }
      }
    }
  }
  for (int t = 0; t < taps; ++t) {
    float* dw_tap = dw + int64_t{t} * g.f;
    for (int j = 0; j < p; ++j) {
      const float* a = acc + (int64_t{t} * p + j) * kChains * kLanes;
      V16 sum = (load(a) + load(a + kLanes)) + (load(a + 2 * kLanes) + load(a + 3 * kLanes));
      float lanes[kLanes];
      store(lanes, sum);
      add_lanes(lanes, g.f, j, dw_tap);
    }
  }
}

}  // namespace nnfleet
