// Network: what Keras adds to training besides the loss and the optimizer: weight and activity
// regularizers in the loss, constraints after each update, and frozen layers (no updates, no
// backward pass where nothing before them trains, batch statistics in inference mode).
#include <algorithm>

#include "model/network.h"

namespace nnfleet {

void Network::plan_training() {
  const Model& m = *model_;
  const size_t L = m.num_layers();
  needs_backward_.assign(L, 0);
  inference_mode_.assign(L, 0);
  reg_vars_.clear();
  constrained_.clear();
  activity_.clear();
  const auto offsets = param_layout(m);
  for (size_t i = 0; i < L; ++i) {
    const PlannedNode& p = m.planned(i);
    const LayerTraining& t = m.training(i);
    bool needs = false;
    for (size_t j = 0; j < p.params.size(); ++j) {
      if (!p.params[j].trainable) continue;
      needs = true;
      if (m.shares(i) >= 0) continue;  // regularized and constrained once, with its owner
      const size_t off = offsets[i][j], sz = static_cast<size_t>(p.params[j].shape.size());
      if (p.regularizers[j].active()) reg_vars_.push_back({off, sz, p.regularizers[j]});
      if (p.constraints[j]) constrained_.push_back({off, p.params[j].shape, *p.constraints[j]});
    }
    for (int id : m.layer_inputs(i))
      if (!m.is_input(id) && needs_backward_[m.layer_of(id)]) needs = true;
    needs_backward_[i] = train_ && needs;
    inference_mode_[i] = t.frozen && m.layer(i).mixes_samples();
    if (t.activity && t.activity->active()) activity_.push_back({i, *t.activity});
  }
}

size_t Network::sink_floats() const {
  if (!train_) return 0;
  size_t most = 0;
  for (size_t i = 0; i < model_->num_layers(); ++i) {
    const PlannedNode& p = model_->planned(i);
    size_t n = 0;
    for (size_t j = 0; j < p.params.size(); ++j)
      if (!p.params[j].trainable && p.layer_trainable[j])
        n += static_cast<size_t>(p.params[j].shape.size());
    if (needs_backward_[i]) most = std::max(most, n);
  }
  return most;
}

double Network::regularize(size_t begin, size_t end) {
  float* g = arena_.at(grads_off_);
  double penalty = 0.0;
  for (const RegularizedVar& v : reg_vars_) {
    const size_t lo = std::max(begin, v.offset), hi = std::min(end, v.offset + v.size);
    if (lo >= hi) continue;
    penalty += regularizer_penalty(v.reg, params_ + lo, hi - lo);
    regularizer_grad(v.reg, params_ + lo, g + lo, hi - lo, 1.0);
  }
  return penalty;
}

void Network::activity_forward(Piece& pc, bool add_grads) {
  pc.activity = 0.0;
  for (const auto& [i, reg] : activity_) {
    const size_t n = static_cast<size_t>(pc.n) * model_->planned(i).out_shape.size();
    const float* y = arena_.at(pc.nodes[i].y_off);
    pc.activity += regularizer_penalty(reg, y, n);
    // Keras divides the penalty by the batch size (keras/src/layers/layer.py, since 3.14, and
    // tf.keras 2): the whole batch's, whichever piece this is.
    if (add_grads && needs_backward_[i])
      regularizer_grad(reg, y, arena_.at(pc.nodes[i].dy_off), n, 1.0 / step_n_);
  }
}

void Network::apply_constraints() {
  for (const ConstrainedVar& v : constrained_)
    apply_constraint(v.constraint, v.shape, params_ + v.offset);
}

double Network::weight_penalty() const {
  double penalty = 0.0;
  for (const RegularizedVar& v : reg_vars_)
    penalty += regularizer_penalty(v.reg, params_ + v.offset, v.size);
  return penalty;
}

double Network::activity_penalty_sum() const {
  double s = 0.0;
  for (const Piece& pc : pieces_)
    if (pc.n > 0) s += pc.activity;
  return s;
}

}  // namespace nnfleet
