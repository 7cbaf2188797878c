// The vectorized sigmoid and tanh against their naive twins (std::exp / std::tanh in double) over
// a dense sweep of the float line and its extremes; and that a result depends only on its input:
// not on the buffer's length, offset (alignment) or the element's position, nor on running in
// place.
#include "kernels/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace nnfleet {
namespace {

using Kernel = void (*)(int64_t, const float*, float*);

struct Pair {
  const char* name;
  Kernel fast, ref;
};
const Pair kPairs[] = {{"sigmoid", sigmoid_forward, sigmoid_forward_ref},
                       {"tanh", tanh_forward, tanh_forward_ref}};

// Inputs: every 1/64 on [-100, 100], powers of two from 2^-126 to 2^7 with both signs, the
// neighbourhoods of the clamps and of tanh's switch at 0.625, and random values.
std::vector<float> sweep() {
  std::vector<float> v;
  for (int k = -6400; k <= 6400; ++k) v.push_back(static_cast<float>(k) / 64.0f);
  for (int e = -126; e <= 7; ++e) {
    v.push_back(std::ldexp(1.0f, e));
    v.push_back(-std::ldexp(1.0f, e));
  }
  for (float c : {88.0f, 87.7f, 87.3f, 44.0f, 0.625f, 1e-7f, 1e-30f}) {
    for (float x = c; x < c * 1.001f; x = std::nextafter(x, 100.0f)) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (float x : testing::random_floats(4000, 11, -20.0f, 20.0f)) v.push_back(x);
  return v;
}

TEST(VecMath, MatchesReferenceWithinFourUlp) {
  const std::vector<float> x = sweep();
  for (const Pair& p : kPairs) {
    std::vector<float> got(x.size()), want(x.size());
    p.fast(static_cast<int64_t>(x.size()), x.data(), got.data());
    p.ref(static_cast<int64_t>(x.size()), x.data(), want.data());
    // 4 ulp of the result, or of the smallest normal float for results below it.
    testing::expect_near_all(got, want, 4.0 * std::numeric_limits<float>::min(),
                             4.0 * std::numeric_limits<float>::epsilon(), p.name);
  }
}

TEST(VecMath, ExtremesSaturateAndNanStaysNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {inf, -inf, 1e30f, -1e30f, 89.0f, -89.0f, nan, -nan, 0.0f, -0.0f};
  std::vector<float> s(x.size()), t(x.size());
  sigmoid_forward(static_cast<int64_t>(x.size()), x.data(), s.data());
  tanh_forward(static_cast<int64_t>(x.size()), x.data(), t.data());
  // Below -88 the exponent is clamped: sigmoid stays at sigmoid(-88) = 6.05e-39.
  const std::vector<float> s_want = {1.0f, 6.0546e-39f, 1.0f, 6.0546e-39f, 1.0f, 6.0546e-39f};
  for (size_t i = 0; i < s_want.size(); ++i)
    EXPECT_NEAR(s[i], s_want[i], 1e-43) << "sigmoid(" << x[i] << ")";
  const std::vector<float> t_want = {1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f};
  for (size_t i = 0; i < t_want.size(); ++i) EXPECT_EQ(t[i], t_want[i]) << "tanh(" << x[i] << ")";
  for (size_t i = 6; i < 8; ++i) {
    EXPECT_TRUE(std::isnan(s[i])) << "sigmoid(nan) at " << i;
    EXPECT_TRUE(std::isnan(t[i])) << "tanh(nan) at " << i;
  }
  EXPECT_EQ(s[8], 0.5f);
  EXPECT_EQ(s[9], 0.5f);
  EXPECT_EQ(t[8], 0.0f);
  EXPECT_TRUE(std::signbit(t[9])) << "tanh(-0) keeps the sign";
}

// Each slice x[off, off + len) is computed alone, at offsets 0..16 into a fresh buffer, and must
// equal the same elements of one run over the whole array bit for bit; in place too.
TEST(VecMath, ResultDependsOnlyOnTheInput) {
  const std::vector<float> x = testing::random_floats(64, 5, -9.0f, 9.0f);
  for (const Pair& p : kPairs) {
    std::vector<float> whole(x.size());
    p.fast(static_cast<int64_t>(x.size()), x.data(), whole.data());
    for (int off = 0; off <= 16; ++off)
      for (int len = 0; len <= 27; ++len) {
        std::vector<float> in(static_cast<size_t>(off + len) + 1), out(in.size(), 0.25f);
        std::memcpy(in.data() + off, x.data() + off, sizeof(float) * len);
        p.fast(len, in.data() + off, out.data() + off);
        p.fast(len, in.data() + off, in.data() + off);  // in place
        for (int i = 0; i < len; ++i) {
          ASSERT_EQ(out[off + i], whole[off + i]) << p.name << " off " << off << " len " << len;
          ASSERT_EQ(in[off + i], whole[off + i]) << p.name << " in place, off " << off;
        }
        EXPECT_EQ(out[off + len], 0.25f) << p.name << " wrote past the end";
      }
  }
}

}  // namespace
}  // namespace nnfleet
