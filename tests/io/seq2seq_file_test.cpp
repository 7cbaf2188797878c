// The two-input seq2seq real file (eng2sql, Keras 2.1.5): an encoder LSTM with return_state whose
// h and c start the decoder LSTM (initial_state), with two free time axes sized by the data. It
// predicts within 1e-4 of the independent reference and is written back as .keras and legacy .h5
// (initial_state as Keras 3's keyword argument, Keras 2's further inbound tensors) with
// identical predictions. Its own executable, so that it builds with the io library alone.
#include <gtest/gtest.h>

#include "io/keras_writer.h"
#include "io/model_summary.h"
#include "io_test_util.h"

namespace nnfleet {
namespace {

using test::fixture;

std::vector<float> floats(const Array& a) {
  const auto* p = static_cast<const float*>(a.data());
  return std::vector<float>(p, p + a.shape().size());
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

// The Keras lstm_seq2seq training model. lstm_1 returns its states, which
// start lstm_2 over the decoder sequence (inbound tensors 1 and 2 of lstm_1); both time axes are
// free and take the data's 12 steps.
const char* kSeq2Seq = "eng2sql_seq2seq_lstm_k215.h5";

std::vector<Array> seq2seq_inputs() {
  return {load_npy(fixture("expected/eng2sql_seq2seq_lstm_k215.input0.npy")),
          load_npy(fixture("expected/eng2sql_seq2seq_lstm_k215.input1.npy"))};
}

LoadedModel load_seq2seq(const std::string& path, const std::vector<Array>& xs) {
  std::vector<ModelInput> shapes;
  for (const Array& x : xs) shapes.push_back({"", x.sample_shape()});
  return load_keras_model(path, "", shapes);
}

TEST(RealFileSeq2Seq, StatesFeedTheDecoderAndPredictWithin1e4) {
  const auto xs = seq2seq_inputs();
  const LoadedModel lm = load_seq2seq(fixture(kSeq2Seq), xs);
  const Model& m = *lm.model;
  ASSERT_EQ(m.num_inputs(), 2u);
  EXPECT_EQ(m.input(0).shape, (Shape{12, 22}));
  EXPECT_EQ(m.input(1).shape, (Shape{12, 16}));
  EXPECT_EQ(m.output_shape(), (Shape{12, 16}));
  // lstm_2 takes input_2 and lstm_1's h and c.
  size_t dec = 0;
  while (m.layer(dec).name() != "lstm_2") ++dec;
  ASSERT_EQ(m.layer_inputs(dec).size(), 3u);
  EXPECT_EQ(m.input_tensor(dec, 1), 1);
  EXPECT_EQ(m.input_tensor(dec, 2), 2);
  EXPECT_EQ(m.node_name(m.layer_inputs(dec)[1]), "lstm_1");
  const auto got = run_all(lm.model, lm.params.data(), xs);
  const auto want = floats(load_npy(fixture("expected/eng2sql_seq2seq_lstm_k215.output.npy")));
  ASSERT_EQ(got[0].size(), want.size());
  EXPECT_LT(test::max_abs_diff(got[0], want.data(), want.size()), 1e-4);
  const std::string s = model_summary(lm, kSeq2Seq);
  EXPECT_NE(s.find("input_2, lstm_1[1], lstm_1[2]"), std::string::npos) << s;
}

TEST(RealFileSeq2Seq, WrittenBackAsKerasAndH5PredictsIdentically) {
  const auto xs = seq2seq_inputs();
  const LoadedModel lm = load_seq2seq(fixture(kSeq2Seq), xs);
  const auto want = run_all(lm.model, lm.params.data(), xs);
  const std::string dir = test::scratch_dir("multi_io_seq2seq_roundtrip");
  save_keras(dir + "/s2s.keras", *lm.model, lm.params.data());
  save_keras_h5(dir + "/s2s.h5", *lm.model, lm.params.data());
  for (const char* f : {"/s2s.keras", "/s2s.h5"}) {
    const LoadedModel back = load_seq2seq(dir + f, xs);
    EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << f;
  }
  // Keras 3 passes the states as initial_state, naming lstm's outputs 1 and 2 (h and c).
  const Json cfg = keras_config_json(*lm.model);
  const Json* dec = nullptr;
  for (const Json& l : cfg["config"]["layers"])
    if (l["name"] == "lstm_2") dec = &l;
  ASSERT_NE(dec, nullptr);
  const Json& node = (*dec)["inbound_nodes"][0];
  ASSERT_EQ(node["args"].size(), 1u);
  EXPECT_EQ(node["args"][0]["config"]["keras_history"].dump(), R"(["input_2",0,0])");
  ASSERT_EQ(node["kwargs"]["initial_state"].size(), 2u);
  EXPECT_EQ(node["kwargs"]["initial_state"][1]["config"]["keras_history"].dump(),
            R"(["lstm_1",0,2])");
  EXPECT_EQ((*dec)["build_config"]["shapes_dict"]["initial_state_shape"].dump(),
            "[[null,32],[null,32]]");
  EXPECT_EQ((*dec)["config"]["return_state"], true);
}

}  // namespace
}  // namespace nnfleet
