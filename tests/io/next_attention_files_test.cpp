// MultiHeadAttention in Keras files: the real Keras 3.14 solar transformer (positional query and
// value) predicts its expected outputs within 1e-4 and reloads bit-identically from .keras and
// .h5; the tf.keras node forms (value and key as [layer, node, tensor] kwargs) in small configs
// build the right wiring. Its own executable, so
// that it builds with the io library alone.
#include <gtest/gtest.h>

#include <numeric>

#include "io/keras/keras_graph.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

std::string next_dir() { return test::real_models_dir() + "/next"; }

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

TEST(RealFileAttention, SolarTransformerKeras314MatchesReferenceAndRoundTrips) {
  const std::string stem = "solar_transformer_mha_k314";
  const Array x = load_npy(next_dir() + "/expected/" + stem + ".input.npy");
  const Shape sample = x.sample_shape();
  const LoadedModel lm = load_keras_model(next_dir() + "/" + stem + ".keras", "", &sample);
  const Array want = load_npy(next_dir() + "/expected/" + stem + ".output.npy");
  const auto got = test::run_model(lm, x);
  ASSERT_EQ(got.size(), static_cast<size_t>(want.shape().size()));
  const double err = test::max_abs_diff(got, static_cast<const float*>(want.data()), got.size());
  EXPECT_LE(err, 1e-4);
  std::printf("[ parity   ] %s max abs error %.3g\n", stem.c_str(), err);
  const std::string dir = test::scratch_dir("attention_" + stem);
  save_keras(dir + "/m.keras", *lm.model, lm.params.data());
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data());
  for (const char* f : {"/m.keras", "/m.h5"}) {
    const LoadedModel back = load_keras_model(dir + f, "", &sample);
    EXPECT_EQ(test::run_model(back, x), got) << f;
    EXPECT_EQ(back.params, lm.params) << f;
  }
}

// The two tf.keras transformers (MHA nodes with value and key as kwargs) are checked whole, with
// their TFOpLambda layers, in next_tfop_files_test.cpp (RealFileNextTfOp).

// A Functional config with input "x" [5, 6] and "y" [3, 4], one MHA layer called by `node`.
Json mha_model(const Json& node, const Json& extra_config = Json::object()) {
  Json cfg = {{"name", "mha"}, {"num_heads", 2}, {"key_dim", 3}};
  for (const auto& [k, v] : extra_config.items()) cfg[k] = v;
  auto input = [](const char* name, Json shape) {
    return Json{{"class_name", "InputLayer"},
                {"name", name},
                {"config", {{"name", name}, {"batch_input_shape", shape}}},
                {"inbound_nodes", Json::array()}};
  };
  Json layers = Json::array({input("x", {nullptr, 5, 6}), input("y", {nullptr, 3, 4}),
                             Json{{"class_name", "MultiHeadAttention"},
                                  {"name", "mha"},
                                  {"config", cfg},
                                  {"inbound_nodes", node}}});
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "m"},
            {"layers", layers},
            {"input_layers", {{"x", 0, 0}, {"y", 0, 0}}},
            {"output_layers", {{"mha", 0, 0}}}}}};
}

std::vector<std::string> input_names(const KerasGraph& g) {
  std::vector<std::string> out;
  for (int id : g.model->layer_inputs(0)) out.push_back(g.model->node_name(id));
  return out;
}

Json ref(const char* name) { return Json::array({name, 0, 0}); }

TEST(KerasAttention, TfKerasNodeFormsTakeValueAndKeyAsKwargs) {
  using V = std::vector<std::string>;
  // value and key kwargs; key equal to value is Keras's default and drops out.
  auto g = build_keras_graph(
      mha_model(Json::array(
          {Json::array({Json::array({"x", 0, 0, {{"value", ref("y")}, {"key", ref("y")}}})})})),
      "t");
  EXPECT_EQ(input_names(g), (V{"x", "y"}));
  EXPECT_EQ(g.model->output_shape(), (Shape{5, 6}));
  // value only, and a key that differs.
  g = build_keras_graph(
      mha_model(Json::array({Json::array({Json::array({"x", 0, 0, {{"value", ref("x")}}})})})),
      "t");
  EXPECT_EQ(input_names(g), (V{"x", "x"}));
  g = build_keras_graph(mha_model(Json::array({Json::array({
                            Json::array({"y", 0, 0, {{"value", ref("x")}, {"key", ref("x")}}}),
                        })})),
                        "t");
  EXPECT_EQ(g.model->output_shape(), (Shape{3, 4}));
  // Call flags become the layer's; the inputs' own masks as tensors are refused by name.
  g = build_keras_graph(mha_model(Json::array({Json::array({Json::array(
                            {"x", 0, 0, {{"value", ref("x")}, {"use_causal_mask", true}}})})})),
                        "t");
  EXPECT_EQ(g.model->layer(0).keras_config().value("use_causal_mask", false), true);
  const std::string msg = test::file_error_of([] {
    build_keras_graph(mha_model(Json::array({Json::array({Json::array(
                          {"x", 0, 0, {{"value", ref("x")}, {"query_mask", ref("y")}}})})})),
                      "t");
  });
  EXPECT_NE(msg.find("query_mask"), std::string::npos) << msg;
}

// A value that carries a Keras mask of its own (not the query's) is refused by name: the layer
// would read it unmasked.
TEST(KerasAttention, RefusesAMaskedValueThatIsNotTheQuery) {
  Json model = mha_model(
      Json::array({Json::array({Json::array({"x", 0, 0, {{"value", ref("masking")}}})})}));
  model["config"]["layers"][1]["config"]["batch_input_shape"] = {nullptr, 3, 6};
  model["config"]["layers"].push_back({{"class_name", "Masking"},
                                       {"name", "masking"},
                                       {"config", {{"name", "masking"}}},
                                       {"inbound_nodes", {{{"y", 0, 0, Json::object()}}}}});
  const std::string msg = test::file_error_of([&] { build_keras_graph(model, "t"); });
  EXPECT_NE(msg.find("layer 'mha' (MultiHeadAttention) takes a value from 'masking'"),
            std::string::npos)
      << msg;
}

// An attention_mask tensor is a fourth input, after the key (the value when no key is given).
TEST(KerasAttention, AttentionMaskIsAFourthInput) {
  Json model = mha_model(Json::array({Json::array(
      {Json::array({"x", 0, 0, {{"value", ref("x")}, {"attention_mask", ref("y")}}})})}));
  model["config"]["layers"][1]["config"]["batch_input_shape"] = {nullptr, 5, 5};
  const auto g = build_keras_graph(model, "t");
  EXPECT_EQ(input_names(g), (std::vector<std::string>{"x", "x", "x", "y"}));
  EXPECT_EQ(g.model->layer(0).keras_config().value("attention_mask", false), true);
}

Json keras3_tensor(const char* name) {
  return {{"class_name", "__keras_tensor__"},
          {"config", {{"shape", Json::array()}, {"keras_history", ref(name)}}}};
}

TEST(KerasAttention, Keras3NodeTakesPositionalQueryValueAndKeyKwarg) {
  const Json node = {{"args", {keras3_tensor("x"), keras3_tensor("y")}},
                     {"kwargs", {{"key", keras3_tensor("y")}, {"return_attention_scores", true}}}};
  auto g = build_keras_graph(mha_model(Json::array({node})), "t");
  EXPECT_EQ(input_names(g), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(g.model->planned(0).extra_out_shapes, (std::vector<Shape>{Shape{2, 5, 3}}));
}

// A plan-built model with key != value, a causal mask, the scores as an output and (with_mask)
// an attention mask input, written as .keras and .h5 (Keras's call forms) and read back with
// identical outputs.
void expect_plan_round_trip(bool with_mask) {
  std::vector<ModelNode> nodes;
  Json cfg = {{"num_heads", 2},
              {"key_dim", 3},
              {"value_dim", 2},
              {"use_causal_mask", true},
              {"return_attention_scores", true}};
  std::vector<ModelInput> ins = {{"q", Shape{4, 3}}, {"v", Shape{4, 2}}, {"k", Shape{4, 5}}};
  std::vector<int> from = {0, 1, 2};
  if (with_mask) {
    cfg["attention_mask"] = true;
    ins.push_back({"m", Shape{4, 4}});
    from.push_back(3);
  }
  const int out = static_cast<int>(ins.size());
  nodes.push_back({make_layer("MultiHeadAttention", cfg, ConfigMode::kPlan, "mha"), from});
  auto model = std::make_shared<const Model>("att", ins, std::move(nodes),
                                             std::vector<int>{out, out}, std::vector<int>{0, 1});
  Network init(model, 1);
  Rng rng(3);
  init.initialize(rng);
  const std::vector<float> params(init.params(), init.params() + init.num_params());
  std::vector<Array> xs;
  for (const ModelInput& in : ins) {
    const Shape s = in.shape.with_batch(2);
    Array x = Array::zeros(DType::kF32, s);
    auto* p = static_cast<float*>(x.mutable_data());
    // The mask: 0 or 1, about a third masked.
    for (int64_t i = 0; i < s.size(); ++i)
      p[i] = in.name == "m" ? (rng.uniform() < 0.33f ? 0.0f : 1.0f) : rng.uniform() * 2 - 1;
    xs.push_back(std::move(x));
  }
  const auto want = run_all(model, params.data(), xs);
  // Causal: the first query step sees the first value step alone.
  EXPECT_EQ(want[1][0], 1.0f);
  const std::string dir = test::scratch_dir(with_mask ? "attention_mask_rt" : "attention_rt");
  save_keras(dir + "/a.keras", *model, params.data());
  save_keras_h5(dir + "/a.h5", *model, params.data());
  for (const char* f : {"/a.keras", "/a.h5"}) {
    const LoadedModel back = load_keras_model(dir + f);
    EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << f;
    EXPECT_EQ(back.params, params) << f;
  }
}

TEST(KerasAttention, PlanModelRoundTripsThroughKerasAndH5) { expect_plan_round_trip(false); }
TEST(KerasAttention, PlanModelWithAttentionMaskRoundTrips) { expect_plan_round_trip(true); }

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// Attention ("dot" and "concat", scaled) and AdditiveAttention over a query [3, 4] and a value
// [5, 4] (key = value), with causal masks and scores outputs, through .keras and .h5.
TEST(KerasAttention, LuongAndBahdanauRoundTripThroughKerasAndH5) {
  const std::vector<std::pair<const char*, Json>> kinds = {
      {"Attention", {{"use_scale", true}}},
      {"Attention", {{"score_mode", "concat"}, {"use_scale", true}, {"use_causal_mask", true}}},
      {"AdditiveAttention", {{"return_attention_scores", true}}},
      {"AdditiveAttention", {{"use_scale", false}, {"use_causal_mask", true}}}};
  for (const auto& [cls, cfg] : kinds) {
    std::vector<ModelNode> nodes;
    nodes.push_back({make_layer(cls, cfg, ConfigMode::kPlan, "att"), {0, 1}});
    const bool scores = cfg.value("return_attention_scores", false);
    auto model = std::make_shared<const Model>(
        "m", std::vector<ModelInput>{{"q", Shape{3, 4}}, {"v", Shape{5, 4}}}, std::move(nodes),
        scores ? std::vector<int>{2, 2} : std::vector<int>{2},
        scores ? std::vector<int>{0, 1} : std::vector<int>{});
    Network init(model, 1);
    Rng rng(5);
    init.initialize(rng);
    std::vector<float> params(init.params(), init.params() + init.num_params());
    for (float& p : params) p += 0.25f;  // scales away from their initial ones
    std::vector<Array> xs;
    for (const Shape& s : {Shape{2, 3, 4}, Shape{2, 5, 4}}) {
      Array x = Array::zeros(DType::kF32, s);
      auto* p = static_cast<float*>(x.mutable_data());
      for (int64_t i = 0; i < s.size(); ++i) p[i] = rng.uniform() * 2 - 1;
      xs.push_back(std::move(x));
    }
    const auto want = run_all(model, params.data(), xs);
    const std::string dir = test::scratch_dir(std::string("attention_luong_") + cls);
    save_keras(dir + "/a.keras", *model, params.data());
    save_keras_h5(dir + "/a.h5", *model, params.data());
    for (const char* f : {"/a.keras", "/a.h5"}) {
      const LoadedModel back = load_keras_model(dir + f);
      EXPECT_EQ(run_all(back.model, back.params.data(), xs), want) << cls << f << cfg.dump();
      EXPECT_EQ(back.params, params) << cls << f;
      EXPECT_EQ(back.model->layer(0).keras_config(), model->layer(0).keras_config()) << cls << f;
    }
  }
}

// Dot attention by hand: one query step over two value steps.
TEST(KerasAttention, DotAttentionIsSoftmaxOfQueryKeyProducts) {
  std::vector<ModelNode> nodes;
  nodes.push_back({make_layer("Attention", Json::object(), ConfigMode::kPlan, "att"), {0, 1}});
  auto model = std::make_shared<const Model>(
      "m", std::vector<ModelInput>{{"q", Shape{1, 2}}, {"v", Shape{2, 2}}}, std::move(nodes),
      std::vector<int>{2});
  std::vector<Array> xs = {Array::zeros(DType::kF32, Shape{1, 1, 2}),
                           Array::zeros(DType::kF32, Shape{1, 2, 2})};
  auto* q = static_cast<float*>(xs[0].mutable_data());
  auto* v = static_cast<float*>(xs[1].mutable_data());
  q[0] = 1, q[1] = 2;
  v[0] = 1, v[1] = 0, v[2] = 0, v[3] = 1;  // scores 1 and 2
  const auto y = run_all(model, nullptr, xs)[0];
  const double p0 = 1.0 / (1.0 + std::exp(1.0));
  EXPECT_NEAR(y[0], p0, 1e-6);
  EXPECT_NEAR(y[1], 1.0 - p0, 1e-6);
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// Keras masks: after Masking, a self-attention over 6 steps whose last 2 are padding gives, on the
// 4 real steps, what it gives on those 4 steps alone (the padded keys and values are masked out);
// Attention zeroes its padded query rows, MultiHeadAttention leaves them uniform averages.
TEST(KerasAttention, MaskedPaddingStepsDoNotChangeTheRealSteps) {
  for (const char* cls : {"MultiHeadAttention", "Attention", "AdditiveAttention"}) {
    const Json cfg = std::string(cls) == "MultiHeadAttention"
                         ? Json{{"num_heads", 2}, {"key_dim", 3}}
                         : Json::object();
    auto model_of = [&](int64_t t) {
      std::vector<ModelNode> nodes;
      nodes.push_back({make_layer("Masking", Json::object(), ConfigMode::kPlan, "masking"), {0}});
      nodes.push_back({make_layer(cls, cfg, ConfigMode::kPlan, "att"), {1, 1}});
      return std::make_shared<const Model>("m", std::vector<ModelInput>{{"x", Shape{t, 4}}},
                                           std::move(nodes), std::vector<int>{2});
    };
    const auto full = model_of(6), cut = model_of(4);
    Network init(full, 1);
    Rng rng(9);
    init.initialize(rng);
    const std::vector<float> params(init.params(), init.params() + init.num_params());
    std::vector<Array> x6 = {Array::zeros(DType::kF32, Shape{2, 6, 4})};
    std::vector<Array> x4 = {Array::zeros(DType::kF32, Shape{2, 4, 4})};
    auto* p6 = static_cast<float*>(x6[0].mutable_data());
    auto* p4 = static_cast<float*>(x4[0].mutable_data());
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < 16; ++i) p6[s * 24 + i] = p4[s * 16 + i] = rng.uniform() * 2 - 1;
    const auto y6 = run_all(full, params.data(), x6)[0];
    const auto y4 = run_all(cut, params.data(), x4)[0];
    for (int s = 0; s < 2; ++s) {
      for (int i = 0; i < 16; ++i) EXPECT_NEAR(y6[s * 24 + i], y4[s * 16 + i], 1e-6) << cls;
      if (std::string(cls) != "MultiHeadAttention") {
        for (int i = 16; i < 24; ++i) EXPECT_EQ(y6[s * 24 + i], 0.0f) << cls;
      }
    }
  }
}

}  // namespace
}  // namespace nnfleet
