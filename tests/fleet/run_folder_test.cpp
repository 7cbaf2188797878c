// The output folder as --resume trusts it: a changed data file or plan is refused naming what
// changed; one run per folder; a full disk (fault injection: platform/files.h) stops the run at
// its first failed write and --resume trains what it could not write; records and model files
// are trusted only whole; room and writability are checked before any training.
#include "fleet/run_folder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "fleet/fleet.h"
#include "fleet/results.h"
#include "fleet_test_util.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;

FleetSummary train(const std::string& plan, const std::string& out, bool resume = false) {
  FleetOptions o;
  o.out_dir = out;
  o.workers = 1;  // one order of jobs, so a write budget runs out at the same place every time
  o.resume = resume;
  o.mode = Display::Mode::kQuiet;
  return run_fleet(load_plan(plan), o, testing_util::raw_io(Durability::kProcessCrash));
}

// The fault-injection knobs of platform/files.h for one scope.
struct Faults {
  ~Faults() {
    set_write_budget(-1);
    set_free_space(-1);
    set_unnamed_files(true);
  }
};

std::map<std::string, std::string> weights(const std::string& out) {
  std::map<std::string, std::string> w;
  for (const auto& e : std::filesystem::directory_iterator(out + "/models"))
    w[e.path().filename().string()] = read_file(e.path().string());
  return w;
}

size_t temporaries(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

// Both routes of write_file_atomic (an unnamed file given its name by linkat where the system
// has O_TMPFILE; a named temporary and rename(2) elsewhere) create and replace a file (also over
// a stale temporary), refuse a full disk keeping the old content, name a missing folder, and
// leave no temporary behind.
TEST(AtomicWrite, BothRoutesCreateReplaceAndKeepTheOldFileOnAFullDisk) {
  for (const bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed file" : "named temporary");
    Faults faults;
    set_unnamed_files(unnamed);
    testing_util::TempDir dir;
    const std::string f = dir.path + "/model.keras";
    for (const Durability d : {Durability::kProcessCrash, Durability::kSystemCrash}) {
      write_file_atomic(f, "first", d);
      EXPECT_EQ(read_file(f), "first");
      write_file_atomic(f, "second", d);
      EXPECT_EQ(read_file(f), "second");
    }
    // A temporary left by a crashed process of this one's id does not stop a replacement.
    testing_util::write_text(f + ".tmp." + std::to_string(::getpid()), "stale");
    write_file_atomic(f, "second", Durability::kProcessCrash);
    EXPECT_EQ(read_file(f), "second");
    set_write_budget(3);
    try {
      write_file_atomic(f, "third", Durability::kProcessCrash);
      ADD_FAILURE() << "a write past the budget succeeded";
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr("failed to write file '" + f + "': No space left on device"));
    }
    set_write_budget(-1);
    EXPECT_EQ(read_file(f), "second");
    const std::string lost = dir.path + "/none/model.keras";
    try {
      write_file_atomic(lost, "x", Durability::kProcessCrash);
      ADD_FAILURE() << "a write into a missing folder succeeded";
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr("failed to write file '" + lost + "': No such file or directory"));
    }
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path),
                            std::filesystem::directory_iterator()),
              1);
    EXPECT_EQ(temporaries(dir.path), 0u);
  }
}

class ResumeTrust : public testing_util::BlobsPlanTest {
 protected:
  std::string out() const { return dir.path + "/out"; }
  // Everything that must equal an uninterrupted run's: results, histories, weights.
  void expect_like_full_run(const std::string& folder) {
    if (full_.empty()) {
      train(plan, dir.path + "/full");
      full_ = testing_util::comparable(dir.path + "/full");
    }
    EXPECT_EQ(testing_util::comparable(folder), full_);
    EXPECT_TRUE(weights(folder) == weights(dir.path + "/full"));
  }
  std::string full_;
};

TEST_F(ResumeTrust, RefusesAChangedDataFileNamingIt) {
  train(plan, out());
  testing_util::write_blobs(dir.path, "train", 1200, 99);  // same path and shape, new content
  try {
    train(plan, out(), true);
    FAIL() << "resumed on changed data";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("failed to resume '" + out() + "': data file '" + dir.path +
                                    "/train_x.npy' (train x) changed since the run began"));
    EXPECT_THAT(e.what(), HasSubstr("bytes with XXH3 "));
  }
  testing_util::write_blobs(dir.path, "train", 1200, 1);  // the data the run began with
  for (const auto& r : train(plan, out(), true).results) EXPECT_EQ(r.status, JobStatus::kDone);
}

TEST_F(ResumeTrust, SaysWhereThePlanDiffers) {
  train(plan, out());
  std::string text = testing_util::small_plan();
  text.replace(text.find("grid: {units: [8, 32]}"), 22, "grid: {units: [8, 33]}");
  testing_util::write_text(plan, text);
  try {
    train(plan, out(), true);
    FAIL() << "resumed with a changed plan";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(),
                ::testing::MatchesRegex(
                    ".*the plan differs from the one that run began with: line [0-9]+ of "
                    "its plan.yaml was `.*mlp-32.*`, the plan now gives `.*mlp-33.*`; .*"));
  }
}

TEST_F(ResumeTrust, ASecondRunOnTheFolderFailsAtOnce) {
  train(plan, out());
  FileLock other;  // what a run still using the folder holds
  ASSERT_TRUE(other.try_lock(out() + "/lock"));
  try {
    train(plan, out(), true);
    FAIL() << "two runs in one folder";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("another nnfleet run (process " + std::to_string(::getpid()) +
                                    ") is using it; expected one run per output folder"));
  }
}

// A fresh run that finds the folder taken (by a concurrent run that won the race, or anyone)
// removes its temporary <out>.tmp.<pid>.
TEST_F(ResumeTrust, AFreshRunThatFindsTheFolderTakenLeavesNothingBehind) {
  make_dirs(out());
  testing_util::write_text(out() + "/plan.yaml", "another run's\n");
  EXPECT_THROW(train(plan, out()), UsageError);
  EXPECT_EQ(temporaries(dir.path), 0u);
  EXPECT_EQ(testing_util::read_text(out() + "/plan.yaml"), "another run's\n");
}

// Disk full at every point of a run in turn (after 0, 4 KB, 8 KB, ... written): the run stops at
// its first failed write, never records a model it could not write, and --resume, with space
// again, ends exactly as an uninterrupted run.
TEST_F(ResumeTrust, AFullDiskAnywhereStopsTheRunAndResumeFinishesIt) {
  expect_like_full_run(dir.path + "/full");
  int stopped_early = 0, failed_at_end = 0;
  for (int64_t budget = 0;; budget += 4096) {
    const std::string o = dir.path + "/b" + std::to_string(budget);
    FleetSummary s;
    bool threw = false;
    {
      Faults f;
      set_write_budget(budget);
      try {
        s = train(plan, o);
      } catch (const FileError& e) {
        threw = true;  // the folder itself, or results.json at the very end
        EXPECT_THAT(e.what(), HasSubstr("No space left on device"));
      }
    }
    if (!threw && s.write_error.empty()) break;  // enough room for everything
    ASSERT_LT(budget, 1 << 20) << "the run never fitted";
    if (!file_exists(o + "/plan.yaml")) {
      EXPECT_FALSE(file_exists(o)) << "half a folder was left";
      EXPECT_EQ(temporaries(dir.path), 0u);
      continue;
    }
    if (threw) ++failed_at_end;
    if (!s.write_error.empty()) {
      EXPECT_THAT(s.write_error, HasSubstr("No space left on device"));
      const std::set<std::string> recorded = testing_util::recorded_models(o);
      for (const ModelResult& r : s.results) {
        EXPECT_EQ(recorded.count(r.name), r.status == JobStatus::kDone ? 1u : 0u) << r.name;
        if (r.status == JobStatus::kFailed) {  // by the folder (not final: --resume trains it)
          EXPECT_THAT(r.message, HasSubstr("No space left on device")) << r.name;
        }
        stopped_early += r.status == JobStatus::kCancelled;
      }
    }
    const FleetSummary resumed = train(plan, o, true);
    for (const ModelResult& r : resumed.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
    expect_like_full_run(o);
  }
  EXPECT_GT(stopped_early, 0) << "no run stopped before its last model";
  EXPECT_GT(failed_at_end, 0) << "no budget ran out at the results";
}

TEST_F(ResumeTrust, NotEnoughRoomIsReportedBeforeTraining) {
  {
    Faults f;
    set_free_space(10000);
    try {
      train(plan, out());
      FAIL() << "started without room";
    } catch (const FileError& e) {
      EXPECT_THAT(e.what(), HasSubstr("failed to start the run in '" + out() +
                                      "': not enough free space for the files of 4 model(s); "
                                      "expected about "));
      EXPECT_THAT(e.what(), HasSubstr(", got 0.0 MB free"));
    }
  }
  EXPECT_FALSE(file_exists(out()));
  // A resumed run whose folder cannot be written stops before training, too.
  testing_util::write_text(plan, testing_util::small_plan());
  std::atomic<bool> stop{true};
  FleetOptions o;
  o.out_dir = out();
  o.mode = Display::Mode::kQuiet;
  o.stop = &stop;  // nothing trains: the folder with no finished model
  run_fleet(load_plan(plan), o, testing_util::raw_io(Durability::kProcessCrash));
  Faults f;
  set_write_budget(0);
  try {
    train(plan, out(), true);
    FAIL() << "started on an unwritable folder";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("failed to start the run in '" + out() +
                                    "': its folder cannot be written (failed to write file"));
    EXPECT_THAT(e.what(), HasSubstr("No space left on device"));
  }
}

// A checkpoint that cannot be read fails its model without a final record, so that "delete it
// to restart" holds: --resume then trains the model from scratch.
TEST_F(ResumeTrust, ACorruptCheckpointIsRetriedOnceDeleted) {
  train(plan, out());
  // As if the run had been killed while mlp-8 trained: no record, a (damaged) checkpoint.
  std::ifstream in(out() + "/jobs.log");
  std::string kept;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"name\":\"mlp-8\"") == std::string::npos) kept += line + "\n";
  in.close();
  testing_util::write_text(out() + "/jobs.log", kept);
  const std::string ckpt = out() + "/checkpoints/mlp-8.ckpt";
  testing_util::write_text(ckpt, "NNFCKPT1 torn");
  for (int attempt = 0; attempt < 2; ++attempt) {
    const FleetSummary s = train(plan, out(), true);
    EXPECT_EQ(s.results[0].status, JobStatus::kFailed);
    EXPECT_THAT(s.results[0].message, HasSubstr("failed to read checkpoint '" + ckpt + "'"));
    EXPECT_THAT(s.results[0].message, HasSubstr("delete it to restart this model from scratch"));
    EXPECT_TRUE(s.write_error.empty());
    EXPECT_TRUE(file_exists(ckpt));
  }
  std::filesystem::remove(ckpt);
  EXPECT_EQ(train(plan, out(), true).results[0].status, JobStatus::kDone);
  expect_like_full_run(out());
}

// After a power loss, a record may have reached the disk while its model file did not (no fsync
// per model), and a crash can tear the last record: neither is trusted.
TEST_F(ResumeTrust, ADamagedModelFileOrTornRecordIsTrainedAgain) {
  train(plan, out());
  const std::string m = out() + "/models/mlp-32.bin";
  const std::string w = read_file(m);
  testing_util::write_text(m, w.substr(0, w.size() / 2));
  std::ofstream(out() + "/jobs.log", std::ios::app) << "2000 0123456789abcdef {\"name\":\"cnn\"";
  const FleetSummary s = train(plan, out(), true);
  for (const ModelResult& r : s.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
  expect_like_full_run(out());
  EXPECT_THAT(testing_util::read_text(out() + "/run.log"),
              HasSubstr("model 'mlp-32' is trained again: its model file '" + m +
                        "' is missing or incomplete"));
  const std::string log = read_file(out() + "/jobs.log");
  EXPECT_EQ(log.back(), '\n');  // the torn record was cut off
  EXPECT_EQ(log.find("0123456789abcdef"), std::string::npos);
}

// jobs.log records of the full form runs wrote before issue 36 (job_result_to_json: "message",
// "metric_order", history rows as objects, ...) are trusted by --resume as the compact ones: no
// model is trained again, and the outputs are those of a run in one go.
TEST_F(ResumeTrust, OlderFullFormRecordsResumeWithoutTraining) {
  train(plan, out());
  std::string old_log;
  std::ifstream in(out() + "/jobs.log", std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    const std::string text = line.substr(line.find(' ', line.find(' ') + 1) + 1);
    std::string file, xxh3;
    Json j = job_result_to_json(job_result_from_record(text, &file, &xxh3));
    if (!file.empty()) {
      j["model_file"] = file;
      j["model_xxh3"] = xxh3;
    }
    ASSERT_TRUE(j.contains("metric_order") && j.contains("message"));
    const std::string json = j.dump();
    old_log += std::to_string(json.size()) + " " + hex64(hash_bytes(json)) + " " + json + "\n";
  }
  in.close();
  testing_util::write_text(out() + "/jobs.log", old_log);
  const auto before = weights(out());
  const FleetSummary s = train(plan, out(), true);
  for (const ModelResult& r : s.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
  EXPECT_EQ(read_file(out() + "/jobs.log"), old_log);  // nothing trained again
  EXPECT_TRUE(weights(out()) == before);
  expect_like_full_run(out());
}

TEST(PlanDifference, NamesTheFirstDifferingLine) {
  EXPECT_EQ(fleet_detail::first_difference("a: 1\nb: 2\nc: 3\n", "a: 1\nb: 5\nc: 3\n"),
            "line 2 of its plan.yaml was `b: 2`, the plan now gives `b: 5`");
  EXPECT_EQ(fleet_detail::first_difference("a: 1\n", "a: 1\nb: 2\n"),
            "line 2 of its plan.yaml was nothing (the text ends before it), the plan now gives "
            "`b: 2`");
}

}  // namespace
}  // namespace nnfleet
