// The fleet's types, apart from run_fleet() (fleet.h): its options, its summary, and the model
// file hooks the I/O layer provides. A header of their own so that the fleet's parts (worker.h,
// run_state.h, peers.h, cluster/) name them without including fleet.h, their orchestrator.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "fleet/display.h"
#include "fleet/fit/job_types.h"
#include "model/model.h"
#include "model/network.h"
#include "plan/plan.h"

namespace nnfleet {

struct FleetOptions {
  std::string out_dir;  // empty: runs/<plan>-<timestamp>
  int workers = 0;      // 0: one per core this process may run on
  bool resume = false;
  Display::Mode mode = Display::Mode::kLines;
  const std::atomic<bool>* stop = nullptr;  // set by a signal handler: finish batch, checkpoint
  double checkpoint_seconds = kCheckpointSeconds;  // JobContext::checkpoint_seconds
  // Called once the output folder exists (and plan.yaml, jobs.log and timeline.jsonl are in it),
  // before any job starts; rank 0 only. For `train --report`.
  std::function<void(const std::string& dir)> on_folder_ready;
  // Also told of every batch and finished epoch (on the workers' threads, so it must be
  // thread-safe), besides the display. Not owned.
  JobObserver* observer = nullptr;
  // FleetSummary::results keep their per-epoch histories (else they are in history.csv only).
  bool keep_history = false;
  // The arrays a program gives, by key, for the plan's sources of arrays (`{array: KEY}`): read
  // in place by the data loading and hashed by the run folder, never copied. Not owned: they
  // must stay valid and unchanged until the run ends. Null: none given.
  const std::map<std::string, Array>* arrays = nullptr;
};

using RankSummary = api::RankResult;
using RoundTrip = api::RoundTrips;

// The run's summary is the public RunResult, filled by the fleet; `models` stays empty until the
// API moves `results` into it (the vector itself: no row is copied).
struct FleetSummary : api::RunResult {
  std::vector<ModelResult> results;  // plan order; without histories (history.csv has them)
  bool results_written = false;      // results.json was written by this run (false after a failure)
};

// Hooks the Keras I/O layer provides (kept here as functions so fleet does not depend on io).
// A model file that ModelIo::save wrote: its path ("" when none) and the xxh3 of its bytes
// (hash_bytes), which the run records for --resume without reading the file back.
// `export_error`: an export beside it (--format onnx) that failed after training although the
// model passed ModelIo::check; the model file is written all the same, and the job fails with it.
struct SavedModel {
  std::string path;
  uint64_t xxh3 = 0;
  std::string export_error = {};  // (a default: two-field initializers stay valid)
};

struct ModelIo {
  // Builds the model of a `keras:` spec and fills its initial weights (empty when the file has
  // none). Throws Error.
  std::function<std::shared_ptr<const Model>(const ModelSpec&, const Shape&, std::vector<float>&)>
      load;
  // Saves a trained network to `path_without_extension` + its extension, atomically but without
  // an fsync (the run syncs its manifest, jobs.log, once); returns the path and the bytes' hash.
  // It is the network's last use: it may discard the network's numbers once they are copied.
  std::function<SavedModel(Network&, const ModelSpec&, const std::string&)> save;
  // The optimizer a `keras:` spec's file holds (restore_optimizer). Throws Error when it holds
  // none that nnfleet runs. The shape is the data's (for the file's free dimensions).
  std::function<RestoredOptimizer(const ModelSpec&, const Shape&)> optimizer;
  // Whether save() can write the model in the run's format (a layer ONNX cannot express, an
  // activation .keras cannot name): called while the plan is validated, so a model is refused
  // before training rather than after. Throws ModelError naming the layer. May be empty.
  std::function<void(const Model&)> check;
};

}  // namespace nnfleet
