// Microbenchmarks for the kernels on W1's shapes (bench/workloads: batch 32): Dense forward and
// backward for every Dense layer of m1-m8, Conv2D forward and backward for m5-m7's convolutions,
// plus raw gemm() on the same products; MaxPooling2D(2) forward and backward on m5-m7's pooled
// maps; activation forward and backward: relu on m7's conv outputs, tanh on m4's 64 units, softmax
// on the 10 outputs (and the same rows through the general softmax loops). Dropout and Flatten have
// no kernel of their own (Flatten is a reshape, src/layers/reshaping.cpp; Dropout a mask applied in
// src/layers/dropout.cpp), so they have no benchmark here. Counters: samples/s (batch rows per
// second) and FLOP/s (multiply-adds counted as 2; pooling and activations, which do no
// multiply-adds, count one FLOP per element visited). Run pinned to one core, e.g.
//   taskset -c 1 ./build/bench/kernels/kernels_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/activation.h"
#include "kernels/conv2d.h"
#include "kernels/gemm.h"
#include "kernels/pool.h"

namespace nnfleet {
namespace {

constexpr int kBatch = 32;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

void set_counters(benchmark::State& state, double samples, double flops) {
  const double iterations = static_cast<double>(state.iterations());
  state.counters["samples/s"] =
      benchmark::Counter(samples * iterations, benchmark::Counter::kIsRate);
  state.counters["FLOP/s"] = benchmark::Counter(flops * iterations, benchmark::Counter::kIsRate,
                                                benchmark::Counter::OneK::kIs1000);
}

// Args: in, out.
void BM_DenseForward(benchmark::State& state) {
  const int in = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1));
  const auto x = random_floats(static_cast<size_t>(kBatch) * in, 1),
             w = random_floats(static_cast<size_t>(in) * out, 2);
  const auto b = random_floats(out, 3);
  std::vector<float> y(static_cast<size_t>(kBatch) * out);
  for (auto _ : state) {
    dense_forward(kBatch, in, out, x.data(), w.data(), b.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, 2.0 * kBatch * in * out);
}

// Args: in, out, with_dx. Backward of a first layer has no dx (its input is the data).
void BM_DenseBackward(benchmark::State& state) {
  const int in = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1));
  const bool with_dx = state.range(2) != 0;
  const auto x = random_floats(static_cast<size_t>(kBatch) * in, 1),
             w = random_floats(static_cast<size_t>(in) * out, 2);
  const auto dy = random_floats(static_cast<size_t>(kBatch) * out, 3);
  std::vector<float> dx(static_cast<size_t>(kBatch) * in), dw(static_cast<size_t>(in) * out),
      db(out);
  for (auto _ : state) {
    dense_backward(kBatch, in, out, x.data(), w.data(), dy.data(), with_dx ? dx.data() : nullptr,
                   dw.data(), db.data());
    benchmark::DoNotOptimize(dw.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, (with_dx ? 4.0 : 2.0) * kBatch * in * out);
}

void dense_args(benchmark::internal::Benchmark* b, bool backward) {
  const int64_t shapes[][2] = {{784, 32},  {784, 128}, {784, 256}, {256, 128},
                               {784, 512}, {512, 512}, {128, 10}};
  for (const auto& s : shapes) {
    if (backward) {
      b->Args({s[0], s[1], s[0] == 784 ? 0 : 1});
    } else {
      b->Args({s[0], s[1]});
    }
  }
}
BENCHMARK(BM_DenseForward)->ArgNames({"in", "out"})->Apply([](auto* b) { dense_args(b, false); });
BENCHMARK(BM_DenseBackward)->ArgNames({"in", "out", "dx"})->Apply([](auto* b) {
  dense_args(b, true);
});

// Args: M, N, K, trans_a, trans_b: the raw products behind the Dense kernels.
void BM_Gemm(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1));
  const int K = static_cast<int>(state.range(2));
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const auto A = random_floats(static_cast<size_t>(M) * K, 1),
             B = random_floats(static_cast<size_t>(K) * N, 2);
  std::vector<float> C(static_cast<size_t>(M) * N);
  for (auto _ : state) {
    gemm(ta, tb, M, N, K, A.data(), ta ? M : K, B.data(), tb ? K : N, 0.0f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, M, 2.0 * M * N * K);
}
BENCHMARK(BM_Gemm)
    ->ArgNames({"M", "N", "K", "ta", "tb"})
    ->Args({32, 128, 784, 0, 0})
    ->Args({32, 10, 128, 0, 0})
    ->Args({32, 512, 784, 0, 0})
    ->Args({32 * 576, 64, 288, 0, 0})
    ->Args({784, 128, 32, 1, 0})
    ->Args({32, 784, 128, 0, 1})
    ->Args({32, 512, 512, 0, 1})
    // m7's Dense 9216 -> 128 at W2's batch 256, W1's batch 32, predict's forward pieces of 8 rows
    // (src/api/predict_engine.cpp) and batch 1.
    ->Args({256, 128, 9216, 0, 0})
    ->Args({32, 128, 9216, 0, 0})
    ->Args({8, 128, 9216, 0, 0})
    ->Args({1, 128, 9216, 0, 0})
    // Its backward at batch 32: the kernel gradient x^T dy and the input gradient dy W^T.
    ->Args({9216, 128, 32, 1, 0})
    ->Args({32, 9216, 128, 0, 1});

// W1's convolutions, "valid", 3x3: {h, c, f} with h == w.
ConvGeometry conv_shape(benchmark::State& state) {
  ConvGeometry g;
  g.h = g.w = static_cast<int>(state.range(0));
  g.c = static_cast<int>(state.range(1));
  g.f = static_cast<int>(state.range(2));
  g.kh = g.kw = 3;
  conv_geometry(g, false);
  return g;
}

double conv_flops(const ConvGeometry& g) {
  return 2.0 * kBatch * g.oh * g.ow * g.f * g.kh * g.kw * g.c;
}

void BM_Conv2dForward(benchmark::State& state) {
  const ConvGeometry g = conv_shape(state);
  const auto x = random_floats(static_cast<size_t>(kBatch) * g.h * g.w * g.c, 1);
  const auto w = random_floats(size_t{9} * g.c * g.f, 2), b = random_floats(g.f, 3);
  std::vector<float> y(static_cast<size_t>(kBatch) * g.oh * g.ow * g.f),
      scratch(conv2d_scratch_floats(g, kBatch));
  for (auto _ : state) {
    conv2d_forward(g, kBatch, x.data(), w.data(), b.data(), y.data(), scratch.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, conv_flops(g));
}

// Arg 3: with_dx (a first layer has none).
void BM_Conv2dBackward(benchmark::State& state) {
  const ConvGeometry g = conv_shape(state);
  const bool with_dx = state.range(3) != 0;
  const auto x = random_floats(static_cast<size_t>(kBatch) * g.h * g.w * g.c, 1);
  const auto w = random_floats(size_t{9} * g.c * g.f, 2);
  const auto dy = random_floats(static_cast<size_t>(kBatch) * g.oh * g.ow * g.f, 3);
  std::vector<float> dx(x.size()), dw(w.size()), db(g.f), scratch(conv2d_scratch_floats(g, kBatch));
  for (auto _ : state) {
    conv2d_backward(g, kBatch, x.data(), w.data(), dy.data(), with_dx ? dx.data() : nullptr,
                    dw.data(), db.data(), scratch.data());
    benchmark::DoNotOptimize(dw.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, (with_dx ? 2.0 : 1.0) * conv_flops(g));
}

BENCHMARK(BM_Conv2dForward)
    ->ArgNames({"h", "c", "f"})
    ->Args({28, 1, 32})
    ->Args({26, 32, 64})
    ->Args({28, 1, 16})
    ->Args({13, 16, 32})
    ->Args({28, 1, 8});
BENCHMARK(BM_Conv2dBackward)
    ->ArgNames({"h", "c", "f", "dx"})
    ->Args({28, 1, 32, 0})
    ->Args({26, 32, 64, 1})
    ->Args({28, 1, 16, 0})
    ->Args({13, 16, 32, 1})
    ->Args({28, 1, 8, 0});

// W1's MaxPooling2D(2): 2x2 windows, stride 2, "valid", on {h, c} with h == w: m5's 26x26x8,
// m6's 26x26x16 and 11x11x32 (the last row and column dropped), m7's 24x24x64.
// FLOP/s: no multiply-adds, so one FLOP per input element visited (batch x OH x OW x C x 4
// window taps), forward and backward alike (backward recomputes each window's max from x and y).
ConvGeometry pool_shape(benchmark::State& state) {
  ConvGeometry g;
  g.h = g.w = static_cast<int>(state.range(0));
  g.c = g.f = static_cast<int>(state.range(1));
  g.kh = g.kw = 2;
  g.sh = g.sw = 2;
  conv_geometry(g, false);
  return g;
}

double pool_flops(const ConvGeometry& g) {
  return static_cast<double>(kBatch) * g.oh * g.ow * g.c * g.kh * g.kw;
}

void BM_MaxPool2dForward(benchmark::State& state) {
  const ConvGeometry g = pool_shape(state);
  const auto x = random_floats(static_cast<size_t>(kBatch) * g.h * g.w * g.c, 1);
  std::vector<float> y(static_cast<size_t>(kBatch) * g.oh * g.ow * g.c);
  for (auto _ : state) {
    max_pool2d_forward(g, kBatch, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, pool_flops(g));
}

void BM_MaxPool2dBackward(benchmark::State& state) {
  const ConvGeometry g = pool_shape(state);
  const auto x = random_floats(static_cast<size_t>(kBatch) * g.h * g.w * g.c, 1);
  std::vector<float> y(static_cast<size_t>(kBatch) * g.oh * g.ow * g.c);
  max_pool2d_forward(g, kBatch, x.data(), y.data());
  const auto dy = random_floats(y.size(), 3);
  std::vector<float> dx(x.size());
  for (auto _ : state) {
    max_pool2d_backward(g, kBatch, x.data(), y.data(), dy.data(), dx.data());
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, pool_flops(g));
}

void pool_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"h", "c"})->Args({26, 8})->Args({26, 16})->Args({11, 32})->Args({24, 64});
}
BENCHMARK(BM_MaxPool2dForward)->Apply(pool_args);
BENCHMARK(BM_MaxPool2dBackward)->Apply(pool_args);

// Activations on rows = batch of `features` values (Arg). FLOP/s: no multiply-adds, so one FLOP
// per element (batch x features), forward and backward alike, whatever the function costs.
Activation make_act(Act kind) {
  Activation a;
  a.kind = kind;
  return a;
}

void BM_ActivationForward(benchmark::State& state, Act kind) {
  const Activation a = make_act(kind);
  const int64_t features = state.range(0);
  const auto x = random_floats(static_cast<size_t>(kBatch * features), 1);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    activation_forward(a, kBatch, features, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, static_cast<double>(kBatch) * features);
}

void BM_ActivationBackward(benchmark::State& state, Act kind) {
  const Activation a = make_act(kind);
  const int64_t features = state.range(0);
  const auto x = random_floats(static_cast<size_t>(kBatch * features), 1);
  std::vector<float> y(x.size());
  activation_forward(a, kBatch, features, x.data(), y.data());
  const auto dy = random_floats(x.size(), 3);
  std::vector<float> dx(x.size());
  for (auto _ : state) {
    activation_backward(a, kBatch, features, x.data(), y.data(), dy.data(), dx.data());
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, static_cast<double>(kBatch) * features);
}

// relu: m7's conv outputs 26x26x32 and 24x24x64; tanh: m4's Dense(64); softmax: the 10 outputs.
BENCHMARK_CAPTURE(BM_ActivationForward, relu, Act::kRelu)
    ->ArgName("features")
    ->Arg(26 * 26 * 32)
    ->Arg(24 * 24 * 64);
BENCHMARK_CAPTURE(BM_ActivationBackward, relu, Act::kRelu)
    ->ArgName("features")
    ->Arg(26 * 26 * 32)
    ->Arg(24 * 24 * 64);
BENCHMARK_CAPTURE(BM_ActivationForward, tanh, Act::kTanh)->ArgName("features")->Arg(64);
BENCHMARK_CAPTURE(BM_ActivationBackward, tanh, Act::kTanh)->ArgName("features")->Arg(64);
BENCHMARK_CAPTURE(BM_ActivationForward, softmax, Act::kSoftmax)->ArgName("features")->Arg(10);
BENCHMARK_CAPTURE(BM_ActivationBackward, softmax, Act::kSoftmax)->ArgName("features")->Arg(10);

// The same softmax rows through the general loops, which rows of more than 16 values take: beside
// the two above (rows of 10 take the fixed-width form), what that form saves; the same bits.
void BM_SoftmaxGeneralForward(benchmark::State& state) {
  const int64_t features = state.range(0);
  const auto x = random_floats(static_cast<size_t>(kBatch * features), 1);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    softmax_forward_general(kBatch, features, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, static_cast<double>(kBatch) * features);
}

void BM_SoftmaxGeneralBackward(benchmark::State& state) {
  const int64_t features = state.range(0);
  const auto x = random_floats(static_cast<size_t>(kBatch * features), 1);
  std::vector<float> y(x.size());
  softmax_forward_general(kBatch, features, x.data(), y.data());
  const auto dy = random_floats(x.size(), 3);
  std::vector<float> dx(x.size());
  for (auto _ : state) {
    softmax_backward_general(kBatch, features, y.data(), dy.data(), dx.data());
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, kBatch, static_cast<double>(kBatch) * features);
}

BENCHMARK(BM_SoftmaxGeneralForward)->ArgName("features")->Arg(10);
BENCHMARK(BM_SoftmaxGeneralBackward)->ArgName("features")->Arg(10);

}  // namespace
}  // namespace nnfleet
