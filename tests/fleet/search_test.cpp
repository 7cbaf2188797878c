// A search's scheduler, alone and in the fleet: decisions from the trials' metrics only (the
// same whatever order trials report in, on one or two workers, and after a stop and resume), and
// a trial continued through its rungs equal, bit for bit, to the same trial trained straight.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <thread>

#include "fleet/fleet.h"
#include "fleet/fleet_data.h"
#include "fleet/search_scheduler.h"
#include "fleet_test_util.h"
#include "platform/files.h"
#include "platform/test_hold.h"

namespace nnfleet {
namespace {

using fleet_detail::SearchScheduler;
using ::testing::HasSubstr;
using testing_util::TempDir;

SearchSpec halving(int rf, int64_t min, int64_t max, int brackets = 1) {
  SearchSpec s;
  s.metric = "val_accuracy";
  s.higher_is_better = true;
  s.schedule.kind = SearchSchedule::Kind::kHalving;
  s.schedule.reduction_factor = rf;
  s.schedule.min_budget = min;
  s.schedule.max_budget = max;
  s.schedule.brackets = brackets;
  return s;
}

// A trial's history up to `epochs`: val_accuracy grows with the epoch from a per-trial base.
std::vector<EpochRecord> history(double base, int epochs) {
  std::vector<EpochRecord> h;
  for (int e = 1; e <= epochs; ++e)
    h.push_back({e, {{"loss", 1.0 / e}, {"val_accuracy", base + 0.01 * e}}, 0.0});
  return h;
}

struct Played {
  std::vector<std::vector<api::Rung>> rungs;
  std::vector<int> reached;
  int64_t epochs = 0;
};

// Runs a scheduler to the end, answering its work in an order `shuffle` picks (as workers that
// finish in any order would); `base[k]` is trial k's quality.
Played play(const SearchSpec& spec, const std::vector<double>& base, uint64_t shuffle) {
  SearchScheduler s(spec, std::vector<SearchScheduler::Trial>(base.size()));
  std::mt19937_64 rng(shuffle);
  std::vector<SearchScheduler::Work> running;
  std::vector<int> reached(base.size(), 0);
  s.start();
  for (;;) {
    while (auto w = s.next()) running.push_back(*w);
    if (running.empty()) break;
    const size_t pick = rng() % running.size();
    const SearchScheduler::Work w = running[pick];
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(pick));
    reached[w.trial] = w.limit;
    s.reached(w.trial, history(base[w.trial], w.limit),
              w.pause ? JobStatus::kCancelled : JobStatus::kDone, w.pause);
    s.advance();
  }
  EXPECT_TRUE(s.finished());
  Played p;
  for (size_t k = 0; k < base.size(); ++k) p.rungs.push_back(s.rung_results(k));
  p.reached = reached;
  p.epochs = s.epochs_trained();
  return p;
}

std::vector<double> bases(size_t n) {
  std::vector<double> b(n);
  for (size_t k = 0; k < n; ++k) b[k] = 0.5 + 0.37 * std::fmod(static_cast<double>(k) * 0.618, 1.0);
  return b;
}

TEST(SearchScheduler, HalvingKeepsTheBestThirdAtEachRungWhateverTheOrderOfReports) {
  const std::vector<double> base = bases(27);
  const Played first = play(halving(3, 1, 9), base, 1);
  // 27 trials train 1 epoch, the best 9 reach 3, the best 3 reach 9: 27 + 9*2 + 3*6 epochs.
  EXPECT_EQ(first.epochs, 27 + 18 + 18);
  EXPECT_EQ(std::count(first.reached.begin(), first.reached.end(), 9), 3);
  EXPECT_EQ(std::count(first.reached.begin(), first.reached.end(), 3), 6);
  // The three that reach 9 are the three best bases.
  std::vector<size_t> order(base.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return base[a] > base[b]; });
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(first.reached[order[i]], 9) << order[i];
  for (uint64_t shuffle : {2u, 3u, 4u}) {
    const Played other = play(halving(3, 1, 9), base, shuffle);
    EXPECT_EQ(other.reached, first.reached) << shuffle;
    for (size_t k = 0; k < base.size(); ++k) {
      ASSERT_EQ(other.rungs[k].size(), first.rungs[k].size()) << k;
      for (size_t j = 0; j < first.rungs[k].size(); ++j)
        EXPECT_EQ(other.rungs[k][j].decision, first.rungs[k][j].decision) << k;
    }
  }
  const std::vector<api::Rung>& best = first.rungs[order[0]];
  ASSERT_EQ(best.size(), 3u);
  EXPECT_EQ(best[0].decision, "promoted");
  EXPECT_EQ(best[2].epochs, 9);
  EXPECT_EQ(best[2].decision, "final");
  EXPECT_EQ(first.rungs[order.back()].back().decision, "pruned");
}

TEST(SearchScheduler, TiesGoToTheLowerTrialIndex) {
  const Played p = play(halving(2, 1, 2), std::vector<double>(4, 0.5), 9);
  EXPECT_EQ(p.reached, (std::vector<int>{2, 2, 1, 1}));
}

TEST(SearchScheduler, BracketsStartAtLargerBudgets) {
  const SearchSpec spec = halving(3, 1, 9, 3);
  SearchScheduler s(spec, std::vector<SearchScheduler::Trial>(6));
  EXPECT_EQ(s.rungs(0), (std::vector<int>{1, 3, 9}));
  EXPECT_EQ(s.rungs(1), (std::vector<int>{3, 9}));
  EXPECT_EQ(s.rungs(2), (std::vector<int>{9}));
  EXPECT_EQ(s.rungs(3), (std::vector<int>{1, 3, 9}));
  const Played p = play(spec, bases(6), 5);
  // Bracket 2 trains its trials straight to 9.
  EXPECT_EQ(p.reached[2], 9);
  EXPECT_EQ(p.reached[5], 9);
}

TEST(SearchScheduler, MedianStoppingStopsTrialsWorseThanTheRungMedian) {
  SearchSpec spec = halving(3, 1, 3);
  spec.schedule.kind = SearchSchedule::Kind::kMedian;
  spec.schedule.interval = 1;
  const Played p = play(spec, {0.1, 0.2, 0.3, 0.4}, 3);
  // Rung 1: median 0.26 keeps trials 2 and 3; rung 2: median of two keeps the better.
  EXPECT_EQ(p.reached, (std::vector<int>{1, 1, 2, 3}));
  EXPECT_EQ(p.rungs[0].back().decision, "pruned");
}

TEST(SearchScheduler, BudgetsInSamplesBecomeEpochsOfEachTrialsData) {
  SearchSpec spec = halving(2, 1000, 4000);
  spec.schedule.samples = true;
  SearchScheduler s(spec, {{500, 1.0}, {3000, 1.0}});
  EXPECT_EQ(s.rungs(0), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(s.rungs(1), (std::vector<int>{1, 2}));  // 1000 and 2000 samples: both 1 epoch
}

TEST(SearchScheduler, AResumeFedWhatTheFolderHoldsDecidesAsTheRunDid) {
  const std::vector<double> base = bases(9);
  const SearchSpec spec = halving(3, 1, 9);
  const Played full = play(spec, base, 1);
  // A folder after rung 1 was decided and trial 3 had paused at 3: the decided rung's pruned
  // trials have records, the promoted ones checkpoints at epoch 1 (trial 3's at 3).
  SearchScheduler s(spec, std::vector<SearchScheduler::Trial>(base.size()));
  std::vector<int> reached(base.size(), 1);
  ASSERT_GE(full.reached[3], 3);  // trial 3 is among the best 3 of the 9 bases
  reached[3] = 3;
  for (size_t k = 0; k < base.size(); ++k) {
    const bool promoted = full.reached[k] > 1;
    s.reached(k, history(base[k], reached[k]),
              promoted ? JobStatus::kCancelled : JobStatus::kPruned, promoted);
  }
  s.start();
  while (auto w = s.next()) {
    reached[w->trial] = w->limit;
    s.reached(w->trial, history(base[w->trial], w->limit),
              w->pause ? JobStatus::kCancelled : JobStatus::kDone, w->pause);
    s.advance();
  }
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(reached, full.reached);
}

// `take: N` keeps the first N rows, before the validation split takes the last of them.
TEST(DataTake, TheFirstRowsTrainAndValidate) {
  TempDir dir;
  testing_util::write_blobs(dir.path, "train", 1200, 1);
  testing_util::write_text(dir.path + "/p.yaml",
                           "data:\n  train: {x: train_x.npy, y: train_y.npy}\n  take: 500\n"
                           "  validation_split: 0.2\nmodels:\n  - name: m\n"
                           "    layers: [Flatten, Dense: {units: 3}]\n");
  const Plan p = load_plan(dir.path + "/p.yaml");
  const FleetData d = load_fleet_data(p.sources.at(0), nullptr);
  EXPECT_EQ(d.n_train, 400);
  EXPECT_EQ(d.n_val, 100);
}

// The fleet: a 3 x 3 grid of small models as nine trials, halving by 3 over 1 and 3 epochs.
class Search : public testing_util::BlobsPlanTest {
 protected:
  void SetUp() override {
    BlobsPlanTest::SetUp();
    testing_util::write_text(plan, R"(seed: 11
data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
  validation_split: 0.2
models:
  - name: t-{units}-{lr}
    grid: {units: [4, 8, 16], lr: [0.001, 0.01, 0.05]}
    epochs: 3
    batch_size: 32
    batch_split: 2  # idle workers help the trials a rung waits for: results must not change
    loss: sparse_categorical_crossentropy
    metrics: [accuracy]
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers:
      - Flatten: {}
      - Dense: {units: "{units}", activation: relu}
      - Dropout: {rate: 0.2}
      - Dense: {units: 3, activation: softmax}
)");
  }

  FleetSummary run(const std::string& out, int workers, bool search,
                   const std::atomic<bool>* stop = nullptr, bool resume = false,
                   double time_limit = 0) {
    Plan p = load_plan(plan);
    if (search) p.search = halving(3, 1, 3);
    if (search) p.search->trials = p.models.size();
    if (search) p.search->time_limit_seconds = time_limit;
    FleetOptions o;
    o.out_dir = out;
    o.workers = workers;
    o.mode = Display::Mode::kQuiet;
    o.stop = stop;
    o.resume = resume;
    o.keep_history = true;
    return run_fleet(p, o, testing_util::raw_io());
  }
  std::string weights(const std::string& out, const std::string& name) {
    return read_file(out + "/models/" + name + ".bin");
  }
};

void expect_same_study(const FleetSummary& a, const FleetSummary& b) {
  ASSERT_EQ(a.results.size(), b.results.size());
  for (size_t k = 0; k < a.results.size(); ++k) {
    const ModelResult& x = a.results[k];
    const ModelResult& y = b.results[k];
    EXPECT_EQ(x.status, y.status) << x.name;
    EXPECT_EQ(x.epochs, y.epochs) << x.name;
    EXPECT_EQ(x.metrics, y.metrics) << x.name;
    ASSERT_EQ(x.rungs.size(), y.rungs.size()) << x.name;
    for (size_t j = 0; j < x.rungs.size(); ++j) {
      EXPECT_EQ(x.rungs[j].epochs, y.rungs[j].epochs) << x.name;
      EXPECT_EQ(x.rungs[j].value, y.rungs[j].value) << x.name;
      EXPECT_EQ(x.rungs[j].decision, y.rungs[j].decision) << x.name;
    }
  }
}

TEST_F(Search, TheStudyIsTheSameOnOneAndTwoWorkersAndPromotedTrialsEqualStraightOnes) {
  const FleetSummary one = run(dir.path + "/one", 1, true);
  const FleetSummary two = run(dir.path + "/two", 2, true);
  expect_same_study(one, two);
  size_t done = 0, pruned = 0;
  for (const ModelResult& r : one.results) {
    if (r.status == JobStatus::kDone) ++done;
    if (r.status == JobStatus::kPruned) ++pruned;
  }
  EXPECT_EQ(done, 3u);
  EXPECT_EQ(pruned, 6u);
  // Trained straight to 3 epochs without a scheduler, the finished trials are the same trials.
  const FleetSummary straight = run(dir.path + "/straight", 2, false);
  for (size_t k = 0; k < one.results.size(); ++k) {
    const ModelResult& r = one.results[k];
    if (r.status == JobStatus::kPruned) {
      EXPECT_EQ(r.epochs, 1) << r.name;
      EXPECT_TRUE(r.model_file.empty()) << r.name;
      EXPECT_THAT(r.message, HasSubstr("pruned after epoch 1: val_accuracy"));
      EXPECT_EQ(r.history.size(), 1u);
      EXPECT_EQ(r.history[0].values, straight.results[k].history[0].values) << r.name;
      continue;
    }
    ASSERT_EQ(r.status, JobStatus::kDone) << r.name << ": " << r.message;
    EXPECT_EQ(r.metrics, straight.results[k].metrics) << r.name;
    ASSERT_EQ(r.history.size(), 3u);
    for (size_t e = 0; e < 3; ++e)
      EXPECT_EQ(r.history[e].values, straight.results[k].history[e].values) << r.name;
    EXPECT_TRUE(weights(dir.path + "/one", r.name) == weights(dir.path + "/straight", r.name))
        << "weights of " << r.name << " differ";
  }
  // trials.csv and results.json say what was decided.
  const std::string csv = read_file(dir.path + "/one/trials.csv");
  EXPECT_THAT(csv, ::testing::StartsWith("trial,name,status,epochs,val_accuracy,rung_1,rung_3"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 10);
  const Json j = Json::parse(read_file(dir.path + "/one/results.json"));
  EXPECT_EQ(j["search"]["scheduler"], "successive_halving");
  EXPECT_EQ(j["search"]["epochs_trained"], 9 + 3 * 2);
  EXPECT_EQ(j["rank_by"], "val_accuracy");
}

TEST_F(Search, AStopMidRungThenResumeGivesTheSameStudy) {
  const FleetSummary full = run(dir.path + "/full", 2, true);
  for (int nth : {1, 4}) {
    const std::string out = dir.path + "/stopped" + std::to_string(nth);
    {
      testing_util::StopAtEpochEnd stopper(dir.path + "/hold" + std::to_string(nth), nth);
      const FleetSummary first = run(out, 2, true, &stopper.stop);
      EXPECT_TRUE(first.interrupted) << nth;
    }
    const FleetSummary resumed = run(out, 2, true, nullptr, true);
    expect_same_study(full, resumed);
  }
}

// A time limit passing while a trial trains: no trial starts another rung, the running one ends
// at its rung, every result is kept, and the run is not "interrupted". The order is made by a
// hold: the run waits at its first epoch end until twice the limit has passed since then, so
// the limit (set before the run's first epoch) is surely over when it goes on.
TEST_F(Search, ATimeLimitEndsTheSearchAtTheNextRungWithEveryResultKept) {
  const double limit = 0.2;
  const std::string hold = dir.path + "/hold";
  std::filesystem::create_directories(hold);
  test_hold::set_for_tests("epoch_end:" + hold);
  std::thread release([&] {
    const std::string held = hold + "/epoch_end." + std::to_string(::getpid()) + ".held";
    while (!file_exists(held)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::duration<double>(2 * limit));
    testing_util::write_text(hold + "/epoch_end.go", "");
  });
  const FleetSummary s = run(dir.path + "/limited", 1, true, nullptr, false, limit);
  release.join();
  test_hold::set_for_tests("");
  EXPECT_FALSE(s.interrupted);
  int stopped = 0, unstarted = 0;
  for (const ModelResult& r : s.results) {
    EXPECT_EQ(r.status, JobStatus::kCancelled) << r.name;
    if (r.epochs == 1) {
      ++stopped;
      EXPECT_THAT(r.message, HasSubstr("its time limit")) << r.name;
      ASSERT_EQ(r.rungs.size(), 1u);
      EXPECT_EQ(r.rungs[0].decision, "stopped");
    } else {
      ++unstarted;
      EXPECT_EQ(r.epochs, 0) << r.name;
    }
  }
  EXPECT_EQ(stopped, 1);
  EXPECT_EQ(unstarted, 8);
  const Json j = Json::parse(read_file(dir.path + "/limited/results.json"));
  EXPECT_EQ(j["search"]["stopped_by_time_limit"], true);
  EXPECT_EQ(j["search"]["epochs_trained"], 1);
}

}  // namespace
}  // namespace nnfleet
