// restore_optimizer: a `keras:` model trains on with the optimizer its file holds (class,
// configuration, slot variables and iterations), as Keras's load_model restores it; from a
// Keras 3 .keras file and from an .h5 file in tf.keras 2.11-2.15's optimizer_weights layout,
// which nnfleet's .h5 writer writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/model_io.h"
#include "data/dataset.h"
#include "fleet/fleet.h"
#include "fleet_test_util.h"
#include "io/keras/keras_reader.h"
#include "io/keras/keras_writer.h"
#include "tensor/rng.h"

namespace nnfleet {
namespace {

using testing::HasSubstr;
using testing_util::TempDir;
using testing_util::write_text;

// 40 random samples of 6 features, labels 0..2.
void write_data(const std::string& dir) {
  Array x = Array::zeros(DType::kF32, Shape{40, 6});
  Array y = Array::zeros(DType::kI32, Shape{40});
  Rng r(17);
  for (int64_t i = 0; i < 40 * 6; ++i) static_cast<float*>(x.mutable_data())[i] = r.uniform();
  for (int i = 0; i < 40; ++i) static_cast<int32_t*>(y.mutable_data())[i] = (i * 7) % 3;
  save_npy(dir + "/x.npy", x);
  save_npy(dir + "/y.npy", y);
}

// Runs a plan of one model (the YAML of its entry) and returns the model file it wrote.
std::string train(const TempDir& dir, const std::string& tag, const std::string& entry,
                  api_detail::ModelFormat format = api_detail::ModelFormat::kKeras) {
  const std::string plan = dir.path + "/" + tag + ".yaml";
  write_text(plan, "seed: 4\ndata: {train: {x: x.npy, y: y.npy}}\nmodels:\n" + entry);
  FleetOptions o;
  o.out_dir = dir.path + "/" + tag;
  o.workers = 1;
  o.mode = Display::Mode::kQuiet;
  const FleetSummary s = run_fleet(load_plan(plan), o, api_detail::model_io(format));
  EXPECT_EQ(s.results.at(0).status, JobStatus::kDone) << tag << ": " << s.results[0].message;
  const std::string stem = o.out_dir + "/models/" + s.results[0].name;
  return stem + (format == api_detail::ModelFormat::kH5 ? ".h5" : ".keras");
}

// A model of the plan's own, trained `epochs` epochs without shuffling.
std::string own_model(int epochs) {
  std::string s = "  - name: m\n    epochs: ";
  s += std::to_string(epochs);
  s += "\n    batch_size: 8\n    shuffle: false\n"
       "    optimizer: {Adam: {learning_rate: 0.01}}\n"
       "    layers: [Dense: {units: 5, activation: relu}, Dense: {units: 3, activation: "
       "softmax}]\n";
  return s;
}

std::string from_file(const std::string& file, bool restore) {
  return "  - name: b\n    keras: " + file +
         "\n    epochs: 1\n    batch_size: 8\n    shuffle: false\n" +
         (restore ? "    restore_optimizer: true\n"
                  : "    optimizer: {Adam: {learning_rate: 0.01}}\n");
}

TEST(RestoreOptimizer, OneEpochSavedThenOneMoreEndsWhereTwoEpochsEnd) {
  TempDir dir;
  write_data(dir.path);
  const std::string one = train(dir, "one", own_model(1));
  const std::string one_h5 = train(dir, "one_h5", own_model(1), api_detail::ModelFormat::kH5);
  const std::string two = train(dir, "two", own_model(2));
  const LoadedModel saved = load_keras_model(one), saved_h5 = load_keras_model(one_h5);
  // Both files hold the optimizer: 5 batches done, Adam's slots for every trainable weight.
  ASSERT_FALSE(saved.optimizer_state.empty());
  EXPECT_EQ(saved.iterations, 5);
  EXPECT_EQ(saved_h5.iterations, 5);
  EXPECT_EQ(saved_h5.optimizer_state, saved.optimizer_state);
  EXPECT_EQ(saved_h5.optimizer_state_info["variables"], 1 + 2 * 4);  // iteration, m/v x 4
  const std::vector<float> want = load_keras_model(two).params;
  // The second epoch from either file, with the optimizer restored, is the two-epoch run's.
  EXPECT_EQ(load_keras_model(train(dir, "restored", from_file(one, true))).params, want);
  EXPECT_EQ(load_keras_model(train(dir, "restored_h5", from_file(one_h5, true))).params, want);
  // A fresh optimizer (iterations 0, zero moments) ends elsewhere.
  EXPECT_NE(load_keras_model(train(dir, "fresh", from_file(one, false))).params, want);
  // The restored run goes on counting: its file holds 10 iterations.
  EXPECT_EQ(load_keras_model(dir.path + "/restored/models/b.keras").iterations, 10);
}

TEST(RestoreOptimizer, AFileWithoutAnOptimizerIsRefusedNamingIt) {
  TempDir dir;
  write_data(dir.path);
  const std::string one = train(dir, "one", own_model(1));
  // The same model saved without its optimizer (as model.save(include_optimizer=False)).
  const LoadedModel lm = load_keras_model(one);
  const std::string bare = dir.path + "/bare.keras";
  save_keras(bare, *lm.model, lm.params.data());
  try {
    train(dir, "bare", from_file(bare, true));
    ADD_FAILURE() << "a file without optimizer state was accepted";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("failed to restore the optimizer of model 'b' from '" + bare +
                                    "': the file holds no optimizer variables"));
  }
}

TEST(RestoreOptimizer, PlanErrorsNameTheField) {
  TempDir dir;
  write_data(dir.path);
  write_text(dir.path + "/p.yaml",
             "data: {train: {x: x.npy, y: y.npy}}\n"
             "models:\n"
             "  - name: own\n"
             "    layers: [Dense: {units: 3}]\n"
             "    restore_optimizer: true\n"
             "  - name: both\n"
             "    keras: some.keras\n"
             "    optimizer: sgd\n"
             "    restore_optimizer: true\n"
             "  - name: frozen\n"
             "    keras: some.keras\n"
             "    freeze: [0]\n"
             "    restore_optimizer: true\n"
             "  - name: odd\n"
             "    keras: some.keras\n"
             "    restore_optimizer: 1\n");
  try {
    load_plan(dir.path + "/p.yaml");
    ADD_FAILURE() << "the plan was accepted";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("p.yaml:5: models[0].restore_optimizer: restore_optimizer "
                                    "applies to a `keras:` model"));
    EXPECT_THAT(e.what(), HasSubstr("p.yaml:9: models[1].restore_optimizer: restore_optimizer "
                                    "trains with the file's optimizer and its state; expected no "
                                    "optimizer"));
    EXPECT_THAT(e.what(), HasSubstr("p.yaml:13: models[2].restore_optimizer: restore_optimizer "
                                    "keeps the state of the file's trainable weights"));
    EXPECT_THAT(e.what(), HasSubstr("p.yaml:16: models[3].restore_optimizer: expected true or "
                                    "false, got 1"));
  }
}

}  // namespace
}  // namespace nnfleet
