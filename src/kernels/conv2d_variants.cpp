// Transposed and grouped 2-D convolutions over the Conv2D machinery (see conv2d_variants.h).
// The transposed convolution lowers to GEMM like Conv2D, in the other direction: its input
// pixels are the rows of the associated convolution's im2col matrix, so each chunk of R of them
// gives col[R, KH*KW*C] = x_chunk[R, F] w^T (one GEMM) and col2im scatters col onto the output
// image. Its backward gathers im2col(dy) once per chunk and feeds two GEMMs (dw and dx).
// The grouped convolution copies each group's channel slices into contiguous buffers and runs
// the ordinary conv2d_forward/backward on them.
#include "kernels/conv2d_variants.h"

#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"

namespace nnfleet {
namespace {

constexpr int64_t kChunkFloats = 48 * 1024;  // one im2col chunk: 192 KiB, stays in L2
constexpr int64_t kMinChunkRows = 32;

int64_t patch_size(const ConvGeometry& g) { return int64_t{g.kh} * g.kw * g.c; }

// Rows (g's output pixels) per chunk; a smaller batch never needs a larger chunk.
int64_t chunk_rows(const ConvGeometry& g, int n) {
  const int64_t total = int64_t{n} * g.oh * g.ow;
  const int64_t rows = std::max(kMinChunkRows, kChunkFloats / std::max<int64_t>(patch_size(g), 1));
  return std::max<int64_t>(std::min(rows, total), 1);
}

// Calls op(col_offset, image_offset) for every in-image tap of the output pixels
// [row0, row0 + rows) of g: col_offset is the tap's C floats in the chunk's im2col row
// (taps in (ky, kx, c) order), image_offset the C floats of g's input they pair with.
// pad(col_offset, len) is called for taps in the padding. Bounds are checked per tap row and
// per tap; the C floats of a tap are contiguous on both sides (NHWC).
template <typename Tap, typename Pad>
void walk_taps(const ConvGeometry& g, int64_t row0, int64_t rows, Tap tap, Pad pad) {
  const int64_t k = patch_size(g), kwc = int64_t{g.kw} * g.c;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = row0 + r;
    const int img = static_cast<int>(p / (int64_t{g.oh} * g.ow));
    const int oy = static_cast<int>(p / g.ow % g.oh), ox = static_cast<int>(p % g.ow);
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = oy * g.sh - g.pad_top + ky * g.dh;
      const int64_t col_row = r * k + ky * kwc;
      if (iy < 0 || iy >= g.h) {
        pad(col_row, kwc);
        continue;
      }
      const int64_t image_row = (int64_t{img} * g.h + iy) * g.w;
      for (int kx = 0; kx < g.kw; ++kx) {
        const int ix = ox * g.sw - g.pad_left + kx * g.dw;
        if (ix < 0 || ix >= g.w) {
          pad(col_row + int64_t{kx} * g.c, g.c);
        } else {
          tap(col_row + int64_t{kx} * g.c, (image_row + ix) * g.c);
        }
      }
    }
  }
}

void gather_patches(const ConvGeometry& g, const float* image, int64_t row0, int64_t rows,
                    float* col) {
  walk_taps(
      g, row0, rows,
      [&](int64_t co, int64_t io) {
        const float* __restrict src = image + io;
        float* __restrict dst = col + co;
        for (int c = 0; c < g.c; ++c) dst[c] = src[c];
      },
      [&](int64_t co, int64_t len) { std::fill_n(col + co, len, 0.0f); });
}

void scatter_add_patches(const ConvGeometry& g, const float* col, int64_t row0, int64_t rows,
                         float* image) {
  walk_taps(
      g, row0, rows,
      [&](int64_t co, int64_t io) {
        const float* __restrict src = col + co;
        float* __restrict dst = image + io;
        for (int c = 0; c < g.c; ++c) dst[c] += src[c];
      },
      [](int64_t, int64_t) {});
}

// Copies channels [c0, c0 + cs) of every one of `pixels` pixels of a [pixels, c] tensor into a
// contiguous [pixels, cs] one (add: += instead, the other way round).
void slice_channels(int64_t pixels, int c, int c0, int cs, const float* src, float* dst) {
  for (int64_t p = 0; p < pixels; ++p) std::copy_n(src + p * c + c0, cs, dst + p * cs);
}
void add_channels(int64_t pixels, int c, int c0, int cs, const float* src, float* dst) {
  for (int64_t p = 0; p < pixels; ++p) {
    const float* __restrict s = src + p * cs;
    float* __restrict d = dst + p * c + c0;
    for (int i = 0; i < cs; ++i) d[i] += s[i];
  }
}

// The geometry of group slices: C/G input channels, F/G filters.
ConvGeometry group_geometry(const ConvGeometry& g, int groups) {
  ConvGeometry s = g;
  s.c = g.c / groups;
  s.f = g.f / groups;
  return s;
}

}  // namespace

size_t conv2d_transpose_scratch_floats(const ConvGeometry& g, int n) {
  return static_cast<size_t>(chunk_rows(g, n) * patch_size(g));
}

// y = b (or 0), then per chunk of R input pixels: col[R, KH*KW*C] = x_chunk[R, F] w[KH*KW*C, F]^T
// and y += col2im(col).
void conv2d_transpose_forward(const ConvGeometry& g, int n, const float* x, const float* w,
                              const float* b, float* y, float* scratch) {
  const int64_t out_pixels = int64_t{n} * g.h * g.w;
  if (b != nullptr) {
    for (int64_t p = 0; p < out_pixels; ++p) std::copy_n(b, g.c, y + p * g.c);
  } else {
    std::fill_n(y, out_pixels * g.c, 0.0f);
  }
  const int64_t total = int64_t{n} * g.oh * g.ow, chunk = chunk_rows(g, n);
  const int k = static_cast<int>(patch_size(g));
  for (int64_t row0 = 0; row0 < total; row0 += chunk) {
    const int rows = static_cast<int>(std::min(chunk, total - row0));
    gemm(false, true, rows, k, g.f, x + row0 * g.f, g.f, w, g.f, 0.0f, scratch, k);
    scatter_add_patches(g, scratch, row0, rows, y);
  }
}

// Per chunk, with col = im2col(dy) (dy is the associated convolution's input):
//   dw[KH*KW*C, F] += col^T x_chunk     dx_chunk[R, F] += col w
// and db[C] sums dy's pixels.
void conv2d_transpose_backward(const ConvGeometry& g, int n, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db, float* scratch) {
  if (db != nullptr) {
    const int64_t out_pixels = int64_t{n} * g.h * g.w;
    for (int64_t p = 0; p < out_pixels; ++p) {
      const float* __restrict row = dy + p * g.c;
      for (int c = 0; c < g.c; ++c) db[c] += row[c];
    }
  }
  const int64_t total = int64_t{n} * g.oh * g.ow, chunk = chunk_rows(g, n);
  const int k = static_cast<int>(patch_size(g));
  for (int64_t row0 = 0; row0 < total; row0 += chunk) {
    const int rows = static_cast<int>(std::min(chunk, total - row0));
    gather_patches(g, dy, row0, rows, scratch);
    gemm(true, false, k, g.f, rows, scratch, k, x + row0 * g.f, g.f, 1.0f, dw, g.f);
    if (dx != nullptr)
      gemm(false, false, rows, g.f, k, scratch, k, w, g.f, 1.0f, dx + row0 * g.f, g.f);
  }
}

// Scratch layout: x slice [N*H*W, C/G] | dx slice | y/dy slice [N*OH*OW, F/G] |
// kernel slice [KH*KW*C/G, F/G] | its gradient | conv2d scratch of the group geometry.
size_t conv2d_grouped_scratch_floats(const ConvGeometry& g, int groups, int n) {
  const ConvGeometry s = group_geometry(g, groups);
  const int64_t in = int64_t{n} * s.h * s.w * s.c, out = int64_t{n} * s.oh * s.ow * s.f;
  const int64_t kernel = patch_size(s) * s.f;
  return static_cast<size_t>(2 * in + out + 2 * kernel) + conv2d_scratch_floats(s, n);
}

void conv2d_grouped_forward(const ConvGeometry& g, int groups, int n, const float* x,
                            const float* w, const float* b, float* y, float* scratch) {
  const ConvGeometry s = group_geometry(g, groups);
  const int64_t in_pixels = int64_t{n} * g.h * g.w, out_pixels = int64_t{n} * g.oh * g.ow;
  const int64_t taps = patch_size(s);  // rows of the kernel [KH*KW*C/G, F]
  float* xs = scratch;
  float* ys = xs + 2 * in_pixels * s.c;
  float* ws = ys + out_pixels * s.f;
  float* conv_scratch = ws + 2 * taps * s.f;
  for (int grp = 0; grp < groups; ++grp) {
    slice_channels(in_pixels, g.c, grp * s.c, s.c, x, xs);
    slice_channels(taps, g.f, grp * s.f, s.f, w, ws);
    conv2d_forward(s, n, xs, ws, b != nullptr ? b + grp * s.f : nullptr, ys, conv_scratch);
    for (int64_t p = 0; p < out_pixels; ++p)
      std::copy_n(ys + p * s.f, s.f, y + p * g.f + grp * s.f);
  }
}

void conv2d_grouped_backward(const ConvGeometry& g, int groups, int n, const float* x,
                             const float* w, const float* dy, float* dx, float* dw, float* db,
                             float* scratch) {
  const ConvGeometry s = group_geometry(g, groups);
  const int64_t in_pixels = int64_t{n} * g.h * g.w, out_pixels = int64_t{n} * g.oh * g.ow;
  const int64_t taps = patch_size(s);
  float* xs = scratch;
  float* dxs = xs + in_pixels * s.c;
  float* dys = dxs + in_pixels * s.c;
  float* ws = dys + out_pixels * s.f;
  float* dws = ws + taps * s.f;
  float* conv_scratch = dws + taps * s.f;
  for (int grp = 0; grp < groups; ++grp) {
    slice_channels(in_pixels, g.c, grp * s.c, s.c, x, xs);
    slice_channels(out_pixels, g.f, grp * s.f, s.f, dy, dys);
    slice_channels(taps, g.f, grp * s.f, s.f, w, ws);
    std::fill_n(dws, taps * s.f, 0.0f);
    if (dx != nullptr) std::fill_n(dxs, in_pixels * s.c, 0.0f);
    conv2d_backward(s, n, xs, ws, dys, dx != nullptr ? dxs : nullptr, dws,
                    db != nullptr ? db + grp * s.f : nullptr, conv_scratch);
    add_channels(taps, g.f, grp * s.f, s.f, dws, dw);
    if (dx != nullptr) add_channels(in_pixels, g.c, grp * s.c, s.c, dxs, dx);
  }
}

}  // namespace nnfleet
