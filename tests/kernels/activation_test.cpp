// Tests for the activation kernels: every kind's forward against its Keras 3 formula evaluated in
// double, backward against central differences of that formula, accumulation into dx, in-place
// forward, numerically extreme inputs, and the TensorFlow convention at kinks.
#include "kernels/activation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace nnfleet {
namespace {

using testing::random_floats;

// The Keras 3 definition of each element-wise kind, in double.
double act_ref(const Activation& a, double x) {
  const double alpha = a.alpha;
  switch (a.kind) {
    case Act::kLinear:
      return x;
    case Act::kRelu:
      if (x >= a.max_value) return a.max_value;
      if (x >= a.threshold) return x;
      return alpha * (x - a.threshold);
    case Act::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Act::kTanh:
      return std::tanh(x);
    case Act::kElu:
      return x > 0 ? x : alpha * (std::exp(x) - 1.0);
    case Act::kSelu:
      return 1.05070098 * (x > 0 ? x : 1.67326324 * (std::exp(x) - 1.0));
    case Act::kSoftplus:
      return std::log1p(std::exp(x));
    case Act::kSoftsign:
      return x / (1.0 + std::abs(x));
    case Act::kSwish:
      return x / (1.0 + std::exp(-x));
    case Act::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Act::kGeluTanh:
      return 0.5 * x *
             (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case Act::kLeakyRelu:
      return x >= 0 ? x : alpha * x;
    case Act::kHardSigmoid:
      return std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
    case Act::kExponential:
      return std::exp(x);
    case Act::kSoftmax:
      break;
  }
  return NAN;
}

struct Named {
  std::string name;
  Activation act;
  std::vector<double> kinks;  // points where the derivative jumps; samples stay away from them
};

std::vector<Named> elementwise_kinds() {
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {"linear", {Act::kLinear}, {}},
      {"relu", {Act::kRelu}, {0.0}},
      {"relu_alpha_max_threshold", {Act::kRelu, 0.1f, 2.5f, 0.5f}, {0.5, 2.5}},
      {"relu6", {Act::kRelu, 0.0f, 6.0f, 0.0f}, {0.0, 6.0}},
      {"relu_negative_threshold", {Act::kRelu, 0.3f, inf, -1.0f}, {-1.0}},
      {"sigmoid", {Act::kSigmoid}, {}},
      {"tanh", {Act::kTanh}, {}},
      {"elu", {Act::kElu, 1.0f}, {0.0}},
      {"elu_alpha", {Act::kElu, 0.5f}, {0.0}},
      {"selu", {Act::kSelu}, {0.0}},
      {"softplus", {Act::kSoftplus}, {}},
      {"softsign", {Act::kSoftsign}, {0.0}},
      {"swish", {Act::kSwish}, {}},
      {"gelu", {Act::kGelu}, {}},
      {"gelu_tanh", {Act::kGeluTanh}, {}},
      {"leaky_relu", {Act::kLeakyRelu, 0.2f}, {0.0}},
      {"hard_sigmoid", {Act::kHardSigmoid}, {-3.0, 3.0}},
      {"exponential", {Act::kExponential}, {}},
  };
}

// Samples in [-7, 7] (to reach the saturated parts) at least 1e-2 away from every kink.
std::vector<float> samples(const Named& k, size_t n, uint32_t seed) {
  auto x = random_floats(n, seed, -7.0f, 7.0f);
  for (float& v : x) {
    for (double kink : k.kinks) {
      if (std::abs(v - kink) < 1e-2) v = static_cast<float>(kink + 0.05);
    }
  }
  return x;
}

TEST(Activation, ForwardMatchesKerasFormulaForEveryKind) {
  for (const Named& k : elementwise_kinds()) {
    const int rows = 7, features = 33;  // odd sizes: vector remainders get exercised
    const auto x = samples(k, rows * features, 1);
    std::vector<float> y(x.size());
    activation_forward(k.act, rows, features, x.data(), y.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = act_ref(k.act, x[i]);
      ASSERT_NEAR(y[i], want, 2e-6 + 2e-6 * std::abs(want)) << k.name << " at x=" << x[i];
    }
  }
}

TEST(Activation, BackwardMatchesNumericalGradientAndAccumulates) {
  for (const Named& k : elementwise_kinds()) {
    const int rows = 3, features = 37;
    const auto x = samples(k, rows * features, 2);
    const auto dy = random_floats(x.size(), 3);
    std::vector<float> y(x.size());
    activation_forward(k.act, rows, features, x.data(), y.data());
    const auto prefill = random_floats(x.size(), 4);
    std::vector<float> dx = prefill;
    activation_backward(k.act, rows, features, x.data(), y.data(), dy.data(), dx.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double h = 1e-5;
      const double slope = (act_ref(k.act, x[i] + h) - act_ref(k.act, x[i] - h)) / (2 * h);
      const double want = prefill[i] + slope * dy[i];
      ASSERT_NEAR(dx[i], want, 1e-5 + 1e-5 * std::abs(slope * dy[i])) << k.name << " at x=" << x[i];
    }
  }
}

TEST(Activation, ForwardInPlaceMatchesOutOfPlace) {
  for (const Named& k : elementwise_kinds()) {
    const auto x = samples(k, 300, 5);
    std::vector<float> y(x.size()), inplace = x;
    activation_forward(k.act, 10, 30, x.data(), y.data());
    activation_forward(k.act, 10, 30, inplace.data(), inplace.data());
    EXPECT_EQ(inplace, y) << k.name;
  }
  const auto x = random_floats(40, 6);
  std::vector<float> y(x.size()), inplace = x;
  activation_forward({Act::kSoftmax}, 4, 10, x.data(), y.data());
  activation_forward({Act::kSoftmax}, 4, 10, inplace.data(), inplace.data());
  EXPECT_EQ(inplace, y) << "softmax";
}

// Results must not depend on where a buffer starts: each kind (softmax included), forward and
// backward, computed at every float offset 0..16 of an over-allocated buffer and at odd sizes,
// must equal the offset-0 result bit for bit. Eigen's unaligned prologue used the scalar exp,
// which differs from the packet exp in the last bit (issue 10: red on AVX2 machines).
TEST(Activation, ResultsDoNotDependOnBufferAlignment) {
  std::vector<Named> kinds = elementwise_kinds();
  kinds.push_back({"softmax", {Act::kSoftmax}, {}});
  for (const Named& k : kinds) {
    for (const int64_t features : {1, 7, 37, 300}) {
      const int64_t rows = 3, n = rows * features;
      const auto x = random_floats(static_cast<size_t>(n), 11, -4.0f, 4.0f);
      const auto dy = random_floats(static_cast<size_t>(n), 12);
      std::vector<float> y0, dx0;
      for (int64_t off = 0; off <= 16; ++off) {
        std::vector<float> bx(n + off), by(n + off), bdy(n + off), bdx(n + off, 0.25f);
        std::copy(x.begin(), x.end(), bx.begin() + off);
        std::copy(dy.begin(), dy.end(), bdy.begin() + off);
        activation_forward(k.act, rows, features, bx.data() + off, by.data() + off);
        activation_backward(k.act, rows, features, bx.data() + off, by.data() + off,
                            bdy.data() + off, bdx.data() + off);
        std::vector<float> y(by.begin() + off, by.end()), dx(bdx.begin() + off, bdx.end());
        if (off == 0) {
          y0 = y;
          dx0 = dx;
          continue;
        }
        ASSERT_EQ(y, y0) << k.name << " forward, features " << features << ", offset " << off;
        ASSERT_EQ(dx, dx0) << k.name << " backward, features " << features << ", offset " << off;
      }
    }
  }
}

// Where activation_backward_from_y holds, differentiating from y (x replaced by y) must give the
// exact same dx, including at the kinks (x = 0, x = max_value); where it does not, the kinds must
// really need x (relu with a slope or threshold). Softmax is covered by its own y-only formula.
TEST(Activation, BackwardFromYEqualsBackwardFromXWhereClaimed) {
  int claimed = 0;
  for (const Named& k : elementwise_kinds()) {
    if (!activation_backward_from_y(k.act)) continue;
    ++claimed;
    auto x = samples(k, 300, 7);
    for (size_t i = 0; i < k.kinks.size() && i < x.size(); ++i)
      x[i] = static_cast<float>(k.kinks[i]);
    x.push_back(-3.0f);
    std::vector<float> y(x.size());
    activation_forward(k.act, 1, static_cast<int64_t>(x.size()), x.data(), y.data());
    const auto dy = random_floats(x.size(), 8);
    std::vector<float> from_x(x.size(), 0.5f), from_y = from_x;
    activation_backward(k.act, 1, static_cast<int64_t>(x.size()), x.data(), y.data(), dy.data(),
                        from_x.data());
    activation_backward(k.act, 1, static_cast<int64_t>(x.size()), y.data(), y.data(), dy.data(),
                        from_y.data());
    EXPECT_EQ(from_y, from_x) << k.name;
  }
  EXPECT_EQ(claimed, 6);  // linear, relu, relu6, sigmoid, tanh, exponential
  EXPECT_TRUE(activation_backward_from_y({Act::kSoftmax}));
  EXPECT_FALSE(activation_backward_from_y({Act::kRelu, 0.1f}));
  EXPECT_FALSE(activation_backward_from_y({Act::kRelu, 0.0f, 6.0f, 0.5f}));
  EXPECT_FALSE(activation_backward_from_y({Act::kGelu}));
}

// The overwriting form (a fused layer's pre-activation gradient, with no zeroing pass) against
// activation_backward onto zeros, for every kind, kinks included: equal values (0.0f == -0.0f;
// a product with a zero slope may carry the other sign) over a buffer of garbage.
TEST(Activation, BackwardOverwriteEqualsBackwardOntoZeros) {
  for (const Named& k : elementwise_kinds()) {
    auto x = samples(k, 301, 9);
    for (size_t i = 0; i < k.kinks.size(); ++i) x[i] = static_cast<float>(k.kinks[i]);
    std::vector<float> y(x.size());
    activation_forward(k.act, 7, 43, x.data(), y.data());
    const auto dy = random_floats(x.size(), 10);
    std::vector<float> added(x.size(), 0.0f), written(x.size(), std::nanf(""));
    activation_backward(k.act, 7, 43, x.data(), y.data(), dy.data(), added.data());
    activation_backward_overwrite(k.act, 7, 43, x.data(), y.data(), dy.data(), written.data());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(written[i], added[i]) << k.name << " at x=" << x[i];
  }
}

TEST(Activation, StaysFiniteAndSaturatesOnExtremeInputs) {
  const std::vector<float> x = {-1000.0f, -100.0f, -30.0f, 30.0f, 100.0f, 1000.0f};
  std::vector<float> y(x.size());
  activation_forward({Act::kSigmoid}, 1, 6, x.data(), y.data());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[5], 1.0f);
  activation_forward({Act::kSoftplus}, 1, 6, x.data(), y.data());
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[4], 100.0f);
  EXPECT_FLOAT_EQ(y[5], 1000.0f);
  for (Act kind : {Act::kTanh, Act::kSwish, Act::kGelu, Act::kGeluTanh, Act::kElu, Act::kSelu,
                   Act::kSoftsign, Act::kHardSigmoid}) {
    activation_forward({kind, 1.0f}, 1, 6, x.data(), y.data());
    for (float v : y) EXPECT_TRUE(std::isfinite(v)) << static_cast<int>(kind);
  }
}

TEST(Activation, KinkDerivativesFollowTensorFlow) {
  const std::vector<float> x = {0.0f}, dy = {1.0f};
  std::vector<float> y(1), dx(1);
  auto slope = [&](const Activation& a) {
    dx[0] = 0.0f;
    activation_forward(a, 1, 1, x.data(), y.data());
    activation_backward(a, 1, 1, x.data(), y.data(), dy.data(), dx.data());
    return dx[0];
  };
  EXPECT_EQ(slope({Act::kRelu}), 0.0f);                     // relu'(0) = 0
  EXPECT_FLOAT_EQ(slope({Act::kLeakyRelu, 0.2f}), 0.2f);    // alpha at 0
  EXPECT_EQ(slope({Act::kRelu, 0.0f, 0.0f, -1.0f}), 0.0f);  // at max_value: 0
}

TEST(Softmax, ForwardIsStableAndRowsSumToOne) {
  const std::vector<float> x = {1000.0f, 1001.0f, 1002.0f, -5.0f, 0.0f, 5.0f};
  std::vector<float> y(6);
  activation_forward({Act::kSoftmax}, 2, 3, x.data(), y.data());
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int j = 0; j < 3; ++j) {
      ASSERT_TRUE(std::isfinite(y[r * 3 + j]));
      sum += y[r * 3 + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0);
  EXPECT_NEAR(y[2], 1.0 / (1.0 + e1 + e2), 1e-6);
  EXPECT_NEAR(y[0], e2 / (1.0 + e1 + e2), 1e-6);
}

// Rows of 2 to 16 values take fixed-width forms (a classifier's few classes); they must give the
// general loops' bits exactly, forward (in place too) and backward, on ordinary rows, rows with
// ties, huge and tiny logits, an infinite and a NaN one, at every width up to 17 (the first
// general one) and batch sizes that leave a partial exp block.
TEST(Softmax, FixedWidthRowsMatchTheGeneralLoopsBitForBit) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t features = 1; features <= 17; ++features) {
    for (const int64_t rows : {1, 3, 32}) {
      const int64_t n = rows * features;
      auto x = random_floats(static_cast<size_t>(n), 21 + features, -6.0f, 6.0f);
      if (rows > 1) {
        x[static_cast<size_t>(features)] = 1e30f;  // row 1: a huge logit
        if (features > 1) x[static_cast<size_t>(features) + 1] = x[0];
      }
      if (rows > 2) std::fill_n(x.begin() + 2 * features, features, 0.5f);  // row 2: all tied
      if (rows > 3) {
        x[static_cast<size_t>(3 * features)] = inf;
        x[static_cast<size_t>(4 * features)] = std::numeric_limits<float>::quiet_NaN();
        x[static_cast<size_t>(5 * features)] = -1e30f;
      }
      const auto dy = random_floats(x.size(), 41 + features);
      const auto prefill = random_floats(x.size(), 61 + features);
      std::vector<float> y(x.size()), want_y(x.size()), inplace = x;
      activation_forward({Act::kSoftmax}, rows, features, x.data(), y.data());
      activation_forward({Act::kSoftmax}, rows, features, inplace.data(), inplace.data());
      softmax_forward_general(rows, features, x.data(), want_y.data());
      std::vector<float> dx = prefill, want_dx = prefill;
      activation_backward({Act::kSoftmax}, rows, features, x.data(), y.data(), dy.data(),
                          dx.data());
      softmax_backward_general(rows, features, y.data(), dy.data(), want_dx.data());
      const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
      };
      EXPECT_TRUE(same_bits(y, want_y)) << features << " features, " << rows << " rows";
      EXPECT_TRUE(same_bits(inplace, want_y)) << features << " features in place";
      EXPECT_TRUE(same_bits(dx, want_dx)) << features << " features, backward";
    }
  }
}

TEST(Softmax, BackwardMatchesNumericalGradientAndAccumulates) {
  const int rows = 3, features = 11;
  const auto x = random_floats(rows * features, 7, -3.0f, 3.0f);
  const auto dy = random_floats(x.size(), 8);
  std::vector<float> y(x.size());
  activation_forward({Act::kSoftmax}, rows, features, x.data(), y.data());
  const auto prefill = random_floats(x.size(), 9);
  std::vector<float> dx = prefill;
  activation_backward({Act::kSoftmax}, rows, features, x.data(), y.data(), dy.data(), dx.data());
  // L(x) = sum_j dy_j softmax(x)_j per row, differentiated numerically in double.
  auto row_loss = [&](int r, const std::vector<double>& xr) {
    double mx = -INFINITY, sum = 0, l = 0;
    for (double v : xr) mx = std::max(mx, v);
    for (double v : xr) sum += std::exp(v - mx);
    for (int j = 0; j < features; ++j) l += dy[r * features + j] * std::exp(xr[j] - mx) / sum;
    return l;
  };
  for (int r = 0; r < rows; ++r) {
    std::vector<double> xr(x.begin() + r * features, x.begin() + (r + 1) * features);
    for (int j = 0; j < features; ++j) {
      const double h = 1e-6, saved = xr[j];
      xr[j] = saved + h;
      const double up = row_loss(r, xr);
      xr[j] = saved - h;
      const double down = row_loss(r, xr);
      xr[j] = saved;
      EXPECT_NEAR(dx[r * features + j] - prefill[r * features + j], (up - down) / (2 * h), 1e-5);
    }
  }
}

}  // namespace
}  // namespace nnfleet
