// What a pinned worker does with one job, in whichever process it runs (fleet.cpp's workers,
// and those of a cluster's other ranks, cluster/worker_rank.cpp): build the job's model and
// train it, with its checkpoint and saved model in a folder the caller names.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fleet/fit/job.h"
#include "fleet/fleet_types.h"

namespace nnfleet::fleet_detail {

// The model of a spec, its initial weights when a Keras file has them (empty otherwise),
// fine-tuning applied, and with restore_optimizer the file's optimizer. Refuses options nnfleet
// only predicts with. Throws Error.
std::shared_ptr<const Model> job_model(const ModelSpec& s, const ModelIo& io, const FleetData& data,
                                       std::vector<float>& initial_params,
                                       RestoredOptimizer& restored);

// Trains `s` on this thread, `ctx` as the caller set it (seed, core, stop, observer, helpers,
// checkpoint_seconds), in the folder `root`: the checkpoint is <root>/checkpoints/<name>.ckpt and
// io.save, when set, writes the model under <root>/models/, its path and hash then in `saved`.
// Throws Error only when the model cannot be built (job_model); after that the outcome is the
// JobResult.
JobResult train_job(const ModelSpec& s, const ModelIo& io, const FleetData& data, JobContext ctx,
                    const std::string& root, SavedModel& saved);

}  // namespace nnfleet::fleet_detail
