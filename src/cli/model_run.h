// Running one loaded Keras model over a data set, shared by `nnfleet predict` and `nnfleet
// evaluate`: reading the inputs (one --x per model input, or an .npz keyed by input names) and
// the targets (one --y per output), checking them against the model, and writing the outputs. The
// forward passes are the API's prediction engine (api/predict_engine.h), the one Model::predict
// and the Python module use, so results do not depend on --workers.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "data/dataset.h"
#include "io/keras/keras_reader.h"
#include "api/predict_engine.h"
#include "loss/loss.h"

namespace nnfleet::cli {

// The command line both commands share. One entry per model input (x) or output (y, out,
// loss_out), in Keras's order, or a single .npz.
struct RunArgs {
  std::string command = "predict";  // for messages: "failed to <command> with 'm.keras'"
  std::string model, weights, label, loss;
  std::vector<std::string> x, y, out, loss_out;
  double scale = 1.0;
  int batch = 256;
  int workers = 0;
};

// The inputs of a run: one array per model input once matched (input_layers order), each with
// the file (or file:key) it came from.
struct InputData {
  std::vector<Array> x;
  std::vector<std::string> where;
  std::vector<std::string> keys;  // an .npz of named inputs: its keys (else empty)
  Array csv_y;                    // a CSV --x's label column
};

using api_detail::OutputTargets;

struct RunResult {
  std::vector<Array> pred, losses;  // per output: [N, output shape] and [N]
  // Per output and metric: its value over all rows (api_detail::PredictTotals).
  std::vector<std::vector<double>> metric_values;
  double seconds = 0.0;
  double load_seconds = 0.0;
  int workers = 1;
};

// A data argument: "file.npy", "file.npz:key", "file.npz" (one member), IDX (by its magic), or
// "file.csv" (with `label`; `csv_y` receives the label column). Throws DataError / UsageError.
Array load_data(const std::string& spec, const std::string& label, Array* csv_y);

bool ends_with(const std::string& s, const std::string& suffix);

// Checks the common flags, reads the inputs, loads the model (its free dimensions sized by the
// data) and checks the inputs against it. Throws UsageError, DataError, FileError.
struct LoadedRun {
  InputData data;
  LoadedModel lm;
  int64_t n = 0;
  double load_seconds = 0.0;
};
LoadedRun load_run(const RunArgs& a);

// The targets of every output: one --y per output (output_layers order), a CSV's label column
// (one output), or a single .npz whose keys name the outputs; empty when none were given.
std::vector<std::pair<Array, std::string>> load_targets(const RunArgs& a, const Model& m,
                                                        const InputData& d);
using api_detail::make_targets;
// Output j's loss: --loss for all, or the model file's (one for all, a list in output order, or
// a dict by output name, as Keras's compile takes them). Throws UsageError when there is none.
LossSpec output_loss_of(const RunArgs& a, const LoadedModel& lm, size_t j);

// Runs the model over all n rows on pinned workers; with targets, per-sample losses and the sums
// of each output's metrics.
RunResult run_workers(const RunArgs& a, const LoadedModel& lm, const InputData& d,
                      const std::vector<OutputTargets>& targets, int64_t n);

// Writes output j's array to the j-th of `files`, or all of them into one .npz keyed by output
// names. `flag` names the option in messages.
void save_outputs(const std::vector<std::string>& files, const std::vector<Array>& arrays,
                  const Model& m, const char* flag);

// The options predict and evaluate share: MODEL, --x, --y (required when `targets_required`),
// --label, --loss, --weights, --scale, --batch, --workers and --loss-out.
void add_run_options(CLI::App* c, RunArgs& a, bool targets_required);

// A number as JSON writes it (17 significant digits).
std::string json_number(double v);

}  // namespace nnfleet::cli
