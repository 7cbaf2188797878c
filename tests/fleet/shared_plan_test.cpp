// Shared layers in plans (issue 35): "- call: <name>" applies an earlier layer again with its
// weights; such a model trains, gives the same bits for one and two workers (its batches split
// into pieces), and a call of an unknown layer is a plan problem naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/fit/job.h"
#include "fleet/fleet.h"
#include "fleet/fleet_data.h"
#include "fleet_test_util.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;

// The blobs data of small_plan() with one model whose Dense 'tied' is applied twice.
std::string tied_plan(const std::string& call) {
  return R"(seed: 7
data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
  validation_split: 0.2
defaults:
  epochs: 3
  batch_size: 16
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
  optimizer: {Adam: {learning_rate: 0.01}}
models:
  - name: tied
    batch_split: 3  # pieces computed by whichever worker is free: results must not change
    layers:
      - Flatten: {}
      - Dense: {units: 8, name: proj}
      - Dense: {units: 8, activation: tanh, name: tied}
      - call: )" +
         call + R"(
      - Dense: {units: 3, activation: softmax}
)";
}

using SharedPlan = testing_util::BlobsPlanTest;

TEST_F(SharedPlan, CallAppliesANamedLayerAgainWithItsWeights) {
  testing_util::write_text(plan, tied_plan("tied"));
  const Plan p = load_plan(plan);
  ASSERT_EQ(p.models.size(), 1u);
  const ModelSpec& spec = p.models[0];
  ASSERT_EQ(spec.layers.size(), 5u);
  EXPECT_EQ(spec.layers[3].call, "tied");
  const FleetData data = load_fleet_data(p.data);
  const auto model = build_model(spec, data.input_shape);
  EXPECT_EQ(model->shares(3), 2);
  EXPECT_EQ(model->layer(3).name(), "tied");
  const size_t in = static_cast<size_t>(data.input_shape.size());
  // proj, tied (once) and the softmax layer.
  EXPECT_EQ(model->trainable_params(), (in * 8 + 8) + (8 * 8 + 8) + (8 * 3 + 3));
}

TEST_F(SharedPlan, RunsAreBitIdenticalForOneAndTwoWorkers) {
  testing_util::write_text(plan, tied_plan("tied"));
  FleetSummary s[2];
  std::string weights[2];
  for (int w = 1; w <= 2; ++w) {
    FleetOptions o;
    o.out_dir = dir.path + "/w" + std::to_string(w);
    o.workers = w;
    o.mode = Display::Mode::kQuiet;
    s[w - 1] = run_fleet(load_plan(plan), o, testing_util::raw_io());
    weights[w - 1] = read_file(o.out_dir + "/models/tied.bin");
  }
  const ModelResult& a = s[0].results.back();
  ASSERT_EQ(a.name, "tied");
  EXPECT_EQ(a.status, JobStatus::kDone) << a.message;
  EXPECT_EQ(a.metrics, s[1].results.back().metrics);
  EXPECT_EQ(testing_util::comparable(dir.path + "/w1"), testing_util::comparable(dir.path + "/w2"));
  EXPECT_TRUE(weights[0] == weights[1]);
  EXPECT_FALSE(weights[0].empty());
}

TEST_F(SharedPlan, CallOfAnUnknownLayerIsAPlanProblemNamingTheField) {
  testing_util::write_text(plan, tied_plan("nope"));
  try {
    load_plan(plan);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan.yaml:19: models[0].layers[3].call"));
    EXPECT_THAT(e.what(), HasSubstr("expected the name of an earlier layer"));
    EXPECT_THAT(e.what(), HasSubstr("tied"));
  }
}

}  // namespace
}  // namespace nnfleet
