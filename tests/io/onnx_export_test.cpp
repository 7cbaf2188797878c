// ONNX export checked by independent readers: every exported file passes onnx.checker (Debian
// python3-onnx, tests/io/onnx_check.py) and ONNX Runtime (npm onnxruntime-node, one thread,
// tests/io/onnx_ort_check.js) predicts within 1e-5 (relative to max(1, |y|)) of nnfleet on
//  - every model of the shared Keras set that nnfleet loads, on its expected/ inputs;
//  - one model per example of every registry kind (the gradient check's examples), random weights;
//  - the models of a trained run, the W1 fleet's eight included;
//  - seq2seq models of every recurrent kind (initial_state from an encoder's returned states, the
//    states read as outputs), forwards and backwards, with and without a mask; a masked
//    GlobalAveragePooling1D;
// and a layer configuration ONNX cannot express is refused with a message naming the layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "../fleet/fleet_test_util.h"
#include "io/onnx/onnx_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "layers/string_layer.h"
#include "tensor/rng.h"

namespace nnfleet {
namespace {

constexpr double kTolerance = 1e-5;

struct OrtCase {
  std::string onnx;
  std::vector<std::pair<std::string, std::string>> inputs, outputs;  // name, .npy
};

void save_floats(const std::string& path, const Shape& shape, const float* data) {
  Array a = Array::zeros(DType::kF32, shape);
  std::copy(data, data + shape.size(), static_cast<float*>(a.mutable_data()));
  save_npy(path, a);
}

// Runs nnfleet on the n rows of `x` (one array per input, float32), writes the inputs, nnfleet's
// outputs and the ONNX file (unless `onnx` names one already written) under dir/stem*, and
// returns the case.
OrtCase make_case(const std::string& dir, const std::string& stem,
                  std::shared_ptr<const Model> model, const float* params,
                  const std::vector<std::vector<float>>& x, int n, const std::string& onnx = "") {
  OrtCase c;
  c.onnx = onnx.empty() ? dir + "/" + stem + ".onnx" : onnx;
  if (onnx.empty()) save_onnx(c.onnx, *model, params);
  Network net(model, n, params);
  for (size_t k = 0; k < model->num_inputs(); ++k) {
    std::copy(x[k].begin(), x[k].end(), net.input(k));
    const std::string f = dir + "/" + stem + ".in" + std::to_string(k) + ".npy";
    save_floats(f, model->input(k).shape.with_batch(n), x[k].data());
    c.inputs.push_back({model->input(k).name, f});
  }
  net.forward(n, false);
  for (size_t j = 0; j < model->num_outputs(); ++j) {
    const std::string f = dir + "/" + stem + ".out" + std::to_string(j) + ".npy";
    save_floats(f, model->output_shape(j).with_batch(n), net.output(j));
    c.outputs.push_back({model->output_name(j), f});
  }
  return c;
}

std::string json_string(const std::string& s) { return Json(s).dump(); }

// Runs both readers over the cases; returns their exit codes and logs into `log`.
std::pair<int, int> check_with_readers(const std::string& dir, const std::vector<OrtCase>& cases,
                                       std::string& log) {
  std::string files, list = "[";
  for (size_t i = 0; i < cases.size(); ++i) {
    const OrtCase& c = cases[i];
    files += " '" + c.onnx + "'";
    list += std::string(i ? ",\n" : "") + "{\"onnx\": " + json_string(c.onnx) +
            ", \"tol\": " + std::to_string(kTolerance) + ", \"inputs\": {";
    for (size_t k = 0; k < c.inputs.size(); ++k)
      list += std::string(k ? ", " : "") + json_string(c.inputs[k].first) + ": " +
              json_string(c.inputs[k].second);
    list += "}, \"outputs\": {";
    for (size_t j = 0; j < c.outputs.size(); ++j)
      list += std::string(j ? ", " : "") + json_string(c.outputs[j].first) + ": " +
              json_string(c.outputs[j].second);
    list += "}}";
  }
  test::write_text(dir + "/cases.json", list + "]\n");
  const std::string src = NNFLEET_SOURCE_DIR;
  const std::string checker = "/usr/bin/python3 " + src + "/tests/io/onnx_check.py" + files +
                              " > '" + dir + "/checker.log' 2>&1";
  const std::string ort =
      "NODE_PATH='" + std::string(NNFLEET_BINARY_DIR) + "/bench-node/node_modules' node " + src +
      "/tests/io/onnx_ort_check.js '" + dir + "/cases.json' > '" + dir + "/ort.log' 2>&1";
  const int a = std::system(checker.c_str());
  const int b = std::system(ort.c_str());
  log = "onnx.checker:\n" + test::read_text(dir + "/checker.log") + "ONNX Runtime:\n" +
        test::read_text(dir + "/ort.log");
  return {a, b};
}

// Every case through onnx.checker and ONNX Runtime (check_with_readers): both must accept all
// of them; their output is printed for the test log.
void expect_readers_accept(const std::string& dir, const std::vector<OrtCase>& cases) {
  std::string log;
  const auto [checker, ort] = check_with_readers(dir, cases, log);
  std::printf("%s", log.c_str());
  EXPECT_EQ(checker, 0) << log;
  EXPECT_EQ(ort, 0) << log;
}

// The shared files with expected inputs, as (stem, model file, weights file).
struct SharedModel {
  std::string stem, model, weights;
};

std::vector<SharedModel> shared_models() {
  const std::string dir = test::real_models_dir();
  std::vector<SharedModel> v;
  std::map<std::string, bool> stems;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/expected")) {
    const std::string f = e.path().filename().string();
    const size_t dot = f.find(".input");
    if (dot != std::string::npos) stems[f.substr(0, dot)] = true;
  }
  for (const auto& [stem, _] : stems) {
    SharedModel m{stem, "", ""};
    for (const char* ext : {".h5", ".keras"})
      if (std::filesystem::exists(dir + "/" + stem + ext)) m.model = dir + "/" + stem + ext;
    // A weights-only file with its to_json() architecture: <name>_weights_<tag>.h5 and
    // <name>_<tag>.json.
    const size_t w = stem.find("_weights_");
    if (w != std::string::npos) {
      m.weights = m.model;
      m.model = dir + "/" + stem.substr(0, w) + "_" + stem.substr(w + 9) + ".json";
    }
    v.push_back(m);
  }
  // The Keras 3 to_json() architecture with the weights of fmnist_mlp_k390.h5.
  v.push_back({"fmnist_mlp_k390", dir + "/fmnist_mlp_k3_arch.json", dir + "/fmnist_mlp_k390.h5"});
  return v;
}

std::vector<std::string> input_files(const std::string& stem) {
  const std::string base = test::fixture("expected/" + stem);
  if (std::filesystem::exists(base + ".input.npy")) return {base + ".input.npy"};
  std::vector<std::string> v;
  for (int k = 0; std::filesystem::exists(base + ".input" + std::to_string(k) + ".npy"); ++k)
    v.push_back(base + ".input" + std::to_string(k) + ".npy");
  return v;
}

TEST(RealFileOnnxExport, EveryLoadableSharedModelAgreesWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_shared");
  std::vector<OrtCase> cases;
  std::string not_loaded;
  int index = 0;
  for (const SharedModel& s : shared_models()) {
    std::vector<Array> xs;
    std::vector<ModelInput> shapes;
    for (const auto& f : input_files(s.stem)) {
      xs.push_back(load_npy(f));
      shapes.push_back({"", xs.back().sample_shape()});
    }
    ASSERT_FALSE(xs.empty()) << s.stem;
    LoadedModel lm;
    try {
      lm = load_keras_model(s.model, s.weights, shapes);
    } catch (const Error& e) {
      not_loaded += "  " + s.stem + ": " + e.what() + "\n";
      continue;
    }
    const int n = static_cast<int>(xs[0].rows());
    std::vector<std::vector<float>> x;
    for (const Array& a : xs) {  // word ids come as integers: every input as float32
      std::vector<float> v(static_cast<size_t>(a.shape().size()));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = static_cast<float>(a.at(static_cast<int64_t>(i)));
      x.push_back(std::move(v));
    }
    SCOPED_TRACE(s.stem);
    // Every loadable file exports, the eng2sql seq2seq one (its decoder starts from the
    // encoder's returned states) included.
    cases.push_back(
        make_case(dir, std::to_string(index++) + "_" + s.stem, lm.model, lm.params.data(), x, n));
  }
  std::printf("exported %zu shared models; not loadable by nnfleet:\n%s", cases.size(),
              not_loaded.c_str());
  EXPECT_GE(cases.size(), 21u);
  EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [](const OrtCase& c) {
    return c.onnx.find("eng2sql_seq2seq") != std::string::npos;
  }));
  expect_readers_accept(dir, cases);
}

// Values away from zero (magnitudes 0.1..2), as the gradient check draws them.
float draw(Rng& r) {
  const float m = 0.1f + 1.9f * r.uniform();
  return r.uniform() < 0.5f ? -m : m;
}

// Random weights laid out as Network::params(): trainable first, then the rest.
std::vector<float> random_params(const Model& model, Rng& rng) {
  std::vector<float> params(model.trainable_params() + model.non_trainable_params());
  size_t t = 0, f = model.trainable_params();
  for (size_t l = 0; l < model.num_layers(); ++l)
    for (const ParamSpec& p : model.planned(l).params) {
      if (model.shares(l) >= 0) break;  // a shared layer's further call: its owner's weights
      size_t& off = p.trainable ? t : f;
      for (int64_t i = 0; i < p.shape.size(); ++i)
        params[off + static_cast<size_t>(i)] =
            p.name == "moving_variance" ? 0.5f + std::fabs(draw(rng)) : 0.7f * draw(rng);
      off += static_cast<size_t>(p.shape.size());
    }
  return params;
}

TEST(OnnxExport, EveryKindExampleAgreesWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_kinds");
  std::vector<OrtCase> cases;
  const int n = 3;
  int index = 0;
  for (const auto& kind : layer_kinds()) {
    const auto examples = kind.examples();
    for (size_t e = 0; e < examples.size(); ++e) {
      const LayerExample& ex = examples[e];
      const std::string stem = std::to_string(index++) + "_" + kind.class_name;
      SCOPED_TRACE(stem + " " + ex.config.dump());
      std::vector<ModelInput> inputs;
      std::vector<int> ids;
      for (size_t k = 0; k < ex.inputs.size(); ++k) {
        inputs.push_back({"in" + std::to_string(k), ex.inputs[k]});
        ids.push_back(static_cast<int>(k));
      }
      std::vector<ModelNode> nodes;
      nodes.push_back({make_layer(kind.class_name, ex.config, ConfigMode::kPlan, "layer"), ids});
      // A layer that reads strings (TextVectorization, StringLookup, Hashing) takes a string
      // input, which ONNX export refuses by name: RealFileOnnxExport.
      // EveryNextFileExportsOrIsRefusedByName and lookup_layers_test check that.
      if (dynamic_cast<const StringLayer*>(nodes[0].layer.get())) continue;
      auto model = std::make_shared<const Model>("m", inputs, std::move(nodes),
                                                 std::vector<int>{static_cast<int>(ids.size())});
      // IntegerLookup's vocabulary table has no standard ONNX operator (LabelEncoder is in the
      // ai.onnx.ml domain): refused, naming the kind.
      if (std::string(kind.class_name) == "IntegerLookup") {
        std::string msg;
        try {
          check_onnx_export(*model);
        } catch (const ModelError& err) {
          msg = err.what();
        }
        EXPECT_NE(msg.find("IntegerLookup"), std::string::npos) << msg;
        continue;
      }
      Rng rng(77 + static_cast<uint64_t>(index));
      const std::vector<float> params = random_params(*model, rng);
      std::vector<std::vector<float>> x;
      for (const Shape& s : ex.inputs) {
        std::vector<float> v(static_cast<size_t>(n * s.size()));
        for (auto& val : v)
          val = ex.id_limit > 0
                    ? static_cast<float>(static_cast<int64_t>(rng.uniform() * ex.id_limit) %
                                         ex.id_limit)
                    : draw(rng);
        x.push_back(std::move(v));
      }
      cases.push_back(make_case(dir, stem, model, params.data(), x, n));
    }
  }
  expect_readers_accept(dir, cases);
}

// Trains <dir>/plan.yaml with `nnfleet train --format onnx` into <dir>/run, then checks each of
// `models` (a .keras and an .onnx beside it) with the readers on the first 16 rows of
// <dir>/test_x.npy.
void train_onnx_and_check(const std::string& dir, const std::vector<std::string>& models) {
  const std::string tool = std::string(NNFLEET_BINARY_DIR) + "/nnfleet";
  const std::string cmd = tool + " train '" + dir + "/plan.yaml' --out '" + dir +
                          "/run' --quiet --format onnx > '" + dir + "/train.log' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << test::read_text(dir + "/train.log");
  const Array test_x = load_npy(dir + "/test_x.npy");
  const int n = 16;
  std::vector<std::vector<float>> x(1);
  const auto* p = static_cast<const float*>(test_x.data());
  x[0].assign(p, p + n * test_x.row_size());
  std::vector<OrtCase> cases;
  for (const std::string& name : models) {
    const std::string stem = dir + "/run/models/" + name;
    ASSERT_TRUE(std::filesystem::exists(stem + ".keras")) << stem;
    ASSERT_TRUE(std::filesystem::exists(stem + ".onnx")) << stem;
    const LoadedModel lm = load_keras_model(stem + ".keras");
    cases.push_back(make_case(dir, name, lm.model, lm.params.data(), x, n, stem + ".onnx"));
  }
  expect_readers_accept(dir, cases);
}

// `train --format onnx` writes an .onnx beside every .keras; ONNX Runtime agrees with nnfleet on
// the trained weights (the small fleet of the fleet tests: MLPs, a CNN with BatchNormalization,
// and an LSTM added here).
TEST(OnnxExport, TrainedModelsOfARunAgreeWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_trained");
  testing_util::write_blobs(dir, "train", 600, 1);
  testing_util::write_blobs(dir, "test", 100, 2);
  test::write_text(dir + "/plan.yaml", testing_util::small_plan(R"(  - name: lstm
    layers:
      - Reshape: {target_shape: [8, 8]}
      - LSTM: {units: 5}
      - Dense: {units: 3, activation: softmax}
)"));
  train_onnx_and_check(dir, {"mlp-8", "mlp-32", "cnn", "tanh-sgd", "lstm"});
}

// The W1 fleet (examples/w1.yaml: its eight models and training options as they are, its data
// block swapped for 96 random 28x28 images) trained with `--format onnx`: ONNX Runtime agrees
// with nnfleet on every trained model (m7's convolutions included).
TEST(OnnxExport, W1ModelsAfterTrainingAgreeWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_w1");
  Rng r(11);
  for (const auto& [stem, n] : {std::pair<std::string, int>{"train", 96}, {"test", 16}}) {
    Array x = Array::zeros(DType::kF32, Shape{n, 28, 28, 1});
    Array y = Array::zeros(DType::kI32, Shape{n});
    auto* xs = static_cast<float*>(x.mutable_data());
    for (int64_t i = 0; i < x.shape().size(); ++i) xs[i] = r.uniform();
    for (int i = 0; i < n; ++i) static_cast<int32_t*>(y.mutable_data())[i] = i % 10;
    save_npy(dir + "/" + stem + "_x.npy", x);
    save_npy(dir + "/" + stem + "_y.npy", y);
  }
  std::string plan = test::read_text(std::string(NNFLEET_SOURCE_DIR) + "/examples/w1.yaml");
  const size_t data = plan.find("\ndata:\n"), defaults = plan.find("\ndefaults:");
  ASSERT_TRUE(data != std::string::npos && defaults != std::string::npos && data < defaults);
  std::string block = "\ndata:\n";
  for (const char* part : {"train", "test"}) {
    block += "  ";
    block += part;
    block += ": {x: '" + dir + "/" + part + "_x.npy', y: '" + dir + "/" + part + "_y.npy'}\n";
  }
  block.pop_back();
  plan.replace(data, defaults - data, block);
  test::write_text(dir + "/plan.yaml", plan);
  train_onnx_and_check(dir, {"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"});
}

TEST(OnnxExport, RefusesAMaskedSequenceThatOnnxWouldZeroByLayerName) {
  // Keras repeats the last kept output at masked steps (zero_output_for_mask false); ONNX's LSTM
  // writes zeros there, so the export must refuse rather than differ.
  std::vector<ModelNode> nodes;
  nodes.push_back(
      {make_layer("Embedding", Json{{"input_dim", 5}, {"output_dim", 3}, {"mask_zero", true}},
                  ConfigMode::kPlan, "embed"),
       {0}});
  nodes.push_back({make_layer("LSTM", Json{{"units", 2}, {"return_sequences", true}},
                              ConfigMode::kPlan, "seq_lstm"),
                   {1}});
  auto model = std::make_shared<const Model>("m", std::vector<ModelInput>{{"ids", Shape{4}}},
                                             std::move(nodes), std::vector<int>{2});
  std::vector<float> params(model->trainable_params() + model->non_trainable_params(), 0.1f);
  try {
    (void)onnx_model_bytes(*model, params.data());
    ADD_FAILURE() << "expected a ModelError";
  } catch (const ModelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("layer 1 'seq_lstm' (LSTM)"), std::string::npos) << m;
    EXPECT_NE(m.find("zero_output_for_mask"), std::string::npos) << m;
  }
}

// n rows of random [T, I] sequences; with `padded`, row r ends in r % 3 steps of zeros (Keras's
// post-padding, which a Masking layer masks).
std::vector<float> sequences(Rng& rng, int n, int64_t t, int64_t in, bool padded) {
  std::vector<float> v(static_cast<size_t>(n * t * in));
  for (int r = 0; r < n; ++r)
    for (int64_t s = 0; s < t; ++s)
      for (int64_t i = 0; i < in; ++i)
        v[static_cast<size_t>((r * t + s) * in + i)] = padded && s >= t - r % 3 ? 0.0f : draw(rng);
  return v;
}

std::unique_ptr<Layer> plan_layer(const char* cls, const Json& cfg, const std::string& name) {
  return make_layer(cls, cfg, ConfigMode::kPlan, name);
}

// The wiring seq2seq() and bidirectional_seq2seq() share: inputs enc_in (0) and dec_in (1),
// each behind a Masking layer when `masked`; the encoder; the decoder on dec_in started from
// the encoder's `states` returned states; outputs the encoder's sequence, the decoder's output
// and each state through a tanh layer.
struct Seq2SeqGraph {
  std::vector<ModelNode> nodes;
  std::vector<int> outputs;
  int encoder = 0;
};

Seq2SeqGraph seq2seq_graph(std::unique_ptr<Layer> encoder, std::unique_ptr<Layer> decoder,
                           int states, bool masked) {
  Seq2SeqGraph g;
  int enc_in = 0, dec_in = 1;
  if (masked) {
    g.nodes.push_back({plan_layer("Masking", Json{{"mask_value", 0.0}}, "enc_mask"), {0}});
    g.nodes.push_back({plan_layer("Masking", Json{{"mask_value", 0.0}}, "dec_mask"), {1}});
    enc_in = 2;
    dec_in = 3;
  }
  g.encoder = static_cast<int>(2 + g.nodes.size());
  g.nodes.push_back({std::move(encoder), {enc_in}});
  ModelNode d{std::move(decoder), {dec_in}};
  d.tensors = {0};
  for (int k = 1; k <= states; ++k) {
    d.inputs.push_back(g.encoder);
    d.tensors.push_back(k);
  }
  g.nodes.push_back(std::move(d));
  g.outputs = {g.encoder, g.encoder + 1};
  for (int k = 1; k <= states; ++k) {
    ModelNode a{plan_layer("Activation", Json{{"activation", "tanh"}}, "state" + std::to_string(k)),
                {g.encoder}};
    a.tensors = {k};
    g.outputs.push_back(static_cast<int>(2 + g.nodes.size()));
    g.nodes.push_back(std::move(a));
  }
  return g;
}

// A seq2seq of one recurrent kind: an encoder with return_state over input 0 whose states start
// a decoder over input 1 (initial_state), with the encoder's sequence, the decoder's output and
// the encoder's returned states (through tanh layers) as outputs. `masked`: both inputs pass a
// Masking layer (the data is padded), so the operators get sequence_lens.
std::shared_ptr<const Model> seq2seq(const char* cls, const Json& extra, bool backwards,
                                     bool masked) {
  Json enc = extra, dec = extra;
  enc.update({{"units", 3},
              {"return_state", true},
              {"return_sequences", true},
              {"go_backwards", backwards},
              // Going forwards, Keras repeats the last kept output at masked steps unless told
              // not to (refused, see below); going backwards no output precedes them.
              {"zero_output_for_mask", !backwards}});
  dec.update({{"units", 3},
              {"return_state", true},
              {"return_sequences", !backwards},
              {"go_backwards", backwards},
              {"zero_output_for_mask", true}});
  const int states = std::string(cls) == "LSTM" ? 2 : 1;
  Seq2SeqGraph g = seq2seq_graph(plan_layer(cls, enc, "encoder"), plan_layer(cls, dec, "decoder"),
                                 states, masked);
  return std::make_shared<const Model>(
      "seq2seq", std::vector<ModelInput>{{"enc_in", Shape{5, 3}}, {"dec_in", Shape{4, 2}}},
      std::move(g.nodes), g.outputs);
}

// A case of a seq2seq model (enc_in [5, 3], dec_in [4, 2]): random weights from `seed`, then n
// sequences per input from the same stream (padded when `masked`).
OrtCase seq2seq_case(const std::string& dir, const std::string& stem,
                     const std::shared_ptr<const Model>& model, uint64_t seed, int n, bool masked) {
  Rng rng(seed);
  const std::vector<float> params = random_params(*model, rng);
  const std::vector<std::vector<float>> x = {sequences(rng, n, 5, 3, masked),
                                             sequences(rng, n, 4, 2, masked)};
  return make_case(dir, stem, model, params.data(), x, n);
}

struct RecurrentKind {
  const char* cls;
  Json extra;
};

const std::vector<RecurrentKind>& recurrent_kinds() {
  static const std::vector<RecurrentKind> kinds = {{"SimpleRNN", Json::object()},
                                                   {"LSTM", Json::object()},
                                                   {"GRU", Json{{"reset_after", true}}},
                                                   {"GRU", Json{{"reset_after", false}}}};
  return kinds;
}

TEST(OnnxExport, InitialAndReturnedStatesAgreeWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_states");
  std::vector<OrtCase> cases;
  const int n = 4;
  int index = 0;
  for (const RecurrentKind& k : recurrent_kinds())
    for (bool backwards : {false, true})
      for (bool masked : {false, true}) {
        const std::string stem = std::to_string(index++) + "_" + k.cls +
                                 (backwards ? "_backwards" : "") + (masked ? "_masked" : "");
        SCOPED_TRACE(stem + " " + k.extra.dump());
        const auto model = seq2seq(k.cls, k.extra, backwards, masked);
        cases.push_back(
            seq2seq_case(dir, stem, model, 300 + static_cast<uint64_t>(index), n, masked));
      }
  ASSERT_EQ(cases.size(), 16u);
  expect_readers_accept(dir, cases);
}

// seq2seq() with Bidirectional halves: the encoder returns the forward layer's states and then
// the backward layer's, which start the decoder's halves in the same order (Keras's
// initial_state split half and half); the states also reach the outputs through tanh layers.
std::shared_ptr<const Model> bidirectional_seq2seq(const char* cls, const Json& extra,
                                                   bool masked) {
  Json inner = extra;
  inner.update({{"units", 3}, {"return_state", true}, {"return_sequences", true}});
  const Json layer = {{"class_name", cls}, {"config", inner}};
  const int states = 2 * (std::string(cls) == "LSTM" ? 2 : 1);
  Seq2SeqGraph g = seq2seq_graph(
      plan_layer("Bidirectional", Json{{"layer", layer}}, "encoder"),
      plan_layer("Bidirectional", Json{{"layer", layer}, {"merge_mode", "sum"}}, "decoder"), states,
      masked);
  // The backward layer's h is also an output as it is (Keras's Model(inp, [out, h, ...])).
  std::vector<int> tensors(g.outputs.size(), 0);
  g.outputs.push_back(g.encoder);
  tensors.push_back(1 + states / 2);
  return std::make_shared<const Model>(
      "bi_seq2seq", std::vector<ModelInput>{{"enc_in", Shape{5, 3}}, {"dec_in", Shape{4, 2}}},
      std::move(g.nodes), g.outputs, tensors);
}

TEST(OnnxExport, BidirectionalInitialAndReturnedStatesAgreeWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_bidirectional_states");
  std::vector<OrtCase> cases;
  const int n = 4;
  int index = 0;
  for (const RecurrentKind& k : recurrent_kinds())
    for (bool masked : {false, true}) {
      const std::string stem = std::to_string(index++) + "_bi_" + k.cls + (masked ? "_masked" : "");
      SCOPED_TRACE(stem + " " + k.extra.dump());
      const auto model = bidirectional_seq2seq(k.cls, k.extra, masked);
      cases.push_back(
          seq2seq_case(dir, stem, model, 400 + static_cast<uint64_t>(index), n, masked));
    }
  ASSERT_EQ(cases.size(), 8u);
  expect_readers_accept(dir, cases);
}

TEST(OnnxExport, MaskedGlobalAveragePooling1DAgreesWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_masked_gap");
  std::vector<OrtCase> cases;
  const int n = 5;
  for (bool keepdims : {false, true}) {
    std::vector<ModelNode> nodes;
    nodes.push_back({plan_layer("Masking", Json{{"mask_value", 0.0}}, "mask"), {0}});
    nodes.push_back(
        {plan_layer("GlobalAveragePooling1D", Json{{"keepdims", keepdims}}, "mean"), {1}});
    auto model = std::make_shared<const Model>("gap", std::vector<ModelInput>{{"x", Shape{6, 4}}},
                                               std::move(nodes), std::vector<int>{2});
    Rng rng(keepdims ? 11 : 12);
    const std::vector<std::vector<float>> x = {sequences(rng, n, 6, 4, true)};
    cases.push_back(make_case(dir, keepdims ? "keepdims" : "flat", model, nullptr, x, n));
  }
  expect_readers_accept(dir, cases);
}

TEST(OnnxExport, RefusesABackwardsMaskedSequenceFromAnInitialStateByLayerName) {
  // nnfleet carries the initial state into the masked steps that a go_backwards layer reads
  // first; ONNX writes zeros there: refused rather than different.
  std::vector<ModelNode> nodes;
  nodes.push_back({plan_layer("Masking", Json{{"mask_value", 0.0}}, "mask"), {0}});
  nodes.push_back({plan_layer("GRU",
                              Json{{"units", 2},
                                   {"return_sequences", true},
                                   {"go_backwards", true},
                                   {"reset_after", true}},
                              "back_gru"),
                   {2, 1}});  // the masked sequence and the initial state
  auto model = std::make_shared<const Model>(
      "m", std::vector<ModelInput>{{"x", Shape{4, 3}}, {"h0", Shape{2}}}, std::move(nodes),
      std::vector<int>{3});
  std::vector<float> params(model->trainable_params() + model->non_trainable_params(), 0.1f);
  try {
    (void)onnx_model_bytes(*model, params.data());
    ADD_FAILURE() << "expected a ModelError";
  } catch (const ModelError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("layer 1 'back_gru' (GRU)"), std::string::npos) << m;
    EXPECT_NE(m.find("initial_state"), std::string::npos) << m;
  }
}

// Every file of issue 35's next/ real set (../shared/keras-models/next): the numeric ones export
// (attention decomposed, channels_first between Transposes, Resize/Slice, Normalization as Sub/Div,
// TFOpLambda operations, a shared encoder's weights once) and ONNX Runtime agrees on their expected
// inputs; the two whose input is text are refused by name, leaving no file.
TEST(RealFileOnnxExport, EveryNextFileExportsOrIsRefusedByName) {
  const std::string dir = test::scratch_dir("onnx_next");
  const std::string next = test::real_models_dir() + "/next";
  std::vector<OrtCase> cases;
  int refused = 0;
  for (const auto& e : std::filesystem::directory_iterator(next)) {
    const std::string file = e.path().filename().string();
    const size_t dot = file.rfind('.');
    if (dot == std::string::npos || (file.substr(dot) != ".h5" && file.substr(dot) != ".keras"))
      continue;
    const std::string stem = file.substr(0, dot), base = next + "/expected/" + stem;
    SCOPED_TRACE(stem);
    std::vector<std::string> files;
    if (std::filesystem::exists(base + ".input.npy")) files.push_back(base + ".input.npy");
    for (int k = 0; std::filesystem::exists(base + ".input" + std::to_string(k) + ".npy"); ++k)
      files.push_back(base + ".input" + std::to_string(k) + ".npy");
    ASSERT_FALSE(files.empty());
    std::vector<Array> xs;
    for (const std::string& f : files) xs.push_back(load_npy(f));
    if (xs[0].dtype() == DType::kStr) {
      const LoadedModel lm = load_keras_model(next + "/" + file);
      std::string msg;
      try {
        save_onnx(dir + "/" + stem + ".onnx", *lm.model, lm.params.data());
      } catch (const ModelError& err) {
        msg = err.what();
      }
      EXPECT_NE(msg.find("reads strings"), std::string::npos) << msg;
      EXPECT_FALSE(std::filesystem::exists(dir + "/" + stem + ".onnx"));
      ++refused;
      continue;
    }
    std::vector<ModelInput> shapes;
    std::vector<std::vector<float>> x;
    for (const Array& a : xs) {
      shapes.push_back({"", a.sample_shape()});
      const auto* p = static_cast<const float*>(a.data());
      x.emplace_back(p, p + a.shape().size());
    }
    const LoadedModel lm = load_keras_model(next + "/" + file, "", shapes);
    cases.push_back(
        make_case(dir, stem, lm.model, lm.params.data(), x, static_cast<int>(xs[0].rows())));
  }
  EXPECT_EQ(cases.size(), 8u);
  EXPECT_EQ(refused, 2);
  expect_readers_accept(dir, cases);
}

// Models of serialized TensorFlow operations (tf.keras TFOpLambda / SlicingOpLambda and Keras 3
// keras.ops, tools/make_tfop_cases.py) agree with ONNX Runtime.
TEST(OnnxExport, TfOperationModelsAgreeWithOnnxRuntime) {
  const std::string dir = test::scratch_dir("onnx_tfop");
  std::vector<OrtCase> cases;
  Rng rng(5);
  for (const char* stem : {"tfop_unwrapped_k211", "tfop_wrapped_k214", "tfop_keras3_ops"}) {
    const LoadedModel lm =
        load_keras_model(test::fixture(std::string("synthetic/") + stem + ".json"));
    const int n = 3;
    std::vector<std::vector<float>> x;
    for (size_t k = 0; k < lm.model->num_inputs(); ++k) {
      x.emplace_back(static_cast<size_t>(n * lm.model->input(k).shape.size()));
      for (float& v : x.back()) v = draw(rng);
    }
    cases.push_back(make_case(dir, stem, lm.model, lm.params.data(), x, n));
  }
  expect_readers_accept(dir, cases);
}

// a [3] and b [3] -> Dense(2, tanh) and BatchNormalization, each applied to both inputs
// (shared: one layer called twice; or two layers with their own weights) -> Concatenate -> Dense.
std::shared_ptr<const Model> siamese(bool shared) {
  std::vector<ModelNode> nodes;
  auto layer = [](const char* cls, Json cfg, const char* name) {
    return make_layer(cls, cfg, ConfigMode::kPlan, name);
  };
  const Json dense = {{"units", 2}, {"activation", "tanh"}};
  nodes.push_back({layer("Dense", dense, "dense"), {0}});
  nodes.push_back(
      {layer("Dense", dense, shared ? "dense" : "dense_1"), {1}, {}, {}, shared ? 0 : -1});
  nodes.push_back({layer("BatchNormalization", Json::object(), "bn"), {2}});
  nodes.push_back({layer("BatchNormalization", Json::object(), shared ? "bn" : "bn_1"),
                   {3},
                   {},
                   {},
                   shared ? 2 : -1});
  nodes.push_back({layer("Concatenate", Json::object(), "cat"), {4, 5}});
  nodes.push_back({layer("Dense", {{"units", 1}}, "out"), {6}});
  return std::make_shared<const Model>("siamese",
                                       std::vector<ModelInput>{{"a", Shape{3}}, {"b", Shape{3}}},
                                       std::move(nodes), std::vector<int>{7});
}

// "<initializers> <fewest nodes reading one of the shared layers' initializers>" of an ONNX
// file, read by python3-onnx.
std::string initializer_use(const std::string& dir, const std::string& onnx) {
  const std::string script = dir + "/uses.py", out = dir + "/uses.txt";
  test::write_text(script,
                   "import onnx, sys\n"
                   "g = onnx.load(sys.argv[1]).graph\n"
                   "uses = {i.name: 0 for i in g.initializer}\n"
                   "for n in g.node:\n"
                   "    for x in n.input:\n"
                   "        if x in uses: uses[x] += 1\n"
                   "mine = [u for k, u in uses.items() if k.startswith(('dense/', 'bn/'))]\n"
                   "print(len(uses), min(mine) if mine else 0)\n");
  const std::string cmd = "/usr/bin/python3 '" + script + "' '" + onnx + "' > '" + out + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << test::read_text(out);
  std::string s = test::read_text(out);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A shared layer's weights are exported once: one initializer read by the nodes of every call
// (the unshared model, with the same numbers in both copies, has one per copy); both readers
// agree with nnfleet, on it and on the next/ real file whose nested encoder is shared by three
// inputs.
TEST(OnnxExport, SharedLayerWeightsAreOneInitializerUsedByEveryCall) {
  const std::string dir = test::scratch_dir("onnx_shared_layers");
  const auto shared = siamese(true), apart = siamese(false);
  Rng rng(5);
  const std::vector<float> p = random_params(*shared, rng);
  // The unshared model's weights: dense, dense_1 (the same), then bn, bn_1 (the same), out.
  const size_t dense = 3 * 2 + 2, gb = 2 * 2, stats = 2 * 2, out = 2 * 2 + 1;
  std::vector<float> q;
  q.insert(q.end(), p.begin(), p.begin() + dense);
  q.insert(q.end(), p.begin(), p.begin() + dense);
  q.insert(q.end(), p.begin() + dense, p.begin() + dense + gb);
  q.insert(q.end(), p.begin() + dense, p.begin() + dense + gb);
  q.insert(q.end(), p.begin() + dense + gb, p.begin() + dense + gb + out);
  const size_t f = dense + gb + out;
  q.insert(q.end(), p.begin() + f, p.begin() + f + stats);
  q.insert(q.end(), p.begin() + f, p.begin() + f + stats);
  ASSERT_EQ(p.size(), f + stats);
  ASSERT_EQ(q.size(), apart->trainable_params() + apart->non_trainable_params());
  std::vector<std::vector<float>> x(2, std::vector<float>(4 * 3));
  for (auto& v : x)
    for (auto& val : v) val = draw(rng);
  std::vector<OrtCase> cases;
  cases.push_back(make_case(dir, "shared", shared, p.data(), x, 4));
  cases.push_back(make_case(dir, "apart", apart, q.data(), x, 4));
  const std::string s = initializer_use(dir, cases[0].onnx),
                    a = initializer_use(dir, cases[1].onnx);
  const int n_shared = std::stoi(s.substr(0, s.find(' ')));
  const int n_apart = std::stoi(a.substr(0, a.find(' ')));
  EXPECT_GT(n_apart, n_shared) << s << " / " << a;
  // Each initializer of the shared layers is read by the nodes of both calls.
  EXPECT_EQ(std::stoi(s.substr(s.find(' ') + 1)), 2 * std::stoi(a.substr(a.find(' ') + 1)))
      << s << " / " << a;
  const std::string stem = "birdsong_triplet_shared_tf250";
  const std::string next = test::real_models_dir() + "/next";
  if (std::filesystem::exists(next + "/" + stem + ".h5")) {
    const LoadedModel lm = load_keras_model(next + "/" + stem + ".h5");
    std::vector<std::vector<float>> xs;
    for (int k = 0; k < 3; ++k) {
      const Array arr =
          load_npy(next + "/expected/" + stem + ".input" + std::to_string(k) + ".npy");
      xs.emplace_back(static_cast<const float*>(arr.data()),
                      static_cast<const float*>(arr.data()) + arr.shape().size());
    }
    cases.push_back(make_case(dir, stem, lm.model, lm.params.data(), xs, 2));
  }
  expect_readers_accept(dir, cases);
}

}  // namespace
}  // namespace nnfleet
