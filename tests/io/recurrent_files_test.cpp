// Real third-party Keras files with recurrent layers (SimpleRNN, LSTM, GRU), from the shared
// folder described by its MANIFEST.md (never copied into the repository): each loads, predicts
// its expected/ outputs within 1e-4, and is written back as .keras and legacy .h5 and read again
// with bit-identical predictions. The folder is NNFLEET_KERAS_MODELS when set, else
// ../shared/keras-models next to the source tree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "model/network.h"

namespace nnfleet::test {
namespace {

// Loads `file`, checks its outputs on expected/<stem>.input.npy against .output.npy, and
// returns the loaded model for further checks.
LoadedModel expect_parity(const std::string& file, const std::string& stem) {
  const std::string dir = real_models_dir();
  const Array x = load_npy(dir + "/expected/" + stem + ".input.npy");
  const Shape sample = x.sample_shape();  // sizes a free (None) time axis
  LoadedModel lm = load_keras_model(dir + "/" + file, "", &sample);
  const Array want = load_npy(dir + "/expected/" + stem + ".output.npy");
  const auto got = run_model(lm, x);
  EXPECT_EQ(got.size(), static_cast<size_t>(want.shape().size())) << file;
  const double err = max_abs_diff(got, static_cast<const float*>(want.data()),
                                  std::min(got.size(), static_cast<size_t>(want.shape().size())));
  EXPECT_LE(err, 1e-4) << file;
  std::printf("[ parity   ] %s max abs error %.3g\n", file.c_str(), err);
  return lm;
}

// Writes `lm` back as .keras and .h5 and reads both with identical predictions and parameters.
// A model with Keras 2's hard_sigmoid goes to .h5 only: .keras (Keras 3) has no name for that
// formula, and writing it there is refused with a message saying so.
void expect_round_trip(const LoadedModel& lm, const std::string& stem,
                       bool keras2_hard_sigmoid = false) {
  const Array x = load_npy(real_models_dir() + "/expected/" + stem + ".input.npy");
  const auto before = run_model(lm, x);
  const std::string dir = scratch_dir("recurrent_" + stem);
  std::vector<std::string> files = {"/m.h5"};
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data());
  if (keras2_hard_sigmoid) {
    const std::string msg =
        file_error_of([&] { save_keras(dir + "/m.keras", *lm.model, lm.params.data()); });
    EXPECT_NE(msg.find("cannot name"), std::string::npos) << msg;
  } else {
    save_keras(dir + "/m.keras", *lm.model, lm.params.data());
    files.push_back("/m.keras");
  }
  for (const std::string& name : files) {
    const Shape sample = x.sample_shape();
    const LoadedModel back = load_keras_model(dir + name, "", &sample);
    EXPECT_EQ(run_model(back, x), before) << stem << name;
    EXPECT_EQ(back.params, lm.params) << stem << name;
  }
}

TEST(RealFileRecurrent, GruResetAfterKeras392MatchesReference) {
  const auto lm = expect_parity("amd_stock_gru_k392.keras", "amd_stock_gru_k392");
  expect_round_trip(lm, "amd_stock_gru_k392");
}

TEST(RealFileRecurrent, StackedSimpleRnnKeras310MatchesReference) {
  const auto lm = expect_parity("hk_temp_simplernn_k310.keras", "hk_temp_simplernn_k310");
  expect_round_trip(lm, "hk_temp_simplernn_k310");
}

TEST(RealFileRecurrent, StackedReluLstmTf290MatchesReference) {
  const auto lm =
      expect_parity("furniture_lstm_stacked_relu_tf290.h5", "furniture_lstm_stacked_relu_tf290");
  expect_round_trip(lm, "furniture_lstm_stacked_relu_tf290");
}

// Keras 2.2.4 files saved from R: Embedding over a free time axis, GRU without reset_after and a
// Bidirectional LSTM with Keras 2's hard_sigmoid, initializers written as VarianceScaling.
TEST(RealFileRecurrent, ImdbGruKeras224WithAFreeTimeAxisMatchesReference) {
  const auto lm = expect_parity("imdb_gru_k224.h5", "imdb_gru_k224");
  expect_round_trip(lm, "imdb_gru_k224", /*keras2_hard_sigmoid=*/true);
}

TEST(RealFileRecurrent, ImdbBidirectionalLstmKeras224MatchesReference) {
  const auto lm = expect_parity("imdb_bilstm_k224.h5", "imdb_bilstm_k224");
  expect_round_trip(lm, "imdb_bilstm_k224", /*keras2_hard_sigmoid=*/true);
}

// Embedding(mask_zero) -> Bidirectional(LSTM, return_sequences) -> Dense on the sequence: the
// padding must be skipped (the backward LSTM starts at the last real token).
TEST(RealFileRecurrent, MaskedBidirectionalNerTaggerTf215MatchesReference) {
  const auto lm =
      expect_parity("ner_embed_maskzero_bilstm_tf215.keras", "ner_embed_maskzero_bilstm_tf215");
  expect_round_trip(lm, "ner_embed_maskzero_bilstm_tf215");
}

TEST(RealFileRecurrent, Conv1dMaxPoolReshapeLstmTf2131MatchesReference) {
  const auto lm =
      expect_parity("synth_conv1d_maxpool_lstm_tf2131.h5", "synth_conv1d_maxpool_lstm_tf2131");
  expect_round_trip(lm, "synth_conv1d_maxpool_lstm_tf2131");
}

TEST(RealFileRecurrent, GruWithTimeDistributedDenseKeras204MatchesReference) {
  const auto lm = expect_parity("en_fr_gru_timedist_k204.h5", "en_fr_gru_timedist_k204");
  expect_round_trip(lm, "en_fr_gru_timedist_k204", /*keras2_hard_sigmoid=*/true);
}

TEST(RealFileRecurrent, L2RegularizedLstmKeras341PredictsAndTrainsWithItsPenalty) {
  const auto lm = expect_parity("rice_lstm_stacked_l2_k341.keras", "rice_lstm_stacked_l2_k341");
  expect_round_trip(lm, "rice_lstm_stacked_l2_k341");
  // The regularizer is kept for writing back...
  const Json cfg = keras_config_json(*lm.model, {});
  EXPECT_NE(cfg.dump().find("\"l2\":0.01"), std::string::npos);
  // ...and its penalty is part of the training loss.
  EXPECT_EQ(lm.model->training_refusal(), "");
  Network net(lm.model, 4, TrainSpec{}, 1);
  std::copy(lm.params.begin(), lm.params.end(), net.params());
  EXPECT_GT(net.weight_penalty(), 0.0);
}

}  // namespace
}  // namespace nnfleet::test
