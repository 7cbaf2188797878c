// Fit options of plans end to end (issue 12): ReduceLROnPlateau's reductions in the history as
// Keras logs them, surviving a stop and --resume bit for bit, identical for any worker count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "fleet/fit/job.h"
#include "fleet/fit/lr_plateau.h"
#include "fleet/fleet.h"
#include "fleet/fleet_data.h"
#include "fleet_test_util.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;

const char* const kPlateauModel = R"(  - name: plateau
    epochs: 8
    optimizer: {SGD: {learning_rate: 0.2}}
    reduce_lr_on_plateau: {monitor: val_loss, factor: 0.5, patience: 1, min_delta: 0.02,
                           min_lr: 0.01}
    layers:
      - Flatten: {}
      - Dense: {units: 8, activation: tanh}
      - Dense: {units: 3, activation: softmax}
)";

using FitOptions = testing_util::BlobsPlanTest;

// Sets the stop flag at the end of epoch `at` (1-based) or after batch `batch` of it.
struct StopAt : JobObserver {
  StopAt(int at_epoch, int at_batch) : at(at_epoch), batch(at_batch) {}
  std::atomic<bool>* stop = nullptr;
  int at, batch;
  void on_batch(const ModelSpec&, int epoch, int b, int, double, double, double) override {
    if (epoch == at && b == batch) *stop = true;
  }
  void on_epoch(const ModelSpec&, const EpochRecord& rec) override {
    if (rec.epoch == at && batch == 0) *stop = true;
  }
};

struct Trained {
  JobResult result;
  std::vector<float> params;
  double final_rate = 0;
};

Trained train(const ModelSpec& spec, const FleetData& data, uint64_t seed, const std::string& ckpt,
              StopAt* stop_at = nullptr) {
  std::atomic<bool> stop{false};
  JobContext ctx;
  ctx.seed = seed;
  ctx.checkpoint_path = ckpt;
  ctx.checkpoint_seconds = 1e9;  // only the checkpoints a stop asks for
  if (stop_at) {
    stop_at->stop = &stop;
    ctx.stop = &stop;
    ctx.observer = stop_at;
  }
  Trained t;
  ctx.save_model = [&](const Network& net, const ModelSpec&) {
    t.params.assign(net.params(), net.params() + net.num_params());
    t.final_rate = net.train_spec().optimizer.learning_rate;  // what a saved model holds
  };
  t.result = run_job(spec, build_model(spec, data.input_shape), data, ctx);
  return t;
}

TEST_F(FitOptions, PlateauReducesTheRateAsKerasAndTheHistoryShowsIt) {
  testing_util::write_text(plan, testing_util::small_plan(kPlateauModel));
  const Plan p = load_plan(plan);
  const ModelSpec& spec = p.models.back();
  ASSERT_TRUE(spec.reduce_lr_on_plateau);
  const FleetData data = load_fleet_data(p.data);
  const Trained full = train(spec, data, p.seed, "");
  ASSERT_EQ(full.result.status, JobStatus::kDone) << full.result.message;
  ASSERT_EQ(full.result.history.size(), 8u);
  // The recorded rates are those Keras's rule gives on the recorded val_loss, logged before the
  // epoch's reduction; at least one reduction happened.
  PlateauState st;
  double rate = 0.2;
  int reductions = 0;
  for (const EpochRecord& r : full.result.history) {
    EXPECT_EQ(*find_metric(r.values, "learning_rate"), rate) << "epoch " << r.epoch;
    const double next = plateau_epoch_end(*spec.reduce_lr_on_plateau, false,
                                          *find_metric(r.values, "val_loss"), rate, st);
    reductions += next != rate;
    rate = next;
  }
  EXPECT_GE(reductions, 1);
  EXPECT_EQ(full.final_rate, rate);

  // Stopped at an epoch end and in the middle of an epoch, then resumed: the same run.
  for (auto [at, batch] : {std::pair{2, 0}, std::pair{4, 17}, std::pair{6, 0}}) {
    const std::string ckpt = dir.path + "/plateau" + std::to_string(at) + ".ckpt";
    StopAt stop(at, batch);
    const Trained first = train(spec, data, p.seed, ckpt, &stop);
    ASSERT_EQ(first.result.status, JobStatus::kCancelled) << first.result.message;
    const Trained resumed = train(spec, data, p.seed, ckpt);
    ASSERT_EQ(resumed.result.status, JobStatus::kDone) << resumed.result.message;
    EXPECT_EQ(resumed.result.metrics, full.result.metrics) << at;
    ASSERT_EQ(resumed.result.history.size(), full.result.history.size());
    for (size_t e = 0; e < full.result.history.size(); ++e)
      EXPECT_EQ(resumed.result.history[e].values, full.result.history[e].values) << at << " " << e;
    EXPECT_TRUE(resumed.params == full.params) << "weights differ after a stop at epoch " << at;
    EXPECT_EQ(resumed.final_rate, full.final_rate);
  }
}

TEST_F(FitOptions, PlateauRunsAreBitIdenticalForOneAndTwoWorkers) {
  testing_util::write_text(plan, testing_util::small_plan(kPlateauModel));
  FleetSummary s[2];
  std::string weights[2];
  for (int w = 1; w <= 2; ++w) {
    FleetOptions o;
    o.out_dir = dir.path + "/w" + std::to_string(w);
    o.workers = w;
    o.mode = Display::Mode::kQuiet;
    s[w - 1] = run_fleet(load_plan(plan), o, testing_util::raw_io());
    weights[w - 1] = read_file(o.out_dir + "/models/plateau.bin");
  }
  const ModelResult& a = s[0].results.back();
  ASSERT_EQ(a.name, "plateau");
  EXPECT_EQ(a.status, JobStatus::kDone) << a.message;
  EXPECT_EQ(a.metrics, s[1].results.back().metrics);
  EXPECT_EQ(testing_util::comparable(dir.path + "/w1"), testing_util::comparable(dir.path + "/w2"));
  EXPECT_TRUE(weights[0] == weights[1]);
}

TEST_F(FitOptions, PlateauProblemsAreReportedTogetherWithTheirLines) {
  testing_util::write_text(plan, testing_util::small_plan(R"(  - name: bad
    optimizer: {SGD: {learning_rate: {ExponentialDecay: {initial_learning_rate: 0.1,
                                      decay_steps: 10, decay_rate: 0.5}}}}
    reduce_lr_on_plateau: {monitor: val_auc, factor: 1.5, patience: -1, mode: up, cooldwn: 2}
    layers:
      - Flatten: {}
      - Dense: {units: 3, activation: softmax}
)"));
  try {
    load_plan(plan);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    const std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("6 problem(s)"));
    EXPECT_THAT(m, HasSubstr("plan.yaml:39: models[3].reduce_lr_on_plateau.monitor: "));
    EXPECT_THAT(m, HasSubstr("models[3].reduce_lr_on_plateau.factor: expected a number in [0, 1)"));
    EXPECT_THAT(m, HasSubstr("models[3].reduce_lr_on_plateau.patience: "));
    EXPECT_THAT(m, HasSubstr("models[3].reduce_lr_on_plateau.mode: "));
    EXPECT_THAT(m, HasSubstr("unknown key 'cooldwn'"));
    EXPECT_THAT(m, HasSubstr("models[3].reduce_lr_on_plateau: a learning-rate schedule "
                             "(ExponentialDecay) cannot be reduced on a plateau"));
  }
}

TEST_F(FitOptions, PlateauMonitorMustBeComputed) {
  testing_util::write_text(plan, testing_util::small_plan(R"(  - name: no-val
    data: {train: {x: train_x.npy, y: train_y.npy}}
    reduce_lr_on_plateau: {}
    layers:
      - Flatten: {}
      - Dense: {units: 3, activation: softmax}
)"));
  FleetOptions o;
  o.out_dir = dir.path + "/out";
  o.mode = Display::Mode::kQuiet;
  try {
    run_fleet(load_plan(plan), o, testing_util::raw_io());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("reduce_lr_on_plateau.monitor 'val_loss' is not computed"));
  }
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// Writes weights[n] as an .npy of float32 (or float64) values.
void write_weights(const std::string& path, const std::vector<double>& w,
                   DType dtype = DType::kF32) {
  Array a = Array::zeros(dtype, Shape{static_cast<int64_t>(w.size())});
  for (size_t i = 0; i < w.size(); ++i) {
    if (dtype == DType::kF32)
      static_cast<float*>(a.mutable_data())[i] = static_cast<float>(w[i]);
    else
      static_cast<double*>(a.mutable_data())[i] = w[i];
  }
  save_npy(path, a);
}

std::vector<int32_t> labels_of(const std::string& path) {
  const Array y = load_npy(path);
  std::vector<int32_t> out(static_cast<size_t>(y.rows()));
  for (int64_t i = 0; i < y.rows(); ++i)
    out[static_cast<size_t>(i)] = static_cast<int32_t>(y.at(i));
  return out;
}

// One small model on the blobs data with `extra` plan keys and `source` as its training data.
std::string weighted_plan(const std::string& models) {
  return R"(seed: 3
defaults:
  epochs: 2
  batch_size: 16
  optimizer: {SGD: {learning_rate: 0.1}}
  layers:
    - Flatten: {}
    - Dense: {units: 3, activation: softmax}
models:
)" + models;
}

FleetSummary run_quiet(const std::string& plan, const std::string& out,
                       std::map<std::string, std::string>* weights = nullptr) {
  FleetOptions o;
  o.out_dir = out;
  o.workers = 2;
  o.mode = Display::Mode::kQuiet;
  FleetSummary s = run_fleet(load_plan(plan), o, testing_util::raw_io());
  if (weights)
    for (const auto& r : s.results)
      (*weights)[r.name] = read_file(out + "/models/" + r.name + ".bin");
  return s;
}

TEST_F(FitOptions, ClassWeightTrainsAsTheSampleWeightsKerasMakesOfIt) {
  const std::vector<int32_t> y = labels_of(dir.path + "/train_y.npy");
  const float cw[3] = {2.5f, 1.0f, 0.25f};
  std::vector<double> by_class, ones(y.size(), 1.0);
  for (int32_t c : y) by_class.push_back(cw[c]);
  write_weights(dir.path + "/w_class.npy", by_class, DType::kF64);
  write_weights(dir.path + "/w_ones.npy", ones);
  // Each variant trains a model of the same name (its initial weights and shuffles derive from
  // the seed and the name), in a run of its own.
  struct Trained {
    ModelResult result;
    std::string weights;
  };
  auto train = [&](const std::string& entry, const std::string& tag) {
    testing_util::write_text(plan, weighted_plan("  - name: m\n" + entry));
    std::map<std::string, std::string> w;
    const FleetSummary s = run_quiet(plan, dir.path + "/out_" + tag, &w);
    EXPECT_EQ(s.results[0].status, JobStatus::kDone) << tag << ": " << s.results[0].message;
    return Trained{s.results[0], w["m"]};
  };
  const Trained t_plain = train(
      "    data: {train: {x: train_x.npy, y: train_y.npy}, validation_split: 0.25}\n", "plain");
  const Trained t_ones = train(
      "    data: {train: {x: train_x.npy, y: train_y.npy, sample_weight: w_ones.npy},\n"
      "           validation_split: 0.25}\n",
      "ones");
  const Trained t_by_class = train(
      "    class_weight: {0: 2.5, 2: 0.25}\n"
      "    data: {train: {x: train_x.npy, y: train_y.npy}, validation_split: 0.25}\n",
      "class");
  const Trained t_sample = train(
      "    data: {train: {x: train_x.npy, y: train_y.npy, sample_weight: w_class.npy},\n"
      "           validation_split: 0.25}\n",
      "sample");
  // Weights of one change nothing.
  EXPECT_EQ(t_ones.result.metrics, t_plain.result.metrics);
  EXPECT_TRUE(t_ones.weights == t_plain.weights);
  // class_weight is the per-sample weight of each row's class (class 1 unlisted: 1) in training,
  // so it trains exactly as those sample weights do; only the validation split differs: Keras
  // weighs it with sample_weight but never with class_weight.
  EXPECT_TRUE(t_by_class.weights == t_sample.weights);
  EXPECT_FALSE(t_by_class.weights == t_plain.weights);
  const Metrics& c = t_by_class.result.metrics;
  const Metrics& p = t_sample.result.metrics;
  ASSERT_TRUE(find_metric(c, "loss") && find_metric(p, "loss"));
  EXPECT_EQ(*find_metric(c, "loss"), *find_metric(p, "loss"));
  ASSERT_TRUE(find_metric(c, "val_loss") && find_metric(p, "val_loss"));
  EXPECT_NE(*find_metric(c, "val_loss"), *find_metric(p, "val_loss"));
}

TEST_F(FitOptions, WeightedValidationLossIsTheKerasMeanOverTheBatchSize) {
  // Weights 0 on every validation row: Keras's sum_over_batch_size divides the weighted sum by
  // the number of samples (not by the weights' sum), so val_loss is 0, not NaN.
  const std::vector<int32_t> y = labels_of(dir.path + "/train_y.npy");
  std::vector<double> w(y.size(), 1.0);
  for (size_t i = 900; i < w.size(); ++i) w[i] = 0.0;
  write_weights(dir.path + "/w.npy", w);
  testing_util::write_text(plan, weighted_plan(R"(  - name: zero-val
    data: {train: {x: train_x.npy, y: train_y.npy, sample_weight: w.npy}, validation_split: 0.25}
)"));
  const FleetSummary s = run_quiet(plan, dir.path + "/out");
  ASSERT_EQ(s.results[0].status, JobStatus::kDone) << s.results[0].message;
  EXPECT_EQ(*find_metric(s.results[0].metrics, "val_loss"), 0.0);
}

TEST_F(FitOptions, BadSampleWeightsAreRefusedWithTheFileAndSample) {
  const size_t n = labels_of(dir.path + "/train_y.npy").size();
  struct Case {
    std::vector<double> w;
    const char* message;
  };
  std::vector<double> nan(n, 1.0), neg(n, 1.0);
  nan[7] = NAN;
  neg[9] = -0.5;
  const std::vector<Case> cases = {
      {std::vector<double>(n - 1, 1.0), "expected 1200 weights (the rows of x), got 1199"},
      {nan, "bad weight at sample 7; expected a finite number >= 0, got nan"},
      {neg, "bad weight at sample 9; expected a finite number >= 0, got -0.5"}};
  for (const Case& c : cases) {
    write_weights(dir.path + "/w.npy", c.w);
    testing_util::write_text(plan, weighted_plan(R"(  - name: m
    data: {train: {x: train_x.npy, y: train_y.npy, sample_weight: w.npy}}
)"));
    try {
      run_quiet(plan, dir.path + "/out");
      ADD_FAILURE() << "expected a DataError for " << c.message;
    } catch (const DataError& e) {
      EXPECT_THAT(e.what(), HasSubstr("failed to load sample weights '" + dir.path + "/w.npy'"));
      EXPECT_THAT(e.what(), HasSubstr(c.message));
    }
  }
}

TEST_F(FitOptions, ClassWeightProblemsAreReportedWithTheirFields) {
  testing_util::write_text(plan, weighted_plan(R"(  - name: m
    class_weight: {zero: 1.0, 1: -2, 2: .inf}
    data: {train: {x: train_x.npy, y: train_y.npy}}
  - name: csv
    data: {train: {csv: t.csv, label: y, sample_weight: w.npy}}
)"));
  try {
    load_plan(plan);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    const std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("plan.yaml:11: models[0].class_weight.zero: bad class index; expected "
                             "a non-negative integer, got \"zero\""));
    EXPECT_THAT(m, HasSubstr("models[0].class_weight.1: expected a finite number >= 0"));
    EXPECT_THAT(m, HasSubstr("models[0].class_weight.2: expected a finite number >= 0"));
    EXPECT_THAT(m, HasSubstr("models[1].data.train.sample_weight: unknown key 'sample_weight'"));
  }
}

TEST_F(FitOptions, ClassWeightWithSampleWeightIsRefusedAsInKeras) {
  write_weights(dir.path + "/w.npy", std::vector<double>(1200, 1.0));
  testing_util::write_text(plan, weighted_plan(R"(  - name: both
    class_weight: {0: 2}
    data: {train: {x: train_x.npy, y: train_y.npy, sample_weight: w.npy}}
)"));
  try {
    run_quiet(plan, dir.path + "/out");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("model 'both': class_weight with a sample_weight data source"));
  }
}

}  // namespace
}  // namespace nnfleet
