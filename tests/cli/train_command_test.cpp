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
