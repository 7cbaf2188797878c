// `nnfleet predict MODEL --x X --out PRED.npy`: predictions (and per-sample losses) of one Keras
// model over a data set (a model with several inputs and outputs takes one --x per input and
// writes one file per output, or .npz archives keyed by input and output names), on pinned workers
// that share the model's weights read-only (cli/model_run.h); results do not depend on --workers.
#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "model_run.h"

namespace nnfleet::cli {
namespace {

int run_predict(const RunArgs& a) {
  if ((!a.loss.empty() || !a.loss_out.empty()) && a.y.empty() && a.label.empty())
    throw UsageError(
        "failed to compute losses: --loss and --loss-out need targets; expected "
        "--y Y.npy (or a CSV with --label)");
  const LoadedRun run = load_run(a);
  const api::Model& model = *run.model;
  const int64_t n = run.n;
  auto ys = load_targets(a, model, run.data);
  const bool with_loss = !ys.empty() && (!a.y.empty() || !a.loss.empty() || !a.loss_out.empty());
  if (!with_loss) ys.clear();
  std::vector<api::ArrayView> x, y;
  for (const api::Array& v : run.data.x) x.push_back(v.view());
  for (const auto& t : ys) y.push_back(t.first.view());
  Outputs pred = make_outputs(model, n, false), losses = make_outputs(model, n, true);
  const api::RunStats r =
      model.predict(x, pred.spans(), predict_options(a, run.data, ys), y,
                    with_loss ? losses.spans() : std::vector<std::span<float>>{});
  save_outputs(a.out, pred, model, "--out");
  if (!a.loss_out.empty()) save_outputs(a.loss_out, losses, model, "--loss-out");
  for (size_t j = 0; j < r.losses.size(); ++j) {
    double sum = 0;
    for (float l : losses.data[j]) sum += l;
    const std::string which = model.outputs().size() > 1
                                  ? " of output '" + terminal_safe(model.outputs()[j].name) + "'"
                                  : "";
    std::fprintf(stderr, "nnfleet predict: mean %s%s %.6g over %lld samples\n", r.losses[j].c_str(),
                 which.c_str(), sum / static_cast<double>(n), static_cast<long long>(n));
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
