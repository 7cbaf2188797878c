// The fleet across the ranks of a Cluster (cluster.h): rank 0 validates the plan, owns the queue
// and the output folder, and runs a coordinator (coordinator.h) on its main thread that hands
// queue entries to idle workers of every other rank and writes what they send back; each other
// rank runs its own pinned workers (worker_rank.h), which ask rank 0 for their next job through
// their rank's main thread (the only thread that calls MPI). Results equal a single-process run's.
#pragma once

#include "fleet/cluster/cluster.h"
#include "fleet/fleet.h"

namespace nnfleet {

// run_fleet() on every rank of `cluster`: every rank calls it with the same plan and options
// (`workers` counts per rank). With no cluster, or one of a single rank, it is run_fleet(). Throws
// as run_fleet() does; a problem found on any rank is thrown by rank 0 (see Cluster::agree), and
// the other ranks throw PeerExit. On ranks other than 0 the summary holds only `rank`,
// `interrupted` and each result's name and status (as rank 0 decided them).
FleetSummary run_cluster_fleet(const Plan& plan, const FleetOptions& opts, const ModelIo& io,
                               Cluster* cluster);

}  // namespace nnfleet
