// The fleet end to end on small synthetic data: bit-identical results for any worker count,
// stop-and-resume equal to an uninterrupted run, divergence confined to its model, and input
// errors reported before anything is written.
#include "fleet/fleet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "fleet/fit/job.h"
#include "fleet/fleet_data.h"
#include "fleet_test_util.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;

struct Outcome {
  FleetSummary summary;
  std::map<std::string, std::string> weights;  // raw parameter bytes of each finished model
  std::string comparable;                      // testing_util::comparable() of its folder
};

Outcome run(const std::string& plan_path, const std::string& out, int workers,
            const std::atomic<bool>* stop = nullptr, bool resume = false) {
  FleetOptions o;
  o.out_dir = out;
  o.workers = workers;
  o.resume = resume;
  o.mode = Display::Mode::kQuiet;
  o.stop = stop;
  Outcome r;
  r.summary = run_fleet(load_plan(plan_path), o, testing_util::raw_io());
  for (const auto& m : r.summary.results)
    if (file_exists(out + "/models/" + m.name + ".bin"))
      r.weights[m.name] = read_file(out + "/models/" + m.name + ".bin");
  r.comparable = testing_util::comparable(out);
  return r;
}

void expect_same_results(const Outcome& a, const Outcome& b) {
  ASSERT_EQ(a.summary.results.size(), b.summary.results.size());
  for (size_t i = 0; i < a.summary.results.size(); ++i) {
    const ModelResult& x = a.summary.results[i];
    const ModelResult& y = b.summary.results[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.status, y.status) << x.name;
    EXPECT_EQ(x.epochs, y.epochs) << x.name;
    EXPECT_EQ(x.metrics, y.metrics) << x.name;  // bit for bit: operator== on doubles
    EXPECT_EQ(x.best.epoch, y.best.epoch) << x.name;
  }
  EXPECT_EQ(a.comparable, b.comparable);  // the histories too
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (const auto& [name, w] : a.weights) {
    auto it = b.weights.find(name);
    ASSERT_NE(it, b.weights.end()) << name;
    EXPECT_TRUE(w == it->second) << "weights of " << name << " differ";
  }
}

using Fleet = testing_util::BlobsPlanTest;

TEST_F(Fleet, ResultsAreBitIdenticalForOneAndTwoWorkers) {
  Outcome one = run(plan, dir.path + "/w1", 1);
  Outcome two = run(plan, dir.path + "/w2", 2);
  ASSERT_EQ(one.summary.results.size(), 4u);
  for (const auto& r : one.summary.results) {
    EXPECT_EQ(r.status, JobStatus::kDone) << r.name << ": " << r.message;
    EXPECT_GT(*find_metric(r.metrics, "test_accuracy"), 0.8) << r.name;
  }
  expect_same_results(one, two);
  EXPECT_EQ(one.weights.size(), 4u);
  EXPECT_EQ(two.summary.workers, 2);
}

TEST_F(Fleet, WritesTheOutputFolder) {
  Outcome o = run(plan, dir.path + "/out", 2);
  for (const char* f : {"results.json", "results.csv", "plan.yaml", "run.json", "run.log",
                        "history.csv", "jobs.log", "models/cnn.bin"})
    EXPECT_TRUE(file_exists(dir.path + "/out/" + f)) << f;
  const Json r = Json::parse(read_file(dir.path + "/out/results.json"));
  EXPECT_EQ(r["seed"], 7);
  EXPECT_EQ(r["workers"], 2);
  ASSERT_EQ(r["models"].size(), 4u);
  const Json& m = r["models"][0];
  for (const char* k : {"name", "status", "message", "epochs", "params", "seconds",
                        "samples_per_second", "core", "metrics", "best"})
    EXPECT_TRUE(m.contains(k)) << k;
  for (const char* k :
       {"loss", "accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy"})
    EXPECT_TRUE(m["metrics"].contains(k)) << k;
  const std::string hist = read_file(dir.path + "/out/history.csv");
  EXPECT_THAT(hist,
              ::testing::StartsWith("model,epoch,loss,accuracy,val_loss,val_accuracy,seconds\n"
                                    "mlp-8,1,"));
  EXPECT_EQ(std::count(hist.begin(), hist.end(), '\n'),
            1 + 3 + 3 + 3 + o.summary.results[2].epochs);
  EXPECT_EQ(testing_util::history_rows(dir.path + "/out", "mlp-8").size(), 3u);
  EXPECT_EQ(testing_util::recorded_models(dir.path + "/out"),
            (std::set<std::string>{"mlp-8", "mlp-32", "cnn", "tanh-sgd"}));
  // Nothing temporary is left behind.
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path + "/out"))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(Fleet, ScheduledLearningRateIsInTheHistoryAsKerasReportsIt) {
  testing_util::write_text(plan, testing_util::small_plan(R"(  - name: decayed
    optimizer: {SGD: {learning_rate: {ExponentialDecay: {initial_learning_rate: 0.1,
                                      decay_steps: 10, decay_rate: 0.5}}}}
    layers:
      - Flatten: {}
      - Dense: {units: 3, activation: softmax}
)"));
  run(plan, dir.path + "/out", 2);
  const auto rows = testing_util::history_rows(dir.path + "/out", "decayed");
  ASSERT_EQ(rows.size(), 3u);
  // 960 training rows in batches of 16: 60 updates per epoch; after epoch e the next update's
  // rate is 0.1 * 0.5^(60 e / 10).
  for (size_t e = 0; e < rows.size(); ++e) {
    const double want = 0.1 * std::pow(0.5, 6.0 * static_cast<double>(e + 1));
    EXPECT_NEAR(std::stod(rows[e].at("learning_rate")), want, 1e-9 * want) << e;
  }
  // A model with a constant rate leaves the column empty.
  const auto plain = testing_util::history_rows(dir.path + "/out", "tanh-sgd");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain[0].at("learning_rate"), "");
}

TEST_F(Fleet, EarlyStoppingRestoresBestWeights) {
  Outcome o = run(plan, dir.path + "/out", 1);
  const ModelResult& cnn = o.summary.results[2];
  ASSERT_EQ(cnn.name, "cnn");
  EXPECT_EQ(cnn.best.monitor, "val_loss");
  EXPECT_GE(cnn.best.epoch, 1);
  EXPECT_LE(cnn.epochs, 4);
  double best = 1e300;
  const auto rows = testing_util::history_rows(dir.path + "/out", "cnn");
  EXPECT_EQ(rows.size(), static_cast<size_t>(cnn.epochs));
  for (const auto& e : rows) best = std::min(best, std::stod(e.at("val_loss")));
  EXPECT_NEAR(cnn.best.value, best, 1e-9 * best);  // history.csv has 10 digits
}

// Stop (as SIGINT does) while the run is held at the n-th end of an epoch that is not its model's
// last (platform/test_hold.h): the stop surely lands mid-run, at a point that does not depend on
// how fast the cores are (the test once stopped after 3, 15 and 40 ms instead).
TEST_F(Fleet, StopThenResumeEqualsAnUninterruptedRun) {
  Outcome full = run(plan, dir.path + "/full", 2);
  for (int nth : {1, 3, 5}) {  // the plan's models pass such an epoch end at least 7 times
    const std::string out = dir.path + "/stopped" + std::to_string(nth);
    Outcome first;
    {
      testing_util::StopAtEpochEnd stopper(dir.path + "/hold" + std::to_string(nth), nth);
      first = run(plan, out, 2, &stopper.stop);
    }
    EXPECT_TRUE(first.summary.interrupted) << "held at epoch end " << nth;
    Outcome resumed = run(plan, out, 2, nullptr, true);
    for (const auto& r : resumed.summary.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
    expect_same_results(full, resumed);
  }
}

TEST_F(Fleet, DivergingModelStopsAloneAndOthersAreUnchanged) {
  const std::string with_boom = dir.path + "/boom.yaml";
  testing_util::write_text(with_boom, testing_util::small_plan(R"(  - name: boom
    optimizer: {SGD: {learning_rate: 1.0e+38}}
    loss: {SparseCategoricalCrossentropy: {from_logits: true}}
    layers:
      - Flatten: {}
      - Dense: {units: 3}
)"));
  Outcome a = run(plan, dir.path + "/a", 2);
  Outcome b = run(with_boom, dir.path + "/b", 2);
  ASSERT_EQ(b.summary.results.size(), 5u);
  const ModelResult& boom = b.summary.results[4];
  EXPECT_EQ(boom.status, JobStatus::kDiverged);
  EXPECT_THAT(boom.message,
              ::testing::MatchesRegex("loss became (nan|infinite) at epoch 1, batch [0-9]+"));
  b.summary.results.pop_back();
  b.comparable.resize(b.comparable.find("\nboom ") + 1);  // boom is the last model
  expect_same_results(a, b);
}

TEST_F(Fleet, MissingDataFileIsNamedAndNothingIsWritten) {
  std::filesystem::remove(dir.path + "/test_y.npy");
  try {
    run(plan, dir.path + "/out", 1);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("test_y.npy"));
  }
  EXPECT_FALSE(file_exists(dir.path + "/out"));
}

TEST_F(Fleet, AllModelProblemsAreReportedTogetherBeforeAnythingRuns) {
  const std::string bad = dir.path + "/bad.yaml";
  testing_util::write_text(bad, testing_util::small_plan(R"(  - name: two-classes
    layers:
      - Flatten: {}
      - Dense: {units: 2, activation: softmax}
  - name: no-reshape
    layers:
      - Conv2D: {filters: 2, kernel_size: 3}
      - Conv1D: {filters: 3, kernel_size: 2}
  - name: regularized
    layers:
      - Flatten: {}
      - Dense: {units: 3, activation: softmax, kernel_regularizer: {class_name: L2, config: {l2: 0.01}}}
)"));
  try {
    run(bad, dir.path + "/out", 1);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    // A regularizer is applied in training (issue 12): that model is fine.
    EXPECT_THAT(e.what(), HasSubstr("2 problems"));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("model 'regularized'")));
    EXPECT_THAT(e.what(), HasSubstr("model 'two-classes': labels out of range for "
                                    "sparse_categorical_crossentropy; expected integers in 0..1"));
    EXPECT_THAT(e.what(), HasSubstr("model 'no-reshape': failed to build model 'no-reshape': layer "
                                    "2 'conv1d' (Conv1D) expects rank 3 input, got [None,6,6,2]"));
  }
  EXPECT_FALSE(file_exists(dir.path + "/out"));
}

// Validation runs on every worker's thread, in blocks of models: the problems still come in plan
// order, the same text as on one thread, across blocks.
TEST_F(Fleet, ProblemsFoundBySeveralThreadsComeInPlanOrder) {
  std::string ks;
  for (int k = 0; k < 150; ++k) ks += (k ? ", " : "") + std::to_string(k);
  const std::string bad = dir.path + "/bad.yaml";
  testing_util::write_text(
      bad, testing_util::small_plan("  - name: g-{u}-{k}\n    grid: {u: [2, 3], k: [" + ks +
                                    "]}\n    layers:\n      - Flatten: {}\n"
                                    "      - Dense: {units: \"{u}\", "
                                    "activation: softmax}\n"));
  std::map<int, std::string> message;
  for (int workers : {1, 3}) {
    try {
      run(bad, dir.path + "/out", workers);
      ADD_FAILURE() << "expected a PlanError on " << workers << " worker(s)";
    } catch (const PlanError& e) {
      message[workers] = e.what();
    }
  }
  EXPECT_THAT(message[1], HasSubstr("150 problems"));
  EXPECT_EQ(message[3], message[1]);
  size_t at = 0;
  for (int k = 0; k < 150; ++k) {
    const size_t next = message[3].find("model 'g-2-" + std::to_string(k) + "': labels", at);
    ASSERT_NE(next, std::string::npos) << "model g-2-" << k << " missing or out of order";
    at = next;
  }
  EXPECT_EQ(message[3].find("model 'g-3-"), std::string::npos);
  EXPECT_FALSE(file_exists(dir.path + "/out"));
}

// The fleet validates one model per kind (PlanModels::kind) and gives the others its figures:
// every model of a grid over learning rates and widths still runs under its own name, in plan
// order, with the parameters of its own width, as when each was validated on its own.
TEST_F(Fleet, ModelsOfOneKindRunWithTheirOwnNamesAndFigures) {
  const std::string grid = dir.path + "/grid.yaml";
  testing_util::write_text(
      grid, testing_util::small_plan("  - name: k-{u}-{lr}\n    grid: {u: [4, 6], lr: [0.01, "
                                     "0.02, 0.03]}\n    epochs: 1\n"
                                     "    optimizer: {Adam: {learning_rate: \"{lr}\"}}\n"
                                     "    layers:\n      - Flatten: {}\n"
                                     "      - Dense: {units: \"{u}\", activation: softmax}\n"));
  const Plan plan = load_plan(grid);
  const Outcome r = run(grid, dir.path + "/out", 2);
  ASSERT_EQ(r.summary.results.size(), plan.models.size());
  size_t grid_models = 0;
  for (size_t k = 0; k < plan.models.size(); ++k) {
    const ModelResult& m = r.summary.results[k];
    EXPECT_EQ(m.name, plan.models.name(k));
    EXPECT_EQ(m.status, JobStatus::kDone) << m.name;
    if (m.name.rfind("k-", 0) != 0) continue;
    ++grid_models;
    const int64_t units = m.name[2] - '0';  // Flatten of 8 x 8 x 1, Dense of `units`
    EXPECT_EQ(m.params, 64 * units + units) << m.name;
  }
  EXPECT_EQ(grid_models, 6u);
  const size_t first = plan.models.size() - 6;  // k-4-0.01, then k-4-0.02, ...
  EXPECT_EQ(plan.models.name(first + 1), "k-4-0.02");
  EXPECT_EQ(plan.models.kind(first), plan.models.kind(first + 1));
  EXPECT_NE(plan.models.kind(first), plan.models.kind(first + 3));  // k-6-0.01
}

TEST_F(Fleet, ExistingOutputFolderNeedsResume) {
  run(plan, dir.path + "/out", 2);
  EXPECT_THROW(run(plan, dir.path + "/out", 2), UsageError);
  // Resuming a finished run keeps every model and trains nothing again.
  Outcome again = run(plan, dir.path + "/out", 2, nullptr, true);
  for (const auto& r : again.summary.results) EXPECT_EQ(r.status, JobStatus::kDone);
}

TEST_F(Fleet, ResumeRefusesAChangedPlan) {
  run(plan, dir.path + "/out", 2);
  testing_util::write_text(
      plan, testing_util::small_plan("  - name: extra\n    layers:\n      - Flatten: {}\n      - "
                                     "Dense: {units: 3, activation: softmax}\n"));
  try {
    run(plan, dir.path + "/out", 2, nullptr, true);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the plan differs"));
  }
}

TEST_F(Fleet, EarlyStoppingMonitorMustBeComputed) {
  const std::string p = dir.path + "/es.yaml";
  std::string text = testing_util::small_plan();
  text.replace(text.find("  validation_split: 0.2\n"), 24, "");
  testing_util::write_text(p, text);
  try {
    run(p, dir.path + "/out", 1);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("early_stopping.monitor 'val_loss' is not computed; expected one of "
                          "loss, accuracy (validation metrics need data.validation_split > 0)"));
  }
}

// A job killed after its last checkpoint but before its record was written resumes to the same
// result without training further, even when early stopping had ended it early.
TEST_F(Fleet, JobResumedFromItsFinalCheckpointEndsTheSame) {
  const Plan p = load_plan(plan);
  const FleetData data = load_fleet_data(p.data);
  ModelSpec cnn = p.models[2];
  ASSERT_EQ(cnn.name, "cnn");
  // No epoch after the first can improve by 10: early stopping ends training at epoch 2 of 20.
  cnn.epochs = 20;
  cnn.early_stopping->min_delta = 10.0;
  JobContext ctx;
  ctx.seed = p.seed;
  ctx.checkpoint_path = dir.path + "/cnn.ckpt";
  auto model = build_model(cnn, data.input_shape);
  const JobResult first = run_job(cnn, model, data, ctx);
  ASSERT_EQ(first.status, JobStatus::kDone) << first.message;
  ASSERT_TRUE(file_exists(ctx.checkpoint_path));
  EXPECT_EQ(first.epochs, 2);
  const JobResult again = run_job(cnn, model, data, ctx);
  EXPECT_EQ(again.status, JobStatus::kDone);
  EXPECT_EQ(again.epochs, first.epochs);
  EXPECT_EQ(again.metrics, first.metrics);
  EXPECT_EQ(again.best.epoch, first.best.epoch);
}

TEST_F(Fleet, CorruptCheckpointFailsThatModelWithAClearMessage) {
  const Plan p = load_plan(plan);
  const FleetData data = load_fleet_data(p.data);
  JobContext ctx;
  ctx.seed = p.seed;
  ctx.checkpoint_path = dir.path + "/m.ckpt";
  ctx.checkpoint_seconds = 0;  // a checkpoint every epoch, the last one left behind
  auto model = build_model(p.models[0], data.input_shape);
  ASSERT_EQ(run_job(p.models[0], model, data, ctx).status, JobStatus::kDone);
  std::string bytes = read_file(ctx.checkpoint_path);
  for (size_t cut : {bytes.size() / 2, size_t{12}}) {
    write_file_atomic(ctx.checkpoint_path, bytes.substr(0, cut));
    const JobResult r = run_job(p.models[0], model, data, ctx);
    EXPECT_EQ(r.status, JobStatus::kFailed);
    EXPECT_THAT(r.message, HasSubstr("failed to read checkpoint '" + ctx.checkpoint_path + "'"));
    EXPECT_THAT(r.message, HasSubstr("delete it to restart this model from scratch"));
  }
  bytes[bytes.size() / 2] ^= 0x40;  // one flipped bit
  write_file_atomic(ctx.checkpoint_path, bytes);
  EXPECT_THAT(run_job(p.models[0], model, data, ctx).message, HasSubstr("checksum mismatch"));
}

// The automatic split follows the training work per batch; an explicit batch_split wins (up to a
// row per piece); batch statistics are never split.
TEST(BatchPieces, AutomaticForHeavyModelsExplicitWhenSetNeverWithBatchStatistics) {
  auto spec_of = [](std::vector<LayerEntry> layers, int batch_split) {
    ModelSpec s;
    s.name = "m";
    s.batch_size = 32;
    s.batch_split = batch_split;
    s.layers = std::move(layers);
    return s;
  };
  const LayerEntry flatten{"Flatten", Json::object(), ""};
  const std::vector<LayerEntry> small = {flatten, {"Dense", {{"units", 10}}, ""}};
  // m7's convolutions: about 72 MFLOP of training work per sample, 2.3 GFLOP per batch of 32.
  const std::vector<LayerEntry> heavy = {{"Conv2D", {{"filters", 32}, {"kernel_size", 3}}, ""},
                                         {"Conv2D", {{"filters", 64}, {"kernel_size", 3}}, ""},
                                         flatten,
                                         {"Dense", {{"units", 10}}, ""}};
  const std::vector<LayerEntry> with_bn = {heavy[0],
                                           heavy[1],
                                           {"BatchNormalization", Json::object(), ""},
                                           flatten,
                                           {"Dense", {{"units", 10}}, ""}};
  const Shape image{28, 28, 1};
  auto pieces = [&](const ModelSpec& s) {
    return batch_pieces(s, *build_model(s, image), s.batch_size);
  };
  EXPECT_EQ(pieces(spec_of(small, 0)), 1);
  EXPECT_EQ(pieces(spec_of(heavy, 0)), 2);
  EXPECT_EQ(pieces(spec_of(heavy, 1)), 1);
  EXPECT_EQ(pieces(spec_of(small, 4)), 4);
  EXPECT_EQ(pieces(spec_of(small, 100)), 32);
  EXPECT_EQ(pieces(spec_of(with_bn, 0)), 1);
  EXPECT_EQ(pieces(spec_of(with_bn, 4)), 1);
}

}  // namespace
}  // namespace nnfleet
