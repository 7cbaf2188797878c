// Helpers shared by the kernel tests: seeded random buffers and element-wise comparison with a
// tolerance scaled to the reduction length (float accumulation error grows with it).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace nnfleet::testing {

// n floats uniform in [lo, hi), reproducible from seed.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Asserts |got - want| <= atol + rtol*|want| element-wise; reports the first mismatch only.
inline void expect_near_all(const std::vector<float>& got, const std::vector<float>& want,
                            double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!(std::abs(g - w) <= atol + rtol * std::abs(w))) {
      ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w;
      return;
    }
  }
}

}  // namespace nnfleet::testing
