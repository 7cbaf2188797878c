// HelpBoard: every posted piece runs exactly once per step whoever claims it, the owner returns
// only when all of its pieces are done, idle helpers leave when the last split job ends or a stop
// is requested.
#include "fleet/help_board.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace nnfleet {
namespace {

TEST(HelpBoard, EveryPieceRunsOnceAndTheOwnerWaitsForAll) {
  constexpr int kPieces = 4, kSteps = 200;
  HelpBoard board(1);
  std::vector<std::atomic<int>> runs(kPieces);
  std::atomic<int> helper_pieces{0};
  const auto owner_thread = std::this_thread::get_id();
  const std::function<void(int)> piece = [&](int p) {
    if (std::this_thread::get_id() != owner_thread) ++helper_pieces;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ++runs[static_cast<size_t>(p)];
  };
  double helped_seconds = -1;
  std::thread helper([&] { helped_seconds = board.help(nullptr); });
  for (int step = 1; step <= kSteps; ++step) {
    board.run(kPieces, piece);
    for (int p = 0; p < kPieces; ++p) ASSERT_EQ(runs[static_cast<size_t>(p)].load(), step);
  }
  board.job_done();
  helper.join();  // leaves once no split job is left
  // The helper reports time exactly when it computed pieces.
  EXPECT_EQ(helper_pieces.load() > 0, helped_seconds > 0.0);
}

TEST(HelpBoard, HelpersLeaveOnStopWhileSplitJobsAreStillExpected) {
  HelpBoard board(3);  // jobs that will never start (the run was stopped)
  std::atomic<bool> stop{false};
  double helped_seconds = -1;
  std::thread helper([&] { helped_seconds = board.help(&stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop = true;
  helper.join();  // a helper that missed the stop would hang here
  EXPECT_EQ(helped_seconds, 0.0);
}

TEST(HelpBoard, WithoutHelpersTheOwnerRunsEveryPieceInOrder) {
  HelpBoard board(0);
  std::vector<int> order;
  const std::function<void(int)> piece = [&](int p) { order.push_back(p); };
  board.run(5, piece);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(board.help(nullptr), 0.0);  // nothing to help with: returns at once
}

}  // namespace
}  // namespace nnfleet
