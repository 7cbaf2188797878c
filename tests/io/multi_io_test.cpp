// Models with several inputs and outputs: the two-input, two-output wide & deep Keras file
// (inputs in input_layers order, not config order) predicts both outputs, through the library and
// through `nnfleet predict` (one file per input and output, or .npz keyed by names), and is
// written back as .keras and .h5 with identical predictions.
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "io/keras_writer.h"
#include "io/model_summary.h"
#include "io/zip_archive.h"
#include "io_test_util.h"

namespace nnfleet {
namespace {

using test::fixture;

const char* kWideDeep = "housing_widedeep_functional_tf240.h5";

int run_cli(const std::vector<std::string>& args) {
  CLI::App app;
  cli::Run run;
  cli::add_predict_command(app, run);
  cli::add_inspect_command(app, run);
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

}  // namespace
}  // namespace nnfleet
