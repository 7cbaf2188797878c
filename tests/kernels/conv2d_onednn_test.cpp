// Tests for the oneDNN path behind conv2d_forward and conv2d_backward (conv2d_onednn.h), called
// directly (the kernel interface sends some of these shapes to Winograd, conv2d_winograd.h): it
// matches the _ref oracle within 1e-4 relative over a shape sweep of the convolutions it serves,
// its results do not depend on the batch an image comes in or on buffer alignment, it starts no
// threads, and it runs the ISA the environment allows (held to AVX2 in the avx2.*
// copies of these tests, so AVX-512 machines test the AVX2 kernels too).
#include "kernels/conv2d_onednn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/conv2d.h"
#include "kernels/conv2d_winograd.h"

namespace nnfleet {
namespace {

using testing::absolute;
using testing::expect_near_all;
using testing::expect_near_bounded;
using testing::random_floats;

ConvGeometry geometry(int h, int c, int k, int f, bool same) {
  ConvGeometry g;
  g.h = g.w = h;
  g.c = c;
  g.kh = g.kw = k;
  g.f = f;
  EXPECT_TRUE(conv_geometry(g, same));
  return g;
}

std::string describe(const ConvGeometry& g, int n) {
  return "n=" + std::to_string(n) + " " + std::to_string(g.h) + "x" + std::to_string(g.w) + "x" +
         std::to_string(g.c) + " k=" + std::to_string(g.kh) + " f=" + std::to_string(g.f) +
         " pad=" + std::to_string(g.pad_top);
}

// The oneDNN path itself: the forward primitive, and for the backward pass oneDNN's input gradient
// (where it has a plan, else the GEMM path's) beside the GEMM path's kernel gradient, as
// conv2d_backward combines them.
void onednn_forward(const ConvGeometry& g, int n, const float* x, const float* w, const float* b,
                    float* y, float* scratch, const Activation* act = nullptr,
                    float* act_out = nullptr) {
  ASSERT_TRUE(onednn_conv_forward(g, n, x, w, b, y, scratch, act, act_out));
}
void onednn_backward(const ConvGeometry& g, int n, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db, float* scratch) {
  if (onednn_conv_backward_data(g, n, w, dy, dx, scratch)) dx = nullptr;
  conv2d_backward_gemm(g, n, x, w, dy, dx, dw, db, scratch);
}

// Scratch for the oneDNN path itself. conv2d_scratch_floats leaves oneDNN's share (and its
// primitives) out where Winograd takes both passes, as on m7's 26x26x32 -> 64, so asking oneDNN
// too plans it for these direct calls.
size_t onednn_scratch_floats(const ConvGeometry& g, int n) {
  return std::max(conv2d_scratch_floats(g, n), onednn_conv_scratch_floats(g, n));
}

size_t x_size(const ConvGeometry& g, int n) { return size_t(n) * g.h * g.w * g.c; }
size_t y_size(const ConvGeometry& g, int n) { return size_t(n) * g.oh * g.ow * g.f; }
size_t w_size(const ConvGeometry& g) { return size_t(g.kh) * g.kw * g.c * g.f; }

// Forward (with and without bias, relu fused in place, tanh into another buffer) and backward
// (accumulating) against the ref, for batches below, at and past one oneDNN piece.
TEST(Conv2dOnednn, MatchesRefOverShapeSweep) {
  uint32_t seed = 100;
  const Activation relu{Act::kRelu}, tanh_act{Act::kTanh};
  for (auto [h, c, k, f, same] : {std::tuple{26, 32, 3, 64, false},
                                  {13, 16, 3, 32, false},
                                  {9, 8, 5, 16, true},
                                  {7, 24, 2, 8, true},
                                  {6, 8, 3, 40, true}}) {
    const ConvGeometry g = geometry(h, c, k, f, same);
    for (int n : {1, 3, kOnednnPiece + 1}) {
      std::vector<float> scratch(onednn_scratch_floats(g, n));
      ASSERT_FALSE(onednn_conv_impl(g, false).empty()) << describe(g, n) << ": oneDNN not used";
      const std::string what = describe(g, n);
      const auto x = random_floats(x_size(g, n), seed), w = random_floats(w_size(g), seed + 1),
                 b = random_floats(size_t(f), seed + 2), dy = random_floats(y_size(g, n), seed + 3);
      std::vector<float> ref(y_size(g, n)), y(ref.size()), act_y(ref.size());
      const bool bias = (seed & 1) != 0;
      conv2d_forward_ref(g, n, x.data(), w.data(), bias ? b.data() : nullptr, ref.data());
      onednn_forward(g, n, x.data(), w.data(), bias ? b.data() : nullptr, y.data(), scratch.data());
      expect_near_all(y, ref, 1e-5, 1e-4, "forward " + what);
      onednn_forward(g, n, x.data(), w.data(), b.data(), y.data(), scratch.data(), &tanh_act,
                     act_y.data());
      conv2d_forward_ref(g, n, x.data(), w.data(), b.data(), ref.data());
      expect_near_all(y, ref, 1e-5, 1e-4, "forward z with tanh " + what);
      for (float& v : ref) v = std::tanh(v);
      expect_near_all(act_y, ref, 1e-5, 1e-4, "tanh " + what);
      onednn_forward(g, n, x.data(), w.data(), b.data(), y.data(), scratch.data(), &relu, y.data());
      conv2d_forward_ref(g, n, x.data(), w.data(), b.data(), ref.data());
      for (float& v : ref) v = std::max(v, 0.0f);
      expect_near_all(y, ref, 1e-5, 1e-4, "relu in place " + what);

      auto dx = random_floats(x.size(), seed + 4), dw = random_floats(w.size(), seed + 5),
           db = random_floats(b.size(), seed + 6);
      auto dx_ref = dx, dw_ref = dw, db_ref = db;
      onednn_backward(g, n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(),
                      scratch.data());
      conv2d_backward_ref(g, n, x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(),
                          db_ref.data());
      auto dx_bound = absolute(dx), dw_bound = absolute(dw), db_bound = absolute(db);
      conv2d_backward_ref(g, n, absolute(x).data(), absolute(w).data(), absolute(dy).data(),
                          dx_bound.data(), dw_bound.data(), db_bound.data());
      expect_near_bounded(dx, dx_ref, dx_bound, 1e-4, 1e-6, "dx " + what);
      expect_near_bounded(dw, dw_ref, dw_bound, 1e-4, 1e-6, "dw " + what);
      expect_near_bounded(db, db_ref, db_bound, 1e-4, 1e-6, "db " + what);
      seed += 10;
    }
  }
}

// An image gives the same bits alone or anywhere in a batch (whole pieces or the single-image
// tail), forward and input gradient, so results never depend on how batches are cut.
TEST(Conv2dOnednn, ImageResultDoesNotDependOnItsBatch) {
  const ConvGeometry g = geometry(26, 32, 3, 64, false);
  const int n = kOnednnPiece + 2;
  std::vector<float> scratch(onednn_scratch_floats(g, n));
  const auto x = random_floats(x_size(g, n), 1), w = random_floats(w_size(g), 2),
             b = random_floats(size_t(g.f), 3), dy = random_floats(y_size(g, n), 4);
  std::vector<float> y(y_size(g, n)), dx(x_size(g, n), 0.0f), dw(w.size());
  onednn_forward(g, n, x.data(), w.data(), b.data(), y.data(), scratch.data());
  onednn_backward(g, n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr,
                  scratch.data());
  const size_t xi = x_size(g, 1), yi = y_size(g, 1);
  for (int img : {0, kOnednnPiece - 1, kOnednnPiece, n - 1}) {
    std::vector<float> y1(yi), dx1(xi, 0.0f);
    onednn_forward(g, 1, x.data() + img * xi, w.data(), b.data(), y1.data(), scratch.data());
    onednn_backward(g, 1, x.data() + img * xi, w.data(), dy.data() + img * yi, dx1.data(),
                    dw.data(), nullptr, scratch.data());
    EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y.begin() + img * yi)) << "forward image " << img;
    EXPECT_TRUE(std::equal(dx1.begin(), dx1.end(), dx.begin() + img * xi)) << "dx image " << img;
  }
}

// Every buffer, the scratch included, at 17 alignments: bit-identical outputs.
TEST(Conv2dOnednn, ResultsDoNotDependOnBufferOrScratchAlignment) {
  const Activation relu{Act::kRelu};
  for (auto [h, c, k, f, same] : {std::tuple{26, 32, 3, 64, false}, {9, 8, 5, 16, true}}) {
    const ConvGeometry g = geometry(h, c, k, f, same);
    const int n = 2;
    const size_t scratch_size = onednn_scratch_floats(g, n);
    const auto x = random_floats(x_size(g, n), 7), w = random_floats(w_size(g), 8),
               b = random_floats(size_t(f), 9), dy = random_floats(y_size(g, n), 10);
    const std::vector<float> scratch0(scratch_size, 0.0f);
    testing::expect_alignment_independent(
        {x, w, b, scratch0}, {y_size(g, n)},
        [&](const auto& i, const auto& o) {
          onednn_forward(g, n, i[0], i[1], i[2], o[0], const_cast<float*>(i[3]), &relu, o[0]);
        },
        "conv2d_forward " + describe(g, n));
    testing::expect_alignment_independent(
        {x, w, dy, scratch0}, {x.size(), w.size(), size_t(f)},
        [&](const auto& i, const auto& o) {
          onednn_backward(g, n, i[0], i[1], i[2], o[0], o[1], o[2], const_cast<float*>(i[3]));
        },
        "conv2d_backward " + describe(g, n));
  }
}

int thread_count() {
  int count = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    ++count;
  return count;
}

// Planning and running oneDNN convolutions leaves the process with the threads it had: oneDNN's
// OpenMP runtime is held to the calling thread.
// A layer whose forward and input-gradient passes both run as Winograd never reaches oneDNN, so
// its scratch is not sized for oneDNN's (366,672 floats per batch piece on m7's layer, against
// Winograd's 156,736) and no primitive is made for it; a layer oneDNN serves still gets both.
TEST(Conv2dOnednn, ScratchLeavesOneDnnOutWhereWinogradTakesBothPasses) {
  const ConvGeometry m7 = geometry(26, 32, 3, 64, false);
  ASSERT_TRUE(conv2d_use_winograd(m7, false) && conv2d_use_winograd(m7, true));
  EXPECT_LT(conv2d_scratch_floats(m7, 16), onednn_conv_scratch_floats(m7, 16));
  const ConvGeometry m6 = geometry(13, 16, 3, 32, false);
  ASSERT_FALSE(conv2d_use_winograd(m6, false));
  EXPECT_GE(conv2d_scratch_floats(m6, 16), onednn_conv_scratch_floats(m6, 16));
}

TEST(Conv2dOnednn, StartsNoThreads) {
  const int before = thread_count();
  const ConvGeometry g = geometry(11, 48, 3, 24, true);  // a geometry no other test plans
  const int n = 2 * kOnednnPiece;
  std::vector<float> scratch(onednn_scratch_floats(g, n));
  ASSERT_FALSE(onednn_conv_impl(g, false).empty());
  const auto x = random_floats(x_size(g, n), 1), w = random_floats(w_size(g), 2),
             dy = random_floats(y_size(g, n), 3);
  std::vector<float> y(y_size(g, n)), dx(x.size()), dw(w.size());
  onednn_forward(g, n, x.data(), w.data(), nullptr, y.data(), scratch.data());
  onednn_backward(g, n, x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr,
                  scratch.data());
  EXPECT_EQ(thread_count(), before);
}

// The implementation oneDNN picked runs the widest ISA allowed: AVX2 in the avx2.* test copies
// (avx2_only_isa.cpp holds them to it), when ONEDNN_MAX_CPU_ISA=AVX2 or when the machine has no
// AVX-512; AVX-512 otherwise.
TEST(Conv2dOnednn, RunsTheIsaTheEnvironmentAllows) {
  const ConvGeometry g = geometry(26, 32, 3, 64, false);
  onednn_scratch_floats(g, 1);
  const std::string fwd = onednn_conv_impl(g, false), bwd = onednn_conv_impl(g, true);
#ifdef NNFLEET_KERNELS_AVX2_ONLY
  const bool avx2_only = true;
#else
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const bool avx2_only =
      (cap != nullptr && std::string(cap) == "AVX2") || !__builtin_cpu_supports("avx512f");
#endif
  for (const std::string& impl : {fwd, bwd}) {
    if (avx2_only) {
      EXPECT_NE(impl.find("avx2"), std::string::npos) << impl;
      EXPECT_EQ(impl.find("avx512"), std::string::npos) << impl;
    } else {
      EXPECT_NE(impl.find("avx512"), std::string::npos) << impl;
    }
  }
}

}  // namespace
}  // namespace nnfleet
