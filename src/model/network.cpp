// Network: arena planning, forward, backward and the training step (whole or in pieces).
#include "model/network.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

namespace nnfleet {

Network::Network(std::shared_ptr<const Model> model, int max_batch, const float* shared_params)
    : model_(std::move(model)), max_batch_(max_batch) {
  reshape(1, shared_params == nullptr);
  setup(shared_params);
}

Network::Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train,
                 int pieces)
    : model_(std::move(model)), max_batch_(max_batch), train_(true), spec_(train) {
  reshape(pieces, true);
  setup(nullptr);
}

Network::Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train,
                 int pieces, DryRun)
    : model_(std::move(model)), max_batch_(max_batch), train_(true), spec_(train) {
  reshape(pieces, true);  // no setup(): estimate_bytes() wants the layout only
}

size_t Network::estimate_bytes(std::shared_ptr<const Model> model, int max_batch,
                               const TrainSpec& train, int pieces) {
  return Network(std::move(model), max_batch, train, pieces, DryRun{}).arena_.planned_bytes();
}

void Network::allocate_arena(int max_batch) {
  try {
    arena_.allocate();
  } catch (const std::bad_alloc&) {
    const size_t bytes = arena_.planned_bytes();
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
    throw ModelError("failed to allocate the memory of model '" + model_->name() +
                     "': the system refused its weights, gradients and activations at batch " +
                     std::to_string(max_batch) + "; expected " + std::to_string(bytes) +
                     " bytes (" + gib +
                     ") to be available\nhint: lower batch_size, use fewer "
                     "workers, or free some memory");
  }
}

namespace {
// Where output k of a node lives: its output (k = 0) or extra output k (a recurrent layer's
// returned state), and the same for its gradient.
template <typename Buffers>
size_t tensor_off(const Buffers& nb, int k) {
  return k == 0 ? nb.y_off : nb.extra_y_off[static_cast<size_t>(k - 1)];
}
template <typename Buffers>
size_t tensor_dy_off(const Buffers& nb, int k) {
  return k == 0 ? nb.dy_off : nb.extra_dy_off[static_cast<size_t>(k - 1)];
}
}  // namespace

void Network::reshape(int pieces, bool own_params) {
  NNFLEET_CHECK(max_batch_ > 0);
  count_params();
  if (train_) check_trainable();
  plan_training();
  plan_views();
  step_targets_.assign(model_->num_outputs(), Targets{});
  plan_pieces(pieces);
  plan_arena(own_params);
}

void Network::setup(const float* shared_params) {
  allocate_arena(max_batch_);
  bind_params(shared_params);
  for (size_t i = 0; i < model_->num_layers(); ++i) bind_inputs(i);
  bind_outputs();
  if (train_) {
    for (Piece& pc : pieces_) {
      plan_fresh_dx(pc);
      plan_fresh_dparams(pc);
    }
  }
  if (train_) optimizer_init_state(spec_.optimizer, n_trainable_, arena_.at(state_off_));
}

void Network::count_params() {
  const Model& m = *model_;
  n_trainable_ = m.trainable_params();
  n_fixed_ = m.non_trainable_params();
}

void Network::check_trainable() const {
  const Model& m = *model_;
  if (const std::string why = m.training_refusal(); !why.empty())
    throw ModelError("failed to train model '" + m.name() + "': " + why);
  if (!spec_.outputs.empty() && spec_.outputs.size() != m.num_outputs())
    throw ModelError("failed to train model '" + m.name() + "': it has " +
                     std::to_string(m.num_outputs()) + " outputs; expected a loss for each, got " +
                     std::to_string(spec_.outputs.size()));
  for (size_t j = 0; j < m.num_outputs(); ++j) {
    const int mask_steps = output_mask_steps(m, j);
    if (mask_steps > 0 && mask_steps != loss_steps(m.output_shape(j)))
      throw ModelError("failed to train model '" + m.name() + "': its output " + std::to_string(j) +
                       " carries a Keras mask of " + std::to_string(mask_steps) +
                       " steps, which the loss cannot weight; " + "expected an output [" +
                       std::to_string(mask_steps) + ", C], got " + m.output_shape(j).str());
  }
}

// Views (Layer::output_aliases_input). Not for a model output nor a layer with an activity
// regularizer: the loss overwrites its output's gradient, and that must not be shared with
// another output's or hold the regularizer's (which is written earlier). Nor for a layer whose
// input is also read by another layer or is a model output: the input's gradient would then
// sum its parts in another order than the copy's did (a + (b + c) for (a + b) + c), and
// results stay bit-identical to the plan with copies.
void Network::plan_views() {
  const Model& m = *model_;
  const size_t L = m.num_layers();
  views_.assign(L, 0);
  std::vector<int> readers(L, 0);  // per layer: reads of its output, the loss's included
  std::vector<char> is_output(L, 0);
  for (size_t j = 0; j < m.num_outputs(); ++j) {
    is_output[m.layer_of(m.output_node(j))] = 1;
    if (m.output_tensor(j) == 0) ++readers[m.layer_of(m.output_node(j))];
  }
  for (size_t i = 0; i < L; ++i)
    for (size_t j = 0; j < m.layer_inputs(i).size(); ++j)
      if (!m.is_input(m.layer_inputs(i)[j]) && m.input_tensor(i, j) == 0)
        ++readers[m.layer_of(m.layer_inputs(i)[j])];
  for (size_t i = 0; i < L; ++i) {
    const auto& act = m.training(i).activity;
    if (!m.layer(i).output_aliases_input() || is_output[i] || (act && act->active())) continue;
    const int src = m.layer_inputs(i)[0];
    if (!m.is_input(src) && (m.input_tensor(i, 0) != 0 || readers[m.layer_of(src)] != 1)) continue;
    const PlannedNode& p = m.planned(i);
    NNFLEET_CHECK(m.layer_inputs(i).size() == 1 && p.params.empty() && p.extra_out_shapes.empty() &&
                  m.layer(i).mask_use() != MaskUse::kProduce &&
                  m.layer(i).cache_floats(p.in_shapes, 1) == 0);
    views_[i] = 1;
  }
}

void Network::plan_pieces(int pieces) {
  const Model& m = *model_;
  bool masked = false;
  for (size_t j = 0; j < m.num_outputs(); ++j) masked = masked || output_mask_steps(m, j) > 0;
  // Pieces of ceil(max_batch / pieces) rows; only training splits, never across batch statistics
  // nor a masked loss (whose normalizer, the kept steps of the batch, needs every row).
  if (!train_ || m.mixes_samples() || masked) pieces = 1;
  pieces = std::clamp(pieces, 1, max_batch_);
  // In 64 bits: max_batch + pieces - 1 passes INT_MAX for a batch near 2^31.
  const int64_t batch = max_batch_;
  const int capacity = static_cast<int>((batch + pieces - 1) / pieces);
  pieces = static_cast<int>((batch + capacity - 1) / capacity);
  pieces_.resize(static_cast<size_t>(pieces));
  for (int p = 0; p < pieces; ++p) {
    Piece& pc = pieces_[static_cast<size_t>(p)];
    pc.row0 = p * capacity;
    pc.capacity = std::min(capacity, max_batch_ - p * capacity);
    pc.nodes.resize(m.num_layers());
    pc.zero_before.resize(m.num_layers());
  }
}

// Layout: params | per piece: grads (written or zeroed each step), activation grads (blocks shared
// by lifetime, each zeroed when it becomes live) | optimizer state | input | per piece: y and cache
// per node (a view node's y is its input's), scratch | per-sample loss | gathered output. Piece 0's
// gradients are the network's; the others' are added to them at the end of a step.
void Network::plan_arena(bool own_params) {
  const Model& m = *model_;
  const size_t batch = static_cast<size_t>(max_batch_);
  if (own_params) params_off_ = arena_.reserve(n_trainable_ + n_fixed_);
  if (train_) {
    for (Piece& pc : pieces_) {
      pc.grads_off = arena_.reserve(n_trainable_);
      pc.sink_off = arena_.reserve(sink_floats());
      plan_gradients(pc);
    }
    grads_off_ = pieces_[0].grads_off;
    state_floats_ = nnfleet::optimizer_state_floats(spec_.optimizer, n_trainable_);
    state_off_ = arena_.reserve(state_floats_);
  }
  input_offs_.clear();
  for (size_t k = 0; k < m.num_inputs(); ++k)
    input_offs_.push_back(arena_.reserve(batch * m.input(k).shape.size()));
  for (Piece& pc : pieces_) plan_activations(pc);
  loss_off_ = arena_.reserve(batch);
  out_offs_.assign(m.num_outputs(), 0);
  out_loss_offs_.assign(m.num_outputs(), loss_off_);
  for (size_t j = 0; j < m.num_outputs(); ++j) {
    if (m.num_outputs() > 1) out_loss_offs_[j] = arena_.reserve(batch);
    if (pieces_.size() > 1) out_offs_[j] = arena_.reserve(batch * m.output_shape(j).size());
  }
}

void Network::plan_activations(Piece& pc) {
  const Model& m = *model_;
  const size_t rows = static_cast<size_t>(pc.capacity);
  size_t scratch = 0;
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const PlannedNode& p = m.planned(i);
    NodeBuffers& nb = pc.nodes[i];
    if (views_[i]) {
      nb.y_off = view_offset(pc, i);
      continue;
    }
    nb.y_off = arena_.reserve(rows * p.out_shape.size());
    for (const Shape& s : p.extra_out_shapes)
      nb.extra_y_off.push_back(arena_.reserve(rows * s.size()));
    nb.cache_off = arena_.reserve(m.layer(i).cache_floats(p.in_shapes, pc.capacity));
    // A trained node's backward may write over its own dy (backward_piece): nothing reads that
    // block after it (model/buffer_plan.h), so a fused ReLU's pre-activation gradient goes there.
    scratch = std::max(scratch, train_ && needs_backward_[i]
                                    ? m.layer(i).scratch_floats_owning_dy(p.in_shapes, pc.capacity)
                                    : m.layer(i).scratch_floats(p.in_shapes, pc.capacity));
  }
  pc.scratch_off = arena_.reserve(scratch);
  plan_masks(pc);
}

// Parameter views and optimizer variables (one per trainable ParamSpec).
void Network::bind_params(const float* shared_params) {
  const Model& m = *model_;
  params_ = shared_params ? const_cast<float*>(shared_params) : arena_.at(params_off_);
  size_t t_off = 0, f_off = n_trainable_;
  param_ptrs_.resize(m.num_layers());
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (const int o = m.shares(i); o >= 0) {
      // A further call of a shared layer reads its owner's weights and adds its gradient to the
      // owner's (backward accumulates), so the step sums every call's.
      param_ptrs_[i] = param_ptrs_[static_cast<size_t>(o)];
      for (Piece& pc : pieces_) pc.nodes[i].dparams = pc.nodes[static_cast<size_t>(o)].dparams;
      continue;
    }
    size_t sink = 0;
    for (size_t j = 0; j < m.planned(i).params.size(); ++j) {
      const ParamSpec& p = m.planned(i).params[j];
      const size_t sz = static_cast<size_t>(p.shape.size());
      if (train_ && !p.trainable && m.planned(i).layer_trainable[j]) {
        for (Piece& pc : pieces_) pc.nodes[i].dparams.push_back(arena_.at(pc.sink_off) + sink);
        sink += sz;
      }
      if (p.trainable) {
        param_ptrs_[i].push_back(params_ + t_off);
        if (train_)
          for (Piece& pc : pieces_) pc.nodes[i].dparams.push_back(arena_.at(pc.grads_off) + t_off);
        vars_.push_back({t_off, sz});
        t_off += sz;
      } else {
        param_ptrs_[i].push_back(params_ + f_off);
        f_off += sz;
      }
    }
  }
}

void Network::bind_inputs(size_t i) {
  const Model& m = *model_;
  for (Piece& pc : pieces_) {
    NodeBuffers& nb = pc.nodes[i];
    for (size_t j = 0; j < m.layer_inputs(i).size(); ++j) {
      const int id = m.layer_inputs(i)[j];
      if (m.is_input(id)) {
        const size_t k = static_cast<size_t>(id);
        nb.x.push_back(arena_.at(input_offs_[k]) +
                       static_cast<size_t>(pc.row0) * m.input(k).shape.size());
        nb.dx.push_back(nullptr);
        continue;
      }
      const size_t src = m.layer_of(id);
      nb.x.push_back(tensor_y(pc, i, j));
      nb.dx.push_back(train_ && needs_backward_[src] ? tensor_dy(pc, i, j) : nullptr);
    }
    for (size_t off : nb.extra_y_off) nb.extra_y.push_back(arena_.at(off));
    for (size_t off : nb.extra_dy_off) nb.extra_dy.push_back(arena_.at(off));
  }
}

void Network::bind_outputs() {
  const Model& m = *model_;
  out_ptrs_.clear();
  for (size_t j = 0; j < m.num_outputs(); ++j)
    out_ptrs_.push_back(pieces_.size() > 1
                            ? arena_.at(out_offs_[j])
                            : arena_.at(tensor_off(pieces_[0].nodes[m.layer_of(m.output_node(j))],
                                                   m.output_tensor(j))));
}

// Keras's mask flow: a producer's output carries a mask it makes in its own arena block; layers
// that propagate pass their input's on, consumers read it and pass it on when their output keeps
// the time axis, and every other layer (and every multi-input layer) drops it.
float* Network::tensor_y(Piece& pc, size_t i, size_t j) {
  const size_t src = model_->layer_of(model_->layer_inputs(i)[j]);
  const int k = model_->input_tensor(i, j);
  const NodeBuffers& s = pc.nodes[src];
  return arena_.at(tensor_off(s, k));
}

float* Network::tensor_dy(Piece& pc, size_t i, size_t j) {
  const size_t src = model_->layer_of(model_->layer_inputs(i)[j]);
  const int k = model_->input_tensor(i, j);
  const NodeBuffers& s = pc.nodes[src];
  return arena_.at(tensor_dy_off(s, k));
}

int Network::mask_input(const Model& m, size_t i) {
  const auto& ins = m.layer_inputs(i);
  const bool one = ins.size() == 1 || (!ins.empty() && m.layer(i).mask_use() == MaskUse::kConsume);
  if (!one || m.is_input(ins[0]) || m.input_tensor(i, 0) != 0) return -1;
  return static_cast<int>(m.layer_of(ins[0]));
}

std::vector<int> Network::mask_sources(const Model& m) {
  std::vector<int> src(m.num_layers(), -1);
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const int from = mask_input(m, i);
    const int in = from >= 0 ? src[static_cast<size_t>(from)] : -1;
    switch (m.layer(i).mask_use()) {
      case MaskUse::kProduce:
        src[i] = static_cast<int>(i);
        break;
      case MaskUse::kPropagate:
        src[i] = in;
        break;
      case MaskUse::kConsume:
        if (m.layer(i).passes_mask()) src[i] = in;
        break;
      case MaskUse::kDrop:
        break;
    }
  }
  return src;
}

void Network::plan_masks(Piece& pc) {
  const Model& m = *model_;
  const std::vector<int> src = mask_sources(m);
  for (size_t i = 0; i < m.num_layers(); ++i) {
    NodeBuffers& nb = pc.nodes[i];
    if (const int from = mask_input(m, i); from >= 0)
      nb.in_mask_off = pc.nodes[static_cast<size_t>(from)].mask_off;
    if (src[i] == static_cast<int>(i)) {
      nb.makes_mask = true;
      nb.mask_off = arena_.reserve(static_cast<size_t>(pc.capacity) *
                                   static_cast<size_t>(m.planned(i).in_shapes[0][0]));
    } else if (src[i] >= 0) {
      nb.mask_off = pc.nodes[static_cast<size_t>(src[i])].mask_off;
    }
  }
}

int Network::output_mask_steps(const Model& m, size_t j) {
  if (m.output_tensor(j) != 0) return 0;  // a returned state has no time axis
  const int src = mask_sources(m)[m.layer_of(m.output_node(j))];
  return src < 0 ? 0 : static_cast<int>(m.planned(static_cast<size_t>(src)).in_shapes[0][0]);
}

const float* Network::output_mask(size_t j) const {
  const NodeBuffers& nb = pieces_[0].nodes[model_->layer_of(model_->output_node(j))];
  if (model_->output_tensor(j) != 0) return nullptr;
  if (nb.mask_off == NodeBuffers::kNoMask || output_mask_steps(*model_, j) != output_steps(j))
    return nullptr;
  return arena_.at(nb.mask_off);
}

Targets Network::on_output(Targets t, size_t j) const {
  t.steps = output_steps(j);
  t.mask = output_mask(j);
  return t;
}

void Network::initialize(Rng& rng) {
  const Model& m = *model_;
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (m.shares(i) >= 0) continue;  // initialized with its owner
    const auto& specs = m.planned(i).params;
    for (size_t j = 0; j < specs.size(); ++j)
      nnfleet::initialize(specs[j].init, specs[j].shape, rng, param_ptrs_[i][j]);
  }
  iterations_ = 0;
  if (train_) optimizer_init_state(spec_.optimizer, n_trainable_, arena_.at(state_off_));
}

LayerArgs Network::layer_args(Piece& pc, size_t i, bool training) {
  const PlannedNode& p = model_->planned(i);
  NodeBuffers& nb = pc.nodes[i];
  LayerArgs a;
  a.n = pc.n;
  a.training = training && !inference_mode_[i];
  a.n_inputs = static_cast<int>(nb.x.size());
  a.in_shapes = p.in_shapes.data();
  a.out_shape = p.out_shape;
  a.x = nb.x.data();
  a.y = arena_.at(nb.y_off);
  if (!nb.extra_y.empty()) a.extra_y = nb.extra_y.data();
  a.params = param_ptrs_[i].data();
  a.cache = arena_.at(nb.cache_off);
  a.scratch = arena_.at(pc.scratch_off);
  a.rng = pieces_.size() == 1 ? &rng_ : &pc.rng;
  if (nb.in_mask_off != NodeBuffers::kNoMask) a.mask = arena_.at(nb.in_mask_off);
  if (nb.makes_mask) a.mask_out = arena_.at(nb.mask_off);
  return a;
}

void Network::forward_piece(Piece& pc, bool training, size_t first) {
  for (size_t i = first; i < model_->num_layers(); ++i)
    if (!views_[i]) model_->layer(i).forward(layer_args(pc, i, training));
  if (!activity_.empty()) activity_forward(pc, training && train_);
}

void Network::backward_piece(Piece& pc, size_t first) {
  for (size_t i = model_->num_layers(); i-- > first;) {
    if (!needs_backward_[i] || views_[i]) continue;  // nothing trainable at or before it; a view
    // Blocks that become live here: zero before this backward adds into them, unless it writes
    // them whole.
    const bool fresh = pc.fresh_dx[i] != 0;
    for (const ZeroBlock& z : pc.zero_before[i])
      if (!fresh)
        std::memset(arena_.at(z.off), 0, static_cast<size_t>(pc.n) * z.row_floats * sizeof(float));
    LayerArgs a = layer_args(pc, i, true);
    a.dx_fresh = fresh;
    a.dparams_fresh = pc.fresh_dparams[i] != 0;
    a.dy = a.dy_own = arena_.at(pc.nodes[i].dy_off);
    a.dx = pc.nodes[i].dx.data();
    a.dparams = pc.nodes[i].dparams.data();
    if (!pc.nodes[i].extra_dy.empty()) a.extra_dy = pc.nodes[i].extra_dy.data();
    model_->layer(i).backward(a);
  }
}

void Network::gather_output(const Piece& pc) {
  for (size_t j = 0; j < model_->num_outputs(); ++j) {
    const size_t k = static_cast<size_t>(output_features(j));
    const size_t out_node = model_->layer_of(model_->output_node(j));
    std::memcpy(arena_.at(out_offs_[j]) + static_cast<size_t>(pc.row0) * k,
                arena_.at(tensor_off(pc.nodes[out_node], model_->output_tensor(j))),
                static_cast<size_t>(pc.n) * k * sizeof(float));
  }
}

void Network::forward(int n, bool training) {
  begin_inference(n);
  for (Piece& pc : pieces_) {
    if (pc.n == 0) continue;
    forward_piece(pc, training);
    if (pieces_.size() > 1) gather_output(pc);
  }
}

void Network::begin_inference(int n) {
  NNFLEET_DCHECK(n > 0 && n <= max_batch_);
  for (Piece& pc : pieces_) pc.n = std::clamp(n - pc.row0, 0, pc.capacity);
}

void Network::infer_piece(int p) {
  Piece& pc = pieces_[static_cast<size_t>(p)];
  if (pc.n == 0) return;
  forward_piece(pc, false);
  if (pieces_.size() > 1) gather_output(pc);
}

void Network::begin_step(int n, const Targets* t) {
  NNFLEET_CHECK(train_);
  NNFLEET_DCHECK(n > 0 && n <= max_batch_);
  step_n_ = n;
  for (size_t j = 0; j < step_targets_.size(); ++j) step_targets_[j] = t[j];
  // Each piece's dropout stream for this step derives from the network's stream only.
  const uint64_t seed = pieces_.size() > 1 ? rng_.next() : 0;
  for (size_t p = 0; p < pieces_.size(); ++p) {
    Piece& pc = pieces_[p];
    pc.n = std::clamp(n - pc.row0, 0, pc.capacity);
    if (pieces_.size() > 1) pc.rng = Rng(seed + p);
  }
}

void Network::train_piece(int p) {
  Piece& pc = pieces_[static_cast<size_t>(p)];
  if (pc.n == 0) return;
  for (const auto& [off, floats] : pc.zero_params)
    std::memset(arena_.at(off), 0, floats * sizeof(float));
  for (const ZeroBlock& z : pc.zero_first)
    std::memset(arena_.at(z.off), 0, static_cast<size_t>(pc.n) * z.row_floats * sizeof(float));
  const size_t first = first_outside_ ? 1 : 0;
  forward_piece(pc, true, first);
  pc.loss_sum = 0;
  for (size_t j = 0; j < model_->num_outputs(); ++j) piece_loss(pc, j);
  if (model_->num_outputs() > 1) {
    // The per-sample total: the outputs' losses weighted (Keras's loss_weights).
    float* total = arena_.at(loss_off_) + pc.row0;
    for (int i = 0; i < pc.n; ++i) total[i] = 0.0f;
    for (size_t j = 0; j < model_->num_outputs(); ++j) {
      const float w = static_cast<float>(spec_.weight_of(j));
      const float* lj = arena_.at(out_loss_offs_[j]) + pc.row0;
      for (int i = 0; i < pc.n; ++i) total[i] += w * lj[i];
    }
  }
  backward_piece(pc, first);
  if (pieces_.size() > 1) gather_output(pc);
}

void Network::set_first_layer_outside(bool outside) {
  NNFLEET_CHECK(!outside || (train_ && pieces_.size() == 1 && model_->num_layers() > 1 &&
                             model_->layer_inputs(0).size() == 1 &&
                             model_->is_input(model_->layer_inputs(0)[0]) && !views_[0]));
  first_outside_ = outside;
  for (Piece& pc : pieces_) plan_fresh_dparams(pc);  // layer 0's gradients: the pack adds them
}

LayerArgs Network::first_layer_args() {
  Piece& pc = pieces_[0];
  LayerArgs a = layer_args(pc, 0, true);
  a.dy = arena_.at(pc.nodes[0].dy_off);
  if (train_ && needs_backward_[0] && !views_[0])
    a.dy_own = arena_.at(pc.nodes[0].dy_off);  // as planned
  a.dx = pc.nodes[0].dx.data();
  a.dparams = pc.nodes[0].dparams.data();
  return a;
}

void Network::piece_loss(Piece& pc, size_t j) {
  const int k = static_cast<int>(output_features(j));
  const size_t out_node = model_->layer_of(model_->output_node(j));
  const float* out = arena_.at(tensor_off(pc.nodes[out_node], model_->output_tensor(j)));
  const LossSpec& loss = spec_.loss_of(j);
  const Targets& st = step_targets_[j];
  Targets t;
  t.steps = output_steps(j);
  if (st.labels) t.labels = st.labels + static_cast<size_t>(pc.row0) * t.steps;
  if (st.values) t.values = st.values + static_cast<size_t>(pc.row0) * k;
  if (st.weights) t.weights = st.weights + pc.row0;
  if (pieces_.size() == 1) t.mask = output_mask(j);
  const double w = spec_.weight_of(j);
  pc.loss_sum += w * loss_forward(loss, pc.n, k, out, t, arena_.at(out_loss_offs_[j]) + pc.row0);
  // The gradient lands in the output's activation gradient (zeroed at the step's start) before
  // any consumer of the output adds to it in backward.
  float* dy = arena_.at(tensor_dy_off(pc.nodes[out_node], model_->output_tensor(j)));
  loss_backward(loss, pc.n, k, out, t, dy, step_n_);
  if (w != 1.0)
    for (size_t i = 0; i < static_cast<size_t>(pc.n) * static_cast<size_t>(k); ++i)
      dy[i] *= static_cast<float>(w);
}

void Network::update_piece(int p) {
  const OptimizerSpec& o = spec_.optimizer;
  const bool clips = o.clipnorm > 0 || o.global_clipnorm > 0 || o.clipvalue > 0;
  double& penalty = pieces_[static_cast<size_t>(p)].weight_penalty;
  penalty = 0.0;
  if (clips && p > 0) return;
  // This piece's share of the parameters: [begin, end), in whole cache lines.
  const size_t share = clips ? n_trainable_ : (n_trainable_ / pieces_.size() + 15) / 16 * 16;
  const size_t begin = std::min(n_trainable_, static_cast<size_t>(p) * share);
  const size_t end = std::min(n_trainable_, begin + share);
  // The pieces' gradients, summed in piece order whoever computed them, then the update. Without
  // clipping both run a block at a time, so the summed block is still in cache when the
  // optimizer reads it (the update streams the model's parameters, gradients and state through
  // memory; for m7 that is most of a step's memory traffic).
  float* g = arena_.at(grads_off_);
  // Each piece's step wrote or zeroed all its gradients (Piece::fresh_dparams, zero_params); a
  // piece without rows this step wrote none, and is left out.
  auto sum_pieces = [&](size_t from, size_t to) {
    for (size_t q = 1; q < pieces_.size(); ++q) {
      if (pieces_[q].n == 0) continue;
      float* __restrict gb = g;
      const float* __restrict gq = arena_.at(pieces_[q].grads_off);
      for (size_t i = from; i < to; ++i) gb[i] += gq[i];
    }
  };
  if (clips || pieces_.size() == 1) {
    sum_pieces(begin, end);
    if (!reg_vars_.empty()) penalty += regularize(begin, end);
    if (clips) clip_gradients(o, n_trainable_, g, vars_);
    optimizer_update(o, iterations_, n_trainable_, params_, g, arena_.at(state_off_), begin, end);
    return;
  }
  constexpr size_t kBlock = 4096;  // floats: the block's arrays fit in L2 together
  for (size_t b0 = begin; b0 < end; b0 += kBlock) {
    const size_t b1 = std::min(end, b0 + kBlock);
    sum_pieces(b0, b1);
    if (!reg_vars_.empty()) penalty += regularize(b0, b1);
    optimizer_update(o, iterations_, n_trainable_, params_, g, arena_.at(state_off_), b0, b1);
  }
}

double Network::end_step() {
  double loss = 0.0;
  if (pieces_.size() == 1) {
    loss = pieces_[0].loss_sum;
  } else {
    const float* per_sample = arena_.at(loss_off_);
    for (int i = 0; i < step_n_; ++i) loss += per_sample[i];
  }
  ++iterations_;
  double penalty = 0.0, activity = 0.0;
  for (const Piece& pc : pieces_) {
    penalty += pc.weight_penalty;
    if (pc.n > 0) activity += pc.activity;
  }
  if (!constrained_.empty()) apply_constraints();
  return loss / step_n_ + penalty + activity / step_n_;
}

void Network::discard_working_memory() {
  if (!arena_.allocated()) return;
  // The arena is [params][each piece's gradients and sink][optimizer state][the rest].
  const float* base = arena_.at(0);
  const bool own = params_ >= base && params_ < base + arena_.size_floats();  // not shared
  const size_t params_end = own ? params_off_ + num_params() : 0;
  if (!train_) {
    arena_.discard(params_end, arena_.size_floats());
    return;
  }
  arena_.discard(params_end, state_off_ - params_end);
  arena_.discard(state_off_ + state_floats_, arena_.size_floats());
}

void Network::discard_numbers(const float* first, size_t n) {
  const float* base = arena_.at(0);
  NNFLEET_CHECK(first >= base && first + n <= base + arena_.size_floats());
  arena_.discard(static_cast<size_t>(first - base), n);
}

void Network::set_learning_rate(double lr) {
  NNFLEET_CHECK(train_ && !spec_.optimizer.schedule);
  spec_.optimizer.learning_rate = lr;
}

double Network::train_step(int n, const Targets* t) {
  begin_step(n, t);
  for (int p = 0; p < pieces(); ++p) train_piece(p);
  for (int p = 0; p < pieces(); ++p) update_piece(p);
  return end_step();
}

double Network::evaluate_batch(int n, const LossSpec& loss, const Targets& t, float* per_sample) {
  forward(n, false);
  return output_loss(n, loss, t, per_sample);
}

double Network::output_loss(int n, const LossSpec& loss, const Targets& t, float* per_sample) {
  float* ps = per_sample ? per_sample : arena_.at(loss_off_);
  return loss_forward(loss, n, static_cast<int>(output_features()), out_ptrs_[0], on_output(t), ps);
}

double Network::output_losses(int n, const Targets* t, double* out_sums) {
  double total = 0.0;
  float* ps = arena_.at(loss_off_);
  for (size_t j = 0; j < model_->num_outputs(); ++j) {
    const double s = loss_forward(spec_.loss_of(j), n, static_cast<int>(output_features(j)),
                                  out_ptrs_[j], on_output(t[j], j), ps);
    out_sums[j] = s;
    total += spec_.weight_of(j) * s;
  }
  return total;
}

}  // namespace nnfleet
