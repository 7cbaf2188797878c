// Metrics: Keras 3's resolution of "accuracy" and the per-batch sums of the metrics nnfleet
// reports (accuracies, mae, mse).
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
  };
  return t;
}

const NamedMetric& find_metric(const std::string& name) {
  for (const auto& e : table())
    if (name == e.name) return e;
  std::string list;
  for (const auto& e : table()) list += (list.empty() ? "" : ", ") + std::string(e.name);
  throw ConfigError("metrics", "unknown metric \"" + name + "\"; expected one of " + list);
}

constexpr int kTopK = 5;  // Keras's default k of the top-k accuracies

// True when fewer than kTopK of x[k] are strictly greater than x[c].
bool in_top_k(int k, const float* x, int c) {
  int greater = 0;
  for (int j = 0; j < k; ++j) greater += x[j] > x[c];
  return greater < kTopK;
}

// Index of the first maximum of x[k].
int argmax(int k, const float* x) {
  int best = 0;
  for (int j = 1; j < k; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

}  // namespace

std::string metric_key(const std::string& name) { return find_metric(name).key; }

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
       m == MetricKind::kMeanAbsolutePercentageError) &&
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

namespace {

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
    }
  }
  return sum;
}

}  // namespace

double metric_weight(int n, const Targets& t) {
  if (!t.mask) return n;
  double w = 0;
  for (int i = 0; i < n; ++i) {
    double kept = 0;
    for (int j = 0; j < t.steps; ++j) kept += t.mask[static_cast<size_t>(i) * t.steps + j];
    w += kept / t.steps;
  }
  return w;
}

double metric_sum(MetricKind m, int n, int k, const float* pred, const Targets& t,
                  bool from_logits) {
  NNFLEET_DCHECK(t.steps >= 1 && k % t.steps == 0);
  const int s = t.steps, c = k / s;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    double row = 0;
    for (int j = 0; j < s; ++j) {
      const size_t r = static_cast<size_t>(i) * s + j;
      const double w = t.mask ? t.mask[r] : 1.0;
      if (w == 0) continue;
      const float* y = t.values ? t.values + r * c : nullptr;
      const int32_t label = t.labels ? t.labels[r] : -1;
      row += w * step_value(m, c, pred + r * c, y, label, from_logits);
    }
    sum += s == 1 ? row : row / s;
  }
  return sum;
}

}  // namespace nnfleet
