// Network: one instance of a Model with its own arena (parameters, gradients, optimizer state,
// activations, caches, scratch), sized once for a maximum batch. forward(), train_step() and
// evaluate_batch() never allocate or throw. Not thread-safe: one Network per worker; many Networks
// may share one Model, and inference Networks may share one read-only parameter block.
#pragma once

#include <memory>
#include <vector>

#include "loss/loss.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "tensor/arena.h"
#include "tensor/rng.h"

namespace nnfleet {

struct TrainSpec {
  LossSpec loss;
  OptimizerSpec optimizer;
};

class Network {
 public:
  // Inference only. With `shared_params` (a block laid out like params()), the network reads its
  // weights from there and owns none (several workers can share one copy).
  Network(std::shared_ptr<const Model> model, int max_batch, const float* shared_params = nullptr);
  // Training: adds gradients, optimizer state and loss buffers.
  Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train);

  // Arena bytes a training Network of this model would take, without allocating it.
  static size_t estimate_bytes(std::shared_ptr<const Model> model, int max_batch,
                               const TrainSpec& train);

  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> model_ptr() const { return model_; }
  int max_batch() const { return max_batch_; }
  bool trainable() const { return train_; }
  const TrainSpec& train_spec() const { return spec_; }
  size_t arena_bytes() const { return arena_.size_bytes(); }

  // Input buffer [max_batch, input_shape]: fill the first n rows, then forward().
  float* input() { return arena_.at(input_off_); }
  // Output of the last forward() [n, output features].
  const float* output() const { return out_ptr_; }
  int64_t output_features() const { return model_->output_shape().size(); }

  // All parameters, trainable first (in layer and param_specs order), then non-trainable.
  float* params() { return params_; }
  const float* params() const { return params_; }
  size_t num_params() const { return n_trainable_ + n_fixed_; }
  size_t num_trainable() const { return n_trainable_; }
  // The j-th param_specs() entry of layer i.
  float* param(size_t layer, size_t j) { return param_ptrs_[layer][j]; }
  const float* param(size_t layer, size_t j) const { return param_ptrs_[layer][j]; }

  // Fills every parameter with its initializer, layer by layer, from `rng`; resets the optimizer.
  void initialize(Rng& rng);

  void forward(int n, bool training);
  // One optimizer step on the first n rows of input() with targets `t`; returns the batch's mean
  // loss (not checked here: the caller stops a model whose loss is not finite).
  double train_step(int n, const Targets& t);
  // Forward in inference mode; per_sample[n] receives each sample's loss (may be null) and the
  // returned value is the loss summed over the batch.
  double evaluate_batch(int n, const LossSpec& loss, const Targets& t, float* per_sample);

  Rng& rng() { return rng_; }
  void set_rng(const Rng& r) { rng_ = r; }
  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t it) { iterations_ = it; }
  // Gradients of the trainable parameters from the last train_step (laid out like params()).
  const float* gradients() const { return train_ ? arena_.at(grads_off_) : nullptr; }
  float* optimizer_state() { return train_ ? arena_.at(state_off_) : nullptr; }
  const float* optimizer_state() const { return train_ ? arena_.at(state_off_) : nullptr; }
  size_t optimizer_state_floats() const { return state_floats_; }

 private:
  struct DryRun {};
  Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train, DryRun);
  // Lays out the arena; allocates it and sets up the views unless `allocate` is false.
  void plan(int max_batch, const float* shared_params, bool allocate = true);
  void backward(int n);
  // The arguments of layer i's forward/backward over this network's buffers.
  LayerArgs layer_args(size_t i, int n, bool training);

  std::shared_ptr<const Model> model_;
  int max_batch_;
  bool train_ = false;
  TrainSpec spec_;
  Arena arena_;
  Rng rng_;
  int64_t iterations_ = 0;

  size_t params_off_ = 0, grads_off_ = 0, state_off_ = 0, input_off_ = 0, loss_off_ = 0;
  size_t zero_begin_ = 0, zero_end_ = 0;  // gradients and activation gradients, zeroed per step
  size_t n_trainable_ = 0, n_fixed_ = 0, state_floats_ = 0, scratch_off_ = 0;
  float* params_ = nullptr;
  const float* out_ptr_ = nullptr;

  struct NodeBuffers {
    size_t y_off = 0, cache_off = 0, dy_off = 0;
    std::vector<const float*> x;  // input pointers
    std::vector<float*> dx;       // input gradient pointers (null for the model input)
    std::vector<float*> dparams;  // trainable params' gradients
  };
  std::vector<NodeBuffers> nodes_;
  std::vector<std::vector<float*>> param_ptrs_;
  std::vector<VarRange> vars_;
};

}  // namespace nnfleet
