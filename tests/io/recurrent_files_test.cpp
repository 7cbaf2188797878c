// Real third-party Keras files with recurrent layers (SimpleRNN, LSTM, GRU), from the shared
// folder described by its MANIFEST.md (never copied into the repository): each loads, predicts
// its expected/ outputs within 1e-4, and is written back as .keras and legacy .h5 and read again
// with bit-identical predictions. The folder is NNFLEET_KERAS_MODELS when set, else
// ../shared/keras-models next to the source tree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "io_test_util.h"
#include "io/keras_writer.h"
#include "model/network.h"

namespace nnfleet::test {
namespace {

std::string shared_models() {
  if (const char* env = std::getenv("NNFLEET_KERAS_MODELS")) return env;
  return std::string(NNFLEET_SOURCE_DIR "/../shared/keras-models");
}

// Loads `file`, checks its outputs on expected/<stem>.input.npy against .output.npy, and
// returns the loaded model for further checks.
LoadedModel expect_parity(const std::string& file, const std::string& stem) {
  const std::string dir = shared_models();
  LoadedModel lm = load_keras_model(dir + "/" + file);
  const Array x = load_npy(dir + "/expected/" + stem + ".input.npy");
  const Array want = load_npy(dir + "/expected/" + stem + ".output.npy");
  const auto got = run_model(lm, x);
  EXPECT_EQ(got.size(), static_cast<size_t>(want.shape().size())) << file;
  const double err = max_abs_diff(got, static_cast<const float*>(want.data()),
                                  std::min(got.size(), static_cast<size_t>(want.shape().size())));
  EXPECT_LE(err, 1e-4) << file;
  std::printf("[ parity   ] %s max abs error %.3g\n", file.c_str(), err);
  return lm;
}

void expect_round_trip(const LoadedModel& lm, const std::string& stem) {
  const Array x = load_npy(shared_models() + "/expected/" + stem + ".input.npy");
  const auto before = run_model(lm, x);
  const std::string dir = scratch_dir("recurrent_" + stem);
  save_keras(dir + "/m.keras", *lm.model, lm.params.data());
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data());
  for (const char* name : {"/m.keras", "/m.h5"}) {
    const LoadedModel back = load_keras_model(dir + name);
    EXPECT_EQ(run_model(back, x), before) << stem << name;
    EXPECT_EQ(back.params, lm.params) << stem << name;
  }
}

TEST(RecurrentFiles, GruResetAfterKeras392MatchesReference) {
  const auto lm = expect_parity("amd_stock_gru_k392.keras", "amd_stock_gru_k392");
  expect_round_trip(lm, "amd_stock_gru_k392");
}

TEST(RecurrentFiles, StackedSimpleRnnKeras310MatchesReference) {
  const auto lm = expect_parity("hk_temp_simplernn_k310.keras", "hk_temp_simplernn_k310");
  expect_round_trip(lm, "hk_temp_simplernn_k310");
}

TEST(RecurrentFiles, StackedReluLstmTf290MatchesReference) {
  const auto lm =
      expect_parity("furniture_lstm_stacked_relu_tf290.h5", "furniture_lstm_stacked_relu_tf290");
  expect_round_trip(lm, "furniture_lstm_stacked_relu_tf290");
}

TEST(RecurrentFiles, L2RegularizedLstmKeras341PredictsAndRefusesTraining) {
  const auto lm = expect_parity("rice_lstm_stacked_l2_k341.keras", "rice_lstm_stacked_l2_k341");
  expect_round_trip(lm, "rice_lstm_stacked_l2_k341");
  // The regularizer is kept for writing back...
  const Json cfg = keras_config_json(*lm.model, {});
  EXPECT_NE(cfg.dump().find("\"l2\":0.01"), std::string::npos);
  // ...but training such a model is refused until the penalty is applied.
  TrainSpec spec;
  try {
    Network net(lm.model, 4, spec, 1);
    ADD_FAILURE() << "training a model with an L2 regularizer was not refused";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("regularizers are not applied in training yet"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nnfleet::test
