// StringLookup, IntegerLookup and Hashing (issue 35): the ids Keras's docstrings give, the
// numeric forms, adapt from training rows, training from a plan, and the .keras / .h5 round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "commands.h"
#include "fleet/fit/string_front.h"
#include "io/keras/keras_writer.h"
#include "io/onnx/onnx_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"

namespace nnfleet::test {
namespace {

int run_cli(const std::vector<std::string>& args) {
  CLI::App app;
  cli::Run run;
  cli::add_train_command(app, run);
  std::vector<const char*> argv = {"nnfleet"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return run();
}

// A string layer's encoding of n samples of `per` strings each.
std::vector<float> encode(const Json& cfg, const char* cls, const std::vector<std::string>& s,
                          int64_t per) {
  const auto l = make_layer(cls, cfg, ConfigMode::kPlan, "l");
  const auto& sl = dynamic_cast<const StringLayer&>(*l);
  const auto n = static_cast<int64_t>(s.size()) / per;
  const Shape out = sl.encoded_shape(per == 1 ? Shape{1} : Shape{per});
  std::vector<float> y(static_cast<size_t>(n * out.size()));
  sl.encode(s.data(), n, per, y.data());
  return y;
}

// A float layer's forward over n samples of shape `in`.
std::vector<float> forward(const Layer& l, Shape in, std::vector<float> x) {
  const Shape out = l.output_shape({in});
  const int n = static_cast<int>(static_cast<int64_t>(x.size()) / in.size());
  std::vector<float> y(static_cast<size_t>(n * out.size()));
  const float* xs[] = {x.data()};
  LayerArgs a;
  a.n = n;
  a.in_shapes = &in;
  a.out_shape = out;
  a.x = xs;
  a.y = y.data();
  l.forward(a);
  return y;
}

using V = std::vector<float>;

TEST(Hashing, MatchesKerasDocstringBins) {
  const std::vector<std::string> in = {"A", "B", "C", "D", "E"};
  EXPECT_EQ(encode({{"num_bins", 3}}, "Hashing", in, 1), V({1, 0, 1, 1, 2}));
  EXPECT_EQ(encode({{"num_bins", 3}, {"salt", 133}}, "Hashing", in, 1), V({0, 0, 2, 1, 0}));
  EXPECT_EQ(encode({{"num_bins", 3}, {"mask_value", ""}}, "Hashing", {"A", "B", "", "C", "D"}, 1),
            V({1, 1, 0, 2, 2}));
}

TEST(Hashing, IntegersHashAsTheirDecimalText) {
  const auto l = make_layer("Hashing", {{"num_bins", 5}, {"salt", Json::array({1, 2})}},
                            ConfigMode::kPlan, "h");
  const auto numeric = dynamic_cast<const StringLayer&>(*l).numeric_form();
  ASSERT_NE(numeric, nullptr);
  const V got = forward(*numeric, Shape{3}, {7, -12, 1000});
  const V want =
      encode({{"num_bins", 5}, {"salt", Json::array({1, 2})}}, "Hashing", {"7", "-12", "1000"}, 3);
  EXPECT_EQ(got, want);
  EXPECT_EQ(forward(*numeric, Shape{1}, {0}),
            encode({{"num_bins", 5}, {"salt", Json::array({1, 2})}}, "Hashing", {"0"}, 1));
}

TEST(Hashing, BagModesCountBins) {
  const V got =
      encode({{"num_bins", 3}, {"output_mode", "count"}}, "Hashing", {"A", "C", "E", "B"}, 4);
  EXPECT_EQ(got, V({1, 2, 1}));  // bins 1 1 2 0
}

TEST(StringLookup, MatchesKerasDocstringIds) {
  const Json vocab = Json::array({"a", "b", "c", "d"});
  const std::vector<std::string> data = {"a", "c", "d", "d", "z", "b"};
  EXPECT_EQ(encode({{"vocabulary", vocab}}, "StringLookup", data, 3), V({1, 3, 4, 4, 0, 2}));
  // Two OOV ids: 'z' goes to FarmHash("z") mod 2 = 1.
  EXPECT_EQ(encode({{"vocabulary", vocab}, {"num_oov_indices", 2}}, "StringLookup", data, 3),
            V({2, 4, 5, 5, 1, 3}));
  EXPECT_EQ(encode({{"vocabulary", vocab}, {"mask_token", ""}}, "StringLookup",
                   {"a", "c", "d", "d", "", "b"}, 3),
            V({2, 4, 5, 5, 0, 3}));
  EXPECT_EQ(encode({{"vocabulary", vocab}, {"output_mode", "multi_hot"}}, "StringLookup", data, 3),
            V({0, 1, 0, 1, 1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(encode({{"vocabulary", vocab}, {"output_mode", "count"}}, "StringLookup",
                   {"a", "c", "d", "d", "d", "z", "b", "z"}, 4),
            V({0, 1, 0, 1, 2, 2, 0, 1, 0, 1}));
  // tf_idf: the OOV id gets the mean weight (0.5).
  const V tfidf = encode({{"vocabulary", vocab},
                          {"output_mode", "tf_idf"},
                          {"idf_weights", Json::array({0.25, 0.75, 0.6, 0.4})}},
                         "StringLookup", {"a", "c", "d", "d", "d", "z", "b", "z"}, 4);
  const V want = {0, 0.25f, 0, 0.6f, 0.8f, 1.0f, 0, 0.75f, 0, 0.4f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(tfidf[i], want[i]) << i;
  EXPECT_EQ(encode({{"vocabulary", vocab}, {"output_mode", "one_hot"}}, "StringLookup", {"b"}, 1),
            V({0, 0, 1, 0, 0}));
}

TEST(StringLookup, AdaptLearnsTermsByCount) {
  const auto l = make_layer("StringLookup", Json::object(), ConfigMode::kPlan, "s");
  const std::vector<std::string> rows = {"b", "a", "b", "[UNK]", "c", "b", "a"};
  const Json v = dynamic_cast<const StringLayer&>(*l).adapt(rows.data(), 7, 1);
  EXPECT_EQ(v["vocabulary"], Json::array({"b", "a", "c"}));
}

TEST(StringLookup, InvertIsRefusedByName) {
  EXPECT_THROW(
      make_layer("StringLookup", {{"vocabulary", {"a"}}, {"invert", true}}, ConfigMode::kPlan, "s"),
      ConfigError);
}

TEST(IntegerLookup, MatchesKerasDocstringIds) {
  const Json vocab = Json::array({12, 36, 1138, 42});
  auto make = [&](Json extra) {
    extra["vocabulary"] = vocab;
    return make_layer("IntegerLookup", extra, ConfigMode::kPlan, "i");
  };
  const V data = {12, 1138, 42, 42, 1000, 36};
  EXPECT_EQ(forward(*make(Json::object()), Shape{3}, data), V({1, 3, 4, 4, 0, 2}));
  EXPECT_EQ(forward(*make({{"num_oov_indices", 2}}), Shape{3}, data), V({2, 4, 5, 5, 0, 3}));
  EXPECT_EQ(forward(*make({{"invert", true}}), Shape{3}, {1, 3, 4, 4, 0, 2}),
            V({12, 1138, 42, 42, -1, 36}));
  EXPECT_EQ(forward(*make({{"output_mode", "multi_hot"}}), Shape{3}, data),
            V({0, 1, 0, 1, 1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(forward(*make({{"mask_token", 0}}), Shape{2}, {0, 36}), V({0, 3}));
  EXPECT_EQ(forward(*make(Json::object()), Shape{1}, {12.5f}), V({0}));  // not an integer
}

TEST(Lookups, OnnxExportRefusesThemByName) {
  for (const char* cls : {"StringLookup", "Hashing"}) {
    const Json cfg =
        std::string(cls) == "Hashing" ? Json{{"num_bins", 3}} : Json{{"vocabulary", {"a"}}};
    std::vector<ModelNode> nodes;
    nodes.push_back({make_layer(cls, cfg, ConfigMode::kPlan, "l"), {0}});
    nodes.push_back({make_layer("Dense", {{"units", 1}}, ConfigMode::kPlan, "d"), {1}});
    ModelInput in{"text", Shape{}, true, Shape{1}};
    const Model m("m", {in}, std::move(nodes), {2});
    try {
      check_onnx_export(m);
      FAIL() << cls;
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("'l'"), std::string::npos) << e.what();
    }
  }
}

Json train_and_read(const std::string& dir, const std::string& data_yaml, const char* layers) {
  write_text(dir + "/plan.yaml", "seed: 3\ndata:\n  train: " + data_yaml +
                                     "\nmodels:\n  - name: m\n    epochs: 40\n"
                                     "    batch_size: 8\n    loss: binary_crossentropy\n"
                                     "    metrics: [accuracy]\n"
                                     "    optimizer: {Adam: {learning_rate: 0.05}}\n"
                                     "    layers:\n" +
                                     std::string(layers));
  EXPECT_EQ(
      run_cli({"train", dir + "/plan.yaml", "--out", dir + "/run", "--workers", "1", "--quiet"}),
      0);
  return Json::parse(read_text(dir + "/run/results.json"))["models"][0];
}

// Written back as .keras and .h5 and read again: the same configs and predictions.
void expect_round_trip(const std::string& dir, const Array& x) {
  const LoadedModel lm = load_keras_model(dir + "/run/models/m.keras");
  const Array bound = bind_input(*lm.model, 0, x, "x");
  const std::vector<float> got = run_model(lm, bound);
  save_keras(dir + "/b.keras", *lm.model, lm.params.data());
  save_keras_h5(dir + "/b.h5", *lm.model, lm.params.data());
  for (const char* name : {"/b.keras", "/b.h5"}) {
    const LoadedModel back = load_keras_model(dir + name);
    for (size_t i = 0; i < lm.model->num_layers(); ++i)
      EXPECT_EQ(back.model->layer_keras_config(i), lm.model->layer_keras_config(i)) << name;
    EXPECT_EQ(run_model(back, bind_input(*back.model, 0, x, "x")), got) << name;
  }
}

std::string word_csv(const std::string& dir) {
  std::string csv = "word,y\n";
  const char* cats[] = {"cat", "kitten", "tabby"};
  const char* dogs[] = {"dog", "puppy", "hound"};
  for (int i = 0; i < 48; ++i)
    csv += "\"" + std::string(i % 2 ? cats[i % 3] : dogs[i % 3]) + "\"," + std::to_string(i % 2) +
           "\n";
  write_text(dir + "/w.csv", csv);
  return "{csv: " + dir + "/w.csv, label: y}";
}

TEST(LookupTraining, AdaptedStringLookupTrainsAndRoundTrips) {
  const std::string dir = scratch_dir("lookup_string");
  const Json m = train_and_read(dir, word_csv(dir),
                                "      - StringLookup: {output_mode: one_hot}\n"
                                "      - Dense: {units: 1, activation: sigmoid}\n");
  ASSERT_EQ(m["status"], "done") << m.dump();
  EXPECT_GT(m["metrics"].value("accuracy", 0.0), 0.9) << m.dump();
  expect_round_trip(dir, Array::strings(Shape{3}, {"cat", "hound", "zebra"}));
}

TEST(LookupTraining, HashingTrainsAndRoundTrips) {
  const std::string dir = scratch_dir("lookup_hashing");
  const Json m = train_and_read(dir, word_csv(dir),
                                "      - Hashing: {num_bins: 64, output_mode: one_hot}\n"
                                "      - Dense: {units: 1, activation: sigmoid}\n");
  ASSERT_EQ(m["status"], "done") << m.dump();
  expect_round_trip(dir, Array::strings(Shape{2}, {"cat", "dog"}));
}

TEST(LookupTraining, IntegerLookupOnFloatIdsTrainsAndRoundTrips) {
  const std::string dir = scratch_dir("lookup_integer");
  std::string csv = "id,y\n";
  for (int i = 0; i < 48; ++i)
    csv += std::to_string(100 + i % 6) + "," + std::to_string(i % 2) + "\n";
  write_text(dir + "/i.csv", csv);
  const Json m = train_and_read(dir, "{csv: " + dir + "/i.csv, label: y}",
                                "      - IntegerLookup: {vocabulary: [100, 101, 102, 103, 104, "
                                "105], output_mode: one_hot}\n"
                                "      - Dense: {units: 1, activation: sigmoid}\n");
  ASSERT_EQ(m["status"], "done") << m.dump();
  EXPECT_GT(m["metrics"].value("accuracy", 0.0), 0.9) << m.dump();
  Array x = Array::zeros(DType::kF32, Shape{2, 1});
  static_cast<float*>(x.mutable_data())[0] = 101;
  static_cast<float*>(x.mutable_data())[1] = 7;
  expect_round_trip(dir, x);
}

// The plan's validation and the job both build the model; the second adapt is a cache hit, and
// a model with the same layer config (another name) shares it.
TEST(LookupTraining, AdaptRunsOncePerConfigAndRows) {
  auto model = [](const std::string& name) {
    std::vector<ModelNode> nodes;
    nodes.push_back(
        {make_layer("StringLookup", {{"output_mode", "one_hot"}}, ConfigMode::kPlan, name), {0}});
    nodes.push_back({make_layer("Dense", {{"units", 1}}, ConfigMode::kPlan, "d"), {1}});
    return std::make_shared<const Model>("m",
                                         std::vector<ModelInput>{{"text", Shape{}, true, Shape{1}}},
                                         std::move(nodes), std::vector<int>{2});
  };
  const Array texts = Array::strings(Shape{4}, {"a", "b", "a", "c"});
  AdaptedVocabularies cache;
  const auto a = adapt_string_layers(model("s"), texts, &cache);
  const auto b = adapt_string_layers(model("s"), texts, &cache);
  const auto c = adapt_string_layers(model("other"), texts, &cache);
  EXPECT_EQ(cache.by_key.size(), 1u);
  EXPECT_EQ(a->layer_keras_config(0), b->layer_keras_config(0));
  EXPECT_EQ(a->layer_keras_config(0)["vocabulary"], Json::array({"a", "c", "b"}));
  EXPECT_EQ(c->input(0).shape, (Shape{4}));                         // the OOV id and three terms
  adapt_string_layers(model("s"), texts.slice_rows(0, 2), &cache);  // other rows: adapted again
  EXPECT_EQ(cache.by_key.size(), 2u);
}

TEST(LookupTraining, TextVectorizationAdaptsIdfWeightsForTfIdf) {
  const auto l =
      make_layer("TextVectorization", {{"output_mode", "tf_idf"}}, ConfigMode::kPlan, "tv");
  const std::vector<std::string> texts = {"a b", "a", "c a"};
  const Json keys = dynamic_cast<const StringLayer&>(*l).adapt(texts.data(), 3, 1);
  EXPECT_EQ(keys["vocabulary"], Json::array({"[UNK]", "a", "c", "b"}));
  const double a = std::log(1.75), bc = std::log(2.5);
  const std::vector<double> want = {(a + 2 * bc) / 3, a, bc, bc};
  ASSERT_EQ(keys["idf_weights"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(keys["idf_weights"][i].get<double>(), want[i], 1e-12);
  Json cfg = l->keras_config();
  for (const auto& [k, v] : keys.items()) cfg[k] = v;
  const auto adapted = make_layer("TextVectorization", cfg, ConfigMode::kKeras, "tv");
  float row[4];
  const std::string text = "a a zebra";
  dynamic_cast<const StringLayer&>(*adapted).encode(&text, 1, 1, row);
  EXPECT_FLOAT_EQ(row[0], static_cast<float>(want[0]));
  EXPECT_FLOAT_EQ(row[1], static_cast<float>(2 * a));
}

TEST(LookupTraining, AdaptedIntegerLookupTrainsOnANumericColumn) {
  const std::string dir = scratch_dir("lookup_integer_adapt");
  std::string csv = "id,y\n";
  for (int i = 0; i < 48; ++i)
    csv += std::to_string(100 + i % 6) + "," + std::to_string(i % 2) + "\n";
  write_text(dir + "/i.csv", csv);
  const Json m = train_and_read(dir, "{csv: " + dir + "/i.csv, label: y}",
                                "      - IntegerLookup: {output_mode: multi_hot}\n"
                                "      - Dense: {units: 1, activation: sigmoid}\n");
  ASSERT_EQ(m["status"], "done") << m.dump();
  EXPECT_GT(m["metrics"].value("accuracy", 0.0), 0.9) << m.dump();
  const LoadedModel lm = load_keras_model(dir + "/run/models/m.keras");
  // Every id 8 times: ties go to the larger value first.
  EXPECT_EQ(lm.model->layer_keras_config(0)["vocabulary"],
            Json::array({105, 104, 103, 102, 101, 100}));
}

}  // namespace
}  // namespace nnfleet::test
