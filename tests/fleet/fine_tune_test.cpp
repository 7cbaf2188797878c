// Fine-tuning Keras files: the done-when test of issue 12 (a Keras file with regularizers, a
// frozen nested base and a learning-rate schedule trains with the loss, val_loss and
// learning-rate history Keras would show; fixtures by tools/make_finetune_golden_fixtures.py,
// computed with PyTorch in float64 with Keras's formulas), the plan's freeze / unfreeze_from on
// the Teachable-Machine-style nested real file, and their plan errors.
#include "fleet/fit/fine_tune.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "../io/io_test_util.h"
#include "fleet/fit/job.h"
#include "fleet/fleet_data.h"
#include "fleet_test_util.h"
#include "io/keras/keras_reader.h"
#include "io/keras/keras_writer.h"

namespace nnfleet {
namespace {

using testing::HasSubstr;
using testing_util::TempDir;
using testing_util::write_text;

std::string golden(const std::string& name) {
  return std::string(NNFLEET_SOURCE_DIR) + "/tests/fleet/fixtures/finetune/" + name;
}

struct Trained {
  JobResult result;
  std::shared_ptr<const Model> model;
  std::vector<float> before, after;  // Network::params() layout of `model`
};

// Loads the plan's single model from its Keras file, applies its fine-tuning keys and trains it.
Trained train_plan(const std::string& yaml, const TempDir& dir) {
  write_text(dir.path + "/plan.yaml", yaml);
  const Plan plan = load_plan(dir.path + "/plan.yaml");
  const ModelSpec& s = plan.models.at(0);
  const FleetData data = load_fleet_data(plan.data);
  LoadedModel lm = load_keras_model(s.keras, "", &data.input_shape);
  Trained t;
  t.before = lm.params;
  t.model = apply_fine_tuning(s, lm.model, t.before);
  JobContext ctx;
  ctx.seed = plan.seed;
  ctx.save_model = [&](const Network& net, const ModelSpec&) {
    t.after.assign(net.params(), net.params() + net.num_params());
  };
  t.result = run_job(s, t.model, data, ctx, &t.before);
  return t;
}

const float* layer_param(const Trained& t, const std::vector<float>& p, const std::string& layer,
                         size_t j) {
  const auto off = param_layout(*t.model);
  for (size_t i = 0; i < t.model->num_layers(); ++i)
    if (t.model->layer(i).name() == layer) return p.data() + off[i][j];
  ADD_FAILURE() << "no layer " << layer;
  return p.data();
}

TEST(FineTune, KerasFileWithRegularizersFrozenBaseAndScheduleMatchesKerasHistory) {
  TempDir dir;
  const Trained t = train_plan(
      "seed: 1\n"
      "data: {train: {x: " +
          golden("x.npy") + ", y: " + golden("y.npy") +
          "}, validation_split: 0.2}\n"
          "models:\n"
          "  - name: ft\n"
          "    keras: " +
          golden("finetune.keras") +
          "\n"
          "    epochs: 3\n"
          "    batch_size: 5\n"
          "    shuffle: false\n"
          "    metrics: []\n"
          "    optimizer: {Adam: {learning_rate: {ExponentialDecay: {initial_learning_rate: 0.02,\n"
          "                decay_steps: 3, decay_rate: 0.5}}}}\n",
      dir);
  ASSERT_EQ(t.result.status, JobStatus::kDone) << t.result.message;
  const Json want = Json::parse(testing_util::read_text(golden("history.json")));
  ASSERT_EQ(t.result.history.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    const Metrics& got = t.result.history[e].values;
    for (const char* k : {"loss", "val_loss", "learning_rate"}) {
      const double* v = find_metric(got, k);
      ASSERT_NE(v, nullptr) << k;
      const double w = want[k][e].get<double>();
      EXPECT_NEAR(*v, w, 2e-5 * std::fabs(w)) << k << " at epoch " << e + 1;
    }
  }
  // The frozen base (Dense and BatchNormalization with its moving statistics): bit for bit.
  EXPECT_EQ(t.model->trainable_params(), 8u * 5 + 5 + 5 * 3 + 3);
  const size_t n_trainable = t.model->trainable_params();
  ASSERT_EQ(t.after.size(), t.before.size());
  for (size_t i = n_trainable; i < t.after.size(); ++i)
    ASSERT_EQ(t.after[i], t.before[i]) << "frozen parameter " << i;
  const struct {
    const char* layer;
    size_t j;
    const char* key;
  } heads[] = {{"hidden", 0, "hidden_kernel"},
               {"hidden", 1, "hidden_bias"},
               {"out", 0, "out_kernel"},
               {"out", 1, "out_bias"}};
  for (const auto& h : heads) {
    const float* got = layer_param(t, t.after, h.layer, h.j);
    const Json& w = want["final"][h.key];
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(got[i], w[i].get<double>(), 1e-4 * std::fabs(w[i].get<double>()) + 1e-6)
          << h.key << "[" << i << "]";
  }
}

TEST(FineTuneRealFile, TeachableMachineNestedModelKeepsItsBaseBitForBit) {
  TempDir dir;
  // 24 random 28x28 images in [0, 1) and labels 0..9.
  Array x = Array::zeros(DType::kF32, Shape{24, 28, 28});
  Array y = Array::zeros(DType::kI32, Shape{24});
  Rng r(9);
  for (int64_t i = 0; i < 24 * 784; ++i) static_cast<float*>(x.mutable_data())[i] = r.uniform();
  for (int i = 0; i < 24; ++i) static_cast<int32_t*>(y.mutable_data())[i] = i % 10;
  save_npy(dir.path + "/x.npy", x);
  save_npy(dir.path + "/y.npy", y);
  const std::string file = test::fixture("fmnist_mlp_nested_tf214.keras");
  const Trained t = train_plan(
      "data: {train: {x: x.npy, y: y.npy}}\n"
      "models:\n"
      "  - name: tm\n"
      "    keras: " +
          file +
          "\n"
          "    unfreeze_from: dense_1\n"
          "    epochs: 2\n"
          "    batch_size: 8\n",
      dir);
  ASSERT_EQ(t.result.status, JobStatus::kDone) << t.result.message;
  // dense (784x128 + 128) is frozen, dense_1 (128x10 + 10) trains.
  EXPECT_EQ(t.model->trainable_params(), 128u * 10 + 10);
  const LoadedModel lm = load_keras_model(file);
  const float* k0 = layer_param(t, t.after, "dense", 0);
  const auto off = param_layout(*lm.model);
  size_t dense = 0;
  for (size_t i = 0; i < lm.model->num_layers(); ++i)
    if (lm.model->layer(i).name() == "dense") dense = i;
  const float* k_file = lm.params.data() + off[dense][0];
  for (size_t i = 0; i < 784 * 128; ++i) ASSERT_EQ(k0[i], k_file[i]) << "dense kernel " << i;
  // dense_1 trains: every bias entry moves (softmax minus one-hot is never 0), and the kernel
  // rows of the hidden units this random data does not leave dead (446 of 1280 entries here).
  const float* b1_after = layer_param(t, t.after, "dense_1", 1);
  const float* b1_before = layer_param(t, t.before, "dense_1", 1);
  for (size_t i = 0; i < 10; ++i) EXPECT_NE(b1_after[i], b1_before[i]) << "dense_1 bias " << i;
  const float* k1_after = layer_param(t, t.after, "dense_1", 0);
  const float* k1_before = layer_param(t, t.before, "dense_1", 0);
  int moved = 0;
  for (size_t i = 0; i < 128 * 10; ++i) moved += k1_after[i] != k1_before[i];
  EXPECT_GT(moved, 0) << "of 1280 dense_1 kernel entries";
  // Written back, the frozen layers say so; the trainable one has optimizer slots only.
  Network net(t.model, 8,
              TrainSpec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("adam")});
  std::copy(t.after.begin(), t.after.end(), net.params());
  save_keras(dir.path + "/tm.keras", *t.model, net.params(), keras_save_info(net));
  const LoadedModel back = load_keras_model(dir.path + "/tm.keras");
  EXPECT_EQ(back.model->trainable_params(), 128u * 10 + 10);
  EXPECT_EQ(back.optimizer_state_info["variables"], 2 + 2 * 2);  // iterations, rate, m/v x 2
}

TEST(FineTune, PlanFreezeErrorsAreReportedTogetherWithTheirPlanLines) {
  TempDir dir;
  write_text(dir.path + "/plan.yaml", "data: {train: {x: " + golden("x.npy") +
                                          ", y: " + golden("y.npy") +
                                          "}}\n"
                                          "models:\n"
                                          "  - name: ft\n"
                                          "    keras: " +
                                          golden("finetune.keras") +
                                          "\n"
                                          "    freeze: [hidden, nope, 7]\n"
                                          "    unfreeze_from: missing\n");
  const Plan plan = load_plan(dir.path + "/plan.yaml");
  std::vector<float> params;
  const LoadedModel lm = load_keras_model(golden("finetune.keras"));
  try {
    apply_fine_tuning(plan.models[0], lm.model, params);
    ADD_FAILURE() << "unknown names were accepted";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("plan.yaml:5: models[0].freeze[1]: no layer or nested model "
                                    "'nope'"));
    EXPECT_THAT(e.what(), HasSubstr("plan.yaml:5: models[0].freeze[2]: layer index 7 is out of "
                                    "range"));
    EXPECT_THAT(e.what(), HasSubstr("plan.yaml:6: models[0].unfreeze_from: no layer or nested "
                                    "model 'missing'"));
    EXPECT_THAT(e.what(), HasSubstr("0: base, 1: hidden, 2: out"));
  }
  // freeze on a plan's own layers is refused while the plan loads.
  write_text(dir.path + "/bad.yaml", "data: {train: {x: " + golden("x.npy") +
                                         ", y: " + golden("y.npy") +
                                         "}}\n"
                                         "models:\n"
                                         "  - name: own\n"
                                         "    layers: [Dense: {units: 3}]\n"
                                         "    freeze: [0]\n");
  try {
    load_plan(dir.path + "/bad.yaml");
    ADD_FAILURE() << "freeze without keras: was accepted";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.yaml:5: models[0].freeze: freeze applies to a `keras:` "
                                    "model"));
  }
}

TEST(FineTune, FreezeByIndexAndNameFreezesNestedModels) {
  const LoadedModel lm = load_keras_model(golden("finetune.keras"));
  EXPECT_EQ(lm.model->trainable_params(), 8u * 5 + 5 + 5 * 3 + 3);  // the file's base is frozen
  ModelSpec s;
  s.keras = golden("finetune.keras");
  s.unfreeze_from = "base";  // everything trains
  s.unfreeze_from_where = "p.yaml:1: unfreeze_from";
  std::vector<float> params = lm.params;
  auto open = apply_fine_tuning(s, lm.model, params);
  EXPECT_EQ(open->trainable_params(), 6u * 8 + 8 + 8 + 8 + 8 * 5 + 5 + 5 * 3 + 3);
  // The weights moved with their layers into the new layout.
  const auto a = param_layout(*lm.model), b = param_layout(*open);
  for (size_t i = 0; i < open->num_layers(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j)
      EXPECT_EQ(params[b[i][j]], lm.params[a[i][j]]) << i << "," << j;
  s.unfreeze_from.clear();
  s.freeze = {Json(2), Json("hidden")};
  s.freeze_where = {"p.yaml:2: freeze[0]", "p.yaml:2: freeze[1]"};
  auto frozen = apply_fine_tuning(s, open, params);
  EXPECT_EQ(frozen->trainable_params(), 6u * 8 + 8 + 8 + 8);
  EXPECT_TRUE(frozen->training(2).frozen && frozen->training(3).frozen);
}

}  // namespace
}  // namespace nnfleet
