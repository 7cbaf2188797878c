// Element-wise activation kernels with Keras 3 semantics, forward and backward.
// Softmax works over the last axis of rows of `features` values; every other kind is element-wise.
#pragma once

#include <cstdint>
#include <limits>

namespace nnfleet {

enum class Act {
  kLinear,
  kRelu,  // with Activation::alpha (negative slope), max_value and threshold as Keras's ReLU layer
  kSigmoid,
  kTanh,
  kSoftmax,
  kElu,  // alpha (Keras default 1.0)
  kSelu,
  kSoftplus,
  kSoftsign,
  kSwish,        // x * sigmoid(x), also "silu"
  kGelu,         // exact (erf) form, Keras 3 default approximate=False
  kGeluTanh,     // approximate=True
  kLeakyRelu,    // alpha = negative slope (activation function default 0.2; LeakyReLU layer 0.3)
  kHardSigmoid,  // Keras 3: relu6(x + 3) / 6
  kExponential,
};

struct Activation {
  Act kind = Act::kLinear;
  float alpha = 0.0f;
  float max_value = std::numeric_limits<float>::infinity();
  float threshold = 0.0f;
};

// y[rows,features] = act(x). x and y may alias (in place) for every kind.
void activation_forward(const Activation& a, int64_t rows, int64_t features, const float* x,
                        float* y);
// dx[rows,features] += act'(x) * dy, using x (the input) and y (the output) as convenient.
// For softmax: dx += y * (dy - sum(dy * y)) per row.
// kSigmoid, kTanh, kSoftmax and kExponential read only y (their forward may run in place and
// still be differentiated); every other kind reads only x. Derivatives at kinks follow
// TensorFlow: relu is 1 only on (threshold, max_value) and alpha at or below threshold;
// leaky_relu is alpha at 0; hard_sigmoid is 1/6 on (-3, 3) only.
void activation_backward(const Activation& a, int64_t rows, int64_t features, const float* x,
                         const float* y, const float* dy, float* dx);
// dx[rows,features] = act'(x) * dy, written rather than added, so dx needs no zeroing first: the
// same values as activation_backward onto zeros (up to the sign of a zero). ReLU, the common
// case, writes in one pass; the other kinds zero dx and accumulate.
void activation_backward_overwrite(const Activation& a, int64_t rows, int64_t features,
                                   const float* x, const float* y, const float* dy, float* dx);
// Softmax over rows of any width, as activation_forward and activation_backward compute it for
// rows of 1 or of more than 16 values; rows of 2 to 16 take fixed-width forms, which tests
// compare with these bit for bit.
void softmax_forward_general(int64_t rows, int64_t features, const float* x, float* y);
void softmax_backward_general(int64_t rows, int64_t features, const float* y, const float* dy,
                              float* dx);
// True when act'(x) is a function of y = act(x) alone, so activation_backward gives the same result
// with y passed for x: the kinds that read only y, and relu with alpha 0 and threshold 0 (its
// slope is 1 exactly where 0 < y < max_value). Such an activation can run in place.
bool activation_backward_from_y(const Activation& a);

}  // namespace nnfleet
