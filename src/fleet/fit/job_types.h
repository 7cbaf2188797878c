// What a job reports and is given, apart from how it runs (job.h): its status, metrics, history
// and result, the observer it reports batches and epochs to, and a restored optimizer.
// In fit/ since the fit loop makes these values; a header of its own so that the fleet's display,
// results, run folder and options (fleet/fleet_types.h) name them without the fit loop's API.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nnfleet/results.h"
#include "optim/optimizer.h"
#include "plan/plan.h"

namespace nnfleet {

// The public result types (include/nnfleet/results.h) are the fleet's own: a job fills the
// ModelResult its caller reads, with nothing copied on the way.
using JobStatus = api::Status;
JobStatus job_status_from_name(const std::string& s);

// Named values in a fixed order ("loss", "accuracy", "val_loss", "val_accuracy", ...).
using Metrics = api::Logs;
const double* find_metric(const Metrics& m, const std::string& key);

using EpochRecord = api::EpochLog;
using ModelResult = api::ModelResult;
using BestRecord = api::BestEpoch;

// A job's flags beside its model's result (JobResult's own), as its record in jobs.log keeps them.
struct JobFlags {
  bool retry = false;
  bool write_failed = false;
  bool paused = false;
};

struct JobResult : api::ModelResult {
  // A failure of the output folder, not of the model: a checkpoint that cannot be read back
  // (`retry`), or a checkpoint or model file that cannot be written (`retry` and `write_failed`:
  // the run stops, since every later write would fail too). Not final: --resume trains it again.
  bool retry = false;
  bool write_failed = false;
  bool checkpointed = false;  // this run wrote a checkpoint of it
  // A search trial that reached its rung's epoch limit (JobContext::epoch_limit): status
  // kCancelled (not final: its checkpoint is kept, no record is written) until its scheduler
  // promotes it (it trains on from the checkpoint) or prunes it.
  bool paused = false;
  JobFlags flags() const { return {retry, write_failed, paused}; }
};

// What a running job reports; called on the worker's thread.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void on_batch(const ModelSpec& spec, int epoch, int batch, int batches, double loss,
                        double metric, double samples_per_second) = 0;
  virtual void on_epoch(const ModelSpec& spec, const EpochRecord& rec) = 0;
  // Asked right after on_epoch, on the same thread: true stops the model after this epoch as
  // early stopping does (status done, its figures this epoch's; a resume trains it no further).
  virtual bool stop_model(const ModelSpec& spec, const EpochRecord& rec) {
    (void)spec;
    (void)rec;
    return false;
  }
  // A model's final result (done, diverged, failed, or a search's pruned trial), once it is
  // recorded; not for a cancelled model or a paused trial. Called on the storing thread with the
  // run's results locked: must be quick.
  virtual void on_model_end(const api::ModelResult& r) { (void)r; }
  // Once, before any job starts: the models this run trains (a resume's unfinished ones) and
  // the epochs each is planned for (a search's trials: the scheduler's max_epochs).
  virtual void on_run_start(const std::vector<std::pair<std::string, int>>& planned) {
    (void)planned;
  }
};

// Default seconds of training between the checkpoints written at epoch ends (see run_job).
constexpr double kCheckpointSeconds = 2.0;

// The optimizer of a `keras:` model's file, for restore_optimizer: its spec (class, configuration,
// schedule), its state in Network::optimizer_state() layout, and its step count.
struct RestoredOptimizer {
  OptimizerSpec spec;
  std::vector<float> state;
  int64_t iterations = 0;
};

}  // namespace nnfleet
