// Naive Conv1D, the oracle of the fast path: one output step at a time, input step
// ot*stride - pad_left + k*dilation for tap k, taps outside [0, T) read as zero.
#include <cstdint>

#include "kernels/conv1d.h"

namespace nnfleet {

void conv1d_forward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                        const float* b, float* y) {
  for (int i = 0; i < n; ++i)
    for (int ot = 0; ot < g.ow; ++ot)
      for (int f = 0; f < g.f; ++f) {
        double s = b ? b[f] : 0.0;
        for (int k = 0; k < g.kw; ++k) {
          const int it = ot * g.sw - g.pad_left + k * g.dw;
          if (it < 0 || it >= g.w) continue;
          for (int c = 0; c < g.c; ++c)
            s += static_cast<double>(x[(int64_t{i} * g.w + it) * g.c + c]) *
                 w[(int64_t{k} * g.c + c) * g.f + f];
        }
        y[(int64_t{i} * g.ow + ot) * g.f + f] = static_cast<float>(s);
      }
}

void conv1d_backward_ref(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* dy, float* dx, float* dw, float* db) {
  for (int i = 0; i < n; ++i)
    for (int ot = 0; ot < g.ow; ++ot)
      for (int f = 0; f < g.f; ++f) {
        const float d = dy[(int64_t{i} * g.ow + ot) * g.f + f];
        if (db) db[f] += d;
        for (int k = 0; k < g.kw; ++k) {
          const int it = ot * g.sw - g.pad_left + k * g.dw;
          if (it < 0 || it >= g.w) continue;
          for (int c = 0; c < g.c; ++c) {
            const int64_t xi = (int64_t{i} * g.w + it) * g.c + c;
            const int64_t wi = (int64_t{k} * g.c + c) * g.f + f;
            if (dx) dx[xi] += d * w[wi];
            dw[wi] += d * x[xi];
          }
        }
      }
}

}  // namespace nnfleet
