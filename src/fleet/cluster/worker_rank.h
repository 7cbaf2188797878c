// A rank other than 0 in the cluster protocol (protocol.h): its own pinned workers, which ask
// rank 0 for their next job through the rank's main thread (the only thread that calls MPI), and
// ship every result, checkpoint and model file to rank 0, which owns the output folder.
#pragma once

#include <vector>

#include "fleet/cluster/cluster.h"
#include "fleet/fleet_types.h"

namespace nnfleet::fleet_detail {

// Runs `cores.size()` pinned workers on jobs from rank 0 until the queue is empty or the run
// stops, ships every result, and returns the run's outcome as rank 0 told it. Throws PeerExit
// when rank 0 ended the run with an error.
FleetSummary run_worker_rank(Cluster& cluster, const Plan& plan, const FleetOptions& opts,
                             const ModelIo& io, const std::vector<FleetData>& data,
                             const std::vector<int>& cores);

}  // namespace nnfleet::fleet_detail
