// Running one Keras model over a data set, shared by `nnfleet predict` and `nnfleet evaluate`:
// reading the inputs (one --x per model input, or an .npz keyed by input names) and the targets
// (one --y per output), matching them to the model, and writing the outputs. The forward passes
// are the API's (Model::predict, Model::evaluate), the ones the Python module runs, so results do
// not depend on --workers.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nnfleet/data.h"
#include "nnfleet/model.h"

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

// The inputs of a run: one array per model input once matched (input order), each with the file
// (or file:key) it came from.
struct InputData {
  std::vector<api::Array> x;
  std::vector<std::string> where;
  std::vector<std::string> keys;  // an .npz of named inputs: its keys (else empty)
  api::Array csv_y;               // a CSV --x's label column
};

// Checks the common flags, reads the inputs, loads the model (its free dimensions sized by the
// data) and matches the inputs to it. Throws UsageError, DataError, FileError.
struct LoadedRun {
  InputData data;
  std::optional<api::Model> model;
  int64_t n = 0;
  double load_seconds = 0.0;
};
LoadedRun load_run(const RunArgs& a);

// The targets of every output: one --y per output (output order), a CSV's label column (one
// output), or a single .npz whose keys name the outputs; empty when none were given. Each with
// the file it came from.
std::vector<std::pair<api::Array, std::string>> load_targets(const RunArgs& a, const api::Model& m,
                                                             const InputData& d);

// The API's options for these flags: batch, workers, scale, --loss, the files as names in
// messages and the flags' spellings.
api::PredictOptions predict_options(const RunArgs& a, const InputData& d,
                                    const std::vector<std::pair<api::Array, std::string>>& ys);

// One float32 buffer per output: N rows of `per_row` floats each (the output's size, or 1 for
// per-sample losses).
struct Outputs {
  std::vector<std::vector<float>> data;
  std::vector<std::vector<int64_t>> shapes;  // [N, ...] per output
  std::vector<std::span<float>> spans();
};
Outputs make_outputs(const api::Model& m, int64_t n, bool per_sample);

// Writes output j's array to the j-th of `files`, or all of them into one .npz keyed by output
// names. `flag` names the option in messages.
void save_outputs(const std::vector<std::string>& files, const Outputs& arrays, const api::Model& m,
                  const char* flag);

// The options predict and evaluate share: MODEL, --x, --y, --label, --loss, --weights, --scale,
// --batch, --workers and --loss-out.
void add_run_options(CLI::App* c, RunArgs& a, bool targets_required);

// A number as JSON writes it (17 significant digits).
std::string json_number(double v);

bool ends_with(const std::string& s, const std::string& suffix);

}  // namespace nnfleet::cli
