// Metrics: Keras 3's resolution of "accuracy", the per-batch sums of the mean metrics
// (accuracies, mae, mse, mape) and the epoch-level state of every metric (MetricSet).
#include <algorithm>
#include <cmath>

#include "loss/loss.h"

namespace nnfleet {
namespace {

struct NamedMetric {
  const char* name;
  const char* key;  // history key
  int kind;         // -1 = "accuracy" (resolved from the loss), else a MetricKind
};

const std::vector<NamedMetric>& table() {
  static const std::vector<NamedMetric> t = {
      {"accuracy", "accuracy", -1},
      {"acc", "accuracy", -1},
      {"binary_accuracy", "binary_accuracy", static_cast<int>(MetricKind::kBinaryAccuracy)},
      {"categorical_accuracy", "categorical_accuracy",
       static_cast<int>(MetricKind::kCategoricalAccuracy)},
      {"sparse_categorical_accuracy", "sparse_categorical_accuracy",
       static_cast<int>(MetricKind::kSparseCategoricalAccuracy)},
      {"mae", "mae", static_cast<int>(MetricKind::kMeanAbsoluteError)},
      {"mean_absolute_error", "mae", static_cast<int>(MetricKind::kMeanAbsoluteError)},
      {"mse", "mse", static_cast<int>(MetricKind::kMeanSquaredError)},
      {"mean_squared_error", "mse", static_cast<int>(MetricKind::kMeanSquaredError)},
      {"top_k_categorical_accuracy", "top_k_categorical_accuracy",
       static_cast<int>(MetricKind::kTopKCategoricalAccuracy)},
      {"sparse_top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy",
       static_cast<int>(MetricKind::kSparseTopKCategoricalAccuracy)},
      {"mape", "mape", static_cast<int>(MetricKind::kMeanAbsolutePercentageError)},
      {"mean_absolute_percentage_error", "mape",
       static_cast<int>(MetricKind::kMeanAbsolutePercentageError)},
      // Keras 3 names these metrics as written (compile_utils.get_metric).
      {"precision", "precision", static_cast<int>(MetricKind::kPrecision)},
      {"Precision", "Precision", static_cast<int>(MetricKind::kPrecision)},
      {"recall", "recall", static_cast<int>(MetricKind::kRecall)},
      {"Recall", "Recall", static_cast<int>(MetricKind::kRecall)},
      {"auc", "auc", static_cast<int>(MetricKind::kAuc)},
      {"AUC", "AUC", static_cast<int>(MetricKind::kAuc)},
      {"root_mean_squared_error", "root_mean_squared_error",
       static_cast<int>(MetricKind::kRootMeanSquaredError)},
      {"RootMeanSquaredError", "RootMeanSquaredError",
       static_cast<int>(MetricKind::kRootMeanSquaredError)},
      {"r2_score", "r2_score", static_cast<int>(MetricKind::kR2Score)},
      {"R2Score", "R2Score", static_cast<int>(MetricKind::kR2Score)},
  };
  return t;
}

const NamedMetric& find_metric(const std::string& name) {
  for (const auto& e : table())
    if (name == e.name) return e;
  std::string list;
  std::vector<std::string> names;
  for (const auto& e : table()) {
    list += (list.empty() ? "" : ", ") + std::string(e.name);
    names.push_back(e.name);
  }
  throw ConfigError("metrics", "unknown metric \"" + name + "\"; expected one of " + list +
                                   near_miss(name, names));
}

constexpr int kTopK = 5;  // Keras's default k of the top-k accuracies

// True when fewer than kTopK of x[k] are strictly greater than x[c].
bool in_top_k(int k, const float* x, int c) {
  int greater = 0;
  for (int j = 0; j < k; ++j) greater += x[j] > x[c];
  return greater < kTopK;
}

// Index of the first maximum of x[k] (a NaN is never greater, as in a plain scan). Without
// branches: a young classifier's outputs are noise, and a mispredicted compare per column made
// the accuracy of a 10-class row cost as much as its softmax.
int argmax(int k, const float* x) {
  int best = 0;
  float top = x[0];
  for (int j = 1; j < k; ++j) {
    const bool greater = x[j] > top;
    best = greater ? j : best;
    top = greater ? x[j] : top;
  }
  return best;
}

// True for the kinds whose value is the (weighted) mean of a per-sample value.
bool is_mean(MetricKind m) {
  return m != MetricKind::kPrecision && m != MetricKind::kRecall && m != MetricKind::kAuc &&
         m != MetricKind::kR2Score && m != MetricKind::kRootMeanSquaredError;
}

// The metric's value on one step: k predictions p with targets y (null: the label).
double step_value(MetricKind m, int k, const float* p, const float* y, int32_t label,
                  bool from_logits) {
  double sum = 0;
  {
    switch (m) {
      case MetricKind::kSparseCategoricalAccuracy:
        NNFLEET_DCHECK(label >= 0);
        sum += argmax(k, p) == label ? 1.0 : 0.0;
        break;
      case MetricKind::kCategoricalAccuracy:
        NNFLEET_DCHECK(y != nullptr);
        sum += argmax(k, p) == argmax(k, y) ? 1.0 : 0.0;
        break;
      case MetricKind::kBinaryAccuracy: {
        const float thr = from_logits ? 0.0f : 0.5f;
        int hits = 0;
        for (int j = 0; j < k; ++j) {
          const float predicted = p[j] > thr ? 1.0f : 0.0f;
          const float truth = y ? y[j] : static_cast<float>(label);
          hits += predicted == truth;
        }
        sum += static_cast<double>(hits) / k;
        break;
      }
      case MetricKind::kMeanAbsoluteError: {
        NNFLEET_DCHECK(y != nullptr);
        double a = 0;
        for (int j = 0; j < k; ++j) a += std::fabs(static_cast<double>(p[j]) - y[j]);
        sum += a / k;
        break;
      }
      case MetricKind::kTopKCategoricalAccuracy:
        NNFLEET_DCHECK(y != nullptr);
        sum += in_top_k(k, p, argmax(k, y)) ? 1.0 : 0.0;
        break;
      case MetricKind::kSparseTopKCategoricalAccuracy:
        NNFLEET_DCHECK(label >= 0);
        sum += in_top_k(k, p, label) ? 1.0 : 0.0;
        break;
      case MetricKind::kMeanAbsolutePercentageError: {
        NNFLEET_DCHECK(y != nullptr);
        double a = 0;
        for (int j = 0; j < k; ++j)
          a += std::fabs((static_cast<double>(y[j]) - p[j]) /
                         std::max(std::fabs(static_cast<double>(y[j])), 1e-7));
        sum += 100.0 * a / k;
        break;
      }
      case MetricKind::kMeanSquaredError: {
        NNFLEET_DCHECK(y != nullptr);
        double a = 0;
        for (int j = 0; j < k; ++j) {
          const double e = static_cast<double>(p[j]) - y[j];
          a += e * e;
        }
        sum += a / k;
        break;
      }
      default:  // the epoch-level kinds have no per-step value (MetricSet)
        NNFLEET_CHECK(false);
    }
  }
  return sum;
}

// The per-sample value of a mean metric for row i: the mean over its S steps of the per-step
// value times the step's mask (as metric_sum sums it).
double row_value(MetricKind m, int i, int k, const float* pred, const Targets& t,
                 bool from_logits) {
  NNFLEET_DCHECK(t.steps >= 1 && k % t.steps == 0);
  const int s = t.steps, c = k / s;
  double row = 0;
  for (int j = 0; j < s; ++j) {
    const size_t r = static_cast<size_t>(i) * s + j;
    const double w = t.mask ? t.mask[r] : 1.0;
    if (w == 0) continue;
    const float* y = t.values ? t.values + r * c : nullptr;
    const int32_t label = t.labels ? t.labels[r] : -1;
    row += w * step_value(m, c, pred + r * c, y, label, from_logits);
  }
  return s == 1 ? row : row / s;
}

// Sample i's kept fraction of its steps (1 without a mask): its weight in a mean metric.
double kept_fraction(int i, const Targets& t) {
  if (!t.mask) return 1.0;
  double kept = 0;
  for (int j = 0; j < t.steps; ++j) kept += t.mask[static_cast<size_t>(i) * t.steps + j];
  return kept / t.steps;
}

// The weight of output o (of a row of k) of sample i in the epoch-level metrics: the sample's
// weight times its step's mask.
inline double output_weight(int i, int k, int o, const Targets& t, const float* weights) {
  const double w = weights ? weights[i] : 1.0;
  if (!t.mask) return w;
  const int c = k / t.steps;
  return w * t.mask[static_cast<size_t>(i) * t.steps + o / c];
}

}  // namespace

std::string metric_key(const std::string& name) { return find_metric(name).key; }

bool metric_goes_up(const std::string& name) {
  const NamedMetric* e = nullptr;
  for (const auto& m : table())
    if (name == m.name || name == m.key) e = &m;
  if (!e) find_metric(name);  // throws
  switch (e->kind < 0 ? MetricKind::kCategoricalAccuracy : static_cast<MetricKind>(e->kind)) {
    case MetricKind::kMeanAbsoluteError:
    case MetricKind::kMeanSquaredError:
    case MetricKind::kMeanAbsolutePercentageError:
    case MetricKind::kRootMeanSquaredError:
      return false;
    case MetricKind::kSparseCategoricalAccuracy:
    case MetricKind::kCategoricalAccuracy:
    case MetricKind::kBinaryAccuracy:
    case MetricKind::kTopKCategoricalAccuracy:
    case MetricKind::kSparseTopKCategoricalAccuracy:
    case MetricKind::kPrecision:
    case MetricKind::kRecall:
    case MetricKind::kAuc:
    case MetricKind::kR2Score:
      return true;
  }
  return false;
}

MetricKind resolve_metric(const std::string& name, const LossSpec& loss, int k) {
  const NamedMetric& e = find_metric(name);
  MetricKind m;
  if (e.kind >= 0) {
    m = static_cast<MetricKind>(e.kind);
  } else if (k == 1) {
    m = MetricKind::kBinaryAccuracy;
  } else if (loss.sparse()) {
    m = MetricKind::kSparseCategoricalAccuracy;
  } else {
    m = MetricKind::kCategoricalAccuracy;
  }
  const bool labels = loss.sparse();
  if ((m == MetricKind::kSparseCategoricalAccuracy ||
       m == MetricKind::kSparseTopKCategoricalAccuracy) &&
      !labels)
    throw ConfigError("metrics", "metric \"" + name +
                                     "\" needs integer class labels; expected a sparse loss "
                                     "(sparse_categorical_crossentropy), got " +
                                     loss_name(loss));
  if ((m == MetricKind::kCategoricalAccuracy || m == MetricKind::kMeanAbsoluteError ||
       m == MetricKind::kMeanSquaredError || m == MetricKind::kTopKCategoricalAccuracy ||
       m == MetricKind::kMeanAbsolutePercentageError || !is_mean(m)) &&
      labels)
    throw ConfigError("metrics", "metric \"" + name +
                                     "\" needs targets shaped like the predictions; expected a "
                                     "non-sparse loss, got " +
                                     loss_name(loss));
  if (m == MetricKind::kBinaryAccuracy && labels && k != 1)
    throw ConfigError("metrics", "metric \"" + name +
                                     "\" with integer labels needs one output per sample; "
                                     "expected K = 1, got K = " +
                                     std::to_string(k));
  return m;
}

double metric_sum(MetricKind m, int n, int k, const float* pred, const Targets& t,
                  bool from_logits) {
  NNFLEET_CHECK(is_mean(m));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += row_value(m, i, k, pred, t, from_logits);
  return sum;
}

double metric_weight(int n, const Targets& t) {
  if (!t.mask) return n;
  double w = 0;
  for (int i = 0; i < n; ++i) w += kept_fraction(i, t);
  return w;
}

// ---- MetricSet: epoch-level state ----

namespace {

constexpr int kAucThresholds = 200;  // Keras's AUC num_thresholds

// Floats of state of one metric on k outputs.
size_t state_floats(MetricKind m, int k) {
  switch (m) {
    case MetricKind::kPrecision:
    case MetricKind::kRecall:
      return 3;  // tp, fp, fn
    case MetricKind::kAuc:
      return 2 * kAucThresholds;  // weight of positives, then of negatives, per bucket
    case MetricKind::kR2Score:
      return 4 * static_cast<size_t>(k);  // per output: sum w y, sum w y^2, sum w (y-p)^2, sum w
    default:
      return 2;  // sum of w * value, sum of w
  }
}

// A prediction as the confusion-matrix metrics see it: a probability.
inline float probability(float p, bool from_logits) {
  return from_logits ? 1.0f / (1.0f + std::exp(-p)) : p;
}

// Keras's bucket of a prediction among the evenly spaced AUC thresholds
// (_update_confusion_matrix_variables_optimized): relu(ceil(clip(p) * (T - 1)) - 1), in float32.
inline int auc_bucket(float p) {
  const float q = std::min(std::max(p, 0.0f), 1.0f) * static_cast<float>(kAucThresholds - 1);
  const int b = static_cast<int>(std::ceil(q)) - 1;
  return std::clamp(b, 0, kAucThresholds - 1);  // (NaN: bucket 0)
}

inline double no_nan_div(double a, double b) { return b == 0 ? 0.0 : a / b; }

// ROC AUC of the bucket weights: tp(i) and fp(i) are the positive and negative weight in
// buckets >= i (the samples above threshold i); the trapezoids between consecutive thresholds
// of (fpr, recall) summed, as Keras's AUC.result() with summation_method "interpolation".
double auc_value(const double* pos, const double* neg) {
  double total_pos = 0, total_neg = 0;
  for (int b = 0; b < kAucThresholds; ++b) total_pos += pos[b], total_neg += neg[b];
  double tp = 0, fp = 0, area = 0, x_prev = 0, y_prev = 0;
  for (int i = kAucThresholds - 1; i >= 0; --i) {
    tp += pos[i];
    fp += neg[i];
    const double y = no_nan_div(tp, total_pos), x = no_nan_div(fp, total_neg);
    if (i < kAucThresholds - 1) area += (x - x_prev) * (y + y_prev) / 2;
    x_prev = x;
    y_prev = y;
  }
  return area;
}

}  // namespace

MetricSet::MetricSet(const std::vector<std::string>& names, const LossSpec& loss, int k, int steps)
    : k_(k), from_logits_(loss.from_logits) {
  NNFLEET_CHECK(steps >= 1 && k % steps == 0);
  for (const auto& name : names) {
    const MetricKind m = resolve_metric(name, loss, k / steps);
    slots_.push_back({m, metric_key(name), state_size_});
    state_size_ += state_floats(m, k);
  }
}

void MetricSet::accumulate(double* state, int n, const float* pred, const Targets& t,
                           const float* weights) const {
  const int k = k_;
  for (const Slot& sl : slots_) {
    double* st = state + sl.offset;
    switch (sl.kind) {
      case MetricKind::kPrecision:
      case MetricKind::kRecall: {
        double tp = 0, fp = 0, fn = 0;
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < k; ++j) {
            const double w = output_weight(i, k, j, t, weights);
            const size_t o = static_cast<size_t>(i) * k + j;
            const bool truth = t.values[o] != 0;
            const bool predicted = probability(pred[o], from_logits_) > 0.5f;
            tp += truth && predicted ? w : 0.0;
            fp += !truth && predicted ? w : 0.0;
            fn += truth && !predicted ? w : 0.0;
          }
        }
        st[0] += tp;
        st[1] += fp;
        st[2] += fn;
        break;
      }
      case MetricKind::kAuc:
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < k; ++j) {
            const double w = output_weight(i, k, j, t, weights);
            const size_t o = static_cast<size_t>(i) * k + j;
            const int b = auc_bucket(probability(pred[o], from_logits_));
            (t.values[o] != 0 ? st : st + kAucThresholds)[b] += w;
          }
        }
        break;
      case MetricKind::kR2Score:
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < k; ++j) {
            const double w = output_weight(i, k, j, t, weights);
            const size_t o = static_cast<size_t>(i) * k + j;
            const double y = t.values[o], e = y - pred[o];
            double* sj = st + 4 * static_cast<size_t>(j);
            sj[0] += w * y;
            sj[1] += w * y * y;
            sj[2] += w * e * e;
            sj[3] += w;
          }
        }
        break;
      default: {
        // A mean: per batch, the weighted sum and the weights' sum (the batch's sum is added
        // whole, so an unweighted epoch sums exactly as metric_sum's batches do).
        const MetricKind per_sample =
            sl.kind == MetricKind::kRootMeanSquaredError ? MetricKind::kMeanSquaredError : sl.kind;
        double sum = 0, wsum = 0;
        // One label per row and no mask: row_value's value without its per-step dispatch.
        const bool labels_only =
            per_sample == MetricKind::kSparseCategoricalAccuracy && t.steps == 1 && !t.mask;
        for (int i = 0; i < n; ++i) {
          const double v =
              labels_only
                  ? (argmax(k, pred + static_cast<size_t>(i) * k) == t.labels[i] ? 1.0 : 0.0)
                  : row_value(per_sample, i, k, pred, t, from_logits_);
          if (weights) {
            sum += weights[i] * v;
            wsum += weights[i] * kept_fraction(i, t);
          } else {
            sum += v;
          }
        }
        st[0] += sum;
        st[1] += weights ? wsum : metric_weight(n, t);
        break;
      }
    }
  }
}

double MetricSet::value(size_t m, const double* state) const {
  const Slot& sl = slots_[m];
  const double* st = state + sl.offset;
  switch (sl.kind) {
    case MetricKind::kPrecision:
      return no_nan_div(st[0], st[0] + st[1]);
    case MetricKind::kRecall:
      return no_nan_div(st[0], st[0] + st[2]);
    case MetricKind::kAuc:
      return auc_value(st, st + kAucThresholds);
    case MetricKind::kR2Score: {
      // Keras's R2Score.result(), class_aggregation "uniform_average", no regressors: an output
      // whose targets do not vary scores 0 (its -inf is replaced), NaN stays NaN.
      double sum = 0;
      for (int j = 0; j < k_; ++j) {
        const double* sj = st + 4 * static_cast<size_t>(j);
        const double mean = sj[0] / sj[3];
        const double total = sj[1] - sj[0] * mean;
        double raw = 1 - sj[2] / total;
        if (std::isinf(raw)) raw = 0;
        sum += raw;
      }
      return sum / k_;
    }
    case MetricKind::kRootMeanSquaredError:
      return std::sqrt(no_nan_div(st[0], st[1]));
    default:
      return no_nan_div(st[0], st[1]);
  }
}

}  // namespace nnfleet
