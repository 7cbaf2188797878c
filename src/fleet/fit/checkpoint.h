// Checkpoint: everything needed to continue a job bit for bit: weights, optimizer state, the
// position in training (epoch and batch), the dropout stream, running sums, early-stopping state
// and history. Written atomically (temporary name, then rename) with a checksum; a corrupt or
// truncated checkpoint is reported, never half-read.
// In fit/ because a checkpoint is the fit loop's state (run_job writes and resumes it); the fleet
// only names its path and, in a cluster, ships its bytes.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fleet/fit/job_types.h"
#include "fleet/fit/lr_plateau.h"

namespace nnfleet {

struct Checkpoint {
  std::string model;       // model name, checked on load
  int epoch = 0;           // epochs completed
  int batch = 0;           // batches completed of the next epoch (a stop mid-epoch)
  int64_t iterations = 0;  // optimizer steps so far
  std::array<uint64_t, 4> rng{};
  double loss_sum = 0.0;  // running sums of the interrupted epoch
  std::vector<double> metric_sums;
  int64_t seen = 0;
  double epoch_seconds = 0.0;
  double seconds = 0.0;  // training time so far
  int64_t samples = 0;   // samples trained so far
  BestRecord best;
  int wait = 0;
  bool stopped = false;  // early stopping ended training (the weights are final)
  bool has_best_params = false;
  // ReduceLROnPlateau's state and the rate it left (0: the optimizer's own rate).
  PlateauState plateau;
  double learning_rate = 0.0;
  std::vector<EpochRecord> history;
  // Filled by load_checkpoint only: a save takes the network's live weights and optimizer state
  // as views instead, so a job never holds a second copy of them.
  std::vector<float> params, opt_state;
  std::vector<float> best_params;
};

// Saves `c` with `params` and `opt_state` in place of c.params and c.opt_state.
void save_checkpoint(const std::string& path, const Checkpoint& c, std::span<const float> params,
                     std::span<const float> opt_state);
// Returns false when there is no checkpoint at `path`; throws FileError when it is corrupt.
bool load_checkpoint(const std::string& path, Checkpoint& c);

// Metrics and histories as JSON (shared with results.json).
Json metrics_to_json(const Metrics& m);
Metrics metrics_from_json(const Json& j);

}  // namespace nnfleet
