// Writing .keras and legacy .h5 files: what is written reads back to identical predictions, and
// its structure (groups, datasets, shapes, attributes, config keys) is the one Keras writes,
// checked against real files (fmnist_cnn_k310.keras, mnist_cnn_raw_k224.h5,
// asl_cnn_functional_tf290.h5).
#include "io/keras/keras_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "io/keras/hdf5.h"
#include "io/keras/keras_reader.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "platform/files.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using test::fixture;

// One line per object below `g`: "G path @attr ..." or "D path [dims] class/size", plus the
// values of the string attributes Keras uses to name things.
void list_tree(const h5::Group& g, const std::string& prefix, std::set<std::string>& out,
               const std::set<std::string>& skip = {}) {
  std::string line = "G " + (prefix.empty() ? std::string("/") : prefix);
  for (const auto& a : g.attr_names()) {
    line += " @" + a;
    if (a == "name" || a.rfind("layer_names", 0) == 0 || a.rfind("weight_names", 0) == 0) {
      line += "=";
      for (const auto& v : g.string_list_attr(a)) line += v + ";";
    }
  }
  out.insert(line);
  for (const auto& c : g.children()) {
    const std::string p = prefix.empty() ? c : prefix + "/" + c;
    if (skip.count(p)) continue;
    if (g.has_group(c)) {
      list_tree(g.group(c), p, out, skip);
    } else {
      const h5::Dataset d = g.dataset(c);
      std::string dims = "[";
      for (int64_t v : d.dims()) dims += std::to_string(v) + ",";
      out.insert("D " + p + " " + dims + "] class " + std::to_string(d.type_class()) + " size " +
                 std::to_string(d.type_size()));
    }
  }
}

std::set<std::string> keras_weights_tree(const std::string& keras_path) {
  ZipReader z(keras_path);
  const std::string bytes = z.read("model.weights.h5", uint64_t{1} << 32);
  auto lock = h5::hdf5_lock();
  h5::File f = h5::File::open_image(keras_path, bytes);
  std::set<std::string> out;
  list_tree(f.root(), "", out);
  return out;
}

std::set<std::string> h5_tree(const std::string& path, const std::set<std::string>& skip) {
  auto lock = h5::hdf5_lock();
  h5::File f = h5::File::open(path);
  std::set<std::string> out;
  list_tree(f.root(), "", out, skip);
  return out;
}

// "path.key" for every key of every object in `j` (array elements by index).
void key_paths(const Json& j, const std::string& at, std::set<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "shared_object_id") continue;
      out.insert(at + "." + it.key());
      key_paths(it.value(), at + "." + it.key(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) key_paths(j[i], at + "[" + std::to_string(i) + "]", out);
  }
}

std::string diff(const std::set<std::string>& want, const std::set<std::string>& got) {
  std::string s;
  for (const auto& w : want)
    if (!got.count(w)) s += "  missing: " + w + "\n";
  for (const auto& g : got)
    if (!want.count(g)) s += "  extra:   " + g + "\n";
  return s;
}

Json zip_json(const std::string& path, const std::string& member) {
  return Json::parse(ZipReader(path).read(member, 1 << 26));
}

// Save info of a file's own compile config and optimizer state.
KerasSaveInfo info_of(const LoadedModel& lm) {
  KerasSaveInfo info;
  info.keras_class = lm.class_name;
  if (lm.training_config.is_object() && lm.training_config.contains("loss")) {
    info.loss = parse_loss(lm.training_config["loss"]);
    info.optimizer = lm.optimizer;
    info.metrics = {"accuracy"};
    if (!lm.optimizer_state.empty()) {
      info.optimizer_state = lm.optimizer_state.data();
      info.iterations = lm.iterations;
    }
  }
  return info;
}

TEST(RealFileExport, KerasWeightsFileHasTheGroupsDatasetsAndShapesKeras310Writes) {
  const LoadedModel lm = load_keras_model(fixture("fmnist_cnn_k310.keras"));
  ASSERT_FALSE(lm.optimizer_state.empty());
  const std::string out = test::scratch_dir("structure_k310") + "/m.keras";
  save_keras(out, *lm.model, lm.params.data(), info_of(lm));
  const auto want = keras_weights_tree(fixture("fmnist_cnn_k310.keras"));
  const auto got = keras_weights_tree(out);
  EXPECT_EQ(want, got) << diff(want, got);
}

TEST(RealFileExport, KerasConfigHasTheKeysKeras310Writes) {
  const LoadedModel lm = load_keras_model(fixture("fmnist_cnn_k310.keras"));
  const std::string out = test::scratch_dir("config_k310") + "/m.keras";
  save_keras(out, *lm.model, lm.params.data(), info_of(lm));
  std::set<std::string> want, got;
  Json real = zip_json(fixture("fmnist_cnn_k310.keras"), "config.json");
  Json mine = zip_json(out, "config.json");
  // The real file names its loss as a plain string; ours is the serialized loss object.
  real["compile_config"].erase("loss");
  mine["compile_config"].erase("loss");
  key_paths(real, "", want);
  key_paths(mine, "", got);
  EXPECT_EQ(want, got) << diff(want, got);
  EXPECT_EQ(mine["module"], real["module"]);
  EXPECT_EQ(mine["registered_name"], real["registered_name"]);
  EXPECT_EQ(mine["build_config"], real["build_config"]);
  for (size_t i = 0; i < real["config"]["layers"].size(); ++i) {
    EXPECT_EQ(mine["config"]["layers"][i]["class_name"], real["config"]["layers"][i]["class_name"]);
    EXPECT_EQ(mine["config"]["layers"][i].value("build_config", Json()),
              real["config"]["layers"][i].value("build_config", Json()))
        << i;
  }
  std::set<std::string> mw, mg;
  key_paths(zip_json(fixture("fmnist_cnn_k310.keras"), "metadata.json"), "", mw);
  key_paths(zip_json(out, "metadata.json"), "", mg);
  EXPECT_EQ(mw, mg);
  EXPECT_EQ(zip_json(out, "metadata.json")["keras_version"], "3.10.0");
}

// config.json is written as text around each layer's own config (keras_writer.cpp): its keys
// come in the order Keras 3.10 writes them, at the top, in the model's config, in each layer's
// entry, and for the first keys of each layer's config (name, trainable, dtype).
TEST(RealFileExport, KerasConfigKeysComeInTheOrderKeras310Writes) {
  using OJson = nlohmann::ordered_json;
  const LoadedModel lm = load_keras_model(fixture("fmnist_cnn_k310.keras"));
  const std::string out = test::scratch_dir("config_order_k310") + "/m.keras";
  save_keras(out, *lm.model, lm.params.data(), info_of(lm));
  auto ordered_json = [](const std::string& path) {
    return OJson::parse(ZipReader(path).read("config.json", 1 << 26));
  };
  auto keys = [](const OJson& o, size_t n = SIZE_MAX) {
    std::vector<std::string> k;
    for (auto it = o.begin(); it != o.end() && k.size() < n; ++it) k.push_back(it.key());
    return k;
  };
  const OJson real = ordered_json(fixture("fmnist_cnn_k310.keras"));
  const OJson mine = ordered_json(out);
  EXPECT_EQ(keys(mine), keys(real));
  EXPECT_EQ(keys(mine["config"]), keys(real["config"]));
  ASSERT_EQ(mine["config"]["layers"].size(), real["config"]["layers"].size());
  for (size_t i = 0; i < real["config"]["layers"].size(); ++i) {
    const OJson& r = real["config"]["layers"][i];
    const OJson& m = mine["config"]["layers"][i];
    EXPECT_EQ(keys(m), keys(r)) << i;
    EXPECT_EQ(keys(m["config"], 3), keys(r["config"], 3)) << i;
    OJson dtype = r["config"]["dtype"];
    if (dtype.is_object()) dtype.erase("shared_object_id");  // the layers share one policy
    EXPECT_EQ(m["config"]["dtype"], dtype) << i;
  }
}

TEST(RealFileExport, LegacyH5HasTheLayoutOfTfKerasForSequential) {
  const LoadedModel lm = load_keras_model(fixture("mnist_cnn_raw_k224.h5"));
  const std::string out = test::scratch_dir("structure_h5_seq") + "/m.h5";
  KerasSaveInfo info;
  info.loss = parse_loss(lm.training_config["loss"]);
  info.optimizer = parse_optimizer(Json("adam"));
  save_keras_h5(out, *lm.model, lm.params.data(), info);
  // The optimizer weights of tf.keras 2.2 are not written by nnfleet; top_level_model_weights
  // came with tf.keras 2.5.
  const auto want = h5_tree(fixture("mnist_cnn_raw_k224.h5"), {"optimizer_weights"});
  const auto got = h5_tree(out, {"model_weights/top_level_model_weights"});
  EXPECT_EQ(want, got) << diff(want, got);
}

TEST(RealFileExport, LegacyH5HasTheLayoutOfTfKerasForFunctional) {
  const LoadedModel lm = load_keras_model(fixture("asl_cnn_functional_tf290.h5"));
  const std::string out = test::scratch_dir("structure_h5_fn") + "/m.h5";
  KerasSaveInfo info;
  info.keras_class = lm.class_name;
  info.loss = parse_loss(lm.training_config["loss"]);
  info.optimizer = parse_optimizer(Json("adam"));
  info.metrics = {"accuracy"};
  save_keras_h5(out, *lm.model, lm.params.data(), info);
  const auto want = h5_tree(fixture("asl_cnn_functional_tf290.h5"), {"optimizer_weights"});
  const auto got = h5_tree(out, {});
  EXPECT_EQ(want, got) << diff(want, got);
  // model_config: the same layer entries (class_name, config, name, inbound_nodes).
  auto config_of = [](const std::string& path) {
    auto lock = h5::hdf5_lock();
    h5::File f = h5::File::open(path);
    return Json::parse(f.root().string_attr("model_config"));
  };
  const Json real = config_of(fixture("asl_cnn_functional_tf290.h5"));
  const Json mine = config_of(out);
  EXPECT_EQ(mine["class_name"], real["class_name"]);
  EXPECT_EQ(mine["config"]["input_layers"], real["config"]["input_layers"]);
  EXPECT_EQ(mine["config"]["output_layers"], real["config"]["output_layers"]);
  ASSERT_EQ(mine["config"]["layers"].size(), real["config"]["layers"].size());
  for (size_t i = 0; i < real["config"]["layers"].size(); ++i) {
    const Json& r = real["config"]["layers"][i];
    const Json& m = mine["config"]["layers"][i];
    std::set<std::string> rk, mk;
    for (auto it = r.begin(); it != r.end(); ++it) rk.insert(it.key());
    for (auto it = m.begin(); it != m.end(); ++it) mk.insert(it.key());
    EXPECT_EQ(rk, mk) << i;
    EXPECT_EQ(m["inbound_nodes"], r["inbound_nodes"]) << i;
    EXPECT_EQ(m["name"], r["name"]) << i;
  }
}

// Every loadable file, written back both ways, gives bit-identical predictions.
class KerasRoundTrip : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(KerasRoundTrip, WrittenFilesPredictIdentically) {
  const auto [model, stem] = GetParam();
  const LoadedModel lm = load_keras_model(fixture(model));
  const Array x = load_npy(fixture(std::string(stem) + ".input.npy"));
  const std::vector<float> want = test::run_model(lm, x);
  const std::string dir = test::scratch_dir(std::string("roundtrip_") + stem[0] +
                                            std::to_string(std::hash<std::string>()(model)));
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data(), info_of(lm));
  // Each range is poisoned as soon as save_keras reports it copied (the fleet frees it then): a
  // number read again after that would show in the file.
  std::vector<float> params = lm.params;
  save_keras(dir + "/m.keras", *lm.model, params.data(), info_of(lm), Durability::kProcessCrash,
             [](const float* first, size_t n) {
               std::fill(const_cast<float*>(first), const_cast<float*>(first) + n, NAN);
             });
  for (const char* f : {"/m.keras", "/m.h5"}) {
    SCOPED_TRACE(f);
    const LoadedModel back = load_keras_model(dir + f);
    EXPECT_EQ(back.model->num_layers(), lm.model->num_layers());
    EXPECT_EQ(back.params, lm.params);
    EXPECT_EQ(test::run_model(back, x), want);
    EXPECT_EQ(back.class_name, lm.class_name);
  }
}

INSTANTIATE_TEST_SUITE_P(
    RealFiles, KerasRoundTrip,
    ::testing::Values(
        std::make_pair("fmnist_cnn_bn_k216.h5", "expected/fmnist_cnn_bn_k216"),
        std::make_pair("mnist_mlp_functional_tf224.h5", "expected/mnist_mlp_functional_tf224"),
        std::make_pair("asl_cnn_functional_tf290.h5", "expected/asl_cnn_functional_tf290"),
        std::make_pair("fmnist_mlp_k390.h5", "expected/fmnist_mlp_k390"),
        std::make_pair("fmnist_cnn_k310.keras", "expected/fmnist_cnn_k310"),
        std::make_pair("fmnist_mlp_nested_tf214.keras", "expected/fmnist_mlp_nested_tf214")));

INSTANTIATE_TEST_SUITE_P(
    Synthetic, KerasRoundTrip,
    ::testing::Values(std::make_pair("synthetic/functional_k3.keras", "synthetic/functional_k3"),
                      std::make_pair("synthetic/nested_legacy.h5", "synthetic/nested_legacy")));

// The synthetic Functional model after `steps` training steps on its three input rows (one-hot
// targets, categorical cross-entropy) with `optimizer`.
std::unique_ptr<Network> trained_functional_k3(const OptimizerSpec& optimizer, int steps) {
  const LoadedModel lm = load_keras_model(fixture("synthetic/functional_k3.keras"));
  TrainSpec spec;
  spec.loss = parse_loss(Json("categorical_crossentropy"));
  spec.optimizer = optimizer;
  auto net = std::make_unique<Network>(lm.model, 3, spec);
  std::copy(lm.params.begin(), lm.params.end(), net->params());
  const Array x = load_npy(fixture("synthetic/functional_k3.input.npy"));
  std::vector<float> t = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const int64_t idx[3] = {0, 1, 2};
  for (int step = 0; step < steps; ++step) {
    gather_rows(x, idx, 3, 1.0f, net->input());
    net->train_step(3, Targets{t.data(), nullptr});
  }
  return net;
}

// Keras 3 keeps no learning-rate variable when the rate is a schedule: vars are the iteration
// count and then the slots.
TEST(KerasExport, ScheduledOptimizerRoundTripsWithItsStateAndSchedule) {
  TrainSpec spec;
  spec.optimizer = parse_optimizer(Json::parse(R"({"Adam": {"learning_rate": {"CosineDecay":
      {"initial_learning_rate": 0.01, "decay_steps": 5}}}})"));
  const auto trained = trained_functional_k3(spec.optimizer, 2);
  const Network& net = *trained;
  const std::string dir = test::scratch_dir("scheduled");
  save_keras(dir + "/s.keras", net.model(), net.params(), keras_save_info(net, {}));
  const LoadedModel back = load_keras_model(dir + "/s.keras");
  EXPECT_EQ(back.optimizer_state_info["variables"], 1 + 2 * 8);  // no learning-rate variable
  ASSERT_TRUE(back.optimizer.schedule.has_value());
  EXPECT_DOUBLE_EQ(learning_rate_at(back.optimizer, 2), learning_rate_at(spec.optimizer, 2));
  EXPECT_EQ(back.optimizer_state,
            std::vector<float>(net.optimizer_state(),
                               net.optimizer_state() + net.optimizer_state_floats()));
}

// Every sequence kind, written both ways, reads back with the same configs, weights and
// bit-identical predictions; a wrapper's weights sit with its wrapped layer as Keras 3 puts them.
TEST(KerasExport, SequenceLayersRoundTripBothWays) {
  std::vector<std::unique_ptr<Layer>> ls;
  auto add = [&](const char* cls, Json cfg, const char* name) {
    ls.push_back(make_layer(cls, cfg, ConfigMode::kPlan, name));
  };
  add("Embedding", {{"input_dim", 11}, {"output_dim", 4}}, "embedding");
  add("Conv1D", {{"filters", 3}, {"kernel_size", 3}, {"padding", "causal"}, {"dilation_rate", 2}},
      "conv1d");
  add("TimeDistributed", {{"layer", {{"class_name", "Dense"}, {"config", {{"units", 5}}}}}},
      "time_distributed");
  add("ZeroPadding1D", {{"padding", Json{1, 2}}}, "zero_padding1d");
  add("Cropping1D", {{"cropping", Json{2, 0}}}, "cropping1d");
  add("UpSampling1D", {{"size", 2}}, "up_sampling1d");
  add("MaxPooling1D", {{"pool_size", 3}, {"padding", "same"}}, "max_pooling1d");
  add("Permute", {{"dims", Json{2, 1}}}, "permute");
  add("AveragePooling1D", {{"pool_size", 2}}, "average_pooling1d");
  add("GlobalMaxPooling1D", Json::object(), "global_max_pooling1d");
  add("RepeatVector", {{"n", 2}}, "repeat_vector");
  add("GlobalAveragePooling1D", Json::object(), "global_average_pooling1d");
  add("Dense", {{"units", 2}, {"activation", "softmax"}}, "dense");
  const auto m = Model::sequential("seq", Shape{7}, std::move(ls));
  size_t total = 0;
  param_offsets(*m, &total);
  std::vector<float> params(total);
  for (size_t i = 0; i < total; ++i) params[i] = std::sin(static_cast<float>(i) * 0.7f);
  Array x = Array::zeros(DType::kI32, Shape{3, 7});
  for (int i = 0; i < 21; ++i) static_cast<int32_t*>(x.mutable_data())[i] = (i * 5) % 11;
  const std::vector<float> want = test::run_model(m, params.data(), x);
  const std::string dir = test::scratch_dir("sequence_roundtrip");
  save_keras(dir + "/m.keras", *m, params.data());
  save_keras_h5(dir + "/m.h5", *m, params.data());
  bool wrapped = false;
  for (const auto& e : keras_weights_tree(dir + "/m.keras"))
    wrapped = wrapped || e.rfind("D layers/time_distributed/layer/vars/0 [3,5,]", 0) == 0;
  EXPECT_TRUE(wrapped) << "expected the Dense kernel at layers/time_distributed/layer/vars/0";
  for (const char* f : {"/m.keras", "/m.h5"}) {
    SCOPED_TRACE(f);
    const LoadedModel back = load_keras_model(dir + f);
    ASSERT_EQ(back.model->num_layers(), m->num_layers());
    for (size_t i = 0; i < m->num_layers(); ++i)
      EXPECT_EQ(back.model->layer_keras_config(i), m->layer_keras_config(i)) << i;
    EXPECT_EQ(back.params, params);
    EXPECT_EQ(test::run_model(back, x), want);
  }
}

TEST(KerasExport, TrainedNetworkRoundTripsWithOptimizerState) {
  const auto trained = trained_functional_k3(
      parse_optimizer(Json{{"Adam", {{"learning_rate", 0.01}, {"amsgrad", true}}}}), 3);
  const Network& net = *trained;
  const std::string dir = test::scratch_dir("trained");
  save_keras(dir + "/t.keras", net.model(), net.params(), keras_save_info(net, {"accuracy"}));
  const LoadedModel back = load_keras_model(dir + "/t.keras");
  EXPECT_EQ(back.params, std::vector<float>(net.params(), net.params() + net.num_params()));
  EXPECT_EQ(back.iterations, 3);
  EXPECT_TRUE(back.optimizer.amsgrad);
  ASSERT_EQ(back.optimizer_state.size(), net.optimizer_state_floats());
  EXPECT_EQ(back.optimizer_state,
            std::vector<float>(net.optimizer_state(),
                               net.optimizer_state() + net.optimizer_state_floats()));
  EXPECT_EQ(back.training_config["metrics"], Json({"accuracy"}));
  EXPECT_EQ(back.optimizer_state_info["variables"], 2 + 3 * 8);  // 8 trainable variables
  save_keras_h5(dir + "/t.h5", net.model(), net.params(), keras_save_info(net));
  const LoadedModel h5 = load_keras_model(dir + "/t.h5");
  EXPECT_EQ(h5.params, back.params);
  EXPECT_EQ(h5.training_config["loss"], "categorical_crossentropy");
  EXPECT_EQ(h5.training_config["optimizer_config"]["class_name"], "Adam");
}

// save_keras reports every number of the parameters and the optimizer state copied exactly once,
// each range as soon as the file holds it (the fleet frees it then): poisoning each range as it
// is reported changes nothing in the file.
TEST(KerasExport, EveryNumberIsReportedCopiedOnceAndNotReadAgain) {
  const auto trained = trained_functional_k3(parse_optimizer(Json{{"Adam", {}}}), 2);
  Network& net = *trained;
  const std::vector<float> params(net.params(), net.params() + net.num_params());
  const std::vector<float> state(net.optimizer_state(),
                                 net.optimizer_state() + net.optimizer_state_floats());
  std::vector<int> params_seen(params.size(), 0), state_seen(state.size(), 0);
  const std::string dir = test::scratch_dir("numbers_copied");
  save_keras(dir + "/n.keras", net.model(), net.params(), keras_save_info(net, {}),
             Durability::kProcessCrash, [&](const float* first, size_t n) {
               const bool in_params = first >= net.params() && first < net.params() + params.size();
               std::vector<int>& seen = in_params ? params_seen : state_seen;
               const float* base = in_params ? net.params() : net.optimizer_state();
               ASSERT_LE(static_cast<size_t>(first - base) + n, seen.size());
               for (size_t k = 0; k < n; ++k) ++seen[static_cast<size_t>(first - base) + k];
               std::fill(const_cast<float*>(first), const_cast<float*>(first) + n, -1.0f);
             });
  EXPECT_EQ(params_seen, std::vector<int>(params.size(), 1));
  EXPECT_EQ(state_seen, std::vector<int>(state.size(), 1));
  const LoadedModel back = load_keras_model(dir + "/n.keras");
  EXPECT_EQ(back.params, params);
  EXPECT_EQ(back.optimizer_state, state);
}

TEST(KerasExport, SplitsLongLayerNameListsLikeKeras) {
  // 400 layers with 200-character names: layer_names exceeds HDF5's 64 KB header limit.
  std::vector<std::unique_ptr<Layer>> layers;
  for (int i = 0; i < 400; ++i) {
    std::string name = "relu_" + std::to_string(i) + "_" + std::string(190, 'x');
    layers.push_back(make_layer("ReLU", Json::object(), ConfigMode::kPlan, name));
  }
  layers.push_back(make_layer("Dense", Json{{"units", 2}}, ConfigMode::kPlan, "out"));
  auto m = Model::sequential("long", Shape{3}, std::move(layers));
  std::vector<float> params(m->trainable_params(), 0.5f);
  const std::string path = test::scratch_dir("split") + "/long.h5";
  save_keras_h5(path, *m, params.data());
  {
    auto lock = h5::hdf5_lock();
    h5::File f = h5::File::open(path);
    const h5::Group mw = f.root().group("model_weights");
    EXPECT_FALSE(mw.has_attr("layer_names"));
    EXPECT_TRUE(mw.has_attr("layer_names0"));
    EXPECT_TRUE(mw.has_attr("layer_names1"));
    EXPECT_EQ(mw.string_list_attr("layer_names").size(), 401u);
  }
  const LoadedModel back = load_keras_model(path);
  EXPECT_EQ(back.model->num_layers(), 401u);
  EXPECT_EQ(back.params, params);
}

TEST(RealFileExport, WritesAtomicallyAndReportsUnwritablePaths) {
  const LoadedModel lm = load_keras_model(fixture("fmnist_mlp_k390.h5"));
  const std::string msg = test::file_error_of(
      [&] { save_keras("/nonexistent-dir/x.keras", *lm.model, lm.params.data()); });
  EXPECT_NE(msg.find("/nonexistent-dir/x.keras"), std::string::npos) << msg;
}

// `zip` with the modification time and date of every local and central header zeroed: libzip
// stamps a member made from memory with the time its source was made.
std::string without_zip_times(std::string zip) {
  auto u16 = [&](size_t at) {
    return static_cast<size_t>(static_cast<uint8_t>(zip[at])) |
           static_cast<size_t>(static_cast<uint8_t>(zip[at + 1])) << 8;
  };
  auto u32 = [&](size_t at) { return u16(at) | u16(at + 2) << 16; };
  size_t at = 0;
  while (at + 30 <= zip.size() && u32(at) == 0x04034b50) {  // local headers, then their data
    std::fill_n(zip.begin() + static_cast<std::ptrdiff_t>(at + 10), 4, '\0');
    at += 30 + u16(at + 26) + u16(at + 28) + u32(at + 18);
  }
  while (at + 46 <= zip.size() && u32(at) == 0x02014b50) {  // the central directory
    std::fill_n(zip.begin() + static_cast<std::ptrdiff_t>(at + 12), 4, '\0');
    at += 46 + u16(at + 28) + u16(at + 30) + u16(at + 32);
  }
  EXPECT_GE(at + 22, zip.size() - 22) << "expected the end of the central directory at " << at;
  return zip;
}

// A model whose weights file reaches kStreamedKerasBytes is written by libzip straight to its
// file, its HDF5 image made without a template: the archive is the one zip_image makes of the same
// members (but for the times), the returned hash is the file's, and it reads back with its numbers
// even though each was poisoned as soon as it was reported copied.
TEST(KerasExport, LargeModelStreamedToItsFileHoldsTheSameBytes) {
  std::vector<std::unique_ptr<Layer>> ls;
  ls.push_back(
      make_layer("Dense", {{"units", 384}, {"activation", "relu"}}, ConfigMode::kPlan, "dense"));
  ls.push_back(make_layer("Dense", {{"units", 10}}, ConfigMode::kPlan, "dense_1"));
  const auto m = Model::sequential("big", Shape{784}, std::move(ls));
  size_t total = 0;
  param_offsets(*m, &total);
  // 1,113,010 numbers (4.45 MB): streamed, and made by libhdf5 straight (over the 4 MiB a kept
  // template may take), each dataset's numbers given back as libhdf5's image takes them.
  ASSERT_GE(total * sizeof(float), kStreamedKerasBytes);
  std::vector<float> params(total);
  for (size_t i = 0; i < total; ++i) params[i] = std::sin(static_cast<float>(i) * 0.3f);
  std::vector<float> poisoned = params;
  const std::string path = test::scratch_dir("streamed_keras") + "/big.keras";
  const uint64_t h = save_keras(
      path, *m, poisoned.data(), {}, Durability::kProcessCrash, [](const float* first, size_t n) {
        std::fill(const_cast<float*>(first), const_cast<float*>(first) + n, NAN);
      });
  const std::string bytes = read_file(path);
  EXPECT_EQ(h, hash_bytes(bytes));
  EXPECT_EQ(h, hash_file(path));
  ZipReader z(path);
  std::vector<ZipMember> members;
  for (const char* name : {"metadata.json", "config.json", "model.weights.h5"})
    members.push_back({name, z.read(name, uint64_t{1} << 32), "", false});
  ASSERT_GE(members[2].bytes.size(), kStreamedKerasBytes);
  EXPECT_TRUE(without_zip_times(bytes) == without_zip_times(zip_image(path, members)));
  const LoadedModel back = load_keras_model(path);
  EXPECT_EQ(back.params, params);
}

}  // namespace
}  // namespace nnfleet
