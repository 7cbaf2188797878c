// Per-timestep targets in plans: labels [N,T] for sparse_categorical_crossentropy, one-hot
// [N,T,C] for categorical_crossentropy and [N,T,F] regression targets on return_sequences models;
// a mask that reaches the output (Embedding(mask_zero) -> LSTM -> Dense) keeps padded steps out of
// the loss and the metrics; label arrays of the wrong shape or range are refused before training.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/fleet.h"
#include "fleet_test_util.h"
#include "plan/plan.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::write_text;

constexpr int kT = 6;

// A tagging task: ids in 1..4 padded with 0 after a random length, and each step's class
// (id - 1) % 3. Padded steps get random classes that no model could predict: they count only
// when the mask is ignored. Also the one-hot labels and a float copy of the ids [N,T,1] with a
// regression target 0.5 * id per step.
void write_tagging(const std::string& dir, const std::string& stem, int n, uint64_t seed) {
  Array ids = Array::zeros(DType::kF32, Shape{n, kT});
  Array feat = Array::zeros(DType::kF32, Shape{n, kT, 1});
  Array reg = Array::zeros(DType::kF32, Shape{n, kT, 1});
  Array y = Array::zeros(DType::kI32, Shape{n, kT});
  Array onehot = Array::zeros(DType::kF32, Shape{n, kT, 3});
  Rng r(seed);
  auto* xs = static_cast<float*>(ids.mutable_data());
  auto* fs = static_cast<float*>(feat.mutable_data());
  auto* rs = static_cast<float*>(reg.mutable_data());
  auto* ys = static_cast<int32_t*>(y.mutable_data());
  auto* os = static_cast<float*>(onehot.mutable_data());
  for (int i = 0; i < n; ++i) {
    const int len = 2 + static_cast<int>(r.below(kT - 1));
    for (int t = 0; t < kT; ++t) {
      const int id = t < len ? 1 + static_cast<int>(r.below(4)) : 0;
      const int c = id > 0 ? (id - 1) % 3 : static_cast<int>(r.below(3));
      xs[i * kT + t] = fs[i * kT + t] = static_cast<float>(id);
      rs[i * kT + t] = 0.5f * static_cast<float>(id);
      ys[i * kT + t] = c;
      os[(i * kT + t) * 3 + c] = 1.0f;
    }
  }
  save_npy(dir + "/" + stem + "_ids.npy", ids);
  save_npy(dir + "/" + stem + "_feat.npy", feat);
  save_npy(dir + "/" + stem + "_reg.npy", reg);
  save_npy(dir + "/" + stem + "_y.npy", y);
  save_npy(dir + "/" + stem + "_onehot.npy", onehot);
  // Labels of the wrong shape: one per sample, and classes out of range.
  Array flat = Array::zeros(DType::kI32, Shape{n});
  save_npy(dir + "/" + stem + "_flat.npy", flat);
  for (int64_t i = 0; i < y.shape().size(); ++i) ys[i] = 3;
  save_npy(dir + "/" + stem + "_big.npy", y);
}

class SequenceTargets : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tagging(dir.path, "train", 240, 1);
    write_tagging(dir.path, "test", 80, 2);
  }
  std::string write(const std::string& text) const {
    const std::string p = dir.path + "/plan.yaml";
    write_text(p, text);
    return p;
  }
  FleetOptions options() const {
    FleetOptions o;
    o.out_dir = dir.path + "/out";
    o.workers = 2;
    o.mode = Display::Mode::kQuiet;
    return o;
  }
  // One model on (x, y) train/test files with `loss` and `layers`.
  static std::string plan(const std::string& x, const std::string& y, const std::string& loss,
                          const std::string& layers, const std::string& metrics = "[accuracy]") {
    return "seed: 5\ndata:\n  train: {x: train_" + x + ".npy, y: train_" + y +
           ".npy}\n  test: {x: test_" + x + ".npy, y: test_" + y +
           ".npy}\nmodels:\n  - name: m\n    epochs: 25\n    batch_size: 16\n    loss: " + loss +
           "\n    metrics: " + metrics +
           "\n    optimizer: {Adam: {learning_rate: 0.03}}\n    layers:\n" + layers;
  }
  std::map<std::string, double> metrics_of(const std::string& out) const {
    const Json r = Json::parse(read_file(out + "/results.json"));
    std::map<std::string, double> m;
    EXPECT_EQ(r["models"][0]["status"], "done") << r.dump();
    for (auto it = r["models"][0]["metrics"].begin(); it != r["models"][0]["metrics"].end(); ++it)
      m[it.key()] = it.value().get<double>();
    return m;
  }
  TempDir dir;
};

const char* const kMaskedTagger =
    "      - Embedding: {input_dim: 5, output_dim: 4, mask_zero: true}\n"
    "      - LSTM: {units: 8, return_sequences: true}\n"
    "      - Dense: {units: 3, activation: softmax}\n";

// The padded steps' random classes would cap the accuracy near 0.8 if they counted.
TEST_F(SequenceTargets, MaskedTaggerLearnsAndCountsOnlyKeptSteps) {
  run_fleet(load_plan(write(plan("ids", "y", "sparse_categorical_crossentropy", kMaskedTagger))),
            options(), ModelIo{});
  const auto m = metrics_of(dir.path + "/out");
  EXPECT_GT(m.at("test_accuracy"), 0.97);
  EXPECT_LT(m.at("test_loss"), 0.2);
}

TEST_F(SequenceTargets, OneHotPerTimestepTargetsTrainWithCategoricalCrossentropy) {
  run_fleet(load_plan(write(plan("ids", "onehot", "categorical_crossentropy", kMaskedTagger))),
            options(), ModelIo{});
  EXPECT_GT(metrics_of(dir.path + "/out").at("test_accuracy"), 0.97);
}

TEST_F(SequenceTargets, SequenceRegressionTrainsWithMeanSquaredError) {
  run_fleet(load_plan(write(plan("feat", "reg", "mean_squared_error",
                                 "      - LSTM: {units: 8, return_sequences: true}\n"
                                 "      - Dense: {units: 1}\n",
                                 "[mae]"))),
            options(), ModelIo{});
  EXPECT_LT(metrics_of(dir.path + "/out").at("test_loss"), 0.05);
}

std::string error_of(const std::string& plan_path, const FleetOptions& o) {
  try {
    run_fleet(load_plan(plan_path), o, ModelIo{});
  } catch (const PlanError& e) {
    EXPECT_FALSE(file_exists(o.out_dir)) << "nothing may be written";
    return e.what();
  }
  ADD_FAILURE() << "expected a PlanError";
  return "";
}

TEST_F(SequenceTargets, OneLabelPerSampleForAPerTimestepOutputIsRefused) {
  const std::string e = error_of(
      write(plan("ids", "flat", "sparse_categorical_crossentropy", kMaskedTagger)), options());
  EXPECT_THAT(e, HasSubstr("sparse_categorical_crossentropy needs one integer label per timestep "
                           "of the output [6,3]; expected y samples of shape [6] or [6,1], got y "
                           "samples of shape []"));
}

TEST_F(SequenceTargets, PerTimestepLabelsOutOfRangeAreRefused) {
  const std::string e = error_of(
      write(plan("ids", "big", "sparse_categorical_crossentropy", kMaskedTagger)), options());
  EXPECT_THAT(e, HasSubstr("expected integers in 0..2 (the model outputs 3 classes per timestep), "
                           "got labels 3..3"));
}

TEST_F(SequenceTargets, IntegerLabelsWithCategoricalCrossentropyPointToTheSparseLoss) {
  const std::string e =
      error_of(write(plan("ids", "y", "categorical_crossentropy", kMaskedTagger)), options());
  EXPECT_THAT(e, HasSubstr("expected y samples of 18 values (output [6,3]), got [6]; for integer "
                           "class labels use loss: sparse_categorical_crossentropy"));
}

}  // namespace
}  // namespace nnfleet
