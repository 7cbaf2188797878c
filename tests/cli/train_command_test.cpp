// `nnfleet train`'s advice after a failed write names the cause the error gives: a full disk or
// a file-size limit (free space), a refused write (permissions), or an output folder that is
// gone (start again: --resume has nothing to continue).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "../fleet/fleet_test_util.h"
#include "commands.h"
#include "leaderboard.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string failed_write(const std::string& path, int e) {
  return "failed to write file '" + path + "': " + std::strerror(e);
}

TEST(TrainAdvice, AFailedWriteGetsTheHintOfItsCause) {
  testing_util::TempDir dir;
  const std::string out = dir.path + "/run", model = out + "/models/m.keras";
  std::filesystem::create_directories(out + "/models");
  for (const int e : {ENOSPC, EDQUOT, EFBIG}) {
    const std::string h = cli::write_failure_hint("plan.yaml", out, failed_write(model, e));
    EXPECT_THAT(h, HasSubstr("hint: free some space, then continue with: nnfleet train plan.yaml "
                             "--out " +
                             out + " --resume"))
        << std::strerror(e);
  }
  for (const int e : {EACCES, EROFS}) {
    const std::string h = cli::write_failure_hint("plan.yaml", out, failed_write(model, e));
    EXPECT_THAT(h, HasSubstr("hint: fix the folder's permissions"));
    EXPECT_THAT(h, Not(HasSubstr("space")));
  }
  // The folder deleted while the run wrote it: the write fails with ENOENT.
  std::filesystem::remove_all(out);
  const std::string gone = cli::write_failure_hint("plan.yaml", out, failed_write(model, ENOENT));
  EXPECT_THAT(gone, HasSubstr("was deleted or moved while the run wrote it; start the run again: "
                              "nnfleet train plan.yaml --out " +
                              out));
  EXPECT_THAT(gone, Not(HasSubstr("space")));
  EXPECT_THAT(gone, Not(HasSubstr("--resume")));
  // A reason the folder does not explain: no guess at the cause.
  std::filesystem::create_directories(out);
  const std::string other = cli::write_failure_hint("plan.yaml", out, failed_write(model, EIO));
  EXPECT_THAT(other, Not(HasSubstr("space")));
  EXPECT_THAT(other, HasSubstr("--resume"));
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet::cli {
namespace {

api::ModelResult model(const std::string& name, api::Status status, double accuracy) {
  api::ModelResult m;
  m.name = name;
  m.status = status;
  m.epochs = 2;
  m.metrics = {{"val_accuracy", accuracy}};
  return m;
}

// The exit codes main() documents: 0 all done, 3 a model failed or none trained to the end, 130
// interrupted, 1 a failed write; a failed write outranks an interruption.
TEST(TrainExitCode, FollowsTheDocumentedOrder) {
  api::RunResult r;
  r.models = {model("a", api::Status::kDone, 0.9), model("b", api::Status::kDiverged, 0.1)};
  EXPECT_EQ(exit_code(r), 0);
  r.models[1].status = api::Status::kFailed;
  EXPECT_EQ(exit_code(r), 3);
  r.models = {model("a", api::Status::kDiverged, 0.5)};
  EXPECT_TRUE(none_done(r));
  EXPECT_EQ(exit_code(r), 3);
  r.interrupted = true;
  EXPECT_FALSE(none_done(r));
  EXPECT_EQ(exit_code(r), 130);
  r.write_error = "failed to write file 'x': No space left on device";
  EXPECT_EQ(exit_code(r), 1);
}

// The table follows RunResult::ranking and stops at `top`; a model without the metric shows "-".
TEST(TrainLeaderboard, ListsTheRankingUpToTop) {
  api::RunResult r;
  r.rank_by = "val_accuracy";
  r.models = {model("low", api::Status::kDone, 0.25), model("high", api::Status::kDone, 0.75),
              model("none", api::Status::kFailed, 0)};
  r.models[2].metrics.clear();
  r.ranking = {1, 0, 2};
  const std::string all = leaderboard_text(r, 20);
  EXPECT_LT(all.find("high"), all.find("low"));
  EXPECT_NE(all.find("0.75"), std::string::npos);
  EXPECT_NE(all.find("failed"), std::string::npos);
  EXPECT_NE(all.find(" - "), std::string::npos);
  const std::string top1 = leaderboard_text(r, 1);
  EXPECT_NE(top1.find("high"), std::string::npos);
  EXPECT_EQ(top1.find("low"), std::string::npos);
}

}  // namespace
}  // namespace nnfleet::cli
