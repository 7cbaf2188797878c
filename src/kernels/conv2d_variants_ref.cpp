// Naive reference twins of the transposed and grouped convolution kernels: textbook nested
// loops with double accumulation, written from each layer's definition (not from the
// associated convolution), checking every tap against the image bounds. Only tests call them.
#include <cstdint>
#include <vector>

#include "kernels/conv2d_variants.h"

namespace nnfleet {

// y[n,iy,ix,c] = b[c] + sum over (oy,ox,ky,kx,f) with iy = oy*sh - pad_top + ky*dh and
// ix = ox*sw - pad_left + kx*dw of x[n,oy,ox,f] w[ky,kx,c,f].
void conv2d_transpose_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                  const float* b, float* y) {
  const int64_t out = int64_t{n} * g.h * g.w * g.c;
  std::vector<double> acc(static_cast<size_t>(out), 0.0);
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox)
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx) {
            const int iy = oy * g.sh - g.pad_top + ky * g.dh;
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            for (int c = 0; c < g.c; ++c)
              for (int f = 0; f < g.f; ++f)
                acc[static_cast<size_t>(((int64_t{img} * g.h + iy) * g.w + ix) * g.c + c)] +=
                    static_cast<double>(x[((int64_t{img} * g.oh + oy) * g.ow + ox) * g.f + f]) *
                    w[((int64_t{ky} * g.kw + kx) * g.c + c) * g.f + f];
          }
  for (int64_t i = 0; i < out; ++i)
    y[i] = static_cast<float>(acc[static_cast<size_t>(i)] + (b != nullptr ? b[i % g.c] : 0.0));
}

// The adjoint of the forward sum, term by term.
void conv2d_transpose_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                   const float* dy, float* dx, float* dw, float* db) {
  if (db != nullptr)
    for (int64_t i = 0; i < int64_t{n} * g.h * g.w * g.c; ++i) db[i % g.c] += dy[i];
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox)
        for (int ky = 0; ky < g.kh; ++ky)
          for (int kx = 0; kx < g.kw; ++kx) {
            const int iy = oy * g.sh - g.pad_top + ky * g.dh;
            const int ix = ox * g.sw - g.pad_left + kx * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            for (int c = 0; c < g.c; ++c)
              for (int f = 0; f < g.f; ++f) {
                const int64_t xi = ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.f + f;
                const int64_t wi = ((int64_t{ky} * g.kw + kx) * g.c + c) * g.f + f;
                const float grad = dy[((int64_t{img} * g.h + iy) * g.w + ix) * g.c + c];
                dw[wi] += grad * x[xi];
                if (dx != nullptr) dx[xi] += grad * w[wi];
              }
          }
}

// y[n,oy,ox,f] = b[f] + sum_{ky,kx,j < C/G} x[n,iy,ix,grp*C/G + j] w[ky,kx,j,f], grp = f/(F/G).
void conv2d_grouped_forward_ref(const ConvGeometry& g, int groups, int n, const float* x,
                                const float* w, const float* b, float* y) {
  const int cg = g.c / groups, fg = g.f / groups;
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox)
        for (int f = 0; f < g.f; ++f) {
          double acc = b != nullptr ? b[f] : 0.0;
          const int c0 = f / fg * cg;
          for (int ky = 0; ky < g.kh; ++ky)
            for (int kx = 0; kx < g.kw; ++kx) {
              const int iy = oy * g.sh - g.pad_top + ky * g.dh;
              const int ix = ox * g.sw - g.pad_left + kx * g.dw;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              for (int j = 0; j < cg; ++j)
                acc +=
                    static_cast<double>(x[((int64_t{img} * g.h + iy) * g.w + ix) * g.c + c0 + j]) *
                    w[((int64_t{ky} * g.kw + kx) * cg + j) * g.f + f];
            }
          y[((int64_t{img} * g.oh + oy) * g.ow + ox) * g.f + f] = static_cast<float>(acc);
        }
}

void conv2d_grouped_backward_ref(const ConvGeometry& g, int groups, int n, const float* x,
                                 const float* w, const float* dy, float* dx, float* dw, float* db) {
  const int cg = g.c / groups, fg = g.f / groups;
  for (int img = 0; img < n; ++img)
    for (int oy = 0; oy < g.oh; ++oy)
      for (int ox = 0; ox < g.ow; ++ox)
        for (int f = 0; f < g.f; ++f) {
          const float grad = dy[((int64_t{img} * g.oh + oy) * g.ow + ox) * g.f + f];
          if (db != nullptr) db[f] += grad;
          const int c0 = f / fg * cg;
          for (int ky = 0; ky < g.kh; ++ky)
            for (int kx = 0; kx < g.kw; ++kx) {
              const int iy = oy * g.sh - g.pad_top + ky * g.dh;
              const int ix = ox * g.sw - g.pad_left + kx * g.dw;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              for (int j = 0; j < cg; ++j) {
                const int64_t xi = ((int64_t{img} * g.h + iy) * g.w + ix) * g.c + c0 + j;
                const int64_t wi = ((int64_t{ky} * g.kw + kx) * cg + j) * g.f + f;
                dw[wi] += grad * x[xi];
                if (dx != nullptr) dx[xi] += grad * w[wi];
              }
            }
        }
}

}  // namespace nnfleet
