// DensePack (dense_pack.h): the wide first layer of a pack of models. The copies in and out of the
// wide buffers move (2 I + 2 N) floats per column and step against 4 N I FLOPs of the two
// products, 1/26 of the work at W3's 16 rows and 64 features.
#include "model/dense_pack.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/gemm.h"
#include "layers/activation_names.h"
#include "layers/layer_util.h"
#include "nnfleet/error.h"

namespace nnfleet {

DensePack::Member DensePack::check_member(Network* net, size_t index, int features, int max_batch) {
  const Model& model = net->model();
  const std::string who =
      "failed to pack model '" + model.name() + "' (member " + std::to_string(index + 1) + "): ";
  auto refuse = [&](const std::string& rule, const std::string& expected, const std::string& got) {
    throw ModelError(who + rule + "; expected " + expected + ", got " + got);
  };
  if (!net->trainable() || net->pieces() != 1)
    refuse("a member trains its batches whole", "a training network of 1 piece",
           std::to_string(net->pieces()) + " pieces");
  if (model.num_layers() < 2 || model.layer_inputs(0).size() != 1 ||
      !model.is_input(model.layer_inputs(0)[0]) || model.num_inputs() != 1)
    refuse("its first layer must read the model's only input", "one input feeding layer 0",
           std::to_string(model.num_inputs()) + " inputs");
  const Layer& first = model.layer(0);
  if (std::string(first.class_name()) != "Dense")
    refuse("its first layer must be Dense", "Dense", first.class_name());
  const PlannedNode& p = model.planned(0);
  if (p.in_shapes[0].rank() != 1)
    refuse("its input must be flat features", "rank 1 per sample",
           "rank " + std::to_string(p.in_shapes[0].rank()));
  const Json cfg = first.keras_config();
  if (!cfg.contains("use_bias") || !cfg["use_bias"].get<bool>() || p.params.size() != 2 ||
      !p.params[0].trainable || !p.params[1].trainable || model.shares(0) >= 0)
    refuse("its first Dense must train its own kernel and bias", "use_bias and trainable",
           "a bias-less, frozen or shared layer");
  const int in = static_cast<int>(p.in_shapes[0][0]);
  if (features >= 0 && in != features)
    refuse("every member reads the same features", std::to_string(features), std::to_string(in));
  if (max_batch >= 0 && net->max_batch() != max_batch)
    refuse("every member takes the same batches", "max batch " + std::to_string(max_batch),
           std::to_string(net->max_batch()));
  Member m;
  m.net = net;
  m.act = parse_activation(cfg.contains("activation") ? &cfg["activation"] : nullptr, "activation");
  m.width = static_cast<int>(p.out_shape[p.out_shape.rank() - 1]);
  return m;
}

DensePack::DensePack(std::vector<Network*> members) {
  if (members.empty())
    throw ModelError("failed to make a pack: it has no members; expected at least 1, got 0");
  for (size_t i = 0; i < members.size(); ++i) {
    Member m = check_member(members[i], i, i ? features_ : -1, i ? max_batch_ : -1);
    if (i == 0) {
      features_ = static_cast<int>(members[0]->model().planned(0).in_shapes[0][0]);
      max_batch_ = members[0]->max_batch();
    }
    m.col = cols_;
    cols_ += m.width;
    members_.push_back(m);
  }
  const size_t wn = static_cast<size_t>(features_) * cols_, zn = size_t{1} * max_batch_ * cols_;
  block_.assign(2 * wn + cols_ + 2 * zn, 0.0f);
  w_ = block_.data();
  b_ = w_ + wn;
  z_ = b_ + cols_;
  dz_ = z_ + zn;
  dw_ = dz_ + zn;
  for (Member& m : members_) m.net->set_first_layer_outside(true);
}

DensePack::~DensePack() {
  for (Member& m : members_) m.net->set_first_layer_outside(false);
}

void DensePack::load_weights(const char* active) {
  for (const Member& m : members_) {
    if (!active[&m - members_.data()]) continue;
    const float* w = m.net->param(0, 0);
    for (int i = 0; i < features_; ++i)
      std::memcpy(w_ + static_cast<size_t>(i) * cols_ + m.col, w + static_cast<size_t>(i) * m.width,
                  sizeof(float) * m.width);
    std::memcpy(b_ + m.col, m.net->param(0, 1), sizeof(float) * m.width);
  }
}

// As dense_forward: the bias broadcast into z, then the product added onto it (beta 1), so each
// element is the chain Dense alone computes.
void DensePack::forward(int n, const float* x) {
  for (int r = 0; r < n; ++r)
    std::memcpy(z_ + static_cast<size_t>(r) * cols_, b_, sizeof(float) * cols_);
  gemm(false, false, n, cols_, features_, x, features_, w_, cols_, 1.0f, z_, cols_);
}

void DensePack::scatter_forward(const Member& m, int n) {
  const LayerArgs a = m.net->first_layer_args();
  float* z = fused_z(m.act, a);
  for (int r = 0; r < n; ++r)
    std::memcpy(z + static_cast<size_t>(r) * m.width, z_ + static_cast<size_t>(r) * cols_ + m.col,
                sizeof(float) * m.width);
  fused_activation_forward(m.act, n, m.width, a);
}

// As Dense::backward: dz from the activation, the bias gradient summed row by row.
void DensePack::gather_backward(const Member& m, int n) {
  const LayerArgs a = m.net->first_layer_args();
  const float* dz = pre_activation_grad(m.act, n, m.width, a, a.scratch);
  float* __restrict db = a.dparams[1];
  for (int r = 0; r < n; ++r) {
    const float* __restrict row = dz + static_cast<size_t>(r) * m.width;
    std::memcpy(dz_ + static_cast<size_t>(r) * cols_ + m.col, row, sizeof(float) * m.width);
    for (int o = 0; o < m.width; ++o) db[o] += row[o];
  }
}

// dW[I, cols] = x^T dz from zero, as dense_backward adds it onto the member's zeroed gradient;
// then each member's columns are added to its gradient (0 + v: the same bits).
void DensePack::weight_gradients(int n, const float* x, const char* active) {
  std::fill_n(dw_, static_cast<size_t>(features_) * cols_, 0.0f);
  gemm_fixed_rows(true, features_, cols_, n, x, features_, dz_, cols_, 1.0f, dw_, cols_);
  for (const Member& m : members_) {
    if (!active[&m - members_.data()]) continue;
    float* __restrict g = m.net->first_layer_args().dparams[0];
    for (int i = 0; i < features_; ++i) {
      const float* __restrict src = dw_ + static_cast<size_t>(i) * cols_ + m.col;
      float* __restrict dst = g + static_cast<size_t>(i) * m.width;
      for (int o = 0; o < m.width; ++o) dst[o] += src[o];
    }
  }
}

void DensePack::train_step(int n, const float* x, const Targets* const* targets, const char* active,
                           double* losses) {
  load_weights(active);
  forward(n, x);
  for (size_t k = 0; k < members_.size(); ++k) {
    if (!active[k]) continue;
    Network& net = *members_[k].net;
    net.begin_step(n, targets[k]);
    scatter_forward(members_[k], n);
    net.train_piece(0);
    gather_backward(members_[k], n);
  }
  weight_gradients(n, x, active);
  for (size_t k = 0; k < members_.size(); ++k) {
    if (!active[k]) continue;
    members_[k].net->update_piece(0);
    losses[k] = members_[k].net->end_step();
  }
}

}  // namespace nnfleet
