// The resize and projective-sampling kernels (kernels/resize.h): hand-worked values, naive
// per-pixel oracles (a direct Keys cubic and a box integral in double), and backward as the exact
// adjoint of forward (<A x, g> = <x, A^T g>).
#include "kernels/resize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace nnfleet {
namespace {

std::vector<float> random_vec(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

ResizeGeom geom(int h, int w, int c, int oh, int ow) {
  ResizeGeom g;
  g.h = g.ch = h;
  g.w = g.cw = w;
  g.c = c;
  g.oh = oh;
  g.ow = ow;
  return g;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double{a[i]} * b[i];
  return s;
}

TEST(Resize, AreaHalvingAveragesBlocks) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  std::vector<float> y(4);
  resize_forward(ResizeMethod::kArea, 1, geom(4, 4, 1, 2, 2), x.data(), y.data());
  EXPECT_FLOAT_EQ(y[0], (0 + 1 + 4 + 5) / 4.0f);
  EXPECT_FLOAT_EQ(y[3], (10 + 11 + 14 + 15) / 4.0f);
}

TEST(Resize, NearestUsesTensorFlowsHalfPixelFloor) {
  const std::vector<float> x = {1, 2, 3};
  std::vector<float> y(5);
  resize_forward(ResizeMethod::kNearest, 1, geom(1, 3, 1, 1, 5), x.data(), y.data());
  // floor((o + 0.5) * 3/5) = 0, 0, 1, 2, 2
  EXPECT_EQ(y, (std::vector<float>{1, 1, 2, 3, 3}));
}

TEST(Resize, BicubicAndBilinearOfTheSameSizeAreTheIdentity) {
  const auto x = random_vec(5 * 4 * 2, 1);
  for (ResizeMethod m : {ResizeMethod::kBicubic, ResizeMethod::kBilinear, ResizeMethod::kArea}) {
    std::vector<float> y(x.size());
    resize_forward(m, 1, geom(5, 4, 2, 5, 4), x.data(), y.data());
    EXPECT_EQ(y, x);
  }
}

// Keys cubic (a = -0.5) evaluated directly, taps outside the image dropped and the rest
// renormalized: TensorFlow's table rounds the fraction to 1/1024, so within 2e-3 of this.
double keys(double t) {
  t = std::abs(t);
  const double a = -0.5;
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

TEST(Resize, BicubicMatchesADirectKeysEvaluation) {
  const int h = 5, w = 6, oh = 8, ow = 4;
  const auto x = random_vec(static_cast<size_t>(h * w), 2);
  std::vector<float> y(static_cast<size_t>(oh * ow));
  resize_forward(ResizeMethod::kBicubic, 1, geom(h, w, 1, oh, ow), x.data(), y.data());
  auto weights = [&](int o, int in, int out, std::vector<std::pair<int, double>>& taps) {
    const double pos = (o + 0.5) * in / out - 0.5, b = std::floor(pos);
    double sum = 0;
    taps.clear();
    for (int i = -1; i <= 2; ++i) {
      const int k = static_cast<int>(b) + i;
      if (k < 0 || k >= in) continue;
      taps.push_back({k, keys(pos - k)});
      sum += keys(pos - k);
    }
    for (auto& t : taps) t.second /= sum;
  };
  std::vector<std::pair<int, double>> ty, tx;
  for (int oy = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox) {
      weights(oy, h, oh, ty);
      weights(ox, w, ow, tx);
      double want = 0;
      for (auto [iy, wy] : ty)
        for (auto [ix, wx] : tx) want += wy * wx * x[static_cast<size_t>(iy * w + ix)];
      EXPECT_NEAR(y[static_cast<size_t>(oy * ow + ox)], want, 2e-3) << oy << "," << ox;
    }
}

// The box average over [o * s, (o + 1) * s) on each axis, integrated in double.
TEST(Resize, AreaMatchesABoxIntegral) {
  const int h = 7, w = 5, oh = 3, ow = 2;
  const auto x = random_vec(static_cast<size_t>(h * w), 3);
  std::vector<float> y(static_cast<size_t>(oh * ow));
  resize_forward(ResizeMethod::kArea, 1, geom(h, w, 1, oh, ow), x.data(), y.data());
  auto cover = [](int i, double b0, double b1) {
    return std::max(0.0, std::min(i + 1.0, b1) - std::max(double(i), b0));
  };
  for (int oy = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox) {
      const double sy = double(h) / oh, sx = double(w) / ow;
      double want = 0;
      for (int iy = 0; iy < h; ++iy)
        for (int ix = 0; ix < w; ++ix)
          want += cover(iy, oy * sy, (oy + 1) * sy) * cover(ix, ox * sx, (ox + 1) * sx) *
                  x[static_cast<size_t>(iy * w + ix)];
      EXPECT_NEAR(y[static_cast<size_t>(oy * ow + ox)], want / (sy * sx), 1e-5);
    }
}

TEST(Resize, WindowedBilinearMatchesUpSampling) {
  const auto x = random_vec(2 * 3 * 4 * 2, 4);
  std::vector<float> a(2 * 6 * 12 * 2), b(a.size());
  resize_bilinear_forward(2, 3, 4, 2, 2, 3, x.data(), a.data());
  resize_forward(ResizeMethod::kBilinear, 2, geom(3, 4, 2, 6, 12), x.data(), b.data());
  EXPECT_EQ(a, b);
}

TEST(Resize, BackwardIsTheAdjointOfForward) {
  for (ResizeMethod m : {ResizeMethod::kBilinear, ResizeMethod::kNearest, ResizeMethod::kBicubic,
                         ResizeMethod::kArea}) {
    ResizeGeom g = geom(6, 7, 2, 4, 9);
    g.y0 = 1;
    g.x0 = 2;
    g.ch = 4;
    g.cw = 5;
    const auto x = random_vec(6 * 7 * 2, 5), dy = random_vec(4 * 9 * 2, 6);
    std::vector<float> y(dy.size()), dx(x.size(), 0.0f);
    resize_forward(m, 1, g, x.data(), y.data());
    resize_backward(m, 1, g, dy.data(), dx.data());
    EXPECT_NEAR(dot(y, dy), dot(x, dx), 1e-4);
  }
}

// Sampling one pixel to the right of each output pixel: the last column comes from the fill mode.
TEST(AffineTransform, FillModesExtendTheImageAsKeras) {
  const std::vector<float> x = {1, 2, 3, 4};
  const float t[8] = {1, 0, 1, 0, 1, 0, 0, 0};
  auto run = [&](FillMode f) {
    std::vector<float> y(4);
    affine_transform_forward(1, 1, 4, 1, t, false, f, 9.0f, x.data(), y.data());
    return y;
  };
  EXPECT_EQ(run(FillMode::kConstant), (std::vector<float>{2, 3, 4, 9}));
  EXPECT_EQ(run(FillMode::kReflect), (std::vector<float>{2, 3, 4, 4}));
  EXPECT_EQ(run(FillMode::kWrap), (std::vector<float>{2, 3, 4, 1}));
  EXPECT_EQ(run(FillMode::kNearest), (std::vector<float>{2, 3, 4, 4}));
}

TEST(AffineTransform, IdentityCopiesAndBackwardIsTheAdjoint) {
  const int h = 5, w = 6, c = 2;
  const auto x = random_vec(static_cast<size_t>(2 * h * w * c), 7);
  const float id[16] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
  std::vector<float> y(x.size());
  affine_transform_forward(2, h, w, c, id, true, FillMode::kReflect, 0.0f, x.data(), y.data());
  EXPECT_EQ(y, x);
  const float rot[16] = {0.9f, -0.3f, 0.8f,  0.3f, 0.9f, -0.5f, 0, 0,
                         1.2f, 0.0f,  -1.1f, 0.0f, 0.8f, 0.7f,  0, 0};
  const auto dy = random_vec(x.size(), 8);
  for (FillMode f : {FillMode::kReflect, FillMode::kWrap, FillMode::kConstant, FillMode::kNearest})
    for (bool bilinear : {true, false}) {
      std::vector<float> dx(x.size(), 0.0f);
      affine_transform_forward(2, h, w, c, rot, bilinear, f, 0.0f, x.data(), y.data());
      affine_transform_backward(2, h, w, c, rot, bilinear, f, dy.data(), dx.data());
      EXPECT_NEAR(dot(y, dy), dot(x, dx), 1e-4);
    }
}

}  // namespace
}  // namespace nnfleet
