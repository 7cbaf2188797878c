// nnfleet's public API: what a run reports (train(), run.h). The fleet fills these types itself,
// as it trains: what a worker records of a model is the ModelResult the caller reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nnfleet/model.h"

namespace nnfleet::api {

// How a model's training ended (kPending: not trained yet; never in a finished run's results).
// kPruned: a search's scheduler stopped it at a rung (its figures are that rung's; no model file).
enum class Status { kPending, kDone, kDiverged, kFailed, kCancelled, kPruned };
// "pending", "done", "diverged", "failed", "cancelled", "pruned": results.json's words.
[[nodiscard]] const char* status_name(Status s);

using Logs = std::vector<std::pair<std::string, double>>;  // "loss", "val_loss", ... in order

// A figure as history.csv and the leaderboard write it: %.10g, with nan, inf and -inf spelt out.
[[nodiscard]] std::string figure_text(double v);

struct EpochLog {
  int epoch = 0;  // 1-based
  Logs values;
  double seconds = 0.0;
};

// The epoch early stopping's monitor liked best (restore_best_weights keeps its weights).
struct BestEpoch {
  int epoch = 0;  // 1-based; 0: none
  std::string monitor;
  double value = 0.0;
};

// A search trial at one rung of its scheduler: the epochs it had trained there, the search
// metric's value after them, and what the scheduler decided ("promoted", "pruned", "final":
// the trial's last rung, or "stopped": a time limit ended the search there).
struct Rung {
  int epochs = 0;
  double value = 0.0;
  std::string decision;
};

struct ModelResult {
  std::string name;
  Status status = Status::kPending;
  std::string message;  // why it failed, diverged or was cancelled
  int epochs = 0;       // completed
  int64_t params = 0;
  double seconds = 0.0;  // training time, summed over resumed runs
  double samples_per_second = 0.0;
  int core = -1;  // the core its worker ran on
  // The figures of the epoch whose weights the model holds (with early stopping's
  // restore_best_weights, once it stopped the training: the best epoch's; else the last
  // epoch's), test_* included with test data. The leaderboard ranks by these.
  Logs metrics;
  // The last trained epoch's figures (no test_*) when they are not `metrics`' (restored best
  // weights); empty: the same as metrics.
  Logs last_metrics;
  BestEpoch best;
  std::vector<EpochLog> history;  // per completed epoch (RunOptions::keep_history)
  std::string model_file;         // in the output folder; empty: none saved
  std::optional<Model> model;     // the trained model (RunOptions::load_models)
  // The model's parameters as the run recorded them: a grid's vars, a search trial's sampled
  // values, or a plan entry's `parameters:`; each value as JSON text ("0.001", "\"relu\"", "3").
  std::vector<std::pair<std::string, std::string>> parameters;
  std::vector<Rung> rungs;  // a search trial's rungs, in order; empty outside a search
};

// One MPI rank of a cluster run, as rank 0 reports it.
struct RankResult {
  int rank = 0;
  std::string host;
  std::vector<int> cores;        // one per worker
  bool loaded_data = false;      // read the data files (one rank per node does)
  int jobs = 0;                  // jobs it ran
  double busy_seconds = 0;       // summed over its workers
  size_t peak_rss_bytes = 0;     // by the end of the run
  size_t rss_private_bytes = 0;  // resident bytes of its own (anonymous) memory
  size_t rss_shared_bytes = 0;   // resident bytes shared with other processes (the data window)
};

// Rank 0's scheduling overhead as the other ranks' workers saw it: the time from asking rank 0
// for a job to holding the answer, in microseconds.
struct RoundTrips {
  size_t count = 0;
  double mean_us = 0, median_us = 0, max_us = 0;
};

struct RunResult {
  std::vector<ModelResult> models;  // plan order
  std::string out_dir;              // empty when it was temporary
  bool interrupted = false;
  std::string write_error;   // a failed write to the output folder stopped the run early
  std::string results_file;  // results.json as this run wrote it; empty: temporary, or not written
  double makespan = 0;       // seconds, launch of the first model to the end of the last
  int workers = 0;           // under MPI: over all ranks
  double busy_fraction = 0;  // model time / (workers x makespan)
  size_t peak_rss_bytes = 0;
  // The leaderboard's metric and its direction, and the models by it, best first (indices into
  // `models`; models without the metric last, in plan order).
  std::string rank_by;
  bool rank_higher_is_better = true;
  std::vector<size_t> ranking;
  std::string report_path;   // RunOptions::report: the written report.html
  std::string report_error;  // RunOptions::report: why it could not be written (the run is kept)
  // Cluster runs: this process's rank (ranks other than 0 hold only names and statuses), and on
  // rank 0 every rank and its scheduling round trips.
  int rank = 0;
  std::vector<RankResult> ranks;
  RoundTrips round_trips;
};

}  // namespace nnfleet::api
