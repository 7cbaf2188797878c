// Vectorized element-wise sigmoid and tanh for the recurrent cells' gates, where one std::exp or
// std::tanh call per element cost more than the cell's matrix products (BENCHMARKS.md, W4 lstm).
// Every element, the tail included, goes through the same 8-lane code (the tail through a padded
// block), so a result depends only on its input: not on the buffer's alignment, its length or
// the element's position. Accuracy: within 4 ulp of the exact function, and outside [-88, 88] the
// sigmoid's exponent is clamped (sigmoid(-88) is 6.1e-39, sigmoid(88) is 1). NaN stays NaN.
// Each has a naive `_ref` twin (std::exp / std::tanh in double) used only by tests.
#pragma once

#include <cstdint>

namespace nnfleet {

// y[n] = 1 / (1 + exp(-x[n])); x and y may be the same buffer.
void sigmoid_forward(int64_t n, const float* x, float* y);
// y[n] = tanh(x[n]); x and y may be the same buffer.
void tanh_forward(int64_t n, const float* x, float* y);

void sigmoid_forward_ref(int64_t n, const float* x, float* y);
void tanh_forward_ref(int64_t n, const float* x, float* y);

}  // namespace nnfleet
