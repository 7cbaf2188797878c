// Keras's evaluate on the prediction engine (evaluate_engine.h).
#include "api/evaluate_engine.h"

#include <algorithm>
#include <cctype>

namespace nnfleet::api_detail {
namespace {

// "SparseCategoricalAccuracy" -> "sparse_categorical_accuracy" (Keras's metric class names).
std::string snake_case(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isupper(c) && i > 0) out += '_';
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

// A metric as a compile config holds it: "accuracy", or a serialized metric object
// ({"class_name": "SparseCategoricalAccuracy", "config": {"name": ...}}).
std::string metric_entry_name(const Json& m, const std::string& model) {
  if (m.is_string()) return m.get<std::string>();
  if (m.is_object() && m.contains("class_name") && m["class_name"].is_string())
    return snake_case(m["class_name"].get<std::string>());
  throw UsageError("failed to read the metrics of '" + model + "': an entry is " + m.dump() +
                   "; expected a metric name\nhint: name the metrics to report");
}

std::vector<std::string> metric_list(const Json& m, const std::string& model) {
  std::vector<std::string> out;
  if (m.is_array()) {
    for (const Json& e : m) out.push_back(metric_entry_name(e, model));
  } else if (!m.is_null()) {
    out.push_back(metric_entry_name(m, model));
  }
  return out;
}

// Output j's metric names: --metrics for every output, or the file's "metrics" (a list for every
// output, a list of lists in output order, or a dict by output name).
std::vector<std::string> metric_names(const std::vector<std::string>& metrics,
                                      const LoadedModel& lm, const std::string& path, size_t j) {
  if (!metrics.empty()) return metrics;
  const Json& tc = lm.training_config;
  if (!tc.is_object() || !tc.contains("metrics")) return {};
  const Json& m = tc["metrics"];
  const Model& model = *lm.model;
  if (m.is_object()) {
    const std::string& name = model.output_name(j);
    return m.contains(name) ? metric_list(m[name], path) : std::vector<std::string>{};
  }
  if (m.is_array() && model.num_outputs() > 1 && m.size() == model.num_outputs() &&
      std::all_of(m.begin(), m.end(), [](const Json& e) { return e.is_array() || e.is_null(); }))
    return metric_list(m[j], path);
  return metric_list(m, path);
}

// Output j's weight in the total loss: the file's loss_weights (list or dict), else 1.
double loss_weight(const LoadedModel& lm, size_t j) {
  const Json& tc = lm.training_config;
  if (!tc.is_object() || !tc.contains("loss_weights")) return 1.0;
  const Json& w = tc["loss_weights"];
  if (w.is_array() && w.size() == lm.model->num_outputs() && w[j].is_number())
    return w[j].get<double>();
  if (w.is_object() && w.contains(lm.model->output_name(j)) &&
      w[lm.model->output_name(j)].is_number())
    return w[lm.model->output_name(j)].get<double>();
  return 1.0;
}

}  // namespace

std::vector<std::vector<std::string>> add_metrics(const Wording& w, const LoadedModel& lm,
                                                  const std::string& model_path,
                                                  const std::vector<std::string>& metrics,
                                                  std::vector<OutputTargets>& targets) {
  const Model& model = *lm.model;
  std::vector<std::vector<std::string>> keys(targets.size());
  for (size_t j = 0; j < targets.size(); ++j) {
    const Shape& out = model.output_shape(j);
    const std::vector<std::string> names = metric_names(metrics, lm, model_path, j);
    try {
      targets[j].metrics =
          MetricSet(names, targets[j].loss, static_cast<int>(out.size()), loss_steps(out));
    } catch (const ConfigError& e) {
      throw UsageError("failed to " + w.verb + " '" + model_path + "': " + e.what() +
                       "\nhint: choose the metrics with " + w.metrics_option);
    }
    for (size_t m = 0; m < targets[j].metrics.size(); ++m)
      keys[j].push_back(targets[j].metrics.key(m));
  }
  return keys;
}

Figures evaluation_figures(const LoadedModel& lm, const std::vector<std::vector<std::string>>& keys,
                           const std::vector<const float*>& losses, int64_t n,
                           const PredictTotals& totals) {
  const Model& model = *lm.model;
  const bool multi = model.num_outputs() > 1;
  double total = 0.0;
  Figures per_output;
  for (size_t j = 0; j < keys.size(); ++j) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += losses[j][i];
    const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
    total += loss_weight(lm, j) * mean;
    const std::string prefix = multi ? model.output_name(j) + "_" : "";
    if (multi) per_output.push_back({prefix + "loss", mean});
    for (size_t m = 0; m < keys[j].size(); ++m)
      per_output.push_back({prefix + keys[j][m], totals.metric_values.at(j).at(m)});
  }
  Figures out{{"loss", total}};
  out.insert(out.end(), per_output.begin(), per_output.end());
  return out;
}

}  // namespace nnfleet::api_detail
