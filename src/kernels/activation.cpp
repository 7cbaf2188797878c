// Activation kernels, forward and backward, with Keras 3 semantics. Buffers are treated as flat
// arrays of rows*features floats and go through Eigen array expressions, whose vectorized exp,
// tanh, log1p and erf keep the transcendental kinds from dominating a small layer's time; only
// softmax works row by row. Derivatives at kinks follow TensorFlow (relu'(0) = 0).
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include "kernels/activation.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unsupported/Eigen/SpecialFunctions>

#include "core/check.h"

namespace nnfleet {
namespace {

using Array = Eigen::Array<float, Eigen::Dynamic, 1>;
using ConstArrayMap = Eigen::Map<const Array>;
using ArrayMap = Eigen::Map<Array>;

constexpr float kSeluAlpha = 1.67326324f;
constexpr float kSeluScale = 1.05070098f;
constexpr float kInvSqrt2 = 0.70710678118654752f;     // 1/sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;   // 1/sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;
constexpr float kLnFloatMax = 88.7228391f;  // exp(x) overflows float above it

// Sums (and the softmax row's max) in an order fixed by the index alone: lane i % 8 accumulates
// element i, then the eight lanes combine pairwise in a fixed tree. Eigen's .sum() peels
// elements until its packets are aligned, so its order (and the last bit of the result) moved
// with the buffer's address and ISA: an in-place softmax differed from an out-of-place one on
// AVX2. Eight lanes fill one AVX2 register and half an AVX-512 one, and the lane-wise adds
// vectorize without reassociation, so the result is the same on every machine and alignment.
constexpr int kLanes = 8;

float combine_lanes(const float (&acc)[kLanes]) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

float dot_fixed(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  return combine_lanes(acc);
}

// The max is exact in any order; a plain loop keeps NaN handling fixed too.
float max_of(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Calls body(at, len, tmp) over consecutive blocks of a flat array of `size` floats, with tmp a
// stack buffer of len floats: a derivative that uses one intermediate twice (sigmoid in swish,
// tanh in gelu) computes it once per element without allocating.
template <typename Body>
void for_each_block(int64_t size, Body body) {
  constexpr int64_t kBlock = 256;
  alignas(64) float tmp[kBlock];
  for (int64_t at = 0; at < size; at += kBlock) {
    const int64_t len = size - at < kBlock ? size - at : kBlock;
    body(at, len, ArrayMap(tmp, len));
  }
}

// Element-wise y[i] = f(x[i]) over the flat x[size] (every kind but softmax); Eigen evaluates
// coefficient by coefficient (packet by packet), so x and y may be the same buffer.
void forward_flat(const Activation& a, int64_t size, const float* x, float* y) {
  const ConstArrayMap xv(x, size);
  ArrayMap yv(y, size);
  switch (a.kind) {
    case Act::kLinear:
      if (x != y) yv = xv;
      break;
    case Act::kRelu:
      if (a.alpha == 0.0f && a.threshold == 0.0f && std::isinf(a.max_value)) {
        yv = xv.max(0.0f);
      } else {
        // max_value above, x itself on [threshold, max_value), slope alpha below threshold.
        const float alpha = a.alpha, threshold = a.threshold, max_value = a.max_value;
        for (int64_t i = 0; i < size; ++i) {
          const float v = x[i];
          y[i] = v >= max_value ? max_value : (v >= threshold ? v : alpha * (v - threshold));
        }
      }
      break;
    case Act::kSigmoid:
      // 1/(1+exp(-x)). Eigen's packet exp clamps its argument at ln(FLT_MAX) = 88.72 instead of
      // overflowing to inf, which would leave sigmoid(-1000) at 2.9e-39: below -88.72 the
      // result is 0, as the IEEE scalar formula (1/inf) and TensorFlow give.
      yv = (xv < -kLnFloatMax).select(0.0f, ((-xv).exp() + 1.0f).inverse());
      break;
    case Act::kTanh:
      yv = xv.tanh();
      break;
    case Act::kSoftmax:
      NNFLEET_CHECK(false);  // row-wise: softmax_forward
      break;
    case Act::kElu:
      yv = (xv > 0.0f).select(xv, a.alpha * xv.expm1());
      break;
    case Act::kSelu:
      yv = kSeluScale * (xv > 0.0f).select(xv, kSeluAlpha * xv.expm1());
      break;
    case Act::kSoftplus:
      // log(1+exp(x)) = max(x,0) + log1p(exp(-|x|)): the exp argument is never positive.
      // Past ln(FLT_MAX) the clamped packet exp (see sigmoid) would add 2.9e-39, not 0.
      yv = xv.max(0.0f) + (xv.abs() > kLnFloatMax).select(0.0f, (-xv.abs()).exp().log1p());
      break;
    case Act::kSoftsign:
      yv = xv / (xv.abs() + 1.0f);
      break;
    case Act::kSwish:
      yv = xv / ((-xv).exp() + 1.0f);
      break;
    case Act::kGelu:
      yv = 0.5f * xv * ((xv * kInvSqrt2).erf() + 1.0f);
      break;
    case Act::kGeluTanh:
      yv = 0.5f * xv * ((kSqrt2OverPi * (xv + kGeluCubic * xv.cube())).tanh() + 1.0f);
      break;
    case Act::kLeakyRelu:
      yv = (xv >= 0.0f).select(xv, a.alpha * xv);
      break;
    case Act::kHardSigmoid:
      yv = (xv * (1.0f / 6.0f) + 0.5f).max(0.0f).min(1.0f);
      break;
    case Act::kExponential:
      yv = xv.exp();
      break;
  }
}

// ReLU's derivative at v (TensorFlow's at the kinks): 1 on (threshold, max_value), alpha at or
// below threshold, 0 at or above max_value.
inline float relu_slope(const Activation& a, float v) {
  return v >= a.max_value ? 0.0f : (v > a.threshold ? 1.0f : a.alpha);
}

// dx[i] += f'(x[i]) dy[i], each derivative written in whichever of x or y makes it cheapest
// (see activation.h for which kinds read which). Softmax is not element-wise: its rows are done
// in activation_backward.
void backward_flat(const Activation& a, int64_t size, const float* x, const float* y,
                   const float* dy, float* dx) {
  const ConstArrayMap gv(dy, size);
  ArrayMap dxv(dx, size);
  switch (a.kind) {
    case Act::kLinear:
      dxv += gv;
      break;
    case Act::kRelu: {
      const Activation r = a;  // a local copy: stores through dx cannot alias its fields
      for (int64_t i = 0; i < size; ++i) dx[i] += relu_slope(r, x[i]) * dy[i];
      break;
    }
    case Act::kSigmoid: {
      const ConstArrayMap yv(y, size);
      dxv += yv * (1.0f - yv) * gv;
      break;
    }
    case Act::kTanh: {
      const ConstArrayMap yv(y, size);
      dxv += (1.0f - yv.square()) * gv;
      break;
    }
    case Act::kSoftmax:
      NNFLEET_CHECK(false);  // row-wise: activation_backward does its rows
      break;
    case Act::kElu: {
      const ConstArrayMap xv(x, size);
      dxv += (xv > 0.0f).select(Array::Ones(size), a.alpha * xv.exp()) * gv;
      break;
    }
    case Act::kSelu: {
      const ConstArrayMap xv(x, size);
      dxv += kSeluScale * (xv > 0.0f).select(Array::Ones(size), kSeluAlpha * xv.exp()) * gv;
      break;
    }
    case Act::kSoftplus: {
      // d/dx log(1+exp(x)) = sigmoid(x).
      const ConstArrayMap xv(x, size);
      dxv += gv / ((-xv).exp() + 1.0f);
      break;
    }
    case Act::kSoftsign: {
      const ConstArrayMap xv(x, size);
      dxv += gv / (xv.abs() + 1.0f).square();
      break;
    }
    case Act::kSwish:
      // d/dx x s(x) = s + x s (1 - s) = s (1 + x (1 - s)), s = sigmoid(x).
      for_each_block(size, [&](int64_t at, int64_t len, ArrayMap s) {
        const ConstArrayMap xb(x + at, len);
        s = ((-xb).exp() + 1.0f).inverse();
        ArrayMap(dx + at, len) += s * (1.0f + xb * (1.0f - s)) * ConstArrayMap(dy + at, len);
      });
      break;
    case Act::kGelu: {
      // d/dx 0.5 x (1 + erf(x/sqrt2)) = 0.5 (1 + erf(x/sqrt2)) + x exp(-x^2/2) / sqrt(2 pi).
      const ConstArrayMap xv(x, size);
      dxv += (0.5f * ((xv * kInvSqrt2).erf() + 1.0f) +
              kInvSqrt2Pi * xv * (-0.5f * xv.square()).exp()) *
             gv;
      break;
    }
    case Act::kGeluTanh:
      // t = tanh(u), u = sqrt(2/pi) (x + c x^3):
      // f' = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2).
      for_each_block(size, [&](int64_t at, int64_t len, ArrayMap t) {
        const ConstArrayMap xb(x + at, len);
        t = (kSqrt2OverPi * (xb + kGeluCubic * xb.cube())).tanh();
        ArrayMap(dx + at, len) +=
            (0.5f * (1.0f + t) + (0.5f * kSqrt2OverPi) * xb * (1.0f - t.square()) *
                                     (1.0f + 3.0f * kGeluCubic * xb.square())) *
            ConstArrayMap(dy + at, len);
      });
      break;
    case Act::kLeakyRelu: {
      const ConstArrayMap xv(x, size);
      dxv += (xv > 0.0f).select(gv, a.alpha * gv);
      break;
    }
    case Act::kHardSigmoid: {
      const ConstArrayMap xv(x, size);
      dxv += ((xv > -3.0f) && (xv < 3.0f)).select(gv * (1.0f / 6.0f), 0.0f);
      break;
    }
    case Act::kExponential: {
      const ConstArrayMap yv(y, size);
      dxv += yv * gv;
      break;
    }
  }
}

// Whether the forward (or the backward) of a kind calls a transcendental function (exp, tanh,
// erf, ...), whose packet and scalar forms differ in the last bit. Eigen runs the elements before
// an unaligned destination's first packet, and the tail, through the scalar form, so these go
// through exact_blocks(); every other expression is IEEE-exact element by element in either form.
bool transcendental_forward(Act kind) {
  switch (kind) {
    case Act::kLinear:
    case Act::kRelu:
    case Act::kSoftsign:
    case Act::kLeakyRelu:
    case Act::kHardSigmoid:
      return false;
    default:
      return true;
  }
}

bool transcendental_backward(Act kind) {
  switch (kind) {
    case Act::kElu:
    case Act::kSelu:
    case Act::kSoftplus:
    case Act::kSwish:
    case Act::kGelu:
    case Act::kGeluTanh:
      return true;
    default:  // sigmoid, tanh, exponential and softmax are differentiated from y, rationally
      return false;
  }
}

// Runs body(len, in, out) over all `size` elements so that Eigen evaluates every element in its
// packet form, wherever the buffers start: the middle, from the first 64-byte boundary of `out`
// on and a multiple of 16 floats long, directly (whole packets for AVX2 and AVX-512, none
// scalar); the few elements before and after it in 64-byte-aligned stack copies padded with zeros
// to 16 floats. in[k] may be null (not read); in[3], when set, is `out`'s own old contents (an
// accumulating backward). Results thus never depend on alignment, at the cost of copying at most
// 30 elements per call.
constexpr int64_t kPad = 16;

template <typename Body>
void exact_blocks(int64_t size, const float* const (&in)[4], float* out, Body body) {
  auto padded = [&](int64_t at, int64_t len) {
    if (len == 0) return;
    alignas(64) float buf[4][kPad];
    const float* p[4] = {};
    for (int k = 0; k < 4; ++k) {
      if (!in[k] && k < 3) continue;
      std::fill(buf[k], buf[k] + kPad, 0.0f);
      if (in[k]) std::copy(in[k] + at, in[k] + at + len, buf[k]);
      p[k] = in[k] ? buf[k] : nullptr;
    }
    body(kPad, p, buf[3]);
    std::copy(buf[3], buf[3] + len, out + at);
  };
  const auto misalign = reinterpret_cast<uintptr_t>(out) % 64;
  const int64_t head =
      std::min<int64_t>(size, misalign ? static_cast<int64_t>((64 - misalign) / sizeof(float)) : 0);
  const int64_t mid = (size - head) / kPad * kPad;
  padded(0, head);
  if (mid > 0) {
    const float* p[4] = {};
    for (int k = 0; k < 4; ++k) p[k] = in[k] ? in[k] + head : nullptr;
    body(mid, p, out + head);
  }
  for (int64_t at = head + mid; at < size; at += kPad) padded(at, std::min(kPad, size - at));
}

// One exp over the whole flat batch (so exact_blocks' padded ends are paid once per call, not
// per row).
void exp_in_place(int64_t size, float* y) {
  exact_blocks(size, {y, nullptr, nullptr, nullptr}, y,
               [](int64_t len, const float* const(&p)[4], float* out) {
                 ArrayMap(out, len) = ConstArrayMap(p[0], len).exp();
               });
}

// softmax_forward_general for rows of exactly F values, F known when compiling: a classifier's few
// classes (W3's 10) spent most of the row in the general loops' set-up and tails. 32 rows of 10
// on Zen 5 (kernels_bench, BM_ActivationForward/softmax against BM_SoftmaxGeneralForward): 320
// ns here, 565 ns general; backward 220 and 247 ns. The same operations on each element in the
// same order (max in index order, element i summed into lane i % 8, one reciprocal), so the same
// bits.
template <int F>
void softmax_forward_fixed(int64_t rows, const float* x, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * F;
    float* yr = y + r * F;
    float m = xr[0];
    for (int j = 1; j < F; ++j) m = xr[j] > m ? xr[j] : m;
    for (int j = 0; j < F; ++j) yr[j] = xr[j] - m;
  }
  exp_in_place(rows * F, y);
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * F;
    float acc[kLanes] = {};
    for (int j = 0; j < F; ++j) acc[j % kLanes] += yr[j];
    const float inv = 1.0f / combine_lanes(acc);
    for (int j = 0; j < F; ++j) yr[j] *= inv;
  }
}

// softmax_backward_general for rows of exactly F values (as softmax_forward_fixed).
template <int F>
void softmax_backward_fixed(int64_t rows, const float* y, const float* dy, float* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * F;
    const float* dyr = dy + r * F;
    float* dxr = dx + r * F;
    float acc[kLanes] = {};
    for (int j = 0; j < F; ++j) acc[j % kLanes] += dyr[j] * yr[j];
    const float dot = combine_lanes(acc);
    for (int j = 0; j < F; ++j) dxr[j] += yr[j] * (dyr[j] - dot);
  }
}

// The fixed-width forms for 2 to 16 values per row, the general ones otherwise.
template <int F = 2>
void softmax_forward(int64_t rows, int64_t features, const float* x, float* y) {
  if constexpr (F <= 16) {
    if (features == F) return softmax_forward_fixed<F>(rows, x, y);
    return softmax_forward<F + 1>(rows, features, x, y);
  }
  softmax_forward_general(rows, features, x, y);
}

template <int F = 2>
void softmax_backward(int64_t rows, int64_t features, const float* y, const float* dy, float* dx) {
  if constexpr (F <= 16) {
    if (features == F) return softmax_backward_fixed<F>(rows, y, dy, dx);
    return softmax_backward<F + 1>(rows, features, y, dy, dx);
  }
  softmax_backward_general(rows, features, y, dy, dx);
}

}  // namespace

// Per row of F values: y = exp(x - max) / sum(exp(x - max)), the max subtraction keeping exp
// from overflowing. The shift is written row by row, then one exp runs over the whole batch,
// then the rows are normalized.
void softmax_forward_general(int64_t rows, int64_t features, const float* x, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * features;
    ArrayMap(y + r * features, features) = ConstArrayMap(xr, features) - max_of(xr, features);
  }
  exp_in_place(rows * features, y);
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * features;
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= features; i += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] += yr[i + j];
    for (int j = 0; i < features; ++i, ++j) acc[j] += yr[i];
    ArrayMap(yr, features) *= 1.0f / combine_lanes(acc);
  }
}

// Softmax's Jacobian-vector product per row: dx += y * (dy - sum(dy * y)).
void softmax_backward_general(int64_t rows, int64_t features, const float* y, const float* dy,
                              float* dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * features;
    const float dot = dot_fixed(dy + r * features, yr, features);
    ArrayMap(dx + r * features, features) +=
        ConstArrayMap(yr, features) * (ConstArrayMap(dy + r * features, features) - dot);
  }
}

void activation_forward(const Activation& a, int64_t rows, int64_t features, const float* x,
                        float* y) {
  const int64_t size = rows * features;
  if (a.kind == Act::kSoftmax) {
    softmax_forward(rows, features, x, y);
  } else if (transcendental_forward(a.kind)) {
    exact_blocks(size, {x, nullptr, nullptr, nullptr}, y,
                 [&](int64_t len, const float* const(&p)[4], float* out) {
                   forward_flat(a, len, p[0], out);
                 });
  } else {
    forward_flat(a, size, x, y);
  }
}

// Softmax's Jacobian-vector product per row: dx += y * (dy - sum(dy * y)); every other kind
// element-wise (backward_flat), the transcendental ones through exact_blocks() as in forward.
void activation_backward(const Activation& a, int64_t rows, int64_t features, const float* x,
                         const float* y, const float* dy, float* dx) {
  const int64_t size = rows * features;
  if (a.kind == Act::kSoftmax) {
    softmax_backward(rows, features, y, dy, dx);
  } else if (transcendental_backward(a.kind)) {
    exact_blocks(size, {x, y, dy, dx}, dx, [&](int64_t len, const float* const(&p)[4], float* out) {
      backward_flat(a, len, p[0], p[1], p[2], out);
    });
  } else {
    backward_flat(a, size, x, y, dy, dx);
  }
}

// One pass instead of two over a layer's whole output gradient: m7's two ReLU convolutions
// zeroed 3.8 MB of pre-activation gradient per 16-image piece before adding into it.
void activation_backward_overwrite(const Activation& a, int64_t rows, int64_t features,
                                   const float* x, const float* y, const float* dy, float* dx) {
  const int64_t size = rows * features;
  if (a.kind != Act::kRelu) {
    std::fill_n(dx, size, 0.0f);
    activation_backward(a, rows, features, x, y, dy, dx);
    return;
  }
  const Activation r = a;  // as in backward_flat
  for (int64_t i = 0; i < size; ++i) dx[i] = relu_slope(r, x[i]) * dy[i];
}

bool activation_backward_from_y(const Activation& a) {
  switch (a.kind) {
    case Act::kLinear:
    case Act::kSigmoid:
    case Act::kTanh:
    case Act::kSoftmax:
    case Act::kExponential:
      return true;
    case Act::kRelu:
      return a.alpha == 0.0f && a.threshold == 0.0f;
    default:
      return false;
  }
}

}  // namespace nnfleet
