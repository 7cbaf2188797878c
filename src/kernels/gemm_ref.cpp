// Naive reference twins of the GEMM and Dense kernels: plain loops with double accumulation,
// written for obviousness, not speed. Only tests call them, as oracles for the fast versions.
#include <cstddef>

#include "kernels/gemm.h"

namespace nnfleet {

// C[i,j] = beta C[i,j] + sum_k op(A)[i,k] op(B)[k,j]; op(A)[i,k] is A[k*lda+i] when trans_a,
// op(B)[k,j] is B[j*ldb+k] when trans_b. C is not read when beta is 0.
void gemm_ref(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int k = 0; k < K; ++k) {
        const float a = trans_a ? A[static_cast<ptrdiff_t>(k) * lda + i]
                                : A[static_cast<ptrdiff_t>(i) * lda + k];
        const float b = trans_b ? B[static_cast<ptrdiff_t>(j) * ldb + k]
                                : B[static_cast<ptrdiff_t>(k) * ldb + j];
        acc += static_cast<double>(a) * b;
      }
      float& c = C[static_cast<ptrdiff_t>(i) * ldc + j];
      c = beta == 0.0f ? static_cast<float>(acc) : static_cast<float>(beta * c + acc);
    }
  }
}

// y[N,O] = x[N,I] w[I,O] + b[O].
void dense_forward_ref(int n, int in, int out, const float* x, const float* w, const float* b,
                       float* y) {
  for (int r = 0; r < n; ++r) {
    for (int o = 0; o < out; ++o) {
      double acc = b != nullptr ? b[o] : 0.0;
      for (int i = 0; i < in; ++i) {
        acc += static_cast<double>(x[static_cast<ptrdiff_t>(r) * in + i]) *
               w[static_cast<ptrdiff_t>(i) * out + o];
      }
      y[static_cast<ptrdiff_t>(r) * out + o] = static_cast<float>(acc);
    }
  }
}

// dx[r,i] += sum_o dy[r,o] w[i,o]; dw[i,o] += sum_r x[r,i] dy[r,o]; db[o] += sum_r dy[r,o].
void dense_backward_ref(int n, int in, int out, const float* x, const float* w, const float* dy,
                        float* dx, float* dw, float* db) {
  if (dx != nullptr) {
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < in; ++i) {
        double acc = 0.0;
        for (int o = 0; o < out; ++o) {
          acc += static_cast<double>(dy[static_cast<ptrdiff_t>(r) * out + o]) *
                 w[static_cast<ptrdiff_t>(i) * out + o];
        }
        dx[static_cast<ptrdiff_t>(r) * in + i] += static_cast<float>(acc);
      }
    }
  }
  for (int i = 0; i < in; ++i) {
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int r = 0; r < n; ++r) {
        acc += static_cast<double>(x[static_cast<ptrdiff_t>(r) * in + i]) *
               dy[static_cast<ptrdiff_t>(r) * out + o];
      }
      dw[static_cast<ptrdiff_t>(i) * out + o] += static_cast<float>(acc);
    }
  }
  if (db != nullptr) {
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int r = 0; r < n; ++r) acc += dy[static_cast<ptrdiff_t>(r) * out + o];
      db[o] += static_cast<float>(acc);
    }
  }
}

}  // namespace nnfleet
