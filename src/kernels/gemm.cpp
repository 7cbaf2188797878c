// Fast single-threaded GEMM and the Dense layer's forward and backward.
// Row-major GEMMs go to libxsmm's JIT-generated small-matrix kernels, which measured 1.1-3x faster
// than Eigen 3.4 on the shapes nnfleet trains (numbers in BENCHMARKS.md). libxsmm 1.17 cannot JIT
// a row-major B^T, so A B^T transposes B block by block into a stack buffer first; A^T B^T, tiny
// A B^T and any shape libxsmm declines fall back to Eigen, kept single-threaded.
#include "kernels/gemm.h"

#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include <immintrin.h>
#include <libxsmm.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace nnfleet {
namespace {

// gemm() takes at most this many rows to gemm_in_order (xsmm_rows_depend_on_m), so one block of
// accumulators holds them all: every row its own chain, up to 11 chains in flight per k.
constexpr int kInOrderMaxRows = 11;

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using MatrixMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

// C[M,N] (=|+=) op(A) op(B) through Eigen's own blocked GEMM (no threads: EIGEN_DONT_PARALLELIZE).
void gemm_eigen(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
  const ConstMatrixMap a(A, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
  const ConstMatrixMap b(B, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
  MatrixMap c(C, M, N, Eigen::OuterStride<>(ldc));
  // beta is 0 (overwrite, C never read) or 1 (accumulate).
  if (beta == 0.0f) {
    if (!trans_a && !trans_b) {
      c.noalias() = a * b;
    } else if (trans_a && !trans_b) {
      c.noalias() = a.transpose() * b;
    } else if (!trans_a && trans_b) {
      c.noalias() = a * b.transpose();
    } else {
      c.noalias() = a.transpose() * b.transpose();
    }
  } else {
    if (!trans_a && !trans_b) {
      c.noalias() += a * b;
    } else if (trans_a && !trans_b) {
      c.noalias() += a.transpose() * b;
    } else if (!trans_a && trans_b) {
      c.noalias() += a * b.transpose();
    } else {
      c.noalias() += a.transpose() * b.transpose();
    }
  }
}

// libxsmm kernels are looked up in a small direct-mapped cache per thread, so the hot path takes
// no lock and touches no shared state. A miss asks libxsmm_smmdispatch, which is thread-safe: it
// JIT-compiles under libxsmm's own registry lock and hands back a pointer that stays valid for the
// life of the process. A slot evicted by a collision only costs another registry lookup.
struct XsmmKey {
  int m, n, k, lda, ldb, ldc, flags;
  bool operator==(const XsmmKey&) const = default;
};

struct XsmmSlot {
  XsmmKey key;
  libxsmm_smmfunction fn;  // null when libxsmm declined the shape (then Eigen runs it)
  bool filled;
};

constexpr int kXsmmSlots = 64;  // power of two
thread_local XsmmSlot t_xsmm_slots[kXsmmSlots];

size_t xsmm_hash(const XsmmKey& key) {
  uint64_t h = 1469598103934665603ull;
  for (int v : {key.m, key.n, key.k, key.lda, key.ldb, key.ldc, key.flags}) {
    h = (h ^ static_cast<uint32_t>(v)) * 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

void ensure_xsmm_initialized() {
  // libxsmm also initializes from a load-time constructor; this makes the order explicit and is
  // thread-safe through C++ static-local initialization.
  static const bool initialized = [] {
    libxsmm_init();
    return true;
  }();
  (void)initialized;
}

libxsmm_smmfunction xsmm_kernel(const XsmmKey& key) {
  XsmmSlot& slot = t_xsmm_slots[xsmm_hash(key) & (kXsmmSlots - 1)];
  if (slot.filled && slot.key == key) return slot.fn;
  ensure_xsmm_initialized();
  const libxsmm_blasint lda = key.lda, ldb = key.ldb, ldc = key.ldc;
  const float alpha = 1.0f;
  const float beta = (key.flags & LIBXSMM_GEMM_FLAG_BETA_0) ? 0.0f : 1.0f;
  const int flags = key.flags & ~LIBXSMM_GEMM_FLAG_BETA_0;  // beta travels as a value
  const int prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
  slot.key = key;
  slot.fn =
      libxsmm_smmdispatch(key.m, key.n, key.k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
  slot.filled = true;
  return slot.fn;
}

// libxsmm's flags for our trans_a (its TRANS_B, see gemm()) and beta (0 or 1).
int xsmm_flags(bool trans_a, float beta) {
  return (trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0) | (beta == 0.0f ? LIBXSMM_GEMM_FLAG_BETA_0 : 0);
}

bool xsmm_avx512() {
  static const bool avx512 = [] {
    ensure_xsmm_initialized();
    return libxsmm_get_target_archid() >= LIBXSMM_X86_AVX512;
  }();
  return avx512;
}

// Whether libxsmm's kernel for M rows of N floats adds a row's k terms out of order, so that the
// row's result depends on M. Its AVX-512 generator (generator_gemm_sse3_avx_avx2_avx512.c, 1.17)
// takes C rows that fit one 16-float vector to a micro-kernel that splits the k loop over 2 or 4
// accumulators when it blocks fewer than 12 rows: a Dense(10) layer's outputs changed in the last
// bit with the batch size, so predictions depended on --batch. Measured against an in-order
// chain for every M from 1 to 300 (N 3, 8, 10, 16; K 9 to 1352; A and A^T): out of order exactly
// for M 2..11 (6..11 for N = 3); wider rows, every AVX2 kernel and M of 1 or >= 12 add in order.
bool xsmm_rows_depend_on_m(int M, int N) {
  return xsmm_avx512() && N <= 16 && M >= 2 && M <= kInOrderMaxRows;
}

// The columns of an N-wide C that libxsmm can run in one kernel with every element added in
// order: N itself, or, on AVX-512, the multiple of 64 before a tail of 1 to 16 columns. Its
// AVX-512 kernels cut C's rows into blocks of 64 floats and give such a tail the split-k
// micro-kernel, for every M: measured on Zen 4 against gemm_in_order for every N from 1 to 700
// (M 1 to 40, K 9, 31 and 64, A and A^T), the last 1 to 16 columns of N = 65..80, 129..144, ...
// differed (M 1 included, K 31 and 64), every other N agreed. The tail then runs as a product
// of its own, which xsmm_rows_depend_on_m covers.
int xsmm_in_order_cols(int N) {
  const int tail = N % 64;
  return xsmm_avx512() && N > 64 && tail >= 1 && tail <= 16 ? N - tail : N;
}

// Runs C[M,N] (=|+=) op(A)[M,K] B[K,N] (all row-major; A stored [K,M] when trans_a) through
// libxsmm when it has a kernel for the shape, every element one chain of fused multiply-adds
// over k in order (gemm_in_order where libxsmm's rows would depend on M, a short column tail on
// its own), returning false (C untouched) otherwise.
bool gemm_xsmm(bool trans_a, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
  if (xsmm_rows_depend_on_m(M, N)) {
    gemm_in_order(trans_a, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return true;
  }
  const int head = xsmm_in_order_cols(N);
  const int flags = xsmm_flags(trans_a, beta);
  libxsmm_smmfunction fn = xsmm_kernel(XsmmKey{head, M, K, ldb, lda, ldc, flags});
  if (fn == nullptr) return false;
  if (head < N) {
    // Both parts first, so that a declined tail leaves C untouched.
    const int tail = N - head;
    if (xsmm_rows_depend_on_m(M, tail)) {
      gemm_in_order(trans_a, M, tail, K, A, lda, B + head, ldb, beta, C + head, ldc);
    } else {
      libxsmm_smmfunction tail_fn = xsmm_kernel(XsmmKey{tail, M, K, ldb, lda, ldc, flags});
      if (tail_fn == nullptr) return false;
      tail_fn(B + head, A, C + head);
    }
  }
  fn(B, A, C);
  return true;
}

// The reduce-batch kernels, cached per thread like the plain ones (C += always: beta 1).
struct BrgemmSlot {
  int m, n, k, lda, ldb, ldc;
  libxsmm_smmfunction_reducebatch_addr fn;
  bool filled;
};
thread_local BrgemmSlot t_brgemm_slots[kXsmmSlots];

libxsmm_smmfunction_reducebatch_addr brgemm_kernel(int m, int n, int k, int lda, int ldb, int ldc) {
  const XsmmKey key{m, n, k, lda, ldb, ldc, 0};
  BrgemmSlot& slot = t_brgemm_slots[xsmm_hash(key) & (kXsmmSlots - 1)];
  if (slot.filled && slot.m == m && slot.n == n && slot.k == k && slot.lda == lda &&
      slot.ldb == ldb && slot.ldc == ldc)
    return slot.fn;
  ensure_xsmm_initialized();
  const libxsmm_blasint la = lda, lb = ldb, lc = ldc;
  const float alpha = 1.0f, beta = 1.0f;
  const int flags = LIBXSMM_GEMM_FLAG_NONE, prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
  slot = {m,
          n,
          k,
          lda,
          ldb,
          ldc,
          libxsmm_smmdispatch_reducebatch_addr(m, n, k, &la, &lb, &lc, &alpha, &beta, &flags,
                                               &prefetch),
          true};
  return slot.fn;
}

// Row-major C[M,N] (=|+=) A[M,K] B^T with B stored [N,K], which libxsmm 1.17 cannot JIT: B is
// transposed one [kNtBlockK, kNtBlockN] block at a time into a 32 KiB stack buffer (libxsmm's
// own transpose kernel) and each block goes through the NN kernel,
//   C[:, n0:n0+nb] (=|+=) A[:, k0:k0+kb] Bt[kb, nb],
// beta applying only to the first k block. Every transposed element is reused M times, which
// measured 1.3-2x faster than Eigen's A B^T for M = 32.
constexpr int kNtBlockN = 64, kNtBlockK = 128;
// B matrices larger than 1 MiB (kWideBFloats) are cut into blocks of at most kBlockCols columns
// and about kBlockFloats (128 KiB, a quarter of Zen 3's 512 KiB L2) each, k rows at a time:
// libxsmm's kernels walk their whole B once per few rows of A, so a block of B read from memory
// once is then re-read from L2 by every row block. On m7's Dense 9216 -> 128 (Zen 3, AVX2,
// BM_Gemm, medians of 3) this measured 40.8 / 44.2 / 55.5 GFLOP/s at 8 / 32 / 256 rows against
// 24.7 / 23.7 / 22.6 for the column panels of 16 x 9216 (576 KiB, past L2) it replaces. Each
// result element still adds its k terms in one chain, in order (the first k block takes beta,
// the next ones add onto C), so the blocks change no bit of the result and never depend on M.
constexpr int64_t kWideBFloats = 256 * 1024;
constexpr int64_t kBlockFloats = 32 * 1024;
constexpr int kBlockCols = 256;
constexpr int kBlockMinK = 64;
// Blocks pay off only when each row of B is reused across several rows of A: for a matrix-vector
// product (batch 1) they turn one sequential read of B into strided walks, which measured 18%
// slower on m7's Dense 9216x128 layer (5,000 against 5,900 samples/s for W2 at batch 1).
constexpr int kPanelMinRows = 4;
constexpr int kNtMinRows = 8;  // below this the transposes cost more than they save

void gemm_nt_blocked(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     float beta, float* C, int ldc) {
  alignas(64) float bt[kNtBlockN * kNtBlockK];
  for (int n0 = 0; n0 < N; n0 += kNtBlockN) {
    const int nb = std::min(kNtBlockN, N - n0);
    for (int k0 = 0; k0 < K; k0 += kNtBlockK) {
      const int kb = std::min(kNtBlockK, K - k0);
      // Column-major view: B's block is [kb rows, nb cols] with leading dimension ldb; its
      // transpose, stored with leading dimension nb, is the row-major bt[kb, nb].
      libxsmm_otrans(bt, B + static_cast<ptrdiff_t>(n0) * ldb + k0, sizeof(float), kb, nb, ldb, nb);
      const float block_beta = k0 == 0 ? beta : 1.0f;
      if (!gemm_xsmm(false, M, nb, kb, A + k0, lda, bt, nb, block_beta, C + n0, ldc)) {
        gemm_eigen(false, false, M, nb, kb, A + k0, lda, bt, nb, block_beta, C + n0, ldc);
      }
    }
  }
}

// C[M,N] (=|+=) A[M,K] B[K,N] for a B too big for L2, one block of B at a time (see
// kBlockFloats): C[:, n0:n0+nb] (=|+=) A[:, k0:k0+kb] B[k0:k0+kb, n0:n0+nb].
void gemm_nn_blocked(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     float beta, float* C, int ldc) {
  const int panels = (N + kBlockCols - 1) / kBlockCols;
  const int panel = ((N + panels - 1) / panels + 15) / 16 * 16;
  for (int n0 = 0; n0 < N; n0 += panel) {
    const int nb = std::min(panel, N - n0);
    const int kb_max = static_cast<int>(std::max<int64_t>(kBlockMinK, kBlockFloats / nb));
    for (int k0 = 0; k0 < K; k0 += kb_max) {
      const int kb = std::min(kb_max, K - k0);
      const float* a = A + k0;
      const float* b = B + static_cast<ptrdiff_t>(k0) * ldb + n0;
      const float block_beta = k0 == 0 ? beta : 1.0f;
      if (!gemm_xsmm(false, M, nb, kb, a, lda, b, ldb, block_beta, C + n0, ldc))
        gemm_eigen(false, false, M, nb, kb, a, lda, b, ldb, block_beta, C + n0, ldc);
    }
  }
}

// Row-major C[M,N] (=|+=) A^T B with A stored [K,M], for a C larger than 1 MiB (kWideBFloats):
// libxsmm 1.17's kernels for a transposed operand measured 32.9 GFLOP/s on m7's Dense kernel
// gradient (M 9216, N 128, K 32; C 4.7 MB) on Zen 3. A is transposed kTnBlockRows columns at a
// time into a stack buffer (libxsmm's transpose kernel) and each block of C's rows goes through
// the NN kernel, C[m0:m0+mb, :] (=|+=) At[mb, K] B[K, N]: 66.2 GFLOP/s on that shape, and every
// element still adds its K terms in one chain, in order. A C that fits L2 gained nothing (784 x
// 128 x 32: 63-72 against 70-75 GFLOP/s), so it keeps the transposed kernel.
constexpr int kTnBlockRows = 64, kTnMaxK = 256;

void gemm_tn_blocked(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     float beta, float* C, int ldc) {
  alignas(64) float at[kTnBlockRows * kTnMaxK];
  for (int m0 = 0; m0 < M; m0 += kTnBlockRows) {
    const int mb = std::min(kTnBlockRows, M - m0);
    // Column-major view: A's block is [mb rows, K cols] with leading dimension lda; its
    // transpose, stored with leading dimension K, is the row-major at[mb, K].
    libxsmm_otrans(at, A + m0, sizeof(float), mb, K, lda, K);
    float* c = C + static_cast<ptrdiff_t>(m0) * ldc;
    if (!gemm_xsmm(false, mb, N, K, at, K, B, ldb, beta, c, ldc))
      gemm_eigen(false, false, mb, N, K, at, K, B, ldb, beta, c, ldc);
  }
}

// Blocks of kOrderRows rows x kOrderCols columns (kOrderRows > kInOrderMaxRows: gemm()'s calls
// are one block of rows, all their chains in flight per k). The fused multiply-add is explicit
// (_mm512_fmadd_ps, std::fma): ISO C++ mode compiles a*b+c unfused, and libxsmm's kernels fuse.
constexpr int kOrderRows = 12, kOrderCols = 16;

#ifdef __AVX512F__
// One 16-float vector per row, the edges masked.
template <bool kTransA>
void in_order_block(int rows, int cols, int K, const float* A, int lda, const float* B, int ldb,
                    float beta, float* C, int ldc) {
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1u);
  __m512 acc[kOrderRows];
  for (int i = 0; i < kOrderRows; ++i)
    acc[i] = beta != 0.0f && i < rows
                 ? _mm512_maskz_loadu_ps(mask, C + static_cast<ptrdiff_t>(i) * ldc)
                 : _mm512_setzero_ps();
  for (int k = 0; k < K; ++k) {
    const __m512 b = _mm512_maskz_loadu_ps(mask, B + static_cast<ptrdiff_t>(k) * ldb);
    for (int i = 0; i < kOrderRows; ++i) {
      if (i >= rows) break;
      const float a =
          kTransA ? A[static_cast<ptrdiff_t>(k) * lda + i] : A[static_cast<ptrdiff_t>(i) * lda + k];
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc[i]);
    }
  }
  for (int i = 0; i < rows; ++i)
    _mm512_mask_storeu_ps(C + static_cast<ptrdiff_t>(i) * ldc, mask, acc[i]);
}
#else
// Without AVX-512 gemm() never takes this path (libxsmm's AVX2 kernels add in order); the
// scalar form serves the tests of the AVX2 build.
template <bool kTransA>
void in_order_block(int rows, int cols, int K, const float* A, int lda, const float* B, int ldb,
                    float beta, float* C, int ldc) {
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      float acc = beta != 0.0f ? C[static_cast<ptrdiff_t>(i) * ldc + j] : 0.0f;
      for (int k = 0; k < K; ++k) {
        const float a = kTransA ? A[static_cast<ptrdiff_t>(k) * lda + i]
                                : A[static_cast<ptrdiff_t>(i) * lda + k];
        acc = std::fma(a, B[static_cast<ptrdiff_t>(k) * ldb + j], acc);
      }
      C[static_cast<ptrdiff_t>(i) * ldc + j] = acc;
    }
  }
}
#endif

}  // namespace

void gemm_in_order(bool trans_a, int M, int N, int K, const float* A, int lda, const float* B,
                   int ldb, float beta, float* C, int ldc) {
  for (int r0 = 0; r0 < M; r0 += kOrderRows) {
    const int rows = std::min(kOrderRows, M - r0);
    for (int c0 = 0; c0 < N; c0 += kOrderCols) {
      const int cols = std::min(kOrderCols, N - c0);
      float* c = C + static_cast<ptrdiff_t>(r0) * ldc + c0;
      if (trans_a) {
        in_order_block<true>(rows, cols, K, A + r0, lda, B + c0, ldb, beta, c, ldc);
      } else {
        in_order_block<false>(rows, cols, K, A + static_cast<ptrdiff_t>(r0) * lda, lda, B + c0, ldb,
                              beta, c, ldc);
      }
    }
  }
}

// libxsmm is column-major; a row-major matrix X[r,c] with row stride ld is the column-major
// matrix X^T with leading dimension ld. So the row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T: libxsmm's "A" is our B and its "B" is our A, with m = N and
// n = M. Our trans_a becomes libxsmm's TRANS_B; our trans_b would be its TRANS_A, which 1.17
// cannot JIT (see gemm_nt_blocked).
void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (beta == 0.0f) {
      for (int i = 0; i < M; ++i) std::fill_n(C + static_cast<ptrdiff_t>(i) * ldc, N, 0.0f);
    }
    return;
  }
  if (!trans_a && !trans_b && int64_t{K} * N > kWideBFloats && M >= kPanelMinRows) {
    gemm_nn_blocked(M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (trans_a && !trans_b && int64_t{M} * N > kWideBFloats && K <= kTnMaxK) {
    gemm_tn_blocked(M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (!trans_b) {
    if (gemm_xsmm(trans_a, M, N, K, A, lda, B, ldb, beta, C, ldc)) return;
  } else if (!trans_a && M >= kNtMinRows) {
    gemm_nt_blocked(M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  gemm_eigen(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void gemm_fixed_rows(bool trans_a, int M, int N, int K, const float* A, int lda, const float* B,
                     int ldb, float beta, float* C, int ldc) {
  if (M > 0 && N > 0 && K > 0 && xsmm_rows_depend_on_m(M, N)) {
    const XsmmKey key{N, M, K, ldb, lda, ldc, xsmm_flags(trans_a, beta)};
    if (libxsmm_smmfunction fn = xsmm_kernel(key)) {
      fn(B, A, C);
      return;
    }
  }
  gemm(trans_a, false, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

// Column-major as libxsmm sees it (see gemm()): C^T[N,M] += sum B[i]^T A[i]^T, so libxsmm's "a"
// operands are our B[i] and its "b" operands our A[i].
bool gemm_batch_reduce(int M, int N, int K, const float* const* A, int lda, const float* const* B,
                       int ldb, int count, float* C, int ldc) {
  if (M <= 0 || N <= 0 || count <= 0) return true;
  libxsmm_smmfunction_reducebatch_addr fn = brgemm_kernel(N, M, K, ldb, lda, ldc);
  if (!fn) return false;
  const unsigned long long n_pairs = static_cast<unsigned long long>(count);
  fn(const_cast<const float**>(B), const_cast<const float**>(A), C, &n_pairs);
  return true;
}

bool gemm_batch_reduce_available(int M, int N, int K, int lda, int ldb, int ldc) {
  return brgemm_kernel(N, M, K, ldb, lda, ldc) != nullptr;
}

// y[N,O] = x[N,I] w[I,O] + b: the bias is broadcast into y first, then the GEMM adds onto it
// (beta 1), which saves a second pass over y.
void dense_forward(int n, int in, int out, const float* x, const float* w, const float* b,
                   float* y) {
  if (b != nullptr) {
    for (int r = 0; r < n; ++r) {
      float* __restrict row = y + static_cast<ptrdiff_t>(r) * out;
      for (int o = 0; o < out; ++o) row[o] = b[o];
    }
    gemm(false, false, n, out, in, x, in, w, out, 1.0f, y, out);
  } else {
    gemm(false, false, n, out, in, x, in, w, out, 0.0f, y, out);
  }
}

// dw[I,O] += x^T[I,N] dy[N,O]; dx[N,I] += dy[N,O] w^T[O,I]; db[O] += sum over rows of dy.
// db walks dy row by row so the inner loop runs over contiguous O. Fresh, dw is the GEMM with
// beta 0 (each element's chain of k terms starts from zero either way) and db starts at zero.
void dense_backward(int n, int in, int out, const float* x, const float* w, const float* dy,
                    float* dx, float* dw, float* db, bool dparams_fresh) {
  gemm_fixed_rows(true, in, out, n, x, in, dy, out, dparams_fresh ? 0.0f : 1.0f, dw, out);
  if (db != nullptr && dparams_fresh) std::fill_n(db, out, 0.0f);
  if (dx != nullptr) gemm(false, true, n, in, out, dy, out, w, out, 1.0f, dx, in);
  if (db != nullptr) {
    for (int r = 0; r < n; ++r) {
      const float* __restrict dy_row = dy + static_cast<ptrdiff_t>(r) * out;
      float* __restrict db_out = db;
      for (int o = 0; o < out; ++o) db_out[o] += dy_row[o];
    }
  }
}

}  // namespace nnfleet
