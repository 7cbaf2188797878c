// Single-threaded matrix kernels: GEMM and the Dense layer's forward and backward.
// Dimension letters: M N K for GEMM; N batch rows, I input features, O output features.
// All matrices are row-major float32. The fast versions go through a tuned library (chosen by
// benchmark, see BENCHMARKS.md); each keeps a naive `_ref` twin used only by tests.
#pragma once

namespace nnfleet {

// C[M,N] = beta * C + op(A) * op(B), op(A) is [M,K] (A stored [K,M] when trans_a), op(B) is [K,N]
// (B stored [N,K] when trans_b). lda/ldb/ldc are row strides in floats. beta is 0 or 1; with
// beta 0, C is overwritten (never read).
void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc);
void gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);

// C[M,N] = beta * C + op(A) * B (op(A) as in gemm), every element one chain of fused multiply-adds
// over k in order, from beta * C: the order of libxsmm's kernels on AVX2, and on AVX-512 for N >
// 16, so a row's result never depends on M nor on the rows beside it. gemm() runs it where
// libxsmm's AVX-512 kernels do depend on M (N <= 16 and 2 <= M <= 11, see gemm.cpp); public for its
// tests.
void gemm_in_order(bool trans_a, int M, int N, int K, const float* A, int lda, const float* B,
                   int ldb, float beta, float* C, int ldc);

// gemm() for a caller whose M is fixed by what it computes, never by a batch (a kernel gradient's
// rows are the kernel's taps): a row's result may then depend on M, so on AVX-512 the rows that
// gemm() sends to gemm_in_order go to libxsmm's own kernels. Still one fixed order of operations
// for a given M, N and K, whatever the buffers' alignment.
void gemm_fixed_rows(bool trans_a, int M, int N, int K, const float* A, int lda, const float* B,
                     int ldb, float beta, float* C, int ldc);

// Batch-reduce GEMM: C[M,N] += sum over i < count of A[i][M,K] * B[i][K,N] (row-major, leading
// dimensions shared by every A[i] and B[i]), accumulated in registers across the batch, through
// libxsmm's reduce-batch kernels. Returns false (C untouched) when libxsmm has no kernel for the
// shape; callers then use another path. For convolutions, the A[i] are shifted views of the input,
// one per kernel tap, so no im2col copy is needed.
bool gemm_batch_reduce(int M, int N, int K, const float* const* A, int lda, const float* const* B,
                       int ldb, int count, float* C, int ldc);
// Whether gemm_batch_reduce has a kernel for the shape (then it never returns false for it).
bool gemm_batch_reduce_available(int M, int N, int K, int lda, int ldb, int ldc);

// y[N,O] = x[N,I] * w[I,O] + b[O] (b may be null). w uses Keras's Dense kernel layout.
void dense_forward(int n, int in, int out, const float* x, const float* w, const float* b,
                   float* y);
void dense_forward_ref(int n, int in, int out, const float* x, const float* w, const float* b,
                       float* y);

// Accumulates (+=): dx[N,I] += dy[N,O] * w^T (skipped when dx is null), dw[I,O] += x^T * dy,
// db[O] += column sums of dy (skipped when db is null). With dparams_fresh, dw and db hold no
// zeros: they are written whole, with the bits += gives on zeros (Layer::writes_whole_dparams).
void dense_backward(int n, int in, int out, const float* x, const float* w, const float* dy,
                    float* dx, float* dw, float* db, bool dparams_fresh = false);
void dense_backward_ref(int n, int in, int out, const float* x, const float* w, const float* dy,
                        float* dx, float* dw, float* db);

}  // namespace nnfleet
