// for_each_block: every block once, on up to the threads asked for, the lowest failure rethrown.
// Pinned workers: every worker once, on a thread of its own or (worker 0) the caller's.
#include "platform/parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace nnfleet {
namespace {

TEST(ForEachBlock, RunsEveryBlockOnceOnAnyNumberOfThreads) {
  for (int threads : {-1, 0, 1, 2, 5, 300}) {
    std::vector<std::atomic<int>> runs(200);
    std::atomic<int> highest_thread{0};
    for_each_block(runs.size(), threads, [&](int t, size_t b) {
      ++runs[b];
      int h = highest_thread.load();
      while (t > h && !highest_thread.compare_exchange_weak(h, t)) {
      }
    });
    for (size_t b = 0; b < runs.size(); ++b) EXPECT_EQ(runs[b].load(), 1) << b << ", " << threads;
    EXPECT_LT(highest_thread.load(), std::max(threads, 1)) << threads;
  }
}

TEST(ForEachBlock, OneBlockRunsOnTheCallersThread) {
  std::thread::id ran_on;
  int thread = -1;
  for_each_block(1, 8, [&](int t, size_t) {
    ran_on = std::this_thread::get_id();
    thread = t;
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(thread, 0);
  for_each_block(0, 8, [&](int, size_t) { ADD_FAILURE() << "no block to run"; });
}

// Blocks are handed out in order, so every block below the first that threw was started, and
// finished, before it; no block runs twice; the lowest failure is the one rethrown.
TEST(ForEachBlock, TheLowestBlockThatThrewIsRethrownAfterTheBlocksBeforeIt) {
  for (int threads : {1, 3}) {
    std::vector<std::atomic<int>> runs(100);
    try {
      for_each_block(runs.size(), threads, [&](int, size_t b) {
        ++runs[b];
        if (b == 30 || b == 70) throw std::runtime_error("block " + std::to_string(b));
      });
      ADD_FAILURE() << "expected block 30's exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "block 30");
    }
    for (size_t b = 0; b < runs.size(); ++b) {
      EXPECT_LE(runs[b].load(), 1) << b;
      if (b <= 30) {
        EXPECT_EQ(runs[b].load(), 1) << b << " on " << threads << " thread(s)";
      }
    }
  }
}

TEST(PinnedWorkers, RunEachWorkerOnceBesideTheCallersWork) {
  std::vector<std::atomic<int>> runs(3);
  std::vector<std::thread::id> ids(3);
  int meanwhile = 0;
  run_pinned_workers(
      {-1, -1, -1},
      [&](int w) {
        ++runs[static_cast<size_t>(w)];
        ids[static_cast<size_t>(w)] = std::this_thread::get_id();
      },
      [&] { ++meanwhile; });
  EXPECT_EQ(meanwhile, 1);
  for (size_t w = 0; w < runs.size(); ++w) {
    EXPECT_EQ(runs[w].load(), 1) << w;
    EXPECT_NE(ids[w], std::this_thread::get_id()) << w;
  }
}

TEST(PinnedWorkers, HereRunsWorkerZeroOnTheCallingThread) {
  std::vector<std::thread::id> ids(3);
  run_pinned_workers_here({-1, -1, -1},
                          [&](int w) { ids[static_cast<size_t>(w)] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[1], std::this_thread::get_id());
  EXPECT_NE(ids[2], std::this_thread::get_id());
}

}  // namespace
}  // namespace nnfleet
