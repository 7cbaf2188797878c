// The public C++ API (include/nnfleet/): runs from plan text on caller-owned arrays equal runs
// from files, predictions land in the caller's buffers whatever the workers, and every failure is
// the documented Error subclass with the CLI's message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "../fleet/fleet_test_util.h"
#include "io/keras/hdf5.h"
#include "io/keras/keras_reader.h"
#include "io/keras/keras_writer.h"
#include "nnfleet/nnfleet.h"
#include "platform/cpu.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::write_blobs;
using testing_util::write_text;

// Blobs (fleet_test_util.h) of `n` samples: [n,8,8,1] float32 images, int32 labels 0..2.
struct Blobs {
  std::vector<float> x;
  std::vector<int32_t> y;
  int64_t n = 0;
  api::ArrayView xv() const { return {x.data(), api::ElementType::kFloat32, {n, 8, 8, 1}}; }
  api::ArrayView yv() const { return {y.data(), api::ElementType::kInt32, {n}}; }
};

Blobs read_blobs(const std::string& dir, const std::string& stem) {
  const Array x = load_npy(dir + "/" + stem + "_x.npy"), y = load_npy(dir + "/" + stem + "_y.npy");
  Blobs b;
  b.n = x.rows();
  b.x.assign(static_cast<const float*>(x.data()),
             static_cast<const float*>(x.data()) + x.shape().size());
  b.y.assign(static_cast<const int32_t*>(y.data()), static_cast<const int32_t*>(y.data()) + b.n);
  return b;
}

// A source value in JSON: an array the program gives by key, or a file.
std::string array_source(const std::string& key) { return R"({"array": ")" + key + R"("})"; }
std::string file_source(const std::string& path) { return "\"" + path + "\""; }

// `train_x` and `train_y` are source values (array_source(), file_source()).
std::string plan_text(const std::string& train_x, const std::string& train_y) {
  return R"({"seed": 7,
 "data": {"train": {"x": )" +
         train_x + R"(, "y": )" + train_y + R"(}, "validation_split": 0.25},
 "defaults": {"epochs": 3, "batch_size": 16, "loss": "sparse_categorical_crossentropy",
              "metrics": ["accuracy"], "optimizer": {"Adam": {"learning_rate": 0.01}}},
 "models": [
  {"name": "mlp", "layers": [{"Flatten": {}}, {"Dense": {"units": 8, "activation": "relu"}},
                             {"Dense": {"units": 3, "activation": "softmax"}}]},
  {"name": "cnn", "layers": [{"Conv2D": {"filters": 4, "kernel_size": 3, "activation": "relu"}},
                             {"Flatten": {}}, {"Dense": {"units": 3, "activation": "softmax"}}]}]}
)";
}

std::vector<float> predict_all(const api::Model& m, const Blobs& b, int workers,
                               std::vector<float>* losses = nullptr) {
  std::vector<float> p(static_cast<size_t>(b.n) * 3);
  api::PredictOptions o;
  o.workers = workers;
  o.batch_size = 7;
  if (losses) {
    losses->assign(static_cast<size_t>(b.n), 0.0f);
    o.loss = "sparse_categorical_crossentropy";
    m.predict({b.xv()}, {std::span<float>(p)}, o, {b.yv()}, {std::span<float>(*losses)});
  } else {
    m.predict({b.xv()}, {std::span<float>(p)}, o);
  }
  return p;
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_blobs(dir.path, "train", 96, 3);
    data = read_blobs(dir.path, "train");
  }
  api::RunResult train_memory(api::RunOptions o = {}) {
    if (!o.out || o.out->empty()) o.out = std::nullopt;
    return api::train(api::PlanInput::text(plan_text(array_source("x"), array_source("y")), "mem"),
                      {{"x", data.xv()}, {"y", data.yv()}}, o);
  }
  TempDir dir;
  Blobs data;
};

TEST_F(ApiTest, MemoryArraysTrainAsTheSameFilesDo) {
  api::RunOptions o;
  o.workers = 2;
  const api::RunResult mem = train_memory(o);
  write_text(dir.path + "/plan.yaml",
             plan_text(file_source("train_x.npy"), file_source("train_y.npy")));
  o.out = dir.path + "/run";
  o.workers = 1;
  const api::RunResult file = api::train(api::PlanInput::file(dir.path + "/plan.yaml"), {}, o);
  ASSERT_EQ(mem.models.size(), 2u);
  ASSERT_EQ(file.models.size(), 2u);
  EXPECT_EQ(mem.out_dir, "");
  EXPECT_EQ(file.out_dir, dir.path + "/run");
  EXPECT_TRUE(mem.write_error.empty() && !mem.interrupted);
  for (size_t i = 0; i < 2; ++i) {
    const api::ModelResult &a = mem.models[i], &b = file.models[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.status, api::Status::kDone) << a.message;
    EXPECT_EQ(a.metrics, b.metrics);
    ASSERT_EQ(a.history.size(), 3u);
    for (size_t e = 0; e < a.history.size() && e < b.history.size(); ++e) {
      EXPECT_EQ(a.history[e].epoch, b.history[e].epoch);
      EXPECT_EQ(a.history[e].values, b.history[e].values);  // bit for bit; the seconds differ
    }
    EXPECT_EQ(a.history[2].values, a.metrics);
    ASSERT_TRUE(a.model && b.model);
    EXPECT_EQ(a.model_file, "");  // the temporary folder is gone
    EXPECT_TRUE(std::filesystem::exists(b.model_file));
    EXPECT_EQ(predict_all(*a.model, data, 1), predict_all(*b.model, data, 1));
  }
}

TEST_F(ApiTest, PredictIntoCallerBuffersIsTheSameForAnyWorkers) {
  const api::RunResult r = train_memory();
  const api::Model& m = *r.models[0].model;
  EXPECT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.outputs()[0].shape, std::vector<int64_t>{3});
  EXPECT_EQ(m.count_params(), r.models[0].params);
  EXPECT_THAT(m.summary(), HasSubstr("Dense"));
  std::vector<float> l1, l2;
  const std::vector<float> p1 = predict_all(m, data, 1, &l1), p2 = predict_all(m, data, 2, &l2);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(l1, l2);
  // The per-sample loss is the cross-entropy of the predicted probability of the label.
  for (int64_t i = 0; i < data.n; ++i) EXPECT_NEAR(l1[i], -std::log(p1[i * 3 + data.y[i]]), 1e-4);
}

TEST_F(ApiTest, EvaluateGivesKerasFiguresFromTheSameEngineAsPredict) {
  const api::RunResult r = train_memory();
  const api::Model& m = *r.models[0].model;
  std::vector<float> losses;
  const std::vector<float> p = predict_all(m, data, 1, &losses);
  api::EvaluateOptions o;
  o.loss = "sparse_categorical_crossentropy";
  o.metrics = {"accuracy"};
  o.batch_size = 7;
  o.workers = 1;
  const auto one = m.evaluate({data.xv()}, {data.yv()}, o);
  o.workers = 2;
  EXPECT_EQ(m.evaluate({data.xv()}, {data.yv()}, o), one);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].first, "loss");
  double sum = 0;
  int right = 0;
  for (int64_t i = 0; i < data.n; ++i) {
    sum += losses[static_cast<size_t>(i)];
    const float* row = p.data() + i * 3;
    right += std::max_element(row, row + 3) - row == data.y[static_cast<size_t>(i)];
  }
  EXPECT_DOUBLE_EQ(one[0].second, sum / static_cast<double>(data.n));
  EXPECT_EQ(one[1].first, "accuracy");
  EXPECT_DOUBLE_EQ(one[1].second, right / static_cast<double>(data.n));
  o.metrics = {"mean_absolute_percentage_errorish"};
  EXPECT_THROW(m.evaluate({data.xv()}, {data.yv()}, o), UsageError);
  EXPECT_THROW(m.evaluate({data.xv()}, {}, o), UsageError);
}

// A binary classifier trained with the epoch-level metrics (Keras's AUC, Precision, Recall,
// RootMeanSquaredError, R2Score) on test data equal to its training data: evaluate, with the
// metrics its file names, reports what training computed on the test data with the same weights.
TEST_F(ApiTest, EvaluateComputesTheEpochMetricsAsTrainingDoes) {
  std::vector<float> yb(static_cast<size_t>(data.n));
  for (int64_t i = 0; i < data.n; ++i) yb[static_cast<size_t>(i)] = data.y[i] == 0 ? 1.0f : 0.0f;
  const api::ArrayView ybv{yb.data(), api::ElementType::kFloat32, {data.n, 1}};
  const std::string plan = R"({"seed": 3,
 "data": {"train": {"x": {"array": "x"}, "y": {"array": "yb"}},
          "test": {"x": {"array": "x"}, "y": {"array": "yb"}}},
 "defaults": {"epochs": 2, "batch_size": 16, "loss": "binary_crossentropy",
              "metrics": ["auc", "precision", "recall", "root_mean_squared_error", "r2_score"],
              "optimizer": {"Adam": {"learning_rate": 0.01}}},
 "models": [{"name": "bin", "layers": [{"Flatten": {}}, {"Dense": {"units": 4, "activation": "relu"}},
                                       {"Dense": {"units": 1, "activation": "sigmoid"}}]}]})";
  api::RunOptions ro;
  ro.out = std::nullopt;
  const api::RunResult r =
      api::train(api::PlanInput::text(plan, "bin"), {{"x", data.xv()}, {"yb", ybv}}, ro);
  ASSERT_EQ(r.models.at(0).status, api::Status::kDone) << r.models[0].message;
  const api::Model& m = *r.models[0].model;
  api::EvaluateOptions o;  // the file's loss and metrics
  o.batch_size = 7;
  o.workers = 1;
  const auto one = m.evaluate({data.xv()}, {ybv}, o);
  o.workers = 2;
  EXPECT_EQ(m.evaluate({data.xv()}, {ybv}, o), one);
  std::map<std::string, double> trained(r.models[0].metrics.begin(), r.models[0].metrics.end());
  ASSERT_EQ(one.size(), 6u);
  for (const auto& [key, value] : one) {
    ASSERT_TRUE(trained.count("test_" + key)) << key;
    EXPECT_NEAR(value, trained["test_" + key], 1e-6) << key;
  }
  // The figures are not trivial: a model that learned something, scored in [0, 1].
  EXPECT_EQ(one[1].first, "auc");
  EXPECT_GT(one[1].second, 0.6);
  EXPECT_EQ(one[5].first, "r2_score");
}

TEST_F(ApiTest, SavedModelsReadBackTheSame) {
  const api::RunResult r = train_memory();
  const api::Model& m = *r.models[1].model;
  for (const char* ext : {".keras", ".h5"}) {
    const std::string path = dir.path + "/saved" + ext;
    m.save(path);
    EXPECT_EQ(predict_all(api::Model::load(path), data, 2), predict_all(m, data, 1)) << ext;
  }
  // ONNX as `nnfleet export` writes it (its predictions are checked against ONNX Runtime by the
  // export tests, tests/io).
  m.save(dir.path + "/saved.onnx");
  EXPECT_GT(std::filesystem::file_size(dir.path + "/saved.onnx"), 1000u);
  try {
    m.save(dir.path + "/saved.txt");
    FAIL() << "saved as .txt";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected .keras, .h5 or .onnx"));
  }
}

// Every dataset below `g` by path: its dimensions, element type and raw bytes (read as the
// floats or the int64 it holds), so that two files' variables compare bit for bit.
using RawVars = std::map<std::string, std::string>;
void raw_vars(const h5::Group& g, const std::string& prefix, RawVars& out) {
  for (const auto& c : g.children()) {
    const std::string p = prefix + "/" + c;
    if (g.has_group(c)) {
      raw_vars(g.group(c), p, out);
      continue;
    }
    const h5::Dataset d = g.dataset(c);
    std::string v = std::to_string(d.type_class()) + ":" + std::to_string(d.type_size()) + "[";
    size_t n = 1;
    for (int64_t k : d.dims()) {
      v += std::to_string(k) + ",";
      n *= static_cast<size_t>(k);
    }
    v += "]";
    if (d.type_class() == H5T_INTEGER) {
      v += std::to_string(d.read_int64());
    } else {
      std::vector<float> f(n);
      d.read_floats(f.data(), n);
      v.append(reinterpret_cast<const char*>(f.data()), n * sizeof(float));
    }
    out[p] = v;
  }
}

// The optimizer variables of a .keras file (optimizer/vars in model.weights.h5) or a legacy .h5
// file (optimizer_weights).
RawVars optimizer_vars(const std::string& path) {
  const bool keras = path.size() > 6 && path.substr(path.size() - 6) == ".keras";
  const std::string bytes =
      keras ? ZipReader(path).read("model.weights.h5", uint64_t{1} << 32) : "";
  auto lock = h5::hdf5_lock();
  h5::File f = keras ? h5::File::open_image(path, bytes) : h5::File::open(path);
  const std::string group = keras ? "optimizer/vars" : "optimizer_weights";
  RawVars out;
  if (f.root().has_group(group)) raw_vars(f.root().group(group), "", out);
  return out;
}

// Keras's load_model keeps a file's compile() and optimizer: a trained model's file, loaded and
// saved again (.keras or .h5), evaluates with its own loss and metrics and holds the same
// optimizer variables.
TEST_F(ApiTest, SavingALoadedFileKeepsItsCompileConfigAndOptimizerState) {
  api::RunOptions o;
  o.out = dir.path + "/run";
  const api::RunResult r = train_memory(o);
  ASSERT_EQ(r.models[1].status, api::Status::kDone) << r.models[1].message;
  const std::string original = r.models[1].model_file;
  const RawVars want = optimizer_vars(original);
  ASSERT_EQ(want.size(), 2u + 2 * 4);  // iterations, learning rate, m and v of 4 variables
  const api::Model loaded = api::Model::load(original);
  const auto figures = loaded.evaluate({data.xv()}, {data.yv()});
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[1].first, "accuracy");
  const LoadedModel first = load_keras_model(original);
  for (const char* ext : {".keras", ".h5"}) {
    const std::string path = dir.path + "/again" + ext;
    loaded.save(path);
    const api::Model back = api::Model::load(path);
    EXPECT_EQ(back.evaluate({data.xv()}, {data.yv()}), figures) << ext;
    const LoadedModel again = load_keras_model(path);
    EXPECT_EQ(again.optimizer_state, first.optimizer_state) << ext;
    EXPECT_EQ(again.iterations, first.iterations) << ext;
    EXPECT_EQ(again.optimizer.kind, first.optimizer.kind) << ext;
    // A second generation writes the variables the first did, bit for bit.
    const std::string twice = dir.path + "/twice" + ext;
    back.save(twice);
    EXPECT_EQ(optimizer_vars(twice), optimizer_vars(path)) << ext;
  }
  EXPECT_EQ(optimizer_vars(dir.path + "/again.keras"), want);
  EXPECT_EQ(optimizer_vars(dir.path + "/again.h5").size(), 1u + 2 * 4);  // no rate variable
}

// restore_best_weights: a model's figures are those of the epoch whose weights its file holds.
// Early stopping that monitors the training loss in "max" mode finds epoch 1 best (the loss
// falls), stops after `patience` epochs without a higher one and puts epoch 1's weights back.
TEST_F(ApiTest, RestoredBestWeightsReportTheBestEpochsFiguresAndTheLastApart) {
  std::string plan = plan_text(array_source("x"), array_source("y"));
  const std::string defaults = R"("defaults": {)";
  plan.replace(plan.find(defaults), defaults.size(),
               defaults + R"("early_stopping": {"monitor": "loss", "mode": "max", "patience": 2,
                   "restore_best_weights": true}, )");
  plan.replace(plan.find(R"("epochs": 3)"), 11, R"("epochs": 6)");
  api::RunOptions o;
  o.out = dir.path + "/run";
  const api::RunResult r =
      api::train(api::PlanInput::text(plan, "es"), {{"x", data.xv()}, {"y", data.yv()}}, o);
  for (const api::ModelResult& m : r.models) {
    ASSERT_EQ(m.status, api::Status::kDone) << m.message;
    ASSERT_EQ(m.best.epoch, 1) << m.name;
    ASSERT_EQ(m.history.size(), 3u) << m.name;  // stopped after 2 epochs without a higher loss
    EXPECT_EQ(m.metrics, m.history[0].values) << m.name;
    EXPECT_EQ(m.last_metrics, m.history[2].values) << m.name;
    EXPECT_NE(m.metrics, m.last_metrics) << m.name;
    // The saved file holds epoch 1's weights: its evaluation on the validation rows (the last
    // quarter, as Keras's validation_split takes them) is epoch 1's val_loss and val_accuracy.
    const int64_t n_val = data.n / 4, first = data.n - n_val;
    const api::ArrayView xv{
        data.x.data() + first * 64, api::ElementType::kFloat32, {n_val, 8, 8, 1}};
    const api::ArrayView yv{data.y.data() + first, api::ElementType::kInt32, {n_val}};
    const auto ev = api::Model::load(m.model_file).evaluate({xv}, {yv});
    std::map<std::string, double> kept(m.metrics.begin(), m.metrics.end());
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_NEAR(ev[0].second, kept.at("val_loss"), 1e-6) << m.name;
    EXPECT_DOUBLE_EQ(ev[1].second, kept.at("val_accuracy")) << m.name;
  }
  // results.json says the same, and the last epoch's apart.
  const Json results = Json::parse(testing_util::read_text(r.results_file));
  const Json& first = results.at("models").at(0);
  EXPECT_EQ(first.at("metrics").at("loss").get<double>(), r.models[0].history[0].values[0].second);
  EXPECT_EQ(first.at("last_metrics").at("loss").get<double>(),
            r.models[0].history[2].values[0].second);
}

// One rule for a loss's targets in train, predict and evaluate: integer labels with
// categorical_crossentropy are refused by all three (as Keras refuses them), naming the fix.
TEST_F(ApiTest, IntegerLabelsWithCategoricalCrossentropyAreRefusedAlikeEverywhere) {
  const std::string rule =
      "targets do not match the model output; expected y samples of 3 values (output [3]), got "
      "[]; for integer class labels use loss: sparse_categorical_crossentropy";
  std::string plan = plan_text(array_source("x"), array_source("y"));
  plan.replace(plan.find(R"("loss": "sparse_categorical_crossentropy")"), 41,
               R"("loss": "categorical_crossentropy")");
  try {
    (void)api::train(api::PlanInput::text(plan, "cce"), {{"x", data.xv()}, {"y", data.yv()}}, {});
    FAIL() << "trained";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(rule));
  }
  const api::RunResult r = train_memory();
  const api::Model& m = *r.models[0].model;
  std::vector<float> p(static_cast<size_t>(data.n) * 3), l(static_cast<size_t>(data.n));
  api::EvaluateOptions o;
  o.loss = "categorical_crossentropy";
  try {
    m.predict({data.xv()}, {std::span<float>(p)}, o, {data.yv()}, {std::span<float>(l)});
    FAIL() << "predicted";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr(rule));
  }
  try {
    (void)m.evaluate({data.xv()}, {data.yv()}, o);
    FAIL() << "evaluated";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr(rule));
  }
}

// User-given names on the model-file paths get a "did you mean": a loss, a metric, and a layer
// class in a Keras file.
TEST_F(ApiTest, MisspeltNamesForModelFilesGetADidYouMean) {
  const api::RunResult r = train_memory();
  const api::Model& m = *r.models[0].model;
  api::EvaluateOptions o;
  o.loss = "sparse_categorical_crossentropi";
  try {
    (void)m.evaluate({data.xv()}, {data.yv()}, o);
    FAIL() << "evaluated";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("(did you mean 'sparse_categorical_crossentropy'?)"));
  }
  o.loss = "";
  o.metrics = {"acuracy"};
  try {
    (void)m.evaluate({data.xv()}, {data.yv()}, o);
    FAIL() << "evaluated";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("(did you mean 'accuracy'?)"));
  }
  m.save(dir.path + "/m.keras");
  const LoadedModel lm = load_keras_model(dir.path + "/m.keras");
  std::string text = keras_config_json(*lm.model).dump();
  const std::string dense = R"("class_name":"Dense")";
  text.replace(text.find(dense), dense.size(), R"("class_name":"Dence")");
  write_text(dir.path + "/dence.json", text);
  try {
    (void)api::Model::load(dir.path + "/dence.json");
    FAIL() << "loaded";
  } catch (const FileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("class 'Dence', which nnfleet does not support"));
    EXPECT_THAT(e.what(), HasSubstr("(did you mean 'Dense'?)"));
  }
}

TEST_F(ApiTest, EventsArriveForEveryEpochOfEveryModel) {
  std::mutex mu;
  std::map<std::string, std::vector<int>> epochs;
  api::RunOptions o;
  o.on_event = [&](const api::Event& e) {
    if (e.kind != api::Event::Kind::kEpochEnd) return;
    std::lock_guard<std::mutex> g(mu);
    epochs[e.model].push_back(e.epoch);
    EXPECT_EQ(e.logs.front().first, "loss");
  };
  train_memory(o);
  EXPECT_EQ(epochs["mlp"], (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(epochs["cnn"], (std::vector<int>{1, 2, 3}));
}

// One kRunStart first, with every model's planned epochs; one kModelEnd per model, after its
// last epoch's kEpochEnd, with its final result.
TEST_F(ApiTest, ARunStartsAndEachModelEndsWithAnEvent) {
  std::mutex mu;
  std::vector<api::Event> seen;
  api::RunOptions o;
  o.on_event = [&](const api::Event& e) {
    if (e.kind == api::Event::Kind::kBatchEnd) return;
    std::lock_guard<std::mutex> g(mu);
    seen.push_back(e);
  };
  const api::RunResult r = train_memory(o);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().kind, api::Event::Kind::kRunStart);
  std::vector<std::pair<std::string, int>> planned = seen.front().planned;
  std::sort(planned.begin(), planned.end());
  EXPECT_EQ(planned, (std::vector<std::pair<std::string, int>>{{"cnn", 3}, {"mlp", 3}}));
  for (const api::ModelResult& m : r.models) {
    std::vector<const api::Event*> mine;
    for (const api::Event& e : seen)
      if (e.model == m.name) mine.push_back(&e);
    ASSERT_EQ(mine.size(), 4u) << m.name;
    const api::Event& end = *mine.back();
    EXPECT_EQ(end.kind, api::Event::Kind::kModelEnd) << m.name;
    EXPECT_EQ(end.status, api::Status::kDone);
    EXPECT_EQ(end.epoch, 3);
    EXPECT_EQ(end.logs, m.metrics);
    EXPECT_EQ(end.seconds, m.seconds);
  }
}

// A grid's models carry their values (as results.csv has them) unless the caller, as the CLI
// does, asks for none; the figures are the same either way.
TEST_F(ApiTest, ResultsCarryEachModelsParametersUnlessAskedNotTo) {
  const std::string plan =
      R"({"seed": 3, "data": {"train": {"x": {"array": "x"}, "y": {"array": "y"}}},
 "defaults": {"epochs": 1, "batch_size": 32, "loss": "sparse_categorical_crossentropy"},
 "models": [{"name": "g-{u}-{lr}", "grid": {"u": [2, 4], "lr": [0.01, 0.1]},
   "optimizer": {"Adam": {"learning_rate": "{lr}"}},
   "layers": [{"Flatten": {}}, {"Dense": {"units": "{u}", "activation": "softmax"}},
              {"Dense": {"units": 3, "activation": "softmax"}}]}]})";
  api::RunOptions o;
  o.out = std::nullopt;  // a temporary folder
  const api::DataArrays arrays = {{"x", data.xv()}, {"y", data.yv()}};
  const api::RunResult with = api::train(api::PlanInput::text(plan, "grid"), arrays, o);
  o.parameters = false;
  const api::RunResult without = api::train(api::PlanInput::text(plan, "grid"), arrays, o);
  ASSERT_EQ(with.models.size(), 4u);
  ASSERT_EQ(without.models.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    const api::ModelResult &a = with.models[k], &b = without.models[k];
    const std::string u = a.name.substr(2, a.name.find('-', 2) - 2);
    EXPECT_EQ(a.parameters, (std::vector<std::pair<std::string, std::string>>{
                                {"u", u}, {"lr", a.name.substr(3 + u.size())}}))
        << a.name;
    EXPECT_TRUE(b.parameters.empty()) << b.name;
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.metrics, b.metrics);
  }
}

// stop_model stops one model after the epoch it answered true for, as early stopping would:
// it ends done with that epoch's figures and the other model trains on, unchanged.
TEST_F(ApiTest, StopModelEndsThatModelAfterTheEpochAndLeavesTheOthers) {
  const api::RunResult whole = train_memory();
  std::mutex mu;
  std::vector<std::pair<std::string, int>> asked;
  api::RunOptions o;
  o.stop_model = [&](const std::string& model, int epoch) {
    std::lock_guard<std::mutex> g(mu);
    asked.emplace_back(model, epoch);
    return model == "cnn" && epoch == 2;
  };
  const api::RunResult r = train_memory(o);
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<std::pair<std::string, int>>{
                       {"cnn", 1}, {"cnn", 2}, {"mlp", 1}, {"mlp", 2}, {"mlp", 3}}));
  ASSERT_EQ(r.models[1].name, "cnn");
  EXPECT_EQ(r.models[1].status, api::Status::kDone);
  EXPECT_EQ(r.models[1].epochs, 2);
  EXPECT_EQ(r.models[1].history.size(), 2u);
  EXPECT_EQ(r.models[1].history[1].values, whole.models[1].history[1].values);
  EXPECT_EQ(r.models[0].metrics, whole.models[0].metrics);
  EXPECT_EQ(r.models[0].epochs, 3);
}

TEST_F(ApiTest, AStopFlagCancelsAndResumeEqualsAnUninterruptedRun) {
  const api::RunResult whole = train_memory();
  api::RunOptions o;
  o.out = dir.path + "/stopped";
  o.workers = 1;
  std::atomic<bool> stop{false};
  o.stop = &stop;
  o.checkpoint_seconds = 0;
  o.on_event = [&](const api::Event& e) {
    if (e.kind == api::Event::Kind::kEpochEnd && e.epoch == 2) stop = true;
  };
  const api::RunResult stopped = train_memory(o);
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_TRUE(std::any_of(stopped.models.begin(), stopped.models.end(), [](const auto& m) {
    return m.status == api::Status::kCancelled;  // stopped at its batch, checkpointed
  }));
  o.on_event = nullptr;
  o.stop = nullptr;
  o.resume = true;
  const api::RunResult resumed = train_memory(o);
  ASSERT_FALSE(resumed.interrupted);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed.models[i].metrics, whole.models[i].metrics);
    EXPECT_EQ(predict_all(*resumed.models[i].model, data, 1),
              predict_all(*whole.models[i].model, data, 1));
  }
}

// A fresh run does not look for a model's checkpoint before the model starts (only the model
// itself can have written one), but still deletes the checkpoints its finished models wrote.
TEST_F(ApiTest, AFreshRunDeletesTheCheckpointsItsFinishedModelsWrote) {
  api::RunOptions o;
  o.out = dir.path + "/checkpointed";
  o.workers = 1;
  o.checkpoint_seconds = 0;  // one at every epoch's end
  std::set<std::string> seen;
  o.on_event = [&](const api::Event& e) {
    // The checkpoint of epoch 1 is on disk when epoch 2 ends.
    if (e.kind == api::Event::Kind::kEpochEnd && e.epoch == 2 &&
        std::filesystem::exists(*o.out + "/checkpoints/" + e.model + ".ckpt"))
      seen.insert(e.model);
  };
  const api::RunResult r = train_memory(o);
  ASSERT_FALSE(r.interrupted);
  EXPECT_EQ(seen, (std::set<std::string>{"cnn", "mlp"}));
  EXPECT_TRUE(std::filesystem::is_empty(*o.out + "/checkpoints"));
  const api::RunResult whole = train_memory();
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(r.models[i].metrics, whole.models[i].metrics);
}

TEST_F(ApiTest, RunsOnSeveralThreadsAtOnceKeepTheirOwnArrays) {
  Blobs other = data;
  for (auto& v : other.x) v = 1.0f - v;
  api::RunResult a, b;
  std::thread t([&] {
    api::RunOptions o;
    o.out = std::nullopt;
    a = api::train(api::PlanInput::text(plan_text(array_source("x"), array_source("y"))),
                   {{"x", other.xv()}, {"y", other.yv()}}, o);
  });
  b = train_memory();
  t.join();
  const api::RunResult again = train_memory();
  EXPECT_EQ(b.models[0].metrics, again.models[0].metrics);
  EXPECT_NE(a.models[0].metrics, b.models[0].metrics);
}

// Issue 31, items 2 and 4, through the C++ API: batch_size 2^31 - 1 (a SIGSEGV in
// Network::plan) trains as batch_size 72 (the training rows) does, bit for bit, and a million
// workers (std::system_error) run one per core.
TEST_F(ApiTest, HugeBatchSizeAndWorkersAreCappedByTheDataAndTheCores) {
  auto with_batch = [&](const std::string& batch) {
    std::string text = plan_text(array_source("x"), array_source("y"));
    text.replace(text.find("\"batch_size\": 16"), 16, "\"batch_size\": " + batch);
    return api::PlanInput::text(text, "mem");
  };
  api::RunOptions o;
  o.out = std::nullopt;  // no folder (a default one is named by the second: two runs would clash)
  o.workers = 1;
  const api::RunResult want = api::train(with_batch("72"), {{"x", data.xv()}, {"y", data.yv()}}, o);
  o.workers = 1'000'000;
  const api::RunResult got =
      api::train(with_batch("2147483647"), {{"x", data.xv()}, {"y", data.yv()}}, o);
  EXPECT_EQ(got.workers, static_cast<int>(allowed_cpus().size()));
  ASSERT_EQ(got.models.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got.models[i].status, api::Status::kDone) << got.models[i].message;
    EXPECT_EQ(got.models[i].metrics, want.models[i].metrics) << got.models[i].name;
  }
}

// A scale that is NaN, infinite or beyond float32 (1e39), or that makes an input overflow, is
// refused naming scale=; so are targets that are not finite, by file and row.
TEST_F(ApiTest, PredictAndEvaluateRefuseNonFiniteScalesAndTargets) {
  const api::RunResult r = train_memory();
  const api::Model& m = *r.models[0].model;
  std::vector<float> p(static_cast<size_t>(data.n) * 3);
  for (const double scale : {std::nan(""), std::numeric_limits<double>::infinity(), 1e39, -1e39}) {
    api::PredictOptions o;
    o.scale = scale;
    try {
      m.predict({data.xv()}, {std::span<float>(p)}, o);
      ADD_FAILURE() << "predicted at scale " << scale;
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr("scale="));
      EXPECT_THAT(e.what(), HasSubstr("expected a finite number within float32's range"));
    }
  }
  // 1e36 is a float, but the inputs (up to about 1.3) times it are not.
  std::vector<float> big = data.x;
  big[64 * 3 + 5] = 1000.0f;
  api::PredictOptions o;
  o.scale = 1e36;
  try {
    m.predict({{big.data(), api::ElementType::kFloat32, {data.n, 8, 8, 1}}}, {std::span<float>(p)},
              o);
    FAIL() << "predicted an overflowing input";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("row 3 of 'x' holds 1000, which becomes about 1e+39 at scale=1e+36"));
  }
  o.scale = 1e30;  // the same data fits
  m.predict({{big.data(), api::ElementType::kFloat32, {data.n, 8, 8, 1}}}, {std::span<float>(p)},
            o);
  // One-hot targets with a NaN: refused by name and row, not a NaN loss.
  std::vector<float> onehot(static_cast<size_t>(data.n) * 3, 0.0f);
  for (int64_t i = 0; i < data.n; ++i) onehot[static_cast<size_t>(i * 3 + data.y[i])] = 1.0f;
  onehot[4 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();
  api::EvaluateOptions eo;
  eo.loss = "categorical_crossentropy";
  try {
    (void)m.evaluate({data.xv()}, {{onehot.data(), api::ElementType::kFloat32, {data.n, 3}}}, eo);
    FAIL() << "evaluated NaN targets";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("'y' has the target nan at sample 4, value 1; expected finite"));
  }
}

// A full disk at every point of a run in turn (fault injection: platform/files.h): a model that
// trained and then could not be written is reported with the epochs it trained, and the result
// names results.json only when this run wrote it.
TEST_F(ApiTest, AFullDiskReportsTheEpochsTrainedAndOnlyFilesWritten) {
  api::RunOptions o;
  o.workers = 1;
  o.checkpoint_seconds = 1e9;  // no checkpoints: the model files are the writes that fail
  int failed_trained = 0, results_missing = 0;
  for (int64_t budget = 0;; budget += 2048) {
    ASSERT_LT(budget, 1 << 22) << "the run never fitted";
    o.out = dir.path + "/b" + std::to_string(budget);
    api::RunResult r;
    set_write_budget(budget);
    try {
      r = train_memory(o);
    } catch (const FileError& e) {
      set_write_budget(-1);  // the folder itself, or results.json with nothing else failing
      EXPECT_THAT(e.what(), HasSubstr("No space left on device"));
      continue;
    }
    set_write_budget(-1);
    const std::string results = *o.out + "/results.json";
    EXPECT_EQ(r.results_file.empty() ? "" : results, r.results_file);
    EXPECT_EQ(!r.results_file.empty(), std::filesystem::exists(results)) << budget;
    for (const api::ModelResult& m : r.models) {
      EXPECT_EQ(m.epochs, static_cast<int>(m.history.size())) << m.name << ": " << m.message;
      if (m.status == api::Status::kFailed) {
        EXPECT_EQ(m.epochs, 3) << m.name << ": " << m.message;
        ++failed_trained;
      }
    }
    results_missing += !r.write_error.empty() && r.results_file.empty();
    if (r.write_error.empty()) break;
  }
  EXPECT_GT(failed_trained, 0) << "no model failed after training";
  EXPECT_GT(results_missing, 0) << "no run lost its results.json";
}

TEST_F(ApiTest, ErrorsAreTheDocumentedClasses) {
  api::RunOptions o;
  o.out = std::nullopt;
  const api::DataArrays arrays{{"x", data.xv()}, {"y", data.yv()}};
  EXPECT_THROW((void)api::train(api::PlanInput::text("{\"models\": 3}"), arrays, o), PlanError);
  try {
    (void)api::train(api::PlanInput::text(plan_text(array_source("x"), array_source("labels"))),
                     arrays, o);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("{array: labels}: no array of that name was given; expected "
                                    "one of: x, y"));
  }
  std::vector<float> fy(data.y.begin(), data.y.end());
  fy[5] = std::numeric_limits<float>::quiet_NaN();
  try {
    (void)api::train(api::PlanInput::text(plan_text(array_source("x"), array_source("y"))),
                     {{"x", data.xv()}, {"y", {fy.data(), api::ElementType::kFloat32, {data.n}}}},
                     o);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("NaN) at row 5"));
  }
  try {
    (void)api::train(
        api::PlanInput::text(plan_text(array_source("x"), array_source("y"))),
        {{"x", {data.x.data(), api::ElementType::kFloat32, {data.n, 64}}}, {"y", data.yv()}}, o);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Conv2D"));
  }
  o.workers = -1;
  EXPECT_THROW(train_memory(o), UsageError);
  EXPECT_THROW((void)api::Model::load(dir.path + "/missing.keras"), FileError);
  const api::RunResult r = train_memory();
  std::vector<float> p(3);
  try {
    r.models[0].model->predict({{data.x.data(), api::ElementType::kFloat32, {1, 5}}},
                               {std::span<float>(p)});
    FAIL();
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the samples of 'x' have shape [5]"));
  }
}

// Output buffers are sized views: one too small for N rows is refused, naming the output and the
// floats it needs, before any row is written; so is a losses buffer of the wrong count.
TEST_F(ApiTest, PredictAndEvaluateRefuseBuffersTooSmall) {
  const api::RunResult r = train_memory();
  const api::Model& m = *r.models[0].model;
  std::vector<float> p(static_cast<size_t>(data.n) * 3 - 1, -7.0f);
  try {
    (void)m.predict({data.xv()}, {std::span<float>(p)});
    FAIL() << "predicted into a buffer one float short";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(),
                HasSubstr("the predictions buffer of output 0 holds " + std::to_string(p.size()) +
                          " floats; expected at least " + std::to_string(data.n * 3)));
  }
  EXPECT_TRUE(std::all_of(p.begin(), p.end(), [](float v) { return v == -7.0f; }));
  p.resize(static_cast<size_t>(data.n) * 3);
  std::vector<float> losses(static_cast<size_t>(data.n) - 1);
  api::PredictOptions o;
  o.loss = "sparse_categorical_crossentropy";
  EXPECT_THROW((void)m.predict({data.xv()}, {std::span<float>(p)}, o, {data.yv()},
                               {std::span<float>(losses)}),
               UsageError);
  api::EvaluateOptions eo;
  eo.loss = "sparse_categorical_crossentropy";
  try {
    (void)m.evaluate({data.xv()}, {data.yv()}, eo,
                     {std::span<float>(losses), std::span<float>(losses)});
    FAIL() << "evaluated with two losses buffers for one output";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected one losses buffer per output, got 2"));
  }
  losses.resize(static_cast<size_t>(data.n));
  api::RunStats stats;
  const auto figures = m.evaluate({data.xv()}, {data.yv()}, eo, {std::span<float>(losses)}, &stats);
  ASSERT_FALSE(figures.empty());
  EXPECT_EQ(figures[0].first, "loss");
  double mean = 0;
  for (float l : losses) mean += l;
  EXPECT_NEAR(figures[0].second, mean / static_cast<double>(data.n), 1e-6);
  ASSERT_EQ(stats.losses.size(), 1u);
  EXPECT_EQ(stats.losses[0], "sparse_categorical_crossentropy");
  EXPECT_GE(stats.workers, 1);
}

}  // namespace
}  // namespace nnfleet
