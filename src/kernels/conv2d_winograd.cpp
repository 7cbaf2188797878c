// Winograd F(2x2,3x3) convolution (see conv2d_winograd.h for the math and the contract).
// One call: the kernel is transformed once, u[16][CI][CO] = G g G^T per channel pair; then image
// by image, tiles are taken a block of T = kTileBlock at a time (raster order):
//   1. input transform: v[16][T][CI] = B^T d B of each tile's 4x4 input patch, vectorized over the
//      contiguous channel axis (NHWC); taps outside the image read a zero row, so padding and the
//      partial tiles of odd output sizes need no branches in the arithmetic;
//   2. 16 GEMMs, one per position k of the 4x4 transformed tile:
//      m[k][T][CO] = v[k][T][CI] u[k][CI][CO] (k outermost, so each GEMM's rows are contiguous:
//      a [T][16][C] layout gave row strides of 16*C floats, 2 or 4 KiB, which alias in L1 and cost
//      the kernel gradient a quarter of its speed);
//   3. output transform: the 2x2 output pixels A^T m A of each tile, plus bias (or added onto the
//      output for the input gradient), cropped at the image's bottom and right edges.
// The forward pass is the problem (x, pads, w); the input gradient is the problem (dy, 2 - pads,
// w rotated by 180 degrees with C and F swapped), whose output is x's shape. The kernel gradient
// transforms x's tiles as the forward pass does and dy's 2x2 tiles to dm[16][T][F] = A dy A^T,
// sums du[k] += v[k]^T dm[k] over every tile of the call (GEMMs with K = T) and adds G^T du G.
#include "kernels/conv2d_winograd.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm.h"

namespace nnfleet {
namespace {

// Tiles per block: v and m of a block plus u stay in L2 for m7's 32 -> 64 channel layer.
constexpr int kTileBlock = 36;
constexpr int kTileBlock4 = 18;  // F(4x4,3x3): tiles per block
constexpr int kMaxPoints = 36;   // 6x6 transformed tile of F(4x4,3x3)
constexpr int kAlignFloats = 16;

// Eight floats as one value: GCC and Clang lower the arithmetic to one AVX register (two SSE
// registers without AVX). Vec8u is the same at any float alignment and may alias floats, so a
// load or store is one unaligned vector move. Only ever passed by reference (no ABI question).
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec8u __attribute__((vector_size(32), aligned(4), may_alias));

// Sixteen floats, one 512-bit register, where the build has AVX-512 (Zen 4 splits it in two
// 256-bit halves, Zen 5 runs it whole): the channel loops below take 16 channels at a time there,
// then 8, then one. Every lane does the same arithmetic at any width, so the results are the
// same bits as with 8.
#ifdef __AVX512F__
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec16u __attribute__((vector_size(64), aligned(4), may_alias));
inline void load(Vec16& v, const float* p) { v = *reinterpret_cast<const Vec16u*>(p); }
inline void store(float* p, const Vec16& v) { *reinterpret_cast<Vec16u*>(p) = v; }
#define NNFLEET_WINOGRAD_WIDE(...) __VA_ARGS__
#else
#define NNFLEET_WINOGRAD_WIDE(...)
#endif

inline void load(Vec8& v, const float* p) { v = *reinterpret_cast<const Vec8u*>(p); }
inline void load(float& v, const float* p) { v = *p; }
inline void store(float* p, const Vec8& v) { *reinterpret_cast<Vec8u*>(p) = v; }
inline void store(float* p, const float& v) { *p = v; }

// One convolution as the Winograd kernels see it: out[oy, ox, co] = sum over (ky, kx, ci) of
// in[oy - pad_top + ky, ox - pad_left + kx, ci] * kernel[ky, kx, ci, co], in zero outside.
struct Problem {
  int h, w, ci;  // input image
  int pad_top, pad_left;
  int oh, ow, co;  // output image
};

Problem forward_problem(const ConvGeometry& g) {
  return {g.h, g.w, g.c, g.pad_top, g.pad_left, g.oh, g.ow, g.f};
}

// The input gradient dx[iy, ix, c] = sum dy[iy + pad_top - ky, ix + pad_left - kx, f] w[ky,kx,c,f]
// is, with ky' = 2 - ky, a forward convolution of dy with pads 2 - pad and the rotated kernel.
Problem backward_data_problem(const ConvGeometry& g) {
  return {g.oh, g.ow, g.f, 2 - g.pad_top, 2 - g.pad_left, g.h, g.w, g.c};
}

// v = B^T d B with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]; d and v are 4x4, row-major.
template <typename T>
inline void input_tile(const T (&d)[16], T (&v)[16]) {
  T t[16];
  for (int j = 0; j < 4; ++j) {
    t[0 + j] = d[0 + j] - d[8 + j];
    t[4 + j] = d[4 + j] + d[8 + j];
    t[8 + j] = d[8 + j] - d[4 + j];
    t[12 + j] = d[4 + j] - d[12 + j];
  }
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * i;
    v[r + 0] = t[r + 0] - t[r + 2];
    v[r + 1] = t[r + 1] + t[r + 2];
    v[r + 2] = t[r + 2] - t[r + 1];
    v[r + 3] = t[r + 1] - t[r + 3];
  }
}

// y = A^T m A with A^T = [1 1 1 0; 0 1 -1 -1]; m is 4x4, y 2x2, row-major.
template <typename T>
inline void output_tile(const T (&m)[16], T (&y)[4]) {
  T s[8];
  for (int j = 0; j < 4; ++j) {
    s[j] = m[j] + m[4 + j] + m[8 + j];
    s[4 + j] = m[4 + j] - m[8 + j] - m[12 + j];
  }
  for (int i = 0; i < 2; ++i) {
    y[2 * i + 0] = s[4 * i + 0] + s[4 * i + 1] + s[4 * i + 2];
    y[2 * i + 1] = s[4 * i + 1] - s[4 * i + 2] - s[4 * i + 3];
  }
}

// The kernel gradient's transforms (the adjoints of output_tile and of the kernel transform):
// dm = A dy A^T for a tile's 2x2 output gradient dy (dm 4x4), A = [1 0; 1 1; 1 -1; 0 -1].
template <typename T>
inline void output_grad_tile(const T (&dy)[4], T (&dm)[16]) {
  T s[8];  // A dy, 4x2
  for (int j = 0; j < 2; ++j) {
    s[0 + j] = dy[j];
    s[2 + j] = dy[j] + dy[2 + j];
    s[4 + j] = dy[j] - dy[2 + j];
    s[6 + j] = -dy[2 + j];
  }
  for (int i = 0; i < 4; ++i) {
    dm[4 * i + 0] = s[2 * i];
    dm[4 * i + 1] = s[2 * i] + s[2 * i + 1];
    dm[4 * i + 2] = s[2 * i] - s[2 * i + 1];
    dm[4 * i + 3] = -s[2 * i + 1];
  }
}

// dk = G^T du G (du 4x4, dk 3x3), G^T = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1].
template <typename T>
inline void kernel_grad_tile(const T (&du)[16], T (&dk)[9]) {
  T s[12];  // G^T du, 3x4
  for (int j = 0; j < 4; ++j) {
    const T half_sum = 0.5f * (du[4 + j] + du[8 + j]);
    s[0 + j] = du[j] + half_sum;
    s[4 + j] = 0.5f * (du[4 + j] - du[8 + j]);
    s[8 + j] = half_sum + du[12 + j];
  }
  for (int i = 0; i < 3; ++i) {
    const T* r = s + 4 * i;
    const T half_sum = 0.5f * (r[1] + r[2]);
    dk[3 * i + 0] = r[0] + half_sum;
    dk[3 * i + 1] = 0.5f * (r[1] - r[2]);
    dk[3 * i + 2] = half_sum + r[3];
  }
}

// F(4x4,3x3) (Lavin and Gray): 6x6 input patches, 4x4 outputs, 36 products per tile for 16
// outputs (4x fewer multiplications than direct, against 2.25x for F(2x2,3x3)), with the
// interpolation points 0, +-1, +-2:
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Each 2-D transform applies the 1-D one to the columns, then to the rows.
template <typename T>
inline void bt6(const T* in, int is, T* out, int os) {
  const T i0 = in[0], i1 = in[is], i2 = in[2 * is], i3 = in[3 * is], i4 = in[4 * is],
          i5 = in[5 * is];
  out[0] = 4.0f * i0 - 5.0f * i2 + i4;
  out[os] = (i3 + i4) - 4.0f * (i1 + i2);
  out[2 * os] = (i4 - i3) + 4.0f * (i1 - i2);
  out[3 * os] = (i4 - i2) + 2.0f * (i3 - i1);
  out[4 * os] = (i4 - i2) - 2.0f * (i3 - i1);
  out[5 * os] = 4.0f * i1 - 5.0f * i3 + i5;
}

template <typename T>
inline void at6(const T* in, int is, T* out, int os) {
  const T i0 = in[0], i1 = in[is], i2 = in[2 * is], i3 = in[3 * is], i4 = in[4 * is],
          i5 = in[5 * is];
  const T s12 = i1 + i2, d12 = i1 - i2, s34 = i3 + i4, d34 = i3 - i4;
  out[0] = i0 + s12 + s34;
  out[os] = d12 + 2.0f * d34;
  out[2 * os] = s12 + 4.0f * s34;
  out[3 * os] = d12 + 8.0f * d34 + i5;
}

template <typename T>
inline void g6(const T* in, int is, T* out, int os) {
  const T k0 = in[0], k1 = in[is], k2 = in[2 * is];
  out[0] = 0.25f * k0;
  out[os] = (-1.0f / 6.0f) * (k0 + k1 + k2);
  out[2 * os] = (-1.0f / 6.0f) * (k0 - k1 + k2);
  out[3 * os] = (1.0f / 24.0f) * k0 + (1.0f / 12.0f) * k1 + (1.0f / 6.0f) * k2;
  out[4 * os] = (1.0f / 24.0f) * k0 - (1.0f / 12.0f) * k1 + (1.0f / 6.0f) * k2;
  out[5 * os] = k2;
}

// The adjoints for F(4x4,3x3)'s kernel gradient: a6 = A (4 -> 6), the transpose of at6, and
// g6t = G^T (6 -> 3), the transpose of g6.
template <typename T>
inline void a6(const T* in, int is, T* out, int os) {
  const T d0 = in[0], d1 = in[is], d2 = in[2 * is], d3 = in[3 * is];
  const T s02 = d0 + d2, s13 = d1 + d3, e02 = d0 + 4.0f * d2, e13 = 2.0f * d1 + 8.0f * d3;
  out[0] = d0;
  out[os] = s02 + s13;
  out[2 * os] = s02 - s13;
  out[3 * os] = e02 + e13;
  out[4 * os] = e02 - e13;
  out[5 * os] = d3;
}

template <typename T>
inline void g6t(const T* in, int is, T* out, int os) {
  const T u0 = in[0], u1 = in[is], u2 = in[2 * is], u3 = in[3 * is], u4 = in[4 * is],
          u5 = in[5 * is];
  const T s12 = u1 + u2, d12 = u2 - u1, s34 = u3 + u4, d34 = u3 - u4;
  out[0] = 0.25f * u0 - (1.0f / 6.0f) * s12 + (1.0f / 24.0f) * s34;
  out[os] = (1.0f / 6.0f) * d12 + (1.0f / 12.0f) * d34;
  out[2 * os] = (1.0f / 6.0f) * (s34 - s12) + u5;
}

// The two tile sizes as the passes see them: output tile side kOut, input patch side kIn,
// kPoints = kIn^2 transformed points (one GEMM each), kBlock tiles per block (v and m of a block
// plus u stay in L2 for m7's 32 -> 64 channel layer).
struct F2 {
  static constexpr int kOut = 2, kIn = 4, kPoints = 16, kBlock = kTileBlock;
  template <typename T>
  static void input(const T (&d)[16], T (&v)[16]) {
    input_tile(d, v);
  }
  template <typename T>
  static void output(const T (&m)[16], T (&y)[4]) {
    output_tile(m, y);
  }
  template <typename T>
  static void output_grad(const T (&dy)[4], T (&dm)[16]) {
    output_grad_tile(dy, dm);
  }
  template <typename T>
  static void kernel_grad(const T (&du)[16], T (&dk)[9]) {
    kernel_grad_tile(du, dk);
  }
  // u = G k G^T, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1].
  template <typename T>
  static void kernel(const T (&k)[9], T (&u)[16]) {
    T a[12];  // G k, 4x3
    for (int kx = 0; kx < 3; ++kx) {
      a[kx] = k[kx];
      a[3 + kx] = 0.5f * (k[kx] + k[3 + kx] + k[6 + kx]);
      a[6 + kx] = 0.5f * (k[kx] - k[3 + kx] + k[6 + kx]);
      a[9 + kx] = k[6 + kx];
    }
    for (int r = 0; r < 4; ++r) {
      const T* ar = a + 3 * r;
      u[4 * r + 0] = ar[0];
      u[4 * r + 1] = 0.5f * (ar[0] + ar[1] + ar[2]);
      u[4 * r + 2] = 0.5f * (ar[0] - ar[1] + ar[2]);
      u[4 * r + 3] = ar[2];
    }
  }
};

struct F4 {
  static constexpr int kOut = 4, kIn = 6, kPoints = 36, kBlock = kTileBlock4;
  template <typename T>
  static void input(const T (&d)[36], T (&v)[36]) {
    T t[36];
    for (int j = 0; j < 6; ++j) bt6(d + j, 6, t + j, 6);
    for (int i = 0; i < 6; ++i) bt6(t + 6 * i, 1, v + 6 * i, 1);
  }
  template <typename T>
  static void output(const T (&m)[36], T (&y)[16]) {
    T t[24];  // A^T m, 4x6
    for (int j = 0; j < 6; ++j) at6(m + j, 6, t + j, 6);
    for (int i = 0; i < 4; ++i) at6(t + 6 * i, 1, y + 4 * i, 1);
  }
  template <typename T>
  static void kernel(const T (&k)[9], T (&u)[36]) {
    T a[18];  // G k, 6x3
    for (int kx = 0; kx < 3; ++kx) g6(k + kx, 3, a + kx, 3);
    for (int r = 0; r < 6; ++r) g6(a + 3 * r, 1, u + 6 * r, 1);
  }
  // dm = A dy A^T (dy 4x4, dm 6x6), the adjoint of output().
  template <typename T>
  static void output_grad(const T (&dy)[16], T (&dm)[36]) {
    T t[24];  // A dy, 6x4
    for (int j = 0; j < 4; ++j) a6(dy + j, 4, t + j, 4);
    for (int i = 0; i < 6; ++i) a6(t + 4 * i, 1, dm + 6 * i, 1);
  }
  // dk = G^T du G (du 6x6, dk 3x3), the adjoint of kernel().
  template <typename T>
  static void kernel_grad(const T (&du)[36], T (&dk)[9]) {
    T t[18];  // G^T du, 3x6
    for (int j = 0; j < 6; ++j) g6t(du + j, 6, t + j, 6);
    for (int i = 0; i < 3; ++i) g6t(t + 6 * i, 1, dk + 3 * i, 1);
  }
};

// v[P][ci] = B^T d B for every channel, d's P taps read from src[k][0..ci).
template <typename Tr, typename T>
[[gnu::always_inline]] inline void input_channels(const float* const (&src)[Tr::kPoints], int c0,
                                                  float* v, int64_t kstride) {
  if constexpr (Tr::kIn == 6) {
    // F4::input's arithmetic, each column transformed as it is loaded and each row stored as it
    // is transformed, rather than all 36 taps loaded first (72 vectors live: spilled). m7's input
    // gradient at a batch piece of 16 on Zen 5, best of 30, three rounds: 1,140 -> 1,070 us (its
    // transform runs over 64 channels); with the output transform so too, the forward pass
    // 775 -> 735 us.
    T t[36];
    for (int j = 0; j < 6; ++j) {
      T col[6];
      for (int i = 0; i < 6; ++i) load(col[i], src[6 * i + j] + c0);
      bt6(col, 1, t + j, 6);
    }
    for (int i = 0; i < 6; ++i) {
      T row[6];
      bt6(t + 6 * i, 1, row, 1);
      for (int k = 0; k < 6; ++k) store(v + (6 * i + k) * kstride + c0, row[k]);
    }
  } else {
    T d[Tr::kPoints], out[Tr::kPoints];
    for (int k = 0; k < Tr::kPoints; ++k) load(d[k], src[k] + c0);
    Tr::input(d, out);
    for (int k = 0; k < Tr::kPoints; ++k) store(v + k * kstride + c0, out[k]);
  }
}

template <typename Tr>
void transform_input_tile(const float* const (&src)[Tr::kPoints], int ci, int64_t kstride,
                          float* v) {
  int c0 = 0;
  NNFLEET_WINOGRAD_WIDE(for (; c0 + 16 <= ci; c0 += 16)
                            input_channels<Tr, Vec16>(src, c0, v, kstride));
  for (; c0 + 8 <= ci; c0 += 8) input_channels<Tr, Vec8>(src, c0, v, kstride);
  for (; c0 < ci; ++c0) input_channels<Tr, float>(src, c0, v, kstride);
}

// How a tile's outputs land: plus the bias (may be null), added onto dst, or written as 0 + the
// result onto a dst that holds no zeros (the bits kAdd gives on zeros).
enum class Out { kBias, kAdd, kFresh };

// The kOut x kOut outputs of one tile for channels [f0, f0 + width): dst[i] is output pixel i's
// row or null when the pixel is cropped.
template <typename Tr, typename T>
[[gnu::always_inline]] inline void output_channels(const float* m, int64_t kstride, int f0,
                                                   const float* bias, Out mode,
                                                   float* const (&dst)[Tr::kOut * Tr::kOut]) {
  T y[Tr::kOut * Tr::kOut];
  if constexpr (Tr::kIn == 6) {
    // F4::output's arithmetic, each column transformed as it is loaded (as input_channels).
    T t[24];
    for (int j = 0; j < 6; ++j) {
      T col[6];
      for (int i = 0; i < 6; ++i) load(col[i], m + (6 * i + j) * kstride + f0);
      at6(col, 1, t + j, 6);
    }
    for (int i = 0; i < 4; ++i) at6(t + 6 * i, 1, y + 4 * i, 1);
  } else {
    T mk[Tr::kPoints];
    for (int k = 0; k < Tr::kPoints; ++k) load(mk[k], m + k * kstride + f0);
    Tr::output(mk, y);
  }
  for (int i = 0; i < Tr::kOut * Tr::kOut; ++i) {
    if (dst[i] == nullptr) continue;
    T out = y[i];
    if (mode == Out::kAdd) {
      T prev;
      load(prev, dst[i] + f0);
      out = prev + out;
    } else if (mode == Out::kFresh) {
      out = T{} + out;
    } else if (bias != nullptr) {
      T bv;
      load(bv, bias + f0);
      out = out + bv;
    }
    store(dst[i] + f0, out);
  }
}

template <typename Tr>
void transform_output_tile(const float* m, int co, int64_t kstride, const float* bias, Out mode,
                           float* const (&dst)[Tr::kOut * Tr::kOut]) {
  int f0 = 0;
  NNFLEET_WINOGRAD_WIDE(for (; f0 + 16 <= co; f0 += 16)
                            output_channels<Tr, Vec16>(m, kstride, f0, bias, mode, dst));
  for (; f0 + 8 <= co; f0 += 8) output_channels<Tr, Vec8>(m, kstride, f0, bias, mode, dst);
  for (; f0 < co; ++f0) output_channels<Tr, float>(m, kstride, f0, bias, mode, dst);
}

// dm[P][co] = A dy A^T for every channel of one tile, dy's kOut x kOut pixels read from
// src[i][0..co) (a zero row for a pixel past the image's edge).
template <typename Tr, typename T>
[[gnu::always_inline]] inline void output_grad_channels(
    const float* const (&src)[Tr::kOut * Tr::kOut], int f0, float* dm, int64_t kstride) {
  T d[Tr::kOut * Tr::kOut], out[Tr::kPoints];
  for (int i = 0; i < Tr::kOut * Tr::kOut; ++i) load(d[i], src[i] + f0);
  Tr::output_grad(d, out);
  for (int k = 0; k < Tr::kPoints; ++k) store(dm + k * kstride + f0, out[k]);
}

template <typename Tr>
void transform_output_grad_tile(const float* const (&src)[Tr::kOut * Tr::kOut], int co,
                                int64_t kstride, float* dm) {
  int f0 = 0;
  NNFLEET_WINOGRAD_WIDE(for (; f0 + 16 <= co; f0 += 16)
                            output_grad_channels<Tr, Vec16>(src, f0, dm, kstride));
  for (; f0 + 8 <= co; f0 += 8) output_grad_channels<Tr, Vec8>(src, f0, dm, kstride);
  for (; f0 < co; ++f0) output_grad_channels<Tr, float>(src, f0, dm, kstride);
}

// dw[ky,kx,c,f] += (G^T du G)[ky][kx] with du[k] = du[k][c][f] ([P][C][F]), walking f
// contiguously for every c.
template <typename Tr, typename T>
[[gnu::always_inline]] inline void kernel_grad_channels(const float* du, int64_t cf, int64_t at,
                                                        float* dw) {
  T d[Tr::kPoints], k[9];
  for (int t = 0; t < Tr::kPoints; ++t) load(d[t], du + t * cf + at);
  Tr::kernel_grad(d, k);
  for (int t = 0; t < 9; ++t) {
    T prev;
    load(prev, dw + t * cf + at);
    store(dw + t * cf + at, prev + k[t]);
  }
}

template <typename Tr>
void transform_kernel_grad(const ConvGeometry& g, const float* du, float* dw) {
  const int64_t cf = int64_t{g.c} * g.f;
  for (int c = 0; c < g.c; ++c) {
    const int64_t row = int64_t{c} * g.f;
    int f0 = 0;
    NNFLEET_WINOGRAD_WIDE(for (; f0 + 16 <= g.f; f0 += 16)
                              kernel_grad_channels<Tr, Vec16>(du, cf, row + f0, dw));
    for (; f0 + 8 <= g.f; f0 += 8) kernel_grad_channels<Tr, Vec8>(du, cf, row + f0, dw);
    for (; f0 < g.f; ++f0) kernel_grad_channels<Tr, float>(du, cf, row + f0, dw);
  }
}

// u[P][CI][CO] = G k G^T for each channel pair, with k[ky][kx] = w[ky,kx,c,f] (forward: CI = C, CO
// = F) or w[2-ky,2-kx,c,f] (input gradient: CI = F, CO = C). u's P point rows lie C*F floats
// apart, which for m7's 32 x 64 kernel (8 KiB) all map to one L1 set: storing a vector to each
// point in turn missed L1 on nearly every store. F(4x4,3x3) forward took 121 us at batch 1
// against 80 us per image at batch 32 on Zen 4 (bench/kernels/conv_winograd_bench.cpp), the
// difference mostly this once-per-call transform. So a chunk of a point row is made in a local
// buffer and stored whole, one row after the other: 91 us at batch 1 (the input gradient's
// F(4x4) 269 -> 134 us).
constexpr int kKernelChunk = 64;  // floats of one point row made at a time

// out[t * out_stride + j] for t < P: the transform of k[t'] = src[t' * src_stride + j], for the
// `width` channels j of a chunk.
template <typename Tr, typename T>
[[gnu::always_inline]] inline void kernel_channels(const float* src, int64_t src_stride, float* out,
                                                   int64_t out_stride) {
  T k[9], t_out[Tr::kPoints];
  for (int t = 0; t < 9; ++t) load(k[t], src + t * src_stride);
  Tr::kernel(k, t_out);
  for (int t = 0; t < Tr::kPoints; ++t) store(out + t * out_stride, t_out[t]);
}

template <typename Tr>
void kernel_chunk(const float* src, int64_t src_stride, int width, float* buf) {
  int j = 0;
  NNFLEET_WINOGRAD_WIDE(for (; j + 16 <= width; j += 16)
                            kernel_channels<Tr, Vec16>(src + j, src_stride, buf + j, kKernelChunk));
  for (; j + 8 <= width; j += 8)
    kernel_channels<Tr, Vec8>(src + j, src_stride, buf + j, kKernelChunk);
  for (; j < width; ++j) kernel_channels<Tr, float>(src + j, src_stride, buf + j, kKernelChunk);
}

template <typename Tr>
void store_chunk(const float* buf, int width, int64_t cf, float* u_at) {
  for (int t = 0; t < Tr::kPoints; ++t)
    std::memcpy(u_at + t * cf, buf + t * kKernelChunk, static_cast<size_t>(width) * sizeof(float));
}

template <typename Tr>
void transform_kernel(const ConvGeometry& g, bool backward_data, const float* w, float* u) {
  const int64_t cf = int64_t{g.c} * g.f;
  alignas(64) float buf[Tr::kPoints * kKernelChunk];
  if (!backward_data) {
    // w's and u's rows are both contiguous over f: chunks of f for each input channel c.
    for (int c = 0; c < g.c; ++c) {
      for (int f0 = 0; f0 < g.f; f0 += kKernelChunk) {
        const int width = std::min(kKernelChunk, g.f - f0);
        const int64_t at = int64_t{c} * g.f + f0;
        kernel_chunk<Tr>(w + at, cf, width, buf);
        store_chunk<Tr>(buf, width, cf, u + at);
      }
    }
    return;
  }
  // Input gradient: u[t][f][c], contiguous over c, from w[8 - t][c][f]: the taps of 32 channels
  // are gathered for one f after the other, so the 9 x 32 lines of w they read (18 KiB) serve
  // 16 consecutive f from L1.
  constexpr int kGatherChunk = 32;
  alignas(64) float k[9 * kKernelChunk];
  for (int c0 = 0; c0 < g.c; c0 += kGatherChunk) {
    const int width = std::min(kGatherChunk, g.c - c0);
    for (int f = 0; f < g.f; ++f) {
      for (int t = 0; t < 9; ++t) {
        const float* wt = w + (8 - t) * cf + int64_t{c0} * g.f + f;
        for (int j = 0; j < width; ++j) k[t * kKernelChunk + j] = wt[int64_t{j} * g.f];
      }
      kernel_chunk<Tr>(k, kKernelChunk, width, buf);
      store_chunk<Tr>(buf, width, cf, u + int64_t{f} * g.c + c0);
    }
  }
}

int64_t round_up(int64_t v) { return (v + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// Floats of one block's v or m, for either tile size.
int64_t block_floats(int64_t wide) {
  return std::max(F2::kBlock * F2::kPoints, F4::kBlock * F4::kPoints) * wide;
}

// Scratch layout (floats): u [P, CI, CO] | zero row [max(C, F)] | v [P, T, CI] | m [P, T, CO],
// sized for both problems of g (CI and CO are C and F in either order).
struct Scratch {
  float* u;
  float* zeros;
  float* v;
  float* m;
};

Scratch carve(const ConvGeometry& g, float* scratch) {
  const int64_t wide = std::max(g.c, g.f);
  Scratch s;
  s.u = scratch;
  s.zeros = s.u + round_up(int64_t{kMaxPoints} * g.c * g.f);
  s.v = s.zeros + round_up(wide);
  s.m = s.v + round_up(block_floats(wide));
  std::fill_n(s.zeros, wide, 0.0f);
  return s;
}

// Tile `tile` of an image (raster order): src[P] = the NHWC rows of in under its kIn x kIn input
// patch (the zero row for taps outside the image).
template <typename Tr>
void input_patch(const Problem& p, const float* in, const float* zeros, int tiles_x, int tile,
                 const float* (&src)[Tr::kPoints]) {
  const int iy0 = tile / tiles_x * Tr::kOut - p.pad_top;
  const int ix0 = tile % tiles_x * Tr::kOut - p.pad_left;
  for (int i = 0; i < Tr::kIn; ++i) {
    for (int j = 0; j < Tr::kIn; ++j) {
      const int iy = iy0 + i, ix = ix0 + j;
      const bool inside = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
      src[Tr::kIn * i + j] = inside ? in + (int64_t{iy} * p.w + ix) * p.ci : zeros;
    }
  }
}

// One image: out[OH,OW,CO] (=|+=) the convolution of in[H,W,CI] with the transformed kernel;
// every pixel of out is written (Out::kFresh needs that).
template <typename Tr>
void run_image(const Problem& p, const float* in, const Scratch& s, const float* bias, Out mode,
               float* out) {
  constexpr int kOut = Tr::kOut;
  const int tiles_x = (p.ow + kOut - 1) / kOut, tiles = (p.oh + kOut - 1) / kOut * tiles_x;
  for (int t0 = 0; t0 < tiles; t0 += Tr::kBlock) {
    const int nt = std::min(Tr::kBlock, tiles - t0);
    const int64_t v_k = int64_t{nt} * p.ci, m_k = int64_t{nt} * p.co;  // [P][nt][CI or CO]
    for (int t = 0; t < nt; ++t) {
      const float* src[Tr::kPoints];
      input_patch<Tr>(p, in, s.zeros, tiles_x, t0 + t, src);
      transform_input_tile<Tr>(src, p.ci, v_k, s.v + int64_t{t} * p.ci);
    }
    for (int k = 0; k < Tr::kPoints; ++k) {
      gemm(false, false, nt, p.co, p.ci, s.v + k * v_k, p.ci, s.u + int64_t{k} * p.ci * p.co, p.co,
           0.0f, s.m + k * m_k, p.co);
    }
    for (int t = 0; t < nt; ++t) {
      const int oy0 = (t0 + t) / tiles_x * kOut, ox0 = (t0 + t) % tiles_x * kOut;
      float* dst[kOut * kOut];
      for (int i = 0; i < kOut; ++i) {
        for (int j = 0; j < kOut; ++j) {
          const bool inside = oy0 + i < p.oh && ox0 + j < p.ow;
          dst[kOut * i + j] = inside ? out + (int64_t{oy0 + i} * p.ow + ox0 + j) * p.co : nullptr;
        }
      }
      transform_output_tile<Tr>(s.m + int64_t{t} * p.co, p.co, m_k, bias, mode, dst);
    }
  }
}

// One image of the kernel gradient: du[P][C][F] += sum over the image's tiles of
// v[t][k][C]^T dm[t][k][F], a block of Tr::kBlock tiles per GEMM (K = tiles).
template <typename Tr>
void run_image_weights(const Problem& p, const float* x, const float* dy, const Scratch& s,
                       float* du) {
  constexpr int kOut = Tr::kOut;
  const int tiles_x = (p.ow + kOut - 1) / kOut, tiles = (p.oh + kOut - 1) / kOut * tiles_x;
  for (int t0 = 0; t0 < tiles; t0 += Tr::kBlock) {
    const int nt = std::min(Tr::kBlock, tiles - t0);
    const int64_t v_k = int64_t{nt} * p.ci, m_k = int64_t{nt} * p.co;  // [P][nt][CI or CO]
    for (int t = 0; t < nt; ++t) {
      const float* src[Tr::kPoints];
      input_patch<Tr>(p, x, s.zeros, tiles_x, t0 + t, src);
      transform_input_tile<Tr>(src, p.ci, v_k, s.v + int64_t{t} * p.ci);
      const int oy0 = (t0 + t) / tiles_x * kOut, ox0 = (t0 + t) % tiles_x * kOut;
      const float* g_src[kOut * kOut];
      for (int i = 0; i < kOut; ++i) {
        for (int j = 0; j < kOut; ++j) {
          const bool inside = oy0 + i < p.oh && ox0 + j < p.ow;
          g_src[kOut * i + j] = inside ? dy + (int64_t{oy0 + i} * p.ow + ox0 + j) * p.co : s.zeros;
        }
      }
      transform_output_grad_tile<Tr>(g_src, p.co, m_k, s.m + int64_t{t} * p.co);
    }
    for (int k = 0; k < Tr::kPoints; ++k) {
      gemm_fixed_rows(true, p.ci, p.co, nt, s.v + k * v_k, p.ci, s.m + k * m_k, p.co, 1.0f,
                      du + int64_t{k} * p.ci * p.co, p.co);
    }
  }
}

}  // namespace

bool winograd_supported(const ConvGeometry& g) {
  if (g.kh != 3 || g.kw != 3 || g.sh != 1 || g.sw != 1 || g.dh != 1 || g.dw != 1) return false;
  const bool valid = g.pad_top == 0 && g.pad_left == 0 && g.oh == g.h - 2 && g.ow == g.w - 2;
  const bool same = g.pad_top == 1 && g.pad_left == 1 && g.oh == g.h && g.ow == g.w;
  return (valid || same) && g.c >= 1 && g.f >= 1;
}

// Measured on Zen 3 (AVX2 + FMA) side by side with the direct path (oneDNN's jit:avx2 primitive)
// by bench/kernels/conv_winograd_bench.cpp, medians of 3 on a shared machine: on m7's 32 -> 64
// channels Winograd wins 1.3-1.7x forward and 1.2-1.8x for the input gradient (batch 1 to 64);
// on m6's 16 -> 32 it ties forward (0.93-1.12x) and loses the input gradient (0.74-0.90x); on a
// first layer's single input channel (GEMMs with K = 1) it runs at 0.4-0.5x. So: 32 channels or
// more on both sides, both passes.
bool conv2d_use_winograd(const ConvGeometry& g, bool backward_data) {
  (void)backward_data;  // the same rule measured best for both passes
  return winograd_supported(g) && g.c >= 32 && g.f >= 32;
}

// F(4x4,3x3) against F(2x2,3x3) on m7's 32 -> 64 channels, same bench. On Zen 3 (AVX2), best of
// 12 runs each, interleaved, on a machine shared with a build: forward 7,154 against 6,506
// samples/s at batch 1 (1.10x) and 7,212 against 5,674 at 32 (1.27x); earlier medians of 3 on a
// more loaded machine ranged 0.85-1.24x. The input gradient measured 0.52-0.87x on Zen 3, before
// the kernel transform stopped missing L1 (transform_kernel), and has not been measured there
// since. W1's m7 (seed 1, 1 epoch) tested 0.8888 with F(4x4) forward against 0.8894 with F(2x2).
// On Zen 4 (AVX-512 on 256-bit units), medians of 3 after that transform fix: forward 10,967
// against 8,813 samples/s at batch 1 (1.24x), 11,850 against 8,188 at 32 (1.45x), 9,912 against
// 7,528 at 256; input gradient 7,453 against 7,019 at batch 1, 7,426 against 6,849 at 32 and
// 7,509 against 6,398 at 256. So the AVX-512 build takes F(4x4) for both passes and the AVX2
// build for the forward pass. (On Zen 5, with full-width AVX-512 units, F(4x4) forward had lost
// at batch 1 with the old transform, 64% of its time there; not measured since.) The choice
// depends on the build's instruction set only, never on the batch, so an image's result never
// depends on the images it came with.
bool conv2d_use_winograd_f4(const ConvGeometry& g, bool backward_data) {
#ifdef __AVX512F__
  return conv2d_use_winograd(g, backward_data);
#else
  return !backward_data && conv2d_use_winograd(g, false);
#endif
}

size_t conv2d_winograd_scratch_floats(const ConvGeometry& g) {
  const int64_t wide = std::max(g.c, g.f);
  return static_cast<size_t>(round_up(int64_t{kMaxPoints} * g.c * g.f) + round_up(wide) +
                             2 * round_up(block_floats(wide)));
}

namespace {

template <typename Tr>
void forward(const ConvGeometry& g, int n, const float* x, const float* w, const float* b, float* y,
             float* scratch, const Activation* act, float* act_out) {
  const Problem p = forward_problem(g);
  const Scratch s = carve(g, scratch);
  transform_kernel<Tr>(g, false, w, s.u);
  const int64_t x_image = int64_t{g.h} * g.w * g.c, y_image = int64_t{g.oh} * g.ow * g.f;
  for (int img = 0; img < n; ++img) {
    float* yi = y + img * y_image;
    run_image<Tr>(p, x + img * x_image, s, b, Out::kBias, yi);
    if (act) activation_forward(*act, int64_t{g.oh} * g.ow, g.f, yi, act_out + img * y_image);
  }
}

template <typename Tr>
void backward_data(const ConvGeometry& g, int n, const float* w, const float* dy, float* dx,
                   float* scratch, bool dx_fresh) {
  const Problem p = backward_data_problem(g);
  const Scratch s = carve(g, scratch);
  transform_kernel<Tr>(g, true, w, s.u);
  const int64_t x_image = int64_t{g.h} * g.w * g.c, y_image = int64_t{g.oh} * g.ow * g.f;
  const Out mode = dx_fresh ? Out::kFresh : Out::kAdd;
  for (int img = 0; img < n; ++img)
    run_image<Tr>(p, dy + img * y_image, s, nullptr, mode, dx + img * x_image);
}

}  // namespace

void conv2d_forward_winograd(const ConvGeometry& g, int n, const float* x, const float* w,
                             const float* b, float* y, float* scratch, const Activation* act,
                             float* act_out) {
  forward<F2>(g, n, x, w, b, y, scratch, act, act_out);
}

void conv2d_forward_winograd_f4(const ConvGeometry& g, int n, const float* x, const float* w,
                                const float* b, float* y, float* scratch, const Activation* act,
                                float* act_out) {
  forward<F4>(g, n, x, w, b, y, scratch, act, act_out);
}

void conv2d_backward_data_winograd(const ConvGeometry& g, int n, const float* w, const float* dy,
                                   float* dx, float* scratch, bool dx_fresh) {
  backward_data<F2>(g, n, w, dy, dx, scratch, dx_fresh);
}

void conv2d_backward_data_winograd_f4(const ConvGeometry& g, int n, const float* w, const float* dy,
                                      float* dx, float* scratch, bool dx_fresh) {
  backward_data<F4>(g, n, w, dy, dx, scratch, dx_fresh);
}

// Kernel gradient, measured the same way against the GEMM path it replaces (oneDNN's
// backward-weights primitive, bench/kernels/conv_candidates_bench.cpp, ran at 0.55-0.7x of that
// GEMM path on m7, so it was never the direct candidate): on m7's 32 -> 64 channels Winograd wins
// 2.0-2.3x at batch 1 to 64; on m6's 16 -> 32 it ties at batch 1 (1.00-1.08x) and wins 1.4-1.7x at
// 32 and 64. So: 16 channels in and 32 out or more.
bool conv2d_use_winograd_weights(const ConvGeometry& g) {
  return winograd_supported(g) && g.c >= 16 && g.f >= 32;
}

// F(4x4,3x3) for the kernel gradient against F(2x2,3x3), on Zen 5 (AVX-512 on 512-bit units), m7's
// 32 -> 64 channels at a batch piece of 16 with its inputs out of cache, best of 30 in each of
// eight runs: 989-1,063 us against 1,235-1,263 us (1.2x); 1.75e-5 of the oracle's scale against
// 5.4e-6. Not measured on AVX2, which keeps F(2x2,3x3), nor below 32 channels (m6's 16 -> 32).
bool conv2d_use_winograd_f4_weights(const ConvGeometry& g) {
  return conv2d_use_winograd_f4(g, true) && conv2d_use_winograd_weights(g);
}

namespace {

template <typename Tr>
void backward_weights(const ConvGeometry& g, int n, const float* x, const float* dy, float* dw,
                      float* scratch) {
  const Problem p = forward_problem(g);
  const Scratch s = carve(g, scratch);
  std::fill_n(s.u, int64_t{Tr::kPoints} * g.c * g.f, 0.0f);
  const int64_t x_image = int64_t{g.h} * g.w * g.c, y_image = int64_t{g.oh} * g.ow * g.f;
  for (int img = 0; img < n; ++img)
    run_image_weights<Tr>(p, x + img * x_image, dy + img * y_image, s, s.u);
  transform_kernel_grad<Tr>(g, s.u, dw);
}

}  // namespace

void conv2d_backward_weights_winograd(const ConvGeometry& g, int n, const float* x, const float* dy,
                                      float* dw, float* scratch) {
  backward_weights<F2>(g, n, x, dy, dw, scratch);
}

void conv2d_backward_weights_winograd_f4(const ConvGeometry& g, int n, const float* x,
                                         const float* dy, float* dw, float* scratch) {
  backward_weights<F4>(g, n, x, dy, dw, scratch);
}

}  // namespace nnfleet
