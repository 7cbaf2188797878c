// Tests for conv_geometry (Keras/TensorFlow padding arithmetic) and the Conv2D and
// DepthwiseConv2D kernels against their naive _ref twins over shape sweeps: odd sizes, batch 1,
// strides 1-2, dilation, same/valid, several im2col chunks, and accumulating backward passes.
#include "kernels/conv2d.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"

namespace nnfleet {
namespace {

using testing::expect_near_all;
using testing::random_floats;

ConvGeometry make_geometry(int h, int w, int c, int k, int stride, int dilation, int f) {
  ConvGeometry g;
  g.h = h;
  g.w = w;
  g.c = c;
  g.kh = g.kw = k;
  g.sh = g.sw = stride;
  g.dh = g.dw = dilation;
  g.f = f;
  return g;
}

std::string describe(const ConvGeometry& g, int n, bool same) {
  return "n=" + std::to_string(n) + " " + std::to_string(g.h) + "x" + std::to_string(g.w) + "x" +
         std::to_string(g.c) + " k=" + std::to_string(g.kh) + "x" + std::to_string(g.kw) +
         " s=" + std::to_string(g.sh) + "," + std::to_string(g.sw) + " d=" + std::to_string(g.dh) +
         " f=" + std::to_string(g.f) + (same ? " same" : " valid");
}

TEST(ConvGeometry, SamePaddingPutsTheExtraPixelAfter) {
  ConvGeometry g = make_geometry(7, 7, 1, 4, 1, 1, 1);  // total pad 3: 1 before, 2 after
  ASSERT_TRUE(conv_geometry(g, true));
  EXPECT_EQ(g.oh, 7);
  EXPECT_EQ(g.pad_top, 1);
  EXPECT_EQ(g.pad_left, 1);
  g = make_geometry(28, 28, 1, 3, 2, 1, 1);  // out 14, total (13*2+3-28) = 1: 0 before
  ASSERT_TRUE(conv_geometry(g, true));
  EXPECT_EQ(g.oh, 14);
  EXPECT_EQ(g.pad_top, 0);
  g = make_geometry(5, 6, 1, 3, 2, 2, 1);  // dilated extent 5; out 3x3; totals 4 and 3
  ASSERT_TRUE(conv_geometry(g, true));
  EXPECT_EQ(g.oh, 3);
  EXPECT_EQ(g.ow, 3);
  EXPECT_EQ(g.pad_top, 2);
  EXPECT_EQ(g.pad_left, 1);
  g = make_geometry(5, 5, 1, 1, 3, 1, 1);  // stride beyond kernel: negative total clamps to 0
  ASSERT_TRUE(conv_geometry(g, true));
  EXPECT_EQ(g.oh, 2);
  EXPECT_EQ(g.pad_top, 0);
}

TEST(ConvGeometry, ValidPaddingShrinksByTheDilatedKernel) {
  ConvGeometry g = make_geometry(28, 28, 1, 3, 1, 1, 32);
  ASSERT_TRUE(conv_geometry(g, false));
  EXPECT_EQ(g.oh, 26);
  EXPECT_EQ(g.ow, 26);
  EXPECT_EQ(g.pad_top, 0);
  g = make_geometry(28, 27, 1, 3, 2, 2, 1);  // extent 5: (28-5)/2+1 = 12, (27-5)/2+1 = 12
  ASSERT_TRUE(conv_geometry(g, false));
  EXPECT_EQ(g.oh, 12);
  EXPECT_EQ(g.ow, 12);
}

TEST(ConvGeometry, RejectsEmptyOutputAndBadParameters) {
  ConvGeometry g = make_geometry(2, 2, 1, 3, 1, 1, 1);
  EXPECT_FALSE(conv_geometry(g, false));
  g = make_geometry(2, 2, 1, 3, 1, 1, 1);
  EXPECT_TRUE(conv_geometry(g, true));
  g = make_geometry(4, 4, 1, 3, 0, 1, 1);
  EXPECT_FALSE(conv_geometry(g, true));
}

// Calls fn(g, n, same) for every valid geometry of a sweep small enough for the naive oracle.
template <typename Fn>
void for_each_conv(bool depthwise, Fn fn) {
  for (int n : {1, 2}) {
    for (int hw : {1, 3, 7}) {
      for (int c : {1, 3, 8}) {  // 8: KW*C >= 16 takes the row-layout im2col
        for (int k : {1, 2, 3}) {
          for (int stride : {1, 2}) {
            for (int dilation : {1, 2}) {
              for (bool same : {false, true}) {
                for (int f : depthwise ? std::vector<int>{1, 2, 3} : std::vector<int>{1, 7, 33}) {
                  ConvGeometry g =
                      make_geometry(hw, hw + 1, c, k, stride, dilation, depthwise ? c * f : f);
                  if (!conv_geometry(g, same)) continue;
                  fn(g, n, same);
                }
              }
            }
          }
        }
      }
    }
  }
}

void check_conv_forward(const ConvGeometry& g, int n, bool same, bool bias, uint32_t seed) {
  const auto x = random_floats(static_cast<size_t>(n) * g.h * g.w * g.c, seed);
  const auto w = random_floats(static_cast<size_t>(g.kh) * g.kw * g.c * g.f, seed + 1);
  const auto b = random_floats(g.f, seed + 2);
  std::vector<float> y(static_cast<size_t>(n) * g.oh * g.ow * g.f, std::nanf(""));
  std::vector<float> y_ref(y.size());
  std::vector<float> scratch(conv2d_scratch_floats(g, n));
  conv2d_forward(g, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data(), scratch.data());
  conv2d_forward_ref(g, n, x.data(), w.data(), bias ? b.data() : nullptr, y_ref.data());
  expect_near_all(y, y_ref, 1e-5 + 2e-6 * g.kh * g.kw * g.c, 1e-5, describe(g, n, same));
}

void check_conv_backward(const ConvGeometry& g, int n, bool same, bool with_dx, bool with_db,
                         uint32_t seed) {
  const auto x = random_floats(static_cast<size_t>(n) * g.h * g.w * g.c, seed);
  const auto w = random_floats(static_cast<size_t>(g.kh) * g.kw * g.c * g.f, seed + 1);
  const auto dy = random_floats(static_cast<size_t>(n) * g.oh * g.ow * g.f, seed + 2);
  auto dx = random_floats(x.size(), seed + 3), dw = random_floats(w.size(), seed + 4);
  auto db = random_floats(g.f, seed + 5);
  auto dx_ref = dx, dw_ref = dw, db_ref = db;
  std::vector<float> scratch(conv2d_scratch_floats(g, n));
  conv2d_backward(g, n, x.data(), w.data(), dy.data(), with_dx ? dx.data() : nullptr, dw.data(),
                  with_db ? db.data() : nullptr, scratch.data());
  conv2d_backward_ref(g, n, x.data(), w.data(), dy.data(), with_dx ? dx_ref.data() : nullptr,
                      dw_ref.data(), with_db ? db_ref.data() : nullptr);
  const int64_t rows = int64_t{n} * g.oh * g.ow;
  const std::string what = describe(g, n, same);
  expect_near_all(dx, dx_ref, 1e-5 + 2e-6 * g.kh * g.kw * g.f, 1e-5, "dx " + what);
  expect_near_all(dw, dw_ref, 1e-5 + 2e-6 * rows, 1e-5, "dw " + what);
  expect_near_all(db, db_ref, 1e-5 + 2e-6 * rows, 1e-5, "db " + what);
}

TEST(Conv2d, ForwardMatchesRefOverShapeSweep) {
  uint32_t seed = 1;
  for_each_conv(false, [&](const ConvGeometry& g, int n, bool same) {
    check_conv_forward(g, n, same, (seed & 1) != 0, seed);
    seed += 3;
  });
}

TEST(Conv2d, BackwardAccumulatesLikeRefOverShapeSweep) {
  uint32_t seed = 5000;
  for_each_conv(false, [&](const ConvGeometry& g, int n, bool same) {
    check_conv_backward(g, n, same, (seed & 2) == 0, (seed & 4) == 0, seed);
    seed += 7;
  });
}

TEST(Conv2d, MatchesRefOnWorkloadShapesSpanningManyChunks) {
  // W1's conv layers (m6, m7), with batches large enough for several im2col chunks plus a tail.
  struct Case {
    int h, c, f, n;
    bool same;
  };
  const Case cases[] = {
      {28, 1, 32, 10, false}, {26, 32, 64, 2, false}, {13, 16, 32, 4, false}, {12, 8, 16, 7, true}};
  uint32_t seed = 9000;
  for (const Case& cs : cases) {
    ConvGeometry g = make_geometry(cs.h, cs.h, cs.c, 3, 1, 1, cs.f);
    ASSERT_TRUE(conv_geometry(g, cs.same));
    ASSERT_GT(static_cast<size_t>(cs.n) * g.oh * g.ow * g.kh * g.kw * g.c,
              conv2d_scratch_floats(g, cs.n) / 2)
        << "case must span more than one chunk";
    check_conv_forward(g, cs.n, cs.same, true, seed++);
    check_conv_backward(g, cs.n, cs.same, true, true, seed++);
  }
}

TEST(Conv2d, PointwiseConvolutionMatchesRef) {
  uint32_t seed = 9500;
  for (int n : {1, 3}) {
    for (int c : {1, 5, 33}) {
      for (int f : {1, 8, 17}) {
        ConvGeometry g = make_geometry(5, 6, c, 1, 1, 1, f);
        ASSERT_TRUE(conv_geometry(g, true));
        check_conv_forward(g, n, true, true, seed++);
        check_conv_backward(g, n, true, true, true, seed++);
        check_conv_backward(g, n, true, false, false, seed++);
      }
    }
  }
}

// The direct (batch-reduce, no im2col) forward on W1's shapes, with the activation applied block
// by block into a separate buffer and in place, against the oracle followed by the activation.
TEST(Conv2d, DirectForwardWithFusedActivationMatchesRef) {
  uint32_t seed = 9700;
  for (auto [hw, c, f] : {std::tuple{26, 32, 64}, {13, 16, 32}, {9, 8, 5}}) {
    ConvGeometry g = make_geometry(hw, hw, c, 3, 1, 1, f);
    ASSERT_TRUE(conv_geometry(g, false));
    const int n = 2;
    const auto x = random_floats(static_cast<size_t>(n) * g.h * g.w * g.c, seed++);
    const auto w = random_floats(static_cast<size_t>(9) * g.c * g.f, seed++);
    const auto b = random_floats(g.f, seed++);
    std::vector<float> z(static_cast<size_t>(n) * g.oh * g.ow * g.f), y(z.size()), ref(z.size());
    std::vector<float> scratch(conv2d_scratch_floats(g, n));
    const Activation relu{Act::kRelu};
    conv2d_forward(g, n, x.data(), w.data(), b.data(), z.data(), scratch.data(), &relu, y.data());
    conv2d_forward_ref(g, n, x.data(), w.data(), b.data(), ref.data());
    expect_near_all(z, ref, 1e-3, 1e-5, describe(g, n, false) + " z");
    for (float& v : ref) v = std::max(v, 0.0f);
    expect_near_all(y, ref, 1e-3, 1e-5, describe(g, n, false) + " relu(z)");
    conv2d_forward(g, n, x.data(), w.data(), b.data(), z.data(), scratch.data(), &relu, z.data());
    EXPECT_EQ(z, y) << "in place";
  }
}

// The single-channel kernel (a first layer on grey images: expanded input, no im2col) on W1's
// first layers and on widths whose rows end in a partial vector (OW*F not a multiple of 16),
// forward with a fused ReLU and backward accumulating onto non-zero gradients, against the oracle.
TEST(Conv2d, SingleChannelKernelMatchesRef) {
  uint32_t seed = 9800;
  const Activation relu{Act::kRelu};
  for (auto [h, w, k, f] :
       {std::array{28, 28, 3, 8}, std::array{28, 28, 3, 32}, std::array{28, 28, 3, 16},
        std::array{9, 7, 3, 64}, std::array{6, 5, 2, 4}, std::array{7, 9, 5, 2},
        std::array{5, 3, 3, 1}, std::array{11, 13, 3, 8}}) {
    for (int n : {1, 3}) {
      ConvGeometry g = make_geometry(h, w, 1, k, 1, 1, f);
      ASSERT_TRUE(conv_geometry(g, false));
      const std::string what = describe(g, n, false);
      const size_t xs = static_cast<size_t>(n) * g.h * g.w,
                   ys = static_cast<size_t>(n) * g.oh * g.ow * g.f;
      const auto x = random_floats(xs, seed++),
                 wt = random_floats(static_cast<size_t>(k) * k * f, seed++);
      const auto b = random_floats(f, seed++), dy = random_floats(ys, seed++);
      std::vector<float> scratch(conv2d_scratch_floats(g, n));
      std::vector<float> z(ys), a(ys), ref(ys);
      conv2d_forward(g, n, x.data(), wt.data(), b.data(), z.data(), scratch.data(), &relu,
                     a.data());
      conv2d_forward_ref(g, n, x.data(), wt.data(), b.data(), ref.data());
      expect_near_all(z, ref, 1e-4, 1e-5, what + " z");
      for (float& v : ref) v = std::max(v, 0.0f);
      expect_near_all(a, ref, 1e-4, 1e-5, what + " relu(z)");
      auto dw = random_floats(wt.size(), seed++), db = random_floats(b.size(), seed++);
      auto dw_ref = dw, db_ref = db;
      conv2d_backward(g, n, x.data(), wt.data(), dy.data(), nullptr, dw.data(), db.data(),
                      scratch.data());
      conv2d_backward_ref(g, n, x.data(), wt.data(), dy.data(), nullptr, dw_ref.data(),
                          db_ref.data());
      expect_near_all(dw, dw_ref, 1e-4, 1e-5, what + " dw");
      expect_near_all(db, db_ref, 1e-4, 1e-5, what + " db");
    }
  }
}

TEST(Conv2d, ScratchSizedForABatchServesSmallerBatches) {
  ConvGeometry g = make_geometry(26, 26, 32, 3, 1, 1, 64);
  ASSERT_TRUE(conv_geometry(g, false));
  EXPECT_LE(conv2d_scratch_floats(g, 1), conv2d_scratch_floats(g, 32));
  const auto x = random_floats(static_cast<size_t>(g.h) * g.w * g.c, 1);
  const auto w = random_floats(static_cast<size_t>(9) * g.c * g.f, 2);
  std::vector<float> y(static_cast<size_t>(g.oh) * g.ow * g.f), y_ref(y.size());
  std::vector<float> scratch(conv2d_scratch_floats(g, 32));
  conv2d_forward(g, 1, x.data(), w.data(), nullptr, y.data(), scratch.data());
  conv2d_forward_ref(g, 1, x.data(), w.data(), nullptr, y_ref.data());
  expect_near_all(y, y_ref, 1e-3, 1e-5, "batch 1 with batch-32 scratch");
}

TEST(Conv2dRef, BackwardMatchesNumericalGradient) {
  // Anchors the oracle: L = sum(y * r), central differences in double, same padding, stride 2.
  ConvGeometry g = make_geometry(5, 4, 2, 3, 2, 1, 3);
  ASSERT_TRUE(conv_geometry(g, true));
  const int n = 2;
  auto x = random_floats(static_cast<size_t>(n) * g.h * g.w * g.c, 1);
  auto w = random_floats(static_cast<size_t>(9) * g.c * g.f, 2);
  auto b = random_floats(g.f, 3);
  const auto r = random_floats(static_cast<size_t>(n) * g.oh * g.ow * g.f, 4);
  auto loss = [&] {
    std::vector<float> y(r.size());
    conv2d_forward_ref(g, n, x.data(), w.data(), b.data(), y.data());
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
    return l;
  };
  std::vector<float> dx(x.size(), 0.0f), dw(w.size(), 0.0f), db(b.size(), 0.0f);
  conv2d_backward_ref(g, n, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data());
  auto numeric = [&](std::vector<float>& p, size_t i) {
    const float saved = p[i], h = 1e-2f;
    p[i] = saved + h;
    const double up = loss();
    p[i] = saved - h;
    const double down = loss();
    p[i] = saved;
    return (up - down) / (2.0 * h);
  };
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dx[i], numeric(x, i), 1e-4) << "dx " << i;
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(dw[i], numeric(w, i), 1e-4) << "dw " << i;
  for (size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(db[i], numeric(b, i), 1e-4) << "db " << i;
}

TEST(DepthwiseConv2d, ForwardMatchesRefOverShapeSweep) {
  uint32_t seed = 20000;
  for_each_conv(true, [&](const ConvGeometry& g, int n, bool same) {
    const bool bias = (seed & 1) != 0;
    const auto x = random_floats(static_cast<size_t>(n) * g.h * g.w * g.c, seed);
    const auto w = random_floats(static_cast<size_t>(g.kh) * g.kw * g.f, seed + 1);
    const auto b = random_floats(g.f, seed + 2);
    std::vector<float> y(static_cast<size_t>(n) * g.oh * g.ow * g.f, std::nanf(""));
    std::vector<float> y_ref(y.size());
    depthwise_conv2d_forward(g, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
    depthwise_conv2d_forward_ref(g, n, x.data(), w.data(), bias ? b.data() : nullptr, y_ref.data());
    expect_near_all(y, y_ref, 1e-5, 1e-5, describe(g, n, same));
    seed += 3;
  });
}

TEST(DepthwiseConv2d, BackwardAccumulatesLikeRefOverShapeSweep) {
  uint32_t seed = 30000;
  for_each_conv(true, [&](const ConvGeometry& g, int n, bool same) {
    const bool with_dx = (seed & 2) == 0, with_db = (seed & 4) == 0;
    const auto x = random_floats(static_cast<size_t>(n) * g.h * g.w * g.c, seed);
    const auto w = random_floats(static_cast<size_t>(g.kh) * g.kw * g.f, seed + 1);
    const auto dy = random_floats(static_cast<size_t>(n) * g.oh * g.ow * g.f, seed + 2);
    auto dx = random_floats(x.size(), seed + 3), dw = random_floats(w.size(), seed + 4);
    auto db = random_floats(g.f, seed + 5);
    auto dx_ref = dx, dw_ref = dw, db_ref = db;
    depthwise_conv2d_backward(g, n, x.data(), w.data(), dy.data(), with_dx ? dx.data() : nullptr,
                              dw.data(), with_db ? db.data() : nullptr);
    depthwise_conv2d_backward_ref(g, n, x.data(), w.data(), dy.data(),
                                  with_dx ? dx_ref.data() : nullptr, dw_ref.data(),
                                  with_db ? db_ref.data() : nullptr);
    const std::string what = describe(g, n, same);
    expect_near_all(dx, dx_ref, 1e-5, 1e-5, "dx " + what);
    expect_near_all(dw, dw_ref, 1e-4, 1e-5, "dw " + what);
    expect_near_all(db, db_ref, 1e-4, 1e-5, "db " + what);
    seed += 7;
  });
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// The convolution kernels (direct and im2col paths, with a fused activation) and max pooling give
// the same bits wherever their buffers start.
TEST(Conv2d, ResultsDoNotDependOnBufferAlignment) {
  const Activation relu{Act::kRelu}, tanh_act{Act::kTanh};
  for (auto [h, c, k, s, f, same] : {std::array{9, 1, 3, 1, 8, 0}, std::array{8, 3, 3, 2, 5, 1},
                                     std::array{7, 16, 5, 1, 32, 1}}) {
    ConvGeometry g = make_geometry(h, h, c, k, s, 1, f);
    ASSERT_TRUE(conv_geometry(g, same != 0));
    const int n = 2;
    const size_t xs = static_cast<size_t>(n) * g.h * g.w * g.c,
                 ws = static_cast<size_t>(k) * k * c * f,
                 ys = static_cast<size_t>(n) * g.oh * g.ow * g.f;
    const auto x = random_floats(xs, 7), w = random_floats(ws, 8), b = random_floats(f, 9),
               dy = random_floats(ys, 10);
    const std::string what = describe(g, n, same != 0);
    std::vector<float> scratch(conv2d_scratch_floats(g, n));
    for (const Activation* act : {static_cast<const Activation*>(nullptr), &relu, &tanh_act})
      testing::expect_alignment_independent(
          {x, w, b}, {ys, ys},
          [&](const auto& i, const auto& o) {
            conv2d_forward(g, n, i[0], i[1], i[2], o[0], scratch.data(), act, act ? o[1] : nullptr);
          },
          "conv2d_forward " + what);
    testing::expect_alignment_independent(
        {x, w, dy}, {xs, ws, static_cast<size_t>(f)},
        [&](const auto& i, const auto& o) {
          conv2d_backward(g, n, i[0], i[1], i[2], o[0], o[1], o[2], scratch.data());
        },
        "conv2d_backward " + what);
  }
}

}  // namespace
}  // namespace nnfleet
