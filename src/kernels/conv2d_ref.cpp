// Naive reference twins of the convolution kernels: the textbook seven nested loops with double
// accumulation, checking every tap against the image bounds. Only tests call them.
#include <cstddef>
#include <cstdint>

#include "kernels/conv2d.h"

namespace nnfleet {
namespace {

// Index helpers for NHWC tensors and [KH,KW,C,F] kernels.
int64_t nhwc(const ConvGeometry& g, int img, int y, int x, int c) {
  return ((int64_t{img} * g.h + y) * g.w + x) * g.c + c;
}
int64_t out_index(const ConvGeometry& g, int img, int oy, int ox, int f) {
  return ((int64_t{img} * g.oh + oy) * g.ow + ox) * g.f + f;
}

}  // namespace

// y[n,oy,ox,f] = b[f] + sum_{ky,kx,c} x[n, oy*sh-pt+ky*dh, ox*sw-pl+kx*dw, c] w[ky,kx,c,f].
void conv2d_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                        const float* b, float* y) {
  for (int img = 0; img < n; ++img) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int f = 0; f < g.f; ++f) {
          double acc = b != nullptr ? b[f] : 0.0;
          for (int ky = 0; ky < g.kh; ++ky) {
            for (int kx = 0; kx < g.kw; ++kx) {
              const int iy = oy * g.sh - g.pad_top + ky * g.dh;
              const int ix = ox * g.sw - g.pad_left + kx * g.dw;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              for (int c = 0; c < g.c; ++c) {
                acc += static_cast<double>(x[nhwc(g, img, iy, ix, c)]) *
                       w[((int64_t{ky} * g.kw + kx) * g.c + c) * g.f + f];
              }
            }
          }
          y[out_index(g, img, oy, ox, f)] = static_cast<float>(acc);
        }
      }
    }
  }
}

// The adjoint of the forward sum, term by term: every product x*w in the forward adds dy*w to
// dx and dy*x to dw.
void conv2d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* dy, float* dx, float* dw, float* db) {
  for (int img = 0; img < n; ++img) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int f = 0; f < g.f; ++f) {
          const float grad = dy[out_index(g, img, oy, ox, f)];
          if (db != nullptr) db[f] += grad;
          for (int ky = 0; ky < g.kh; ++ky) {
            for (int kx = 0; kx < g.kw; ++kx) {
              const int iy = oy * g.sh - g.pad_top + ky * g.dh;
              const int ix = ox * g.sw - g.pad_left + kx * g.dw;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              for (int c = 0; c < g.c; ++c) {
                const int64_t wi = ((int64_t{ky} * g.kw + kx) * g.c + c) * g.f + f;
                const int64_t xi = nhwc(g, img, iy, ix, c);
                dw[wi] += grad * x[xi];
                if (dx != nullptr) dx[xi] += grad * w[wi];
              }
            }
          }
        }
      }
    }
  }
}

// y[n,oy,ox,c*D+d] = b[c*D+d] + sum_{ky,kx} x[n,iy,ix,c] w[ky,kx,c,d].
void depthwise_conv2d_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                  const float* b, float* y) {
  const int depth = g.f / g.c;
  for (int img = 0; img < n; ++img) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int c = 0; c < g.c; ++c) {
          for (int d = 0; d < depth; ++d) {
            const int f = c * depth + d;
            double acc = b != nullptr ? b[f] : 0.0;
            for (int ky = 0; ky < g.kh; ++ky) {
              for (int kx = 0; kx < g.kw; ++kx) {
                const int iy = oy * g.sh - g.pad_top + ky * g.dh;
                const int ix = ox * g.sw - g.pad_left + kx * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                acc += static_cast<double>(x[nhwc(g, img, iy, ix, c)]) *
                       w[(int64_t{ky} * g.kw + kx) * g.f + f];
              }
            }
            y[out_index(g, img, oy, ox, f)] = static_cast<float>(acc);
          }
        }
      }
    }
  }
}

void depthwise_conv2d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                                   const float* dy, float* dx, float* dw, float* db) {
  const int depth = g.f / g.c;
  for (int img = 0; img < n; ++img) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int c = 0; c < g.c; ++c) {
          for (int d = 0; d < depth; ++d) {
            const int f = c * depth + d;
            const float grad = dy[out_index(g, img, oy, ox, f)];
            if (db != nullptr) db[f] += grad;
            for (int ky = 0; ky < g.kh; ++ky) {
              for (int kx = 0; kx < g.kw; ++kx) {
                const int iy = oy * g.sh - g.pad_top + ky * g.dh;
                const int ix = ox * g.sw - g.pad_left + kx * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const int64_t wi = (int64_t{ky} * g.kw + kx) * g.f + f;
                const int64_t xi = nhwc(g, img, iy, ix, c);
                dw[wi] += grad * x[xi];
                if (dx != nullptr) dx[xi] += grad * w[wi];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace nnfleet
