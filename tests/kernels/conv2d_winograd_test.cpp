// Tests for the Winograd convolution kernels (F(2x2,3x3) forward, input and kernel gradient;
// F(4x4,3x3) forward and input gradient) against the naive _ref oracle and the direct (GEMM) path
// within 1e-4 of the output's scale on W1/W2's shapes and odd ones (1 channel, 7x7 images, batch
// 1, channels not a multiple of 8, odd output sizes, same and valid padding), bit-for-bit
// independence of buffer alignment and of the batch, and the dispatch through conv2d_forward /
// conv2d_backward.
#include "kernels/conv2d_winograd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/conv2d.h"

namespace nnfleet {
namespace {

using testing::random_floats;

ConvGeometry make_3x3(int h, int w, int c, int f, bool same) {
  ConvGeometry g;
  g.h = h;
  g.w = w;
  g.c = c;
  g.f = f;
  g.kh = g.kw = 3;
  EXPECT_TRUE(conv_geometry(g, same));
  return g;
}

std::string describe(const ConvGeometry& g, int n) {
  return "n=" + std::to_string(n) + " " + std::to_string(g.h) + "x" + std::to_string(g.w) + "x" +
         std::to_string(g.c) + " f=" + std::to_string(g.f) + (g.pad_top == 1 ? " same" : " valid");
}

// |got - want| <= rel * max|want| element-wise: 1e-4 relative to the output's scale (an element
// near zero has no meaningful relative error of its own). Returns the worst ratio seen.
double expect_relative(const std::vector<float>& got, const std::vector<float>& want, double rel,
                       const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (float v : want) scale = std::max(scale, std::abs(static_cast<double>(v)));
  if (scale == 0.0) scale = 1.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]) / scale;
    worst = std::max(worst, err);
    if (err > rel) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i]
                    << " (scale " << scale << ")";
      return worst;
    }
  }
  return worst;
}

std::string format_error(double e) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", e);
  return buf;
}

struct Case {
  int n, h, w, c, f;
  bool same;
};

// W1 m6/m7 and W2's 3x3 layers, then the odd shapes.
const Case kCases[] = {
    {1, 26, 26, 32, 64, false},  // m7's second convolution (W1, W2)
    {3, 13, 13, 16, 32, false},  // m6's second convolution: 11x11, odd tiles cropped
    {1, 28, 28, 1, 32, false},   // m7's first convolution: one input channel
    {1, 7, 7, 1, 1, false},      // 1 channel in and out, 7x7
    {1, 7, 7, 3, 5, true},       // same padding, 7x7
    {2, 9, 6, 13, 11, true},     // channels not a multiple of 8, non-square
    {1, 5, 8, 8, 24, false},     // output 3x6
    {2, 3, 3, 9, 17, false},     // a single output pixel
    {1, 12, 12, 40, 20, true},   // vector and scalar channel tails
};

TEST(Conv2dWinograd, SupportsOnlyStrideOne3x3SameOrValid) {
  EXPECT_TRUE(winograd_supported(make_3x3(8, 8, 4, 4, false)));
  EXPECT_TRUE(winograd_supported(make_3x3(8, 8, 4, 4, true)));
  ConvGeometry g = make_3x3(8, 8, 4, 4, false);
  g.kh = g.kw = 5;
  ASSERT_TRUE(conv_geometry(g, false));
  EXPECT_FALSE(winograd_supported(g));
  g = make_3x3(8, 8, 4, 4, false);
  g.sh = g.sw = 2;
  ASSERT_TRUE(conv_geometry(g, false));
  EXPECT_FALSE(winograd_supported(g));
  g = make_3x3(8, 8, 4, 4, false);
  g.dh = g.dw = 2;
  ASSERT_TRUE(conv_geometry(g, true));
  EXPECT_FALSE(winograd_supported(g));
}

TEST(Conv2dWinograd, ForwardMatchesReferenceAndDirectPath) {
  double worst = 0.0;
  for (const Case& k : kCases) {
    const ConvGeometry g = make_3x3(k.h, k.w, k.c, k.f, k.same);
    const std::string what = describe(g, k.n);
    const auto x = random_floats(size_t(k.n) * g.h * g.w * g.c, 1);
    const auto w = random_floats(size_t(9) * g.c * g.f, 2, -0.3f, 0.3f);
    const auto b = random_floats(g.f, 3);
    const size_t ys = size_t(k.n) * g.oh * g.ow * g.f;
    std::vector<float> scratch(conv2d_winograd_scratch_floats(g));
    std::vector<float> direct_scratch(conv2d_scratch_floats(g, k.n));
    for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> y(ys, 7.0f), ref(ys), direct(ys);
      conv2d_forward_winograd(g, k.n, x.data(), w.data(), bias, y.data(), scratch.data());
      conv2d_forward_ref(g, k.n, x.data(), w.data(), bias, ref.data());
      conv2d_forward_gemm(g, k.n, x.data(), w.data(), bias, direct.data(), direct_scratch.data());
      worst = std::max(worst, expect_relative(y, ref, 1e-4, what + " vs ref"));
      expect_relative(y, direct, 1e-4, what + " vs direct");
    }
  }
  RecordProperty("worst_relative_error", format_error(worst));
  EXPECT_LT(worst, 1e-4);
}

TEST(Conv2dWinograd, ForwardFusesTheActivation) {
  const ConvGeometry g = make_3x3(10, 10, 8, 16, true);
  const int n = 2;
  const auto x = random_floats(size_t(n) * g.h * g.w * g.c, 4);
  const auto w = random_floats(size_t(9) * g.c * g.f, 5);
  const auto b = random_floats(g.f, 6);
  const size_t ys = size_t(n) * g.oh * g.ow * g.f;
  std::vector<float> scratch(conv2d_winograd_scratch_floats(g));
  std::vector<float> z(ys), a(ys), ref(ys);
  const Activation relu{Act::kRelu};
  conv2d_forward_winograd(g, n, x.data(), w.data(), b.data(), z.data(), scratch.data(), &relu,
                          a.data());
  conv2d_forward_ref(g, n, x.data(), w.data(), b.data(), ref.data());
  expect_relative(z, ref, 1e-4, "pre-activation");
  for (float& v : ref) v = std::max(v, 0.0f);
  expect_relative(a, ref, 1e-4, "relu");
}

TEST(Conv2dWinograd, InputGradientAccumulatesAndMatchesReference) {
  for (const Case& k : kCases) {
    const ConvGeometry g = make_3x3(k.h, k.w, k.c, k.f, k.same);
    const std::string what = describe(g, k.n);
    const size_t xs = size_t(k.n) * g.h * g.w * g.c;
    const auto x = random_floats(xs, 1);
    const auto w = random_floats(size_t(9) * g.c * g.f, 2, -0.3f, 0.3f);
    const auto dy = random_floats(size_t(k.n) * g.oh * g.ow * g.f, 3);
    const auto dx0 = random_floats(xs, 4);  // backward accumulates onto what is there
    std::vector<float> scratch(conv2d_winograd_scratch_floats(g));
    std::vector<float> dx = dx0, ref = dx0, dw(size_t(9) * g.c * g.f), db(g.f);
    conv2d_backward_data_winograd(g, k.n, w.data(), dy.data(), dx.data(), scratch.data());
    conv2d_backward_ref(g, k.n, x.data(), w.data(), dy.data(), ref.data(), dw.data(), db.data());
    expect_relative(dx, ref, 1e-4, what + " dx");
  }
}

// A fresh dx (LayerArgs::dx_fresh: stale numbers, here NaN) is written whole, with the bits the
// input gradient adds onto zeros, by both tile sizes and through conv2d_backward; on every case,
// so cropped tiles, channel tails and same padding all write their pixels.
TEST(Conv2dWinograd, FreshInputGradientHasTheBitsOfAddingOntoZeros) {
  for (const Case& k : kCases) {
    const ConvGeometry g = make_3x3(k.h, k.w, k.c, k.f, k.same);
    const size_t xs = size_t(k.n) * g.h * g.w * g.c;
    const auto x = random_floats(xs, 1);
    const auto w = random_floats(size_t(9) * g.c * g.f, 2, -0.3f, 0.3f);
    const auto dy = random_floats(size_t(k.n) * g.oh * g.ow * g.f, 3);
    std::vector<float> scratch(
        std::max(conv2d_winograd_scratch_floats(g), conv2d_scratch_floats(g, k.n)));
    const float stale = std::nanf("");
    for (int variant = 0; variant < 3; ++variant) {
      const std::string what = describe(g, k.n) + " variant " + std::to_string(variant);
      std::vector<float> zeroed(xs, 0.0f), fresh(xs, stale), dw(size_t(9) * g.c * g.f);
      const auto run = [&](std::vector<float>& dx, bool is_fresh) {
        if (variant == 0)
          conv2d_backward_data_winograd(g, k.n, w.data(), dy.data(), dx.data(), scratch.data(),
                                        is_fresh);
        else if (variant == 1)
          conv2d_backward_data_winograd_f4(g, k.n, w.data(), dy.data(), dx.data(), scratch.data(),
                                           is_fresh);
        else
          conv2d_backward(g, k.n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr,
                          scratch.data(), is_fresh);
      };
      run(zeroed, false);
      run(fresh, true);
      EXPECT_EQ(std::memcmp(fresh.data(), zeroed.data(), xs * sizeof(float)), 0) << what;
    }
  }
}

// The kernel gradient's two tile sizes, F(2x2,3x3) and F(4x4,3x3).
using WeightsPass = void (*)(const ConvGeometry&, int, const float*, const float*, float*, float*);
const std::pair<const char*, WeightsPass> kWeightsPasses[] = {
    {"F(2x2)", conv2d_backward_weights_winograd}, {"F(4x4)", conv2d_backward_weights_winograd_f4}};

// dw accumulates; compared with the oracle on every case and with the GEMM path (what
// conv2d_backward ran before) on those and on W1's m7 at its training batch of 32, within 1e-4;
// returns the worst relative error.
double kernel_gradient_error(const std::vector<Case>& cases, const std::string& name,
                             WeightsPass pass) {
  double worst = 0.0;
  for (const Case& k : cases) {
    const ConvGeometry g = make_3x3(k.h, k.w, k.c, k.f, k.same);
    const std::string what = describe(g, k.n) + " " + name;
    const size_t ws = size_t(9) * g.c * g.f;
    const auto x = random_floats(size_t(k.n) * g.h * g.w * g.c, 1);
    const auto w = random_floats(ws, 2, -0.3f, 0.3f);
    const auto dy = random_floats(size_t(k.n) * g.oh * g.ow * g.f, 3);
    const auto dw0 = random_floats(ws, 4);
    std::vector<float> scratch(conv2d_winograd_scratch_floats(g));
    std::vector<float> direct_scratch(conv2d_scratch_floats(g, k.n));
    std::vector<float> dw = dw0, direct = dw0;
    pass(g, k.n, x.data(), dy.data(), dw.data(), scratch.data());
    conv2d_backward_gemm(g, k.n, x.data(), w.data(), dy.data(), nullptr, direct.data(), nullptr,
                         direct_scratch.data());
    worst = std::max(worst, expect_relative(dw, direct, 1e-4, what + " dw vs direct"));
    if (k.n > 3) continue;  // the oracle is slow at W1's batch
    std::vector<float> ref = dw0, db(g.f);
    conv2d_backward_ref(g, k.n, x.data(), w.data(), dy.data(), nullptr, ref.data(), db.data());
    worst = std::max(worst, expect_relative(dw, ref, 1e-4, what + " dw vs ref"));
  }
  return worst;
}

TEST(Conv2dWinograd, KernelGradientAccumulatesAndMatchesReferenceAndDirectPath) {
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({32, 26, 26, 32, 64, false});  // m7's second convolution, W1's batch
  for (const auto& [name, pass] : kWeightsPasses) {
    const double worst = kernel_gradient_error(cases, name, pass);
    RecordProperty(std::string("worst_relative_error ") + name, format_error(worst));
    std::printf("kernel gradient %s worst relative error %.3g\n", name, worst);
    EXPECT_LT(worst, 1e-4) << name;
  }
}

// The kernel gradient of a batch sums its images in order: the same bits at any buffer
// alignment and on every run, and within rounding of the batch computed in two calls (the
// kernel transform is applied once per call, so a split batch is not bit-identical; the GEMM path
// it replaces is not either, its chunks of rows depend on the batch size).
void expect_kernel_gradient_deterministic(const Case& k, const std::string& name,
                                          WeightsPass pass) {
  const ConvGeometry g = make_3x3(k.h, k.w, k.c, k.f, k.same);
  const std::string what = describe(g, 3) + " " + name;
  const int n = 3;
  const size_t xs = size_t(n) * g.h * g.w * g.c, ys = size_t(n) * g.oh * g.ow * g.f;
  const size_t ws = size_t(9) * g.c * g.f;
  const auto x = random_floats(xs, 11), dy = random_floats(ys, 12);
  const size_t ss = conv2d_winograd_scratch_floats(g);
  std::vector<float> buf;
  testing::expect_alignment_independent(
      {x, dy}, {ws},
      [&](const auto& i, const auto& o) {
        buf.assign(ss + 16, 0.0f);
        float* sc = buf.data() + reinterpret_cast<uintptr_t>(i[0]) / sizeof(float) % 16;
        pass(g, n, i[0], i[1], o[0], sc);
      },
      "kernel gradient " + what);
  std::vector<float> scratch(ss, 3.0f), once(ws, 0.0f), again(ws, 0.0f), split(ws, 0.0f);
  pass(g, n, x.data(), dy.data(), once.data(), scratch.data());
  pass(g, n, x.data(), dy.data(), again.data(), scratch.data());
  EXPECT_EQ(once, again) << what;
  pass(g, 2, x.data(), dy.data(), split.data(), scratch.data());
  pass(g, 1, x.data() + 2 * xs / n, dy.data() + 2 * ys / n, split.data(), scratch.data());
  expect_relative(split, once, 1e-5, what + " split batch");
}

TEST(Conv2dWinograd, KernelGradientIsDeterministicAndAlignmentIndependent) {
  for (const auto& [name, pass] : kWeightsPasses)
    for (const Case& k : {kCases[1], kCases[5], kCases[8]})
      expect_kernel_gradient_deterministic(k, name, pass);
}

// F(4x4,3x3), forward and input gradient, on the same cases and W1's m7 at batch 32: within 1e-4
// of the output's scale against the oracle and the GEMM path (its transforms' coefficients reach
// 8 and 1/24, so its errors are some 20x those of F(2x2,3x3)).
TEST(Conv2dWinograd, F4MatchesReferenceAndDirectPath) {
  std::vector<Case> cases(std::begin(kCases), std::end(kCases));
  cases.push_back({32, 26, 26, 32, 64, false});
  double worst_y = 0.0, worst_dx = 0.0;
  // Inputs of either sign, and non-negative ones as a ReLU before the layer gives.
  for (const bool post_relu : {false, true}) {
    for (const Case& k : cases) {
      const ConvGeometry g = make_3x3(k.h, k.w, k.c, k.f, k.same);
      const std::string what = describe(g, k.n) + " F(4x4)" + (post_relu ? " x >= 0" : "");
      const size_t xs = size_t(k.n) * g.h * g.w * g.c, ys = size_t(k.n) * g.oh * g.ow * g.f;
      const auto x = random_floats(xs, 1, post_relu ? 0.0f : -1.0f, 1.0f);
      const auto w = random_floats(size_t(9) * g.c * g.f, 2, -0.3f, 0.3f);
      const auto b = random_floats(g.f, 3), dy = random_floats(ys, 4), dx0 = random_floats(xs, 5);
      std::vector<float> scratch(conv2d_winograd_scratch_floats(g));
      std::vector<float> direct_scratch(conv2d_scratch_floats(g, k.n));
      std::vector<float> y(ys, 7.0f), y_direct(ys), dx = dx0, dx_direct = dx0;
      std::vector<float> dw(size_t(9) * g.c * g.f);
      conv2d_forward_winograd_f4(g, k.n, x.data(), w.data(), b.data(), y.data(), scratch.data());
      conv2d_forward_gemm(g, k.n, x.data(), w.data(), b.data(), y_direct.data(),
                          direct_scratch.data());
      worst_y = std::max(worst_y, expect_relative(y, y_direct, 1e-4, what + " y vs direct"));
      conv2d_backward_data_winograd_f4(g, k.n, w.data(), dy.data(), dx.data(), scratch.data());
      conv2d_backward_gemm(g, k.n, x.data(), w.data(), dy.data(), dx_direct.data(), dw.data(),
                           nullptr, direct_scratch.data());
      worst_dx = std::max(worst_dx, expect_relative(dx, dx_direct, 1e-4, what + " dx vs direct"));
      if (k.n > 3) continue;  // the oracle is slow at W1's batch
      std::vector<float> ref(ys), dx_ref = dx0, db(g.f);
      conv2d_forward_ref(g, k.n, x.data(), w.data(), b.data(), ref.data());
      worst_y = std::max(worst_y, expect_relative(y, ref, 1e-4, what + " y vs ref"));
      conv2d_backward_ref(g, k.n, x.data(), w.data(), dy.data(), dx_ref.data(), dw.data(),
                          db.data());
      worst_dx = std::max(worst_dx, expect_relative(dx, dx_ref, 1e-4, what + " dx vs ref"));
    }
  }
  RecordProperty("worst_relative_error_forward", format_error(worst_y));
  RecordProperty("worst_relative_error_input_gradient", format_error(worst_dx));
  std::printf("F(4x4) worst relative error: forward %.3g, input gradient %.3g\n", worst_y,
              worst_dx);
}

// The same bits wherever the buffers (scratch included) start, and whatever batch an image is in.
TEST(Conv2dWinograd, ResultsDoNotDependOnAlignmentOrBatch) {
  for (const Case& k : {kCases[1], kCases[5], kCases[8]}) {
    const ConvGeometry g = make_3x3(k.h, k.w, k.c, k.f, k.same);
    const std::string what = describe(g, k.n);
    const int n = 3;
    const size_t xs = size_t(n) * g.h * g.w * g.c, ys = size_t(n) * g.oh * g.ow * g.f;
    const auto x = random_floats(xs, 7), w = random_floats(size_t(9) * g.c * g.f, 8),
               b = random_floats(g.f, 9), dy = random_floats(ys, 10);
    const size_t ss = conv2d_winograd_scratch_floats(g);
    // Scratch is offset by the same number of floats as the inputs.
    auto offset_scratch = [ss](const float* p, std::vector<float>& buf) {
      buf.assign(ss + 16, 0.0f);
      return buf.data() + reinterpret_cast<uintptr_t>(p) / sizeof(float) % 16;
    };
    std::vector<float> buf;
    testing::expect_alignment_independent(
        {x, w, b}, {ys},
        [&](const auto& i, const auto& o) {
          conv2d_forward_winograd(g, n, i[0], i[1], i[2], o[0], offset_scratch(i[0], buf));
        },
        "forward " + what);
    testing::expect_alignment_independent(
        {w, dy}, {xs},
        [&](const auto& i, const auto& o) {
          conv2d_backward_data_winograd(g, n, i[0], i[1], o[0], offset_scratch(i[0], buf));
        },
        "input gradient " + what);
    testing::expect_alignment_independent(
        {x, w, b}, {ys},
        [&](const auto& i, const auto& o) {
          conv2d_forward_winograd_f4(g, n, i[0], i[1], i[2], o[0], offset_scratch(i[0], buf));
        },
        "F(4x4) forward " + what);
    // Image 1 of the batch of 3 against image 1 alone.
    std::vector<float> scratch(ss), y(ys), y1(ys / n), dx(xs, 0.0f), dx1(xs / n, 0.0f);
    conv2d_forward_winograd(g, n, x.data(), w.data(), b.data(), y.data(), scratch.data());
    conv2d_forward_winograd(g, 1, x.data() + xs / n, w.data(), b.data(), y1.data(), scratch.data());
    EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y.begin() + ys / n)) << what;
    conv2d_forward_winograd_f4(g, n, x.data(), w.data(), b.data(), y.data(), scratch.data());
    conv2d_forward_winograd_f4(g, 1, x.data() + xs / n, w.data(), b.data(), y1.data(),
                               scratch.data());
    EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y.begin() + ys / n)) << what << " F(4x4)";
    conv2d_backward_data_winograd(g, n, w.data(), dy.data(), dx.data(), scratch.data());
    conv2d_backward_data_winograd(g, 1, w.data(), dy.data() + ys / n, dx1.data(), scratch.data());
    EXPECT_TRUE(std::equal(dx1.begin(), dx1.end(), dx.begin() + xs / n)) << what;
  }
}

// conv2d_forward / conv2d_backward take Winograd on m7's second layer (the same bits as calling it
// directly; all three passes) and keep the direct path for a single input channel.
TEST(Conv2dWinograd, KernelInterfaceDispatchesByChannels) {
  const ConvGeometry m7 = make_3x3(26, 26, 32, 64, false), first = make_3x3(28, 28, 1, 32, false);
  EXPECT_TRUE(conv2d_use_winograd(m7, false));
  EXPECT_TRUE(conv2d_use_winograd(m7, true));
  EXPECT_FALSE(conv2d_use_winograd(first, false));
  EXPECT_FALSE(conv2d_use_winograd(make_3x3(13, 13, 16, 32, false), false));
  EXPECT_FALSE(conv2d_use_winograd(make_3x3(13, 13, 16, 32, false), true));
  const ConvGeometry& g = m7;
  const int n = 2;
  const size_t xs = size_t(n) * g.h * g.w * g.c, ys = size_t(n) * g.oh * g.ow * g.f;
  const auto x = random_floats(xs, 1), w = random_floats(size_t(9) * g.c * g.f, 2),
             b = random_floats(g.f, 3), dy = random_floats(ys, 4);
  std::vector<float> scratch(conv2d_scratch_floats(g, n));
  ASSERT_GE(scratch.size(), conv2d_winograd_scratch_floats(g));
  std::vector<float> y(ys), y_wino(ys), dx(xs, 0.0f), dx_wino(xs, 0.0f), dw(size_t(9) * g.c * g.f);
  conv2d_forward(g, n, x.data(), w.data(), b.data(), y.data(), scratch.data());
  EXPECT_FALSE(conv2d_use_winograd_f4(first, false));
  EXPECT_FALSE(conv2d_use_winograd_f4(first, true));
  // F(4x4,3x3) forward in both builds (kernels_test, and kernels_test_avx2 on any machine); for
  // the input gradient with AVX-512 only.
  EXPECT_TRUE(conv2d_use_winograd_f4(m7, false));
#ifdef __AVX512F__
  EXPECT_TRUE(conv2d_use_winograd_f4(m7, true));
#else
  EXPECT_FALSE(conv2d_use_winograd_f4(m7, true));
#endif
  conv2d_forward_winograd_f4(g, n, x.data(), w.data(), b.data(), y_wino.data(), scratch.data());
  EXPECT_EQ(y, y_wino);
  conv2d_backward(g, n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr,
                  scratch.data());
  if (conv2d_use_winograd_f4(m7, true)) {
    conv2d_backward_data_winograd_f4(g, n, w.data(), dy.data(), dx_wino.data(), scratch.data());
  } else {
    conv2d_backward_data_winograd(g, n, w.data(), dy.data(), dx_wino.data(), scratch.data());
  }
  EXPECT_EQ(dx, dx_wino);
  // The kernel gradient too; the bias gradient still sums dy's rows.
  EXPECT_TRUE(conv2d_use_winograd_weights(m7));
  EXPECT_FALSE(conv2d_use_winograd_weights(first));
  EXPECT_TRUE(conv2d_use_winograd_weights(make_3x3(13, 13, 16, 32, false)));
  EXPECT_FALSE(conv2d_use_winograd_weights(make_3x3(13, 13, 16, 16, false)));
  std::vector<float> dw_wino(dw.size(), 0.0f), db(g.f, 0.0f), db_direct(g.f, 0.0f),
      dw_direct(dw.size(), 0.0f);
  std::fill(dw.begin(), dw.end(), 0.0f);
  conv2d_backward(g, n, x.data(), w.data(), dy.data(), nullptr, dw.data(), db.data(),
                  scratch.data());
  // F(4x4,3x3) where the build takes it for the input gradient (AVX-512).
  EXPECT_EQ(conv2d_use_winograd_f4_weights(m7), conv2d_use_winograd_f4(m7, true));
  EXPECT_FALSE(conv2d_use_winograd_f4_weights(make_3x3(13, 13, 16, 32, false)));
  if (conv2d_use_winograd_f4_weights(m7)) {
    conv2d_backward_weights_winograd_f4(g, n, x.data(), dy.data(), dw_wino.data(), scratch.data());
  } else {
    conv2d_backward_weights_winograd(g, n, x.data(), dy.data(), dw_wino.data(), scratch.data());
  }
  EXPECT_EQ(dw, dw_wino);
  conv2d_backward_gemm(g, n, x.data(), w.data(), dy.data(), nullptr, dw_direct.data(),
                       db_direct.data(), scratch.data());
  EXPECT_EQ(db, db_direct);
}

// m6's second layer: the input gradient stays on the direct path, the kernel gradient takes
// Winograd; conv2d_backward gives all three gradients right.
TEST(Conv2dWinograd, KernelInterfaceMixesWinogradAndDirectGradients) {
  const ConvGeometry g = make_3x3(13, 13, 16, 32, false);
  ASSERT_FALSE(conv2d_use_winograd(g, true));
  ASSERT_TRUE(conv2d_use_winograd_weights(g));
  const int n = 3;
  const size_t xs = size_t(n) * g.h * g.w * g.c, ys = size_t(n) * g.oh * g.ow * g.f;
  const size_t ws = size_t(9) * g.c * g.f;
  const auto x = random_floats(xs, 21), w = random_floats(ws, 22, -0.3f, 0.3f),
             dy = random_floats(ys, 23);
  std::vector<float> scratch(conv2d_scratch_floats(g, n));
  std::vector<float> dx(xs, 0.5f), dw(ws, 0.5f), db(g.f, 0.5f);
  std::vector<float> dx_ref = dx, dw_ref = dw, db_ref = db;
  conv2d_backward(g, n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(),
                  scratch.data());
  conv2d_backward_ref(g, n, x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(),
                      db_ref.data());
  expect_relative(dx, dx_ref, 1e-4, "m6 dx");
  expect_relative(dw, dw_ref, 1e-4, "m6 dw");
  expect_relative(db, db_ref, 1e-4, "m6 db");
}

}  // namespace
}  // namespace nnfleet
