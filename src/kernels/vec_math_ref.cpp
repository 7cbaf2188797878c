// Naive twins of vec_math.h's kernels: the standard library's exp and tanh in double (tests only).
#include <cmath>

#include "kernels/vec_math.h"

namespace nnfleet {

void sigmoid_forward_ref(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x[i]))));
}

void tanh_forward_ref(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::tanh(static_cast<double>(x[i])));
}

}  // namespace nnfleet
