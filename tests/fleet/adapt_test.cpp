// Keras's adapt() in plans (fleet/fit/adapt.h): a Normalization without mean and variance learns
// them from the training rows before training (never the validation split), the same for any
// worker count; one that is not on a model input is a plan error naming it.
#include "fleet/fit/adapt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "fleet/fit/job.h"
#include "fleet/fleet.h"
#include "fleet/fleet_data.h"
#include "fleet_test_util.h"
#include "layers/preprocessing.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;

// x [n, 3, 2]: features at very different scales and offsets; y in 0..2.
void write_data(const std::string& dir, int n) {
  Array x = Array::zeros(DType::kF32, Shape{n, 3, 2});
  Array y = Array::zeros(DType::kI32, Shape{n});
  Rng r(11);
  auto* xs = static_cast<float*>(x.mutable_data());
  auto* ys = static_cast<int32_t*>(y.mutable_data());
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < 3; ++t) {
      xs[i * 6 + t * 2] = 1000.0f + 250.0f * r.normal();
      xs[i * 6 + t * 2 + 1] = -3.0f + 0.01f * r.normal() + static_cast<float>(t);
    }
    ys[i] = static_cast<int32_t>(r.uniform() * 3) % 3;
  }
  save_npy(dir + "/x.npy", x);
  save_npy(dir + "/y.npy", y);
}

std::string plan_text(const std::string& norm, bool first = true,
                      const std::string& cls = "Normalization") {
  const std::string layers = first ? "      - " + cls + ": " + norm + "\n      - Flatten: {}\n"
                                   : "      - Flatten: {}\n      - " + cls + ": " + norm + "\n";
  return "seed: 3\ndata:\n  train: {x: x.npy, y: y.npy}\n  validation_split: 0.25\n"
         "defaults:\n  epochs: 1\n  batch_size: 8\n  loss: sparse_categorical_crossentropy\n"
         "  optimizer: {SGD: {learning_rate: 0.01}}\nmodels:\n  - name: m\n    layers:\n" +
         layers + "      - Dense: {units: 3, activation: softmax}\n";
}

// The model's first layer's three weights (mean, variance, count) after a run of the plan.
struct Adapted {
  std::vector<float> mean, variance;
  float count = 0;
};

Adapted train_adapted(const std::string& plan_path) {
  const Plan p = load_plan(plan_path);
  const ModelSpec& spec = p.models.back();
  const FleetData data = load_fleet_data(p.data);
  Adapted a;
  JobContext ctx;
  ctx.seed = p.seed;
  ctx.save_model = [&](const Network& net, const ModelSpec&) {
    const auto& specs = net.model().planned(0).params;
    a.mean.assign(net.param(0, 0), net.param(0, 0) + specs[0].shape.size());
    a.variance.assign(net.param(0, 1), net.param(0, 1) + specs[1].shape.size());
    a.count = *net.param(0, 2);
  };
  const JobResult r = run_job(spec, build_model(spec, data.input_shape), data, ctx);
  EXPECT_EQ(r.status, JobStatus::kDone) << r.message;
  return a;
}

// np.mean(x[:n_train], axis=reduce) and np.var (population) of the file's rows, per kept position
// `col(row, t, f)`, computed the plain way.
void expect_stats(const Adapted& a, const std::string& x_path, int64_t n_train, size_t kept,
                  size_t (*col)(int t, int f)) {
  const Array x = load_npy(x_path);
  const auto* xs = static_cast<const float*>(x.data());
  std::vector<double> sum(kept), sq(kept), cnt(kept);
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t i = 0; i < n_train; ++i)
      for (int t = 0; t < 3; ++t)
        for (int f = 0; f < 2; ++f) {
          const size_t c = col(t, f);
          const double v = xs[i * 6 + t * 2 + f];
          if (pass == 0) {
            sum[c] += v;
            cnt[c] += 1;
          } else {
            sq[c] += (v - sum[c] / cnt[c]) * (v - sum[c] / cnt[c]);
          }
        }
  ASSERT_EQ(a.mean.size(), kept);
  for (size_t c = 0; c < kept; ++c) {
    EXPECT_NEAR(a.mean[c], sum[c] / cnt[c], 1e-6 * std::fabs(sum[c] / cnt[c])) << c;
    EXPECT_NEAR(a.variance[c], sq[c] / cnt[c], 1e-5 * (sq[c] / cnt[c])) << c;
  }
  EXPECT_EQ(a.count, static_cast<float>(cnt[0]));
}

TEST(Adapt, NormalizationLearnsTheTrainingRowsMeanAndVariance) {
  TempDir dir;
  write_data(dir.path, 40);  // 30 training rows, 10 validation rows (not adapted over)
  const std::string plan = dir.path + "/plan.yaml";
  testing_util::write_text(plan, plan_text("{}"));  // axis -1: one mean per feature
  expect_stats(train_adapted(plan), dir.path + "/x.npy", 30, 2,
               [](int, int f) { return static_cast<size_t>(f); });
  testing_util::write_text(plan, plan_text("{axis: [1, 2]}"));  // every position its own
  expect_stats(train_adapted(plan), dir.path + "/x.npy", 30, 6,
               [](int t, int f) { return static_cast<size_t>(t * 2 + f); });
  testing_util::write_text(plan, plan_text("{axis: []}"));  // one mean for all
  const Adapted all = train_adapted(plan);
  expect_stats(all, dir.path + "/x.npy", 30, 1, [](int, int) { return size_t{0}; });
  EXPECT_EQ(all.count, 30.0f * 6);
}

TEST(Adapt, ResultsAreBitIdenticalForOneAndTwoWorkers) {
  TempDir dir;
  write_data(dir.path, 40);
  const std::string plan = dir.path + "/plan.yaml";
  testing_util::write_text(plan, plan_text("{}"));
  std::string weights[2];
  for (int w = 1; w <= 2; ++w) {
    FleetOptions o;
    o.out_dir = dir.path + "/w" + std::to_string(w);
    o.workers = w;
    o.mode = Display::Mode::kQuiet;
    const FleetSummary s = run_fleet(load_plan(plan), o, testing_util::raw_io());
    ASSERT_EQ(s.results.back().status, JobStatus::kDone) << s.results.back().message;
    weights[w - 1] = read_file(o.out_dir + "/models/m.bin");
  }
  EXPECT_EQ(weights[0], weights[1]);
}

TEST(Adapt, NormalizationNotOnAModelInputIsAPlanErrorNamingIt) {
  TempDir dir;
  write_data(dir.path, 40);
  const std::string plan = dir.path + "/plan.yaml";
  testing_util::write_text(plan, plan_text("{}", false));
  FleetOptions o;
  o.out_dir = dir.path + "/out";
  o.mode = Display::Mode::kQuiet;
  try {
    run_fleet(load_plan(plan), o, testing_util::raw_io());
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model 'm': layer 1 'normalization' (Normalization) has no "
                                    "mean and variance, so it adapts them"));
    EXPECT_THAT(e.what(), HasSubstr("expected it to take a model input directly, got 'flatten'"));
  }
  // With mean and variance given, the same place is fine: nothing to adapt.
  testing_util::write_text(plan, plan_text("{mean: 1.0, variance: 4.0}", false));
  const FleetSummary s = run_fleet(load_plan(plan), o, testing_util::raw_io());
  EXPECT_EQ(s.results.back().status, JobStatus::kDone) << s.results.back().message;
}

TEST(Adapt, DiscretizationLearnsKerasQuantileBoundariesFromTheTrainingRows) {
  TempDir dir;
  write_data(dir.path, 40);
  const std::string plan = dir.path + "/plan.yaml";
  testing_util::write_text(plan, plan_text("{num_bins: 4}", true, "Discretization"));
  const Plan p = load_plan(plan);
  const FleetData data = load_fleet_data(p.data);
  const std::optional<ModelSpec> spec = adapted_spec(p.models.back(), data);
  ASSERT_TRUE(spec.has_value());
  // The same as discretization_boundaries over the first 30 rows' values (not the validation
  // rows'), which tests/layers checks against Keras's own adapt.
  const Array x = load_npy(dir.path + "/x.npy");
  const auto* xs = static_cast<const float*>(x.data());
  std::vector<float> train(xs, xs + 30 * 6);
  const Json want = discretization_boundaries(train, 4, 0.01);
  EXPECT_EQ(spec->layers[0].config["bin_boundaries"], want);
  EXPECT_EQ(want.size(), 3u);
  FleetOptions o;
  o.out_dir = dir.path + "/out";
  o.mode = Display::Mode::kQuiet;
  const FleetSummary s = run_fleet(p, o, testing_util::raw_io());
  EXPECT_EQ(s.results.back().status, JobStatus::kDone) << s.results.back().message;
}

}  // namespace
}  // namespace nnfleet
