// The fleet across MPI ranks (internal to src/fleet): what fleet.cpp's runner shares with the
// cluster protocol in mpi_fleet.cpp. Rank 0 validates the plan, owns the queue and the output
// folder, and runs a coordinator on its main thread that hands queue entries to idle workers of
// every other rank and writes what they send back; each other rank runs its own pinned workers,
// which ask rank 0 for their next job through their rank's main thread (the only thread that
// calls MPI). Free of MPI itself: it talks through Cluster (mpi_cluster.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fleet/display.h"
#include "fleet/fleet.h"
#include "fleet/mpi_cluster.h"
#include "fleet/run_folder.h"
#include "fleet/timeline.h"

namespace nnfleet::fleet_detail {

struct PreparedJob {
  const ModelSpec* spec = nullptr;
  size_t index = 0;                    // plan order
  std::shared_ptr<const Model> model;  // only while it is validated (built again to run)
  size_t params = 0;
  double cost = 0.0;
  int pieces = 1;  // batch_pieces()
};

// A file of a finished job shipped to rank 0: its path under the output folder and its bytes.
using ShippedFile = std::pair<std::string, std::string>;

// What every rank tells rank 0 before the run (collective gather; JSON).
struct RankInfo {
  int rank = 0;
  std::string host;
  std::vector<int> cores;  // one per worker
  bool loaded_data = false;
  uint64_t plan_hash = 0, data_hash = 0;  // data_hash 0: not computed on this rank
  Json to_json() const;
  static RankInfo from_json(const Json& j);
};

// Rank 0's state while a run is under way, shared by its own workers and the coordinator.
struct RunState {
  RunState(const Plan& p, const FleetOptions& o) : plan(p), opts(o) {}
  const Plan& plan;
  const FleetOptions& opts;
  std::string dir;
  std::vector<PreparedJob> jobs;
  std::vector<PreparedJob*> queue;  // longest first
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};   // a stop seen anywhere in the cluster
  std::mutex out_mu;               // results and the files of finished jobs
  std::vector<JobResult> results;  // plan order, without histories (they are in jobs.log)
  Display* live = nullptr;
  RunFolder* folder = nullptr;
  Timeline* timeline = nullptr;       // null: none kept
  std::vector<Timeline::Slot> slots;  // by display slot (rank 0's workers first)
  std::string write_error;            // (out_mu) the first write to the output folder that failed

  bool stopping() const { return stop.load() || (opts.stop && opts.stop->load()); }
  // The next queue entry, or null when the queue is empty or the run is stopping.
  PreparedJob* take();
  // Writes a finished job's files (shipped ones first, then its record in jobs.log, which marks
  // it finished for --resume) and records its result; `model_file` (relative to the folder)
  // names the model this rank saved for it. A write failure fails the job and stops the run.
  void store(const PreparedJob& job, JobResult r, const std::vector<ShippedFile>& files,
             std::string model_file = "");
  // Stops the run because `why` (a write failed); needs out_mu.
  void halt(const std::string& why);
  // timeline.jsonl: job `model` started, or ended with its stored result, on display slot `slot`.
  void timeline_started(int slot, const std::string& model);
  void timeline_ended(int slot, const PreparedJob& job);
};

// This process's resident memory now (private and shared) and its peak, from /proc.
void measure_memory(RankSummary& r);

// Hash of what must be equal on every rank for equal results: the seed and every expanded model.
uint64_t plan_hash(const Plan& plan);
// Hash of the data as loaded (arrays, shapes, dtypes, split, scale).
uint64_t data_hash(const std::vector<FleetData>& sources);

// Rank 0: serves the other ranks until they have all said bye and `local_workers` (rank 0's
// own, counted down as they finish) reaches zero; meanwhile turns a stop seen anywhere into
// `st.stop` everywhere. Fills sum.ranks (rank 0's own entry as far as `ranks` tells) and
// sum.round_trip. `slot_base[r]` is rank r's first row in the display.
void coordinate(Cluster& cluster, RunState& st, const std::vector<RankInfo>& ranks,
                const std::vector<int>& slot_base, std::atomic<int>& local_workers,
                FleetSummary& sum);
// Rank 0, after results.json: tells every rank how the run ended (`code`: 0, or the exit code of
// an error rank 0 is about to throw).
void finish_cluster(Cluster& cluster, const std::vector<JobResult>& results, bool interrupted,
                    int code);
// Any other rank: runs `cores.size()` pinned workers on jobs from rank 0 until the queue is empty
// or the run stops, ships every result, and returns the run's outcome as rank 0 told it.
FleetSummary run_worker_rank(Cluster& cluster, const Plan& plan, const FleetOptions& opts,
                             const ModelIo& io, const std::vector<FleetData>& data,
                             const std::vector<int>& cores);

}  // namespace nnfleet::fleet_detail
