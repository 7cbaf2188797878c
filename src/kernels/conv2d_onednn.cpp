// oneDNN direct convolutions for conv2d_forward and conv2d_backward's input gradient; see
// conv2d_onednn.h for the plan/run split. Chosen by side-by-side measurement on W1/W2's shapes
// (bench/kernels/conv_candidates_bench.cpp, BENCHMARKS.md): on AVX2 oneDNN's jit:avx2 forward beat
// the libxsmm batch-reduce path and XNNPACK; the kernel gradient stays on the im2col/GEMM path,
// which beat oneDNN's backward-weights primitive.
//
// Layouts: activations stay NHWC (oneDNN's nhwc tag, no reorders); the kernel arrives in Keras's
// [KH,KW,C,F] (oneDNN's hwio) and is reordered once per call into the blocked layout the primitive
// chose, in scratch. The hot path calls oneDNN's C API with arguments on the stack, so nnfleet
// allocates nothing there; each thread's memory objects and stream are made on its first call.
#include "kernels/conv2d_onednn.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <utility>
#include <vector>

#include "core/check.h"

namespace nnfleet {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

// Which convolutions oneDNN runs: stride 1, no dilation, a real spatial kernel, and channel
// counts that fill its 8-float AVX2 blocks (the im2col path keeps few-channel first layers, whose
// transposed im2col beats a channel-blocked kernel, and 1x1 convolutions, which are plain GEMMs).
bool wanted(const ConvGeometry& g) {
  return g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.kh * g.kw > 1 && g.c % 8 == 0 &&
         g.f % 8 == 0;
}

// The primitives of one geometry. Index [0] runs kOnednnPiece images, [1] one image; both use
// the same weights layout so one reorder serves a whole call.
struct Plan {
  bool usable = false;
  bool pieces = false;  // whether [0] is used (only when it runs the same code as [1])
  bool reorder_fwd_w = false, reorder_bwd_w = false;
  memory::desc x_md[2], y_md[2], w_user_md, w_fwd_md, w_bwd_md, b_md, sp_md;
  dnnl::primitive fwd[2][2];  // [piece][relu fused]
  dnnl::primitive bwd[2];     // [piece]
  dnnl::primitive to_fwd_w, to_bwd_w;
  size_t w_floats = 0, sp_floats = 0;
  std::string impl_fwd, impl_bwd;
};

// The engine, the plans and their mutex live until the process ends (never destroyed, so no
// primitive can outlive the engine during static destruction).
dnnl::engine& cpu_engine() {
  static auto* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

size_t round16(size_t floats) { return (floats + 15) / 16 * 16; }
size_t floats_of(const memory::desc& md) { return round16((md.get_size() + 3) / 4); }

using Key = std::array<int, 14>;
Key key_of(const ConvGeometry& g) {
  return {g.h,  g.w,  g.c,       g.kh,       g.kw, g.sh, g.sw,
          g.dh, g.dw, g.pad_top, g.pad_left, g.oh, g.ow, g.f};
}

std::mutex& plans_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<Key, std::unique_ptr<Plan>>& plans() {
  static auto* p = new std::map<Key, std::unique_ptr<Plan>>;
  return *p;
}

// Implementations worth using: oneDNN's JIT direct kernels ("jit:...", "brg:..."), not its
// reference loops or its own im2col + GEMM fallback.
bool is_jit(const std::string& impl) {
  return impl.rfind("jit", 0) == 0 || impl.rfind("brg", 0) == 0;
}

void make_forward(const ConvGeometry& g, Plan& p) {
  const Dims strides{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pad_l{g.pad_top, g.pad_left};
  const Dims pad_r{(g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.h - g.pad_top,
                   (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.w - g.pad_left};
  dnnl::primitive_attr attr, attr_relu;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr_relu.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops relu;
  relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr_relu.set_post_ops(relu);
  const memory::desc w_any({g.f, g.c, g.kh, g.kw}, kF32, Tag::any);
  size_t sp_bytes = 0;
  std::string impl[2][2];
  dnnl::convolution_forward::primitive_desc hint[2];
  for (int i = 0; i < 2; ++i) {
    for (int r = 0; r < 2; ++r) {
      // The first primitive picks the weights layout; the others must use it too.
      const memory::desc& w_md = (i == 0 && r == 0) ? w_any : p.w_fwd_md;
      dnnl::convolution_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, p.x_md[i], w_md,
           p.b_md, p.y_md[i], strides, dil, pad_l, pad_r},
          r ? attr_relu : attr, cpu_engine());
      if (i == 0 && r == 0) p.w_fwd_md = pd.weights_desc();
      if (r == 0) hint[i] = pd;
      sp_bytes = std::max(sp_bytes, pd.scratchpad_desc().get_size());
      impl[i][r] = pd.impl_info_str();
      p.fwd[i][r] = dnnl::convolution_forward(pd);
    }
  }
  p.impl_fwd = impl[1][0];
  p.pieces = impl[0][0] == impl[1][0] && impl[0][1] == impl[1][1];
  bool ok = is_jit(impl[1][0]) && is_jit(impl[1][1]);
  // Input gradient: the same geometry backwards; its weights layout may differ from forward's.
  std::string bimpl[2];
  for (int i = 0; i < 2; ++i) {
    dnnl::convolution_backward_data::primitive_desc pd(
        {dnnl::algorithm::convolution_direct, p.x_md[i], i == 0 ? w_any : p.w_bwd_md, p.y_md[i],
         strides, dil, pad_l, pad_r},
        attr, cpu_engine(), hint[i]);
    if (i == 0) p.w_bwd_md = pd.weights_desc();
    sp_bytes = std::max(sp_bytes, pd.scratchpad_desc().get_size());
    bimpl[i] = pd.impl_info_str();
    p.bwd[i] = dnnl::convolution_backward_data(pd);
  }
  p.impl_bwd = bimpl[1];
  p.pieces = p.pieces && bimpl[0] == bimpl[1];
  ok = ok && is_jit(bimpl[1]);
  p.reorder_fwd_w = p.w_fwd_md != p.w_user_md;
  p.reorder_bwd_w = p.w_bwd_md != p.w_user_md;
  for (int k = 0; k < 2; ++k) {
    const bool need = k == 0 ? p.reorder_fwd_w : p.reorder_bwd_w;
    if (!need) continue;
    const memory::desc& dst = k == 0 ? p.w_fwd_md : p.w_bwd_md;
    dnnl::reorder::primitive_desc pd(cpu_engine(), p.w_user_md, cpu_engine(), dst, attr);
    sp_bytes = std::max(sp_bytes, pd.scratchpad_desc().get_size());
    (k == 0 ? p.to_fwd_w : p.to_bwd_w) = dnnl::reorder(pd);
  }
  p.w_floats = std::max(floats_of(p.w_fwd_md), floats_of(p.w_bwd_md));
  p.sp_floats = round16((sp_bytes + 3) / 4);
  p.sp_md = memory::desc({static_cast<memory::dim>(std::max<size_t>(sp_bytes, 1))},
                         memory::data_type::u8, Tag::x);
  p.usable = ok;
}

std::unique_ptr<Plan> make_plan(const ConvGeometry& g) {
  auto p = std::make_unique<Plan>();
  if (!wanted(g)) return p;
  // oneDNN sizes its kernels for the threads it may use: one, as at run time.
  omp_set_num_threads(1);
  for (int i = 0; i < 2; ++i) {
    const memory::dim nb = i == 0 ? kOnednnPiece : 1;
    p->x_md[i] = memory::desc({nb, g.c, g.h, g.w}, kF32, Tag::nhwc);
    p->y_md[i] = memory::desc({nb, g.f, g.oh, g.ow}, kF32, Tag::nhwc);
  }
  p->w_user_md = memory::desc({g.f, g.c, g.kh, g.kw}, kF32, Tag::hwio);
  p->b_md = memory::desc({g.f}, kF32, Tag::x);
  try {
    make_forward(g, *p);
  } catch (const dnnl::error&) {
    p->usable = false;  // no oneDNN primitive for this shape: the GEMM path serves it
  }
  return p;
}

// The plan for g, created when `create` (plan time); null when oneDNN does not serve g.
const Plan* find_plan(const ConvGeometry& g, bool create) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  auto& all = plans();
  auto it = all.find(key_of(g));
  if (it == all.end()) {
    if (!create) return nullptr;
    it = all.emplace(key_of(g), make_plan(g)).first;
  }
  return it->second->usable ? it->second.get() : nullptr;
}

// A thread's memory objects for one plan (their data pointers are set per call) and its stream.
struct ThreadMemories {
  const Plan* plan = nullptr;
  memory x[2], y[2], w_user, w_fwd, w_bwd, b, sp;
};
struct ThreadState {
  dnnl::stream stream{cpu_engine()};
  std::vector<std::unique_ptr<ThreadMemories>> memories;
};

ThreadMemories& thread_memories(const Plan& p, dnnl::stream** stream) {
  thread_local ThreadState state;
  *stream = &state.stream;
  for (auto& m : state.memories)
    if (m->plan == &p) return *m;
  auto m = std::make_unique<ThreadMemories>();
  m->plan = &p;
  auto& e = cpu_engine();
  for (int i = 0; i < 2; ++i) {
    m->x[i] = memory(p.x_md[i], e, DNNL_MEMORY_NONE);
    m->y[i] = memory(p.y_md[i], e, DNNL_MEMORY_NONE);
  }
  m->w_user = memory(p.w_user_md, e, DNNL_MEMORY_NONE);
  m->w_fwd = memory(p.w_fwd_md, e, DNNL_MEMORY_NONE);
  m->w_bwd = memory(p.w_bwd_md, e, DNNL_MEMORY_NONE);
  m->b = memory(p.b_md, e, DNNL_MEMORY_NONE);
  m->sp = memory(p.sp_md, e, DNNL_MEMORY_NONE);
  state.memories.push_back(std::move(m));
  return *state.memories.back();
}

void set(const memory& m, const float* ptr) { m.set_data_handle(const_cast<float*>(ptr)); }

// Runs a primitive with its arguments on the stack (the C++ API's map would allocate).
void run(const dnnl::primitive& prim, const dnnl::stream& s,
         std::initializer_list<std::pair<int, const memory*>> args) {
  std::array<dnnl_exec_arg_t, 8> a{};
  int k = 0;
  for (const auto& [arg, m] : args) a[static_cast<size_t>(k++)] = {arg, m->get()};
  NNFLEET_CHECK(dnnl_primitive_execute(prim.get(), s.get(), k, a.data()) == dnnl_success);
}

// Scratch layout (floats, from the first 64-byte boundary): weights in the primitive's layout |
// zero bias [F] | oneDNN's scratchpad | input-gradient piece [min(n, piece), H, W, C].
struct ScratchParts {
  float* w;
  float* zero_b;
  float* sp;
  float* dx;
};
ScratchParts scratch_parts(const Plan& p, const ConvGeometry& g, float* scratch) {
  const auto addr = reinterpret_cast<uintptr_t>(scratch);
  float* base = scratch + ((64 - addr % 64) % 64) / sizeof(float);
  ScratchParts s{};
  s.w = base;
  s.zero_b = s.w + p.w_floats;
  s.sp = s.zero_b + round16(static_cast<size_t>(g.f));
  s.dx = s.sp + p.sp_floats;
  return s;
}

bool is_plain_relu(const Activation& a) {
  return a.kind == Act::kRelu && a.alpha == 0.0f && a.threshold == 0.0f &&
         a.max_value == std::numeric_limits<float>::infinity();
}

// What a forward or backward-data pass runs with: g's plan, this thread's memories and stream,
// the scratch parts, and the weights in the primitive's layout (reordered into scratch once per
// call when the layouts differ: F*C*KH*KW floats, 1/(N*OH*OW) of the convolution's work).
struct Pass {
  const Plan* plan = nullptr;
  dnnl::stream* stream = nullptr;
  ThreadMemories* m = nullptr;
  ScratchParts parts{};
};
bool begin_pass(const ConvGeometry& g, const float* w, float* scratch, bool backward, Pass& out) {
  const Plan* p = find_plan(g, false);
  if (p == nullptr) return false;
  omp_set_num_threads(1);
  out.plan = p;
  out.m = &thread_memories(*p, &out.stream);
  out.parts = scratch_parts(*p, g, scratch);
  ThreadMemories& m = *out.m;
  const bool reorder = backward ? p->reorder_bwd_w : p->reorder_fwd_w;
  memory& w_prim = backward ? m.w_bwd : m.w_fwd;
  set(m.w_user, w);
  set(w_prim, reorder ? out.parts.w : w);
  set(m.sp, out.parts.sp);
  if (reorder)
    run(backward ? p->to_bwd_w : p->to_fwd_w, *out.stream,
        {{DNNL_ARG_FROM, &m.w_user}, {DNNL_ARG_TO, &w_prim}, {DNNL_ARG_SCRATCHPAD, &m.sp}});
  return true;
}

}  // namespace

size_t onednn_conv_scratch_floats(const ConvGeometry& g, int n) {
  const Plan* p = find_plan(g, true);
  if (p == nullptr) return 0;
  const int piece = p->pieces ? std::min(n, kOnednnPiece) : 1;
  return 16 + p->w_floats + round16(static_cast<size_t>(g.f)) + p->sp_floats +
         static_cast<size_t>(piece) * g.h * g.w * g.c;
}

// Pieces of kOnednnPiece images while that many remain (when the plan allows), then single
// images; for each, act(y) right after the primitive wrote it unless relu is fused in place.
bool onednn_conv_forward(const ConvGeometry& g, int n, const float* x, const float* w,
                         const float* b, float* y, float* scratch, const Activation* act,
                         float* act_out) {
  Pass pass;
  if (!begin_pass(g, w, scratch, false, pass)) return false;
  const Plan* p = pass.plan;
  dnnl::stream* s = pass.stream;
  ThreadMemories& m = *pass.m;
  const ScratchParts& parts = pass.parts;
  if (b == nullptr) std::fill_n(parts.zero_b, g.f, 0.0f);
  set(m.b, b != nullptr ? b : parts.zero_b);
  const bool fuse = act != nullptr && act_out == y && is_plain_relu(*act);
  const int64_t x_image = int64_t{g.h} * g.w * g.c, y_image = int64_t{g.oh} * g.ow * g.f;
  for (int img = 0; img < n;) {
    const int i = p->pieces && n - img >= kOnednnPiece ? 0 : 1;
    const int count = i == 0 ? kOnednnPiece : 1;
    set(m.x[i], x + img * x_image);
    set(m.y[i], y + img * y_image);
    run(p->fwd[i][fuse ? 1 : 0], *s,
        {{DNNL_ARG_SRC, &m.x[i]},
         {DNNL_ARG_WEIGHTS, &m.w_fwd},
         {DNNL_ARG_BIAS, &m.b},
         {DNNL_ARG_DST, &m.y[i]},
         {DNNL_ARG_SCRATCHPAD, &m.sp}});
    if (act != nullptr && !fuse)
      activation_forward(*act, int64_t{count} * g.oh * g.ow, g.f, y + img * y_image,
                         act_out + img * y_image);
    img += count;
  }
  s->wait();
  return true;
}

// oneDNN overwrites its diff_src, so each piece's input gradient lands in scratch and is added
// onto dx while it is still in cache.
bool onednn_conv_backward_data(const ConvGeometry& g, int n, const float* w, const float* dy,
                               float* dx, float* scratch) {
  Pass pass;
  if (!begin_pass(g, w, scratch, true, pass)) return false;
  const Plan* p = pass.plan;
  dnnl::stream* s = pass.stream;
  ThreadMemories& m = *pass.m;
  const ScratchParts& parts = pass.parts;
  const int64_t x_image = int64_t{g.h} * g.w * g.c, y_image = int64_t{g.oh} * g.ow * g.f;
  for (int img = 0; img < n;) {
    const int i = p->pieces && n - img >= kOnednnPiece ? 0 : 1;
    const int count = i == 0 ? kOnednnPiece : 1;
    set(m.y[i], dy + img * y_image);
    set(m.x[i], parts.dx);
    run(p->bwd[i], *s,
        {{DNNL_ARG_DIFF_DST, &m.y[i]},
         {DNNL_ARG_WEIGHTS, &m.w_bwd},
         {DNNL_ARG_DIFF_SRC, &m.x[i]},
         {DNNL_ARG_SCRATCHPAD, &m.sp}});
    float* __restrict out = dx + img * x_image;
    const float* __restrict add = parts.dx;
    for (int64_t k = 0; k < count * x_image; ++k) out[k] += add[k];
    img += count;
  }
  s->wait();
  return true;
}

std::string onednn_conv_impl(const ConvGeometry& g, bool backward_data) {
  const Plan* p = find_plan(g, false);
  if (p == nullptr) return "";
  return backward_data ? p->impl_bwd : p->impl_fwd;
}

}  // namespace nnfleet
