// nnfleet's public API: train every model of a plan at once, one pinned worker per core.
//
//   nnfleet::api::RunOptions o;
//   o.workers = 2;
//   nnfleet::api::RunResult r = nnfleet::api::train(nnfleet::api::PlanInput::file("fleet.yaml"),
//                                                   {}, o);
//   for (const auto& m : r.models) std::printf("%s %s\n", m.name.c_str(), m.status.c_str());
//
// A plan is the YAML/JSON of `nnfleet train` (README.md), from a file or from text (which a
// program may build as JSON). Its data sources name files, or caller-owned arrays given in
// DataArrays by key: `data: {train: {x: {array: x}, y: {array: y}}}` (JSON
// `{"x": {"array": "x"}, "y": {"array": "y"}}`) reads DataArrays{{"x", ...}, {"y", ...}} in place
// (never copied), shared read-only by every worker. Only a program gives arrays: a plan naming
// one is a PlanError when `arrays` is empty (as for `nnfleet train`), and a key that `arrays`
// lacks is a DataError naming the keys given.
//
// Results are bit-identical to `nnfleet train` on the same plan and data, for any `workers`.
// train() may be called from any thread, and from several threads at once (each run has its own
// workers, and reads only the arrays passed to it). Errors a user can cause throw nnfleet::Error
// subclasses with the CLI's messages: PlanError (the plan, every problem listed), DataError,
// FileError, ModelError, UsageError (the options, an output folder in use). Once training starts,
// a failing model is a result (status "failed"), not an exception.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nnfleet/array.h"
#include "nnfleet/cluster.h"
#include "nnfleet/model.h"
#include "nnfleet/results.h"

namespace nnfleet::api {

class PlanInput {
 public:
  static PlanInput file(const std::string& path);
  // `name` names the plan in messages and the default output folder; relative file names in
  // the text are taken from `base_dir` (empty: the current directory).
  static PlanInput text(const std::string& text, const std::string& name = "plan",
                        const std::string& base_dir = "");

  bool is_file() const { return is_file_; }
  const std::string& path() const { return path_; }  // the file, or the name of a text
  const std::string& content() const { return text_; }
  const std::string& base_dir() const { return base_dir_; }

 private:
  bool is_file_ = true;
  std::string path_, text_, base_dir_;
};

// Arrays a plan names as {array: <key>}, by key ("x" for {array: x}). Not owned (array.h): they
// must stay valid and unchanged until train() returns.
using DataArrays = std::map<std::string, ArrayView>;

// kModelEnd: a model's final result is recorded (done, diverged, failed, or a search's pruned
// trial; never a cancelled model): `epoch` its epochs, `logs` its final metrics, `seconds` its
// training time, `status` and `message` as its ModelResult's. kRunStart, once before any model
// starts: `planned` the models this run trains (a resume's unfinished ones) with the epochs each
// is planned for (a grid's models their own, a search's trials its scheduler's max_epochs; early
// stopping may end one sooner). A caller's progress counts against these.
struct Event {
  enum class Kind { kBatchEnd, kEpochEnd, kModelEnd, kRunStart };
  Kind kind = Kind::kEpochEnd;
  std::string model;
  int epoch = 0;                                        // 1-based
  int batch = 0, batches = 0;                           // kBatchEnd
  double loss = 0, metric = 0, samples_per_second = 0;  // kBatchEnd: running means
  Logs logs;           // kEpochEnd: every value of the epoch; kModelEnd: final metrics
  double seconds = 0;  // kEpochEnd, kModelEnd
  Status status = Status::kPending;                  // kModelEnd
  std::string message;                               // kModelEnd
  std::vector<std::pair<std::string, int>> planned;  // kRunStart: (model, epochs)
};

// What a run prints on stdout (and run.log): a live table on a terminal, one line per event, one
// JSON event per line, or nothing.
enum class Progress { kLive, kLines, kJson, kQuiet };

struct RunOptions {
  int workers = 0;  // pinned workers; 0: one per core this process may use
  // The output folder (README.md, "What you get"). Empty: runs/<plan>-<timestamp>. nullopt: a
  // temporary folder, removed when train() returns (models are then only in memory).
  std::optional<std::string> out = std::string();
  bool resume = false;  // continue the run in `out` (finished models kept, others from checkpoints)
  double checkpoint_seconds = 2.0;  // between epoch-end checkpoints; 0: every epoch
  // Trained model files: "keras", "h5", or "onnx" (a .keras file and an .onnx export beside it).
  std::string format = "keras";
  // Which model files the run keeps: "all", "best N" (the N best by the leaderboard's rank key,
  // ties in plan order; the others' files are deleted as better ones finish), "none"; "": the
  // plan's `save:`, else every model's up to 10,000 models and the best 100 above.
  std::string save;
  Progress progress = Progress::kQuiet;  // what is printed to stdout (and run.log)
  // Called on the workers' threads, possibly several at once: must be thread-safe and quick.
  std::function<void(const Event&)> on_event;
  // Asked on the model's worker thread after each of its epochs (after on_event's kEpochEnd):
  // true stops that model after this epoch, as early stopping does (status "done"; a resume
  // trains it no further). Thread-safe, as on_event. Results then depend on its answers.
  std::function<bool(const std::string& model, int epoch)> stop_model;
  // Set (by any thread) to stop: every model finishes its batch, checkpoints and ends as
  // "cancelled"; train() then returns with RunResult::interrupted. Not owned.
  const std::atomic<bool>* stop = nullptr;
  bool load_models = true;   // RunResult models carry the trained Model (read back from its file)
  bool keep_history = true;  // ModelResult::history is filled (else it is in history.csv only)
  // ModelResult::parameters is filled (each model's grid, search or `parameters:` values, as
  // results.json and results.csv hold them); the CLI, which prints none, leaves them out (about
  // 0.2 KB a model at the run's end, while both copies of the results are held).
  bool parameters = true;
  // Writes <out>/report.html (as `nnfleet report` does) every few seconds while the run goes on,
  // and once at its end (RunResult::report_path; a failure there is RunResult::report_error).
  bool report = false;
  // The MPI ranks the run spans; null (or one rank): this process alone. Every rank calls
  // train() with the same plan and options (`workers` counts per rank); the plan is read as a
  // collective step, and only rank 0's result has the models' figures (nnfleet/cluster.h). Not
  // owned.
  const Cluster* cluster = nullptr;
};

// Trains every model of the plan. Throws as the file header says.
[[nodiscard]] RunResult train(const PlanInput& plan, const DataArrays& arrays = {},
                              const RunOptions& options = {});

// Writes <run_dir>/report.html, the self-contained HTML report of a run folder (as `nnfleet
// report` does), and returns its path; `live`: the page reloads itself (a run still going);
// `group_by`: the recorded parameter whose values group the models in the page's per-group view,
// instead of the plan's `group_by` ("": the plan's). Throws FileError (not a run folder, a failed
// write), UsageError (`group_by` names no recorded parameter).
std::string write_report(const std::string& run_dir, bool live = false,
                         const std::string& group_by = "");

// The keys a plan's `defaults:` section accepts, sorted (the model settings every model inherits:
// epochs, loss, class_weight, ...), from the plan reader's own table, so that a program offering
// them as options (Python's train keywords) lists the same ones. Never throws.
std::vector<std::string> plan_defaults_keys();

}  // namespace nnfleet::api
