// nnfleet under mpirun across two hosts, made on this machine by two_hosts.sh: "alpha" and "beta"
// each have their own network, hostname and mount namespaces (a private /dev/shm), joined by a
// veth link; mpirun runs on alpha and reaches beta through a launch agent in place of ssh; the
// ranks talk over TCP on that link only (btl tcp between hosts, oob tcp for mpirun's daemons).
// Two ranks per host: the results and weights equal a single process's; each host reads the
// data once into its own shared window; killing every process on beta mid-run and a --resume
// complete with the uninterrupted results. Needs root, like CI: without it the tests fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <set>

#include "mpi_test_util.h"

namespace nnfleet {
namespace {

using testing_util::TempDir;
using namespace mpi_test_util;

const std::string kHosts = std::string(NNFLEET_SOURCE_DIR) + "/tests/mpi/two_hosts.sh";

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The weights of the model files a run kept (its save policy), by file name.
std::map<std::string, std::string> kept_weights(const std::string& out_dir) {
  std::map<std::string, std::string> w;
  for (const auto& e : std::filesystem::directory_iterator(out_dir + "/models")) {
    const LoadedModel k = load_keras_model(e.path().string());
    w[e.path().filename().string()] = std::string(reinterpret_cast<const char*>(k.params.data()),
                                                  k.params.size() * sizeof(float));
  }
  return w;
}

class TwoHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "the two-host MPI test makes network namespaces and needs root, "
                                "as CI runs it; run `make test` as root";
    hosts_ = dir.path + "/hosts";
    const std::string log = dir.path + "/hosts-up.log";
    const int rc = std::system((shell_quote(kHosts) + " up " + shell_quote(hosts_) + " " +
                                std::to_string(getpid()) + " >" + shell_quote(log) + " 2>&1")
                                   .c_str());
    ASSERT_EQ(rc, 0) << "could not make the two hosts:\n" << testing_util::read_text(log);
  }
  void TearDown() override {
    // Also after a failure; the holders end by themselves should this process die first.
    if (!hosts_.empty()) {
      EXPECT_EQ(std::system((shell_quote(kHosts) + " down " + shell_quote(hosts_)).c_str()), 0);
    }
  }

  void write_blobs(int train_rows) {
    testing_util::write_blobs(dir.path, "train", train_rows, 1);
    testing_util::write_blobs(dir.path, "test", 300, 2);
  }
  std::string write_plan(const std::string& text) {
    const std::string p = dir.path + "/plan.yaml";
    testing_util::write_text(p, text);
    return p;
  }

  // `nnfleet train plan --out out extra...` under mpirun on alpha, four ranks: two per host.
  // `options`: more of mpirun's own (hold_options(), say).
  Proc start_on_two_hosts(const std::string& plan, const std::string& out,
                          std::vector<std::string> extra, const std::string& tag,
                          std::vector<std::string> options = {}) {
    std::vector<std::string> args = {kHosts, "run", hosts_, "alpha"};
    options.insert(options.begin(), {"--hostfile", hosts_ + "/hostfile", "-np", "4", "--map-by",
                                     "ppr:2:node", "--bind-to", "none"});
    const std::vector<std::string> run =
        mpirun(options, {"plm_rsh_agent=" + hosts_ + "/agent", "btl=self,vader,tcp",
                         "btl_tcp_if_include=mpi0", "oob_tcp_if_include=mpi0",
                         "btl_vader_single_copy_mechanism=none"});
    args.insert(args.end(), run.begin(), run.end());
    for (const std::string& a : {std::string("train"), plan, std::string("--out"), out})
      args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    return start(args, dir.path, tag);
  }
  // A single process, no MPI: what every MPI run must equal.
  void train_single(const std::string& plan, const std::string& out) {
    const Proc p = start({kTool, "train", plan, "--out", out, "--quiet"}, dir.path, "single");
    ASSERT_EQ(wait_for(p), 0) << testing_util::read_text(p.err);
  }

  // The run's end as --json reports it.
  static Json run_end(const Proc& p) {
    for (const Json& e : events(p.out))
      if (e["event"] == "run_end") return e;
    ADD_FAILURE() << "no run_end event in " << p.out;
    return Json::object();
  }

  TempDir dir;
  std::string hosts_;
};

TEST_F(TwoHosts, FourRanksOnTwoHostsGiveTheResultsAndWeightsOfOneProcess) {
  write_blobs(1500);
  const std::string plan = write_plan(cnn_plan(3));
  ASSERT_NO_FATAL_FAILURE(train_single(plan, dir.path + "/single"));
  const std::string out = dir.path + "/mpi";
  const Proc p = start_on_two_hosts(plan, out, {"--json"}, "mpi");
  ASSERT_EQ(wait_for(p), 0) << testing_util::read_text(p.err);
  EXPECT_EQ(testing_util::comparable(out), testing_util::comparable(dir.path + "/single"));
  EXPECT_TRUE(weights(out) == weights(dir.path + "/single")) << "the weights differ";

  // Ranks 0, 1 on alpha and 2, 3 on beta, by the hostname each rank saw; both hosts trained.
  const Json end = run_end(p);
  ASSERT_EQ(end["ranks"].size(), 4u) << end;
  std::map<std::string, int> jobs;
  for (const Json& r : end["ranks"]) {
    EXPECT_EQ(r["host"], r["rank"].get<int>() < 2 ? "alpha" : "beta") << r;
    jobs[r["host"].get<std::string>()] += r["jobs"].get<int>();
  }
  EXPECT_GT(jobs["alpha"], 0);
  EXPECT_GT(jobs["beta"], 0) << "no job ran on the second host";
}

TEST_F(TwoHosts, EachHostReadsTheDataOnceAndItsTwoRanksShareIt) {
  // 64 MiB of features, far more than anything else a rank holds.
  double data_bytes = 0;
  const std::string plan = write_plan(write_wide_data(dir.path, 4096, 4096, data_bytes));
  const Proc p = start_on_two_hosts(plan, dir.path + "/out", {"--json"}, "mpi");
  ASSERT_EQ(wait_for(p), 0) << testing_util::read_text(p.err);
  const Json end = run_end(p);
  ASSERT_EQ(end["ranks"].size(), 4u) << end;
  std::map<std::string, int> loaded;
  for (const Json& rank : end["ranks"]) {
    loaded[rank["host"].get<std::string>()] += rank["loaded_data"].get<bool>();
#ifndef NNFLEET_SANITIZED  // (ASan keeps freed memory resident in its quarantine)
    // The data is in the host's shared window, not in any rank's own memory...
    EXPECT_LT(rank["rss_private_bytes"].get<double>(), 0.5 * data_bytes) << rank;
    // ...which every rank that trained has read.
    if (rank["jobs"].get<int>() > 0) {
      EXPECT_GT(rank["rss_shared_bytes"].get<double>(), 0.9 * data_bytes) << rank;
    }
#endif
  }
  // One copy per host: two hosts seen as one would give one reader, ranks seen as separate
  // hosts four.
  EXPECT_EQ(loaded, (std::map<std::string, int>{{"alpha", 1}, {"beta", 1}}));
}

TEST_F(TwoHosts, KillingOneHostMidRunThenResumeMatchesAnUninterruptedRun) {
  constexpr int kEpochs = 6;
  write_blobs(6000 / kSlowdown);
  const std::string plan = write_plan(cnn_plan(kEpochs));
  ASSERT_NO_FATAL_FAILURE(train_single(plan, dir.path + "/single"));
  const std::string out = dir.path + "/killed";
  // Every rank is held after its first epoch, so that alpha's ranks cannot take every model before
  // beta's start. Once a rank on beta holds one, they go on, and beta's ranks are held again when
  // they have handed a checkpoint (one every epoch) to their sender: beta is surely mid-model when
  // it dies, a checkpoint on the way to rank 0, however fast the cores (the epochs once had to be
  // long enough for a look to catch a model in its first half).
  const std::string hold = dir.path + "/hold";
  std::filesystem::create_directories(hold);
  const Proc first = start_on_two_hosts(plan, out, {"--json", "--checkpoint-seconds", "0"}, "first",
                                        hold_options(hold, "epoch_end,checkpoint_shipped"));
  // The models started on beta's ranks (2 and 3).
  auto on_beta = [&] {
    std::set<std::string> models;
    for (const Json& e : events(first.out))
      if (e["event"] == "start" && e["rank"].get<int>() >= 2)
        models.insert(e["model"].get<std::string>());
    return models;
  };
  ASSERT_TRUE(eventually([&] {
    const auto beta = on_beta();
    for (const auto& [pid, model] : held(hold))
      if (beta.count(model)) return true;
    return false;
  })) << "beta got no model\n"
      << testing_util::read_text(first.err);
  release_holds(hold);
  std::string victim;
  ASSERT_TRUE(eventually([&] {
    const auto beta = on_beta();
    for (const auto& [pid, model] : held(hold, "checkpoint_shipped"))
      if (beta.count(model) && has_checkpoint(out, model)) victim = model;
    return !victim.empty();
  })) << "no checkpoint of a model on beta reached rank 0\n"
      << testing_util::read_text(first.err);
  // Beta crashes: its daemon and both ranks. mpirun loses the daemon and ends the job.
  ASSERT_EQ(std::system((shell_quote(kHosts) + " kill " + shell_quote(hosts_) + " beta").c_str()),
            0);
  EXPECT_NE(wait_for(first), 0);

  const Proc resumed = start_on_two_hosts(plan, out, {"--resume", "--json"}, "resumed");
  ASSERT_EQ(wait_for(resumed), 0) << testing_util::read_text(resumed.err);
  // The victim continues from the checkpoint beta had shipped to rank 0 before it died.
  int victims_first_epoch = 0;
  for (const Json& e : events(resumed.out))
    if (e["event"] == "epoch" && e["model"] == victim && victims_first_epoch == 0)
      victims_first_epoch = e["epoch"].get<int>();
  EXPECT_NE(victims_first_epoch, 0) << victim << " was not trained again: had it finished?";
  EXPECT_GE(victims_first_epoch, 2) << victim << " started over instead of resuming";
  EXPECT_EQ(testing_util::comparable(out), testing_util::comparable(dir.path + "/single"));
  EXPECT_TRUE(weights(out) == weights(dir.path + "/single")) << "the weights differ";
}

// A few hundred tiny models with `save: best N` and `save: none` across the two hosts: the
// results of one process, and the same model files (the best N, bytes equal; none without).
TEST_F(TwoHosts, ManyTinyModelsWithASavePolicyGiveTheResultsAndFilesOfOneProcess) {
  write_blobs(200);
  std::string lrs;
  for (int i = 0; i < 40; ++i) lrs += (i ? ", " : "") + std::to_string(0.001 + i * 1e-4);
  const std::string grid = R"(data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
defaults:
  epochs: 1
  batch_size: 50
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
models:
  - name: t-{u}-{lr}
    grid: {u: [1, 2, 3, 4, 5, 6, 7, 8], lr: [)" +
                           lrs + R"(]}
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers:
      - Flatten: {}
      - Dense: {units: "{u}", activation: relu}
      - Dense: {units: 3, activation: softmax}
)";
  for (const std::string save : {"best 12", "none"}) {
    SCOPED_TRACE(save);
    const std::string plan = write_plan("seed: 5\nsave: " + save + "\n" + grid);
    const std::string single = dir.path + "/single-" + save.substr(0, 4);
    ASSERT_NO_FATAL_FAILURE(train_single(plan, single));
    const std::string out = dir.path + "/mpi-" + save.substr(0, 4);
    const Proc p = start_on_two_hosts(plan, out, {"--quiet"}, "mpi-" + save.substr(0, 4));
    ASSERT_EQ(wait_for(p), 0) << testing_util::read_text(p.err);
    EXPECT_EQ(testing_util::comparable(out), testing_util::comparable(single));
    const auto files = kept_weights(out);
    EXPECT_EQ(files.size(), save == "none" ? 0u : 12u);
    EXPECT_TRUE(files == kept_weights(single)) << "the kept model files differ";
    EXPECT_EQ(testing_util::recorded_models(out).size(), 320u);
  }
}

}  // namespace
}  // namespace nnfleet
