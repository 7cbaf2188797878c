// Job: trains one model of a plan on the calling thread, Keras-style (epochs, shuffled batches,
// validation, early stopping with restore_best_weights, test evaluation), checkpointing at epoch
// ends (every kCheckpointSeconds) and when asked to stop, and resuming from a checkpoint bit for
// bit.
// A job never throws: every outcome (done, diverged, failed, cancelled) is a JobResult.
// In fit/ because it is the fit loop itself: one model on one thread, whatever schedules it. What
// it reads of the fleet has types headers here: the data (data_view.h, loaded by the fleet), the
// place split batches go (piece_runner.h, the fleet's HelpBoard), its results (job_types.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fleet/fit/data_view.h"
#include "fleet/fit/job_types.h"
#include "fleet/fit/piece_runner.h"
#include "model/model.h"
#include "model/network.h"
#include "plan/plan.h"

namespace nnfleet {

struct JobContext {
  uint64_t seed = 0;
  int core = -1;
  const std::atomic<bool>* stop = nullptr;  // finish the current batch, checkpoint, return
  // The caller's stop (FleetOptions::stop), read as `stop` is: a stop requested while the job
  // runs is seen at its next check, not only once the fleet has passed it on to `stop`.
  const std::atomic<bool>* caller_stop = nullptr;
  JobObserver* observer = nullptr;
  std::string checkpoint_path;  // empty: no checkpoints
  // False when nothing but this job can have put a checkpoint at checkpoint_path (a fresh run
  // of one process made the folder): the job does not look for one before it starts.
  bool checkpoint_may_exist = true;
  // Saves the trained model (e.g. as .keras); exceptions are reported as a failed job whose
  // write failed (JobResult::write_failed).
  // It is the network's last use: it may discard the network's numbers once they are copied.
  std::function<void(Network&, const ModelSpec&)> save_model;
  // Whether the finished model's file is wanted, asked with its final figures (test metrics
  // included) before save_model; empty: always. `save: best N` answers no for a model that N
  // finished ones already rank before: it can never be among the final N, and writing then
  // deleting its file was most of a tiny model's time outside training (a 100,000-model run
  // wrote and unlinked 99,900 files).
  std::function<bool(const JobResult&)> wants_model_file;
  // Where the pieces of a split batch are posted for idle workers (the fleet's HelpBoard); null:
  // computed in turn here.
  PieceRunner* helpers = nullptr;
  int job = -1;  // the job's plan index, as the help board reports whom a helper helped
  // Seconds of training between the checkpoints written at epoch ends; 0: every epoch.
  double checkpoint_seconds = kCheckpointSeconds;
  // restore_optimizer: the job trains with this optimizer, starting from its state (not the
  // plan's optimizer); ignored when a checkpoint resumes the job.
  const RestoredOptimizer* restored_optimizer = nullptr;
  // A search's rung (fleet/search_scheduler.h): train up to this many epochs (0: the spec's), then,
  // when `pause_at_limit` and epochs are left, checkpoint and return paused (JobResult::paused)
  // for the scheduler to promote or prune; without it the limit ends training as the spec's last
  // epoch would. A trial continued from its checkpoint is the same trial trained straight through.
  int epoch_limit = 0;
  bool pause_at_limit = false;
};

// Rows one batch of this model can hold: spec.batch_size, but never more than the rows any batch
// is taken from (training, validation or test data), as Keras's batch over N < batch_size rows
// is those N rows. Memory is sized by it: batch_size 2^31 - 1 on 200 samples costs what 200 do.
int batch_rows(const ModelSpec& spec, const FleetData& data);

// Pieces each batch of `rows` rows (batch_rows()) of this model is split into: spec.batch_split
// when set; otherwise 2 for a model with at least kAutoSplitFlops of training work per batch (so
// that a piece is worth handing to another core) and 1 for the rest. A model with batch
// statistics is never split. Depends on the plan and data only, so results never depend on the
// number of workers.
constexpr double kAutoSplitFlops = 1e9;

int batch_pieces(const ModelSpec& spec, const Model& model, int rows);

// The model of a spec on the plan's data (the Keras loader arrives with the Keras issue; for a
// `keras:` spec the caller provides the model). Throws ModelError.
std::shared_ptr<const Model> build_model(const ModelSpec& spec, const Shape& input_shape);

// The losses a spec's model trains with: its plan's loss, or one per output (ModelSpec::
// output_losses, a list in output order or a map by output name) with loss_weights; the training
// loss is their weighted sum (Keras). Throws ModelError when they do not fit the outputs.
TrainSpec train_spec_of(const ModelSpec& spec, const Model& model);

// Estimated training cost (FLOPs x samples x epochs), for longest-first scheduling.
double estimated_cost(const ModelSpec& spec, const Model& model, int64_t n_train);

// Runs (or resumes, when ctx.checkpoint_path holds a checkpoint) one job. `initial_params`, when
// not null, replaces the initializer (weights from a Keras file).
JobResult run_job(const ModelSpec& spec, std::shared_ptr<const Model> model, const FleetData& data,
                  const JobContext& ctx, const std::vector<float>* initial_params = nullptr);

}  // namespace nnfleet
