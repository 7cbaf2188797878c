// The state of a run in the process that owns its queue and output folder (internal to
// src/fleet): the validated jobs, the queue, the results, and the stop. Shared by that process's
// workers and, in a cluster run, by rank 0's coordinator (cluster/coordinator.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fleet/display.h"
#include "fleet/fleet_types.h"
#include "fleet/results.h"
#include "fleet/run_folder.h"
#include "fleet/search_scheduler.h"
#include "fleet/timeline.h"

namespace nnfleet::fleet_detail {

// One per model of the plan, so kept small: 72 bytes (a run of 100,000 models holds 7 MB of
// them), its name the plan's (PlanModels::name) and its model built only when it runs.
struct PreparedJob {
  const std::string* plan_name = nullptr;  // the plan's, which outlives the run
  const std::string& name() const { return *plan_name; }
  size_t index = 0;  // plan order
  // Expanded again from the plan (PlanModels) when the job runs and dropped when it ends: a plan
  // of 8,000 models holds one per worker, not 8,000 (about 3 KB each for a tiny model).
  std::shared_ptr<const ModelSpec> spec;
  size_t params = 0;
  double cost = 0.0;
  int epochs = 1;             // the spec's
  int pieces = 1;             // batch_pieces()
  uint64_t record_bytes = 0;  // about what its record in jobs.log takes
  // A search trial's rung (JobContext::epoch_limit and pause_at_limit), set when it is taken.
  int epoch_limit = 0;
  bool pause = false;
};

// A file of a finished job shipped from another process: its path under the output folder and
// its bytes.
using ShippedFile = std::pair<std::string, std::string>;

struct RunState {
  RunState(const Plan& p, const FleetOptions& o) : plan(p), opts(o) {}
  const Plan& plan;
  const FleetOptions& opts;
  std::string dir;
  std::vector<PreparedJob> jobs;
  std::vector<PreparedJob*> queue;  // longest first
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};  // a stop seen anywhere in the run (the cluster included)
  std::mutex out_mu;              // results and the files of finished jobs
  // Plan order, without histories (they are in jobs.log). The public type, so the run's end
  // hands the vector over whole (a copy beside it was 34 MB of a 100,000-model run's peak);
  // `paused` holds a search trial's JobResult::paused, the one job flag read after storing
  // (both under out_mu once the run has started).
  std::vector<ModelResult> results;
  std::vector<bool> paused;
  Display* live = nullptr;
  RunFolder* folder = nullptr;
  Timeline* timeline = nullptr;       // null: none kept
  std::vector<Timeline::Slot> slots;  // by display slot (this process's workers first)
  std::string write_error;            // (out_mu) the first write to the output folder that failed
  // A fresh run whose peers write no checkpoints here: a job's checkpoint exists only when the
  // job wrote one (JobResult::checkpointed), so no other job looks for or deletes one (two
  // failing system calls per model, 2% of the CPU of 8,000 tiny models).
  bool own_checkpoints_only = false;

  // A search's scheduler (null: a plain run, whose order is `queue`), under search_mu; its
  // workers wait on search_cv for work a rung's decision makes. `deadline`: its time limit.
  std::unique_ptr<SearchScheduler> search;
  std::mutex search_mu;
  std::condition_variable search_cv;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  bool deadline_noted = false;  // (search_mu)

  bool stopping() const { return stop.load() || (opts.stop && opts.stop->load()); }
  // The next queue entry, or null when the queue is empty or the run is stopping. In a search,
  // waits until a rung's decision gives work or the search has none left.
  PreparedJob* take();
  // The same without waiting (rank 0's coordinator): null with `wait` set when work may still
  // come (ask again later).
  PreparedJob* try_take(bool& wait);
  // A search: the first rung's work queued after what a resume found (`pruned` by the
  // decisions the facts allow are recorded).
  void start_search();
  // A search's worker may stop waiting: work is queued, the search is over, or the run stops.
  bool search_ready();
  // Called after a search's decision (the worker pool wakes its helpers); may be empty.
  std::function<void()> on_decision;
  // Writes a finished job's files (shipped ones first, then its record in jobs.log, which marks
  // it finished for --resume) and records its result; `model_file` (relative to the folder)
  // names the model this process saved for it, `model_xxh3` its bytes' hash. A write failure
  // fails the job and stops the run. With a display `slot` (>= 0), its end is shown and put in
  // the timeline before a search's scheduler may hand the job out again.
  void store(const PreparedJob& job, JobResult r, const std::vector<ShippedFile>& files,
             std::string model_file = "", uint64_t model_xxh3 = 0, int slot = -1);
  // save: best N (keep_best > 0): the models whose files are kept so far, best first by
  // keep_key, ties in plan order (out_mu). The top N of the finished models never leave it, so
  // a model whose file is deleted because N better ones finished cannot be among the final N.
  size_t keep_best = 0;
  RankKey keep_key;
  std::vector<size_t> kept;
  // Model `index`'s saved file joins the kept ones; the one it pushes out of the top N loses its
  // file (and its result the name). Needs out_mu.
  void keep_file(size_t index);
  // Whether keep_file(index) would drop model `index`'s file at once, its result being `r`
  // (out_mu): its record then names no file.
  bool outside_kept(size_t index, const ModelResult& r) const;
  // Whether model `index`, finished with result `r`, may still be among the final N (takes
  // out_mu): not outside_kept. Its answer only turns from yes to no as models finish, since the
  // N kept ones are the top N of every finished model; a model it refuses is not saved at all.
  bool wants_file(size_t index, const ModelResult& r);
  // The run's end (save: best N): every model file outside the top N by the final `key` goes.
  void keep_final(const RankKey& key);
  bool keeps_before(const ModelResult& a, size_t ia, size_t ib) const;  // a (index ia) before ib
  // Stops the run because `why` (a write failed); needs out_mu.
  void halt(const std::string& why);
  PreparedJob* take_search(bool& wait);  // needs search_mu
  // Records the trials a search's scheduler pruned (their records written as final).
  void prune(const std::vector<SearchScheduler::Pruned>& pruned);
  // timeline.jsonl: job `model` started, or ended with its stored result, on display slot `slot`.
  void timeline_started(int slot, const std::string& model);
  void timeline_ended(int slot, const PreparedJob& job);
};

}  // namespace nnfleet::fleet_detail
