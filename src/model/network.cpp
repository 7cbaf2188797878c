// Network: arena planning, forward, backward and the training step.
#include "model/network.h"

#include <algorithm>
#include <cstring>

namespace nnfleet {

Network::Network(std::shared_ptr<const Model> model, int max_batch, const float* shared_params)
    : model_(std::move(model)), max_batch_(max_batch) {
  plan(max_batch, shared_params);
}

Network::Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train)
    : model_(std::move(model)), max_batch_(max_batch), train_(true), spec_(train) {
  plan(max_batch, nullptr);
}

Network::Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train, DryRun)
    : model_(std::move(model)), max_batch_(max_batch), train_(true), spec_(train) {
  plan(max_batch, nullptr, false);
}

size_t Network::estimate_bytes(std::shared_ptr<const Model> model, int max_batch,
                               const TrainSpec& train) {
  return Network(std::move(model), max_batch, train, DryRun{}).arena_.planned_bytes();
}

void Network::plan(int max_batch, const float* shared_params, bool allocate) {
  NNFLEET_CHECK(max_batch > 0);
  const Model& m = *model_;
  const size_t L = m.num_layers();
  for (size_t i = 0; i < L; ++i)
    for (const auto& p : m.planned(i).params)
      (p.trainable ? n_trainable_ : n_fixed_) += static_cast<size_t>(p.shape.size());

  // Layout: params | grads, activation grads (zeroed each step) | optimizer state | input |
  // per node y and cache | scratch | per-sample loss.
  if (!shared_params) params_off_ = arena_.reserve(n_trainable_ + n_fixed_);
  nodes_.resize(L);
  if (train_) {
    grads_off_ = arena_.reserve(n_trainable_);
    zero_begin_ = grads_off_;
    for (size_t i = 0; i < L; ++i)
      nodes_[i].dy_off = arena_.reserve(static_cast<size_t>(max_batch) * m.planned(i).out_shape.size());
    zero_end_ = arena_.size_floats();
    state_floats_ = nnfleet::optimizer_state_floats(spec_.optimizer, n_trainable_);
    state_off_ = arena_.reserve(state_floats_);
  }
  input_off_ = arena_.reserve(static_cast<size_t>(max_batch) * m.input_shape().size());
  size_t scratch = 0;
  for (size_t i = 0; i < L; ++i) {
    const PlannedNode& p = m.planned(i);
    nodes_[i].y_off = arena_.reserve(static_cast<size_t>(max_batch) * p.out_shape.size());
    nodes_[i].cache_off = arena_.reserve(m.layer(i).cache_floats(p.in_shapes, max_batch));
    scratch = std::max(scratch, m.layer(i).scratch_floats(p.in_shapes, max_batch));
  }
  scratch_off_ = arena_.reserve(scratch);
  loss_off_ = arena_.reserve(static_cast<size_t>(max_batch));
  if (!allocate) return;
  arena_.allocate();

  params_ = shared_params ? const_cast<float*>(shared_params) : arena_.at(params_off_);
  // Parameter views and optimizer variables (one per trainable ParamSpec).
  size_t t_off = 0, f_off = n_trainable_;
  param_ptrs_.resize(L);
  for (size_t i = 0; i < L; ++i) {
    NodeBuffers& nb = nodes_[i];
    for (const auto& p : m.planned(i).params) {
      const size_t sz = static_cast<size_t>(p.shape.size());
      if (p.trainable) {
        param_ptrs_[i].push_back(params_ + t_off);
        if (train_) nb.dparams.push_back(arena_.at(grads_off_) + t_off);
        vars_.push_back({t_off, sz});
        t_off += sz;
      } else {
        param_ptrs_[i].push_back(params_ + f_off);
        f_off += sz;
      }
    }
    for (int id : m.layer_inputs(i)) {
      nb.x.push_back(id == 0 ? arena_.at(input_off_) : arena_.at(nodes_[static_cast<size_t>(id - 1)].y_off));
      nb.dx.push_back(id == 0 || !train_ ? nullptr : arena_.at(nodes_[static_cast<size_t>(id - 1)].dy_off));
    }
  }
  out_ptr_ = arena_.at(nodes_[static_cast<size_t>(m.output_node() - 1)].y_off);
  if (train_) optimizer_init_state(spec_.optimizer, n_trainable_, arena_.at(state_off_));
}

void Network::initialize(Rng& rng) {
  const Model& m = *model_;
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const auto& specs = m.planned(i).params;
    for (size_t j = 0; j < specs.size(); ++j)
      nnfleet::initialize(specs[j].init, specs[j].shape, rng, param_ptrs_[i][j]);
  }
  iterations_ = 0;
  if (train_) optimizer_init_state(spec_.optimizer, n_trainable_, arena_.at(state_off_));
}

LayerArgs Network::layer_args(size_t i, int n, bool training) {
  const PlannedNode& p = model_->planned(i);
  NodeBuffers& nb = nodes_[i];
  LayerArgs a;
  a.n = n;
  a.training = training;
  a.n_inputs = static_cast<int>(nb.x.size());
  a.in_shapes = p.in_shapes.data();
  a.out_shape = p.out_shape;
  a.x = nb.x.data();
  a.y = arena_.at(nb.y_off);
  a.params = param_ptrs_[i].data();
  a.cache = arena_.at(nb.cache_off);
  a.scratch = arena_.at(scratch_off_);
  a.rng = &rng_;
  return a;
}

void Network::forward(int n, bool training) {
  NNFLEET_DCHECK(n > 0 && n <= max_batch_);
  for (size_t i = 0; i < model_->num_layers(); ++i) model_->layer(i).forward(layer_args(i, n, training));
}

void Network::backward(int n) {
  for (size_t i = model_->num_layers(); i-- > 0;) {
    LayerArgs a = layer_args(i, n, true);
    a.dy = arena_.at(nodes_[i].dy_off);
    a.dx = nodes_[i].dx.data();
    a.dparams = nodes_[i].dparams.data();
    model_->layer(i).backward(a);
  }
}

double Network::train_step(int n, const Targets& t) {
  NNFLEET_CHECK(train_);
  forward(n, true);
  const int k = static_cast<int>(output_features());
  float* per_sample = arena_.at(loss_off_);
  loss_forward(spec_.loss, n, k, out_ptr_, t, per_sample);
  double loss = 0.0;
  for (int i = 0; i < n; ++i) loss += per_sample[i];
  std::memset(arena_.at(zero_begin_), 0, (zero_end_ - zero_begin_) * sizeof(float));
  float* dout = arena_.at(nodes_[static_cast<size_t>(model_->output_node() - 1)].dy_off);
  loss_backward(spec_.loss, n, k, out_ptr_, t, dout);
  backward(n);
  optimizer_step(spec_.optimizer, iterations_, n_trainable_, params_, arena_.at(grads_off_),
                 arena_.at(state_off_), vars_);
  ++iterations_;
  return loss / n;
}

double Network::evaluate_batch(int n, const LossSpec& loss, const Targets& t, float* per_sample) {
  forward(n, false);
  float* ps = per_sample ? per_sample : arena_.at(loss_off_);
  loss_forward(loss, n, static_cast<int>(output_features()), out_ptr_, t, ps);
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += ps[i];
  return s;
}

}  // namespace nnfleet
