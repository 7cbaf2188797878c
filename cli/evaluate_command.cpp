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
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_run.h"

namespace nnfleet::cli {
namespace {

struct EvaluateArgs {
  RunArgs run;
  std::vector<std::string> metrics;
  bool json = false;
};

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
  const api::Model& model = *run.model;
  const auto ys = load_targets(a.run, model, run.data);
  if (ys.empty())
    throw UsageError("failed to evaluate '" + a.run.model +
                     "': it needs targets; expected --y Y.npy (or a CSV --x with --label)");
  std::vector<api::ArrayView> x, y;
  for (const api::Array& v : run.data.x) x.push_back(v.view());
  for (const auto& t : ys) y.push_back(t.first.view());
  api::EvaluateOptions o;
  static_cast<api::PredictOptions&>(o) = predict_options(a.run, run.data, ys);
  o.metrics = a.metrics;
  Outputs losses = make_outputs(model, run.n, true);
  api::RunStats r;
  const auto values = model.evaluate(x, y, o, losses.spans(), &r);
  if (!a.run.loss_out.empty()) save_outputs(a.run.loss_out, losses, model, "--loss-out");
  if (a.json) {
    std::string s = "{";
    // Keys may hold output names from the file: JSON-quoted, so that any name stays one key.
    for (const auto& [k, v] : values)
      s += nlohmann::json(k).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + ": " +
           json_number(v) + ", ";
    s += "\"samples\": " + std::to_string(run.n) + "}";
    std::printf("%s\n", s.c_str());
  } else {
    std::string s = std::to_string(run.n) + " samples";
    char b[64];
    for (const auto& [k, v] : values) {
      std::snprintf(b, sizeof b, " - %s: %.4f", terminal_safe(k).c_str(), v);
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
