// The fleet: validates every model of a plan against its data, then trains them all with one
// pinned worker thread per core, longest job first, writing the output folder described in
// README.md. Results are bit-identical for any number of workers: each model's random streams
// derive from the plan seed and its name only, and kernels are single-threaded.
//
// Under MPI (run_cluster_fleet(), cluster/cluster_fleet.h) the same run spans many processes:
// rank 0 validates the plan, owns the queue and writes the output folder; every rank runs its own
// pinned workers, which take the next job from rank 0's queue; results equal a single-process
// run's.
#pragma once

#include "fleet/fleet_types.h"
#include "plan/plan.h"

namespace nnfleet {

// Runs the plan in this process. Throws PlanError (every validation problem, listed), DataError,
// FileError before anything is written; after that, failures of single models are results, not
// exceptions.
FleetSummary run_fleet(const Plan& plan, const FleetOptions& opts, const ModelIo& io);

// A run of more models than this is a large fleet (README "What you get"): results.json lists
// the best SavePolicy::kDefaultBest (results.csv keeps every model), timeline.jsonl has a line
// per worker instead of one per job. SavePolicy::kSaveAllUpTo (10,000), or the environment's
// NNFLEET_LARGE_FLEET_ABOVE: a test hook, so that tests run small fleets as large ones.
size_t large_fleet_above();

}  // namespace nnfleet
