// The transposed and grouped Conv2D kernels against their naive _ref twins over shape sweeps
// (odd sizes, batch 1-2, strides 1-3, same/valid, channels on both sides of the im2col layout
// switch, several chunks), with accumulating backward passes; and the bilinear resize against
// values worked out by hand from TensorFlow's half-pixel rule, and its backward as the adjoint.
#include "kernels/conv2d_variants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/resize.h"

namespace nnfleet {
namespace {

using testing::expect_near_all;
using testing::random_floats;

ConvGeometry geometry(int h, int w, int c, int k, int stride, int f, bool same) {
  ConvGeometry g;
  g.h = h;
  g.w = w;
  g.c = c;
  g.kh = k;
  g.kw = k + 1 > 3 ? k : k + 1;  // non-square kernels too
  g.sh = stride;
  g.sw = stride == 1 ? 1 : stride - 1 + (k & 1);
  g.f = f;
  if (!conv_geometry(g, same)) g.oh = 0;
  return g;
}

std::string describe(const ConvGeometry& g, int n) {
  return "n=" + std::to_string(n) + " " + std::to_string(g.h) + "x" + std::to_string(g.w) + "x" +
         std::to_string(g.c) + " k=" + std::to_string(g.kh) + "x" + std::to_string(g.kw) +
         " s=" + std::to_string(g.sh) + "x" + std::to_string(g.sw) + " pads " +
         std::to_string(g.pad_top) + "," + std::to_string(g.pad_left) + " f=" + std::to_string(g.f);
}

size_t in_size(const ConvGeometry& g, int n) { return static_cast<size_t>(n) * g.h * g.w * g.c; }
size_t out_size(const ConvGeometry& g, int n) { return static_cast<size_t>(n) * g.oh * g.ow * g.f; }

// Calls fn(g, n) over the sweep; `f_of(c)` lists the output channels for c input channels.
template <typename Fn>
void for_each_geometry(const std::vector<int>& channels, const std::vector<int>& filters, Fn fn) {
  for (int n : {1, 2})
    for (int hw : {1, 4, 7})
      for (int c : channels)
        for (int k : {1, 2, 3})
          for (int stride : {1, 2, 3})
            for (bool same : {false, true})
              for (int f : filters) {
                const ConvGeometry g = geometry(hw, hw + 2, c, k, stride, f, same);
                if (g.oh > 0) fn(g, n);
              }
}

void check_transpose(const ConvGeometry& g, int n, uint32_t seed) {
  // x is the transposed layer's input: g's output [N,OH,OW,F]; y its output [N,H,W,C].
  const auto x = random_floats(out_size(g, n), seed);
  const auto w = random_floats(static_cast<size_t>(g.kh) * g.kw * g.c * g.f, seed + 1);
  const auto b = random_floats(g.c, seed + 2);
  const bool bias = (seed & 1) != 0;
  std::vector<float> scratch(conv2d_transpose_scratch_floats(g, n));
  std::vector<float> y(in_size(g, n), std::nanf("")), y_ref(y.size());
  conv2d_transpose_forward(g, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data(),
                           scratch.data());
  conv2d_transpose_forward_ref(g, n, x.data(), w.data(), bias ? b.data() : nullptr, y_ref.data());
  const std::string what = describe(g, n);
  expect_near_all(y, y_ref, 1e-5 + 2e-6 * g.kh * g.kw * g.f, 1e-5, "y " + what);

  const auto dy = random_floats(y.size(), seed + 3);
  auto dx = random_floats(x.size(), seed + 4), dw = random_floats(w.size(), seed + 5);
  auto db = random_floats(g.c, seed + 6);
  auto dx_ref = dx, dw_ref = dw, db_ref = db;
  const bool with_dx = (seed & 2) == 0, with_db = (seed & 4) == 0;
  conv2d_transpose_backward(g, n, x.data(), w.data(), dy.data(), with_dx ? dx.data() : nullptr,
                            dw.data(), with_db ? db.data() : nullptr, scratch.data());
  conv2d_transpose_backward_ref(g, n, x.data(), w.data(), dy.data(),
                                with_dx ? dx_ref.data() : nullptr, dw_ref.data(),
                                with_db ? db_ref.data() : nullptr);
  expect_near_all(dx, dx_ref, 1e-5 + 2e-6 * g.kh * g.kw * g.c, 1e-5, "dx " + what);
  expect_near_all(dw, dw_ref, 1e-5 + 2e-6 * out_size(g, n), 1e-5, "dw " + what);
  expect_near_all(db, db_ref, 1e-5 + 2e-6 * in_size(g, n), 1e-5, "db " + what);
}

TEST(Conv2dTranspose, ForwardAndBackwardMatchRefOverShapeSweep) {
  uint32_t seed = 1;
  for_each_geometry({1, 3, 8}, {1, 5, 17}, [&](const ConvGeometry& g, int n) {
    check_transpose(g, n, seed);
    seed += 7;
  });
}

TEST(Conv2dTranspose, MatchesRefOverManyChunks) {
  // The denoising autoencoder's layers: 7x7x32 -> 14x14x32 -> 28x28x32, batch 4 (many chunks).
  uint32_t seed = 900;
  for (int out : {14, 28}) {
    ConvGeometry g = geometry(out, out, 32, 3, 2, 32, true);
    g.kw = 3;
    g.sw = 2;
    ASSERT_TRUE(conv_geometry(g, true));
    ASSERT_EQ(g.oh, out / 2);
    check_transpose(g, 4, seed++);
  }
}

void check_grouped(const ConvGeometry& g, int groups, int n, uint32_t seed) {
  const auto x = random_floats(in_size(g, n), seed);
  const auto w = random_floats(static_cast<size_t>(g.kh) * g.kw * (g.c / groups) * g.f, seed + 1);
  const auto b = random_floats(g.f, seed + 2);
  const bool bias = (seed & 1) != 0;
  std::vector<float> scratch(conv2d_grouped_scratch_floats(g, groups, n));
  std::vector<float> y(out_size(g, n), std::nanf("")), y_ref(y.size());
  conv2d_grouped_forward(g, groups, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data(),
                         scratch.data());
  conv2d_grouped_forward_ref(g, groups, n, x.data(), w.data(), bias ? b.data() : nullptr,
                             y_ref.data());
  const std::string what = describe(g, n) + " groups=" + std::to_string(groups);
  expect_near_all(y, y_ref, 1e-5 + 2e-6 * g.kh * g.kw * g.c, 1e-5, "y " + what);

  const auto dy = random_floats(y.size(), seed + 3);
  auto dx = random_floats(x.size(), seed + 4), dw = random_floats(w.size(), seed + 5);
  auto db = random_floats(g.f, seed + 6);
  auto dx_ref = dx, dw_ref = dw, db_ref = db;
  const bool with_dx = (seed & 2) == 0, with_db = (seed & 4) == 0;
  conv2d_grouped_backward(g, groups, n, x.data(), w.data(), dy.data(),
                          with_dx ? dx.data() : nullptr, dw.data(), with_db ? db.data() : nullptr,
                          scratch.data());
  conv2d_grouped_backward_ref(g, groups, n, x.data(), w.data(), dy.data(),
                              with_dx ? dx_ref.data() : nullptr, dw_ref.data(),
                              with_db ? db_ref.data() : nullptr);
  expect_near_all(dx, dx_ref, 1e-5 + 2e-6 * g.kh * g.kw * g.f, 1e-5, "dx " + what);
  expect_near_all(dw, dw_ref, 1e-5 + 2e-6 * out_size(g, n), 1e-5, "dw " + what);
  expect_near_all(db, db_ref, 1e-5 + 2e-6 * out_size(g, n), 1e-5, "db " + what);
}

TEST(Conv2dGrouped, ForwardAndBackwardMatchRefOverShapeSweep) {
  uint32_t seed = 3000;
  for (int groups : {2, 3}) {
    const std::vector<int> channels{groups, 4 * groups}, filters{groups, 3 * groups};
    for_each_geometry(channels, filters, [&](const ConvGeometry& g, int n) {
      check_grouped(g, groups, n, seed);
      seed += 7;
    });
  }
}

TEST(ResizeBilinear, DoublingUsesTensorFlowsHalfPixelWeights) {
  // One row [1, 2, 4] doubled: output x samples input (x + 0.5) / 2 - 0.5 =
  // -0.25, 0.25, 0.75, 1.25, 1.75, 2.25 -> clamped edges, then lerps of 0.25 and 0.75.
  const std::vector<float> x{1, 2, 4};
  std::vector<float> y(2 * 6);
  resize_bilinear_forward(1, 1, 3, 1, 2, 2, x.data(), y.data());
  const std::vector<float> row{1, 1.25f, 1.75f, 2.5f, 3.5f, 4};
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[static_cast<size_t>(r * 6 + i)], row[i]) << i;
}

TEST(ResizeBilinear, BackwardIsTheAdjointOfForward) {
  // <resize(x), dy> == <x, resize^T(dy)> for random x and dy, several factors and channels.
  uint32_t seed = 77;
  for (auto [h, w, c, sh, sw] : {std::tuple{3, 4, 2, 2, 2}, {2, 5, 3, 3, 1}, {1, 1, 1, 2, 3}}) {
    const int n = 2;
    const auto x = random_floats(static_cast<size_t>(n) * h * w * c, seed++);
    const auto dy = random_floats(static_cast<size_t>(n) * h * sh * w * sw * c, seed++);
    std::vector<float> y(dy.size()), dx(x.size(), 0.0f);
    resize_bilinear_forward(n, h, w, c, sh, sw, x.data(), y.data());
    resize_bilinear_backward(n, h, w, c, sh, sw, dy.data(), dx.data());
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < y.size(); ++i) lhs += double{y[i]} * dy[i];
    for (size_t i = 0; i < x.size(); ++i) rhs += double{x[i]} * dx[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::abs(lhs)));
  }
}

}  // namespace
}  // namespace nnfleet
