// Conv1D kernels (the Conv2D GEMM path on height-1 images) against the independent 1-D _ref
// over a shape sweep: length 1, odd lengths, batch 1, strides, dilation, valid/same/causal, and
// backward passes that must accumulate onto what dx/dw/db already hold.
#include "kernels/conv1d.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace nnfleet {
namespace {

using testing::expect_near_all;
using testing::random_floats;

const char* padding_name(Padding1d p) {
  return p == Padding1d::kValid ? "valid" : p == Padding1d::kSame ? "same" : "causal";
}

TEST(Conv1dGeometry, CausalPadsDilatedWindowOnTheLeftOnly) {
  ConvGeometry g;
  ASSERT_TRUE(conv1d_geometry(g, 8, 12, 3, 1, 4, Padding1d::kCausal, 96));
  EXPECT_EQ(g.pad_left, 8);
  EXPECT_EQ(g.ow, 8);
  ASSERT_TRUE(conv1d_geometry(g, 7, 1, 2, 2, 1, Padding1d::kCausal, 1));
  EXPECT_EQ(g.ow, 4);  // ceil(7 / 2)
  ASSERT_TRUE(conv1d_geometry(g, 1, 1, 5, 1, 1, Padding1d::kCausal, 1));
  EXPECT_EQ(g.ow, 1);
  EXPECT_FALSE(conv1d_geometry(g, 2, 1, 3, 1, 1, Padding1d::kValid, 1));
  ASSERT_TRUE(conv1d_geometry(g, 10, 1, 3, 1, 1, Padding1d::kValid, 1));
  EXPECT_EQ(g.ow, 8);
  ASSERT_TRUE(conv1d_geometry(g, 10, 1, 4, 1, 1, Padding1d::kSame, 1));
  EXPECT_EQ(g.ow, 10);
  EXPECT_EQ(g.pad_left, 1);  // total 3: the extra zero goes after
}

TEST(Conv1dKernel, ForwardAndBackwardMatchReferenceOverShapeSweep) {
  struct S {
    int n, t, c, k, s, d, f;
  };
  const std::vector<S> sweep = {{1, 1, 1, 1, 1, 1, 1},    {1, 1, 3, 3, 1, 1, 2},
                                {2, 7, 3, 3, 1, 1, 5},    {3, 9, 4, 2, 2, 1, 3},
                                {1, 13, 2, 3, 1, 2, 4},   {2, 8, 12, 3, 1, 4, 16},
                                {4, 60, 4, 3, 1, 1, 64},  {2, 31, 17, 5, 3, 1, 9},
                                {5, 11, 32, 2, 1, 3, 33}, {1, 300, 8, 4, 1, 1, 8}};
  uint32_t seed = 1;
  for (const S& s : sweep)
    for (Padding1d p : {Padding1d::kValid, Padding1d::kSame, Padding1d::kCausal}) {
      ConvGeometry g;
      if (!conv1d_geometry(g, s.t, s.c, s.k, s.s, s.d, p, s.f)) continue;
      const std::string what = "n=" + std::to_string(s.n) + " t=" + std::to_string(s.t) +
                               " c=" + std::to_string(s.c) + " k=" + std::to_string(s.k) +
                               " s=" + std::to_string(s.s) + " d=" + std::to_string(s.d) +
                               " f=" + std::to_string(s.f) + " " + padding_name(p);
      const size_t xs = size_t(s.n) * s.t * s.c, ws = size_t(s.k) * s.c * s.f,
                   ys = size_t(s.n) * g.ow * s.f;
      const auto x = random_floats(xs, seed++), w = random_floats(ws, seed++),
                 b = random_floats(size_t(s.f), seed++), dy = random_floats(ys, seed++);
      std::vector<float> scratch(conv1d_scratch_floats(g, s.n) + 1);
      std::vector<float> y(ys, 9.0f), y_ref(ys, -9.0f);
      conv1d_forward(g, s.n, x.data(), w.data(), b.data(), y.data(), scratch.data());
      conv1d_forward_ref(g, s.n, x.data(), w.data(), b.data(), y_ref.data());
      const double tol = 1e-5 * s.k * s.c;
      expect_near_all(y, y_ref, tol, 1e-5, what + " forward");
      // Backward accumulates: start every gradient at 0.5.
      std::vector<float> dx(xs, 0.5f), dw(ws, 0.5f), db(size_t(s.f), 0.5f);
      std::vector<float> dx_ref = dx, dw_ref = dw, db_ref = db;
      conv1d_backward(g, s.n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(),
                      scratch.data());
      conv1d_backward_ref(g, s.n, x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(),
                          db_ref.data());
      expect_near_all(dx, dx_ref, tol, 1e-5, what + " dx");
      expect_near_all(dw, dw_ref, 1e-5 * s.n * g.ow, 1e-5, what + " dw");
      expect_near_all(db, db_ref, 1e-5 * s.n * g.ow, 1e-5, what + " db");
    }
}

TEST(Conv1dKernel, BackwardWithoutInputGradientStillFillsWeights) {
  ConvGeometry g;
  ASSERT_TRUE(conv1d_geometry(g, 9, 3, 3, 1, 2, Padding1d::kCausal, 4));
  const auto x = random_floats(2 * 9 * 3, 7), w = random_floats(3 * 3 * 4, 8),
             dy = random_floats(2 * 9 * 4, 9);
  std::vector<float> scratch(conv1d_scratch_floats(g, 2) + 1);
  std::vector<float> dw(w.size(), 0.0f), dw_ref(w.size(), 0.0f);
  conv1d_backward(g, 2, x.data(), w.data(), dy.data(), nullptr, dw.data(), nullptr, scratch.data());
  conv1d_backward_ref(g, 2, x.data(), w.data(), dy.data(), nullptr, dw_ref.data(), nullptr);
  expect_near_all(dw, dw_ref, 1e-4, 1e-5, "dw without dx and db");
}

}  // namespace
}  // namespace nnfleet
