// Models with several inputs and outputs: the two-input, two-output wide & deep Keras file
// (inputs in input_layers order, not config order) predicts both outputs, through the library and
// through `nnfleet predict` (one file per input and output, or .npz keyed by names), and is
// written back as .keras and .h5 with identical predictions.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "io/keras/keras_writer.h"
#include "io/model_summary.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "platform/files.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using test::fixture;

const char* kWideDeep = "housing_widedeep_functional_tf240.h5";

int run_cli(const std::vector<std::string>& args) {
  CLI::App app;
  cli::Run run;
  cli::add_predict_command(app, run);
  cli::add_inspect_command(app, run);
  cli::add_train_command(app, run);
  std::vector<const char*> argv = {"nnfleet"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return run();
}

std::vector<float> floats(const Array& a) {
  const auto* p = static_cast<const float*>(a.data());
  return std::vector<float>(p, p + a.shape().size());
}

std::string usage_error_of(const std::vector<std::string>& args) {
  try {
    run_cli(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// Every output of `model` on inputs xs (one array per input, same rows), one forward pass.
std::vector<std::vector<float>> run_all(std::shared_ptr<const Model> model, const float* params,
                                        const std::vector<Array>& xs) {
  const int n = static_cast<int>(xs[0].rows());
  Network net(model, n, params);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  for (size_t k = 0; k < xs.size(); ++k) gather_rows(xs[k], idx.data(), n, 1.0f, net.input(k));
  net.forward(n, false);
  std::vector<std::vector<float>> out;
  for (size_t j = 0; j < model->num_outputs(); ++j)
    out.emplace_back(net.output(j),
                     net.output(j) + static_cast<size_t>(n) * net.output_features(j));
  return out;
}

std::vector<Array> widedeep_inputs() {
  return {load_npy(fixture("expected/housing_widedeep_functional_tf240.input0.npy")),
          load_npy(fixture("expected/housing_widedeep_functional_tf240.input1.npy"))};
}

std::vector<std::vector<float>> widedeep_expected() {
  return {floats(load_npy(fixture("expected/housing_widedeep_functional_tf240.output.npy"))),
          floats(load_npy(fixture("expected/housing_widedeep_functional_tf240.output.out1.npy")))};
}

TEST(RealFileMultiIo, WideDeepHasInputsInInputLayersOrderAndBothOutputs) {
  const LoadedModel lm = load_keras_model(fixture(kWideDeep));
  const Model& m = *lm.model;
  ASSERT_EQ(m.num_inputs(), 2u);
  // The config lists deep_input first; the inputs follow input_layers.
  EXPECT_EQ(m.input(0).name, "wide_input");
  EXPECT_EQ(m.input(0).shape, (Shape{5}));
  EXPECT_EQ(m.input(1).name, "deep_input");
  EXPECT_EQ(m.input(1).shape, (Shape{6}));
  ASSERT_EQ(m.num_outputs(), 2u);
  EXPECT_EQ(m.output_name(0), "main_output");
  EXPECT_EQ(m.output_name(1), "aux_output");
  EXPECT_EQ(m.output_shape(0), (Shape{1}));
  EXPECT_EQ(m.output_shape(1), (Shape{1}));
  EXPECT_FALSE(m.is_sequential());
}

TEST(RealFileMultiIo, WideDeepPredictsBothOutputsWithin1e4) {
  const LoadedModel lm = load_keras_model(fixture(kWideDeep));
  const auto got = run_all(lm.model, lm.params.data(), widedeep_inputs());
  const auto want = widedeep_expected();
  for (size_t j = 0; j < 2; ++j) {
    ASSERT_EQ(got[j].size(), want[j].size()) << j;
    EXPECT_LT(test::max_abs_diff(got[j], want[j].data(), want[j].size()), 1e-4) << j;
  }
}

TEST(RealFileMultiIo, WideDeepWrittenBackAsKerasAndH5PredictsIdentically) {
  const LoadedModel lm = load_keras_model(fixture(kWideDeep));
  const auto xs = widedeep_inputs();
  const auto want = run_all(lm.model, lm.params.data(), xs);
  const std::string dir = test::scratch_dir("multi_io_roundtrip");
  save_keras(dir + "/wd.keras", *lm.model, lm.params.data());
  save_keras_h5(dir + "/wd.h5", *lm.model, lm.params.data());
  for (const char* f : {"/wd.keras", "/wd.h5"}) {
    const LoadedModel back = load_keras_model(dir + f);
    ASSERT_EQ(back.model->num_inputs(), 2u) << f;
    EXPECT_EQ(back.model->input(0).name, "wide_input") << f;
    EXPECT_EQ(back.model->output_name(1), "aux_output") << f;
    EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << f;
  }
  // Keras 3's layout: one InputLayer group per input, input_layers/output_layers in order.
  const Json cfg = keras_config_json(*lm.model);
  EXPECT_EQ(cfg["config"]["input_layers"].dump(), R"([["wide_input",0,0],["deep_input",0,0]])");
  EXPECT_EQ(cfg["config"]["output_layers"].dump(), R"([["main_output",0,0],["aux_output",0,0]])");
}

TEST(RealFilePredict, WideDeepTakesOneXPerInputAndWritesOneFilePerOutput) {
  const std::string dir = test::scratch_dir("predict_multi_io");
  const std::string x0 = fixture("expected/housing_widedeep_functional_tf240.input0.npy");
  const std::string x1 = fixture("expected/housing_widedeep_functional_tf240.input1.npy");
  const auto want = widedeep_expected();
  // Targets 0.5 above each expected output: every per-sample mse is 0.25.
  std::vector<std::string> ys;
  for (size_t j = 0; j < 2; ++j) {
    Array y = Array::zeros(DType::kF32, Shape{8, 1});
    auto* p = static_cast<float*>(y.mutable_data());
    for (size_t i = 0; i < 8; ++i) p[i] = want[j][i] + 0.5f;
    ys.push_back(dir + "/y" + std::to_string(j) + ".npy");
    save_npy(ys.back(), y);
  }
  for (const char* w : {"1", "2"}) {
    ASSERT_EQ(run_cli({"predict",    fixture(kWideDeep),
                       "--x",        x0,
                       "--x",        x1,
                       "--y",        ys[0],
                       "--y",        ys[1],
                       "--batch",    "3",
                       "--workers",  w,
                       "--out",      dir + "/main.npy",
                       "--out",      dir + "/aux.npy",
                       "--loss-out", dir + "/l0.npy",
                       "--loss-out", dir + "/l1.npy"}),
              0);
    const char* outs[] = {"/main.npy", "/aux.npy"};
    const char* losses[] = {"/l0.npy", "/l1.npy"};
    for (size_t j = 0; j < 2; ++j) {
      const auto got = floats(load_npy(dir + outs[j]));
      ASSERT_EQ(got.size(), 8u);
      EXPECT_LT(test::max_abs_diff(got, want[j].data(), 8), 1e-4) << j;
      for (float l : floats(load_npy(dir + losses[j]))) EXPECT_NEAR(l, 0.25f, 1e-3) << j;
    }
  }
  // One .npz of named inputs in, one .npz of named outputs out (config order of the keys does not
  // matter: deep_input is stored first).
  write_zip(dir + "/in.npz", {{"deep_input.npy", test::read_text(x1), ""},
                              {"wide_input.npy", test::read_text(x0), ""}});
  ASSERT_EQ(
      run_cli({"predict", fixture(kWideDeep), "--x", dir + "/in.npz", "--out", dir + "/out.npz"}),
      0);
  EXPECT_EQ(npz_keys(dir + "/out.npz"), (std::vector<std::string>{"main_output", "aux_output"}));
  EXPECT_LT(
      test::max_abs_diff(floats(load_npz(dir + "/out.npz", "main_output")), want[0].data(), 8),
      1e-4);
  EXPECT_LT(test::max_abs_diff(floats(load_npz(dir + "/out.npz", "aux_output")), want[1].data(), 8),
            1e-4);
}

TEST(RealFilePredict, WideDeepRefusesTooFewInputsAndOutputsNamingThem) {
  const std::string dir = test::scratch_dir("predict_multi_io_refusals");
  const std::string x0 = fixture("expected/housing_widedeep_functional_tf240.input0.npy");
  const std::string x1 = fixture("expected/housing_widedeep_functional_tf240.input1.npy");
  std::string msg =
      usage_error_of({"predict", fixture(kWideDeep), "--x", x0, "--out", dir + "/p.npy"});
  EXPECT_NE(
      msg.find("it has 2 inputs (wide_input [5], deep_input [6]); expected one --x per input"),
      std::string::npos)
      << msg;
  msg = usage_error_of(
      {"predict", fixture(kWideDeep), "--x", x0, "--x", x1, "--out", dir + "/p.npy"});
  EXPECT_NE(msg.find("the model has 2 outputs; expected one --out per output"), std::string::npos)
      << msg;
  write_zip(dir + "/in.npz",
            {{"deep_input.npy", test::read_text(x1), ""}, {"wide.npy", test::read_text(x0), ""}});
  msg = usage_error_of(
      {"predict", fixture(kWideDeep), "--x", dir + "/in.npz", "--out", dir + "/o.npz"});
  EXPECT_NE(msg.find("it has no array 'wide_input'"), std::string::npos) << msg;
}

TEST(RealFileMultiIo, InspectListsEveryInputAndOutput) {
  const LoadedModel lm = load_keras_model(fixture(kWideDeep));
  const std::string s = model_summary(lm, kWideDeep);
  EXPECT_NE(s.find("Inputs: wide_input (None, 5), deep_input (None, 6)"), std::string::npos) << s;
  EXPECT_NE(s.find("Outputs: main_output (None, 1), aux_output (None, 1)"), std::string::npos) << s;
  EXPECT_NE(s.find("concatenate"), std::string::npos) << s;
}

// Inputs in [-1, 1) and targets that are smooth functions of them, from a fixed generator.
void write_widedeep_data(const std::string& dir, int64_t n) {
  Array wide = Array::zeros(DType::kF32, Shape{n, 5}),
        deep = Array::zeros(DType::kF32, Shape{n, 6});
  Array main = Array::zeros(DType::kF32, Shape{n, 1}), aux = Array::zeros(DType::kF32, Shape{n, 1});
  auto* w = static_cast<float*>(wide.mutable_data());
  auto* d = static_cast<float*>(deep.mutable_data());
  auto* ym = static_cast<float*>(main.mutable_data());
  auto* ya = static_cast<float*>(aux.mutable_data());
  Rng rng(42);
  for (int64_t i = 0; i < n; ++i) {
    float s = 0, t = 0;
    for (int j = 0; j < 5; ++j) s += (w[i * 5 + j] = 2 * rng.uniform() - 1) * (j + 1) * 0.2f;
    for (int j = 0; j < 6; ++j) t += (d[i * 6 + j] = 2 * rng.uniform() - 1) * 0.3f;
    ym[i] = s + t;
    ya[i] = t;
  }
  save_npy(dir + "/wide.npy", wide);
  save_npy(dir + "/deep.npy", deep);
  save_npy(dir + "/main.npy", main);
  save_npy(dir + "/aux.npy", aux);
}

// The two-output wide & deep file trained from a plan: one data source per input and target,
// one loss per output with loss_weights, Keras's per-output history names; the result does not
// depend on --workers, and the .keras and .h5 it writes read back with identical predictions.
TEST(RealFileMultiIo, TwoOutputPlanTrainsAndWritesKerasAndH5) {
  const std::string dir = test::scratch_dir("multi_io_train");
  write_widedeep_data(dir, 48);
  test::write_text(dir + "/plan.yaml",
                   "seed: 5\ndata:\n"
                   "  train: {x: [wide.npy, deep.npy], y: [main.npy, aux.npy]}\n"
                   "  validation_split: 0.25\n"
                   "models:\n  - name: wd\n    keras: " +
                       fixture(kWideDeep) +
                       "\n"
                       "    epochs: 3\n    batch_size: 8\n    loss: [mse, mae]\n"
                       "    loss_weights: {main_output: 0.9, aux_output: 0.1}\n"
                       "    metrics: [mae]\n    optimizer: {SGD: {learning_rate: 0.01}}\n");
  ASSERT_EQ(
      run_cli({"train", dir + "/plan.yaml", "--out", dir + "/a", "--workers", "1", "--quiet"}), 0);
  ASSERT_EQ(
      run_cli({"train", dir + "/plan.yaml", "--out", dir + "/b", "--workers", "2", "--quiet"}), 0);
  ASSERT_EQ(run_cli({"train", dir + "/plan.yaml", "--out", dir + "/c", "--workers", "1", "--quiet",
                     "--format", "h5"}),
            0);
  const Json r = Json::parse(read_file(dir + "/a/results.json"));
  const Json& m = r["models"][0];
  ASSERT_EQ(m["status"], "done") << m.dump();
  EXPECT_EQ(r["rank_by"], "val_loss");  // the plan's mae is per output here
  // history.csv: Keras's columns for two outputs, the loss the weighted sum of the outputs' own.
  const auto history = [&](const std::string& run) {
    std::vector<std::map<std::string, double>> rows;
    std::istringstream in(read_file(dir + "/" + run + "/history.csv"));
    std::string line, cell;
    std::getline(in, line);
    std::vector<std::string> cols;
    for (std::istringstream h(line); std::getline(h, cell, ',');) cols.push_back(cell);
    EXPECT_EQ(line,
              "model,epoch,loss,main_output_loss,aux_output_loss,main_output_mae,aux_output_mae,"
              "val_loss,val_main_output_loss,val_aux_output_loss,val_main_output_mae,"
              "val_aux_output_mae,seconds");
    while (std::getline(in, line)) {
      std::map<std::string, double> row;
      std::istringstream l(line);
      for (size_t c = 0; std::getline(l, cell, ','); ++c)
        if (c > 0 && c < cols.size()) row[cols[c]] = std::stod(cell);
      rows.push_back(row);
    }
    return rows;
  };
  const auto ha = history("a");
  ASSERT_EQ(ha.size(), 3u);
  for (const auto& e : ha) {
    EXPECT_NEAR(e.at("loss"), 0.9 * e.at("main_output_loss") + 0.1 * e.at("aux_output_loss"), 1e-5);
    // mae is aux's loss, so its metric and its loss agree.
    EXPECT_NEAR(e.at("aux_output_loss"), e.at("aux_output_mae"), 1e-5);
    EXPECT_NEAR(e.at("val_loss"),
                0.9 * e.at("val_main_output_loss") + 0.1 * e.at("val_aux_output_loss"), 1e-5);
  }
  EXPECT_LT(ha[2].at("loss"), ha[0].at("loss"));
  const auto hb = history("b");
  ASSERT_EQ(hb.size(), 3u);
  for (size_t e = 0; e < 3; ++e)
    for (const char* k : {"loss", "main_output_loss", "val_aux_output_mae"})
      EXPECT_EQ(ha[e].at(k), hb[e].at(k)) << e << " " << k;  // independent of --workers

  const auto xs = widedeep_inputs();
  const LoadedModel a = load_keras_model(dir + "/a/models/wd.keras");
  const LoadedModel b = load_keras_model(dir + "/b/models/wd.keras");
  const LoadedModel c = load_keras_model(dir + "/c/models/wd.h5");
  EXPECT_EQ(a.params, b.params);  // independent of --workers
  EXPECT_EQ(a.params, c.params);
  const auto pa = run_all(a.model, a.params.data(), xs);
  EXPECT_EQ(run_all(c.model, c.params.data(), xs), pa);
  const LoadedModel start = load_keras_model(fixture(kWideDeep));
  EXPECT_NE(pa, run_all(start.model, start.params.data(), xs));  // it trained
  // Keras's layout of the compiled model: the loss list and loss_weights in output order.
  EXPECT_EQ(a.training_config["loss_weights"].dump(), "[0.9,0.1]");
  ASSERT_TRUE(a.training_config["loss"].is_array());
  EXPECT_EQ(a.training_config["loss"].size(), 2u);
  EXPECT_EQ(c.training_config["loss"].dump(), R"(["mean_squared_error","mean_absolute_error"])");
}

}  // namespace
// The three-input model of issue 35: one Embedding reached from two inputs (a shared layer)
// and a float input. predict checks both id inputs, each against the Embedding's bound, and
// names the file and row of a bad id in the second.
TEST(SharedEmbedding, PredictChecksEveryInputReadAsIds) {
  const std::string dir = test::scratch_dir("predict_shared_embedding");
  auto layer = [](const char* cls, Json cfg, const char* name) {
    return make_layer(cls, cfg, ConfigMode::kPlan, name);
  };
  std::vector<ModelNode> nodes;
  nodes.push_back({layer("Embedding", {{"input_dim", 10}, {"output_dim", 2}}, "emb"), {0}});
  nodes.push_back(
      {layer("Embedding", {{"input_dim", 10}, {"output_dim", 2}}, "emb"), {1}, {}, {}, 0});
  nodes.push_back({layer("Flatten", Json::object(), "fa"), {3}});
  nodes.push_back({layer("Flatten", Json::object(), "fb"), {4}});
  nodes.push_back({layer("Concatenate", Json::object(), "cat"), {5, 6, 2}});
  nodes.push_back({layer("Dense", {{"units", 1}}, "out"), {7}});
  const Model m("three", std::vector<ModelInput>{{"a", Shape{2}}, {"b", Shape{2}}, {"x", Shape{3}}},
                std::move(nodes), std::vector<int>{8});
  ASSERT_EQ(m.id_inputs().size(), 2u);
  std::vector<float> params(m.trainable_params() + m.non_trainable_params(), 0.25f);
  save_keras(dir + "/m.keras", m, params.data());
  auto ids = [&](const std::string& name, int32_t bad) {
    Array a = Array::zeros(DType::kI32, Shape{3, 2});
    auto* v = static_cast<int32_t*>(a.mutable_data());
    for (int i = 0; i < 6; ++i) v[i] = i % 10;
    v[3] = bad;  // row 1
    save_npy(dir + "/" + name, a);
    return dir + "/" + name;
  };
  Array x = Array::zeros(DType::kF32, Shape{3, 3});
  save_npy(dir + "/x.npy", x);
  const std::string a = ids("a.npy", 4), good = ids("b.npy", 9), bad = ids("b_bad.npy", 12);
  EXPECT_EQ(run_cli({"predict", dir + "/m.keras", "--x", a, "--x", good, "--x", dir + "/x.npy",
                     "--out", dir + "/p.npy"}),
            0);
  std::string msg;
  try {
    run_cli({"predict", dir + "/m.keras", "--x", a, "--x", bad, "--x", dir + "/x.npy", "--out",
             dir + "/p.npy"});
  } catch (const DataError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("row 1 of '" + bad + "' holds 12, not an id the Embedding 'emb' has"),
            std::string::npos)
      << msg;
}

}  // namespace nnfleet
