// Pinned workers and blocks of work over a few threads.
#include "platform/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "platform/cpu.h"

namespace nnfleet {

void for_each_block(size_t blocks, int threads,
                    const std::function<void(int thread, size_t block)>& fn) {
  if (blocks == 0) return;
  std::vector<std::exception_ptr> errors(blocks);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&](int t) {
    for (size_t b; !failed && (b = next++) < blocks;) {
      try {
        fn(t, b);
      } catch (...) {
        errors[b] = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  std::vector<std::thread> helpers;
  const size_t extra = std::min(blocks, static_cast<size_t>(std::max(threads, 1))) - 1;
  for (size_t t = 1; t <= extra; ++t) {
    try {
      helpers.emplace_back(work, static_cast<int>(t));
    } catch (const std::system_error&) {
      break;  // no thread to be had: fewer threads do the same blocks
    }
  }
  work(0);
  for (auto& h : helpers) h.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

namespace {

void run_pinned(const std::vector<int>& cores, size_t first, const std::function<void(int)>& work,
                const std::function<void()>& meanwhile) {
  auto pinned = [&](size_t w) {
    if (cores[w] >= 0) pin_this_thread(cores[w]);
    work(static_cast<int>(w));
  };
  std::vector<std::thread> threads;
  for (size_t w = first; w < cores.size(); ++w) threads.emplace_back([&pinned, w] { pinned(w); });
  if (first > 0) pinned(0);
  if (meanwhile) meanwhile();
  for (auto& t : threads) t.join();
}

}  // namespace

void run_pinned_workers(const std::vector<int>& cores, const std::function<void(int w)>& work,
                        const std::function<void()>& meanwhile) {
  run_pinned(cores, 0, work, meanwhile);
}

void run_pinned_workers_here(const std::vector<int>& cores,
                             const std::function<void(int w)>& work) {
  run_pinned(cores, cores.empty() ? 0 : 1, work, {});
}

}  // namespace nnfleet
