// The two-input seq2seq real file (eng2sql, Keras 2.1.5): an encoder LSTM with return_state whose
// h and c start the decoder LSTM (initial_state), with two free time axes sized by the data. It
// predicts within 1e-4 of the independent reference and is written back as legacy .h5 with
// identical predictions; a plan-built seq2seq goes through .keras (initial_state as Keras 3's
// keyword argument) and .h5 (Keras 2's further inbound tensors) alike. Its own executable, so
// that it builds with the io library alone.
#include <gtest/gtest.h>

#include "io/keras/keras_graph.h"
#include "io/keras/keras_writer.h"
#include "io/model_summary.h"
#include "io_test_util.h"
#include "layers/registry.h"

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

// A plan-built model's initial weights from `seed`, then, from the same stream, inputs of
// `shapes` uniform in [-1, 1).
void initial_weights_and_inputs(const std::shared_ptr<const Model>& model, uint64_t seed,
                                const std::vector<Shape>& shapes, std::vector<float>& params,
                                std::vector<Array>& xs) {
  Network init(model, 1);
  Rng rng(seed);
  init.initialize(rng);
  params.assign(init.params(), init.params() + init.num_params());
  xs.clear();
  for (const Shape& shape : shapes) {
    Array x = Array::zeros(DType::kF32, shape);
    auto* p = static_cast<float*>(x.mutable_data());
    for (int64_t i = 0; i < shape.size(); ++i) p[i] = rng.uniform() * 2 - 1;
    xs.push_back(std::move(x));
  }
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

// eng2sql uses Keras 2's hard_sigmoid, which only the legacy .h5 format can name (.keras is
// refused, as for every such file): the .h5 keeps the states' wiring and the predictions.
TEST(RealFileSeq2Seq, WrittenBackAsH5PredictsIdentically) {
  const auto xs = seq2seq_inputs();
  const LoadedModel lm = load_seq2seq(fixture(kSeq2Seq), xs);
  const auto want = run_all(lm.model, lm.params.data(), xs);
  const std::string dir = test::scratch_dir("seq2seq_file_roundtrip");
  save_keras_h5(dir + "/s2s.h5", *lm.model, lm.params.data());
  const LoadedModel back = load_seq2seq(dir + "/s2s.h5", xs);
  EXPECT_EQ(run_all(back.model, back.params.data(), xs), want);
  EXPECT_EQ(back.params, lm.params);
  size_t dec = 0;
  while (back.model->layer(dec).name() != "lstm_2") ++dec;
  EXPECT_EQ(back.model->input_tensor(dec, 1), 1);
  EXPECT_EQ(back.model->input_tensor(dec, 2), 2);
}

// The same graph built from plan layers (Keras 3's sigmoid): .keras and .h5 both keep it, and
// Keras 3's config passes the states as initial_state, naming the encoder's outputs 1 and 2.
TEST(Seq2SeqFiles, InitialStateIsAKeywordArgumentInKeras3AndATensorInKeras2) {
  std::vector<ModelNode> nodes;
  nodes.push_back(
      {make_layer("LSTM", {{"units", 3}, {"return_state", true}}, ConfigMode::kPlan, "encoder"),
       {0}});
  nodes.push_back(
      {make_layer("LSTM", {{"units", 3}, {"return_sequences", true}}, ConfigMode::kPlan, "decoder"),
       {1, 2, 2},
       {},
       {0, 1, 2}});
  nodes.push_back({make_layer("Dense", {{"units", 2}}, ConfigMode::kPlan, "dense"), {3}});
  auto model = std::make_shared<const Model>(
      "s2s", std::vector<ModelInput>{{"enc", Shape{4, 3}}, {"dec", Shape{5, 2}}}, std::move(nodes),
      std::vector<int>{4});
  std::vector<float> params;
  std::vector<Array> xs;
  initial_weights_and_inputs(model, 8, {Shape{3, 4, 3}, Shape{3, 5, 2}}, params, xs);
  const auto want = run_all(model, params.data(), xs);
  const std::string dir = test::scratch_dir("seq2seq_plan_roundtrip");
  save_keras(dir + "/s.keras", *model, params.data());
  save_keras_h5(dir + "/s.h5", *model, params.data());
  for (const char* f : {"/s.keras", "/s.h5"}) {
    const LoadedModel back = load_keras_model(dir + f);
    EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << f;
    EXPECT_EQ(back.model->input_tensor(1, 2), 2) << f;
  }
  const Json cfg = keras_config_json(*model);
  const Json& dec = cfg["config"]["layers"][3];
  ASSERT_EQ(dec["name"], "decoder");
  const Json& node = dec["inbound_nodes"][0];
  ASSERT_EQ(node["args"].size(), 1u);
  EXPECT_EQ(node["args"][0]["config"]["keras_history"].dump(), R"(["dec",0,0])");
  ASSERT_EQ(node["kwargs"]["initial_state"].size(), 2u);
  EXPECT_EQ(node["kwargs"]["initial_state"][1]["config"]["keras_history"].dump(),
            R"(["encoder",0,2])");
  EXPECT_EQ(dec["build_config"]["shapes_dict"]["initial_state_shape"].dump(),
            "[[null,3],[null,3]]");
  EXPECT_EQ(cfg["config"]["layers"][2]["config"]["return_state"], true);
}

// A Bidirectional encoder returns the forward layer's h and c, then the backward layer's (outputs
// 1 to 4 of its node), which start a Bidirectional decoder split half and half (Keras's
// initial_state): .keras (the keyword argument) and .h5 (further inbound tensors) keep the
// wiring, the wrapped layer's return_state and bit-identical predictions.
TEST(Seq2SeqFiles, BidirectionalStatesRoundTripThroughKerasAndH5) {
  const Json enc_layer = {{"class_name", "LSTM"},
                          {"config", {{"units", 3}, {"return_state", true}}}};
  const Json dec_layer = {{"class_name", "LSTM"},
                          {"config", {{"units", 3}, {"return_sequences", true}}}};
  std::vector<ModelNode> nodes;
  nodes.push_back(
      {make_layer("Bidirectional", {{"layer", enc_layer}}, ConfigMode::kPlan, "encoder"), {0}});
  nodes.push_back({make_layer("Bidirectional", {{"layer", dec_layer}, {"merge_mode", "ave"}},
                              ConfigMode::kPlan, "decoder"),
                   {1, 2, 2, 2, 2},
                   {},
                   {0, 1, 2, 3, 4}});
  nodes.push_back({make_layer("Dense", {{"units", 2}}, ConfigMode::kPlan, "dense"), {3}});
  auto model = std::make_shared<const Model>(
      "bi_s2s", std::vector<ModelInput>{{"enc", Shape{4, 3}}, {"dec", Shape{5, 2}}},
      std::move(nodes), std::vector<int>{4});
  ASSERT_EQ(model->planned(0).extra_out_shapes, (std::vector<Shape>(4, Shape{3})));
  std::vector<float> params;
  std::vector<Array> xs;
  initial_weights_and_inputs(model, 9, {Shape{3, 4, 3}, Shape{3, 5, 2}}, params, xs);
  const auto want = run_all(model, params.data(), xs);
  // The states matter: the decoder from zero states predicts otherwise.
  std::vector<Array> zero_enc = {Array::zeros(DType::kF32, Shape{3, 4, 3}), xs[1]};
  EXPECT_NE(run_all(model, params.data(), zero_enc), want);
  const std::string dir = test::scratch_dir("seq2seq_bidirectional_roundtrip");
  save_keras(dir + "/b.keras", *model, params.data());
  save_keras_h5(dir + "/b.h5", *model, params.data());
  for (const char* f : {"/b.keras", "/b.h5"}) {
    const LoadedModel back = load_keras_model(dir + f);
    EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << f;
    EXPECT_EQ(back.params, params) << f;
    ASSERT_EQ(back.model->layer_inputs(1).size(), 5u) << f;
    for (int k = 1; k <= 4; ++k) EXPECT_EQ(back.model->input_tensor(1, k), k) << f;
  }
  const Json cfg = keras_config_json(*model);
  const Json& enc = cfg["config"]["layers"][2];
  ASSERT_EQ(enc["name"], "encoder");
  EXPECT_EQ(enc["config"]["layer"]["config"]["return_state"], true);
  const Json& node = cfg["config"]["layers"][3]["inbound_nodes"][0];
  ASSERT_EQ(node["args"].size(), 1u);
  ASSERT_EQ(node["kwargs"]["initial_state"].size(), 4u);
  EXPECT_EQ(node["kwargs"]["initial_state"][3]["config"]["keras_history"].dump(),
            R"(["encoder",0,4])");
}

// Keras's encoder model Model(inp, [out, h, c]) and its Bidirectional twin: the outputs are
// tensors 0, 1, 2 (...) of one layer, written as ["encoder", 0, k] in output_layers by .keras and
// .h5 alike, and read back with the same outputs, names and predictions.
TEST(Seq2SeqFiles, ReturnedStatesAsModelOutputsRoundTrip) {
  const Json lstm = {{"units", 3}, {"return_sequences", true}, {"return_state", true}};
  for (bool bidirectional : {false, true}) {
    SCOPED_TRACE(bidirectional ? "Bidirectional" : "LSTM");
    std::vector<ModelNode> nodes;
    nodes.push_back(
        {bidirectional
             ? make_layer("Bidirectional", {{"layer", {{"class_name", "LSTM"}, {"config", lstm}}}},
                          ConfigMode::kPlan, "encoder")
             : make_layer("LSTM", lstm, ConfigMode::kPlan, "encoder"),
         {0}});
    const int outs = bidirectional ? 5 : 3;
    std::vector<int> ids(static_cast<size_t>(outs), 1), tensors(static_cast<size_t>(outs));
    std::iota(tensors.begin(), tensors.end(), 0);
    auto model = std::make_shared<const Model>("enc", std::vector<ModelInput>{{"x", Shape{4, 2}}},
                                               std::move(nodes), ids, tensors);
    std::vector<float> params;
    std::vector<Array> xs;
    initial_weights_and_inputs(model, 12, {Shape{3, 4, 2}}, params, xs);
    const auto want = run_all(model, params.data(), xs);
    ASSERT_EQ(want.size(), static_cast<size_t>(outs));
    const std::string dir = test::scratch_dir("seq2seq_state_outputs");
    save_keras(dir + "/e.keras", *model, params.data());
    save_keras_h5(dir + "/e.h5", *model, params.data());
    for (const char* f : {"/e.keras", "/e.h5"}) {
      const LoadedModel back = load_keras_model(dir + f);
      ASSERT_EQ(back.model->num_outputs(), static_cast<size_t>(outs)) << f;
      EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << f;
      for (int k = 0; k < outs; ++k) {
        EXPECT_EQ(back.model->output_tensor(static_cast<size_t>(k)), k) << f;
        EXPECT_EQ(back.model->output_name(static_cast<size_t>(k)),
                  k == 0 ? std::string("encoder") : "encoder_" + std::to_string(k))
            << f;
      }
      EXPECT_EQ(back.model->output_shape(1), (Shape{3})) << f;
    }
    const Json cfg = keras_config_json(*model);
    EXPECT_EQ(cfg["config"]["output_layers"][2].dump(), R"(["encoder",0,2])");
  }
}

// A model whose only output is a returned state (Model(inp, h)) is a chain of layers but not a
// Sequential one: it is written as Functional, keeping ["lstm", 0, 1].
TEST(Seq2SeqFiles, AStateAsTheOnlyOutputIsWrittenAsFunctional) {
  std::vector<ModelNode> nodes;
  nodes.push_back(
      {make_layer("GRU", {{"units", 3}, {"return_state", true}}, ConfigMode::kPlan, "gru"), {0}});
  auto model =
      std::make_shared<const Model>("h", std::vector<ModelInput>{{"x", Shape{4, 2}}},
                                    std::move(nodes), std::vector<int>{1}, std::vector<int>{1});
  EXPECT_FALSE(model->is_sequential());
  std::vector<float> params;
  std::vector<Array> xs;
  initial_weights_and_inputs(model, 13, {Shape{2, 4, 2}}, params, xs);
  const auto want = run_all(model, params.data(), xs);
  const std::string dir = test::scratch_dir("seq2seq_state_only_output");
  save_keras(dir + "/h.keras", *model, params.data());
  save_keras_h5(dir + "/h.h5", *model, params.data());
  for (const char* f : {"/h.keras", "/h.h5"}) {
    const LoadedModel back = load_keras_model(dir + f);
    EXPECT_EQ(back.model->output_tensor(0), 1) << f;
    EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << f;
  }
}

// A state output of a nested model (which has a single output) is refused by name.
TEST(Seq2SeqFiles, OutputNamingASecondOutputOfANestedModelIsRefused) {
  const Json inner = {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "inner"},
        {"layers",
         {{{"class_name", "InputLayer"},
           {"config", {{"batch_shape", {nullptr, 4, 2}}, {"name", "inner_in"}}}},
          {{"class_name", "LSTM"},
           {"config", {{"units", 3}, {"return_state", true}, {"name", "lstm"}}}}}}}}};
  const Json model = {{"class_name", "Functional"},
                      {"config",
                       {{"name", "outer"},
                        {"layers",
                         {{{"class_name", "InputLayer"},
                           {"name", "x"},
                           {"config", {{"batch_shape", {nullptr, 4, 2}}, {"name", "x"}}},
                           {"inbound_nodes", Json::array()}},
                          {{"class_name", "Sequential"},
                           {"name", "inner"},
                           {"config", inner["config"]},
                           {"inbound_nodes", {{{"x", 0, 0, Json::object()}}}}}}},
                        {"input_layers", {{"x", 0, 0}}},
                        {"output_layers", {{"inner", 0, 1}}}}}};
  try {
    build_keras_graph(model, "nested.json", static_cast<const Shape*>(nullptr));
    ADD_FAILURE() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("output 1 of a nested model"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nnfleet
