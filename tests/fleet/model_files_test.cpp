// The per-model file work of a fleet, held down without timing it: the models of one
// architecture get their weights file from libhdf5 once (h5::Builder's template), not once each,
// and each record's hash is the hash of the file as written, which --resume then trusts. With
// --format onnx, a model ONNX cannot express is refused before training, and an export failing
// after training keeps the .keras file and is not trained again.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "api/model_io.h"
#include "data/dataset.h"
#include "fleet/fleet.h"
#include "fleet_test_util.h"
#include "io/keras/h5_builder.h"
#include "io/keras/keras_reader.h"
#include "platform/files.h"
#include "tensor/rng.h"

namespace nnfleet {
namespace {

using testing_util::TempDir;
using testing_util::write_text;

// Two architectures (units 2 and 3) times nine learning rates; every name is as long as the
// others ("m-2-0.011"), so each architecture makes one structure.
constexpr const char* kPlan = R"(seed: 5
data: {train: {x: x.npy, y: y.npy}}
defaults: {epochs: 1, batch_size: 8, loss: sparse_categorical_crossentropy}
models:
  - name: m-{u}-{lr}
    grid: {u: [2, 3], lr: [0.011, 0.012, 0.013, 0.014, 0.015, 0.016, 0.017, 0.018, 0.019]}
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers: [Dense: {units: "{u}", activation: relu}, Dense: {units: 3, activation: softmax}]
)";

class ModelFiles : public testing::Test {
 protected:
  void SetUp() override {
    Array x = Array::zeros(DType::kF32, Shape{24, 4});
    Array y = Array::zeros(DType::kI32, Shape{24});
    Rng r(3);
    for (int64_t i = 0; i < 24 * 4; ++i) static_cast<float*>(x.mutable_data())[i] = r.uniform();
    for (int i = 0; i < 24; ++i) static_cast<int32_t*>(y.mutable_data())[i] = i % 3;
    save_npy(dir.path + "/x.npy", x);
    save_npy(dir.path + "/y.npy", y);
    write_text(dir.path + "/plan.yaml", kPlan);
  }
  FleetSummary run(bool resume) {
    FleetOptions o;
    o.out_dir = dir.path + "/out";
    o.workers = 1;
    o.resume = resume;
    o.mode = Display::Mode::kQuiet;
    return run_fleet(load_plan(dir.path + "/plan.yaml"), o,
                     api_detail::model_io(api_detail::ModelFormat::kKeras));
  }
  TempDir dir;
};

TEST_F(ModelFiles, OneArchitectureGetsItsWeightsFileFromLibhdf5Once) {
  const h5::Builder::Counts before = h5::Builder::counts();
  const FleetSummary s = run(false);
  ASSERT_EQ(s.results.size(), 18u);
  const h5::Builder::Counts after = h5::Builder::counts();
  EXPECT_EQ(after.by_hdf5 - before.by_hdf5, 2u);
  EXPECT_EQ(after.from_template - before.from_template, 16u);
  for (const ModelResult& r : s.results) {
    ASSERT_EQ(r.status, JobStatus::kDone) << r.name << ": " << r.message;
    const LoadedModel m = load_keras_model(dir.path + "/out/models/" + r.name + ".keras");
    EXPECT_EQ(m.model->name(), r.name);
    EXPECT_TRUE(m.has_weights);
  }
  // The records' hashes (taken from the bytes in memory) are the files' own: a resume finds
  // every model finished and trains none again.
  const FleetSummary again = run(true);
  ASSERT_EQ(again.results.size(), 18u);
  EXPECT_EQ(h5::Builder::counts().by_hdf5 + h5::Builder::counts().from_template,
            after.by_hdf5 + after.from_template);
  for (const ModelResult& r : again.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
}

// A model ONNX cannot express (a masked LSTM returning sequences: Keras repeats the last kept
// output at masked steps, ONNX writes zeros) beside one it can, on integer ids.
constexpr const char* kOnnxPlan = R"(seed: 5
data: {train: {x: ids.npy, y: y.npy}}
defaults: {epochs: 2, batch_size: 8, loss: sparse_categorical_crossentropy}
models:
  - name: dense
    layers: [Dense: {units: 3, activation: softmax}]
  - name: masked-lstm
    layers:
      - Embedding: {input_dim: 5, output_dim: 3, mask_zero: true}
      - LSTM: {units: 4, return_sequences: true}
      - GlobalAveragePooling1D: {}
      - Dense: {units: 3, activation: softmax}
)";

// Counts the epochs every model trains.
struct EpochCounter : JobObserver {
  std::atomic<int> epochs{0};
  void on_batch(const ModelSpec&, int, int, int, double, double, double) override {}
  void on_epoch(const ModelSpec&, const EpochRecord&) override { ++epochs; }
};

class OnnxFormat : public testing::Test {
 protected:
  void SetUp() override {
    Array x = Array::zeros(DType::kI32, Shape{24, 6});
    Array y = Array::zeros(DType::kI32, Shape{24});
    Rng r(4);
    for (int64_t i = 0; i < 24 * 6; ++i)
      static_cast<int32_t*>(x.mutable_data())[i] = static_cast<int32_t>(r.below(5));
    for (int i = 0; i < 24; ++i) static_cast<int32_t*>(y.mutable_data())[i] = i % 3;
    save_npy(dir.path + "/ids.npy", x);
    save_npy(dir.path + "/y.npy", y);
    write_text(dir.path + "/plan.yaml", kOnnxPlan);
  }
  FleetSummary run(const ModelIo& io, bool resume = false) {
    FleetOptions o;
    o.out_dir = out();
    o.workers = 1;
    o.resume = resume;
    o.mode = Display::Mode::kQuiet;
    o.observer = &counter;
    return run_fleet(load_plan(dir.path + "/plan.yaml"), o, io);
  }
  std::string out() const { return dir.path + "/out"; }
  TempDir dir;
  EpochCounter counter;
};

TEST_F(OnnxFormat, AModelOnnxCannotExpressIsRefusedBeforeTraining) {
  try {
    run(api_detail::model_io(api_detail::ModelFormat::kOnnx));
    FAIL() << "the plan was accepted";
  } catch (const PlanError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("model 'masked-lstm': failed to export layer 1 'lstm"), std::string::npos)
        << m;
    EXPECT_NE(m.find("(LSTM) to ONNX"), std::string::npos) << m;
    EXPECT_NE(m.find("zero_output_for_mask"), std::string::npos) << m;
    EXPECT_NE(m.find("hint: train with --format keras"), std::string::npos) << m;
    EXPECT_EQ(m.find("'dense'"), std::string::npos) << m;
  }
  EXPECT_EQ(counter.epochs.load(), 0);
  EXPECT_FALSE(file_exists(out()));
  // As .keras files alone the plan trains.
  const FleetSummary s = run(api_detail::model_io(api_detail::ModelFormat::kKeras));
  for (const ModelResult& r : s.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
}

// An export that still fails after training (the check is bypassed here to force it) keeps the
// trained .keras file, fails that model alone with the export's error (no disk-space talk), lets
// the other model finish, and --resume trains neither again.
TEST_F(OnnxFormat, AnExportFailingAfterTrainingKeepsTheModelAndIsNotRetrained) {
  ModelIo io = api_detail::model_io(api_detail::ModelFormat::kOnnx);
  io.check = nullptr;
  const FleetSummary s = run(io);
  EXPECT_EQ(s.write_error, "");
  EXPECT_TRUE(s.results_written);
  ASSERT_EQ(s.results.size(), 2u);
  EXPECT_EQ(s.results[0].status, JobStatus::kDone) << s.results[0].message;
  EXPECT_TRUE(file_exists(out() + "/models/dense.onnx"));
  const ModelResult& bad = s.results[1];
  EXPECT_EQ(bad.status, JobStatus::kFailed);
  EXPECT_EQ(bad.epochs, 2);
  EXPECT_EQ(testing_util::recorded_models(out()).count("masked-lstm"), 1u);  // final: recorded
  EXPECT_NE(bad.message.find("model 'masked-lstm': failed to export layer 1 'lstm"),
            std::string::npos)
      << bad.message;
  EXPECT_NE(
      bad.message.find("the trained model is kept in '" + out() + "/models/masked-lstm.keras'"),
      std::string::npos)
      << bad.message;
  EXPECT_EQ(bad.message.find("space"), std::string::npos) << bad.message;
  EXPECT_FALSE(file_exists(out() + "/models/masked-lstm.onnx"));
  const LoadedModel kept = load_keras_model(out() + "/models/masked-lstm.keras");
  EXPECT_TRUE(kept.has_weights);
  EXPECT_EQ(counter.epochs.load(), 4);
  const FleetSummary again = run(io, true);
  EXPECT_EQ(counter.epochs.load(), 4);  // nothing trained again
  ASSERT_EQ(again.results.size(), 2u);
  EXPECT_EQ(again.results[1].status, JobStatus::kFailed);
  EXPECT_EQ(again.results[1].message, bad.message);
}

}  // namespace
}  // namespace nnfleet
