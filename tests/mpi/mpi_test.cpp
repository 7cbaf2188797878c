// nnfleet under mpirun on this one machine (shared memory only, --oversubscribe: three ranks on
// two cores). A run on 3 ranks (and on 1) gives the results and weights of a single process;
// every model runs exactly once and the ranks share the work; a rank killed mid-run and a
// --resume complete with the same results, an unfinished model resuming from the checkpoint its
// rank shipped to rank 0; SIGTERM to mpirun stops every rank cleanly; each node reads the data
// once and its ranks share that copy; a bad plan is reported once, by rank 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "mpi_test_util.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;
using namespace mpi_test_util;

// mpirun as CI can run it on one machine: more ranks than cores, shared memory between the ranks
// and nothing but loopback for mpirun's own traffic.
// `options`: more of mpirun's own (hold_options(), say).
std::vector<std::string> mpirun(int ranks, std::vector<std::string> options = {}) {
  options.insert(options.begin(), {"--oversubscribe", "-np", std::to_string(ranks)});
  return mpi_test_util::mpirun(
      options, {"btl=self,vader", "btl_vader_single_copy_mechanism=none", "oob_tcp_if_include=lo"});
}

// The process of `rank` among mpirun's children, or -1.
pid_t rank_pid(pid_t mpirun_pid, int rank) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = testing_util::read_text(e.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2 || ppid != mpirun_pid)
      continue;
    const std::string env = testing_util::read_text(e.path().string() + "/environ");
    const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
    for (size_t a = 0, b; a < env.size(); a = b + 1) {
      b = env.find('\0', a);
      if (env.compare(a, b - a, want) == 0) return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// Six models of different sizes on the blobs data.
std::string plan_text(int epochs) {
  std::string text = testing_util::small_plan(R"(  - name: wide-{units}
    grid: {units: [16, 64]}
    layers:
      - Flatten: {}
      - Dense: {units: "{units}", activation: tanh}
      - Dense: {units: 3, activation: softmax}
)");
  text.replace(text.find("epochs: 3"), 9, "epochs: " + std::to_string(epochs));
  return text;
}

class MpiTrain : public ::testing::Test {
 protected:
  void write_data(int train_rows) {
    testing_util::write_blobs(dir.path, "train", train_rows, 1);
    testing_util::write_blobs(dir.path, "test", 300, 2);
  }
  std::string write_plan(const std::string& name, const std::string& text) {
    const std::string p = dir.path + "/" + name;
    testing_util::write_text(p, text);
    return p;
  }
  // Runs the tool (under mpirun when ranks > 0) and returns its exit code.
  int train(int ranks, const std::string& plan, const std::string& out,
            std::vector<std::string> extra = {}, const std::string& tag = "run") {
    last = start_train(ranks, plan, out, extra, tag);
    return wait_for(last);
  }
  // The same, started: under mpirun with `mpirun_options` when ranks > 0.
  Proc start_train(int ranks, const std::string& plan, const std::string& out,
                   const std::vector<std::string>& extra, const std::string& tag,
                   const std::vector<std::string>& mpirun_options = {}) {
    std::vector<std::string> args =
        ranks > 0 ? mpirun(ranks, mpirun_options) : std::vector<std::string>{kTool};
    for (const char* a : {"train", plan.c_str(), "--out", out.c_str()}) args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    return start(args, dir.path, tag);
  }
  // A folder for the test holds of one run.
  std::string hold_folder(const std::string& name) {
    const std::string f = dir.path + "/" + name;
    std::filesystem::create_directories(f);
    return f;
  }
  TempDir dir;
  Proc last;
};

TEST_F(MpiTrain, ThreeRanksAndOneGiveTheResultsAndWeightsOfOneProcess) {
  write_data(1500);
  const std::string plan = write_plan("plan.yaml", plan_text(3));
  ASSERT_EQ(train(0, plan, dir.path + "/single", {"--quiet"}), 0);
  const std::string expected = testing_util::comparable(dir.path + "/single");
  const auto expected_weights = weights(dir.path + "/single");
  ASSERT_EQ(expected_weights.size(), 6u);
  for (int ranks : {3, 1}) {
    const std::string out = dir.path + "/mpi" + std::to_string(ranks);
    ASSERT_EQ(train(ranks, plan, out, {"--quiet"}), 0) << testing_util::read_text(last.err);
    EXPECT_EQ(testing_util::comparable(out), expected) << ranks << " rank(s)";
    EXPECT_TRUE(weights(out) == expected_weights) << "weights differ with " << ranks << " rank(s)";
    EXPECT_EQ(read_file(out + "/plan.yaml"), read_file(dir.path + "/single/plan.yaml"));
    // Nothing temporary is left in the output folder.
    for (const auto& e : std::filesystem::recursive_directory_iterator(out))
      EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

// A search (issue 33) under mpirun -np 3: the same trials, decisions, metrics and files as one
// process (trials.csv and results.json's rungs included).
TEST_F(MpiTrain, ASearchOnThreeRanksIsTheStudyOfOneProcess) {
  write_data(1500);
  const std::string plan = write_plan("search.yaml", testing_util::search_plan());
  ASSERT_EQ(train(0, plan, dir.path + "/single", {"--quiet"}), 0)
      << testing_util::read_text(last.err);
  ASSERT_EQ(train(3, plan, dir.path + "/mpi3", {"--quiet"}), 0)
      << testing_util::read_text(last.err);
  auto study = [](const std::string& out) {
    std::string s = testing_util::comparable(out);
    for (const auto& m : Json::parse(read_file(out + "/results.json"))["models"])
      s += m["rungs"].dump() + m["parameters"].dump() + "\n";
    return s + read_file(out + "/trials.csv");
  };
  EXPECT_EQ(study(dir.path + "/mpi3"), study(dir.path + "/single"));
  EXPECT_THAT(read_file(dir.path + "/mpi3/trials.csv"), HasSubstr(",pruned,"));
}

TEST_F(MpiTrain, EveryModelRunsExactlyOnceAndEveryRankWorks) {
  write_data(1500);
  const std::string plan = write_plan("plan.yaml", plan_text(3));
  // Every rank is held after its first epoch, until two ranks hold a job: rank 0 cannot hand out
  // every model before the others start, however slowly they start on a loaded machine.
  const std::string hold = hold_folder("hold");
  last = start_train(3, plan, dir.path + "/out", {"--json"}, "run", hold_options(hold));
  ASSERT_TRUE(eventually([&] { return held(hold).size() >= 2; }))
      << testing_util::read_text(last.err);
  release_holds(hold);
  ASSERT_EQ(wait_for(last), 0) << testing_util::read_text(last.err);
  std::map<std::string, int> starts, ends;
  std::set<int> ranks_used;
  int rank_events = 0;
  Json run_end;
  for (const Json& e : events(last.out)) {
    if (e["event"] == "start") {
      ++starts[e["model"].get<std::string>()];
      ranks_used.insert(e["rank"].get<int>());
    }
    if (e["event"] == "end") ++ends[e["model"].get<std::string>()];
    if (e["event"] == "rank") ++rank_events;
    if (e["event"] == "run_end") run_end = e;
  }
  ASSERT_EQ(starts.size(), 6u);
  for (const auto& [model, n] : starts) EXPECT_EQ(n, 1) << model;
  for (const auto& [model, n] : ends) EXPECT_EQ(n, 1) << model;
  EXPECT_EQ(ends.size(), 6u);
  EXPECT_EQ(rank_events, 3);
  EXPECT_GE(ranks_used.size(), 2u) << "the jobs were not spread over the ranks";
  ASSERT_TRUE(run_end.contains("ranks"));
  int jobs = 0;
  for (const Json& r : run_end["ranks"]) jobs += r["jobs"].get<int>();
  EXPECT_EQ(jobs, 6);
  EXPECT_GT(run_end["round_trip_us"]["count"].get<int>(), 0);
  EXPECT_GT(run_end["round_trip_us"]["median"].get<double>(), 0.0);
}

TEST_F(MpiTrain, KilledRankThenResumeMatchesAnUninterruptedRun) {
  write_data(3000 / kSlowdown);
  const std::string plan = write_plan("cnn.yaml", cnn_plan(6));
  ASSERT_EQ(train(0, plan, dir.path + "/single", {"--quiet"}), 0);
  const std::string out = dir.path + "/killed";
  // Every rank is held after its first epoch, so that rank 0's worker cannot take every model
  // before rank 2 starts one. Once rank 2 holds one, they go on, and rank 2 is held again when it
  // has handed that model's checkpoint (one every epoch) to its sender: it is surely mid-model
  // when it is killed, its checkpoint on the way to rank 0, however fast the cores.
  const std::string hold = hold_folder("hold");
  Proc p = start_train(3, plan, out, {"--json", "--checkpoint-seconds", "0"}, "first",
                       hold_options(hold, "epoch_end,checkpoint_shipped"));
  pid_t pid = -1;
  ASSERT_TRUE(eventually([&] {
    pid = rank_pid(p.pid, 2);
    return pid > 0 && held(hold).count(pid) > 0;
  })) << "rank 2 got no model\n"
      << testing_util::read_text(p.err);
  release_holds(hold);
  std::string victim;
  ASSERT_TRUE(eventually([&] {
    const auto h = held(hold, "checkpoint_shipped");
    if (h.count(pid) == 0) return false;
    victim = h.at(pid);
    return has_checkpoint(out, victim);
  })) << "rank 2's checkpoint did not reach rank 0\n"
      << testing_util::read_text(p.err);
  kill(pid, SIGKILL);
  EXPECT_NE(wait_for(p), 0);
  const std::set<std::string> finished = testing_util::recorded_models(out);
  ASSERT_EQ(finished.count(victim), 0u) << "the victim finished first";

  ASSERT_EQ(train(3, plan, out, {"--resume", "--json"}, "resumed"), 0)
      << testing_util::read_text(last.err);
  EXPECT_EQ(testing_util::comparable(out), testing_util::comparable(dir.path + "/single"));
  EXPECT_TRUE(weights(out) == weights(dir.path + "/single"));
  // Finished models are not trained again; the victim continues from its shipped checkpoint.
  int first_epoch_of_victim = 0;
  for (const Json& e : events(last.out)) {
    if (e["event"] == "start") {
      EXPECT_EQ(finished.count(e["model"].get<std::string>()), 0u) << e;
    }
    if (e["event"] == "epoch" && e["model"] == victim && first_epoch_of_victim == 0)
      first_epoch_of_victim = e["epoch"].get<int>();
  }
  EXPECT_GE(first_epoch_of_victim, 2) << victim << " started over instead of resuming";
}

TEST_F(MpiTrain, SigtermToMpirunStopsEveryRankAndResumeCompletes) {
  write_data(3000 / kSlowdown);
  const std::string plan = write_plan("cnn.yaml", cnn_plan(6));
  ASSERT_EQ(train(0, plan, dir.path + "/single", {"--quiet"}), 0);
  const std::string out = dir.path + "/stopped";
  // Every rank is held after its first epoch and never released: the run cannot end before the
  // signal (it once had to be long enough to outlast mpirun's second between SIGCONT and SIGTERM).
  const std::string hold = hold_folder("hold");
  Proc p = start_train(3, plan, out, {"--json"}, "first", hold_options(hold));
  ASSERT_TRUE(eventually([&] { return !held(hold).empty(); })) << testing_util::read_text(p.err);
  kill(p.pid, SIGTERM);  // mpirun: SIGCONT to the ranks, SIGTERM a second later, then SIGKILL
  EXPECT_NE(wait_for(p), 0);
  // Rank 0 wrote the results so far and said how to continue.
  ASSERT_TRUE(file_exists(out + "/results.json")) << testing_util::read_text(p.err);
  const Json r = Json::parse(read_file(out + "/results.json"));
  int cancelled = 0;
  for (const Json& m : r["models"]) cancelled += m["status"] == "cancelled";
  ASSERT_GT(cancelled, 0) << "the run had finished before the signal";
  EXPECT_THAT(testing_util::read_text(p.err), HasSubstr("--resume"));
  ASSERT_EQ(train(3, plan, out, {"--resume", "--quiet"}, "resumed"), 0)
      << testing_util::read_text(last.err);
  EXPECT_EQ(testing_util::comparable(out), testing_util::comparable(dir.path + "/single"));
  EXPECT_TRUE(weights(out) == weights(dir.path + "/single"));
}

TEST_F(MpiTrain, EachNodeReadsTheDataOnceAndItsRanksShareIt) {
  // 64 MiB of features, far more than anything else a rank holds.
  [[maybe_unused]] double data_bytes = 0;
  const std::string plan =
      write_plan("wide.yaml", write_wide_data(dir.path, 4096, 4096, data_bytes));
  ASSERT_EQ(train(3, plan, dir.path + "/out", {"--json"}), 0) << testing_util::read_text(last.err);
  Json run_end;
  for (const Json& e : events(last.out))
    if (e["event"] == "run_end") run_end = e;
  ASSERT_EQ(run_end["ranks"].size(), 3u);
  int loaded = 0;
  for (const Json& rank : run_end["ranks"]) {
    loaded += rank["loaded_data"].get<bool>();
#ifndef NNFLEET_SANITIZED  // (ASan keeps freed memory resident in its quarantine)
    // The data is in the node's shared window, not in any rank's own memory...
    EXPECT_LT(rank["rss_private_bytes"].get<double>(), 0.5 * data_bytes) << rank;
    // ...which every rank that trained has read.
    if (rank["jobs"].get<int>() > 0) {
      EXPECT_GT(rank["rss_shared_bytes"].get<double>(), 0.9 * data_bytes) << rank;
    }
#endif
  }
  EXPECT_EQ(loaded, 1);
}

TEST_F(MpiTrain, ABadPlanIsReportedOnceByRankZero) {
  write_data(300);
  std::string text = plan_text(1);
  text.replace(text.find("units: 3, activation: softmax"), 8, "units: 2");
  const std::string plan = write_plan("bad.yaml", text);
  EXPECT_EQ(train(3, plan, dir.path + "/out"), 1);
  const std::string err = testing_util::read_text(last.err);
  const std::string what = "labels out of range for sparse_categorical_crossentropy";
  EXPECT_THAT(err, HasSubstr(what));
  EXPECT_EQ(err.find("failed to validate plan"), err.rfind("failed to validate plan")) << err;
  EXPECT_FALSE(file_exists(dir.path + "/out"));
}

}  // namespace
}  // namespace nnfleet
