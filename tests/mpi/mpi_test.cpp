// nnfleet under mpirun on this one machine (shared memory only, --oversubscribe: three ranks on
// two cores). A run on 3 ranks (and on 1) gives the results and weights of a single process;
// every model runs exactly once and the ranks share the work; a rank killed mid-run and a
// --resume complete with the same results, an unfinished model resuming from the checkpoint its
// rank shipped to rank 0; SIGTERM to mpirun stops every rank cleanly; each node reads the data
// once and its ranks share that copy; a bad plan is reported once, by rank 0.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "../fleet/fleet_test_util.h"
#include "io/keras_reader.h"
#include "platform/files.h"

extern char** environ;

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;
using Clock = std::chrono::steady_clock;

const std::string kTool = std::string(NNFLEET_BINARY_DIR) + "/nnfleet";

// Sanitizer builds train about ten times slower; they get proportionally less data where the
// tests need a run of a few seconds.
#ifdef NNFLEET_SANITIZED
constexpr int kSlowdown = 8;
#else
constexpr int kSlowdown = 1;
#endif

// mpirun as CI can run it: as root, more ranks than cores, shared memory between the ranks
// and nothing but loopback for mpirun's own traffic.
std::vector<std::string> mpirun(int ranks) {
  std::vector<std::string> args = {NNFLEET_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np",
                                   std::to_string(ranks)};
  for (const char* mca :
       {"btl=self,vader", "btl_vader_single_copy_mechanism=none", "oob_tcp_if_include=lo"}) {
    const std::string kv = mca;
    args.insert(args.end(), {"--mca", kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1)});
  }
#ifdef NNFLEET_SANITIZED
  // Open MPI itself leaks at exit; nnfleet's own leaks are checked by mpi_fleet_test.
  const char* asan = std::getenv("ASAN_OPTIONS");
  args.insert(args.end(),
              {"-x", std::string("ASAN_OPTIONS=") + (asan ? asan : "") + ":detect_leaks=0"});
#endif
  args.push_back(kTool);
  return args;
}

struct Proc {
  pid_t pid = -1;
  std::string out, err;
};

Proc start(std::vector<std::string> args, const std::string& dir, const std::string& tag) {
  Proc p;
  p.out = dir + "/" + tag + ".out";
  p.err = dir + "/" + tag + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, p.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  EXPECT_EQ(posix_spawn(&p.pid, argv[0], &fa, nullptr, argv.data(), environ), 0) << argv[0];
  posix_spawn_file_actions_destroy(&fa);
  return p;
}

// Exit code (128 + signal when killed); a run still going after `seconds` is ended and fails
// the test.
int wait_for(const Proc& p, int seconds = 120) {
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  int st = 0;
  while (waitpid(p.pid, &st, WNOHANG) == 0) {
    if (Clock::now() > until) {
      ADD_FAILURE() << "still running after " << seconds << " s; stderr:\n"
                    << testing_util::read_text(p.err);
      kill(p.pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(3));
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool eventually(const std::function<bool()>& what, int seconds = 60) {
  const auto until = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < until) {
    if (what()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::vector<Json> events(const std::string& out_file) {
  std::vector<Json> v;
  const std::string text = testing_util::read_text(out_file);
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    if (text[a] == '{') v.push_back(Json::parse(text.substr(a, b - a)));
  }
  return v;
}

// The trained weights of every model in the folder, as raw bytes.
std::map<std::string, std::string> weights(const std::string& out_dir) {
  std::map<std::string, std::string> w;
  Json r = Json::parse(read_file(out_dir + "/results.json"));
  for (auto& m : r["models"]) {
    const std::string name = m["name"].get<std::string>();
    const LoadedModel k = load_keras_model(out_dir + "/models/" + name + ".keras");
    w[name] = std::string(reinterpret_cast<const char*>(k.params.data()),
                          k.params.size() * sizeof(float));
  }
  return w;
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

// Six small CNNs, long enough (about a second each on blobs of 12,000 rows) to be interrupted.
std::string cnn_plan() {
  return R"(seed: 7
data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
  validation_split: 0.2
defaults:
  epochs: 20
  batch_size: 32
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
  optimizer: {Adam: {learning_rate: 0.001}}
models:
  - name: cnn-{filters}
    grid: {filters: [8, 12, 16, 20, 24, 32]}
    layers:
      - Conv2D: {filters: "{filters}", kernel_size: 3, activation: relu}
      - Flatten: {}
      - Dense: {units: 32, activation: relu}
      - Dense: {units: 3, activation: softmax}
)";
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
    std::vector<std::string> args = ranks > 0 ? mpirun(ranks) : std::vector<std::string>{kTool};
    for (const char* a : {"train", plan.c_str(), "--out", out.c_str()}) args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    last = start(args, dir.path, tag);
    return wait_for(last);
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

TEST_F(MpiTrain, EveryModelRunsExactlyOnceAndEveryRankWorks) {
  write_data(1500);
  const std::string plan = write_plan("plan.yaml", plan_text(3));
  ASSERT_EQ(train(3, plan, dir.path + "/out", {"--json"}), 0) << testing_util::read_text(last.err);
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
  write_data(12000 / kSlowdown);
  const std::string plan = write_plan("cnn.yaml", cnn_plan());
  ASSERT_EQ(train(0, plan, dir.path + "/single", {"--quiet"}), 0);
  const std::string out = dir.path + "/killed";
  std::vector<std::string> args = mpirun(3);
  // A checkpoint every epoch, so that one reaches rank 0 while the victim is still training.
  for (const char* a :
       {"train", plan.c_str(), "--out", out.c_str(), "--json", "--checkpoint-seconds", "0"})
    args.push_back(a);
  Proc p = start(args, dir.path, "first");
  // Kill rank 2 while it trains a model whose checkpoint has reached rank 0's folder.
  std::string victim;
  ASSERT_TRUE(eventually([&] {
    for (const Json& e : events(p.out))
      if (e["event"] == "start" && e["rank"] == 2) {
        const std::string m = e["model"].get<std::string>();
        if (file_exists(out + "/checkpoints/" + m + ".ckpt") &&
            testing_util::recorded_models(out).count(m) == 0) {
          victim = m;
          return true;
        }
      }
    return false;
  })) << "no checkpoint of a model on rank 2 reached rank 0";
  const pid_t pid = rank_pid(p.pid, 2);
  ASSERT_GT(pid, 0);
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
  // Long enough to outlast mpirun's second between SIGCONT and SIGTERM.
  write_data(12000 / kSlowdown);
  const std::string plan = write_plan("cnn.yaml", cnn_plan());
  ASSERT_EQ(train(0, plan, dir.path + "/single", {"--quiet"}), 0);
  const std::string out = dir.path + "/stopped";
  std::vector<std::string> args = mpirun(3);
  for (const char* a : {"train", plan.c_str(), "--out", out.c_str(), "--json"}) args.push_back(a);
  Proc p = start(args, dir.path, "first");
  ASSERT_TRUE(eventually([&] {
    for (const Json& e : events(p.out))
      if (e["event"] == "epoch") return true;
    return false;
  }));
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
  const int rows = 4096, cols = 4096;
  Array x = Array::zeros(DType::kF32, Shape{rows, cols});
  Array y = Array::zeros(DType::kI32, Shape{rows});
  Rng r(5);
  auto* xs = static_cast<float*>(x.mutable_data());
  auto* ys = static_cast<int32_t*>(y.mutable_data());
  for (int i = 0; i < rows; ++i) {
    ys[i] = static_cast<int32_t>(r.below(3));
    for (int c = 0; c < cols; ++c)
      xs[int64_t{i} * cols + c] = r.uniform() + (c % 3 == ys[i] ? 0.5f : 0.0f);
  }
  save_npy(dir.path + "/x.npy", x);
  save_npy(dir.path + "/y.npy", y);
  [[maybe_unused]] const double data_bytes = static_cast<double>(x.size_bytes() + y.size_bytes());
  x = Array();
  const std::string plan = write_plan("wide.yaml", R"(seed: 3
data:
  train: {x: x.npy, y: y.npy}
defaults:
  epochs: 1
  batch_size: 64
  loss: sparse_categorical_crossentropy
  optimizer: {SGD: {learning_rate: 0.01}}
models:
  - name: linear-{n}
    grid: {n: [1, 2, 3, 4, 5, 6]}
    layers:
      - Dense: {units: 3, activation: softmax}
)");
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
