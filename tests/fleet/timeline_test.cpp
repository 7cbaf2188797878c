// timeline.jsonl: a session per run (or resume), whole lines only, a torn line of a killed run cut
// off before the next session appends; the help board reports whom a helper helped.
#include "fleet/timeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "fleet/help_board.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

struct Folder {
  std::filesystem::path path;
  Folder() {
    path = std::filesystem::temp_directory_path() /
           ("nnfleet_timeline_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Folder() { std::filesystem::remove_all(path); }
  std::string file() const { return (path / "timeline.jsonl").string(); }
};

std::vector<Json> lines_of(const std::string& path) {
  std::vector<Json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) out.push_back(Json::parse(line));
  return out;
}

const Json kRanks = Json::parse(R"([{"rank":0,"host":"h","cores":[0,1]}])");

TEST(Timeline, RecordsJobsWithTheirStartAndHelpSpans) {
  Folder dir;
  {
    Timeline t(dir.path.string(), kRanks);
    const Timeline::Slot a{0, "h", 0, 0}, b{0, "h", 1, 1};
    t.job_started("m1", a, 100.0);
    t.job_started("m2", b, 100.5);
    t.job_ended("m2", b, 101.25, "done");
    t.helped("m1", b, 101.3, 102.0, 12);
    t.job_ended("m1", a, 102.5, "diverged");
    t.end_session();
  }
  const std::vector<Json> l = lines_of(dir.file());
  ASSERT_EQ(l.size(), 7u);
  EXPECT_EQ(l[0]["kind"], "session");
  EXPECT_EQ(l[0]["session"], 1);
  EXPECT_EQ(l[0]["ranks"], kRanks);
  EXPECT_EQ(l[3]["kind"], "job");
  EXPECT_EQ(l[3]["model"], "m2");
  EXPECT_DOUBLE_EQ(l[3]["start"].get<double>(), 100.5);
  EXPECT_DOUBLE_EQ(l[3]["end"].get<double>(), 101.25);
  EXPECT_EQ(l[3]["core"], 1);
  EXPECT_EQ(l[4]["kind"], "help");
  EXPECT_EQ(l[4]["pieces"], 12);
  EXPECT_EQ(l[5]["status"], "diverged");
  EXPECT_DOUBLE_EQ(l[5]["start"].get<double>(), 100.0);
  EXPECT_EQ(l[6]["kind"], "end");
}

TEST(Timeline, ResumeCutsATornLineAndStartsTheNextSession) {
  Folder dir;
  {
    Timeline t(dir.path.string(), kRanks);
    t.job_started("m1", {0, "h", 0, 0}, 10.0);
  }
  {
    std::ofstream f(dir.file(), std::ios::app);
    f << R"({"kind":"job","session":1,"mod)";  // a write cut short by kill -9
  }
  {
    Timeline t(dir.path.string(), kRanks);
    EXPECT_EQ(t.session(), 2);
    t.job_ended("m1", {0, "h", 0, 0}, 12.0, "done");
  }
  const std::vector<Json> l = lines_of(dir.file());  // every line parses
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[2]["kind"], "session");
  EXPECT_EQ(l[2]["session"], 2);
  EXPECT_EQ(l[3]["session"], 2);
  // Its start was in the other session: the end stands alone, zero length, and is still whole.
  EXPECT_DOUBLE_EQ(l[3]["start"].get<double>(), 12.0);
}

TEST(Timeline, AFolderThatCannotBeWrittenLeavesTheRunAlone) {
  Timeline t("/nonexistent/nnfleet/run", kRanks);
  t.job_started("m1", {0, "h", 0, 0}, 1.0);  // no throw, nothing written
  t.end_session();
  EXPECT_FALSE(file_exists("/nonexistent/nnfleet/run/timeline.jsonl"));
}

TEST(HelpBoard, ReportsTheOwnerOfThePiecesAHelperComputed) {
  HelpBoard board(1);
  const std::function<void(int)> piece = [](int) {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  };
  std::vector<std::pair<int, int>> spans;  // owner, pieces
  std::atomic<int> helped{0};
  std::thread helper([&] {
    board.help(nullptr, [&](int owner, HelpBoard::Clock::time_point b,
                            HelpBoard::Clock::time_point e, int pieces) {
      EXPECT_LE(b, e);
      spans.emplace_back(owner, pieces);
    });
  });
  const auto owner_thread = std::this_thread::get_id();
  const std::function<void(int)> counted = [&](int p) {
    piece(p);
    if (std::this_thread::get_id() != owner_thread) ++helped;
  };
  for (int step = 0; step < 100; ++step) board.run(4, counted, 7);
  board.job_done();
  helper.join();
  int pieces = 0;
  for (const auto& [owner, n] : spans) {
    EXPECT_EQ(owner, 7);
    pieces += n;
  }
  // The spans hold exactly the pieces the helper computed (the owner computed the rest).
  EXPECT_EQ(pieces, helped.load());
}

}  // namespace
}  // namespace nnfleet
