// `nnfleet evaluate MODEL --x X --y Y`: Keras's model.evaluate: the loss and every metric of a
// model on labelled data, the metrics from --metrics or from the file's training/compile config.
// It runs on predict's pinned workers (cli/model_run.h), so its numbers do not depend on
// --workers. The loss is the mean of the per-sample losses (Keras's batch-size-weighted mean of
// batch losses, which is the same unless a mask makes samples count unequally); with several
// outputs, "loss" is the loss_weights-weighted sum of the outputs' losses, as Keras reports it,
// and each output's loss and metrics are named "<output>_loss" and "<output>_<metric>".
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "cli/commands.h"
#include "cli/model_run.h"

namespace nnfleet::cli {
namespace {

struct EvaluateArgs {
  RunArgs run;
  std::vector<std::string> metrics;
  bool json = false;
};

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
                   "; expected a metric name\nhint: name the metrics with --metrics");
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
std::vector<std::string> metric_names(const EvaluateArgs& a, const LoadedModel& lm, size_t j) {
  if (!a.metrics.empty()) return a.metrics;
  const Json& tc = lm.training_config;
  if (!tc.is_object() || !tc.contains("metrics")) return {};
  const Json& m = tc["metrics"];
  const Model& model = *lm.model;
  if (m.is_object()) {
    const std::string& name = model.output_name(j);
    return m.contains(name) ? metric_list(m[name], a.run.model) : std::vector<std::string>{};
  }
  if (m.is_array() && model.num_outputs() > 1 && m.size() == model.num_outputs() &&
      std::all_of(m.begin(), m.end(), [](const Json& e) { return e.is_array() || e.is_null(); }))
    return metric_list(m[j], a.run.model);
  return metric_list(m, a.run.model);
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

int run_evaluate(EvaluateArgs& a) {
  a.run.command = "evaluate";
  std::vector<std::string> metrics;
  for (const auto& m : a.metrics) {  // "accuracy,mae" as well as repeated --metrics
    size_t p = 0;
    while (p <= m.size()) {
      const size_t q = std::min(m.find(',', p), m.size());
      if (q > p) metrics.push_back(m.substr(p, q - p));
      p = q + 1;
    }
  }
  a.metrics = metrics;
  const LoadedRun run = load_run(a.run);
  const LoadedModel& lm = run.lm;
  const Model& model = *lm.model;
  const auto ys = load_targets(a.run, model, run.data);
  if (ys.empty())
    throw UsageError("failed to evaluate '" + a.run.model +
                     "': it needs targets; expected --y Y.npy (or a CSV --x with --label)");

  std::vector<OutputTargets> targets;
  std::vector<std::vector<std::string>> keys(model.num_outputs());
  for (size_t j = 0; j < model.num_outputs(); ++j) {
    targets.push_back(make_targets(ys[j].first, ys[j].second, output_loss_of(a.run, lm, j),
                                   model.output_shape(j), run.n));
    const int k =
        static_cast<int>(model.output_shape(j).size()) / loss_steps(model.output_shape(j));
    // Integer labels with categorical_crossentropy are one-hot rows by now: resolve "accuracy"
    // as for the loss itself.
    for (const auto& name : metric_names(a, lm, j)) {
      try {
        targets[j].metrics.push_back(resolve_metric(name, targets[j].loss, k));
      } catch (const ConfigError& e) {
        throw UsageError("failed to evaluate '" + a.run.model + "': " + e.what() +
                         "\nhint: choose the metrics with --metrics");
      }
      keys[j].push_back(metric_key(name));
    }
  }

  const RunResult r = run_workers(a.run, lm, run.data, targets, run.n);
  if (!a.run.loss_out.empty()) save_outputs(a.run.loss_out, r.losses, model, "--loss-out");

  // (name, value) in Keras's order: loss, then per output its loss and metrics.
  std::vector<std::pair<std::string, double>> values;
  const bool multi = model.num_outputs() > 1;
  double total = 0.0;
  std::vector<std::pair<std::string, double>> per_output;
  for (size_t j = 0; j < targets.size(); ++j) {
    const auto* ld = static_cast<const float*>(r.losses[j].data());
    double sum = 0.0;
    for (int64_t i = 0; i < run.n; ++i) sum += ld[i];
    const double mean = sum / static_cast<double>(run.n);
    total += loss_weight(lm, j) * mean;
    const std::string prefix = multi ? model.output_name(j) + "_" : "";
    if (multi) per_output.push_back({prefix + "loss", mean});
    for (size_t m = 0; m < keys[j].size(); ++m)
      per_output.push_back({prefix + keys[j][m], r.metric_weights[j] > 0
                                                     ? r.metric_sums[j][m] / r.metric_weights[j]
                                                     : 0.0});
  }
  values.push_back({"loss", total});
  values.insert(values.end(), per_output.begin(), per_output.end());

  if (a.json) {
    std::string s = "{";
    for (const auto& [k, v] : values) s += "\"" + k + "\": " + json_number(v) + ", ";
    s += "\"samples\": " + std::to_string(run.n) + "}";
    std::printf("%s\n", s.c_str());
  } else {
    std::string s = std::to_string(run.n) + " samples";
    char b[64];
    for (const auto& [k, v] : values) {
      std::snprintf(b, sizeof b, " - %s: %.4f", k.c_str(), v);
      s += b;
    }
    std::printf("%s\n", s.c_str());
  }
  std::fprintf(stderr,
               "nnfleet evaluate: %lld samples in %.3f s (%d worker%s, batch %d; model loaded in "
               "%.3f s)\n",
               static_cast<long long>(run.n), r.seconds, r.workers, r.workers == 1 ? "" : "s",
               a.run.batch, run.load_seconds);
  return 0;
}

}  // namespace

void add_evaluate_command(CLI::App& app, Run& run) {
  auto args = std::make_shared<EvaluateArgs>();
  CLI::App* c = app.add_subcommand(
      "evaluate",
      "Loss and metrics of a Keras model on labelled data, as Keras's evaluate (.keras, .h5, or "
      "to_json() .json with --weights)");
  add_run_options(c, args->run, false);
  c->add_option("--metrics", args->metrics,
                "Metrics to report, e.g. accuracy,mae (default: the model file's compile "
                "metrics)")
      ->allow_extra_args(false);
  c->add_flag("--json", args->json, "Print one JSON object instead of the line");
  c->callback([&run, args] { run = [args] { return run_evaluate(*args); }; });
}

}  // namespace nnfleet::cli
