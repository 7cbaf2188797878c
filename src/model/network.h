// Network: one instance of a Model with its own arena (parameters, gradients, optimizer state,
// activations, caches, scratch), sized once for a maximum batch. forward(), train_step() and
// evaluate_batch() never allocate or throw. Not thread-safe: one Network per worker; many Networks
// may share one Model, and inference Networks may share one read-only parameter block.
//
// A training Network may split every batch into a fixed number of pieces (rows
// [p*ceil(B/P), ...) of a batch of at most B rows): each piece has its own activations, gradients
// and dropout stream, so the pieces of a step can be computed on different threads
// (begin_step, train_piece, update_piece, end_step); their gradients are summed in piece order. The
// result depends on the number of pieces, never on which thread computed which piece.
#pragma once

#include <memory>
#include <vector>

#include "loss/loss.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "tensor/arena.h"
#include "tensor/rng.h"

namespace nnfleet {

// One output's loss and its weight in the total (Keras's loss_weights).
struct OutputLoss {
  LossSpec loss;
  double weight = 1.0;
};

struct TrainSpec {
  LossSpec loss;
  OptimizerSpec optimizer;
  // For a model with several outputs: one entry per output in output order; the training loss is
  // the weighted sum of the outputs' mean losses, as Keras's. Empty: `loss` on every output,
  // each with weight 1 (Keras's single loss for all outputs).
  std::vector<OutputLoss> outputs = {};
  const LossSpec& loss_of(size_t j) const { return outputs.empty() ? loss : outputs[j].loss; }
  double weight_of(size_t j) const { return outputs.empty() ? 1.0 : outputs[j].weight; }
};

class Network {
 public:
  // Inference only. With `shared_params` (a block laid out like params()), the network reads its
  // weights from there and owns none (several workers can share one copy).
  Network(std::shared_ptr<const Model> model, int max_batch, const float* shared_params = nullptr);
  // Training: adds gradients, optimizer state and loss buffers; `pieces` splits every batch (at
  // most max_batch pieces; a model whose layers mix samples is never split).
  // Both throw ModelError (naming the model and the bytes) when the arena cannot be allocated.
  Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train,
          int pieces = 1);

  // Arena bytes a training Network of this model would take, without allocating it.
  static size_t estimate_bytes(std::shared_ptr<const Model> model, int max_batch,
                               const TrainSpec& train, int pieces = 1);

  const Model& model() const { return *model_; }
  std::shared_ptr<const Model> model_ptr() const { return model_; }
  int max_batch() const { return max_batch_; }
  int pieces() const { return static_cast<int>(pieces_.size()); }
  bool trainable() const { return train_; }
  const TrainSpec& train_spec() const { return spec_; }
  // Replaces the optimizer's constant learning rate from the next update on (ReduceLROnPlateau);
  // a scheduled rate cannot be replaced (NNFLEET_CHECK).
  void set_learning_rate(double lr);
  size_t arena_bytes() const { return arena_.size_bytes(); }
  // For a trained network whose file is being made, so that the file's copies of its numbers
  // take the place of the network's memory instead of coming on top of it (W1's peak was the
  // save of m7, then of m8: their 14.4 and 8.0 MB of weights and optimizer state copied two or
  // three times while the whole arena was held). Each gives memory back to the system; the
  // numbers it covers are undefined afterwards (Arena::discard).
  // Everything but params() and optimizer_state(): gradients, activations, caches, scratch.
  void discard_working_memory();
  // The arena's pages wholly inside [first, first + n), which must lie in params() or
  // optimizer_state().
  void discard_numbers(const float* first, size_t n);

  // Layer i's output [n, its shape] of the last forward (piece 0's rows), for inspection; a view
  // layer's (Layer::output_aliases_input) is its input's buffer.
  const float* layer_output(size_t i) const { return arena_.at(pieces_[0].nodes[i].y_off); }
  // Input buffer k [max_batch, input k's shape]: fill the first n rows of every input, then
  // forward().
  float* input(size_t k = 0) { return arena_.at(input_offs_[k]); }
  // Output j of the last forward() or training step [n, output j's features].
  const float* output(size_t j = 0) const { return out_ptrs_[j]; }
  int64_t output_features(size_t j = 0) const { return model_->output_shape(j).size(); }
  // The steps of output j that the loss and metrics average over (loss_steps), and the Keras
  // mask [n, steps] it carries after the last forward (null when none reaches it).
  int output_steps(size_t j = 0) const { return loss_steps(model_->output_shape(j)); }
  const float* output_mask(size_t j = 0) const;
  // `t` with output j's steps and mask, for loss_forward and metric_sum on output(j).
  Targets on_output(Targets t, size_t j = 0) const;

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
  // One optimizer step on the first n rows of the inputs with targets `t`; returns the batch's
  // mean loss (not checked here: the caller stops a model whose loss is not finite). The same as
  // begin_step, then train_piece for every piece, then update_piece for every piece, then
  // end_step. A model with several outputs takes one Targets per output (`t[j]`, output order)
  // and returns the weighted sum of their mean losses.
  double train_step(int n, const Targets& t) { return train_step(n, &t); }
  double train_step(int n, const Targets* t);
  // The step in parts, for running one model's step on several threads. train_piece(p) may run
  // concurrently for distinct p (each touches only its piece's buffers); once all have returned,
  // so may update_piece(p), which adds the pieces' gradients of its share of the parameters in
  // piece order and applies the optimizer to that share (with gradient clipping, which needs all
  // gradients at once, update_piece(0) does the whole update and the others nothing).
  void begin_step(int n, const Targets& t) { begin_step(n, &t); }
  void begin_step(int n, const Targets* t);
  void train_piece(int p);
  void update_piece(int p);
  double end_step();
  // Packing (model/dense_pack.h): while `outside` is set, train_piece skips layer 0's forward and
  // backward, for a pack that computes layer 0 of several networks as one wider product: it fills
  // layer 0's output and cache after begin_step and adds its parameter gradients before
  // update_piece. Inference is unaffected. Only for a training network of one piece whose layer
  // 0 reads the model input (NNFLEET_CHECK).
  void set_first_layer_outside(bool outside);
  // Layer 0's arguments over the piece's buffers as train_piece passes them (output, cache,
  // scratch, output gradient, parameters and their gradients; n of the current step).
  LayerArgs first_layer_args();
  // Output j's per-sample losses [n] of the last step (unweighted), for per-output histories.
  const float* step_losses(size_t j) const { return arena_.at(out_loss_offs_[j]); }
  // Forward in inference mode; per_sample[n] receives each sample's loss (may be null) and the
  // returned value is the loss summed over the batch.
  double evaluate_batch(int n, const LossSpec& loss, const Targets& t, float* per_sample);
  // evaluate_batch in parts, for running a split network's inference on several threads:
  // begin_inference(n), then infer_piece(p) for every piece (concurrently for distinct p), then
  // output_loss on the output they leave.
  void begin_inference(int n);
  void infer_piece(int p);
  double output_loss(int n, const LossSpec& loss, const Targets& t, float* per_sample);
  // The training losses of every output on the output the last forward left: out_sums[j] (one
  // per output) receives output j's summed (unweighted) loss; returns the summed weighted total.
  double output_losses(int n, const Targets* t, double* out_sums);

  // Regularization (model/layer_training.h), as Keras adds it to the loss: train_step's loss
  // includes the weight penalties of the trainable weights (before the update) and the activity
  // penalties of the batch divided by its size. For evaluation, the same parts of the current
  // state: the weight penalty (0 without weight regularizers) and the activity penalties of the
  // last forward() or inference, summed over its rows (not divided).
  double weight_penalty() const;
  double activity_penalty_sum() const;

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
  Network(std::shared_ptr<const Model> model, int max_batch, const TrainSpec& train, int pieces,
          DryRun);
  // arena_.allocate(); a refusal becomes a ModelError naming the model and the bytes.
  void allocate_arena(int max_batch);

  struct NodeBuffers {
    size_t y_off = 0, cache_off = 0, dy_off = 0;
    std::vector<size_t> extra_y_off, extra_dy_off;  // outputs 1.. of a multi-output layer
    // The Keras mask [capacity, T] its output carries (kNoMask: none), and the one its input
    // carries; a producer's is its own arena block, others share their source's.
    static constexpr size_t kNoMask = ~size_t{0};
    size_t mask_off = kNoMask, in_mask_off = kNoMask;
    bool makes_mask = false;
    std::vector<const float*> x;  // input pointers
    std::vector<float*> dx;       // input gradient pointers (null for the model input)
    std::vector<float*> dparams;  // trainable params' gradients (a frozen layer's: a sink)
    std::vector<float*> extra_y;  // outputs 1.. and their gradients (training)
    std::vector<const float*> extra_dy;
  };
  // An activation gradient block to zero when it becomes live: its first `row_floats * n` floats.
  struct ZeroBlock {
    size_t off = 0, row_floats = 0;
  };
  // The buffers of one piece of the batch (a single piece when the batch is not split).
  struct Piece {
    int row0 = 0, capacity = 0;  // its rows of the batch
    int n = 0;                   // its rows in the current step
    size_t grads_off = 0, scratch_off = 0;
    // Parameter gradients zeroed at the start of each step, [offset, offset + floats): those of
    // layers that add to theirs, and the frozen weights' sink (Piece::fresh_dparams).
    std::vector<std::pair<size_t, size_t>> zero_params;
    // Activation gradient blocks to zero at the start of the step (those the loss or an activity
    // regularizer writes), and before node i's backward (those node i's backward writes first,
    // or, when nothing writes one, reads first).
    std::vector<ZeroBlock> zero_first;
    std::vector<std::vector<ZeroBlock>> zero_before;
    // Per node: its backward writes its zero_before blocks, all its input gradients, instead of
    // adding to them (LayerArgs::dx_fresh), so they are not zeroed.
    std::vector<char> fresh_dx;
    // Per node: its backward writes its parameter gradients (LayerArgs::dparams_fresh): its
    // layer can, it is no shared layer's call and its gradients are no sink, so they need no
    // zeroing and update_piece adds a piece's in without zeroing it after.
    std::vector<char> fresh_dparams;
    std::vector<NodeBuffers> nodes;
    Rng rng;              // its dropout stream (split networks)
    double loss_sum = 0;  // its rows' loss in the current step (loss_forward's value)
    size_t sink_off = 0;  // gradients of frozen layers' weights, written and never read
    double activity = 0.0, weight_penalty = 0.0;  // this step's regularization parts
  };
  // Lays out a piece's activation gradients (their offsets and when each is zeroed): blocks
  // whose lifetimes do not overlap share memory (model/buffer_plan.h).
  void plan_gradients(Piece& pc);
  // Which nodes' backward may write their input gradients unzeroed (Piece::fresh_dx).
  void plan_fresh_dx(Piece& pc);
  // Which nodes write their parameter gradients (Piece::fresh_dparams, zero_params).
  void plan_fresh_dparams(Piece& pc);
  // Planning, split as XNNPACK splits reshape from setup. reshape() settles every tensor's shape
  // and place in the arena (offsets only; throws ModelError for a model that cannot train this
  // way); setup() allocates the arena and binds every pointer into it. estimate_bytes() stops
  // after reshape(); the constructors run both.
  void reshape(int pieces, bool own_params);
  void setup(const float* shared_params);
  // The phases of reshape(), in order.
  void count_params();
  void check_trainable() const;  // training only
  // Which layers' outputs are views of their inputs (views_).
  void plan_views();
  // Splits the batch into pieces (at most `pieces`, fewer when a model cannot be split).
  void plan_pieces(int pieces);
  // Reserves every block of the arena, in the order of the layout it describes.
  void plan_arena(bool own_params);
  // A piece's outputs, caches, scratch and masks.
  void plan_activations(Piece& pc);
  // The phases of setup() after the allocation.
  void bind_params(const float* shared_params);
  void bind_inputs(size_t i);  // each piece's input (and input gradient) pointers of layer i
  void bind_outputs();
  // The arena offset of layer i's output when it is a view of its input (output_aliases_input).
  size_t view_offset(const Piece& pc, size_t i) const;
  // Layers from `first` on (train_piece: 1 while layer 0 is computed outside).
  void forward_piece(Piece& pc, bool training, size_t first = 0);
  void backward_piece(Piece& pc, size_t first = 0);
  // Where each node's output mask and input mask live (see Layer::mask_use).
  void plan_masks(Piece& pc);
  // The layer whose output's mask reaches layer i's input (-1: none): its input when it has one,
  // or its first (the sequence) when it consumes masks; never a layer's extra output.
  static int mask_input(const Model& m, size_t i);
  // Pointers to the output and gradient of input j of layer i (k-th output of its node).
  float* tensor_y(Piece& pc, size_t i, size_t j);
  float* tensor_dy(Piece& pc, size_t i, size_t j);
  // For each node, the node whose made mask its output carries (-1: none).
  static std::vector<int> mask_sources(const Model& m);
  // The steps of the mask reaching the model's output j (0: none).
  static int output_mask_steps(const Model& m, size_t j);
  // The arguments of layer i's forward/backward over a piece's buffers.
  LayerArgs layer_args(Piece& pc, size_t i, bool training);
  // Copies a piece's output rows into the gathered outputs (split networks).
  void gather_output(const Piece& pc);
  // The loss of output j over a piece's rows: per-sample values, and its weighted gradient.
  void piece_loss(Piece& pc, size_t j);

  std::shared_ptr<const Model> model_;
  int max_batch_;
  bool train_ = false;
  TrainSpec spec_;
  Arena arena_;
  Rng rng_;
  int64_t iterations_ = 0;

  size_t params_off_ = 0, grads_off_ = 0, state_off_ = 0, loss_off_ = 0;
  std::vector<size_t> input_offs_;  // per input [max_batch, its shape]
  // Per output: the gathered output [max_batch, its features] (split networks) and its
  // per-sample losses [max_batch] (loss_off_ itself when there is one output).
  std::vector<size_t> out_offs_, out_loss_offs_;
  size_t n_trainable_ = 0, n_fixed_ = 0, state_floats_ = 0;
  float* params_ = nullptr;
  std::vector<const float*> out_ptrs_;
  std::vector<Piece> pieces_;
  int step_n_ = 0;
  std::vector<Targets> step_targets_;  // one per output, sized once
  std::vector<std::vector<float*>> param_ptrs_;
  std::vector<VarRange> vars_;

  // Regularization and constraints (network_training.cpp).
  struct RegularizedVar {
    size_t offset, size;  // in params()
    Regularizer reg;
  };
  struct ConstrainedVar {
    size_t offset;  // in params()
    Shape shape;
    Constraint constraint;
  };
  std::vector<RegularizedVar> reg_vars_;
  std::vector<ConstrainedVar> constrained_;
  std::vector<std::pair<size_t, Regularizer>> activity_;  // (node, regularizer)
  std::vector<char> needs_backward_;  // a node with trainable weights at or before it
  std::vector<char> views_;           // a node whose output is a view of its input (never run)
  std::vector<char> inference_mode_;  // a frozen layer with batch statistics
  bool first_outside_ = false;        // set_first_layer_outside
  // Fills the members above from the model (before the arena is laid out).
  void plan_training();
  // Adds the weight regularizers' gradients over trainable parameters [begin, end) and returns
  // their penalty there.
  double regularize(size_t begin, size_t end);
  // The piece's activity penalties of its last forward (and their gradients when training).
  void activity_forward(Piece& pc, bool add_grads);
  void apply_constraints();
  size_t sink_floats() const;
};

}  // namespace nnfleet
