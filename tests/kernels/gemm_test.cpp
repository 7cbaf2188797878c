// Tests for gemm() and the Dense kernels against their naive _ref twins: shape sweeps with odd
// sizes, every transpose combination, padded leading dimensions, beta 0/1 and accumulation, and
// concurrent calls from several threads (libxsmm's JIT dispatch must be thread-safe).
#include "kernels/gemm.h"

#include <gtest/gtest.h>
#include <libxsmm.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "kernel_test_util.h"

namespace nnfleet {
namespace {

using testing::expect_near_all;
using testing::random_floats;

// Float error bound for sums of K products of values in [-1, 1].
double gemm_tol(int K) { return 1e-5 + 2e-6 * K; }

struct GemmCase {
  bool trans_a, trans_b;
  int M, N, K;
  int pad;  // extra floats per row beyond the logical width, for lda/ldb/ldc
  float beta;
};

std::string describe(const GemmCase& c) {
  return "ta=" + std::to_string(c.trans_a) + " tb=" + std::to_string(c.trans_b) +
         " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " pad=" + std::to_string(c.pad) + " beta=" + std::to_string(c.beta);
}

// Runs gemm and gemm_ref on the same inputs and compares all of C including the padding columns,
// which neither may touch. With beta 0, C starts as NaN: it must be overwritten, never read.
void check_gemm(const GemmCase& c, uint32_t seed) {
  const int a_rows = c.trans_a ? c.K : c.M, a_cols = c.trans_a ? c.M : c.K;
  const int b_rows = c.trans_b ? c.N : c.K, b_cols = c.trans_b ? c.K : c.N;
  const int lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
  const auto A = random_floats(static_cast<size_t>(a_rows) * lda, seed);
  const auto B = random_floats(static_cast<size_t>(b_rows) * ldb, seed + 1);
  std::vector<float> C = random_floats(static_cast<size_t>(c.M) * ldc, seed + 2);
  if (c.beta == 0.0f) {
    for (int i = 0; i < c.M; ++i) {
      for (int j = 0; j < c.N; ++j) C[static_cast<size_t>(i) * ldc + j] = std::nanf("");
    }
  }
  std::vector<float> C_ref = C;
  gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc);
  gemm_ref(c.trans_a, c.trans_b, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, c.beta, C_ref.data(),
           ldc);
  expect_near_all(C, C_ref, gemm_tol(c.K), 1e-5, describe(c));
}

TEST(Gemm, MatchesRefOverShapeSweep) {
  const int sizes[] = {1, 3, 7, 16, 33};
  uint32_t seed = 1;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (int M : sizes) {
        for (int N : sizes) {
          for (int K : sizes) {
            for (float beta : {0.0f, 1.0f}) {
              check_gemm({ta, tb, M, N, K, 0, beta}, seed++);
            }
          }
        }
      }
    }
  }
}

TEST(Gemm, MatchesRefWithPaddedLeadingDimensions) {
  uint32_t seed = 100;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        check_gemm({ta, tb, 7, 33, 3, 5, beta}, seed++);
        check_gemm({ta, tb, 32, 10, 128, 3, beta}, seed++);
      }
    }
  }
}

TEST(Gemm, MatchesRefOnWorkloadShapes) {
  // Dense layers of W1 at batch 32 (forward, dx and dw products) and a conv im2col chunk.
  const GemmCase cases[] = {
      {false, false, 32, 128, 784, 0, 0.0f},
      {false, false, 32, 10, 128, 0, 1.0f},
      {false, false, 32, 512, 784, 0, 1.0f},
      {false, true, 32, 512, 512, 0, 1.0f},
      {true, false, 784, 128, 32, 0, 1.0f},
      // A^T B with a C past L2 (A transposed a block of rows at a time), tails included.
      {true, false, 9216, 128, 32, 0, 1.0f},
      {true, false, 2100, 130, 31, 3, 0.0f},
      {true, false, 288, 64, 85, 0, 1.0f},
      {false, false, 85, 64, 288, 0, 0.0f},
      {true, true, 17, 9, 40, 2, 1.0f},
      // A B^T spanning several transposed blocks of B, with tails in both directions.
      {false, true, 9, 100, 300, 3, 0.0f},
      {false, true, 9, 100, 300, 3, 1.0f},
      {false, true, 8, 129, 257, 0, 1.0f},
      // B larger than L2, cut into blocks of columns (the last one narrower) and of k rows.
      {false, false, 5, 700, 400, 3, 0.0f},
      {false, false, 5, 700, 400, 3, 1.0f},
      {false, false, 8, 128, 9216, 0, 1.0f},
      {false, false, 33, 128, 9216, 5, 0.0f},
      // The same B for one to three rows (matrix-vector products: no panels), as m7's Dense
      // layer at batch 1.
      {false, false, 1, 700, 400, 3, 0.0f},
      {false, false, 3, 700, 400, 0, 1.0f},
      {false, false, 1, 128, 9216, 0, 1.0f},
  };
  uint32_t seed = 200;
  for (const GemmCase& c : cases) check_gemm(c, seed++);
}

TEST(Gemm, EmptyReductionZeroesWithBetaZeroAndKeepsWithBetaOne) {
  std::vector<float> C(6, std::nanf(""));
  gemm(false, false, 2, 3, 0, nullptr, 1, nullptr, 3, 0.0f, C.data(), 3);
  for (float v : C) EXPECT_EQ(v, 0.0f);
  std::vector<float> D(6, 2.5f);
  gemm(false, false, 2, 3, 0, nullptr, 1, nullptr, 3, 1.0f, D.data(), 3);
  for (float v : D) EXPECT_EQ(v, 2.5f);
}

TEST(Gemm, GivesSameResultsWhenCalledFromManyThreadsAtOnce) {
  // Each thread runs a different set of shapes, so several JIT dispatches race for new kernels.
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      for (int rep = 0; rep < 3; ++rep) {
        for (int s = 1; s < 40; s += 3) {
          // Cycle through NN, TN and NT (NT also JIT-compiles libxsmm transpose kernels).
          const bool ta = (s + rep) % 3 == 1, tb = (s + rep) % 3 == 2;
          const int M = s + t + 8, N = 2 * s + 1, K = 3 * s + t;
          const auto A = random_floats(static_cast<size_t>(M) * K, 7 * s + t);
          const auto B = random_floats(static_cast<size_t>(K) * N, 11 * s + t);
          const int lda = ta ? M : K, ldb = tb ? K : N;
          std::vector<float> C(static_cast<size_t>(M) * N), C_ref(C.size());
          gemm(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
          gemm_ref(ta, tb, M, N, K, A.data(), lda, B.data(), ldb, 0.0f, C_ref.data(), N);
          for (size_t i = 0; i < C.size(); ++i) {
            if (std::abs(C[i] - C_ref[i]) > gemm_tol(K)) ++failures[t];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST(Dense, ForwardMatchesRefOverShapeSweep) {
  uint32_t seed = 300;
  for (int n : {1, 3, 32, 33}) {
    for (int in : {1, 7, 33, 784}) {
      for (int out : {1, 3, 10, 128}) {
        for (bool bias : {false, true}) {
          const auto x = random_floats(static_cast<size_t>(n) * in, seed++);
          const auto w = random_floats(static_cast<size_t>(in) * out, seed++);
          const auto b = random_floats(out, seed++);
          std::vector<float> y(static_cast<size_t>(n) * out, std::nanf("")), y_ref(y.size());
          dense_forward(n, in, out, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
          dense_forward_ref(n, in, out, x.data(), w.data(), bias ? b.data() : nullptr,
                            y_ref.data());
          expect_near_all(y, y_ref, gemm_tol(in), 1e-5,
                          "n=" + std::to_string(n) + " in=" + std::to_string(in) +
                              " out=" + std::to_string(out) + " bias=" + std::to_string(bias));
        }
      }
    }
  }
}

// Fresh parameter gradients (stale numbers, here NaN) are written with the bits the kernel adds
// onto zeros, on small shapes and m7's Dense 9216 -> 128 at a batch piece of 16 (the blocked
// transposed-A path).
TEST(Dense, FreshParameterGradientsHaveTheBitsOfAddingOntoZeros) {
  uint32_t seed = 900;
  const int shapes[][3] = {{1, 7, 3}, {3, 33, 10}, {32, 256, 128}, {16, 9216, 128}};
  for (const auto& s : shapes) {
    const int n = s[0], in = s[1], out = s[2];
    const auto x = random_floats(static_cast<size_t>(n) * in, seed++);
    const auto w = random_floats(static_cast<size_t>(in) * out, seed++);
    const auto dy = random_floats(static_cast<size_t>(n) * out, seed++);
    std::vector<float> dw(static_cast<size_t>(in) * out, 0.0f), db(out, 0.0f);
    std::vector<float> dw_fresh(dw.size(), std::nanf("")), db_fresh(out, std::nanf(""));
    dense_backward(n, in, out, x.data(), w.data(), dy.data(), nullptr, dw.data(), db.data());
    dense_backward(n, in, out, x.data(), w.data(), dy.data(), nullptr, dw_fresh.data(),
                   db_fresh.data(), true);
    const std::string what =
        std::to_string(n) + "x" + std::to_string(in) + "x" + std::to_string(out);
    EXPECT_EQ(std::memcmp(dw.data(), dw_fresh.data(), dw.size() * sizeof(float)), 0) << what;
    EXPECT_EQ(std::memcmp(db.data(), db_fresh.data(), db.size() * sizeof(float)), 0) << what;
  }
}

TEST(Dense, BackwardAccumulatesLikeRefOverShapeSweep) {
  uint32_t seed = 400;
  for (int n : {1, 3, 32}) {
    for (int in : {1, 7, 33, 256}) {
      for (int out : {1, 3, 10, 128}) {
        for (bool with_dx : {false, true}) {
          for (bool with_db : {false, true}) {
            const auto x = random_floats(static_cast<size_t>(n) * in, seed++);
            const auto w = random_floats(static_cast<size_t>(in) * out, seed++);
            const auto dy = random_floats(static_cast<size_t>(n) * out, seed++);
            // Pre-filled gradients: the kernels must add onto them.
            auto dx = random_floats(static_cast<size_t>(n) * in, seed++);
            auto dw = random_floats(static_cast<size_t>(in) * out, seed++);
            auto db = random_floats(out, seed++);
            auto dx_ref = dx, dw_ref = dw, db_ref = db;
            dense_backward(n, in, out, x.data(), w.data(), dy.data(), with_dx ? dx.data() : nullptr,
                           dw.data(), with_db ? db.data() : nullptr);
            dense_backward_ref(n, in, out, x.data(), w.data(), dy.data(),
                               with_dx ? dx_ref.data() : nullptr, dw_ref.data(),
                               with_db ? db_ref.data() : nullptr);
            const std::string what = "n=" + std::to_string(n) + " in=" + std::to_string(in) +
                                     " out=" + std::to_string(out);
            expect_near_all(dx, dx_ref, gemm_tol(out), 1e-5, "dx " + what);
            expect_near_all(dw, dw_ref, gemm_tol(n), 1e-5, "dw " + what);
            expect_near_all(db, db_ref, gemm_tol(n), 1e-5, "db " + what);
          }
        }
      }
    }
  }
}

TEST(DenseRef, BackwardMatchesNumericalGradient) {
  // Anchors the oracle itself: d/dparam of L = sum(y * r) by central differences in double.
  const int n = 3, in = 4, out = 5;
  auto x = random_floats(n * in, 1), w = random_floats(in * out, 2), b = random_floats(out, 3);
  const auto r = random_floats(n * out, 4);
  auto loss = [&] {
    std::vector<float> y(n * out);
    dense_forward_ref(n, in, out, x.data(), w.data(), b.data(), y.data());
    double l = 0;
    for (int i = 0; i < n * out; ++i) l += static_cast<double>(y[i]) * r[i];
    return l;
  };
  std::vector<float> dx(n * in, 0.0f), dw(in * out, 0.0f), db(out, 0.0f);
  dense_backward_ref(n, in, out, x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data());
  auto numeric = [&](std::vector<float>& p, int i) {
    const float saved = p[i], h = 1e-2f;
    p[i] = saved + h;
    const double up = loss();
    p[i] = saved - h;
    const double down = loss();
    p[i] = saved;
    return (up - down) / (2.0 * h);
  };
  for (int i = 0; i < n * in; ++i) EXPECT_NEAR(dx[i], numeric(x, i), 1e-4);
  for (int i = 0; i < in * out; ++i) EXPECT_NEAR(dw[i], numeric(w, i), 1e-4);
  for (int i = 0; i < out; ++i) EXPECT_NEAR(db[i], numeric(b, i), 1e-4);
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// gemm (every transpose, matrix-vector shapes included) and the Dense kernels give the same bits
// wherever their buffers start.
TEST(Gemm, ResultsDoNotDependOnBufferAlignment) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [M, N, K] : {std::array{1, 37, 19}, std::array{23, 1, 40}, std::array{17, 33, 65},
                             std::array{64, 64, 64}}) {
        const auto a = random_floats(static_cast<size_t>(M) * K, 1);
        const auto b = random_floats(static_cast<size_t>(K) * N, 2);
        for (float beta : {0.0f, 1.0f})
          testing::expect_alignment_independent(
              {a, b}, {static_cast<size_t>(M) * N},
              [&](const auto& in, const auto& out) {
                gemm(ta, tb, M, N, K, in[0], ta ? M : K, in[1], tb ? K : N, beta, out[0], N);
              },
              "gemm " + std::to_string(ta) + std::to_string(tb) + " " + std::to_string(M) + "x" +
                  std::to_string(N) + "x" + std::to_string(K));
      }
}

// A row of C depends only on its row of op(A), on B and on its own C row, never on how many rows
// are computed with it: so predictions do not depend on the batch size nor on how rows are shared
// out among workers. Row r of an M-row product against the same row computed alone, for the
// forward products (A B and A^T B), beta 0 and 1, narrow C rows (a Dense(10) layer: libxsmm's
// AVX-512 kernels for rows of up to 16 floats varied with M), wide ones and the panel path
// (m7's Dense 9216x128).
TEST(Gemm, RowResultsDoNotDependOnTheNumberOfRows) {
  constexpr int kRows = 40;
  for (auto [N, K] :
       {std::pair{10, 128}, {3, 8}, {16, 64}, {17, 9}, {64, 288}, {128, 9216}, {600, 500}}) {
    for (bool trans_a : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        const auto A = random_floats(size_t(kRows) * K, uint32_t(N + K)),
                   B = random_floats(size_t(K) * N, uint32_t(N * K)),
                   C0 = random_floats(size_t(kRows) * N, 7);
        const int lda = trans_a ? kRows : K;
        std::vector<std::vector<float>> alone(kRows, std::vector<float>(size_t(N)));
        for (int r = 0; r < kRows; ++r) {
          std::copy_n(C0.begin() + ptrdiff_t(r) * N, N, alone[size_t(r)].begin());
          const float* a = trans_a ? A.data() + r : A.data() + ptrdiff_t(r) * K;
          gemm(trans_a, false, 1, N, K, a, lda, B.data(), N, beta, alone[size_t(r)].data(), N);
        }
        for (int M : {2, 3, 4, 5, 7, 8, 10, 12, 16, 17, 33, kRows}) {
          std::vector<float> C(C0.begin(), C0.begin() + ptrdiff_t(M) * N);
          gemm(trans_a, false, M, N, K, A.data(), lda, B.data(), N, beta, C.data(), N);
          for (int r = 0; r < M; ++r)
            ASSERT_TRUE(std::equal(alone[size_t(r)].begin(), alone[size_t(r)].end(),
                                   C.begin() + ptrdiff_t(r) * N))
                << "row " << r << " of M=" << M << " N=" << N << " K=" << K
                << " trans_a=" << trans_a << " beta=" << beta << " differs from the row alone";
        }
      }
    }
  }
}

// gemm_in_order against the naive oracle, and bit for bit against gemm: where gemm runs libxsmm
// (every N on AVX2; N > 16 on AVX-512) its kernels add in the same order, so the paths agree (2100
// x 130: A^T transposed in blocks). Widths of a multiple of 64 plus 1 to 16 (65, 80, 144, 208)
// are those whose last columns libxsmm's AVX-512 kernels add out of order unless split off.
TEST(Gemm, InOrderMatchesRefAndLibxsmmBitForBit) {
  for (auto [M, N, K] : {std::tuple{1, 10, 128},
                         {7, 3, 8},
                         {9, 16, 64},
                         {13, 17, 9},
                         {20, 33, 31},
                         {32, 64, 288},
                         {1, 65, 31},
                         {5, 80, 64},
                         {40, 144, 31},
                         {12, 208, 64},
                         {2100, 130, 31}}) {
    for (bool trans_a : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        const auto A = random_floats(size_t(M) * K, 1), B = random_floats(size_t(K) * N, 2),
                   C0 = random_floats(size_t(M) * N, 3);
        const int lda = trans_a ? M : K;
        std::vector<float> got = C0, want = C0, lib = C0;
        gemm_in_order(trans_a, M, N, K, A.data(), lda, B.data(), N, beta, got.data(), N);
        gemm_ref(trans_a, false, M, N, K, A.data(), lda, B.data(), N, beta, want.data(), N);
        const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                 " K=" + std::to_string(K) + " trans_a=" + std::to_string(trans_a);
        expect_near_all(got, want, gemm_tol(K), 1e-5, "in order vs ref " + what);
        gemm(trans_a, false, M, N, K, A.data(), lda, B.data(), N, beta, lib.data(), N);
        EXPECT_EQ(got, lib) << "in order vs gemm " << what;
      }
    }
  }
}

TEST(Dense, ResultsDoNotDependOnBufferAlignment) {
  for (auto [n, in, out] : {std::array{1, 100, 10}, std::array{32, 37, 13}}) {
    const auto x = random_floats(static_cast<size_t>(n) * in, 3);
    const auto w = random_floats(static_cast<size_t>(in) * out, 4);
    const auto b = random_floats(static_cast<size_t>(out), 5);
    const auto dy = random_floats(static_cast<size_t>(n) * out, 6);
    testing::expect_alignment_independent(
        {x, w, b}, {static_cast<size_t>(n) * out},
        [&](const auto& i, const auto& o) { dense_forward(n, in, out, i[0], i[1], i[2], o[0]); },
        "dense_forward");
    testing::expect_alignment_independent(
        {x, w, dy},
        {static_cast<size_t>(n) * in, static_cast<size_t>(in) * out, static_cast<size_t>(out)},
        [&](const auto& i, const auto& o) {
          dense_backward(n, in, out, i[0], i[1], i[2], o[0], o[1], o[2]);
        },
        "dense_backward");
  }
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// The kernel tests run twice (tests/kernels/CMakeLists.txt): against the native build, and against
// the AVX2 + FMA build with libxsmm's JIT held to AVX2, so an AVX2-only machine's path is tested
// on AVX-512 machines too. This checks each binary really runs the path it claims: the compiler's
// target, libxsmm's JIT and oneDNN's JIT. On an AVX-512 machine both halves of this check failed
// once while the rest passed: -march=native came after -march=x86-64-v3 (CMakeLists.txt's
// NNFLEET_MARCH avoids it), and ctest passed only the first of the two environment variables that
// held the JITs to AVX2 (avx2_only_isa.cpp holds them now).
TEST(Isa, KernelsRunTheInstructionSetTheirBuildTargets) {
  libxsmm_init();
  const int arch = libxsmm_get_target_archid();
  const dnnl_cpu_isa_t onednn = dnnl_get_effective_cpu_isa();
#ifdef NNFLEET_KERNELS_AVX2_ONLY
#ifdef __AVX512F__
  ADD_FAILURE() << "the AVX2 kernel tests were compiled with AVX-512 enabled";
#endif
  EXPECT_EQ(arch, LIBXSMM_X86_AVX2) << "avx2_only_isa.cpp should hold libxsmm's JIT to AVX2";
  EXPECT_EQ(onednn, dnnl_cpu_isa_avx2) << "avx2_only_isa.cpp should hold oneDNN to AVX2";
#else
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_GE(arch, LIBXSMM_X86_AVX512) << "native libxsmm should use AVX-512 here";
    EXPECT_EQ(onednn & dnnl_cpu_isa_avx512_core, dnnl_cpu_isa_avx512_core)
        << "native oneDNN should use AVX-512 here";
  } else {
    ASSERT_TRUE(__builtin_cpu_supports("avx2")) << "nnfleet's kernels are tuned for AVX2 or later";
    EXPECT_EQ(arch, LIBXSMM_X86_AVX2);
    EXPECT_EQ(onednn & dnnl_cpu_isa_avx2, dnnl_cpu_isa_avx2);
  }
#endif
}

// gemm_fixed_rows (kernel gradients: M is the kernel's taps or the layer's inputs, never a batch)
// against the oracle, and the same bits wherever its buffers start; on AVX-512 the narrow shapes
// (M 2..11, N <= 16: m5's first-layer kernel gradient is 9 x 8) run libxsmm's own kernels.
TEST(Gemm, FixedRowsMatchesRefAndIgnoresAlignment) {
  for (auto [M, N, K] : {std::array{9, 8, 5461}, std::array{9, 16, 200}, std::array{3, 10, 64},
                         std::array{1352, 10, 32}, std::array{32, 64, 36}}) {
    for (bool trans_a : {false, true}) {
      for (float beta : {0.0f, 1.0f}) {
        const auto A = random_floats(size_t(M) * K, 11), B = random_floats(size_t(K) * N, 12),
                   C0 = random_floats(size_t(M) * N, 13);
        const int lda = trans_a ? M : K;
        std::vector<float> got = C0, want = C0;
        gemm_fixed_rows(trans_a, M, N, K, A.data(), lda, B.data(), N, beta, got.data(), N);
        gemm_ref(trans_a, false, M, N, K, A.data(), lda, B.data(), N, beta, want.data(), N);
        const std::string what = "M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                 " K=" + std::to_string(K) + " trans_a=" + std::to_string(trans_a);
        expect_near_all(got, want, gemm_tol(K), 1e-5, "fixed rows vs ref " + what);
        testing::expect_alignment_independent(
            {A, B, C0}, {size_t(M) * N},
            [&](const auto& in, const auto& out) {
              std::copy_n(in[2], size_t(M) * N, out[0]);
              gemm_fixed_rows(trans_a, M, N, K, in[0], lda, in[1], N, beta, out[0], N);
            },
            "gemm_fixed_rows " + what);
      }
    }
  }
}

}  // namespace
}  // namespace nnfleet
