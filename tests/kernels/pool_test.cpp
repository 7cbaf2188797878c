// Tests for the pooling and zero-padding kernels: forward against inline naive loops and
// hand-computed values (padding never wins a max, is never counted in an average), backward
// against central-difference gradients in double and for accumulation into a pre-filled dx.
#include "kernels/pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace nnfleet {
namespace {

using testing::expect_near_all;
using testing::random_floats;

ConvGeometry pool_geometry(int h, int w, int c, int k, int stride, bool same) {
  ConvGeometry g;
  g.h = h;
  g.w = w;
  g.c = g.f = c;
  g.kh = g.kw = k;
  g.sh = g.sw = stride;
  EXPECT_TRUE(conv_geometry(g, same));
  return g;
}

// Distinct values at least 0.01 apart (a shuffled ramp), so a small finite-difference step never
// changes which element wins a max.
std::vector<float> distinct_floats(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (float& f : v) f = (f - static_cast<float>(n) / 2) * 0.01f;
  return v;
}

// Naive pooling: for each output, visit every tap of the window and skip the padded ones.
std::vector<float> pool_naive(const ConvGeometry& g, int n, const std::vector<float>& x, bool max) {
  std::vector<float> y(static_cast<size_t>(n) * g.oh * g.ow * g.c);
  for (int img = 0; img < n; ++img) {
    for (int oy = 0; oy < g.oh; ++oy) {
      for (int ox = 0; ox < g.ow; ++ox) {
        for (int c = 0; c < g.c; ++c) {
          double acc = max ? -INFINITY : 0.0;
          int count = 0;
          for (int ky = 0; ky < g.kh; ++ky) {
            for (int kx = 0; kx < g.kw; ++kx) {
              const int iy = oy * g.sh - g.pad_top + ky, ix = ox * g.sw - g.pad_left + kx;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              const double v = x[((static_cast<size_t>(img) * g.h + iy) * g.w + ix) * g.c + c];
              acc = max ? std::max(acc, v) : acc + v;
              ++count;
            }
          }
          y[((static_cast<size_t>(img) * g.oh + oy) * g.ow + ox) * g.c + c] =
              static_cast<float>(max ? acc : acc / count);
        }
      }
    }
  }
  return y;
}

// Checks analytic dx (accumulated onto a pre-filled buffer) against central differences of
// L(x) = sum(forward(x) * r), computed in double.
void check_gradient(size_t x_size, size_t y_size, std::vector<float> x,
                    const std::function<void(const std::vector<float>&, std::vector<float>&)>& fwd,
                    const std::function<void(const std::vector<float>&, const std::vector<float>&,
                                             const std::vector<float>&, std::vector<float>&)>& bwd,
                    const std::string& what) {
  const auto r = random_floats(y_size, 77);
  std::vector<float> y(y_size);
  fwd(x, y);
  const auto prefill = random_floats(x_size, 78);
  std::vector<float> dx = prefill;
  bwd(x, y, r, dx);
  auto loss = [&](const std::vector<float>& xv) {
    std::vector<float> yv(y_size);
    fwd(xv, yv);
    double l = 0;
    for (size_t i = 0; i < y_size; ++i) l += static_cast<double>(yv[i]) * r[i];
    return l;
  };
  for (size_t i = 0; i < x_size; ++i) {
    const float saved = x[i], h = 1e-3f;
    x[i] = saved + h;
    const double up = loss(x);
    x[i] = saved - h;
    const double down = loss(x);
    x[i] = saved;
    const double numeric = (up - down) / (2.0 * h);
    ASSERT_NEAR(dx[i] - prefill[i], numeric, 2e-3) << what << " element " << i;
  }
}

TEST(MaxPool2d, ForwardMatchesNaiveLoopsOverShapeSweep) {
  uint32_t seed = 1;
  for (int n : {1, 2}) {
    for (int hw : {1, 3, 4, 7}) {
      for (int c : {1, 3, 33}) {
        for (int k : {1, 2, 3}) {
          for (int stride : {1, 2, 3}) {
            for (bool same : {false, true}) {
              ConvGeometry g;
              g.h = hw;
              g.w = hw + 1;
              g.c = g.f = c;
              g.kh = g.kw = k;
              g.sh = g.sw = stride;
              if (!conv_geometry(g, same)) continue;
              // Negative inputs: a padded zero winning the max would show.
              const auto x = random_floats(static_cast<size_t>(n) * g.h * g.w * c, seed++, -2, -1);
              std::vector<float> y(static_cast<size_t>(n) * g.oh * g.ow * c);
              max_pool2d_forward(g, n, x.data(), y.data());
              expect_near_all(y, pool_naive(g, n, x, true), 0, 0, "max");
              avg_pool2d_forward(g, n, x.data(), y.data());
              expect_near_all(y, pool_naive(g, n, x, false), 1e-6, 1e-6, "avg");
            }
          }
        }
      }
    }
  }
}

TEST(AvgPool2d, SamePaddingExcludesPaddedPositionsFromTheCount) {
  // 3x3 window, stride 1, "same" on a 3x3 image: the corner output averages its 4 real pixels.
  const ConvGeometry g = pool_geometry(3, 3, 1, 3, 1, true);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> y(9);
  avg_pool2d_forward(g, 1, x.data(), y.data());
  EXPECT_FLOAT_EQ(y[0], (1 + 2 + 4 + 5) / 4.0f);
  EXPECT_FLOAT_EQ(y[4], 5.0f);
  EXPECT_FLOAT_EQ(y[8], (5 + 6 + 8 + 9) / 4.0f);
}

TEST(MaxPool2d, BackwardMatchesNumericalGradient) {
  for (bool same : {false, true}) {
    for (int stride : {1, 2}) {
      const ConvGeometry g = pool_geometry(5, 4, 3, 2, stride, same);
      const int n = 2;
      const size_t xs = static_cast<size_t>(n) * g.h * g.w * g.c;
      const size_t ys = static_cast<size_t>(n) * g.oh * g.ow * g.c;
      check_gradient(
          xs, ys, distinct_floats(xs, stride),
          [&](const std::vector<float>& x, std::vector<float>& y) {
            max_pool2d_forward(g, n, x.data(), y.data());
          },
          [&](const std::vector<float>& x, const std::vector<float>& y,
              const std::vector<float>& dy, std::vector<float>& dx) {
            max_pool2d_backward(g, n, x.data(), y.data(), dy.data(), dx.data());
          },
          "max pool stride " + std::to_string(stride));
    }
  }
}

// The fast paths (the 2x2 stride-2 one, the blocked general one) against max_pool2d_*_ref, exactly:
// max and routing involve no rounding. Inputs are small integers, so windows hold many ties;
// channel counts cross the general path's block of 64 and take the narrow 2x2 path (1, 2, 4, 8;
// rows ending in a partial vector); odd sizes put "same" windows over the edge.
TEST(MaxPool2d, FastPathsEqualTheNaiveOracleExactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(0, 3);
  for (int size : {4, 5, 26, 27}) {
    for (int c : {1, 2, 3, 4, 8, 70}) {
      for (int k : {2, 3}) {
        for (int stride : {1, 2}) {
          for (bool same : {false, true}) {
            const ConvGeometry g = pool_geometry(size, size - 1, c, k, stride, same);
            const int n = 2;
            std::vector<float> x(static_cast<size_t>(n) * g.h * g.w * g.c);
            for (float& v : x) v = static_cast<float>(value(rng));
            const size_t ys = static_cast<size_t>(n) * g.oh * g.ow * g.c;
            std::vector<float> y(ys), y_ref(ys), dy = random_floats(ys, 11);
            max_pool2d_forward(g, n, x.data(), y.data());
            max_pool2d_forward_ref(g, n, x.data(), y_ref.data());
            const std::string what = "size " + std::to_string(size) + " c " + std::to_string(c) +
                                     " k " + std::to_string(k) + " stride " +
                                     std::to_string(stride) + (same ? " same" : " valid");
            ASSERT_EQ(y, y_ref) << what;
            std::vector<float> dx = random_floats(x.size(), 12), dx_ref = dx;
            max_pool2d_backward(g, n, x.data(), y.data(), dy.data(), dx.data());
            max_pool2d_backward_ref(g, n, x.data(), y.data(), dy.data(), dx_ref.data());
            ASSERT_EQ(dx, dx_ref) << what;
          }
        }
      }
    }
  }
}

// A fresh dx (stale numbers, here NaN) is written whole with the bits the oracle adds onto
// zeros: on the 2x2 paths where the windows cover the image (wide and narrow channels, m7's
// 24x24x64), and zeroed first where they do not (odd sizes, 3x3 windows, overlapping ones).
TEST(MaxPool2d, FreshBackwardHasTheBitsOfAddingOntoZeros) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> value(0, 3);  // ties
  const int sizes[][2] = {{4, 6}, {24, 24}, {5, 4}, {7, 7}};
  for (const auto& hw : sizes) {
    for (int c : {1, 2, 4, 8, 64, 70}) {
      for (int k : {2, 3}) {
        for (int stride : {1, 2}) {
          const ConvGeometry g = pool_geometry(hw[0], hw[1], c, k, stride, false);
          const int n = 2;
          std::vector<float> x(static_cast<size_t>(n) * g.h * g.w * g.c);
          for (float& v : x) v = static_cast<float>(value(rng));
          const size_t ys = static_cast<size_t>(n) * g.oh * g.ow * g.c;
          std::vector<float> y(ys), dy = random_floats(ys, 13);
          max_pool2d_forward(g, n, x.data(), y.data());
          std::vector<float> fresh(x.size(), std::nanf("")), zeroed(x.size(), 0.0f);
          max_pool2d_backward(g, n, x.data(), y.data(), dy.data(), fresh.data(), true);
          max_pool2d_backward_ref(g, n, x.data(), y.data(), dy.data(), zeroed.data());
          EXPECT_EQ(std::memcmp(fresh.data(), zeroed.data(), x.size() * sizeof(float)), 0)
              << hw[0] << "x" << hw[1] << "x" << c << " k " << k << " stride " << stride;
        }
      }
    }
  }
}

TEST(MaxPool2d, BackwardRoutesTiesToTheFirstMaximum) {
  const ConvGeometry g = pool_geometry(2, 2, 1, 2, 2, false);
  const std::vector<float> x = {3, 3, 3, 3}, dy = {1.5f};
  std::vector<float> y(1), dx = {0.25f, 0, 0, 0};
  max_pool2d_forward(g, 1, x.data(), y.data());
  max_pool2d_backward(g, 1, x.data(), y.data(), dy.data(), dx.data());
  EXPECT_EQ(dx, (std::vector<float>{1.75f, 0, 0, 0}));
}

TEST(AvgPool2d, BackwardMatchesNumericalGradient) {
  for (bool same : {false, true}) {
    for (int stride : {1, 2}) {
      const ConvGeometry g = pool_geometry(5, 4, 3, 3, stride, same);
      const int n = 2;
      const size_t xs = static_cast<size_t>(n) * g.h * g.w * g.c;
      const size_t ys = static_cast<size_t>(n) * g.oh * g.ow * g.c;
      check_gradient(
          xs, ys, random_floats(xs, 5),
          [&](const std::vector<float>& x, std::vector<float>& y) {
            avg_pool2d_forward(g, n, x.data(), y.data());
          },
          [&](const std::vector<float>&, const std::vector<float>&, const std::vector<float>& dy,
              std::vector<float>& dx) { avg_pool2d_backward(g, n, dy.data(), dx.data()); },
          "avg pool stride " + std::to_string(stride));
    }
  }
}

TEST(GlobalPool, ForwardMatchesNaiveLoops) {
  for (int s : {1, 3, 49}) {
    for (int c : {1, 7, 33}) {
      const int n = 3;
      const auto x = random_floats(static_cast<size_t>(n) * s * c, s * 100 + c);
      std::vector<float> avg(n * c), mx(n * c), avg_want(n * c), max_want(n * c);
      for (int img = 0; img < n; ++img) {
        for (int k = 0; k < c; ++k) {
          double sum = 0, best = -INFINITY;
          for (int p = 0; p < s; ++p) {
            const double v = x[(static_cast<size_t>(img) * s + p) * c + k];
            sum += v;
            best = std::max(best, v);
          }
          avg_want[img * c + k] = static_cast<float>(sum / s);
          max_want[img * c + k] = static_cast<float>(best);
        }
      }
      global_avg_pool_forward(n, s, c, x.data(), avg.data());
      global_max_pool_forward(n, s, c, x.data(), mx.data());
      expect_near_all(avg, avg_want, 1e-6, 1e-5, "global avg");
      expect_near_all(mx, max_want, 0, 0, "global max");
    }
  }
}

TEST(GlobalPool, BackwardMatchesNumericalGradient) {
  const int n = 2, s = 6, c = 5;
  const size_t xs = static_cast<size_t>(n) * s * c, ys = static_cast<size_t>(n) * c;
  check_gradient(
      xs, ys, random_floats(xs, 9),
      [&](const std::vector<float>& x, std::vector<float>& y) {
        global_avg_pool_forward(n, s, c, x.data(), y.data());
      },
      [&](const std::vector<float>&, const std::vector<float>&, const std::vector<float>& dy,
          std::vector<float>& dx) { global_avg_pool_backward(n, s, c, dy.data(), dx.data()); },
      "global avg");
  check_gradient(
      xs, ys, distinct_floats(xs, 10),
      [&](const std::vector<float>& x, std::vector<float>& y) {
        global_max_pool_forward(n, s, c, x.data(), y.data());
      },
      [&](const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& dy,
          std::vector<float>& dx) {
        global_max_pool_backward(n, s, c, x.data(), y.data(), dy.data(), dx.data());
      },
      "global max");
}

TEST(ZeroPad2d, ForwardFramesTheInputWithZeros) {
  const int n = 2, h = 2, w = 3, c = 2, top = 1, bottom = 2, left = 0, right = 1;
  const auto x = random_floats(static_cast<size_t>(n) * h * w * c, 3);
  const int ph = h + top + bottom, pw = w + left + right;
  std::vector<float> y(static_cast<size_t>(n) * ph * pw * c, std::nanf(""));
  zero_pad2d_forward(n, h, w, c, top, bottom, left, right, x.data(), y.data());
  for (int img = 0; img < n; ++img) {
    for (int py = 0; py < ph; ++py) {
      for (int px = 0; px < pw; ++px) {
        for (int k = 0; k < c; ++k) {
          const int iy = py - top, ix = px - left;
          const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
          const float want = inside ? x[((img * h + iy) * w + ix) * c + k] : 0.0f;
          EXPECT_EQ(y[((img * ph + py) * pw + px) * c + k], want);
        }
      }
    }
  }
}

TEST(ZeroPad2d, BackwardMatchesNumericalGradient) {
  const int n = 2, h = 3, w = 2, c = 3, top = 2, bottom = 0, left = 1, right = 3;
  const size_t xs = static_cast<size_t>(n) * h * w * c;
  const size_t ys = static_cast<size_t>(n) * (h + top + bottom) * (w + left + right) * c;
  check_gradient(
      xs, ys, random_floats(xs, 4),
      [&](const std::vector<float>& x, std::vector<float>& y) {
        zero_pad2d_forward(n, h, w, c, top, bottom, left, right, x.data(), y.data());
      },
      [&](const std::vector<float>&, const std::vector<float>&, const std::vector<float>& dy,
          std::vector<float>& dx) {
        zero_pad2d_backward(n, h, w, c, top, bottom, left, right, dy.data(), dx.data());
      },
      "zero pad");
}

}  // namespace
}  // namespace nnfleet
