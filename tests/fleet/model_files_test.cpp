// The per-model file work of a fleet, held down without timing it: the models of one
// architecture get their weights file from libhdf5 once (h5::Builder's template), not once each,
// and each record's hash is the hash of the file as written, which --resume then trusts.
#include <gtest/gtest.h>

#include <string>

#include "api/model_io.h"
#include "data/dataset.h"
#include "fleet/fleet.h"
#include "fleet_test_util.h"
#include "io/h5_builder.h"
#include "io/keras_reader.h"
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
  for (const JobResult& r : s.results) {
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
  for (const JobResult& r : again.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
}

}  // namespace
}  // namespace nnfleet
