// `nnfleet predict MODEL --x X --out PRED.npy`: predictions (and per-sample losses) of one Keras
// model over a data set (a model with several inputs and outputs takes one --x per input and
// writes one file per output, or .npz archives keyed by input and output names), on pinned workers
// that share the model's weights read-only (cli/model_run.h); results do not depend on --workers.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/model_run.h"
#include "io/model_summary.h"

namespace nnfleet::cli {
namespace {

int run_predict(const RunArgs& a) {
  if ((!a.loss.empty() || !a.loss_out.empty()) && a.y.empty() && a.label.empty())
    throw UsageError(
        "failed to compute losses: --loss and --loss-out need targets; expected "
        "--y Y.npy (or a CSV with --label)");
  const LoadedRun run = load_run(a);
  const LoadedModel& lm = run.lm;
  const Model& model = *lm.model;
  const int64_t n = run.n;

  // Targets, converted once for all chunks.
  const auto ys = load_targets(a, model, run.data);
  const bool with_loss = !ys.empty() && (!a.y.empty() || !a.loss.empty() || !a.loss_out.empty());
  std::vector<OutputTargets> targets;
  if (with_loss)
    for (size_t j = 0; j < model.num_outputs(); ++j)
      targets.push_back(make_targets(ys[j].first, ys[j].second, output_loss_of(a, lm, j),
                                     model.output_shape(j), n));

  const RunResult r = run_workers(a, lm, run.data, targets, n);
  save_outputs(a.out, r.pred, model, "--out");
  if (!a.loss_out.empty()) save_outputs(a.loss_out, r.losses, model, "--loss-out");
  for (size_t j = 0; j < targets.size(); ++j) {
    const auto* ld = static_cast<const float*>(r.losses[j].data());
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += ld[i];
    const std::string which =
        model.num_outputs() > 1 ? " of output '" + terminal_safe(model.output_name(j)) + "'" : "";
    std::fprintf(stderr, "nnfleet predict: mean %s%s %.6g over %lld samples\n",
                 loss_name(targets[j].loss).c_str(), which.c_str(), sum / static_cast<double>(n),
                 static_cast<long long>(n));
  }
  std::fprintf(stderr,
               "nnfleet predict: %lld samples in %.3f s = %.0f samples/s (%d worker%s, batch %d; "
               "model loaded in %.3f s)\n",
               static_cast<long long>(n), r.seconds,
               static_cast<double>(n) / std::max(r.seconds, 1e-9), r.workers,
               r.workers == 1 ? "" : "s", a.batch, run.load_seconds);
  return 0;
}

}  // namespace

void add_predict_command(CLI::App& app, Run& run) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* c = app.add_subcommand(
      "predict", "Predict with a Keras model (.keras, .h5, or to_json() .json with --weights)");
  add_run_options(c, *args, false);
  c->add_option("--out", args->out,
                "Predictions file (.npy, float32 [N, outputs]); one per model output, or one .npz "
                "with an array per output name")
      ->required()
      ->allow_extra_args(false);
  c->callback([&run, args] { run = [args] { return run_predict(*args); }; });
}

}  // namespace nnfleet::cli
