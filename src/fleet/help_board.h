// HelpBoard: lets idle workers help running models whose batches are split into pieces
// (Network::pieces). The model's own worker posts each step's pieces and computes them too; an
// idle worker claims whichever piece is next. Which thread computes a piece never changes the
// result (Network sums the pieces' gradients in piece order), so a run is bit-identical whatever
// the number of workers; helping only shortens the tail of a run, when fewer models remain than
// workers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "fleet/fit/piece_runner.h"

namespace nnfleet {

class HelpBoard : public PieceRunner {
 public:
  // `split_jobs`: how many jobs of the run will post pieces; helpers wait while any may still do
  // so.
  explicit HelpBoard(int split_jobs);

  // Runs fn(0), ..., fn(pieces - 1) on the calling thread and on any helping worker; returns when
  // all have finished. Never allocates. `owner` (the job's plan index) is what help() reports.
  void run(int pieces, const std::function<void(int)>& fn, int owner = -1) override;
  // A job counted in `split_jobs` has ended (finished, failed or stopped).
  void job_done();
  // What a helper computed for one owner, pieces following each other with short gaps merged
  // into one span [begin, end]; called on the helper's thread, outside the lock.
  using Clock = std::chrono::steady_clock;
  using SpanSink =
      std::function<void(int owner, Clock::time_point begin, Clock::time_point end, int pieces)>;
  // An idle worker helps with posted pieces until no counted job is left or `stop` is set,
  // reporting its spans to `sink` (when set). Returns the seconds it spent computing pieces.
  double help(const std::atomic<bool>* stop, const SpanSink& sink = nullptr);
  // The same, also returning as soon as `until()` is true (checked between pieces and at least
  // every 50 ms): a search's idle worker helps while it waits for a rung's decision.
  double help_until(const std::atomic<bool>* stop, const std::function<bool()>& until,
                    const SpanSink& sink = nullptr);
  // Wakes helpers to check their `until` now (a rung was decided).
  void wake();

 private:
  struct Task {
    const std::function<void(int)>* fn;
    int pieces;
    int owner;
    int next = 0;              // claimed pieces (under the lock)
    std::atomic<int> done{0};  // finished pieces (incremented under the lock)
  };
  // Claims the next piece of a posted task (lock held); false when there is none.
  bool claim(Task*& task, int& piece);
  // Spins briefly (the lock not held) until `ready` is true; a step's pieces follow each other
  // within microseconds, far sooner than a sleeping thread would wake.
  template <typename Ready>
  static void spin_until(Ready ready);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Task*> posted_;       // tasks with pieces not yet claimed
  std::atomic<uint64_t> posts_{0};  // tasks posted so far
  int split_jobs_;
  // Test hold "split_step" (platform/test_hold.h): the first posted step waits, its pieces
  // unclaimed by the owner, until a helper claims one, so that a test surely sees help however
  // soon the other models end. Never set outside tests: with one worker it would wait forever.
  bool wait_for_helper_ = false;
  bool helped_ = false;  // a helper has claimed a piece (under the lock)
};

}  // namespace nnfleet
