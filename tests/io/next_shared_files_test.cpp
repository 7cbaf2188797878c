// Real third-party Keras files with shared layers (a nested model called on several inputs),
// from the shared folder's next/ set described by its MANIFEST.md (never copied into the
// repository): each loads, predicts its expected/ outputs within 1e-4, and is written back as
// .keras and legacy .h5 (the shared structure kept: one layer, several inbound nodes; weights
// stored once) and read again with bit-identical predictions and parameters.
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "io/keras/keras_graph.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "model/network.h"

namespace nnfleet::test {
namespace {

std::string next_dir() { return real_models_dir() + "/next"; }

std::vector<Array> inputs_of(const std::string& stem, size_t k) {
  std::vector<Array> xs;
  for (size_t i = 0; i < k; ++i)
    xs.push_back(
        load_npy(next_dir() + "/expected/" + stem + ".input" + std::to_string(i) + ".npy"));
  return xs;
}

// The first output of `lm` on inputs xs (one array per input, same rows), one forward pass.
std::vector<float> run_inputs(const LoadedModel& lm, const std::vector<Array>& xs) {
  const int n = static_cast<int>(xs[0].rows());
  Network net(lm.model, n, lm.params.data());
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  for (size_t k = 0; k < xs.size(); ++k) gather_rows(xs[k], idx.data(), n, 1.0f, net.input(k));
  net.forward(n, false);
  return std::vector<float>(net.output(),
                            net.output() + static_cast<size_t>(n) * net.output_features());
}

TEST(RealFileNextShared, BirdsongTripletEncoderSharedByThreeInputsMatchesReference) {
  const std::string stem = "birdsong_triplet_shared_tf250";
  const LoadedModel lm = load_keras_model(next_dir() + "/" + stem + ".h5");
  const Model& m = *lm.model;
  ASSERT_EQ(m.num_inputs(), 3u);
  // The encoder's layers appear three times, the later copies sharing the first's weights.
  size_t owners = 0, sharers = 0;
  for (size_t i = 0; i < m.num_layers(); ++i) (m.shares(i) < 0 ? owners : sharers) += 1;
  EXPECT_EQ(sharers, 2 * (owners - 1));  // all but the Concatenate, twice more
  const std::vector<Array> xs = inputs_of(stem, 3);
  const Array want = load_npy(next_dir() + "/expected/" + stem + ".output.npy");
  const std::vector<float> got = run_inputs(lm, xs);
  ASSERT_EQ(got.size(), static_cast<size_t>(want.shape().size()));
  const double err = max_abs_diff(got, static_cast<const float*>(want.data()), got.size());
  EXPECT_LE(err, 1e-4);
  std::printf("[ parity   ] %s max abs error %.3g\n", stem.c_str(), err);

  const std::string dir = scratch_dir("next_shared_" + stem);
  save_keras_h5(dir + "/m.h5", m, lm.params.data());
  save_keras(dir + "/m.keras", m, lm.params.data());
  for (const char* name : {"/m.h5", "/m.keras"}) {
    const LoadedModel back = load_keras_model(dir + name);
    EXPECT_EQ(back.model->num_layers(), m.num_layers()) << name;
    for (size_t i = 0; i < m.num_layers() && i < back.model->num_layers(); ++i)
      EXPECT_EQ(back.model->shares(i), m.shares(i)) << name << " layer " << i;
    EXPECT_EQ(back.params, lm.params) << name;
    EXPECT_EQ(run_inputs(back, xs), got) << name;
  }
}

// A shared Dense (one layer called on two inputs) trained with Adam: both writers keep one
// layer with two inbound nodes, its weights and Adam's slots stored once, and the files read
// back with the same graph, weights, optimizer state and predictions.
TEST(SharedLayerFiles, ATrainedSharedLayerRoundTripsWithItsOptimizerState) {
  auto layer = [](const char* cls, Json cfg, const char* name) {
    return make_layer(cls, cfg, ConfigMode::kPlan, name);
  };
  std::vector<ModelNode> nodes;
  nodes.push_back({layer("Dense", {{"units", 2}, {"activation", "tanh"}}, "dense"), {0}});
  nodes.push_back(
      {layer("Dense", {{"units", 2}, {"activation", "tanh"}}, "dense"), {1}, {}, {}, 0});
  nodes.push_back({layer("Concatenate", Json::object(), "cat"), {2, 3}});
  nodes.push_back({layer("Dense", {{"units", 1}}, "out"), {4}});
  auto model = std::make_shared<const Model>(
      "siamese", std::vector<ModelInput>{{"a", Shape{3}}, {"b", Shape{3}}}, std::move(nodes),
      std::vector<int>{5});
  Network net(model, 4, TrainSpec{parse_loss("mse"), parse_optimizer("adam")});
  Rng rng(9);
  net.initialize(rng);
  std::vector<float> y(4);
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 12; ++i) net.input(0)[i] = rng.uniform(), net.input(1)[i] = rng.uniform();
    for (float& v : y) v = rng.uniform();
    Targets t;
    t.values = y.data();
    net.train_step(4, t);
  }
  const std::vector<float> params(net.params(), net.params() + net.num_params());
  const std::vector<float> state(net.optimizer_state(),
                                 net.optimizer_state() + net.optimizer_state_floats());
  const std::string dir = scratch_dir("shared_layer_files");
  const KerasSaveInfo info = keras_save_info(net);
  save_keras(dir + "/m.keras", *model, net.params(), info);
  save_keras_h5(dir + "/m.h5", *model, net.params(), info);
  const std::string cfg = read_text(dir + "/m.h5");  // the config is a plain attribute
  for (const char* name : {"/m.keras", "/m.h5"}) {
    const LoadedModel back = load_keras_model(dir + name);
    ASSERT_EQ(back.model->num_layers(), 4u) << name;
    EXPECT_EQ(back.model->shares(1), 0) << name;
    EXPECT_EQ(back.model->trainable_params(), model->trainable_params()) << name;
    EXPECT_EQ(back.params, params) << name;
    EXPECT_EQ(back.optimizer_state, state) << name;
    EXPECT_EQ(back.iterations, 3) << name;
  }
  // tf.keras's form: one "dense" entry with two inbound nodes, the second output named as
  // ["dense", 1, 0].
  EXPECT_NE(cfg.find(R"("inbound_nodes":[[["a",0,0,{}]],[["b",0,0,{}]]])"), std::string::npos);
  EXPECT_NE(cfg.find(R"(["dense",1,0,{}])"), std::string::npos);
}

// A Keras 3 config whose nested Functional "enc" is called on two inputs; the Concatenate reads
// its calls as keras_history ["enc", first, 0] and ["enc", first + 1, 0].
Json two_call_config(int first) {
  auto kt = [](const char* name, int node) {
    return Json{
        {"class_name", "__keras_tensor__"},
        {"config",
         {{"shape", {nullptr, 3}}, {"dtype", "float32"}, {"keras_history", {name, node, 0}}}}};
  };
  auto input = [](const char* name) {
    return Json{{"class_name", "InputLayer"},
                {"name", name},
                {"config", {{"batch_shape", {nullptr, 3}}, {"name", name}}},
                {"inbound_nodes", Json::array()}};
  };
  auto call = [](Json args) { return Json{{"args", std::move(args)}, {"kwargs", Json::object()}}; };
  Json enc = {{"class_name", "Functional"},
              {"name", "enc"},
              {"config",
               {{"name", "enc"},
                {"layers",
                 {input("i"),
                  {{"class_name", "Dense"},
                   {"name", "d"},
                   {"config", {{"name", "d"}, {"units", 3}}},
                   {"inbound_nodes", {call({kt("i", 0)})}}}}},
                {"input_layers", {{"i", 0, 0}}},
                {"output_layers", {{"d", 0, 0}}}}},
              {"inbound_nodes", {call({kt("a", 0)}), call({kt("b", 0)})}}};
  Json cat = {{"class_name", "Concatenate"},
              {"name", "cat"},
              {"config", {{"name", "cat"}}},
              {"inbound_nodes", {call({Json{kt("enc", first), kt("enc", first + 1)}})}}};
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "outer"},
            {"layers", {input("a"), input("b"), enc, cat}},
            {"input_layers", {{"a", 0, 0}, {"b", 0, 0}}},
            {"output_layers", {{"cat", 0, 0}}}}}};
}

TEST(SharedLayerGraph, Keras3NestedModelCalledTwiceSharesItsLayers) {
  for (int first : {1, 0}) {  // Keras's numbering (node 0 is the nested model's own build), or 0
    const KerasGraph g = build_keras_graph(two_call_config(first), "two_calls.keras");
    const Model& m = *g.model;
    ASSERT_EQ(m.num_layers(), 3u) << first;
    EXPECT_EQ(m.shares(0), -1);
    EXPECT_EQ(m.shares(1), 0);
    EXPECT_EQ(m.layer(1).name(), "d");
    EXPECT_EQ(m.layer_inputs(1), std::vector<int>{1});
    EXPECT_EQ(m.layer_inputs(2), (std::vector<int>{2, 3}));
    EXPECT_EQ(m.trainable_params(), 3u * 3 + 3);
    ASSERT_EQ(g.entries.size(), 1u);
    EXPECT_EQ(g.entries[0].weights.size(), 2u);  // d's kernel and bias, once
  }
  try {
    Json bad = two_call_config(1);
    bad["config"]["layers"][3]["inbound_nodes"][0]["args"][0][1]["config"]["keras_history"][1] = 5;
    build_keras_graph(bad, "two_calls.keras");
    FAIL() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("uses node 5 of layer 'enc', which is called 2 times; "
                                         "expected a node index from"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nnfleet::test
