// Plan loading: expansion of the issue-3 example, defaults and null overrides, placeholders, data
// sources, every kind of problem with its file:line and field path, and the plan.yaml round trip.
#include "plan/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "plan/plan_yaml.h"

namespace nnfleet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string fixture(const std::string& name) {
  return std::string(NNFLEET_SOURCE_DIR) + "/tests/plan/fixtures/plans/" + name;
}

// A fresh directory for plan files, removed at the end of the test.
class PlanTest : public ::testing::Test {
 protected:
  PlanTest() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("nnfleet_plan_test_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~PlanTest() override { std::filesystem::remove_all(dir_); }

  // Writes `text` as dir/name and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string dir() const { return dir_.string(); }

  // The message of the PlanError load_plan(path) throws, or "" with a test failure.
  static std::string error_of(const std::string& path) {
    try {
      load_plan(path);
    } catch (const PlanError& e) {
      return e.what();
    }
    ADD_FAILURE() << "load_plan('" << path << "') did not throw";
    return "";
  }
  // The problem lines of error_of(path), without the header line.
  static std::vector<std::string> problems_of(const std::string& path) {
    std::istringstream ss(error_of(path));
    std::vector<std::string> lines;
    std::string line;
    std::getline(ss, line);
    while (std::getline(ss, line)) lines.push_back(line);
    return lines;
  }

 private:
  std::filesystem::path dir_;
};

std::vector<std::string> names(const Plan& p) {
  std::vector<std::string> v;
  for (const auto& m : p.models) v.push_back(m.name);
  return v;
}

const char* const kData = "data:\n  train: fashion-mnist:train\n";

// ---- The issue-3 example ----

TEST_F(PlanTest, IssueExampleExpandsToFiveModelsInGridOrder) {
  const Plan p = load_plan(fixture("example.yaml"));
  EXPECT_THAT(names(p),
              ElementsAre("mlp-32-0.001", "mlp-32-0.01", "mlp-128-0.001", "mlp-128-0.01", "cnn"));
  EXPECT_EQ(p.name, "example");
  EXPECT_EQ(p.seed, 1u);
  EXPECT_EQ(p.data.train.kind, DataSource::Kind::kFashionMnist);
  EXPECT_EQ(p.data.train.split, "train");
  ASSERT_TRUE(p.data.test.has_value());
  EXPECT_EQ(p.data.test->split, "test");
  EXPECT_DOUBLE_EQ(p.data.scale, 0.00392156862745098);
  EXPECT_DOUBLE_EQ(p.data.validation_split, 0.1);
}

TEST_F(PlanTest, GridValuesAreSubstitutedWithTheirType) {
  const Plan p = load_plan(fixture("example.yaml"));
  const ModelSpec& m = p.models[2];  // mlp-128-0.001
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[1].class_name, "Dense");
  EXPECT_TRUE(m.layers[1].config["units"].is_number_integer());
  EXPECT_EQ(m.layers[1].config["units"], 128);
  EXPECT_DOUBLE_EQ(m.optimizer.learning_rate, 0.001);
  EXPECT_DOUBLE_EQ(p.models[3].optimizer.learning_rate, 0.01);
  EXPECT_TRUE(m.expanded_json()["optimizer"]["Adam"]["learning_rate"].is_number_float());
  EXPECT_FALSE(m.expanded_json().contains("grid"));
}

TEST_F(PlanTest, ModelEntryOverridesDefaultsAndInheritsTheRest) {
  const Plan p = load_plan(fixture("example.yaml"));
  const ModelSpec& mlp = p.models[0];
  const ModelSpec& cnn = p.models[4];
  EXPECT_EQ(mlp.epochs, 5);
  EXPECT_EQ(cnn.epochs, 3);
  EXPECT_EQ(cnn.batch_size, 32);
  EXPECT_TRUE(cnn.shuffle);
  EXPECT_EQ(cnn.loss.kind, LossKind::kSparseCategoricalCrossentropy);
  EXPECT_THAT(cnn.metrics, ElementsAre("accuracy"));
  EXPECT_EQ(cnn.optimizer.kind, OptKind::kAdam);
  ASSERT_TRUE(cnn.early_stopping.has_value());
  EXPECT_EQ(cnn.early_stopping->monitor, "val_loss");
  EXPECT_EQ(cnn.early_stopping->patience, 2);
  EXPECT_TRUE(cnn.early_stopping->restore_best_weights);
  EXPECT_EQ(cnn.early_stopping->mode, "auto");
  EXPECT_THAT(cnn.where, HasSubstr("example.yaml:23: models[1]"));
  EXPECT_THAT(mlp.where, HasSubstr("example.yaml:16: models[0]"));
}

TEST_F(PlanTest, NullTurnsADefaultOffForOneModel) {
  const std::string path = write("p.yaml", std::string(kData) + R"(defaults:
  epochs: 4
  early_stopping: {patience: 1}
models:
  - name: keeps
    layers: [Dense: {units: 2}]
  - name: drops
    early_stopping: null
    epochs: null
    layers: [Dense: {units: 2}]
)");
  const Plan p = load_plan(path);
  ASSERT_EQ(p.models.size(), 2u);
  EXPECT_TRUE(p.models[0].early_stopping.has_value());
  EXPECT_EQ(p.models[0].epochs, 4);
  EXPECT_FALSE(p.models[1].early_stopping.has_value());
  EXPECT_EQ(p.models[1].epochs, 1);  // the built-in default
  EXPECT_TRUE(p.models[1].expanded_json()["early_stopping"].is_null());
}

TEST_F(PlanTest, BuiltInDefaultsApplyWithoutADefaultsSection) {
  const Plan p = load_plan(write("p.yaml", std::string(kData) + "models:\n  - name: m\n"
                                                                "    layers: [Flatten]\n"));
  const ModelSpec& m = p.models[0];
  EXPECT_EQ(p.seed, 0u);
  EXPECT_EQ(m.epochs, 1);
  EXPECT_EQ(m.batch_size, 32);
  EXPECT_TRUE(m.shuffle);
  EXPECT_EQ(m.loss.kind, LossKind::kSparseCategoricalCrossentropy);
  EXPECT_THAT(m.metrics, ElementsAre("accuracy"));
  EXPECT_EQ(m.optimizer.kind, OptKind::kAdam);
  EXPECT_DOUBLE_EQ(m.optimizer.learning_rate, 0.001);
  EXPECT_FALSE(m.early_stopping.has_value());
  EXPECT_EQ(m.layers[0].class_name, "Flatten");
}

TEST_F(PlanTest, DefaultLayerNamesFollowKerasPerModel) {
  const std::string path = write("p.yaml", std::string(kData) + R"(models:
  - name: a
    layers:
      - Conv2D: {filters: 4, kernel_size: 3}
      - BatchNormalization: {}
      - MaxPooling2D: {pool_size: 2}
      - Conv2D: {filters: 4, kernel_size: 3, name: mine}
      - Conv2D: {filters: 4, kernel_size: 3}
      - ReLU: {}
      - Flatten: {}
      - Dense: {units: 8}
      - Dense: {units: 2}
  - name: b
    layers: [Dense: {units: 2}]
)");
  const Plan p = load_plan(path);
  std::vector<std::string> got;
  for (const auto& l : p.models[0].layers) got.push_back(l.config["name"]);
  EXPECT_THAT(got, ElementsAre("conv2d", "batch_normalization", "max_pooling2d", "mine", "conv2d_1",
                               "re_lu", "flatten", "dense", "dense_1"));
  EXPECT_EQ(p.models[1].layers[0].config["name"], "dense");  // counters restart per model
  EXPECT_THAT(p.models[0].layers[3].where, HasSubstr("p.yaml:9: models[0].layers[3].Conv2D"));
}

TEST_F(PlanTest, PlaceholdersWorkInsideLongerStringsAndAnyValue) {
  const std::string path = write("p.yaml", std::string(kData) + R"(models:
  - name: "{act}_{rate}_{flag}"
    grid: {act: [relu, tanh], rate: [0.5], flag: [true]}
    layers:
      - Dense: {units: 4, activation: "{act}", name: "hidden-{act}"}
      - Dropout: {rate: "{rate}"}
      - Dense: {units: 2}
)");
  const Plan p = load_plan(path);
  EXPECT_THAT(names(p), ElementsAre("relu_0.5_true", "tanh_0.5_true"));
  EXPECT_EQ(p.models[1].layers[0].config["name"], "hidden-tanh");
  EXPECT_EQ(p.models[1].layers[0].config["activation"], "tanh");
  EXPECT_EQ(p.models[1].layers[1].config["rate"], 0.5);
}

TEST_F(PlanTest, PlaceholdersWorkInLayerClassNames) {
  const Plan p = load_plan(write("p.yaml", std::string(kData) + R"(models:
  - name: "{pool}"
    grid: {pool: [MaxPooling2D, AveragePooling2D]}
    layers:
      - "{pool}": {pool_size: 2}
      - Flatten: {}
)"));
  EXPECT_EQ(p.models[1].layers[0].class_name, "AveragePooling2D");
  EXPECT_EQ(p.models[1].layers[0].config["name"], "average_pooling2d");
  EXPECT_EQ(p.models[0].layers[0].config["name"], "max_pooling2d");
}

TEST_F(PlanTest, NumbersInNamesAreCompact) {
  const std::string path = write("p.yaml", std::string(kData) + R"(models:
  - name: m-{lr}
    grid: {lr: [0.001, 1.0e-4, 3, 2.5, 1e-9]}
    optimizer: {SGD: {learning_rate: "{lr}"}}
    layers: [Flatten]
)");
  EXPECT_THAT(names(load_plan(path)),
              ElementsAre("m-0.001", "m-0.0001", "m-3", "m-2.5", "m-1e-09"));
}

TEST_F(PlanTest, DataPathsResolveAgainstThePlanFolder) {
  std::filesystem::create_directories(dir() + "/sub");
  const std::string path = write("sub/p.yaml", R"(data:
  train: {npz: ../d.npz, x: x_train, y: y_train}
  test: {idx_images: t-images, idx_labels: /abs/t-labels}
models:
  - name: m
    keras: models/base.keras
)");
  const Plan p = load_plan(path);
  EXPECT_EQ(p.data.train.kind, DataSource::Kind::kNpz);
  EXPECT_EQ(p.data.train.file, dir() + "/d.npz");
  EXPECT_EQ(p.data.train.x, "x_train");
  EXPECT_EQ(p.data.train.y, "y_train");
  ASSERT_TRUE(p.data.test.has_value());
  EXPECT_EQ(p.data.test->kind, DataSource::Kind::kIdx);
  EXPECT_EQ(p.data.test->x, dir() + "/sub/t-images");
  EXPECT_EQ(p.data.test->y, "/abs/t-labels");
  EXPECT_EQ(p.models[0].keras, dir() + "/sub/models/base.keras");
  EXPECT_TRUE(p.models[0].layers.empty());
}

TEST_F(PlanTest, CsvAndNpySourcesAreRecognized) {
  const Plan p = load_plan(write("p.yaml", R"(data:
  train: {csv: train.csv, label: species}
  test: {x: x.npy, y: y.npy}
models: [{name: m, layers: [Flatten]}]
)"));
  EXPECT_EQ(p.data.train.kind, DataSource::Kind::kCsv);
  EXPECT_EQ(p.data.train.file, dir() + "/train.csv");
  EXPECT_EQ(p.data.train.label, "species");
  EXPECT_EQ(p.data.test->kind, DataSource::Kind::kNpy);
  EXPECT_EQ(p.data.test->y, dir() + "/y.npy");
}

TEST_F(PlanTest, JsonPlansAreAccepted) {
  const Plan p = load_plan(fixture("example.json"));
  EXPECT_THAT(names(p), ElementsAre("tiny-4", "tiny-8"));
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.models[1].layers[0].config["units"], 8);
  EXPECT_EQ(p.models[0].loss.kind, LossKind::kBinaryCrossentropy);
  EXPECT_EQ(p.data.train.x, std::string(NNFLEET_SOURCE_DIR) + "/tests/plan/fixtures/plans/x.npy");
}

TEST_F(PlanTest, YamlScalarsKeepTheirTypes) {
  const Plan p = load_plan(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    layers:
      - Reshape: {target_shape: [-1]}
      - Dense: {units: 3, use_bias: false, activation: ~}
      - Rescaling: {scale: 2.5e-1, offset: "1"}
)"));
  const auto& l = p.models[0].layers;
  EXPECT_TRUE(l[0].config["target_shape"][0].is_number_integer());
  EXPECT_TRUE(l[1].config["use_bias"].is_boolean());
  EXPECT_TRUE(l[1].config["activation"].is_null());
  EXPECT_TRUE(l[2].config["scale"].is_number_float());
  EXPECT_TRUE(l[2].config["offset"].is_string());  // quoted stays a string
}

// ---- Problems, each with file:line and field path ----

TEST_F(PlanTest, BadLayerValueNamesFileLineAndFieldPath) {
  const std::string path = write("fleet.yaml", std::string(kData) + R"(models:
  - name: a
    layers:
      - Dense: {units: 2}
  - name: b
    layers:
      - Flatten: {}
      - Dense: {units: 8}
      - Dense:
          units: abc
)");
  const std::string msg = error_of(path);
  EXPECT_THAT(msg, StartsWith("failed to load plan '" + path + "': 1 problem(s)\n"));
  EXPECT_THAT(problems_of(path),
              ElementsAre(path + ":12: models[1].layers[2].Dense.units: expected a positive "
                                 "integer, got \"abc\""));
}

TEST_F(PlanTest, AllProblemsAreReportedTogether) {
  const std::string path = fixture("three_mistakes.yaml");
  EXPECT_THAT(error_of(path), StartsWith("failed to load plan '" + path + "': 3 problem(s)\n"));
  const auto lines = problems_of(path);
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0],
              StartsWith(path + ":5: models[0].epochs: expected a positive integer, got 0"));
  EXPECT_THAT(lines[1], StartsWith(path + ":8: models[0].layers[1].Dense.activation: unknown "
                                          "activation \"sofmax\"; expected one of linear, relu"));
  EXPECT_THAT(lines[2], StartsWith(path + ":10: models[1].optimizer: unknown optimizer"));
  EXPECT_THAT(lines[1], HasSubstr("(did you mean 'softmax'?)"));
  EXPECT_THAT(lines[2], HasSubstr("expected one of SGD, Adam, AdamW, RMSprop, Adagrad "
                                  "(did you mean 'Adam'?)"));
}

TEST_F(PlanTest, UnknownLayerClassListsValidClasses) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    layers:
      - Dense: {units: 2}
      - Dence: {units: 2}
)"));
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:7: models[0].layers[1]: unknown layer class 'Dence'; "
                                  "expected one of Dense, Conv2D"));
  EXPECT_THAT(lines[0], HasSubstr("(did you mean 'Dense'?)"));
}

TEST_F(PlanTest, UnknownLossMetricAndOptimizerKeyListValidNames) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    loss: sparse_crossentropy
    metrics: [accuracy, f1]
    optimizer: {Adam: {learning_rate: 0.01, momentum: 0.9}}
    layers: [Flatten]
)"));
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:5: models[0].loss: unknown loss \"sparse_crossentropy\";"
                                  " expected one of "));
  EXPECT_THAT(lines[0], HasSubstr("sparse_categorical_crossentropy"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:6: models[0].metrics[1]: unknown metric \"f1\"; "
                                  "expected one of accuracy, acc, binary_accuracy"));
  EXPECT_THAT(lines[2], HasSubstr("p.yaml:7: models[0].optimizer.Adam.momentum: unknown key "
                                  "'momentum' for Adam; expected one of: "));
}

// A near miss of a valid name gets a "did you mean" wherever a plan names something: a layer's
// key (the full list includes the training keys: kernel_regularizer), a loss, a metric, an
// optimizer.
TEST_F(PlanTest, NearMissesGetADidYouMean) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    loss: sparse_categorical_crossentropi
    metrics: [acuracy]
    optimizer: adma
    layers:
      - Flatten
      - Dense: {units: 2, kernel_regulariser: l2}
)"));
  ASSERT_EQ(lines.size(), 4u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("(did you mean 'sparse_categorical_crossentropy'?)"));
  EXPECT_THAT(lines[1], HasSubstr("(did you mean 'accuracy'?)"));
  EXPECT_THAT(lines[2], HasSubstr("(did you mean 'adam'?)"));
  EXPECT_THAT(lines[3], HasSubstr("unknown key 'kernel_regulariser' for Dense; expected one of: "));
  EXPECT_THAT(lines[3], HasSubstr("kernel_regularizer, trainable, units, use_bias "
                                  "(did you mean 'kernel_regularizer'?)"));
}

TEST_F(PlanTest, MetricThatDoesNotFitTheLossIsRefused) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    metrics: [accuracy, mae, binary_accuracy]
    layers: [Flatten]
)"));
  EXPECT_THAT(lines,
              ElementsAre(HasSubstr("p.yaml:5: models[0].metrics[1]: metric \"mae\" needs "
                                    "targets shaped like the predictions; expected a "
                                    "non-sparse loss, got sparse_categorical_crossentropy")));
}

TEST_F(PlanTest, OptimizerValueErrorPointsAtTheKey) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(defaults:
  optimizer:
    SGD:
      learning_rate: -1
models:
  - name: m
    layers: [Flatten]
)"));
  EXPECT_THAT(lines, ElementsAre(HasSubstr(
                         "p.yaml:6: defaults.optimizer.SGD.learning_rate: expected a number > 0, "
                         "got -1")));
}

TEST_F(PlanTest, UnknownKeysAnywhereListTheValidKeys) {
  const auto lines = problems_of(write("p.yaml", R"(sead: 3
data:
  train: fashion-mnist:train
  shuffle: true
defaults:
  name: x
models:
  - name: m
    epoch: 3
    layers: [Flatten]
    early_stopping: {patience: 1, baseline: 0.5}
)"));
  ASSERT_EQ(lines.size(), 5u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:1: sead: unknown key 'sead'; expected one of: data, "
                                  "defaults, group_by, models, save, search, seed (did you mean "
                                  "'seed'?)"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:4: data.shuffle: unknown key 'shuffle'; expected one "
                                  "of: scale, take, test, train, validation, validation_split"));
  EXPECT_THAT(lines[2], HasSubstr("p.yaml:6: defaults.name: unknown key 'name'"));
  EXPECT_THAT(lines[3],
              HasSubstr("p.yaml:9: models[0].epoch: unknown key 'epoch'; expected one "
                        "of: batch_size, batch_split, class_weight, data, early_stopping, epochs"));
  EXPECT_THAT(lines[3], HasSubstr("(did you mean 'epochs'?)"));
  EXPECT_THAT(lines[4], HasSubstr("p.yaml:11: models[0].early_stopping.baseline: unknown key"));
}

TEST_F(PlanTest, UnknownLayerConfigKeyListsTheLayersKeys) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    layers:
      - Dense: {units: 2, unit: 3}
)"));
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:6: models[0].layers[0].Dense.unit: unknown key 'unit' "
                                  "for Dense; expected one of: "));
}

TEST_F(PlanTest, UnknownPlaceholderIsNamedWithTheGridVars) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m-{units}
    grid: {units: [2, 4], lr: [0.1]}
    optimizer: {SGD: {learning_rate: "{rate}"}}
    layers: [Dense: {units: "{units}"}]
  - name: n-{x}
    layers: [Flatten]
)"));
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0],
              HasSubstr("p.yaml:6: models[0].optimizer.SGD.learning_rate: unknown "
                        "placeholder '{rate}'; expected one of the grid's vars: units, lr"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:8: models[1].name: unknown placeholder '{x}'; expected "
                                  "none, as this model has no grid"));
}

TEST_F(PlanTest, GridErrorsAreReported) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: a-{u}
    grid: {u: []}
    layers: [Flatten]
  - name: b
    grid: [1, 2]
    layers: [Flatten]
)"));
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:5: models[0].grid.u: expected a non-empty list of "
                                  "values, got []"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:8: models[1].grid: expected a mapping"));
}

TEST_F(PlanTest, BadModelNamesAreRefusedWithTheRule) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: a/b
    layers: [Flatten]
  - name: .hidden
    layers: [Flatten]
  - name: )" + std::string(101, 'x') + R"(
    layers: [Flatten]
  - name: 12
    layers: [Flatten]
  - layers: [Flatten]
)"));
  ASSERT_EQ(lines.size(), 5u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:4: models[0].name: model name \"a/b\" is not safe as a "
                                  "file name; expected only letters, digits"));
  EXPECT_THAT(lines[1],
              HasSubstr("p.yaml:6: models[1].name: model name \".hidden\" starts with '.'"));
  EXPECT_THAT(lines[2], HasSubstr("p.yaml:8: models[2].name: model name \"xxx"));
  EXPECT_THAT(lines[2], HasSubstr("is too long; expected at most 100 characters, got 101"));
  EXPECT_THAT(lines[3], HasSubstr("p.yaml:10: models[3].name: expected a string"));
  EXPECT_THAT(lines[4], HasSubstr("p.yaml:12: models[4].name: required key missing"));
}

TEST_F(PlanTest, DuplicateNamesAfterGridExpansionAreRefused) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: mlp-{units}
    grid: {units: [8, 16], lr: [0.1, 0.01]}
    optimizer: {SGD: {learning_rate: "{lr}"}}
    layers: [Dense: {units: "{units}"}]
  - name: mlp-16
    layers: [Flatten]
)"));
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:4: models[0].name: duplicate model name 'mlp-8'; "
                                  "expected names unique across the expanded plan, got it again "
                                  "(first from models[0] at line 4); hint: put every grid var in "
                                  "the name, e.g. {lr}"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:4: models[0].name: duplicate model name 'mlp-16'"));
  EXPECT_THAT(lines[2], HasSubstr("p.yaml:8: models[1].name: duplicate model name 'mlp-16'; "
                                  "expected names unique across the expanded plan, got it again "
                                  "(first from models[0] at line 4)"));
}

TEST_F(PlanTest, DuplicateNameAcrossEntriesNamesBothEntries) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    layers: [Flatten]
  - name: m
    layers: [Flatten]
)"));
  EXPECT_THAT(lines, ElementsAre(HasSubstr("p.yaml:6: models[1].name: duplicate model name 'm'; "
                                           "expected names unique across the expanded plan, got "
                                           "it again (first from models[0] at line 4)")));
}

TEST_F(PlanTest, LayersAndKerasAreExclusiveAndOneIsRequired) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: both
    keras: m.keras
    layers: [Flatten]
  - name: neither
    epochs: 2
)"));
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:5: models[0].keras: layers and keras are mutually "
                                  "exclusive"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:7: models[1]: no architecture; expected layers"));
}

TEST_F(PlanTest, EntryArchitectureReplacesTheDefaultOne) {
  const Plan p = load_plan(write("p.yaml", std::string(kData) + R"(defaults:
  layers: [Flatten, Dense: {units: 10}]
models:
  - name: inherits
  - name: own
    keras: base.keras
)"));
  EXPECT_EQ(p.models[0].layers.size(), 2u);
  EXPECT_TRUE(p.models[1].layers.empty());
  EXPECT_EQ(p.models[1].keras, dir() + "/base.keras");
}

TEST_F(PlanTest, BadDataSectionIsReported) {
  const auto lines = problems_of(write("p.yaml", R"(seed: -1
data:
  train: mnist:train
  test: {x: x.npy}
  scale: 0
  validation_split: 1.0
models: []
)"));
  ASSERT_EQ(lines.size(), 6u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:1: seed: expected a non-negative integer, got -1"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:3: data.train: unknown data source; expected "
                                  "fashion-mnist:train, fashion-mnist:test"));
  EXPECT_THAT(lines[2], HasSubstr("p.yaml:4: data.test.y: required key missing; expected an .npy "
                                  "file path"));
  EXPECT_THAT(lines[3], HasSubstr("p.yaml:5: data.scale: expected a positive number, got 0"));
  EXPECT_THAT(lines[4], HasSubstr("p.yaml:6: data.validation_split: expected a number in [0, 1), "
                                  "got 1.0"));
  EXPECT_THAT(lines[5], HasSubstr("p.yaml:7: models: expected a non-empty list of models"));
}

// Keras's validation_data: `validation:` is a source of its own (written back to plan.yaml),
// and giving validation_split with it is one problem at the split's line.
TEST_F(PlanTest, AValidationSourceIsReadAndRefusedWithValidationSplit) {
  const Plan p = load_plan(write("v.yaml", R"(data:
  train: {x: x.npy, y: y.npy}
  validation: {x: xv.npy, y: yv.npy, sample_weight: wv.npy}
models:
  - name: m
    layers: [Flatten]
)"));
  ASSERT_TRUE(p.data.validation.has_value());
  EXPECT_EQ(p.data.validation->x, dir() + "/xv.npy");
  EXPECT_EQ(p.data.validation->sample_weight, dir() + "/wv.npy");
  EXPECT_EQ(p.data.to_json()["validation"]["y"], dir() + "/yv.npy");
  EXPECT_THAT(p.data.validation_split_where, HasSubstr("v.yaml:3: data.validation"));
  const auto lines = problems_of(write("both.yaml", R"(data:
  train: {x: x.npy, y: y.npy}
  validation: {x: xv.npy}
  validation_split: 0.2
models:
  - name: m
    layers: [Flatten]
)"));
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("both.yaml:3: data.validation.y: required key missing"));
  EXPECT_THAT(lines[1], HasSubstr("both.yaml:4: data.validation_split: validation_split and "
                                  "validation both give validation data; expected one of them"));
}

// Arrays ({array: KEY}) come only from a program (api::train with arrays, Python): a plan file
// naming one is refused at its field, and the same text parses when the caller gives arrays.
TEST_F(PlanTest, ArraysAreGivenOnlyByAProgram) {
  const std::string text = R"(data:
  train: {x: {array: x}, y: {array: y}}
models: [{name: m, layers: [Flatten]}]
)";
  const auto lines = problems_of(write("p.yaml", text));
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:2: data.train.x: an array is given only by a program "
                                  "(train() with arrays, in C++ or Python), never by a plan file; "
                                  "expected a file path, got {\"array\":\"x\"}"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:2: data.train.y: an array is given only by a program"));

  const Plan p = parse_plan(text, "p", dir(), 0, true);
  EXPECT_EQ(p.data.train.kind, DataSource::Kind::kArrays);
  EXPECT_EQ(p.data.train.x, "x");
  EXPECT_EQ(p.data.train.y, "y");
  EXPECT_EQ(p.data.train.to_json(), Json::parse(R"({"x": {"array": "x"}, "y": {"array": "y"}})"));
  try {
    (void)parse_plan(
        "data: {train: {x: {array: x}, y: y.npy}}\nmodels: [{name: m, layers: [Flatten]}]\n", "p",
        dir(), 0, true);
    ADD_FAILURE() << "a source mixing an array and a file was accepted";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("p:1: data.train.y: expected {array: KEY} (a source of arrays "
                                    "holds only arrays), got \"y.npy\""));
  }
}

// The spelling of arrays before {array: KEY}, "memory:KEY", is refused with the new one, whether
// or not the caller gives arrays.
TEST_F(PlanTest, MemoryStringsAreRefusedWithTheArraySpelling) {
  const std::string text = R"(data:
  train: {x: "memory:x", y: y.npy}
models: [{name: m, layers: [Flatten]}]
)";
  const auto lines = problems_of(write("p.yaml", text));
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:2: data.train.x: arrays are written {array: KEY}, not "
                                  "\"memory:KEY\"; expected {array: x}, got \"memory:x\""));
  try {
    (void)parse_plan(text, "p", dir(), 0, true);
    ADD_FAILURE() << "\"memory:x\" was accepted";
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("p:2: data.train.x: arrays are written {array: KEY}"));
  }
}

TEST_F(PlanTest, MissingSectionsAreReported) {
  const auto lines = problems_of(write("p.yaml", "seed: 2\n"));
  EXPECT_THAT(lines, ElementsAre(HasSubstr("p.yaml:1: data: required key missing"),
                                 HasSubstr("p.yaml:1: models: required key missing")));
}

TEST_F(PlanTest, BadEarlyStoppingValuesAreReported) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    metrics: [mae]
    loss: mse
    layers: [Flatten]
    early_stopping:
      monitor: val_accuracy
      patience: -1
      min_delta: -0.5
      restore_best_weights: "yes"
      mode: up
      start_from_epoch: 1.5
)"));
  ASSERT_EQ(lines.size(), 6u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:9: models[0].early_stopping.monitor: expected one of "
                                  "loss, mae, val_loss, val_mae, got \"val_accuracy\""));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:10: models[0].early_stopping.patience: expected a "
                                  "non-negative integer"));
  EXPECT_THAT(lines[2], HasSubstr("p.yaml:11: models[0].early_stopping.min_delta: expected a "
                                  "number >= 0, got -0.5"));
  EXPECT_THAT(lines[3], HasSubstr("p.yaml:12: models[0].early_stopping.restore_best_weights: "
                                  "expected true or false, got \"yes\""));
  EXPECT_THAT(lines[4], HasSubstr("p.yaml:13: models[0].early_stopping.mode: expected one of "
                                  "auto, min, max, got \"up\""));
  EXPECT_THAT(lines[5], HasSubstr("p.yaml:14: models[0].early_stopping.start_from_epoch"));
}

TEST_F(PlanTest, AMistakeInDefaultsIsReportedOnceAtTheDefaults) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(defaults:
  batch_size: 0
models:
  - name: a-{u}
    grid: {u: [1, 2, 3]}
    layers: [Dense: {units: "{u}"}]
  - name: b
    layers: [Flatten]
)"));
  EXPECT_THAT(lines, ElementsAre(HasSubstr("p.yaml:4: defaults.batch_size: expected a positive "
                                           "integer, got 0")));
}

TEST_F(PlanTest, BatchSplitIsAPositiveIntegerKeptInTheExpandedPlan) {
  const std::string good = std::string(kData) + R"(defaults:
  batch_split: 3
models:
  - name: a
    layers: [Flatten]
  - name: b
    batch_split: null
    layers: [Flatten]
)";
  const Plan plan = load_plan(write("good.yaml", good));
  ASSERT_EQ(plan.models.size(), 2u);
  EXPECT_EQ(plan.models[0].batch_split, 3);
  EXPECT_EQ(plan.models[1].batch_split, 0);  // null: back to automatic
  EXPECT_EQ(plan.models[0].expanded_json().value("batch_split", 0), 3);
  EXPECT_FALSE(plan.models[1].expanded_json().contains("batch_split"));
  const std::string path = write("p.yaml", good + R"(  - name: c
    batch_split: 0
    layers: [Flatten]
  - name: d
    batch_split: two
    layers: [Flatten]
)");
  EXPECT_THAT(problems_of(path),
              ElementsAre(HasSubstr("p.yaml:12: models[2].batch_split: expected a positive "
                                    "integer, got 0"),
                          HasSubstr("p.yaml:15: models[3].batch_split: expected a positive "
                                    "integer, got \"two\"")));
}

TEST_F(PlanTest, GridValueErrorShowsTheOffendingValue) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m-{u}
    grid: {u: [8, -2]}
    layers:
      - Dense: {units: "{u}"}
)"));
  EXPECT_THAT(lines, ElementsAre(HasSubstr("p.yaml:7: models[0].layers[0].Dense.units: expected a "
                                           "positive integer, got -2")));
}

TEST_F(PlanTest, LayerMappingWithSeveralKeysGetsAHint) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    layers:
      - Dense:
        units: 3
)"));
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:6: models[0].layers[0]: a layer is a mapping with one "
                                  "key, its class"));
  EXPECT_THAT(lines[0], HasSubstr("indent the config under the class"));
}

TEST_F(PlanTest, DuplicateYamlKeysAndLayerNamesAreReported) {
  const auto lines = problems_of(write("p.yaml", std::string(kData) + R"(models:
  - name: m
    epochs: 2
    epochs: 3
    layers:
      - Dense: {units: 2, name: d}
      - Dense: {units: 2, name: d}
)"));
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("p.yaml:6: models[0].epochs: duplicate key 'epochs'; expected "
                                  "each key once, got it again on line 6 (first on line 5)"));
  EXPECT_THAT(lines[1], HasSubstr("p.yaml:9: models[0].layers[1].Dense.name: duplicate layer "
                                  "name 'd'"));
}

TEST_F(PlanTest, MissingFileIsNamed) {
  const std::string path = dir() + "/nope.yaml";
  EXPECT_EQ(error_of(path),
            "failed to load plan '" + path + "': no such file; expected a YAML or JSON plan file");
}

TEST_F(PlanTest, YamlSyntaxErrorNamesFileAndLine) {
  const std::string path = write("p.yaml",
                                 "data:\n  train: fashion-mnist:train\nmodels: [\n"
                                 "  {name: m,\n  layers: [Flatten]\n");
  const std::string msg = error_of(path);
  EXPECT_THAT(msg, StartsWith("failed to load plan '" + path + "': 1 problem(s)\n" + path + ":"));
  EXPECT_THAT(msg, HasSubstr("invalid YAML"));
}

TEST_F(PlanTest, NonMappingPlanIsRefused) {
  EXPECT_THAT(problems_of(write("p.yaml", "- a\n- b\n")),
              ElementsAre(HasSubstr("p.yaml:1: a plan is a mapping; expected a mapping with keys "
                                    "data, defaults, group_by, models, save, search, seed")));
}

// The plan keeps each entry once and expands a model when it is asked for: the same spec every
// time (on any thread), with the name and data source load_plan found for it.
TEST_F(PlanTest, ModelsExpandOnDemandToTheSameSpecWithTheirNameAndSource) {
  const Plan p = load_plan(write("lazy.yaml", R"(data:
  train: {x: x.npy, y: y.npy}
models:
  - name: s-{k}-{u}
    grid: {k: [a, b], u: [2, 3]}
    data: {train: {x: "series_{k}_x.npy", y: "series_{k}_y.npy"}}
    layers: [Flatten, {Dense: {units: "{u}"}}]
  - name: plain
    layers: [Flatten, {Dense: {units: 4}}]
)"));
  ASSERT_EQ(p.models.size(), 5u);
  EXPECT_THAT(names(p), ElementsAre("s-a-2", "s-a-3", "s-b-2", "s-b-3", "plain"));
  ASSERT_EQ(p.sources.size(), 3u);  // the plan's, series a, series b
  const std::vector<size_t> sources = {1, 1, 2, 2, 0};
  std::vector<std::string> expanded(p.models.size());
  for (size_t k = 0; k < p.models.size(); ++k) {
    const ModelSpec m = p.models[k];
    EXPECT_EQ(p.models.name(k), m.name);
    EXPECT_EQ(p.models.source(k), sources[k]) << m.name;
    EXPECT_EQ(m.source, sources[k]) << m.name;
    EXPECT_EQ(m.layers[1].config["name"], "dense");
    EXPECT_EQ(m.where,
              p.path + ":" + (k < 4 ? "4" : "8") + ": models[" + (k < 4 ? "0" : "1") + "]");
    expanded[k] = m.expanded;
  }
  EXPECT_EQ(p.models[1].layers[1].config["units"], 3);
  EXPECT_THAT(p.models[2].expanded, HasSubstr("series_b_x.npy"));
  std::vector<std::thread> threads;
  std::atomic<int> same{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (size_t k = 0; k < p.models.size(); ++k) same += p.models[k].expanded == expanded[k];
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(same.load(), 4 * 5);
  EXPECT_THROW(p.models.at(5), std::out_of_range);
}

// ---- plan.yaml ----

TEST_F(PlanTest, PlanToYamlLoadsBackToTheSameModels) {
  const Plan a = load_plan(fixture("example.yaml"));
  const std::string yaml = plan_to_yaml(a);
  const Plan b = load_plan(write("plan.yaml", yaml));
  EXPECT_EQ(b.seed, a.seed);
  EXPECT_EQ(plan_to_yaml(b), yaml);
  // Written one model at a time, the text is that of the whole document written at once (as runs
  // before the streaming writer wrote plan.yaml), so their folders still resume.
  Json whole = Json::object({{"seed", a.seed}, {"models", Json::array()}});
  if (a.has_data) whole["data"] = a.data.to_json();
  for (const auto& m : a.models) whole["models"].push_back(m.expanded_json());
  const std::vector<std::string> first = {"name", "seed", "data", "epochs", "layers"};
  EXPECT_EQ(plan_detail::json_to_yaml(whole, first, "models", a.models.size(),
                                      [&](size_t k) { return a.models[k].expanded_json(); }),
            plan_detail::json_to_yaml(whole, first));
  EXPECT_EQ(plan_detail::yaml_to_json(YAML::Load(yaml)).value, whole);
  ASSERT_EQ(b.models.size(), a.models.size());
  for (size_t i = 0; i < a.models.size(); ++i) {
    const ModelSpec& x = a.models[i];
    const ModelSpec& y = b.models[i];
    EXPECT_EQ(y.name, x.name);
    EXPECT_EQ(y.expanded, x.expanded);
    EXPECT_EQ(y.epochs, x.epochs);
    EXPECT_EQ(y.batch_size, x.batch_size);
    EXPECT_EQ(y.metrics, x.metrics);
    EXPECT_EQ(y.optimizer.learning_rate, x.optimizer.learning_rate);
    EXPECT_EQ(y.early_stopping.has_value(), x.early_stopping.has_value());
    ASSERT_EQ(y.layers.size(), x.layers.size());
    for (size_t j = 0; j < x.layers.size(); ++j) {
      EXPECT_EQ(y.layers[j].class_name, x.layers[j].class_name);
      EXPECT_EQ(y.layers[j].config, x.layers[j].config);
    }
  }
  EXPECT_EQ(plan_to_yaml(b), yaml);  // stable: resuming a run compares plan.yaml texts
}

TEST_F(PlanTest, PlanToYamlKeepsAmbiguousStringsAndAwkwardNumbers) {
  const Plan a = load_plan(write("p.yaml", R"(data:
  train: {csv: "data dir/t.csv", label: "1"}
models:
  - name: "true"
    optimizer: {SGD: {learning_rate: 1.0, momentum: 0.1}}
    layers:
      - Rescaling: {scale: 1.0e-300, offset: 0.30000000000000004}
      - Reshape: {target_shape: [-1], name: "null"}
)"));
  const Plan b = load_plan(write("plan.yaml", plan_to_yaml(a)));
  EXPECT_EQ(plan_to_yaml(b), plan_to_yaml(a));
  EXPECT_EQ(b.models[0].name, "true");
  EXPECT_EQ(b.data.train.label, "1");
  EXPECT_TRUE(b.models[0].layers[0].config["scale"].is_number_float());
  EXPECT_TRUE(b.models[0].expanded_json()["optimizer"]["SGD"]["learning_rate"].is_number_float());
}

TEST_F(PlanTest, PlanToYamlReadsWell) {
  const std::string yaml = plan_to_yaml(load_plan(fixture("example.yaml")));
  EXPECT_THAT(yaml, StartsWith("seed: 1\ndata:\n  train: fashion-mnist:train\n"));
  EXPECT_THAT(yaml, HasSubstr("  - name: mlp-32-0.001\n"));
  EXPECT_THAT(yaml, HasSubstr("- Dense: {name: dense, activation: relu, units: 32}"));
}

// A grid of 300 models is checked in blocks on several threads: the same problems in the same
// order as on one (per-model ones, ones that repeat, and one an unknown placeholder mutes), and
// the same models.
TEST_F(PlanTest, AGridCheckedOnSeveralThreadsGivesTheSameProblemsAndModels) {
  auto plan_text = [](bool bad) {
    std::string us;
    for (int i = 0; i < 150; ++i)
      us += std::string(i ? ", " : "") +
            (bad && i % 10 == 3 ? "\"bad " + std::to_string(i) + "\"" : std::to_string(i + 1));
    return std::string(kData) + "models:\n  - name: g-{u}-{a}\n    grid: {u: [" + us +
           "], a: [relu, " + (bad ? "nope" : "tanh") +
           "]}\n    layers:\n      - Flatten: {}\n"
           "      - Dense: {units: \"{u}\", activation: \"{a}\"" +
           (bad ? ", kernel_initializer: \"glorot_{zz}\"" : "") +
           "}\n      - Dense: {units: 3, activation: softmax}\n";
  };
  std::map<int, std::string> message;
  for (int threads : {1, 3}) {
    try {
      parse_plan(plan_text(true), "grid.yaml", dir(), threads);
      ADD_FAILURE() << "expected a PlanError on " << threads << " thread(s)";
    } catch (const PlanError& e) {
      message[threads] = e.what();
    }
  }
  EXPECT_THAT(message[1], HasSubstr("unknown placeholder '{zz}'"));
  EXPECT_THAT(message[1], HasSubstr("model name \"g-bad 143-nope\" is not safe"));
  EXPECT_EQ(message[3], message[1]);
  const Plan one = parse_plan(plan_text(false), "grid.yaml", dir(), 1);
  const Plan three = parse_plan(plan_text(false), "grid.yaml", dir(), 3);
  ASSERT_EQ(one.models.size(), 300u);
  EXPECT_EQ(names(three), names(one));
  EXPECT_EQ(plan_to_yaml(three), plan_to_yaml(one));
}

// PlanModels::kind: models that differ only in name, parameters and optimizer rates share
// one, numbered in plan order; anything else (a layer's units, the optimizer's class or flags)
// makes another. The same on one thread and on three (the grid checked in blocks).
TEST_F(PlanTest, ModelKindsGroupModelsThatDifferOnlyInNameParametersAndRates) {
  std::string lrs, us;
  for (int i = 0; i < 100; ++i) lrs += std::string(i ? ", " : "") + std::to_string(0.001 * (i + 1));
  const std::string text = std::string(kData) + "models:\n  - name: g-{u}-{lr}-{r}\n" +
                           "    grid: {u: [4, 8], lr: [" + lrs + "], r: [0, 1]}\n" +
                           "    parameters: {rep: \"{r}\"}\n" +
                           "    optimizer: {Adam: {learning_rate: \"{lr}\"}}\n" +
                           "    layers: [Flatten, {Dense: {units: \"{u}\"}}]\n" +
                           "  - name: sgd\n    optimizer: {SGD: {learning_rate: 0.1}}\n" +
                           "    layers: [Flatten, {Dense: {units: 4}}]\n" + "  - name: momentum\n" +
                           "    optimizer: {SGD: {learning_rate: 0.2, momentum: 0.9}}\n" +
                           "    layers: [Flatten, {Dense: {units: 4}}]\n" +
                           "  - name: sgd-again\n    optimizer: {SGD: {learning_rate: 0.3}}\n" +
                           "    layers: [Flatten, {Dense: {units: 4}}]\n";
  for (int threads : {1, 3}) {
    const Plan p = parse_plan(text, "kinds.yaml", dir(), threads);
    ASSERT_EQ(p.models.size(), 403u);
    for (size_t k = 0; k < 400; ++k) {
      ASSERT_EQ(p.models.kind(k), k < 200 ? 0u : 1u) << p.models.name(k);
      // The lazily expanded model is the one load_plan checked: its name, its parameters, and
      // its text a compact dump of itself.
      const ModelSpec m = p.models[k];
      EXPECT_EQ(m.name, p.models.name(k));
      EXPECT_EQ(m.expanded, m.expanded_json().dump());
      EXPECT_EQ(p.models.parameters(k).at(0).second, Json(k % 2));
      // A worker's model is the same without the text.
      const ModelSpec t = p.models.to_train(k);
      EXPECT_TRUE(t.expanded.empty());
      EXPECT_EQ(t.name, m.name);
      EXPECT_EQ(t.layers.size(), m.layers.size());
      EXPECT_EQ(t.layers.at(1).config, m.layers.at(1).config);
      EXPECT_EQ(t.optimizer.learning_rate, m.optimizer.learning_rate);
      EXPECT_EQ(t.epochs, m.epochs);
      EXPECT_EQ(t.where, m.where);
    }
    EXPECT_EQ(p.models.name(1), "g-4-0.001-1");
    EXPECT_EQ(p.models.kind(400), 2u);  // SGD
    EXPECT_EQ(p.models.kind(401), 3u);  // SGD with momentum: other slots
    EXPECT_EQ(p.models.kind(402), 2u);  // SGD at another rate
    EXPECT_THROW(p.models.to_train(403), std::out_of_range);
  }
}

// A grid whose placeholders stand only in the name, parameters and optimizer: a worker's model
// (PlanModels::to_train) is its entry's first but for its name and optimizer, and equals the
// fully expanded model in every field training reads.
TEST_F(PlanTest, AWorkersModelOfALearningRateGridIsTheExpandedOne) {
  const std::string text =
      std::string(kData) + "defaults: {epochs: 3, batch_size: 16}\n" +
      "models:\n  - name: lr-{lr}-{r}-{beta}\n" +
      "    grid: {lr: [0.1, 0.25, 0.5], r: [0, 1], beta: [0.8, 0.9]}\n" +
      "    parameters: {rep: \"{r}\"}\n" +
      "    optimizer: {Adam: {learning_rate: \"{lr}\", beta_1: \"{beta}\"}}\n" +
      "    early_stopping: {monitor: loss, patience: 2}\n" +
      "    layers: [Flatten, {Dense: {units: 5, activation: relu}}]\n" +
      "  - name: sgd-{m}\n    grid: {m: [0.0, 0.9]}\n" +
      "    optimizer: {SGD: {learning_rate: 0.1, momentum: \"{m}\"}}\n" +
      "    layers: [Flatten, {Dense: {units: 4}}]\n";
  const Plan p = parse_plan(text, "lr.yaml", dir(), 1);
  ASSERT_EQ(p.models.size(), 14u);
  for (size_t k = 0; k < p.models.size(); ++k) {
    const ModelSpec m = p.models[k];
    const ModelSpec t = p.models.to_train(k);
    EXPECT_TRUE(t.expanded.empty());
    EXPECT_EQ(t.name, m.name);
    EXPECT_EQ(t.where, m.where);
    EXPECT_EQ(t.source, m.source);
    EXPECT_EQ(t.epochs, m.epochs);
    EXPECT_EQ(t.batch_size, m.batch_size);
    ASSERT_EQ(t.layers.size(), m.layers.size());
    for (size_t l = 0; l < t.layers.size(); ++l) {
      EXPECT_EQ(t.layers[l].class_name, m.layers[l].class_name);
      EXPECT_EQ(t.layers[l].config, m.layers[l].config);
    }
    EXPECT_EQ(t.metrics, m.metrics);
    EXPECT_EQ(t.early_stopping.has_value(), m.early_stopping.has_value());
    const OptimizerSpec& a = t.optimizer;
    const OptimizerSpec& b = m.optimizer;
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.learning_rate, b.learning_rate) << m.name;
    EXPECT_EQ(a.momentum, b.momentum) << m.name;
    EXPECT_EQ(a.beta_1, b.beta_1) << m.name;
    EXPECT_EQ(a.beta_2, b.beta_2);
    EXPECT_EQ(a.epsilon, b.epsilon);
    EXPECT_EQ(a.nesterov, b.nesterov);
    EXPECT_EQ(a.weight_decay, b.weight_decay);
  }
  EXPECT_EQ(p.models.to_train(5).name, "lr-0.25-0-0.9");
  EXPECT_EQ(p.models.to_train(5).optimizer.learning_rate, 0.25);
  EXPECT_EQ(p.models.to_train(5).optimizer.beta_1, 0.9);
  EXPECT_EQ(p.models.to_train(13).optimizer.momentum, 0.9);
}

// A learning-rate grid's models are checked without building each (the first is built): a bad
// point is still reported as building it reports it, with its path and line, the same on one
// thread and on three, and the good points load with their kinds.
TEST_F(PlanTest, ALearningRateGridReportsItsBadPointsAsBuildingThemWould) {
  std::string lrs;
  for (int i = 0; i < 300; ++i) lrs += std::to_string(0.001 * (i + 1)) + ", ";
  const std::string text = std::string(kData) + "models:\n  - name: \"lr-{lr}{tag}\"\n" +
                           "    grid: {tag: [\"\", \"/x\"], lr: [" + lrs + "-1.0]}\n" +
                           "    optimizer: {Adam: {learning_rate: \"{lr}\"}}\n" +
                           "    layers: [Flatten, {Dense: {units: 3}}]\n";
  std::string message[4];
  for (int threads : {1, 3}) {
    try {
      parse_plan(text, "bad.yaml", dir(), threads);
      ADD_FAILURE() << "expected a PlanError";
    } catch (const PlanError& e) {
      message[threads] = e.what();
    }
  }
  EXPECT_EQ(message[3], message[1]);
  // The 301 names with "/x" are unsafe; lr -1 is refused once (the same problem at one path).
  EXPECT_THAT(message[1], HasSubstr("bad.yaml:4: models[0].name: model name \"lr-0.001/x\" is "
                                    "not safe as a file name"));
  EXPECT_THAT(message[1], HasSubstr("bad.yaml:6: models[0].optimizer.Adam.learning_rate: "
                                    "expected a number > 0, got -1.0"));
  EXPECT_THAT(message[1], HasSubstr("302 problem(s)"));
  const Plan good =
      parse_plan(std::string(kData) + "models:\n  - name: \"lr-{lr}\"\n" + "    grid: {lr: [" +
                     lrs + "0.5]}\n" + "    optimizer: {SGD: {learning_rate: \"{lr}\"}}\n" +
                     "    layers: [Flatten, {Dense: {units: 3}}]\n",
                 "good.yaml", dir(), 3);
  ASSERT_EQ(good.models.size(), 301u);
  for (size_t k = 0; k < good.models.size(); ++k) {
    EXPECT_EQ(good.models.kind(k), 0u);
    EXPECT_EQ(good.models.name(k), good.models[k].name);
  }
}

}  // namespace
}  // namespace nnfleet
