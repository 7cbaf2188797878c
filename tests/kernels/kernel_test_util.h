// Helpers shared by the kernel tests: seeded random buffers and element-wise comparison with a
// tolerance scaled to the reduction length (float accumulation error grows with it).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
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

// Asserts |got - want| <= rtol*|want| + btol*bound element-wise, where bound[i] is the sum of the
// absolute values of the terms that make want[i] (the reference run on absolute values): a sum
// whose terms cancel keeps an error of the size of its terms, not of its result, so a fixed atol
// fails on it once another summation order is used (a 576-term input gradient, terms ~0.25,
// result 0.0138: 1.2e-5 apart under oneDNN's AVX-512 kernel, 1e-7 of its bound).
inline void expect_near_bounded(const std::vector<float>& got, const std::vector<float>& want,
                                const std::vector<float>& bound, double rtol, double btol,
                                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(bound.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!(std::abs(g - w) <= rtol * std::abs(w) + btol * bound[i])) {
      ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w << " (bound "
                    << bound[i] << ")";
      return;
    }
  }
}

// Element-wise absolute values.
inline std::vector<float> absolute(std::vector<float> v) {
  for (float& f : v) f = std::abs(f);
  return v;
}

// Runs `run(in, out)` with every input and output buffer starting `off` floats into a larger
// allocation, for off = 0..16, and asserts the outputs equal the off = 0 outputs bit for bit:
// results must not depend on alignment (issue 10). Outputs start as 0.25 so accumulating
// kernels are covered too.
inline void expect_alignment_independent(
    const std::vector<std::vector<float>>& inputs, const std::vector<size_t>& out_sizes,
    const std::function<void(const std::vector<const float*>&, const std::vector<float*>&)>& run,
    const std::string& what) {
  std::vector<std::vector<float>> first;
  for (size_t off = 0; off <= 16; ++off) {
    std::vector<std::vector<float>> in, out;
    std::vector<const float*> ip;
    std::vector<float*> op;
    for (const auto& v : inputs) {
      in.emplace_back(v.size() + off, 0.0f);
      std::copy(v.begin(), v.end(), in.back().begin() + static_cast<std::ptrdiff_t>(off));
    }
    for (size_t n : out_sizes) out.emplace_back(n + off, 0.25f);
    for (auto& v : in) ip.push_back(v.data() + off);
    for (auto& v : out) op.push_back(v.data() + off);
    run(ip, op);
    std::vector<std::vector<float>> got;
    for (auto& v : out) got.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(off), v.end());
    if (off == 0) {
      first = got;
      continue;
    }
    for (size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(got[k], first[k]) << what << ": output " << k << " differs at offset " << off;
  }
}

}  // namespace nnfleet::testing
