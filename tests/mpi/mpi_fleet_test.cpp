// The fleet's cluster protocol without MPI: ranks are threads of this process joined by an
// in-memory Cluster, so the protocol runs in every build (sanitizers included). Three ranks give
// the results and weights of one process, a stop and a resume on three ranks equal an
// uninterrupted run, and a problem found on any rank is reported by rank 0 alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "../fleet/fleet_test_util.h"
#include "fleet/cluster/cluster.h"
#include "fleet/cluster/cluster_fleet.h"
#include "fleet/fleet.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;

// What the ranks of one in-process "job" share: mailboxes and a slot per rank for collectives.
struct World {
  explicit World(int n) : size(n), inbox(static_cast<size_t>(n)), slots(static_cast<size_t>(n)) {}
  struct Message {
    int from;
    Tag tag;
    std::string bytes;
  };
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<Message>> inbox;
  std::vector<std::string> slots;
  int arrived = 0, leaving = 0;
};

class ThreadCluster final : public Cluster {
 public:
  ThreadCluster(World& w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_.size; }
  const std::string& host() const override { return host_; }

  void agree(const std::function<void()>& step) override {
    std::string mine = "0";
    std::exception_ptr own;
    try {
      step();
    } catch (const Error& e) {
      mine = std::string("1") + e.what();
      own = std::current_exception();
    }
    const std::vector<std::string> all = exchange(mine);
    for (int r = 0; r < w_.size; ++r) {
      if (all[static_cast<size_t>(r)][0] == '0') continue;
      if (rank_ != 0) throw PeerExit();
      if (own) std::rethrow_exception(own);
      throw Error("on rank " + std::to_string(r) + ": " + all[static_cast<size_t>(r)].substr(1));
    }
  }
  FleetData load_shared_data(const DataSpec& spec, const GivenArrays* arrays,
                             bool& loaded_here) override {
    FleetData d;
    agree([&] { d = load_fleet_data(spec, arrays); });
    loaded_here = true;
    return d;
  }
  std::vector<int> share_cpus(const std::vector<int>& allowed) override { return allowed; }
  std::vector<std::string> gather(const std::string& mine) override {
    std::vector<std::string> all = exchange(mine);
    if (rank_ != 0) all.clear();
    return all;
  }
  void send(int to, Tag tag, std::string bytes) override {
    std::lock_guard<std::mutex> lock(w_.mu);
    w_.inbox[static_cast<size_t>(to)].push_back({rank_, tag, std::move(bytes)});
  }
  bool receive(int& from, Tag& tag, std::string& bytes) override {
    std::lock_guard<std::mutex> lock(w_.mu);
    auto& q = w_.inbox[static_cast<size_t>(rank_)];
    if (q.empty()) return false;
    from = q.front().from;
    tag = q.front().tag;
    bytes = std::move(q.front().bytes);
    q.pop_front();
    return true;
  }
  bool sending() override { return false; }

 private:
  // Every rank's string, once all ranks have given theirs (a barrier on both sides, so the slots
  // can be reused by the next collective).
  std::vector<std::string> exchange(const std::string& mine) {
    std::unique_lock<std::mutex> lock(w_.mu);
    w_.cv.wait(lock, [&] { return w_.leaving == 0; });
    w_.slots[static_cast<size_t>(rank_)] = mine;
    if (++w_.arrived == w_.size) {
      w_.leaving = w_.size;
      w_.cv.notify_all();
    }
    w_.cv.wait(lock, [&] { return w_.leaving > 0 && w_.arrived == w_.size; });
    std::vector<std::string> all = w_.slots;
    if (--w_.leaving == 0) {
      w_.arrived = 0;
      w_.cv.notify_all();
    }
    return all;
  }
  World& w_;
  int rank_;
  std::string host_ = "localhost";
};

struct Outcome {
  std::vector<FleetSummary> ranks;  // [0] is rank 0's
  std::vector<std::string> errors;  // what each rank threw ("" for nothing, "peer" for PeerExit)
  std::map<std::string, std::string> weights;
  std::string comparable;  // testing_util::comparable() of rank 0's folder
};

// Runs `plans[r]` on rank r, each rank a thread with one worker.
Outcome run_ranks(const std::vector<std::string>& plans, const std::string& out,
                  const std::atomic<bool>* stop = nullptr, bool resume = false) {
  const int n = static_cast<int>(plans.size());
  World world(n);
  Outcome o;
  o.ranks.resize(static_cast<size_t>(n));
  o.errors.resize(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ThreadCluster cluster(world, r);
      FleetOptions opts;
      opts.out_dir = out;
      opts.workers = 1;
      opts.resume = resume;
      opts.mode = Display::Mode::kQuiet;
      opts.stop = stop;
      try {
        Plan plan;
        cluster.agree([&] { plan = load_plan(plans[static_cast<size_t>(r)]); });
        o.ranks[static_cast<size_t>(r)] =
            run_cluster_fleet(plan, opts, testing_util::raw_io(), &cluster);
      } catch (const PeerExit&) {
        o.errors[static_cast<size_t>(r)] = "peer";
      } catch (const Error& e) {
        o.errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& m : o.ranks[0].results)
    if (file_exists(out + "/models/" + m.name + ".bin"))
      o.weights[m.name] = read_file(out + "/models/" + m.name + ".bin");
  if (file_exists(out + "/results.json")) o.comparable = testing_util::comparable(out);
  return o;
}

Outcome run_single(const std::string& plan, const std::string& out) {
  FleetOptions opts;
  opts.out_dir = out;
  opts.workers = 2;
  opts.mode = Display::Mode::kQuiet;
  Outcome o;
  o.ranks.push_back(run_fleet(load_plan(plan), opts, testing_util::raw_io()));
  for (const auto& m : o.ranks[0].results)
    if (m.status != JobStatus::kPruned)  // a pruned search trial has no model file
      o.weights[m.name] = read_file(out + "/models/" + m.name + ".bin");
  o.comparable = testing_util::comparable(out);
  return o;
}

void expect_same_results(const Outcome& a, const Outcome& b) {
  const auto& x = a.ranks[0].results;
  const auto& y = b.ranks[0].results;
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].name, y[i].name);
    EXPECT_EQ(x[i].status, y[i].status) << x[i].name << ": " << y[i].message;
    EXPECT_EQ(x[i].epochs, y[i].epochs) << x[i].name;
    EXPECT_EQ(x[i].metrics, y[i].metrics) << x[i].name;
    EXPECT_EQ(x[i].best.epoch, y[i].best.epoch) << x[i].name;
  }
  EXPECT_EQ(a.comparable, b.comparable);  // the histories too
  EXPECT_EQ(a.weights.size(), x.size());
  EXPECT_TRUE(a.weights == b.weights) << "weights differ";
}

using ClusterProtocol = testing_util::BlobsPlanTest;

TEST_F(ClusterProtocol, ThreeRanksGiveTheResultsAndWeightsOfOneProcess) {
  const Outcome single = run_single(plan, dir.path + "/single");
  const Outcome three = run_ranks({plan, plan, plan}, dir.path + "/three");
  for (const auto& e : three.errors) EXPECT_EQ(e, "");
  expect_same_results(three, single);
  // Rank 0 reports every rank; the others learn each model's status.
  const FleetSummary& s = three.ranks[0];
  ASSERT_EQ(s.ranks.size(), 3u);
  int jobs = 0;
  for (const auto& r : s.ranks) jobs += r.jobs;
  EXPECT_EQ(jobs, 4);
  EXPECT_EQ(s.workers, 3);
  EXPECT_EQ(s.round_trips.count, static_cast<size_t>(s.ranks[1].jobs + s.ranks[2].jobs + 2));
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(three.ranks[static_cast<size_t>(r)].rank, r);
    ASSERT_EQ(three.ranks[static_cast<size_t>(r)].results.size(), 4u);
    for (const auto& m : three.ranks[static_cast<size_t>(r)].results)
      EXPECT_EQ(m.status, JobStatus::kDone);
  }
  const Json results = Json::parse(read_file(dir.path + "/three/results.json"));
  EXPECT_EQ(results["workers"], 3);
  // timeline.jsonl (the report's per-core timeline): a session listing the three ranks, and each
  // job's start and end on the rank that ran it, as rank 0 handed it out.
  std::map<std::string, int> ran_on;  // model -> rank of its "job" line
  int sessions = 0, starts = 0;
  std::map<int, int> jobs_of;
  std::istringstream lines(read_file(dir.path + "/three/timeline.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json t = Json::parse(line);
    if (t["kind"] == "session") {
      ++sessions;
      ASSERT_EQ(t["ranks"].size(), 3u);
      for (int r = 0; r < 3; ++r) EXPECT_EQ(t["ranks"][static_cast<size_t>(r)]["rank"], r);
    }
    if (t["kind"] == "start") ++starts;
    if (t["kind"] == "job") {
      EXPECT_EQ(t["status"], "done");
      EXPECT_LE(t["start"].get<double>(), t["end"].get<double>());
      ran_on[t["model"].get<std::string>()] = t["rank"].get<int>();
      ++jobs_of[t["rank"].get<int>()];
    }
  }
  EXPECT_EQ(sessions, 1);
  EXPECT_EQ(starts, 4);
  EXPECT_EQ(ran_on.size(), 4u);
  for (const auto& r : s.ranks) EXPECT_EQ(jobs_of[r.rank], r.jobs) << "rank " << r.rank;
}

// Each model its own data (issue 11): every rank loads every source, in plan order, and runs
// each job on its model's own.
TEST_F(ClusterProtocol, PerModelDataOnThreeRanksGivesTheResultsOfOneProcess) {
  testing_util::write_blobs(dir.path, "s_a", 200, 41);
  testing_util::write_blobs(dir.path, "s_b", 250, 42);
  const std::string per_model = dir.path + "/per_model.yaml";
  testing_util::write_text(per_model, R"(seed: 5
defaults:
  data: {train: {x: "s_{k}_x.npy", y: "s_{k}_y.npy"}, validation_split: 0.2}
  epochs: 2
  batch_size: 16
  layers:
    - Flatten: {}
    - Dense: {units: 8, activation: relu}
    - Dense: {units: 3, activation: softmax}
models:
  - name: mlp-{k}
    grid: {k: [a, b]}
  - name: wide-{k}
    grid: {k: [b, a]}
    layers:
      - Flatten: {}
      - Dense: {units: 24, activation: tanh}
      - Dense: {units: 3, activation: softmax}
)");
  ASSERT_EQ(load_plan(per_model).sources.size(), 2u);
  const Outcome single = run_single(per_model, dir.path + "/single");
  const Outcome three = run_ranks({per_model, per_model, per_model}, dir.path + "/three");
  for (const auto& e : three.errors) EXPECT_EQ(e, "");
  expect_same_results(three, single);
  EXPECT_NE(single.ranks[0].results[0].metrics, single.ranks[0].results[1].metrics);
}

// The stop lands while a rank is held at the n-th end of an epoch that is not its model's last
// (platform/test_hold.h), so it surely interrupts the run whatever the cores' speed (it once came
// after 5 and 30 ms instead).
TEST_F(ClusterProtocol, StopThenResumeOnThreeRanksEqualsAnUninterruptedRun) {
  const Outcome single = run_single(plan, dir.path + "/single");
  for (int nth : {1, 3}) {
    const std::string out = dir.path + "/stopped" + std::to_string(nth);
    Outcome first;
    {
      testing_util::StopAtEpochEnd stopper(dir.path + "/hold" + std::to_string(nth), nth);
      first = run_ranks({plan, plan, plan}, out, &stopper.stop);
    }
    for (const auto& e : first.errors) EXPECT_EQ(e, "");
    EXPECT_TRUE(first.ranks[0].interrupted) << "held at epoch end " << nth;
    EXPECT_EQ(first.ranks[1].interrupted, first.ranks[0].interrupted);
    const Outcome resumed = run_ranks({plan, plan, plan}, out, nullptr, true);
    for (const auto& e : resumed.errors) EXPECT_EQ(e, "");
    expect_same_results(resumed, single);
  }
}

// A search (issue 33) on three ranks: the same trials, decisions and metrics as one process, the
// ranks' requests parked while a rung waits for its last trials; and after a stop and resume.
TEST_F(ClusterProtocol, ASearchOnThreeRanksIsTheStudyOfOneProcessAndOfAResume) {
  const std::string search = dir.path + "/search.yaml";
  testing_util::write_text(search, testing_util::search_plan());
  const Outcome single = run_single(search, dir.path + "/single");
  const Outcome three = run_ranks({search, search, search}, dir.path + "/three");
  for (const auto& e : three.errors) EXPECT_EQ(e, "");
  auto rungs = [](const std::string& out) {
    std::string s;
    for (const auto& m : Json::parse(read_file(out + "/results.json"))["models"])
      s += m["rungs"].dump() + "\n";
    return s + read_file(out + "/trials.csv");
  };
  EXPECT_EQ(rungs(dir.path + "/three"), rungs(dir.path + "/single"));
  EXPECT_EQ(three.comparable, single.comparable);
  EXPECT_TRUE(three.weights == single.weights) << "weights differ";
  const std::string out = dir.path + "/stopped";
  {
    testing_util::StopAtEpochEnd stopper(dir.path + "/hold", 3);
    const Outcome first = run_ranks({search, search, search}, out, &stopper.stop);
    EXPECT_TRUE(first.ranks[0].interrupted);
  }
  const Outcome resumed = run_ranks({search, search, search}, out, nullptr, true);
  for (const auto& e : resumed.errors) EXPECT_EQ(e, "");
  EXPECT_EQ(rungs(out), rungs(dir.path + "/single"));
  EXPECT_EQ(resumed.comparable, single.comparable);
}

TEST_F(ClusterProtocol, AProblemOnAnyRankIsReportedByRankZeroAlone) {
  // A plan problem (found by rank 0's validation).
  const std::string bad = dir.path + "/bad.yaml";
  std::string text = testing_util::small_plan();
  text.replace(text.find("units: 3, activation: softmax"), 8, "units: 2");
  testing_util::write_text(bad, text);
  Outcome o = run_ranks({bad, bad, bad}, dir.path + "/out");
  EXPECT_THAT(o.errors[0], HasSubstr("labels out of range"));
  EXPECT_EQ(o.errors[1], "peer");
  EXPECT_EQ(o.errors[2], "peer");
  EXPECT_FALSE(file_exists(dir.path + "/out"));

  // A plan rank 2 cannot read.
  o = run_ranks({plan, plan, dir.path + "/missing.yaml"}, dir.path + "/out");
  EXPECT_THAT(o.errors[0], HasSubstr("on rank 2: failed to load plan"));
  EXPECT_EQ(o.errors[2], "peer");

  // A different plan on rank 1.
  const std::string other = dir.path + "/other.yaml";
  text = testing_util::small_plan();
  text.replace(text.find("seed: 7"), 7, "seed: 8");
  testing_util::write_text(other, text);
  o = run_ranks({plan, other, plan}, dir.path + "/out");
  EXPECT_THAT(o.errors[0], HasSubstr("rank 1 (localhost) loaded a different plan"));
  EXPECT_EQ(o.errors[1], "peer");
  EXPECT_FALSE(file_exists(dir.path + "/out"));
}

}  // namespace
}  // namespace nnfleet
