// Side-by-side candidates for m7's second convolution (26x26x32 -> 24x24x64, 3x3, "valid"; almost
// all of W1's training FLOPs and of W2's prediction), on the batch sizes the workloads use: 1 (W2
// at batch 1), 32 (W1's training batch), 64 (the pieces W2's 256-image batches are cut into).
// Candidates, one benchmark each so a single run alternates them:
//   gemm     the libxsmm/im2col path (conv2d_forward_gemm / conv2d_backward_gemm)
//   onednn   oneDNN direct convolution primitives, NHWC activations, weights either in Keras's
//            HWIO layout (hwio) or in the layout oneDNN prefers, reordered every call (any)
//   xnnpack  XNNPACK's NHWC convolution (inference only; weights packed at operator creation)
//   kernel   conv2d_forward / conv2d_backward, whatever the kernel interface picks (on this layer:
//            Winograd for the forward pass and both gradients, see conv2d_winograd.h)
// Backward cases: "data" is the input gradient, "weights" the kernel (and bias) gradient, "both"
// the two as training runs them. FLOP/s counts the direct algorithm's multiply-adds x 2.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <xnnpack.h>

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_data.h"
#include "kernels/conv2d.h"

namespace nnfleet {
namespace {

using bench::random_floats;

ConvGeometry m7_conv2() {
  ConvGeometry g;
  g.h = g.w = 26;
  g.c = 32;
  g.f = 64;
  g.kh = g.kw = 3;
  conv_geometry(g, false);
  return g;
}

void set_counters(benchmark::State& state, int n, double passes) {
  const ConvGeometry g = m7_conv2();
  const double flops = passes * 2.0 * n * g.oh * g.ow * g.f * g.kh * g.kw * g.c;
  const double it = static_cast<double>(state.iterations());
  state.counters["samples/s"] = benchmark::Counter(n * it, benchmark::Counter::kIsRate);
  state.counters["FLOP/s"] = benchmark::Counter(flops * it, benchmark::Counter::kIsRate,
                                                benchmark::Counter::OneK::kIs1000);
}

struct Buffers {
  explicit Buffers(const ConvGeometry& g, int n)
      : x(random_floats(size_t(n) * g.h * g.w * g.c, 1)),
        w(random_floats(size_t(g.kh) * g.kw * g.c * g.f, 2)),
        b(random_floats(g.f, 3)),
        dy(random_floats(size_t(n) * g.oh * g.ow * g.f, 4)),
        y(dy.size()),
        dx(x.size()),
        dw(w.size()),
        db(b.size()) {}
  std::vector<float> x, w, b, dy, y, dx, dw, db;
};

void BM_M7ConvGemm(benchmark::State& state, int pass) {
  const ConvGeometry g = m7_conv2();
  const int n = static_cast<int>(state.range(0));
  Buffers m(g, n);
  std::vector<float> scratch(conv2d_scratch_floats(g, n) + m.x.size());
  for (auto _ : state) {
    if (pass == 0)
      conv2d_forward_gemm(g, n, m.x.data(), m.w.data(), m.b.data(), m.y.data(), scratch.data());
    else
      conv2d_backward_gemm(g, n, m.x.data(), m.w.data(), m.dy.data(),
                           pass == 2 ? nullptr : m.dx.data(), m.dw.data(), m.db.data(),
                           scratch.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, pass == 1 ? 2.0 : 1.0);
}

void BM_M7ConvKernel(benchmark::State& state, int pass) {
  const ConvGeometry g = m7_conv2();
  const int n = static_cast<int>(state.range(0));
  Buffers m(g, n);
  std::vector<float> scratch(conv2d_scratch_floats(g, n));
  for (auto _ : state) {
    if (pass == 0)
      conv2d_forward(g, n, m.x.data(), m.w.data(), m.b.data(), m.y.data(), scratch.data());
    else
      conv2d_backward(g, n, m.x.data(), m.w.data(), m.dy.data(), pass == 2 ? nullptr : m.dx.data(),
                      m.dw.data(), m.db.data(), scratch.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, pass == 1 ? 2.0 : 1.0);
}

// oneDNN, raw: one primitive per (pass, n), created outside the timed loop; weights in HWIO
// (Keras's layout) or "any" plus a reorder from HWIO each iteration (as training would need).
void BM_M7ConvOnednn(benchmark::State& state, int pass, bool any_weights, bool per_image) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  omp_set_num_threads(1);
  const ConvGeometry g = m7_conv2();
  const int n = static_cast<int>(state.range(0));
  const int pn = per_image ? 1 : n;  // the primitive's batch
  Buffers m(g, n);
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const memory::desc src({pn, g.c, g.h, g.w}, dt::f32, tag::nhwc);
  const memory::desc dst({pn, g.f, g.oh, g.ow}, dt::f32, tag::nhwc);
  const memory::desc wei_user({g.f, g.c, g.kh, g.kw}, dt::f32, tag::hwio);
  const memory::desc wei_any({g.f, g.c, g.kh, g.kw}, dt::f32, any_weights ? tag::any : tag::hwio);
  const memory::desc bias({g.f}, dt::f32, tag::x);
  const memory::dims strides{1, 1}, pad{0, 0};
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  convolution_forward::primitive_desc fwd(
      {prop_kind::forward_training, algorithm::convolution_direct, src, wei_any, bias, dst, strides,
       pad, pad},
      attr, eng);
  memory x_m(src, eng, m.x.data()), y_m(dst, eng, m.y.data()), dy_m(dst, eng, m.dy.data()),
      dx_m(src, eng, m.dx.data()), b_m(bias, eng, m.b.data()), db_m(bias, eng, m.db.data()),
      w_user(wei_user, eng, m.w.data()), dw_user(wei_user, eng, m.dw.data());
  primitive prim;
  std::unordered_map<int, memory> args;
  memory::desc wei_md, scratch_md;
  std::string impl;
  if (pass == 0) {
    wei_md = fwd.weights_desc();
    scratch_md = fwd.scratchpad_desc();
    prim = convolution_forward(fwd);
    impl = fwd.impl_info_str();
  } else if (pass == 1) {
    convolution_backward_data::primitive_desc bd(
        {algorithm::convolution_direct, src, wei_any, dst, strides, pad, pad}, attr, eng, fwd);
    wei_md = bd.weights_desc();
    scratch_md = bd.scratchpad_desc();
    prim = convolution_backward_data(bd);
    impl = bd.impl_info_str();
  } else {
    convolution_backward_weights::primitive_desc bw(
        {algorithm::convolution_direct, src, wei_any, bias, dst, strides, pad, pad}, attr, eng,
        fwd);
    wei_md = bw.diff_weights_desc();
    scratch_md = bw.scratchpad_desc();
    prim = convolution_backward_weights(bw);
    impl = bw.impl_info_str();
  }
  std::vector<float> wbuf(wei_md.get_size() / sizeof(float) + 16),
      sbuf(scratch_md.get_size() / sizeof(float) + 16);
  memory w_m(wei_md, eng, wbuf.data()), sp(scratch_md, eng, sbuf.data());
  const bool reorder_w = wei_md != wei_user;
  reorder to_blocked, from_blocked;
  if (reorder_w) {
    to_blocked = reorder(w_user, w_m);
    from_blocked = reorder(w_m, dw_user);
  }
  if (pass == 0)
    args = {{DNNL_ARG_SRC, x_m},
            {DNNL_ARG_WEIGHTS, reorder_w ? w_m : w_user},
            {DNNL_ARG_BIAS, b_m},
            {DNNL_ARG_DST, y_m},
            {DNNL_ARG_SCRATCHPAD, sp}};
  else if (pass == 1)
    args = {{DNNL_ARG_DIFF_DST, dy_m},
            {DNNL_ARG_WEIGHTS, reorder_w ? w_m : w_user},
            {DNNL_ARG_DIFF_SRC, dx_m},
            {DNNL_ARG_SCRATCHPAD, sp}};
  else
    args = {{DNNL_ARG_SRC, x_m},
            {DNNL_ARG_DIFF_DST, dy_m},
            {DNNL_ARG_DIFF_WEIGHTS, reorder_w ? w_m : dw_user},
            {DNNL_ARG_DIFF_BIAS, db_m},
            {DNNL_ARG_SCRATCHPAD, sp}};
  for (auto _ : state) {
    if (reorder_w && pass != 2) to_blocked.execute(s, w_user, w_m);
    if (per_image) {
      const int64_t xs = int64_t{g.h} * g.w * g.c, ys = int64_t{g.oh} * g.ow * g.f;
      for (int i = 0; i < n; ++i) {
        x_m.set_data_handle(m.x.data() + i * xs);
        y_m.set_data_handle(m.y.data() + i * ys);
        dy_m.set_data_handle(m.dy.data() + i * ys);
        dx_m.set_data_handle(m.dx.data() + i * xs);
        prim.execute(s, args);
      }
    } else {
      prim.execute(s, args);
    }
    if (reorder_w && pass == 2) from_blocked.execute(s, w_m, dw_user);
    s.wait();
    benchmark::ClobberMemory();
  }
  state.SetLabel(impl + (reorder_w ? " w-reorder" : "") + (per_image ? " per-image" : ""));
  set_counters(state, n, 1.0);
}

void BM_M7ConvXnnpack(benchmark::State& state) {
  const ConvGeometry g = m7_conv2();
  const int n = static_cast<int>(state.range(0));
  Buffers m(g, n);
  if (xnn_initialize(nullptr) != xnn_status_success) {
    state.SkipWithError("xnn_initialize failed");
    return;
  }
  xnn_operator_t op = nullptr;
  if (xnn_create_convolution2d_nhwc_f32(0, 0, 0, 0, g.kh, g.kw, 1, 1, 1, 1, 1, g.c, g.f, g.c, g.f,
                                        m.w.data(), m.b.data(), -INFINITY, INFINITY, 0,
                                        &op) != xnn_status_success ||
      xnn_setup_convolution2d_nhwc_f32(op, n, g.h, g.w, m.x.data(), m.y.data(), nullptr) !=
          xnn_status_success) {
    state.SkipWithError("xnnpack convolution create/setup failed");
    return;
  }
  for (auto _ : state) {
    xnn_run_operator(op, nullptr);
    benchmark::ClobberMemory();
  }
  xnn_delete_operator(op);
  set_counters(state, n, 1.0);
}

void batches(benchmark::internal::Benchmark* b) { b->ArgName("n")->Arg(1)->Arg(32)->Arg(64); }
void train_batch(benchmark::internal::Benchmark* b) { b->ArgName("n")->Arg(32); }

BENCHMARK_CAPTURE(BM_M7ConvGemm, forward, 0)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, forward_hwio, 0, false, false)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, forward_any, 0, true, false)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, forward_any_per_image, 0, true, true)->Apply(batches);
BENCHMARK(BM_M7ConvXnnpack)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvKernel, forward, 0)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvGemm, backward_both, 1)->Apply(train_batch);
BENCHMARK_CAPTURE(BM_M7ConvGemm, backward_weights, 2)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, backward_data_hwio, 1, false, false)->Apply(train_batch);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, backward_data_any, 1, true, false)->Apply(train_batch);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, backward_weights_hwio, 2, false, false)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, backward_weights_any, 2, true, false)->Apply(batches);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, backward_data_any_per_image, 1, true, true)->Apply(train_batch);
BENCHMARK_CAPTURE(BM_M7ConvOnednn, backward_weights_any_per_image, 2, true, true)
    ->Apply(train_batch);
BENCHMARK_CAPTURE(BM_M7ConvKernel, backward_both, 1)->Apply(train_batch);
BENCHMARK_CAPTURE(BM_M7ConvKernel, backward_weights, 2)->Apply(batches);

}  // namespace
}  // namespace nnfleet
