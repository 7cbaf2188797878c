// HelpBoard: one mutex and one condition variable. A piece takes milliseconds (only models with
// at least ~1 GFLOP of work per batch are split by default), so claiming pieces under a lock costs
// nothing measurable.
#include "fleet/help_board.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "platform/test_hold.h"

namespace nnfleet {

HelpBoard::HelpBoard(int split_jobs)
    : split_jobs_(split_jobs), wait_for_helper_(test_hold::listed("split_step")) {}

template <typename Ready>
void HelpBoard::spin_until(Ready ready) {
  for (int i = 0; i < 20000 && !ready(); ++i) _mm_pause();  // at most ~0.2-1 ms
}

bool HelpBoard::claim(Task*& task, int& piece) {
  for (Task* t : posted_) {
    if (t->next < t->pieces) {
      task = t;
      piece = t->next++;
      return true;
    }
  }
  return false;
}

void HelpBoard::run(int pieces, const std::function<void(int)>& fn, int owner) {
  Task task{&fn, pieces, owner};
  std::unique_lock<std::mutex> lock(mu_);
  posted_.push_back(&task);
  posts_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
  if (wait_for_helper_ && !helped_) cv_.wait(lock, [&] { return helped_; });
  while (task.next < task.pieces) {
    const int p = task.next++;
    lock.unlock();
    fn(p);
    lock.lock();
    ++task.done;
  }
  // Every piece is claimed: no helper can reach the task any more; wait for those still computing.
  posted_.erase(std::find(posted_.begin(), posted_.end(), &task));
  if (task.done.load() == task.pieces) return;
  lock.unlock();
  spin_until([&] { return task.done.load(std::memory_order_acquire) == task.pieces; });
  lock.lock();
  cv_.wait(lock, [&] { return task.done.load() == task.pieces; });
}

void HelpBoard::job_done() {
  std::lock_guard<std::mutex> lock(mu_);
  --split_jobs_;
  cv_.notify_all();
}

double HelpBoard::help(const std::atomic<bool>* stop, const SpanSink& sink) {
  return help_until(stop, nullptr, sink);
}

void HelpBoard::wake() {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

double HelpBoard::help_until(const std::atomic<bool>* stop, const std::function<bool()>& until,
                             const SpanSink& sink) {
  // Pieces of one owner less than this apart make one span (a step's pieces follow each other
  // within microseconds; its next step's within the owner's own share of the step).
  constexpr auto kMerge = std::chrono::milliseconds(250);
  struct Span {
    int owner = -1, pieces = 0;
    Clock::time_point begin, end;
  } span;
  auto flush = [&] {
    if (sink && span.pieces > 0) sink(span.owner, span.begin, span.end, span.pieces);
    span.pieces = 0;
  };
  double seconds = 0.0;
  std::unique_lock<std::mutex> lock(mu_);
  while (split_jobs_ > 0 && !(stop && stop->load(std::memory_order_relaxed))) {
    if (until) {
      lock.unlock();
      const bool done = until();
      lock.lock();
      if (done) break;
    }
    Task* task = nullptr;
    int piece = 0;
    if (!claim(task, piece)) {
      // Spin for the next post a moment, then sleep until a new post, a job's end, or the timeout
      // (to notice a stop request).
      const uint64_t seen = posts_.load(std::memory_order_acquire);
      lock.unlock();
      spin_until([&] { return posts_.load(std::memory_order_acquire) != seen; });
      lock.lock();
      if (posts_.load() == seen) cv_.wait_for(lock, std::chrono::milliseconds(50));
      continue;
    }
    const int owner = task->owner;
    if (!helped_) {
      helped_ = true;
      cv_.notify_all();  // an owner held by the test hold may go on
    }
    lock.unlock();
    const auto t0 = Clock::now();
    (*task->fn)(piece);
    const auto t1 = Clock::now();
    seconds += std::chrono::duration<double>(t1 - t0).count();
    lock.lock();
    if (++task->done == task->pieces) cv_.notify_all();  // the task's owner may be waiting
    if (span.pieces > 0 && (span.owner != owner || t0 - span.end > kMerge)) {
      lock.unlock();
      flush();
      lock.lock();
    }
    if (span.pieces == 0) {
      span.owner = owner;
      span.begin = t0;
    }
    span.end = t1;
    ++span.pieces;
  }
  lock.unlock();
  flush();
  return seconds;
}

}  // namespace nnfleet
