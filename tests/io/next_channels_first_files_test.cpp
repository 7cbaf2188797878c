// The channels_first EEGNet of the next/ real set (MANIFEST.md: Conv2D, DepthwiseConv2D,
// SeparableConv2D, AveragePooling2D, BatchNormalization(axis [1]) and Flatten, all
// channels_first, input (None,1,60,151)): it loads, predicts its expected/ outputs within 1e-4,
// and is written back as .keras and .h5 as the file had it (channels_first layers, BN axis [1])
// and read again with bit-identical predictions and parameters. And `nnfleet inspect` takes
// every file `nnfleet predict` takes: a two-input model with free time axes included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "commands.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"

namespace nnfleet::test {
namespace {

const char kStem[] = "eegnet_channels_first_tf216";

TEST(RealFileNextChannelsFirst, EegNetMatchesReferenceAndRoundTrips) {
  const std::string dir = real_models_dir() + "/next";
  const Array x = load_npy(dir + "/expected/" + kStem + ".input.npy");
  const Shape sample = x.sample_shape();
  const LoadedModel lm = load_keras_model(dir + "/" + kStem + ".h5", "", &sample);
  const Array want = load_npy(dir + "/expected/" + kStem + ".output.npy");
  const auto got = run_model(lm, x);
  ASSERT_EQ(got.size(), static_cast<size_t>(want.shape().size()));
  const double err = max_abs_diff(got, static_cast<const float*>(want.data()), got.size());
  EXPECT_LE(err, 1e-4);
  std::printf("[ parity   ] %s max abs error %.3g\n", kStem, err);

  const std::string out = scratch_dir("next_channels_first");
  save_keras_h5(out + "/m.h5", *lm.model, lm.params.data());
  save_keras(out + "/m.keras", *lm.model, lm.params.data());
  for (const char* name : {"/m.h5", "/m.keras"}) {
    const LoadedModel back = load_keras_model(out + name, "", &sample);
    EXPECT_EQ(run_model(back, x), got) << name;
    EXPECT_EQ(back.params, lm.params) << name;
    int channels_first = 0;
    for (size_t i = 0; i < back.model->num_layers(); ++i) {
      const Json c = back.model->layer(i).keras_config();
      if (c.value("data_format", std::string()) == "channels_first") ++channels_first;
      if (std::string(back.model->layer(i).class_name()) == "BatchNormalization") {
        EXPECT_EQ(c["axis"], Json{1}) << name;
      }
    }
    // Conv2D, DepthwiseConv2D, 2 AveragePooling2D, SeparableConv2D and Flatten.
    EXPECT_EQ(channels_first, 6) << name;
  }
}

// Runs `nnfleet ARGS...` through the CLI's predict and inspect commands; returns its stdout.
std::string run_cli(const std::vector<std::string>& args, int* rc) {
  CLI::App app;
  cli::Run run;
  cli::add_predict_command(app, run);
  cli::add_inspect_command(app, run);
  std::vector<const char*> argv = {"nnfleet"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  ::testing::internal::CaptureStdout();
  *rc = run();
  return ::testing::internal::GetCapturedStdout();
}

// Two inputs of different ranks, every time axis free: (None, None, 3) through a Conv1D and
// (None, None, None, 2) through a 2-D global pool, joined by Concatenate. inspect used to probe
// the free axes with one shape for input 0 only, so it refused what predict runs.
TEST(InspectCommand, TwoInputsWithFreeTimeAxesAsPredictTakesThem) {
  const std::string dir = scratch_dir("inspect_two_free_inputs");
  const std::string json = R"({"class_name": "Functional", "config": {"name": "two",
    "layers": [
      {"class_name": "InputLayer", "name": "seq", "inbound_nodes": [],
       "config": {"name": "seq", "batch_input_shape": [null, null, 3], "dtype": "float32"}},
      {"class_name": "InputLayer", "name": "img", "inbound_nodes": [],
       "config": {"name": "img", "batch_input_shape": [null, null, null, 2], "dtype": "float32"}},
      {"class_name": "Conv1D", "name": "conv", "inbound_nodes": [[["seq", 0, 0, {}]]],
       "config": {"name": "conv", "filters": 4, "kernel_size": [3], "padding": "same"}},
      {"class_name": "GlobalAveragePooling1D", "name": "pool_seq",
       "inbound_nodes": [[["conv", 0, 0, {}]]], "config": {"name": "pool_seq"}},
      {"class_name": "GlobalMaxPooling2D", "name": "pool_img",
       "inbound_nodes": [[["img", 0, 0, {}]]], "config": {"name": "pool_img"}},
      {"class_name": "Concatenate", "name": "cat", "config": {"name": "cat", "axis": -1},
       "inbound_nodes": [[["pool_seq", 0, 0, {}], ["pool_img", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "out", "config": {"name": "out", "units": 2},
       "inbound_nodes": [[["cat", 0, 0, {}]]]}],
    "input_layers": [["seq", 0, 0], ["img", 0, 0]], "output_layers": [["out", 0, 0]]},
    "keras_version": "2.11.0", "backend": "tensorflow"})";
  const std::string model = dir + "/two.json";
  write_text(model, json);
  // Weights: the model sized by some data, written as a legacy .h5 (read by layer name).
  const LoadedModel lm =
      load_keras_model(model, "", {ModelInput{"", Shape{5, 3}}, ModelInput{"", Shape{4, 6, 2}}});
  save_keras_h5(dir + "/w.h5", *lm.model, lm.params.data());
  Array a = Array::zeros(DType::kF32, Shape{2, 7, 3}),
        b = Array::zeros(DType::kF32, Shape{2, 3, 5, 2});
  save_npy(dir + "/a.npy", a);
  save_npy(dir + "/b.npy", b);
  int rc = -1;
  run_cli({"predict", model, "--weights", dir + "/w.h5", "--x", dir + "/a.npy", "--x",
           dir + "/b.npy", "--out", dir + "/p.npy", "--workers", "1"},
          &rc);
  EXPECT_EQ(rc, 0);
  const std::string s = run_cli({"inspect", model, "--weights", dir + "/w.h5"}, &rc);
  EXPECT_EQ(rc, 0);
  using ::testing::HasSubstr;
  EXPECT_THAT(s, HasSubstr("(None, None, 3)"));
  EXPECT_THAT(s, HasSubstr("(None, None, None, 2)"));
  EXPECT_THAT(s, HasSubstr("(None, None, 4)"));   // the Conv1D's output
  EXPECT_THAT(s, HasSubstr("(None, 6)"));         // the Concatenate's
  EXPECT_THAT(s, HasSubstr("Total params: 54"));  // Conv1D 3*3*4+4, Dense 6*2+2
  EXPECT_THAT(s, HasSubstr("Inputs: seq (None, None, 3), img (None, None, None, 2)"));
  EXPECT_THAT(s, HasSubstr("Forward FLOPs per sample: depend on the free (None) dimensions"));
  EXPECT_THAT(s, HasSubstr("at inputs [64,3], [64,64,2])"));
}

}  // namespace
}  // namespace nnfleet::test
