// Rank 0's side of the cluster protocol (protocol.h): the coordinator that hands queue entries
// to idle workers of every other rank and writes what they send back, on rank 0's main thread
// (the only thread that calls MPI), while rank 0's own workers take from the same queue.
#pragma once

#include <atomic>
#include <vector>

#include "fleet/cluster/cluster.h"
#include "fleet/cluster/protocol.h"
#include "fleet/run_state.h"

namespace nnfleet::fleet_detail {

// Serves the other ranks until they have all said bye and `local_workers` (rank 0's own,
// counted down as they finish) reaches zero; meanwhile turns a stop seen anywhere into
// `st.stop` everywhere. Fills sum.ranks (rank 0's own entry as far as `ranks` tells) and
// sum.round_trips. `slot_base[r]` is rank r's first row in the display.
void coordinate(Cluster& cluster, RunState& st, const std::vector<RankInfo>& ranks,
                const std::vector<int>& slot_base, std::atomic<int>& local_workers,
                FleetSummary& sum);
// After results.json: tells every rank how the run ended (`code`: 0, or the exit code of an
// error rank 0 is about to throw).
void finish_cluster(Cluster& cluster, const std::vector<ModelResult>& results, bool interrupted,
                    int code);

}  // namespace nnfleet::fleet_detail
