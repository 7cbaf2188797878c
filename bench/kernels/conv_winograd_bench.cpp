// Winograd F(2x2,3x3) against the direct convolution it replaces, side by side on W1/W2's 3x3
// layers (m7: 28x28x1 -> 32 and 26x26x32 -> 64; m6: 13x13x16 -> 32; all "valid"), at batch 1
// (W2 at batch 1), 32 (W1's training batch) and 64. Candidates per pass, registered next to each
// other so one run (--benchmark_enable_random_interleaving) alternates them:
//   direct    the path conv2d_forward / the input-gradient half of conv2d_backward took before
//             Winograd: oneDNN's JIT primitive where it serves the shape, else the GEMM path; for
//             the kernel gradient the GEMM path (oneDNN's backward-weights primitive is measured
//             beside the kernel interface in conv_candidates_bench.cpp)
//   winograd  conv2d_forward_winograd / conv2d_backward_data_winograd /
//             conv2d_backward_weights_winograd
//   kernel    conv2d_forward / conv2d_backward, whatever the kernel interface picks now
//   f2, f4    F(2x2,3x3) against F(4x4,3x3) (conv2d_forward_winograd_f4,
//             conv2d_backward_data_winograd_f4) on m7's second layer, batch 1 to 256
// Arguments: h (input height = width), c, f, n. FLOP/s counts the direct algorithm's
// multiply-adds x 2, so Winograd's figure can exceed the machine's peak.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "bench_data.h"
#include "kernels/conv2d.h"
#include "kernels/conv2d_onednn.h"
#include "kernels/conv2d_winograd.h"

namespace nnfleet {
namespace {

using bench::random_floats;

struct Setup {
  explicit Setup(const benchmark::State& state) : n(static_cast<int>(state.range(3))) {
    g.h = g.w = static_cast<int>(state.range(0));
    g.c = static_cast<int>(state.range(1));
    g.f = static_cast<int>(state.range(2));
    g.kh = g.kw = 3;
    conv_geometry(g, false);
    x = random_floats(size_t(n) * g.h * g.w * g.c, 1);
    w = random_floats(size_t(9) * g.c * g.f, 2);
    b = random_floats(g.f, 3);
    dy = random_floats(size_t(n) * g.oh * g.ow * g.f, 4);
    y.resize(dy.size());
    dx.resize(x.size());
    dw.resize(w.size());
    db.resize(b.size());
    // conv2d_scratch_floats leaves oneDNN out where Winograd takes both passes; this bench calls
    // oneDNN directly, so it plans it too.
    scratch.resize(std::max({conv2d_scratch_floats(g, n), conv2d_winograd_scratch_floats(g),
                             onednn_conv_scratch_floats(g, n)}));
  }
  void count(benchmark::State& state) const {
    const double flops = 2.0 * n * g.oh * g.ow * g.f * 9.0 * g.c;
    const double it = static_cast<double>(state.iterations());
    state.counters["samples/s"] = benchmark::Counter(n * it, benchmark::Counter::kIsRate);
    state.counters["FLOP/s"] = benchmark::Counter(flops * it, benchmark::Counter::kIsRate,
                                                  benchmark::Counter::OneK::kIs1000);
  }
  ConvGeometry g;
  int n;
  std::vector<float> x, w, b, dy, y, dx, dw, db, scratch;
};

enum class Path { kDirect, kWinograd, kWinograd4, kKernel };

void BM_WinoForward(benchmark::State& state, Path path) {
  Setup s(state);
  const Activation relu{Act::kRelu};
  for (auto _ : state) {
    float* sc = s.scratch.data();
    if (path == Path::kWinograd) {
      conv2d_forward_winograd(s.g, s.n, s.x.data(), s.w.data(), s.b.data(), s.y.data(), sc, &relu,
                              s.y.data());
    } else if (path == Path::kWinograd4) {
      conv2d_forward_winograd_f4(s.g, s.n, s.x.data(), s.w.data(), s.b.data(), s.y.data(), sc,
                                 &relu, s.y.data());
    } else if (path == Path::kKernel) {
      conv2d_forward(s.g, s.n, s.x.data(), s.w.data(), s.b.data(), s.y.data(), sc, &relu,
                     s.y.data());
    } else if (!onednn_conv_forward(s.g, s.n, s.x.data(), s.w.data(), s.b.data(), s.y.data(), sc,
                                    &relu, s.y.data())) {
      conv2d_forward_gemm(s.g, s.n, s.x.data(), s.w.data(), s.b.data(), s.y.data(), sc, &relu,
                          s.y.data());
    }
    benchmark::ClobberMemory();
  }
  s.count(state);
  if (path == Path::kDirect) state.SetLabel(onednn_conv_impl(s.g, false));
}

// The input gradient alone (the kernel gradient is not part of the comparison).
void BM_WinoBackwardData(benchmark::State& state, Path path) {
  Setup s(state);
  for (auto _ : state) {
    float* sc = s.scratch.data();
    if (path == Path::kWinograd) {
      conv2d_backward_data_winograd(s.g, s.n, s.w.data(), s.dy.data(), s.dx.data(), sc);
    } else if (path == Path::kWinograd4) {
      conv2d_backward_data_winograd_f4(s.g, s.n, s.w.data(), s.dy.data(), s.dx.data(), sc);
    } else if (!onednn_conv_backward_data(s.g, s.n, s.w.data(), s.dy.data(), s.dx.data(), sc)) {
      // No oneDNN plan: the GEMM path, whose kernel-gradient half is timed too.
      conv2d_backward_gemm(s.g, s.n, s.x.data(), s.w.data(), s.dy.data(), s.dx.data(), s.dw.data(),
                           nullptr, sc);
    }
    benchmark::ClobberMemory();
  }
  s.count(state);
  if (path == Path::kDirect) state.SetLabel(onednn_conv_impl(s.g, true));
}

// The kernel gradient alone (no bias): direct is the GEMM path conv2d_backward took before.
void BM_WinoBackwardWeights(benchmark::State& state, Path path) {
  Setup s(state);
  for (auto _ : state) {
    float* sc = s.scratch.data();
    if (path == Path::kWinograd) {
      conv2d_backward_weights_winograd(s.g, s.n, s.x.data(), s.dy.data(), s.dw.data(), sc);
    } else {
      conv2d_backward_gemm(s.g, s.n, s.x.data(), s.w.data(), s.dy.data(), nullptr, s.dw.data(),
                           nullptr, sc);
    }
    benchmark::ClobberMemory();
  }
  s.count(state);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"h", "c", "f", "n"});
  for (int n : {1, 32, 64}) {
    b->Args({26, 32, 64, n});
    b->Args({13, 16, 32, n});
    b->Args({28, 1, 32, n});
  }
}

// A first layer (m7's 28x28x1) computes no input gradient, so only the inner layers.
void backward_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"h", "c", "f", "n"});
  for (int n : {1, 32, 64}) {
    b->Args({26, 32, 64, n});
    b->Args({13, 16, 32, n});
  }
}

// F(4x4,3x3) against F(2x2,3x3) on m7's second layer, batches 1 to 256 (W2 predicts in 256s).
void f4_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"h", "c", "f", "n"});
  for (int n : {1, 32, 64, 256}) b->Args({26, 32, 64, n});
}

BENCHMARK_CAPTURE(BM_WinoForward, direct, Path::kDirect)->Apply(shapes);
BENCHMARK_CAPTURE(BM_WinoForward, winograd, Path::kWinograd)->Apply(shapes);
BENCHMARK_CAPTURE(BM_WinoForward, kernel, Path::kKernel)->Apply(shapes);
BENCHMARK_CAPTURE(BM_WinoBackwardData, direct, Path::kDirect)->Apply(backward_shapes);
BENCHMARK_CAPTURE(BM_WinoBackwardData, winograd, Path::kWinograd)->Apply(backward_shapes);
BENCHMARK_CAPTURE(BM_WinoForward, f2, Path::kWinograd)->Apply(f4_shapes);
BENCHMARK_CAPTURE(BM_WinoForward, f4, Path::kWinograd4)->Apply(f4_shapes);
BENCHMARK_CAPTURE(BM_WinoBackwardData, f2, Path::kWinograd)->Apply(f4_shapes);
BENCHMARK_CAPTURE(BM_WinoBackwardData, f4, Path::kWinograd4)->Apply(f4_shapes);
BENCHMARK_CAPTURE(BM_WinoBackwardWeights, direct, Path::kDirect)->Apply(backward_shapes);
BENCHMARK_CAPTURE(BM_WinoBackwardWeights, winograd, Path::kWinograd)->Apply(backward_shapes);

}  // namespace
}  // namespace nnfleet
