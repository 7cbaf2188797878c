// Losses: the name table and config parsing, and the forward and backward formulas of Keras 3.
// Every per-sample value is computed in double from the float inputs; the clipping bounds are the
// float32 values Keras uses (epsilon 1e-7f and float(1 - 1e-7)), so a prediction is clipped
// exactly when Keras would clip it.
#include "loss/loss.h"

#include <algorithm>
#include <cmath>

namespace nnfleet {
namespace {

constexpr double kEpsLo = static_cast<double>(1e-7f);
constexpr double kEpsHi = static_cast<double>(static_cast<float>(1.0 - 1e-7));

struct NamedLoss {
  const char* name;
  LossKind kind;
};

// Keras's identifiers (case-sensitive, as keras.losses.get): snake_case function names, class
// names and the short aliases.
const std::vector<NamedLoss>& table() {
  static const std::vector<NamedLoss> t = {
      {"mean_squared_error", LossKind::kMeanSquaredError},
      {"mse", LossKind::kMeanSquaredError},
      {"MSE", LossKind::kMeanSquaredError},
      {"MeanSquaredError", LossKind::kMeanSquaredError},
      {"mean_absolute_error", LossKind::kMeanAbsoluteError},
      {"mae", LossKind::kMeanAbsoluteError},
      {"MAE", LossKind::kMeanAbsoluteError},
      {"MeanAbsoluteError", LossKind::kMeanAbsoluteError},
      {"huber", LossKind::kHuber},
      {"Huber", LossKind::kHuber},
      {"binary_crossentropy", LossKind::kBinaryCrossentropy},
      {"bce", LossKind::kBinaryCrossentropy},
      {"BCE", LossKind::kBinaryCrossentropy},
      {"BinaryCrossentropy", LossKind::kBinaryCrossentropy},
      {"categorical_crossentropy", LossKind::kCategoricalCrossentropy},
      {"CategoricalCrossentropy", LossKind::kCategoricalCrossentropy},
      {"sparse_categorical_crossentropy", LossKind::kSparseCategoricalCrossentropy},
      {"SparseCategoricalCrossentropy", LossKind::kSparseCategoricalCrossentropy},
  };
  return t;
}

const char* keras_class(LossKind k) {
  switch (k) {
    case LossKind::kMeanSquaredError:
      return "MeanSquaredError";
    case LossKind::kMeanAbsoluteError:
      return "MeanAbsoluteError";
    case LossKind::kHuber:
      return "Huber";
    case LossKind::kBinaryCrossentropy:
      return "BinaryCrossentropy";
    case LossKind::kCategoricalCrossentropy:
      return "CategoricalCrossentropy";
    case LossKind::kSparseCategoricalCrossentropy:
      return "SparseCategoricalCrossentropy";
  }
  return "MeanSquaredError";
}

std::string name_list() {
  std::string s;
  for (const auto& n : loss_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

[[noreturn]] void unknown_loss(const Json& j, const std::string& name) {
  throw ConfigError("loss", "unknown loss " + j.dump() + "; expected one of " + name_list() +
                                near_miss(name, loss_names()));
}

// Keys Keras writes that nnfleet accepts only at their default values.
void keras_defaults(LayerConfig& c, bool has_logit_options) {
  if (c.mode() != ConfigMode::kKeras) return;
  c.ignore("fn");
  if (has_logit_options) {
    if (c.has("label_smoothing") && c.get_float("label_smoothing") != 0.0)
      c.fail("label_smoothing", "0 (label smoothing is not supported)");
    c.ignore("label_smoothing");
    if (c.has("axis") && c.get_int("axis", {}, -1000) != -1)
      c.fail("axis", "-1 (only the last axis is supported)");
    c.ignore("axis");
    if (c.has("ignore_class")) c.fail("ignore_class", "null (ignore_class is not supported)");
    c.ignore("ignore_class");
  }
}

// ---- per-row formulas (one sample: k predictions p, targets y or a label) ----

double clip(double q) { return std::min(std::max(q, kEpsLo), kEpsHi); }
bool inside(double q) { return q >= kEpsLo && q <= kEpsHi; }

// The label's one-hot value for column j, or the dense target.
inline double target_at(const float* y, int32_t label, int j) {
  return y ? static_cast<double>(y[j]) : (j == label ? 1.0 : 0.0);
}

// The sum of a row of probabilities, in index order.
inline double row_sum(int k, const float* p) {
  double s = 0;
  for (int j = 0; j < k; ++j) s += p[j];
  return s;
}

double row_loss(const LossSpec& l, int k, const float* p, const float* y, int32_t label) {
  double acc = 0;
  switch (l.kind) {
    case LossKind::kMeanSquaredError:
      for (int j = 0; j < k; ++j) {
        const double e = static_cast<double>(p[j]) - y[j];
        acc += e * e;
      }
      return acc / k;
    case LossKind::kMeanAbsoluteError:
      for (int j = 0; j < k; ++j) acc += std::fabs(static_cast<double>(p[j]) - y[j]);
      return acc / k;
    case LossKind::kHuber: {
      const double d = l.delta;
      for (int j = 0; j < k; ++j) {
        const double e = static_cast<double>(p[j]) - y[j], a = std::fabs(e);
        acc += a <= d ? 0.5 * e * e : d * a - 0.5 * d * d;
      }
      return acc / k;
    }
    case LossKind::kBinaryCrossentropy:
      for (int j = 0; j < k; ++j) {
        const double t = y[j];
        if (l.from_logits) {
          // max(x,0) - x t + log(1 + exp(-|x|)), stable for any x (TF's form).
          const double x = p[j];
          acc += std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::fabs(x)));
        } else {
          const double q = clip(p[j]);
          acc -= t * std::log(q) + (1 - t) * std::log(1 - q);
        }
      }
      return acc / k;
    case LossKind::kCategoricalCrossentropy:
    case LossKind::kSparseCategoricalCrossentropy: {
      if (l.from_logits) {
        double mx = p[0];
        for (int j = 1; j < k; ++j) mx = std::max(mx, static_cast<double>(p[j]));
        double s = 0;
        for (int j = 0; j < k; ++j) s += std::exp(static_cast<double>(p[j]) - mx);
        const double lse = mx + std::log(s);
        for (int j = 0; j < k; ++j) {
          const double t = target_at(y, label, j);
          if (t != 0) acc -= t * (static_cast<double>(p[j]) - lse);
        }
        return acc;
      }
      // Keras normalizes the probabilities to sum to one, then clips, then takes the log. For
      // sparse labels this is the JAX, torch and numpy backends' formula; Keras's TensorFlow
      // backend clips first and normalizes after (log_softmax of log(clip(p))), which differs
      // only when some probability is clipped.
      const double s = row_sum(k, p);
      for (int j = 0; j < k; ++j) {
        const double t = target_at(y, label, j);
        if (t != 0) acc -= t * std::log(clip(p[j] / s));
      }
      return acc;
    }
  }
  return 0;
}

// row_grad of cross-entropy on probabilities p (summing to s) against a label: t is 1 at it and 0
// elsewhere, so every other column gets the same value, and the row takes 4 divisions instead of
// 3k + 1 (W3's 10 classes: 31), each term computed as the one-hot form computes it, so the same
// bits.
inline void label_row_grad(int k, double s, const float* p, int32_t label, double scale, float* g) {
  const double q = p[label] / s;
  const double dot = inside(q) ? -1.0 : 0.0;
  const float other = static_cast<float>(scale * (0.0 - dot) / s);
  for (int j = 0; j < k; ++j) g[j] = other;
  if (inside(q)) g[label] = static_cast<float>(scale * (-1.0 / q - dot) / s);
}

// g[k] = scale * d(row loss)/d p.
void row_grad(const LossSpec& l, int k, const float* p, const float* y, int32_t label, double scale,
              float* g) {
  switch (l.kind) {
    case LossKind::kMeanSquaredError:
      for (int j = 0; j < k; ++j)
        g[j] = static_cast<float>(scale * 2.0 * (static_cast<double>(p[j]) - y[j]) / k);
      return;
    case LossKind::kMeanAbsoluteError:
      for (int j = 0; j < k; ++j) {
        const double e = static_cast<double>(p[j]) - y[j];
        g[j] = static_cast<float>(scale * (e > 0 ? 1.0 : e < 0 ? -1.0 : 0.0) / k);
      }
      return;
    case LossKind::kHuber: {
      const double d = l.delta;
      for (int j = 0; j < k; ++j) {
        const double e = static_cast<double>(p[j]) - y[j];
        const double de = std::fabs(e) <= d ? e : (e > 0 ? d : -d);
        g[j] = static_cast<float>(scale * de / k);
      }
      return;
    }
    case LossKind::kBinaryCrossentropy:
      for (int j = 0; j < k; ++j) {
        const double t = y[j];
        double de;
        if (l.from_logits) {
          const double x = p[j];
          const double sig = x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
          de = sig - t;
        } else {
          const double q = p[j];
          de = inside(q) ? -t / q + (1 - t) / (1 - q) : 0.0;
        }
        g[j] = static_cast<float>(scale * de / k);
      }
      return;
    case LossKind::kCategoricalCrossentropy:
    case LossKind::kSparseCategoricalCrossentropy: {
      if (l.from_logits) {
        // d/dx of -sum_j t_j log_softmax(x)_j = softmax(x) * sum(t) - t.
        double mx = p[0];
        for (int j = 1; j < k; ++j) mx = std::max(mx, static_cast<double>(p[j]));
        double s = 0, tsum = 0;
        for (int j = 0; j < k; ++j) {
          s += std::exp(static_cast<double>(p[j]) - mx);
          tsum += target_at(y, label, j);
        }
        for (int j = 0; j < k; ++j) {
          const double sm = std::exp(static_cast<double>(p[j]) - mx) / s;
          g[j] = static_cast<float>(scale * (sm * tsum - target_at(y, label, j)));
        }
        return;
      }
      // q = p / S with S = sum p; loss = -sum_j t_j log clip(q_j).
      // dL/dq_j = -t_j / q_j where q_j is not clipped (else 0), and
      // dL/dp_i = (dL/dq_i - sum_j dL/dq_j q_j) / S.
      const double s = row_sum(k, p);
      if (!y) return label_row_grad(k, s, p, label, scale, g);
      double dot = 0;
      for (int j = 0; j < k; ++j) {
        const double t = target_at(y, label, j), q = p[j] / s;
        if (t != 0 && inside(q)) dot += -t;  // (-t/q) * q
      }
      for (int j = 0; j < k; ++j) {
        const double t = target_at(y, label, j), q = p[j] / s;
        const double dq = (t != 0 && inside(q)) ? -t / q : 0.0;
        g[j] = static_cast<float>(scale * (dq - dot) / s);
      }
      return;
    }
  }
}

// Cross-entropy on probabilities against one label per row, unmasked and unweighted: a
// classifier's usual head, and most of a tiny model's step outside its products (W3's 10
// classes: the general loops' per-row dispatch cost more than the arithmetic). Each term is
// computed as row_loss and row_grad compute it (the same sum in index order, the same divisions),
// so the same bits.
bool plain_label_head(const LossSpec& l, const Targets& t) {
  return l.sparse() && !l.from_logits && t.steps == 1 && !t.mask && !t.weights;
}

double label_head_forward(int n, int k, const float* pred, const int32_t* labels,
                          float* per_sample) {
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const float* p = pred + static_cast<size_t>(i) * k;
    double acc = 0;
    acc -= 1.0 * std::log(clip(p[labels[i]] / row_sum(k, p)));
    per_sample[i] = static_cast<float>(acc);
    sum += per_sample[i];
  }
  return sum;
}

void label_head_backward(int n, int k, const float* pred, const int32_t* labels, double scale,
                         float* dpred) {
  for (int i = 0; i < n; ++i) {
    const size_t off = static_cast<size_t>(i) * k;
    label_row_grad(k, row_sum(k, pred + off), pred + off, labels[i], scale, dpred + off);
  }
}

}  // namespace

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : table()) v.push_back(e.name);
    return v;
  }();
  return names;
}

std::string target_shape_problem(const LossSpec& loss, const Shape& output, const Shape& y_sample) {
  const int64_t k = output.size(), steps = loss_steps(output), classes = k / steps;
  const int64_t got = y_sample.size();
  if (loss.sparse()) {
    if (got == steps) return "";
    // Per-timestep outputs [T, C] take labels [N, T] (or [N, T, 1]), as Keras does.
    Shape labels;
    for (int a = 0; a + 1 < output.rank(); ++a) labels.push_back(output[a]);
    Shape labels1 = labels;
    labels1.push_back(1);
    return loss_name(loss) + " needs one integer label per " +
           (steps == 1
                ? std::string("sample; expected y of shape [N] or [N,1]")
                : "timestep of the output " + output.str() + "; expected y samples of shape " +
                      labels.str() + " or " + labels1.str()) +
           ", got y samples of shape " + y_sample.str() +
           "; use categorical_crossentropy for one-hot targets";
  }
  if (got == k) return "";
  return "targets do not match the model output; expected y samples of " + std::to_string(k) +
         " values (output " + output.str() + "), got " + y_sample.str() +
         (got == steps && classes > 1
              ? "; for integer class labels use loss: sparse_categorical_crossentropy (" +
                    loss_name(loss) + " takes one-hot targets, as in Keras)"
              : "");
}

LossSpec parse_loss(const Json& j) {
  const auto [name, config, mode] = split_keras_object(j, "loss", "loss");
  const NamedLoss* found = nullptr;
  for (const auto& e : table())
    if (name == e.name) found = &e;
  if (!found) unknown_loss(j, name);

  LossSpec l;
  l.kind = found->kind;
  LayerConfig c(config, mode, keras_class(l.kind));
  const std::string red = c.get_string("reduction", std::string("sum_over_batch_size"));
  if (red != "sum_over_batch_size" && red != "auto")
    c.fail("reduction", "\"sum_over_batch_size\" (the mean over the batch)");
  const bool xent = l.kind == LossKind::kBinaryCrossentropy ||
                    l.kind == LossKind::kCategoricalCrossentropy || l.sparse();
  if (xent) l.from_logits = c.get_bool("from_logits", false);
  if (l.kind == LossKind::kHuber) {
    const double d = c.get_float("delta", 1.0);
    if (!(d > 0)) c.fail("delta", "a number > 0");
    l.delta = static_cast<float>(d);
  }
  keras_defaults(c, xent);
  c.finish();
  return l;
}

std::string loss_name(const LossSpec& l) {
  switch (l.kind) {
    case LossKind::kMeanSquaredError:
      return "mean_squared_error";
    case LossKind::kMeanAbsoluteError:
      return "mean_absolute_error";
    case LossKind::kHuber:
      return "huber";
    case LossKind::kBinaryCrossentropy:
      return "binary_crossentropy";
    case LossKind::kCategoricalCrossentropy:
      return "categorical_crossentropy";
    case LossKind::kSparseCategoricalCrossentropy:
      return "sparse_categorical_crossentropy";
  }
  return "mean_squared_error";
}

Json loss_to_keras(const LossSpec& l) {
  Json c = {{"name", loss_name(l)}, {"reduction", "sum_over_batch_size"}};
  switch (l.kind) {
    case LossKind::kHuber:
      c["name"] = "huber_loss";
      c["delta"] = static_cast<double>(l.delta);
      break;
    case LossKind::kBinaryCrossentropy:
    case LossKind::kCategoricalCrossentropy:
      c["from_logits"] = l.from_logits;
      c["label_smoothing"] = 0.0;
      c["axis"] = -1;
      break;
    case LossKind::kSparseCategoricalCrossentropy:
      c["from_logits"] = l.from_logits;
      c["ignore_class"] = nullptr;
      break;
    default:
      break;
  }
  return {{"module", "keras.losses"},
          {"class_name", keras_class(l.kind)},
          {"config", c},
          {"registered_name", nullptr}};
}

std::vector<LossSpec> all_loss_specs() {
  std::vector<LossSpec> v;
  for (LossKind k : {LossKind::kMeanSquaredError, LossKind::kMeanAbsoluteError, LossKind::kHuber,
                     LossKind::kBinaryCrossentropy, LossKind::kCategoricalCrossentropy,
                     LossKind::kSparseCategoricalCrossentropy}) {
    LossSpec l;
    l.kind = k;
    v.push_back(l);
    if (k == LossKind::kHuber) {
      l.delta = 0.5f;
      v.push_back(l);
    }
    if (k == LossKind::kBinaryCrossentropy || k == LossKind::kCategoricalCrossentropy ||
        k == LossKind::kSparseCategoricalCrossentropy) {
      l.from_logits = true;
      v.push_back(l);
    }
  }
  return v;
}

void validate_labels(int n, int k, const int32_t* labels) {
  for (int i = 0; i < n; ++i)
    if (labels[i] < 0 || labels[i] >= k)
      throw DataError("class label out of range at sample " + std::to_string(i) + "; expected 0.." +
                      std::to_string(k - 1) + ", got " + std::to_string(labels[i]));
}

int loss_steps(const Shape& out) {
  return out.rank() >= 2 ? static_cast<int>(out.size() / out[-1]) : 1;
}

double loss_forward(const LossSpec& l, int n, int k, const float* pred, const Targets& t,
                    float* per_sample) {
  NNFLEET_DCHECK(l.sparse() ? t.labels != nullptr : t.values != nullptr);
  NNFLEET_DCHECK(t.steps >= 1 && k % t.steps == 0);
  if (plain_label_head(l, t)) return label_head_forward(n, k, pred, t.labels, per_sample);
  const int s = t.steps, c = k / s;
  double sum = 0, masked_sum = 0, kept = 0;
  for (int i = 0; i < n; ++i) {
    const double w = t.weights ? static_cast<double>(t.weights[i]) : 1.0;
    double row = 0, row_kept = 0;
    for (int j = 0; j < s; ++j) {
      const size_t r = static_cast<size_t>(i) * s + j;  // the step's row of c values
      const float* y = l.sparse() ? nullptr : t.values + r * c;
      const int32_t label = l.sparse() ? t.labels[r] : -1;
      NNFLEET_DCHECK(!l.sparse() || (label >= 0 && label < c));
      const double m = t.mask ? t.mask[r] : 1.0;
      if (m == 0) continue;
      row += w * m * row_loss(l, c, pred + r * c, y, label);
      row_kept += m;
    }
    per_sample[i] = static_cast<float>(t.mask ? (row_kept > 0 ? row / row_kept : 0.0) : row / s);
    sum += per_sample[i];
    masked_sum += row;
    kept += row_kept;
  }
  if (!t.mask) return sum;
  return kept > 0 ? n * (masked_sum / kept) : 0.0;
}

void loss_backward(const LossSpec& l, int n, int k, const float* pred, const Targets& t,
                   float* dpred, int batch) {
  NNFLEET_DCHECK(l.sparse() ? t.labels != nullptr : t.values != nullptr);
  NNFLEET_DCHECK(t.steps >= 1 && k % t.steps == 0);
  NNFLEET_DCHECK(!t.mask || batch <= 0 || batch == n);
  const int s = t.steps, c = k / s;
  const size_t rows = static_cast<size_t>(n) * s;
  double scale = 1.0 / (static_cast<double>(batch > 0 ? batch : n) * s);
  if (t.mask) {
    double kept = 0;
    for (size_t r = 0; r < rows; ++r) kept += t.mask[r];
    scale = kept > 0 ? 1.0 / kept : 0.0;
  }
  if (plain_label_head(l, t)) return label_head_backward(n, k, pred, t.labels, scale, dpred);
  for (size_t r = 0; r < rows; ++r) {
    const size_t off = r * c;
    const double m = t.mask ? t.mask[r] : 1.0;
    if (m == 0) {
      std::fill(dpred + off, dpred + off + c, 0.0f);
      continue;
    }
    const float* y = l.sparse() ? nullptr : t.values + off;
    const int32_t label = l.sparse() ? t.labels[r] : -1;
    NNFLEET_DCHECK(!l.sparse() || (label >= 0 && label < c));
    const double w = t.weights ? static_cast<double>(t.weights[r / s]) : 1.0;
    row_grad(l, c, pred + off, y, label, scale * m * w, dpred + off);
  }
}

}  // namespace nnfleet
