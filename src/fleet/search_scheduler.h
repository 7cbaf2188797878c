// The scheduler of a plan's search (plan.h SearchSpec): which trial trains next, up to which
// epoch, and which trials stop at a rung. Internal to src/fleet; RunState holds it under a lock.
//
// Every decision is a function of the metrics of the trials it compares, ties broken by trial
// index, never of the order in which trials finished: a rung is decided once every trial of it
// has reached the rung's epochs (or ended before them), so the same seed gives the same study on
// any number of workers or ranks, and after a resume. Trials are split into brackets (trial k in
// bracket k % brackets); bracket b's rungs start at min_budget * reduction_factor^b.
//
// The scheduler only records facts (the epochs a trial reached, its metric at each, whether it
// ended) and derives the rest, so a resumed run feeds it what the output folder holds and gets
// the same decisions as a run never interrupted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "fleet/fit/job_types.h"
#include "plan/plan.h"

namespace nnfleet::fleet_detail {

class SearchScheduler {
 public:
  struct Trial {
    int64_t n_train = 1;    // its training rows: a budget in samples is ceil(samples / n_train)
    double epoch_cost = 0;  // estimated work of one epoch, to start the longest work first
  };
  // Train trial `trial` up to `limit` epochs, pausing there (JobContext::pause_at_limit) when
  // `pause`: its last rung's limit ends training.
  struct Work {
    size_t trial = 0;
    int limit = 0;
    bool pause = false;
  };
  // A paused trial the scheduler stopped: its record is written with status pruned.
  struct Pruned {
    size_t trial = 0;
    int epochs = 0;
    std::string message;
  };

  SearchScheduler(const SearchSpec& spec, std::vector<Trial> trials);

  // Rung epochs of trial k, ascending; the last is the epochs it trains at most.
  const std::vector<int>& rungs(size_t k) const { return rungs_.at(k); }

  // Facts. `history` is the trial's every epoch so far; `status` its job's (a final one: it
  // will train no more; kPruned: an earlier run pruned it), `paused` whether it stopped at its
  // rung. Called after each job and, on a resume, for what the folder holds, before start().
  void reached(size_t k, const std::vector<EpochRecord>& history, JobStatus status, bool paused);
  // The job of trial k came back without reaching its limit (a stop): it is not running.
  void interrupted(size_t k) { facts_.at(k).running = false; }

  // Queues the first rung's work (after a resume's facts) and decides what the facts allow.
  std::vector<Pruned> start();
  // Decides every rung whose trials have all reported, queuing the promoted trials' work;
  // returns the trials pruned now (paused ones not promoted).
  std::vector<Pruned> advance();
  // No more decisions or work (a time limit): running trials end at their rung.
  void stop_deciding();

  // The next work, longest first (ties: trial order); none when nothing is queued. `finished`:
  // nothing is queued or running and nothing can be decided any more.
  std::optional<Work> next();
  bool finished() const;
  bool has_work() const { return !queue_.empty(); }

  // Trial k's rungs as results report them (epochs, value, decision).
  std::vector<api::Rung> rung_results(size_t k) const;
  int64_t epochs_trained() const;
  // The rung budgets of bracket 0 (as the plan writes them: epochs or samples).
  std::vector<int64_t> budgets(int bracket) const;

 private:
  struct Facts {
    int reached = 0;
    bool ended = false;
    bool pruned = false;        // by an earlier run (its record says so)
    bool running = false;       // queued or training
    std::vector<double> value;  // the metric after each epoch (NaN when missing)
    std::vector<api::Rung> decided;
  };
  struct Bracket {
    std::vector<size_t> members;  // the trials of its current rung, in trial order
    size_t rung = 0;              // index into the members' rungs
    bool complete = false;
  };
  struct Queued {
    double cost;
    size_t trial;
    bool operator<(const Queued& o) const {  // std::priority_queue: the greatest first
      return cost != o.cost ? cost < o.cost : trial > o.trial;
    }
  };

  double value_at(size_t k, int epoch) const;
  bool known(size_t k, size_t rung) const;  // reached the rung's epochs, or ended
  bool better(size_t a, size_t b, int ea, int eb) const;
  // Decides bracket `b`'s current rung (every member known); false when it was the last.
  bool decide(Bracket& b, std::vector<Pruned>& pruned);
  std::vector<size_t> survivors(const std::vector<size_t>& compared, size_t rung) const;
  void queue_rung(Bracket& b);  // work for the members short of the rung's epochs

  SearchSpec spec_;
  std::vector<Trial> trials_;
  std::vector<std::vector<int>> rungs_;
  std::vector<Facts> facts_;
  std::vector<Bracket> brackets_;
  std::priority_queue<Queued> queue_;
  std::vector<Work> work_;  // by trial: what its queued entry asks
  bool deciding_ = true;
};

}  // namespace nnfleet::fleet_detail
