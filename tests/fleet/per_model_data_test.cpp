// Each model its own data: `data:` in a model entry (or in defaults) with grid placeholders in its
// paths, one shared source per distinct resolved form, every source validated before anything
// trains, a fleet on three data sets equal to three single-model runs, and --resume refusing a
// changed per-model file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/fleet.h"
#include "fleet/fleet_data.h"
#include "fleet_test_util.h"
#include "plan/plan.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::TempDir;
using testing_util::write_blobs;
using testing_util::write_text;

FleetSummary train(const std::string& plan, const std::string& out, bool resume = false) {
  FleetOptions o;
  o.out_dir = out;
  o.workers = 2;
  o.resume = resume;
  o.mode = Display::Mode::kQuiet;
  return run_fleet(load_plan(plan), o, testing_util::raw_io());
}

const char* const kModel = R"(
    epochs: 2
    batch_size: 16
    optimizer: {Adam: {learning_rate: 0.01}}
    layers:
      - Flatten: {}
      - Dense: {units: 8, activation: relu}
      - Dense: {units: 3, activation: softmax}
)";

// One model per series k in {a, b, c}, each on its own blobs data set.
std::string per_series_plan() {
  return std::string(R"(seed: 3
models:
  - name: m-{k}
    grid: {k: [a, b, c]}
    data:
      train: {x: "train_{k}_x.npy", y: "train_{k}_y.npy"}
      test: {x: "test_{k}_x.npy", y: "test_{k}_y.npy"}
      validation_split: 0.25)") +
         kModel;
}

// The same model m-<k> alone, on its data given as the plan's own `data:`.
std::string single_plan(const std::string& k) {
  return "seed: 3\ndata:\n  train: {x: train_" + k + "_x.npy, y: train_" + k +
         "_y.npy}\n  test: {x: test_" + k + "_x.npy, y: test_" + k +
         "_y.npy}\n  validation_split: 0.25\nmodels:\n  - name: m-" + k + kModel;
}

class PerModelData : public ::testing::Test {
 protected:
  void SetUp() override {
    uint64_t seed = 10;
    for (const char* k : {"a", "b", "c"}) {
      write_blobs(dir.path, std::string("train_") + k, 240 + 40 * static_cast<int>(seed - 10),
                  seed);
      write_blobs(dir.path, std::string("test_") + k, 90, seed + 100);
      ++seed;
    }
  }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = dir.path + "/" + name;
    write_text(p, text);
    return p;
  }
  static std::string plan_error(const std::string& path) {
    try {
      load_plan(path);
    } catch (const PlanError& e) {
      return e.what();
    }
    ADD_FAILURE() << "load_plan did not throw";
    return "";
  }
  TempDir dir;
};

TEST_F(PerModelData, GridPlaceholdersInDataPathsGiveEachModelItsOwnSource) {
  const Plan p = load_plan(write("p.yaml", per_series_plan()));
  ASSERT_EQ(p.models.size(), 3u);
  EXPECT_FALSE(p.has_data);
  ASSERT_EQ(p.sources.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const std::string k(1, static_cast<char>('a' + i));
    EXPECT_EQ(p.models[i].name, "m-" + k);
    EXPECT_EQ(p.models[i].source, i);
    const DataSpec& d = p.sources[p.models[i].source];
    EXPECT_EQ(d.train.x, dir.path + "/train_" + k + "_x.npy");
    ASSERT_TRUE(d.test.has_value());
    EXPECT_EQ(d.test->y, dir.path + "/test_" + k + "_y.npy");
    EXPECT_DOUBLE_EQ(d.validation_split, 0.25);
    EXPECT_THAT(d.where, HasSubstr("p.yaml:5: models[0].data (model 'm-" + k + "')"));
  }
  // plan.yaml records each model's data with its resolved paths.
  EXPECT_THAT(plan_to_yaml(p), HasSubstr(dir.path + "/train_b_x.npy"));
}

TEST_F(PerModelData, ModelsWithoutTheirOwnDataUseThePlansAndEqualSourcesAreShared) {
  const Plan p = load_plan(write("p.yaml", R"(data:
  train: {x: train_a_x.npy, y: train_a_y.npy}
defaults:
  layers: [{Flatten: {}}, {Dense: {units: 3, activation: softmax}}]
models:
  - name: plain
  - name: same-files
    data: {train: {x: ./sub/../train_a_x.npy, y: train_a_y.npy}}
  - name: scaled
    data: {train: {x: train_a_x.npy, y: train_a_y.npy}, scale: 0.5}
  - name: own-{k}
    grid: {k: [b, b2]}
    data: {train: {x: train_b_x.npy, y: train_b_y.npy}}
)"));
  ASSERT_EQ(p.models.size(), 5u);
  EXPECT_TRUE(p.has_data);
  // The plan's data, the same files written another way, a scaled copy, and series b once.
  ASSERT_EQ(p.sources.size(), 3u);
  EXPECT_EQ(p.models[0].source, 0u);
  EXPECT_EQ(p.models[1].source, 0u);
  EXPECT_EQ(p.models[2].source, 1u);
  EXPECT_EQ(p.models[3].source, 2u);
  EXPECT_EQ(p.models[4].source, 2u);
  // Loaded once per source: three data sets for five models.
  const std::vector<FleetData> data = load_plan_data(p.sources);
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(data[0].train.x.rows(), 240);
  EXPECT_FLOAT_EQ(data[1].scale, 0.5f);
  EXPECT_EQ(data[2].train.x.rows(), 280);
}

TEST_F(PerModelData, DataInDefaultsTakesEachEntrysGridValues) {
  const Plan p = load_plan(write("p.yaml", R"(defaults:
  data: {train: {x: "train_{k}_x.npy", y: "train_{k}_y.npy"}}
  layers: [{Flatten: {}}, {Dense: {units: 3, activation: softmax}}]
models:
  - name: m-{k}
    grid: {k: [a, c]}
)"));
  ASSERT_EQ(p.sources.size(), 2u);
  EXPECT_EQ(p.sources[p.models[1].source].train.y, dir.path + "/train_c_y.npy");
}

TEST_F(PerModelData, AnUnknownPlaceholderInADataPathIsAPlanProblemWithItsLine) {
  const std::string msg = plan_error(write("p.yaml", R"(models:
  - name: m-{k}
    grid: {k: [a, b]}
    data:
      train: {x: "train_{series}_x.npy", y: "train_{k}_y.npy"}
    layers: [{Flatten: {}}, {Dense: {units: 3, activation: softmax}}]
)"));
  EXPECT_THAT(msg, HasSubstr("p.yaml:5: models[0].data.train.x: unknown placeholder '{series}'; "
                             "expected one of the grid's vars: k"));
}

TEST_F(PerModelData, AModelWithNoDataAnywhereIsNamed) {
  const std::string msg = plan_error(write("p.yaml", R"(models:
  - name: lonely
    layers: [{Flatten: {}}, {Dense: {units: 3, activation: softmax}}]
)"));
  EXPECT_THAT(msg, HasSubstr("p.yaml:2: models[0]: no data for model 'lonely'; expected data: in "
                             "the model entry, in defaults or at the top of the plan"));
}

TEST_F(PerModelData, EachModelIsValidatedAgainstItsOwnDataBeforeAnythingTrains) {
  // Series c has labels 0..2, but its model has 2 outputs; series b is fine.
  const std::string p = write("p.yaml", R"(models:
  - name: ok-b
    data: {train: {x: train_b_x.npy, y: train_b_y.npy}}
    layers: [{Flatten: {}}, {Dense: {units: 3, activation: softmax}}]
  - name: narrow-c
    data: {train: {x: train_c_x.npy, y: train_c_y.npy}}
    layers: [{Flatten: {}}, {Dense: {units: 2, activation: softmax}}]
)");
  const std::string out = dir.path + "/out";
  try {
    train(p, out);
    FAIL() << "trained a model on labels out of its range";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("p.yaml:5: models[1]: model 'narrow-c': labels out of range "
                                    "for sparse_categorical_crossentropy; expected integers in "
                                    "0..1"));
    EXPECT_THAT(e.what(), HasSubstr("(training data '" + dir.path + "/train_c_x.npy' and '" +
                                    dir.path + "/train_c_y.npy')"));
    EXPECT_THAT(e.what(), Not(HasSubstr("ok-b")));
  }
  EXPECT_FALSE(file_exists(out));  // nothing half-written
}

TEST_F(PerModelData, AMissingPerModelFileNamesTheModelAndThePlanLine) {
  const std::string p = write("p.yaml", R"(models:
  - name: m-{k}
    grid: {k: [a, zz]}
    data: {train: {x: "train_{k}_x.npy", y: "train_{k}_y.npy"}}
    layers: [{Flatten: {}}, {Dense: {units: 3, activation: softmax}}]
)");
  try {
    train(p, dir.path + "/out");
    FAIL() << "trained without series zz";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("p.yaml:4: models[0].data (model 'm-zz'): "));
    EXPECT_THAT(e.what(), HasSubstr("train_zz_x.npy"));
    EXPECT_THAT(e.what(), Not(HasSubstr("model 'm-a'")));
  }
  EXPECT_FALSE(file_exists(dir.path + "/out"));
}

TEST_F(PerModelData, AFleetOnThreeDataSetsEqualsThreeSingleModelRuns) {
  const FleetSummary fleet = train(write("fleet.yaml", per_series_plan()), dir.path + "/fleet");
  ASSERT_EQ(fleet.results.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const std::string k(1, static_cast<char>('a' + i));
    const FleetSummary one =
        train(write("single_" + k + ".yaml", single_plan(k)), dir.path + "/single_" + k);
    ASSERT_EQ(one.results.size(), 1u);
    const ModelResult& a = fleet.results[i];
    const ModelResult& b = one.results[0];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.status, JobStatus::kDone) << a.message;
    EXPECT_EQ(a.metrics, b.metrics) << a.name;  // bit for bit
    EXPECT_NE(find_metric(a.metrics, "test_accuracy"), nullptr);
    EXPECT_TRUE(read_file(dir.path + "/fleet/models/m-" + k + ".bin") ==
                read_file(dir.path + "/single_" + k + "/models/m-" + k + ".bin"))
        << "weights of m-" << k << " differ";
  }
  // The series differ, so the models do too: each saw its own data.
  EXPECT_NE(fleet.results[0].metrics, fleet.results[1].metrics);
}

TEST_F(PerModelData, ResumeRefusesAChangedPerModelFileNamingIt) {
  const std::string p = write("fleet.yaml", per_series_plan());
  const std::string out = dir.path + "/out";
  train(p, out);
  write_blobs(dir.path, "train_b", 280, 77);  // same path and shape, new content
  try {
    train(p, out, true);
    FAIL() << "resumed on changed data";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("data file '" + dir.path +
                                    "/train_b_x.npy' (train x) changed since the run began"));
  }
  const Json run = Json::parse(read_file(out + "/run.json"));
  EXPECT_EQ(run["data"].size(), 12u);  // x and y of train and test of three series
}

}  // namespace
}  // namespace nnfleet
