// What a job reports and is given, apart from how it runs (job.h): its status, metrics, history
// and result, the observer it reports batches and epochs to, and a restored optimizer.
// In fit/ since the fit loop makes these values; a header of its own so that the fleet's display,
// results, run folder and options (fleet/fleet_types.h) name them without the fit loop's API.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"
#include "plan/plan.h"

namespace nnfleet {

enum class JobStatus { kPending, kDone, kDiverged, kFailed, kCancelled };
const char* job_status_name(JobStatus s);
JobStatus job_status_from_name(const std::string& s);

// Named values in a fixed order ("loss", "accuracy", "val_loss", "val_accuracy", ...).
using Metrics = std::vector<std::pair<std::string, double>>;
const double* find_metric(const Metrics& m, const std::string& key);

struct EpochRecord {
  int epoch = 0;  // 1-based
  Metrics values;
  double seconds = 0.0;
};

struct BestRecord {
  int epoch = 0;  // 1-based; 0 = none yet
  std::string monitor;
  double value = 0.0;
};

struct JobResult {
  std::string name;
  JobStatus status = JobStatus::kPending;
  std::string message;
  int epochs = 0;  // epochs completed
  size_t params = 0;
  double seconds = 0.0;  // training time, summed over resumed runs
  double samples_per_second = 0.0;
  int core = -1;
  Metrics metrics;  // final values, including test_* when there is test data
  BestRecord best;
  std::vector<EpochRecord> history;
  // A failure of the output folder, not of the model: a checkpoint that cannot be read back
  // (`retry`), or a checkpoint or model file that cannot be written (`retry` and `write_failed`:
  // the run stops, since every later write would fail too). Not final: --resume trains it again.
  bool retry = false;
  bool write_failed = false;
  bool checkpointed = false;  // this run wrote a checkpoint of it
};

// What a running job reports; called on the worker's thread.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void on_batch(const ModelSpec& spec, int epoch, int batch, int batches, double loss,
                        double metric, double samples_per_second) = 0;
  virtual void on_epoch(const ModelSpec& spec, const EpochRecord& rec) = 0;
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
