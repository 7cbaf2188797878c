// Losses and metrics with Keras formulas (clipping epsilon 1e-7, reduction "sum over batch size").
// A prediction is [N,K] (K = all features of the model's output per sample). A target is either
// float values [N,K] (one-hot, regression targets) or integer class labels [N,S] (sparse losses).
//
// Per-timestep outputs: a row of K values holds S steps of C = K/S values (S = every output axis
// but the last, see loss_steps), and every loss and metric applies along the last axis, then
// averages over the steps, as Keras computes a loss on [N,T,C] (sparse labels are [N,T]). With a
// Keras mask on the output ([N,S], 1 kept and 0 masked), the batch's loss is sum(loss*mask) /
// sum(mask) (Keras 3 and tf.keras >= 2.11: apply_mask/apply_valid_mask; tf.keras <= 2.10 divided
// by N*S instead) and a metric is sum(value*mask) / sum(mask) over everything it has seen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "tensor/shape.h"

namespace nnfleet {

enum class LossKind {
  kMeanSquaredError,
  kMeanAbsoluteError,
  kHuber,
  kBinaryCrossentropy,
  kCategoricalCrossentropy,
  kSparseCategoricalCrossentropy,
};

struct LossSpec {
  LossKind kind = LossKind::kMeanSquaredError;
  bool from_logits = false;
  float delta = 1.0f;  // huber
  bool sparse() const { return kind == LossKind::kSparseCategoricalCrossentropy; }
};

struct Targets {
  const float* values = nullptr;    // [N,K] for dense targets
  const int32_t* labels = nullptr;  // [N,S] for sparse targets
  int steps = 1;                    // S: the steps a row of K predictions holds
  const float* mask = nullptr;      // [N,S] the output's Keras mask, or null
  // [N] Keras's sample_weight (class weights become these too); null: every weight 1. The loss
  // of a sample (each of its steps) is multiplied by its weight and the batch's loss stays the
  // sum over the batch size (Keras 3's sum_over_batch_size divides by N, or by sum(mask) with a
  // mask, not by the sum of the weights).
  const float* weights = nullptr;
};

// S for a model output of (per-sample) shape `out`: the product of all axes but the last (1 for
// a rank-1 output).
int loss_steps(const Shape& out);

// The one rule for the shape of a loss's targets, applied alike by training, predict and
// evaluate: a sparse loss takes one integer label per sample (per timestep of a [T,C] output),
// every other loss one value per output value (integer labels with categorical_crossentropy are
// refused, as Keras refuses them, with sparse_categorical_crossentropy named as the fix). Empty
// when `y_sample` (the per-sample shape of the targets) fits `output`; else the problem.
std::string target_shape_problem(const LossSpec& loss, const Shape& output, const Shape& y_sample);

// Parses "sparse_categorical_crossentropy", "mse", {"CategoricalCrossentropy": {"from_logits":
// true}} or Keras's {"class_name": ..., "config": ...}. Throws ConfigError listing valid names.
LossSpec parse_loss(const Json& j);
std::string loss_name(const LossSpec& l);  // Keras snake_case name
const std::vector<std::string>& loss_names();
// Keras 3 serialized form {"module": "keras.losses", "class_name": ..., "config": ...,
// "registered_name": null}, for compile_config in .keras files.
Json loss_to_keras(const LossSpec& l);
// Throws DataError unless every label is in [0, k). loss_forward/backward do not check labels
// (only NNFLEET_DCHECK does), so callers validate a dataset once with this.
void validate_labels(int n, int k, const int32_t* labels);
// Every kind with its variants (from_logits), for the gradient-check test.
std::vector<LossSpec> all_loss_specs();

// per_sample[N] = the loss of each sample (the mean over its steps; with a mask, over its kept
// steps, 0 when it has none), times its weight when t.weights is set. Returns N times the batch's
// loss as Keras reduces it: the sum of per_sample, or with a mask N * sum(w*loss*mask) / sum(mask)
// (0 when nothing is kept).
double loss_forward(const LossSpec& l, int n, int k, const float* pred, const Targets& t,
                    float* per_sample);
// dpred[N,K] = d(batch loss)/d pred (overwrites; includes the 1/(N*S), or with a mask
// mask/sum(mask); times each sample's weight). With `batch` > 0, the N rows are one piece of a
// batch of that many samples, and the mean is over it (a masked batch is never split: its
// normalizer needs every row).
void loss_backward(const LossSpec& l, int n, int k, const float* pred, const Targets& t,
                   float* dpred, int batch = 0);

enum class MetricKind {
  kSparseCategoricalAccuracy,
  kCategoricalAccuracy,
  kBinaryAccuracy,
  kMeanAbsoluteError,
  kMeanSquaredError,
  kTopKCategoricalAccuracy,        // Keras's default k = 5, one-hot targets
  kSparseTopKCategoricalAccuracy,  // k = 5, integer labels
  kMeanAbsolutePercentageError,    // 100 |y - p| / max(|y|, 1e-7), mean over K
  // Epoch-level statistics (MetricSet), not means of per-sample values:
  kPrecision,             // tp / (tp + fp) at threshold 0.5, over all N*K outputs
  kRecall,                // tp / (tp + fn) at threshold 0.5
  kAuc,                   // ROC AUC, 200 thresholds, trapezoidal interpolation
  kRootMeanSquaredError,  // sqrt of the epoch's mean squared error
  kR2Score,               // 1 - SS_res / SS_tot per output, averaged over the K outputs
};

// Resolves a metric name from a plan ("accuracy", "acc", "mae", "mse", or an explicit Keras name)
// the way Keras 3 does for "accuracy" (compile_utils.get_metric): K == 1 -> binary_accuracy;
// sparse loss (integer labels) -> sparse_categorical_accuracy; otherwise categorical_accuracy
// (also for binary cross-entropy with K > 1, as Keras 3; tf.keras 2 chose binary_accuracy there).
// Throws ConfigError for an unknown name or one that does not fit the targets (e.g.
// categorical_accuracy or mae with integer labels).
MetricKind resolve_metric(const std::string& name, const LossSpec& loss, int k);
// The key used in histories and results ("accuracy", "mae", "mse" as the user wrote it).
std::string metric_key(const std::string& name);
// Whether a higher value of the metric (a name or a history key) is better, as its Keras
// class's _direction says (accuracies up, errors down). Throws ConfigError for an unknown name.
bool metric_goes_up(const std::string& name);

// What metric_sum's values are divided by: N, or with a mask the sum over the samples of their
// kept fraction of steps (Keras's Mean count with the mask as sample weight).
double metric_weight(int n, const Targets& t);
// Sum over the batch of the metric's per-sample value, the mean over its steps of the per-step
// value times the mask (callers divide by the summed metric_weight).
// binary_accuracy thresholds probabilities at 0.5, or logits at 0 when from_logits (Keras itself
// thresholds at 0.5 whatever the loss); each of the K outputs counts 1/K. Argmax ties go to the
// first maximum. mae/mse/mape are means over K. Top-k counts a hit when fewer than k outputs are
// strictly greater than the true class's (TensorFlow's in_top_k: ties at the boundary are in).
// Only for the kinds that are means of per-sample values (not precision, recall, AUC,
// root_mean_squared_error, r2_score: NNFLEET_CHECK).
double metric_sum(MetricKind m, int n, int k, const float* pred, const Targets& t,
                  bool from_logits);

// The metrics of one model, accumulated over the batches of an epoch as Keras's stateful metrics
// are (update_state per batch, result() at the end): a mean keeps its weighted sum and the sum
// of the weights; precision and recall their true positive, false positive and false negative
// counts; AUC the weight of positive and of negative targets in each of its 200 buckets; r2_score
// four sums per output. All the state is one array of doubles (state_size(), zeroed to start an
// epoch), so accumulating never allocates and a checkpoint keeps the state as it is.
//
// Keras semantics: precision/recall count y != 0 as positive and p > 0.5 as predicted positive;
// AUC buckets clip(p, 0, 1) at ceil(p * 199) - 1 (Keras's evenly spaced thresholds
// {-1e-7, 1/199, ..., 198/199, 1 + 1e-7}), then sums the ROC curve's trapezoids. With a
// from_logits loss the predictions are squashed by a sigmoid first (the threshold 0.5 on
// probabilities is 0 on logits, as binary_accuracy does). Weights weigh each sample as Keras's
// sample_weight does (a sample's K outputs share its weight).
class MetricSet {
 public:
  MetricSet() = default;
  // Resolves every name (resolve_metric) for a model with k outputs per sample in `steps` steps
  // of k / steps classes each (Targets::steps); throws ConfigError.
  MetricSet(const std::vector<std::string>& names, const LossSpec& loss, int k, int steps = 1);
  size_t size() const { return slots_.size(); }
  const std::string& key(size_t m) const { return slots_[m].key; }
  MetricKind kind(size_t m) const { return slots_[m].kind; }
  size_t state_size() const { return state_size_; }
  // Adds n rows (predictions pred[n,k], targets t); weights[n] may be null (every weight 1).
  void accumulate(double* state, int n, const float* pred, const Targets& t,
                  const float* weights) const;
  // Metric m over everything accumulated since the state was zeroed (0 when nothing counts,
  // as Keras's divide_no_nan).
  double value(size_t m, const double* state) const;

 private:
  struct Slot {
    MetricKind kind;
    std::string key;
    size_t offset;
  };
  std::vector<Slot> slots_;
  int k_ = 0;
  bool from_logits_ = false;
  size_t state_size_ = 0;
};

}  // namespace nnfleet
