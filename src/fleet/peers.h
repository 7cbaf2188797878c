// Peers: the other processes of a run, as the process that owns the queue and the output folder
// sees them (internal to src/fleet). fleet.cpp runs that process's part of every run through this
// seam and never asks whether there is a cluster: a run of one process has no peers, which is
// what this base class does; a cluster run's rank 0 passes its other ranks (cluster/).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "fleet/display.h"
#include "fleet/fit/data_view.h"
#include "fleet/fleet_types.h"
#include "fleet/run_state.h"

namespace nnfleet::fleet_detail {

// The display's rows: this process's workers first, then every peer's.
struct Slots {
  std::vector<int> cores;          // per row
  std::vector<int> ranks;          // per row: the rank it runs on (0 here)
  std::vector<int> base;           // per rank: its first row
  std::vector<std::string> hosts;  // per rank: its host name
};

class Peers {
 public:
  virtual ~Peers() = default;
  // Runs the validation of the plan and the opening of the output folder (`step`); with peers,
  // as a collective step, so that every process learns whether it threw.
  virtual void agree(const std::function<void()>& step) { step(); }
  // Adds the peers' workers to the display's rows (and their hosts; rank 0's host is this
  // process's, which a peer may name as it knows it).
  virtual void add_slots(Slots&) const {}
  // What the run's first note says of where it runs (" on 3 MPI ranks"), and its event's fields.
  virtual void describe(std::string&, Json&) const {}
  // Before the display starts: which rank each row is on, and a note per rank.
  virtual void show(Display&, const Slots&) const {}
  // Whether workers left without a job may compute pieces of split batches (only when every
  // worker of the run is in this process).
  virtual bool helpers() const { return true; }
  // Whether checkpoints may arrive in the output folder from the peers (a cluster's coordinator
  // writes those its ranks send).
  virtual bool send_checkpoints() const { return false; }
  // Runs while this process's workers train, until `running` (those still running) reaches zero;
  // turns a stop (opts.stop, or a failed write's) into `st.stop`, which the workers watch.
  virtual void serve(RunState& st, const Slots& slots, std::atomic<int>& running,
                     FleetSummary& sum);
  // Adds the peers' work to `sum` (FleetSummary::ranks); returns the busy seconds of every worker
  // of the run, `local_busy` being this process's.
  virtual double account(FleetSummary&, int local_jobs, double local_busy) {
    (void)local_jobs;
    return local_busy;
  }
  // After results.json (or its failure): tells the peers how the run ended (`code`: 0, or the
  // exit code of the error about to be thrown).
  virtual void finish(const std::vector<ModelResult>&, bool interrupted, int code) {
    (void)interrupted;
    (void)code;
  }
};

// The cores of `workers` workers (0: one per core of `cores`), one per core: never more workers
// than `cores` has.
std::vector<int> worker_cores(const std::vector<int>& cores, int workers);

// run_fleet() in the process that owns the queue and the output folder, its `data` loaded and
// its workers on `cores` (one per worker), the rest of the run being `peers`.
FleetSummary run_fleet_here(const Plan& plan, const FleetOptions& opts, const ModelIo& io,
                            const std::vector<FleetData>& data, const std::vector<int>& cores,
                            Peers& peers);

}  // namespace nnfleet::fleet_detail
