// Fast single-threaded Conv2D and DepthwiseConv2D kernels, NHWC with Keras weight layouts.
// A stride-1 "valid" Conv2D forward with enough channels runs as batch-reduce GEMMs over shifted
// views of the input (conv2d_forward_direct, no im2col copy). Otherwise Conv2D lowers to GEMM:
// output pixels are processed in chunks of rows, each chunk's receptive fields are unrolled into
// an L2-sized im2col buffer [R, KH*KW*C] and multiplied by the kernel [KH*KW*C, F] (already the
// right row-major matrix in Keras's layout). 1x1 stride-1 convolutions
// skip the unrolling. Depthwise convolution has no reduction over channels, so it runs as direct
// loops vectorized over the contiguous channel axis.
#include "kernels/conv2d.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/conv2d_onednn.h"
#include "kernels/conv2d_single_channel.h"
#include "kernels/conv2d_winograd.h"
#include "kernels/gemm.h"

namespace nnfleet {
namespace {

// Target size of one im2col chunk in floats (192 KiB): big enough that each GEMM call has a few
// hundred rows of work, small enough that the chunk, its gradient and the kernel stay in L2.
constexpr int64_t kChunkFloats = 48 * 1024;
constexpr int64_t kMinChunkRows = 32;

int64_t patch_size(const ConvGeometry& g) { return int64_t{g.kh} * g.kw * g.c; }

// Rows (output pixels) per im2col chunk for a batch of n. A smaller batch gives a smaller or equal
// chunk, so scratch sized for n also serves any smaller batch.
int64_t chunk_rows(const ConvGeometry& g, int n) {
  const int64_t total = int64_t{n} * g.oh * g.ow;
  const int64_t rows = std::max(kMinChunkRows, kChunkFloats / std::max<int64_t>(patch_size(g), 1));
  return std::max<int64_t>(std::min(rows, total), 1);
}

// A 1x1, stride-1, unpadded convolution is a plain GEMM over the pixels: x[N*H*W, C] w[C, F].
bool is_pointwise(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pad_top == 0 && g.pad_left == 0 &&
         g.oh == g.h && g.ow == g.w;
}

// Floor division for a possibly negative numerator and a positive denominator.
int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Pairs every slice of the im2col matrix [R, KH*KW*C] for output rows [row0, row0 + rows) with
// the slice of x it comes from: op.copy(col_offset, x_offset, len) for in-image taps and
// op.pad(col_offset, len) for padded ones. Rows are walked a run at a time (one image row oy,
// consecutive ox), and within a run kernel row by kernel row, so for each ky the image row iy is
// fixed and the interior columns (whose whole kernel row is inside the image) need no bounds
// checks: with dilation 1 each is one contiguous copy of KW*C floats (NHWC keeps (ix, c)
// contiguous). Only the few border columns check taps one by one.
template <typename Op>
void walk_patches(const ConvGeometry& g, int64_t row0, int64_t rows, Op& op) {
  const int64_t k = patch_size(g), kwc = int64_t{g.kw} * g.c;
  // Interior output columns: ox*sw - pad_left >= 0 and ox*sw - pad_left + (kw-1)*dw <= w - 1.
  const int interior_lo = (g.pad_left + g.sw - 1) / g.sw;
  const int interior_hi = floor_div(g.w - 1 - (g.kw - 1) * g.dw + g.pad_left, g.sw) + 1;
  int64_t r = 0;
  int img = static_cast<int>(row0 / (int64_t{g.oh} * g.ow));
  int oy = static_cast<int>(row0 / g.ow % g.oh);
  int ox_begin = static_cast<int>(row0 % g.ow);
  while (r < rows) {
    const int ox_end = static_cast<int>(std::min<int64_t>(g.ow, ox_begin + (rows - r)));
    const int lo = std::clamp(interior_lo, ox_begin, ox_end);
    const int hi = std::clamp(interior_hi, lo, ox_end);
    const int64_t image = int64_t{img} * g.h * g.w * g.c;
    for (int ky = 0; ky < g.kh; ++ky) {
      const int iy = oy * g.sh - g.pad_top + ky * g.dh;
      // Offset in col of (row of ox, tap (ky, 0, 0)).
      auto col_at = [&](int ox) { return (r + ox - ox_begin) * k + ky * kwc; };
      if (iy < 0 || iy >= g.h) {
        for (int ox = ox_begin; ox < ox_end; ++ox) op.pad(col_at(ox), kwc);
        continue;
      }
      const int64_t x_row = image + int64_t{iy} * g.w * g.c;
      auto border = [&](int ox) {
        for (int kx = 0; kx < g.kw; ++kx) {
          const int ix = ox * g.sw - g.pad_left + kx * g.dw;
          if (ix < 0 || ix >= g.w) {
            op.pad(col_at(ox) + int64_t{kx} * g.c, g.c);
          } else {
            op.copy(col_at(ox) + int64_t{kx} * g.c, x_row + int64_t{ix} * g.c, g.c);
          }
        }
      };
      for (int ox = ox_begin; ox < lo; ++ox) border(ox);
      if (g.dw == 1) {
        for (int ox = lo; ox < hi; ++ox) {
          op.copy(col_at(ox), x_row + int64_t{ox * g.sw - g.pad_left} * g.c, kwc);
        }
      } else {
        for (int ox = lo; ox < hi; ++ox) {
          for (int kx = 0; kx < g.kw; ++kx) {
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            op.copy(col_at(ox) + int64_t{kx} * g.c, x_row + int64_t{ix} * g.c, g.c);
          }
        }
      }
      for (int ox = hi; ox < ox_end; ++ox) border(ox);
    }
    r += ox_end - ox_begin;
    ox_begin = 0;
    if (++oy == g.oh) {
      oy = 0;
      ++img;
    }
  }
}

// col = im2col(x): taps in (ky, kx, c) order to match the kernel's [KH,KW,C,F] rows, padded
// taps zero. Slices are short (often KW*C = 3 floats), so plain loops beat memcpy calls.
struct Gather {
  const float* x;
  float* col;
  void copy(int64_t col_offset, int64_t x_offset, int64_t len) {
    float* __restrict dst = col + col_offset;
    const float* __restrict src = x + x_offset;
    for (int64_t i = 0; i < len; ++i) dst[i] = src[i];
  }
  void pad(int64_t col_offset, int64_t len) {
    float* __restrict dst = col + col_offset;
    for (int64_t i = 0; i < len; ++i) dst[i] = 0.0f;
  }
};

// dx += col2im(dcol), the adjoint of im2col: each tap adds back onto the pixel it was copied
// from; padded taps are dropped.
struct ScatterAdd {
  const float* dcol;
  float* dx;
  void copy(int64_t col_offset, int64_t x_offset, int64_t len) {
    float* __restrict dst = dx + x_offset;
    const float* __restrict src = dcol + col_offset;
    for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
  }
  void pad(int64_t, int64_t) {}
};

void im2col(const ConvGeometry& g, const float* x, int64_t row0, int64_t rows, float* col) {
  Gather op{x, col};
  walk_patches(g, row0, rows, op);
}

void col2im_add(const ConvGeometry& g, const float* dcol, int64_t row0, int64_t rows, float* dx) {
  ScatterAdd op{dcol, dx};
  walk_patches(g, row0, rows, op);
}

// Few input channels (a network's first layer: C = 1 or 3) make im2col rows short, and copying
// a handful of floats per row costs more than the GEMM. Then the unrolled matrix is built
// transposed instead, colT[KH*KW*C, R]: row t = (ky, kx, c) holds that tap's input for each of
// the R output pixels, which for consecutive ox is a contiguous (stride 1) or strided run of the
// image row, written with long vectorizable loops.
bool use_transposed_im2col(const ConvGeometry& g) { return int64_t{g.kw} * g.c < 16; }

// colT[KH*KW*C, rows] = im2col(x)^T for output rows [row0, row0 + rows); padded taps are zero.
// Tap by tap (so each colT row is written front to back), then run by run (an image row oy and
// its consecutive ox); the in-image ox range of a tap is the same for every full run, so the
// inner loops are plain copies and fills without bounds checks.
void im2col_transposed(const ConvGeometry& g, const float* x, int64_t row0, int64_t rows,
                       float* col_t) {
  const int64_t pixel_step = int64_t{g.sw} * g.c;  // floats between consecutive ox in x
  for (int ky = 0; ky < g.kh; ++ky) {
    for (int kx = 0; kx < g.kw; ++kx) {
      // ox whose tap lands inside the row: 0 <= ox*sw - shift <= w - 1.
      const int shift = g.pad_left - kx * g.dw;
      const int lo_full = std::clamp(shift > 0 ? (shift + g.sw - 1) / g.sw : 0, 0, g.ow);
      const int hi_full = std::clamp(floor_div(g.w - 1 + shift, g.sw) + 1, lo_full, g.ow);
      for (int ch = 0; ch < g.c; ++ch) {
        float* dst_row = col_t + ((int64_t{ky} * g.kw + kx) * g.c + ch) * rows;
        int64_t r = 0;
        int img = static_cast<int>(row0 / (int64_t{g.oh} * g.ow));
        int oy = static_cast<int>(row0 / g.ow % g.oh);
        int ox_begin = static_cast<int>(row0 % g.ow);
        while (r < rows) {
          const int ox_end = static_cast<int>(std::min<int64_t>(g.ow, ox_begin + (rows - r)));
          float* __restrict dst = dst_row + r - ox_begin;  // indexed by ox
          const int iy = oy * g.sh - g.pad_top + ky * g.dh;
          if (iy < 0 || iy >= g.h) {
            for (int ox = ox_begin; ox < ox_end; ++ox) dst[ox] = 0.0f;
          } else {
            const int lo = std::clamp(lo_full, ox_begin, ox_end);
            const int hi = std::clamp(hi_full, lo, ox_end);
            // src[ox * pixel_step] is x[img, iy, ox*sw - shift, ch].
            const float* __restrict src = x + ((int64_t{img} * g.h + iy) * g.w - shift) * g.c + ch;
            for (int ox = ox_begin; ox < lo; ++ox) dst[ox] = 0.0f;
            if (pixel_step == 1) {
              for (int ox = lo; ox < hi; ++ox) dst[ox] = src[ox];
            } else {
              for (int ox = lo; ox < hi; ++ox) dst[ox] = src[ox * pixel_step];
            }
            for (int ox = hi; ox < ox_end; ++ox) dst[ox] = 0.0f;
          }
          r += ox_end - ox_begin;
          ox_begin = 0;
          if (++oy == g.oh) {
            oy = 0;
            ++img;
          }
        }
      }
    }
  }
}

// y[r, :] = b for each of `rows` rows of F floats (a plain loop: F is often a single vector).
void fill_bias(const float* b, int64_t rows, int f, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float* __restrict out = y + r * f;
    for (int i = 0; i < f; ++i) out[i] = b[i];
  }
}

// out[cols, rows] = in[rows, cols]^T, row-major both, blocked so both sides stay in cache lines.
void transpose(int64_t rows, int64_t cols, const float* in, float* out) {
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + kBlock), c1 = std::min(cols, c0 + kBlock);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) out[c * rows + r] = in[r * cols + c];
      }
    }
  }
}

// The direct forward: stride 1, no dilation, "valid" padding, and channels enough for the GEMMs
// (the same rule as the im2col layout). Then for output row oy, tap (ky, kx) reads the input row
// oy + ky from column kx on: a contiguous [OW, C] block, so y's row is the batch-reduce GEMM
// sum over taps of x_view[OW, C] w_tap[C, F], accumulated in registers, with no im2col copy.
// Blocks of several output rows are computed "wide": W pixels per row (the last KW - 1 of each
// row straddle into the next input row and are discarded), so one call covers rows * W pixels.
constexpr int kMaxDirectTaps = 49;      // 7x7; the tap pointers live on the stack
constexpr int kDirectWidePixels = 312;  // pixels per wide call (measured on m7's layer)

bool use_direct(const ConvGeometry& g) {
  return g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.pad_top == 0 && g.pad_left == 0 &&
         g.oh == g.h - g.kh + 1 && g.ow == g.w - g.kw + 1 && g.kh * g.kw <= kMaxDirectTaps &&
         !use_transposed_im2col(g) && !is_pointwise(g);
}

// Output rows per wide call; never the image's last row, whose wide pixels would read past it.
int direct_block_rows(const ConvGeometry& g) {
  return std::clamp(kDirectWidePixels / g.w, 1, std::max(g.oh - 1, 1));
}

// y = conv(x) + b through batch-reduce GEMMs (see use_direct), act_out = act(y) per block.
// Returns false, having written nothing, when libxsmm has no kernel for the shapes.
bool conv2d_forward_direct(const ConvGeometry& g, int n, const float* x, const float* w,
                           const float* b, float* y, float* scratch, const Activation* act,
                           float* act_out) {
  const int block = direct_block_rows(g), taps = g.kh * g.kw;
  const int wide = block * g.w;
  if (!gemm_batch_reduce_available(wide, g.f, g.c, g.c, g.f, g.f) ||
      !gemm_batch_reduce_available(g.ow, g.f, g.c, g.c, g.f, g.f))
    return false;
  const float* w_tap[kMaxDirectTaps];
  const float* x_tap[kMaxDirectTaps];
  for (int t = 0; t < taps; ++t) w_tap[t] = w + int64_t{t} * g.c * g.f;
  auto start = [&](float* rows, int64_t count) {
    if (b != nullptr)
      fill_bias(b, count, g.f, rows);
    else
      std::fill_n(rows, count * g.f, 0.0f);
  };
  for (int img = 0; img < n; ++img) {
    const float* xi = x + int64_t{img} * g.h * g.w * g.c;
    const int64_t y_image = int64_t{img} * g.oh * g.ow;
    for (int oy = 0; oy < g.oh;) {
      const bool wide_block = oy + block <= g.oh - 1;
      const int rows = wide_block ? block : 1;
      for (int ky = 0; ky < g.kh; ++ky)
        for (int kx = 0; kx < g.kw; ++kx)
          x_tap[ky * g.kw + kx] = xi + (int64_t{oy + ky} * g.w + kx) * g.c;
      float* y_rows = y + (y_image + int64_t{oy} * g.ow) * g.f;
      if (wide_block) {
        start(scratch, wide);
        gemm_batch_reduce(wide, g.f, g.c, x_tap, g.c, w_tap, g.f, taps, scratch, g.f);
        for (int r = 0; r < rows; ++r)
          std::copy_n(scratch + int64_t{r} * g.w * g.f, int64_t{g.ow} * g.f,
                      y_rows + int64_t{r} * g.ow * g.f);
      } else {
        start(y_rows, g.ow);
        gemm_batch_reduce(g.ow, g.f, g.c, x_tap, g.c, w_tap, g.f, taps, y_rows, g.f);
      }
      if (act)
        activation_forward(*act, int64_t{rows} * g.ow, g.f, y_rows,
                           act_out + (y_image + int64_t{oy} * g.ow) * g.f);
      oy += rows;
    }
  }
  return true;
}

// conv2d_backward_gemm, with dw also skipped when null (conv2d_backward's other passes may have
// taken it).
void backward_gemm(const ConvGeometry& g, int n, const float* x, const float* w, const float* dy,
                   float* dx, float* dw, float* db, float* scratch) {
  const int64_t total = int64_t{n} * g.oh * g.ow;
  const int k = static_cast<int>(patch_size(g));
  const int64_t chunk = chunk_rows(g, n);
  float* col = scratch;
  float* dcol = scratch + chunk * k;
  float* w_t = scratch + 2 * chunk * k;
  const bool transposed = use_transposed_im2col(g);
  if (db != nullptr) {
    for (int64_t r = 0; r < total; ++r) {
      const float* __restrict dy_row = dy + r * g.f;
      float* __restrict db_out = db;
      for (int f = 0; f < g.f; ++f) db_out[f] += dy_row[f];
    }
  }
  if (dx == nullptr && dw == nullptr) return;
  if (dx != nullptr) transpose(k, g.f, w, w_t);
  if (is_pointwise(g)) {
    // x[N*H*W, C] is its own im2col: dw += x^T dy, dx += dy w^T in one GEMM each.
    const int rows = static_cast<int>(total);
    if (dw != nullptr) gemm_fixed_rows(true, g.c, g.f, rows, x, g.c, dy, g.f, 1.0f, dw, g.f);
    if (dx != nullptr) gemm(false, false, rows, g.c, g.f, dy, g.f, w_t, g.c, 1.0f, dx, g.c);
    return;
  }
  for (int64_t row0 = 0; row0 < total; row0 += chunk) {
    const int rows = static_cast<int>(std::min(chunk, total - row0));
    const float* dy_chunk = dy + row0 * g.f;
    if (dw != nullptr && transposed) {
      im2col_transposed(g, x, row0, rows, col);
      gemm_fixed_rows(false, k, g.f, rows, col, rows, dy_chunk, g.f, 1.0f, dw, g.f);
    } else if (dw != nullptr) {
      im2col(g, x, row0, rows, col);
      gemm_fixed_rows(true, k, g.f, rows, col, k, dy_chunk, g.f, 1.0f, dw, g.f);
    }
    if (dx != nullptr) {
      gemm(false, false, rows, k, g.f, dy_chunk, g.f, w_t, k, 0.0f, dcol, k);
      col2im_add(g, dcol, row0, rows, dx);
    }
  }
}

}  // namespace

bool conv_geometry(ConvGeometry& g, bool same_padding) {
  if (g.h < 1 || g.w < 1 || g.c < 1 || g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 ||
      g.dw < 1) {
    return false;
  }
  const int ekh = (g.kh - 1) * g.dh + 1, ekw = (g.kw - 1) * g.dw + 1;  // dilated extents
  if (same_padding) {
    g.oh = (g.h + g.sh - 1) / g.sh;
    g.ow = (g.w + g.sw - 1) / g.sw;
    g.pad_top = std::max((g.oh - 1) * g.sh + ekh - g.h, 0) / 2;
    g.pad_left = std::max((g.ow - 1) * g.sw + ekw - g.w, 0) / 2;
  } else {
    g.pad_top = g.pad_left = 0;
    g.oh = g.h >= ekh ? (g.h - ekh) / g.sh + 1 : 0;
    g.ow = g.w >= ekw ? (g.w - ekw) / g.sw + 1 : 0;
  }
  return g.oh > 0 && g.ow > 0;
}

// Scratch layout (floats): col [R, KH*KW*C] | dcol [R, KH*KW*C] | transposed kernel [F, KH*KW*C];
// the direct forward uses the same space for its block of wide rows.
size_t conv2d_scratch_floats(const ConvGeometry& g, int n) {
  const int64_t k = patch_size(g);
  const int64_t im2col = 2 * chunk_rows(g, n) * k + k * g.f;
  const int64_t direct = use_direct(g) ? int64_t{direct_block_rows(g)} * g.w * g.f : 0;
  // Plan time: this also creates the oneDNN primitives for g (when oneDNN serves it), unless
  // Winograd takes both passes oneDNN could run (m7's 32 -> 64 layer: its oneDNN scratch was
  // 366,672 floats per batch piece against Winograd's 156,736, and never used).
  const bool onednn_unused = conv2d_use_winograd(g, false) && conv2d_use_winograd(g, true);
  const size_t onednn = onednn_unused ? 0 : onednn_conv_scratch_floats(g, n);
  const bool wino = conv2d_use_winograd(g, false) || conv2d_use_winograd(g, true) ||
                    conv2d_use_winograd_weights(g);
  const size_t winograd = wino ? conv2d_winograd_scratch_floats(g) : 0;
  const size_t single =
      conv2d_single_channel_applies(g) ? conv2d_single_channel_scratch_floats(g) : 0;
  return std::max({static_cast<size_t>(std::max(im2col, direct)), onednn, winograd, single});
}

// y[N*OH*OW, F] = im2col(x)[N*OH*OW, KH*KW*C] w[KH*KW*C, F] + b, chunk by chunk: each chunk of R
// output pixels is unrolled into scratch (the col part) and one GEMM writes its R rows of y, which
// are contiguous in NHWC. With a bias, y's rows are first filled with b and the GEMM adds on top.
void conv2d_forward_gemm(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* b, float* y, float* scratch, const Activation* act,
                         float* act_out) {
  const int64_t total = int64_t{n} * g.oh * g.ow;
  const int k = static_cast<int>(patch_size(g));
  if (is_pointwise(g)) {
    dense_forward(static_cast<int>(total), g.c, g.f, x, w, b, y);
    if (act) activation_forward(*act, total, g.f, y, act_out);
    return;
  }
  if (use_direct(g) && conv2d_forward_direct(g, n, x, w, b, y, scratch, act, act_out)) return;
  const int64_t chunk = chunk_rows(g, n);
  const bool transposed = use_transposed_im2col(g);
  float* col = scratch;
  for (int64_t row0 = 0; row0 < total; row0 += chunk) {
    const int64_t rows = std::min(chunk, total - row0);
    float* y_chunk = y + row0 * g.f;
    if (b != nullptr) fill_bias(b, rows, g.f, y_chunk);
    const float beta = b != nullptr ? 1.0f : 0.0f;
    if (transposed) {
      im2col_transposed(g, x, row0, rows, col);
      gemm(true, false, static_cast<int>(rows), g.f, k, col, static_cast<int>(rows), w, g.f, beta,
           y_chunk, g.f);
    } else {
      im2col(g, x, row0, rows, col);
      gemm(false, false, static_cast<int>(rows), g.f, k, col, k, w, g.f, beta, y_chunk, g.f);
    }
    if (act) activation_forward(*act, rows, g.f, y_chunk, act_out + row0 * g.f);
  }
}

// The winner per pass (bench/kernels/conv_candidates_bench.cpp, conv_winograd_bench.cpp):
// Winograd for the stride-1 3x3 forward and input-gradient passes with channels enough
// (F(4x4,3x3) where conv2d_use_winograd_f4 says so for the pass, else F(2x2,3x3))
// (conv2d_use_winograd), else oneDNN's JIT convolution for the shapes it serves
// (conv2d_onednn.h), the single-channel kernel for a first layer on grey images
// (conv2d_single_channel.h), the GEMM path for everything else; for the kernel gradient Winograd
// where conv2d_use_winograd_weights says so, else the single-channel kernel where it applies,
// else the GEMM path.
void conv2d_forward(const ConvGeometry& g, int n, const float* x, const float* w, const float* b,
                    float* y, float* scratch, const Activation* act, float* act_out) {
  if (conv2d_use_winograd_f4(g, false)) {
    conv2d_forward_winograd_f4(g, n, x, w, b, y, scratch, act, act_out);
    return;
  }
  if (conv2d_use_winograd(g, false)) {
    conv2d_forward_winograd(g, n, x, w, b, y, scratch, act, act_out);
    return;
  }
  if (onednn_conv_forward(g, n, x, w, b, y, scratch, act, act_out)) return;
  if (conv2d_single_channel_applies(g)) {
    conv2d_forward_single_channel(g, n, x, w, b, y, scratch, act, act_out);
    return;
  }
  conv2d_forward_gemm(g, n, x, w, b, y, scratch, act, act_out);
}

void conv2d_backward(const ConvGeometry& g, int n, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, float* scratch, bool dx_fresh) {
  // The Winograd input gradient writes a fresh dx whole; the other paths add to it zeroed.
  if (dx != nullptr && conv2d_use_winograd_f4(g, true)) {
    conv2d_backward_data_winograd_f4(g, n, w, dy, dx, scratch, dx_fresh);
    dx = nullptr;
  } else if (dx != nullptr && conv2d_use_winograd(g, true)) {
    conv2d_backward_data_winograd(g, n, w, dy, dx, scratch, dx_fresh);
    dx = nullptr;
  } else if (dx != nullptr && dx_fresh) {
    std::fill_n(dx, int64_t{n} * g.h * g.w * g.c, 0.0f);
  }
  if (dx != nullptr && onednn_conv_backward_data(g, n, w, dy, dx, scratch)) dx = nullptr;
  if (conv2d_use_winograd_f4_weights(g)) {
    conv2d_backward_weights_winograd_f4(g, n, x, dy, dw, scratch);
    dw = nullptr;
  } else if (conv2d_use_winograd_weights(g)) {
    conv2d_backward_weights_winograd(g, n, x, dy, dw, scratch);
    dw = nullptr;
  }
  if (dw != nullptr && conv2d_single_channel_applies(g)) {
    conv2d_backward_weights_single_channel(g, n, x, dy, dw, db, scratch);
    dw = db = nullptr;
  }
  backward_gemm(g, n, x, w, dy, dx, dw, db, scratch);
}

// Per chunk of R output pixels, with col = im2col(x) for the chunk and dy_c its rows of dy:
//   dw[KH*KW*C, F] += col^T dy_c                   (GEMM with A transposed)
//   dcol[R, KH*KW*C] = dy_c w^T, then dx += col2im(dcol)
// w^T [F, KH*KW*C] is materialized once per call in scratch so the dx GEMM is a plain NN product
// (the fastest path of gemm()). db sums dy's rows, contiguous over F.
void conv2d_backward_gemm(const ConvGeometry& g, int n, const float* x, const float* w,
                          const float* dy, float* dx, float* dw, float* db, float* scratch) {
  backward_gemm(g, n, x, w, dy, dx, dw, db, scratch);
}

// Depthwise: y[n,oy,ox,c*D+d] = b[c*D+d] + sum_{ky,kx} x[n,iy,ix,c] w[ky,kx,c,d] with
// iy = oy*sh - pad_top + ky*dh (ix likewise). Each output pixel's F = C*D values are accumulated
// in place; per tap the inner loop walks x's C channels and w's C*D row contiguously, so for the
// common D == 1 it is a vectorized multiply-add of two contiguous rows.
void depthwise_conv2d_forward(const ConvGeometry& g, int n, const float* x, const float* w,
                              const float* b, float* y) {
  const int depth = g.f / g.c;
  for (int img = 0; img < n; ++img) {
    const float* image = x + int64_t{img} * g.h * g.w * g.c;
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        float* __restrict out = y + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.f;
        if (b != nullptr)
          std::copy_n(b, g.f, out);
        else
          std::fill_n(out, g.f, 0.0f);
        for (int ky = 0; ky < g.kh; ++ky) {
          const int iy = oy * g.sh - g.pad_top + ky * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int kx = 0; kx < g.kw; ++kx) {
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            const float* __restrict xr = image + (int64_t{iy} * g.w + ix) * g.c;
            const float* __restrict wr = w + (int64_t{ky} * g.kw + kx) * g.f;
            if (depth == 1) {
              for (int c = 0; c < g.c; ++c) out[c] += xr[c] * wr[c];
            } else {
              for (int c = 0; c < g.c; ++c) {
                const float xv = xr[c];
                for (int d = 0; d < depth; ++d) out[c * depth + d] += xv * wr[c * depth + d];
              }
            }
          }
        }
      }
    }
  }
}

// Depthwise backward, same walk as forward: for every tap of every output pixel,
//   dx[n,iy,ix,c] += sum_d dy[n,oy,ox,c*D+d] w[ky,kx,c,d]
//   dw[ky,kx,c,d] += x[n,iy,ix,c] dy[n,oy,ox,c*D+d]
// and db[c*D+d] += dy[n,oy,ox,c*D+d]; all rows contiguous over channels.
void depthwise_conv2d_backward(const ConvGeometry& g, int n, const float* x, const float* w,
                               const float* dy, float* dx, float* dw, float* db) {
  const int depth = g.f / g.c;
  for (int img = 0; img < n; ++img) {
    const int64_t image_offset = int64_t{img} * g.h * g.w * g.c;
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        const float* __restrict gr = dy + ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.f;
        if (db != nullptr) {
          float* __restrict db_out = db;
          for (int f = 0; f < g.f; ++f) db_out[f] += gr[f];
        }
        for (int ky = 0; ky < g.kh; ++ky) {
          const int iy = oy * g.sh - g.pad_top + ky * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int kx = 0; kx < g.kw; ++kx) {
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            const int64_t pixel = image_offset + (int64_t{iy} * g.w + ix) * g.c;
            const int64_t tap = (int64_t{ky} * g.kw + kx) * g.f;
            const float* __restrict xr = x + pixel;
            const float* __restrict wr = w + tap;
            float* __restrict dwr = dw + tap;
            if (depth == 1) {
              for (int c = 0; c < g.c; ++c) dwr[c] += xr[c] * gr[c];
              if (dx != nullptr) {
                float* __restrict dxr = dx + pixel;
                for (int c = 0; c < g.c; ++c) dxr[c] += gr[c] * wr[c];
              }
            } else {
              for (int c = 0; c < g.c; ++c) {
                float acc = 0.0f;
                for (int d = 0; d < depth; ++d) {
                  dwr[c * depth + d] += xr[c] * gr[c * depth + d];
                  acc += gr[c * depth + d] * wr[c * depth + d];
                }
                if (dx != nullptr) dx[pixel + c] += acc;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace nnfleet
