// Display: what a fleet run shows while it works. On a terminal, a live block with one row per
// worker (core, model, epoch i/n, a progress bar, loss, metric, samples/s) and an overall bar
// (done/total, ETA), redrawn a few times a second with finished epochs scrolling above it.
// Not on a terminal: one line per finished epoch. --json: one JSON event per line. --quiet:
// nothing. Every line also goes to run.log. Thread-safe: workers report through their observer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fleet/fit/job_types.h"
#include "nnfleet/run.h"

namespace nnfleet {

class Display {
 public:
  using Mode = api::Progress;  // the run's progress (nnfleet/run.h): one enum for every face

  Display(Mode mode, std::vector<int> cores, size_t total_jobs, size_t done_jobs, double total_cost,
          double done_cost, const std::string& log_path);
  ~Display();

  // Cluster runs: the MPI rank of each row's worker; rows then read "rank R core C" and start
  // events carry the rank. Call before start().
  void set_ranks(std::vector<int> ranks);
  void start();
  void stop();
  JobObserver* observer(int worker);
  void job_started(int worker, const ModelSpec& spec, double cost);
  // A job's end; a search trial `paused` at its rung (JobResult::paused) is not counted done.
  void job_finished(int worker, const ModelResult& r, bool paused, double cost);
  // A search trial its scheduler stopped at a rung: done, as pruned.
  void job_pruned(const ModelResult& r, double cost);
  // The worker has no job left and helps models whose batches are split (HelpBoard).
  void helping(int worker, bool on);
  // A line for the user (and run.log); in JSON mode, `event` is emitted instead. `text` false:
  // the event only (a per-model line of a large fleet, brief()).
  void note(const std::string& line, const Json& event, bool text = true);
  // A fleet of more than kBriefAbove models: run.log and the printed lines hold no start, epoch
  // or end line of a model that trained well (100,000 tiny models wrote 18 MB of them), but one
  // line a percent of the models done, and every failure; JSON events stay one per model.
  static constexpr size_t kBriefAbove = 1000;
  bool brief() const { return brief_; }

 private:
  struct Slot {
    std::string model, metric_name;
    int epoch = 0, epochs = 0, batch = 0, batches = 0;
    double loss = 0, metric = 0, sps = 0, cost = 0;
    bool helping = false;
    bool busy = false;
  };
  class WorkerObserver;
  void emit(const std::string& line, const Json& event, bool text = true);  // needs mu_
  void progress_locked();  // brief(): a line a percent of the models done
  void redraw_locked(bool final);
  void loop();
  std::string where(int worker) const;  // "core C" or "rank R core C"

  Mode mode_;
  std::vector<int> cores_;
  std::vector<int> ranks_;  // empty: one process
  size_t total_, done_;
  double total_cost_, done_cost_;
  std::FILE* log_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<WorkerObserver>> observers_;
  std::thread thread_;
  bool stopping_ = false;
  std::atomic<bool> first_step_seen_{false};
  int drawn_lines_ = 0;
  bool brief_ = false;
  double t0_ = 0;
};

}  // namespace nnfleet
