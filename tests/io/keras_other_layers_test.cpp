// Keras files with LayerNormalization, UnitNormalization, PReLU, activation-layer objects, the
// element-wise and Dot merges, Softmax over other axes and the noise layers: configs as Keras 3
// and tf.keras 2 write them read in, and a model of all of them written both ways reads back
// with the same configs, weights (under Keras's weight names) and bit-identical predictions.
#include <gtest/gtest.h>

#include <set>

#include "io/keras/hdf5.h"
#include "io/keras/keras_reader.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

Json policy() {
  return Json::parse(R"({"module": "keras", "class_name": "DTypePolicy",
                         "config": {"name": "float32"}, "registered_name": null})");
}

// A Keras 3 layer entry of a Functional config, called on the named tensors (a list when
// `merge`) of per-sample shapes `shapes`.
Json k3_layer(const std::string& cls, const std::string& name, Json cfg,
              const std::vector<std::pair<std::string, Shape>>& ins, bool merge = false) {
  cfg["name"] = name;
  cfg["dtype"] = policy();
  if (!cfg.contains("trainable") && cls.rfind("SpatialDropout", 0) != 0) cfg["trainable"] = true;
  Json tensors = Json::array();
  for (const auto& [in, s] : ins) {
    Json shape = Json::array({nullptr});
    for (int64_t d : s) shape.push_back(d);
    tensors.push_back(
        {{"class_name", "__keras_tensor__"},
         {"config", {{"shape", shape}, {"dtype", "float32"}, {"keras_history", {in, 0, 0}}}}});
  }
  return {{"module", "keras.layers"},
          {"class_name", cls},
          {"config", cfg},
          {"registered_name", nullptr},
          {"name", name},
          {"inbound_nodes",
           {{{"args", merge ? Json::array({tensors}) : tensors}, {"kwargs", Json::object()}}}}};
}

// The configs below are what Keras 3.10's get_config() writes for each class (keys and
// defaults), after build (LayerNormalization's axis then is a sorted list of positive axes).
Json keras3_functional() {
  const Shape t{3, 4};
  Json layers = Json::array();
  layers.push_back(Json::parse(R"({"module": "keras.layers", "class_name": "InputLayer",
      "config": {"batch_shape": [null, 3, 4], "dtype": "float32", "sparse": false,
                 "ragged": false, "name": "input_layer"},
      "registered_name": null, "name": "input_layer", "inbound_nodes": []})"));
  layers.push_back(k3_layer("LayerNormalization", "layer_normalization", Json::parse(R"({
      "axis": [2], "epsilon": 0.001, "center": true, "scale": true, "rms_scaling": false,
      "beta_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
                           "registered_name": null},
      "gamma_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {},
                            "registered_name": null},
      "beta_regularizer": null, "gamma_regularizer": null, "beta_constraint": null,
      "gamma_constraint": null})"),
                            {{"input_layer", t}}));
  Json leaky = Json::parse(R"({"module": "keras.layers", "class_name": "LeakyReLU",
      "config": {"name": "leaky_re_lu", "trainable": true, "negative_slope": 0.1},
      "registered_name": null, "build_config": {"input_shape": [null, 3, 4]}})");
  leaky["config"]["dtype"] = policy();
  layers.push_back(k3_layer("Dense", "dense",
                            {{"units", 4},
                             {"activation", leaky},
                             {"use_bias", true},
                             {"kernel_initializer", "glorot_uniform"},
                             {"bias_initializer", "zeros"},
                             {"kernel_regularizer", nullptr},
                             {"bias_regularizer", nullptr},
                             {"kernel_constraint", nullptr},
                             {"bias_constraint", nullptr}},
                            {{"layer_normalization", t}}));
  layers.push_back(k3_layer("PReLU", "p_re_lu", Json::parse(R"({
      "alpha_initializer": {"module": "keras.initializers", "class_name": "Constant",
                            "config": {"value": 0.25}, "registered_name": null},
      "alpha_regularizer": null, "alpha_constraint": null, "shared_axes": [1]})"),
                            {{"dense", t}}));
  layers.push_back(
      k3_layer("UnitNormalization", "unit_normalization", {{"axis", -1}}, {{"input_layer", t}}));
  Json relu = Json::parse(R"({"module": "keras.layers", "class_name": "ReLU",
      "config": {"name": "re_lu", "trainable": true, "max_value": 0.5, "negative_slope": 0.05,
                 "threshold": 0.0}, "registered_name": null})");
  layers.push_back(k3_layer("Dense", "dense_1", {{"units", 4}, {"activation", relu}},
                            {{"unit_normalization", t}}));
  const std::vector<std::pair<std::string, Shape>> two = {{"p_re_lu", t}, {"dense_1", t}};
  layers.push_back(k3_layer("Multiply", "multiply", Json::object(), two, true));
  layers.push_back(k3_layer("Subtract", "subtract", Json::object(), two, true));
  layers.push_back(k3_layer("Average", "average", Json::object(),
                            {{"multiply", t}, {"subtract", t}, {"p_re_lu", t}}, true));
  layers.push_back(
      k3_layer("Maximum", "maximum", Json::object(), {{"average", t}, {"dense_1", t}}, true));
  layers.push_back(
      k3_layer("Minimum", "minimum", Json::object(), {{"maximum", t}, {"subtract", t}}, true));
  layers.push_back(k3_layer("Dot", "dot", {{"axes", Json{2, 2}}, {"normalize", false}},
                            {{"minimum", t}, {"average", t}}, true));
  layers.push_back(k3_layer("Softmax", "softmax", {{"axis", 1}}, {{"dot", Shape{3, 3}}}));
  layers.push_back(k3_layer("GaussianNoise", "gaussian_noise", {{"stddev", 0.1}, {"seed", nullptr}},
                            {{"softmax", Shape{3, 3}}}));
  layers.push_back(k3_layer("SpatialDropout1D", "spatial_dropout1d",
                            {{"rate", 0.2}, {"seed", nullptr}}, {{"gaussian_noise", Shape{3, 3}}}));
  layers.push_back(k3_layer("GaussianDropout", "gaussian_dropout",
                            {{"rate", 0.2}, {"seed", nullptr}},
                            {{"spatial_dropout1d", Shape{3, 3}}}));
  layers.push_back(k3_layer("AlphaDropout", "alpha_dropout",
                            {{"rate", 0.1}, {"seed", nullptr}, {"noise_shape", nullptr}},
                            {{"gaussian_dropout", Shape{3, 3}}}));
  layers.push_back(k3_layer("Dot", "dot_1", {{"axes", -1}, {"normalize", true}},
                            {{"alpha_dropout", Shape{3, 3}}, {"softmax", Shape{3, 3}}}, true));
  return {{"module", "keras.src.models.functional"},
          {"class_name", "Functional"},
          {"config",
           {{"name", "other_layers"},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", {{"input_layer", 0, 0}}},
            {"output_layers", {{"dot_1", 0, 0}}}}},
          {"registered_name", "Functional"}};
}

LoadedModel load_config(const Json& cfg, const std::string& dir) {
  test::write_text(dir + "/arch.json", cfg.dump());
  return load_keras_model(dir + "/arch.json");
}

Array sample_input() {
  Array x = Array::zeros(DType::kF32, Shape{2, 3, 4});
  float* p = static_cast<float*>(x.mutable_data());
  for (int i = 0; i < 24; ++i) p[i] = std::sin(1.3f * static_cast<float>(i)) * 2.0f;
  return x;
}

TEST(KerasOtherLayers, ReadsKeras3ConfigsOfEveryNewClass) {
  const LoadedModel lm = load_config(keras3_functional(), test::scratch_dir("other_k3_read"));
  const Model& m = *lm.model;
  ASSERT_EQ(m.num_layers(), 17u);
  EXPECT_EQ(m.output_shape(), (Shape{3, 3}));
  // gamma and beta span the normalized axis; PReLU shares its alpha along the steps.
  EXPECT_EQ(m.planned(0).params[0].shape, (Shape{4}));
  EXPECT_EQ(m.planned(2).params[0].shape, (Shape{1, 4}));
  // The activation objects keep their options.
  EXPECT_EQ(m.layer(1).keras_config()["activation"]["class_name"], "LeakyReLU");
  EXPECT_FLOAT_EQ(m.layer(1).keras_config()["activation"]["config"]["negative_slope"].get<float>(),
                  0.1f);
  EXPECT_EQ(m.layer(4).keras_config()["activation"]["config"]["max_value"], 0.5f);
  EXPECT_EQ(m.layer(10).keras_config()["axes"], Json({2, 2}));
  EXPECT_FALSE(m.layer(13).keras_config().contains("trainable"));  // as Keras 3's SpatialDropout
}

// The same model with random weights, written as .keras and legacy .h5.
TEST(KerasOtherLayers, EveryNewClassRoundTripsBothWaysWithKerasWeightNames) {
  const std::string dir = test::scratch_dir("other_roundtrip");
  const LoadedModel lm = load_config(keras3_functional(), dir);
  const Model& m = *lm.model;
  std::vector<float> params(lm.params.size());
  for (size_t i = 0; i < params.size(); ++i) params[i] = std::cos(static_cast<float>(i) * 0.9f);
  const Array x = sample_input();
  const std::vector<float> want = test::run_model(lm.model, params.data(), x);
  save_keras(dir + "/m.keras", m, params.data());
  save_keras_h5(dir + "/m.h5", m, params.data());
  for (const char* f : {"/m.keras", "/m.h5"}) {
    SCOPED_TRACE(f);
    const LoadedModel back = load_keras_model(dir + f);
    ASSERT_EQ(back.model->num_layers(), m.num_layers());
    for (size_t i = 0; i < m.num_layers(); ++i)
      EXPECT_EQ(back.model->layer(i).keras_config(), m.layer(i).keras_config()) << i;
    EXPECT_EQ(back.params, params);
    EXPECT_EQ(test::run_model(back, x), want);
  }
  {
    auto lock = h5::hdf5_lock();
    h5::File f = h5::File::open(dir + "/m.h5");
    const h5::Group mw = f.root().group("model_weights");
    EXPECT_EQ(
        mw.group("layer_normalization").string_list_attr("weight_names"),
        (std::vector<std::string>{"layer_normalization/gamma:0", "layer_normalization/beta:0"}));
    EXPECT_EQ(mw.group("p_re_lu").string_list_attr("weight_names"),
              (std::vector<std::string>{"p_re_lu/alpha:0"}));
    const Json cfg = Json::parse(f.root().string_attr("model_config"));
    // tf.keras 2 names LeakyReLU's slope alpha.
    EXPECT_EQ(cfg["config"]["layers"][2]["config"]["activation"]["config"].count("alpha"), 1u);
  }
  ZipReader z(dir + "/m.keras");
  const std::string bytes = z.read("model.weights.h5", 1 << 26);
  auto lock = h5::hdf5_lock();
  h5::File f = h5::File::open_image("m.keras", bytes);
  EXPECT_EQ(f.root().group("layers/layer_normalization/vars").dataset("1").dims(),
            (std::vector<int64_t>{4}));
  EXPECT_EQ(f.root().group("layers/p_re_lu/vars").dataset("0").dims(),
            (std::vector<int64_t>{1, 4}));
}

// tf.keras 2 configs: LeakyReLU's alpha, an activation object in the old form, axis lists.
TEST(KerasOtherLayers, ReadsTfKeras2Configs) {
  const Json cfg = Json::parse(R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
    {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 5, 6], "dtype": "float32",
                                            "sparse": false, "ragged": false, "name": "in"}},
    {"class_name": "LayerNormalization", "config": {"name": "ln", "trainable": true,
      "dtype": "float32", "axis": [1, 2], "epsilon": 1e-06, "center": true, "scale": false,
      "beta_initializer": {"class_name": "Zeros", "config": {}},
      "gamma_initializer": {"class_name": "Ones", "config": {}}, "beta_regularizer": null,
      "gamma_regularizer": null, "beta_constraint": null, "gamma_constraint": null}},
    {"class_name": "Dense", "config": {"name": "d", "trainable": true, "dtype": "float32",
      "units": 3, "activation": {"class_name": "LeakyReLU", "config": {"name": "leaky_re_lu",
      "trainable": true, "dtype": "float32", "alpha": 0.25}}, "use_bias": true}},
    {"class_name": "LeakyReLU", "config": {"name": "lr", "trainable": true, "dtype": "float32",
                                           "alpha": 0.2}},
    {"class_name": "ELU", "config": {"name": "elu", "trainable": true, "dtype": "float32",
                                     "alpha": 0.5}},
    {"class_name": "PReLU", "config": {"name": "pr", "trainable": true, "dtype": "float32",
      "alpha_initializer": {"class_name": "Zeros", "config": {}}, "alpha_regularizer": null,
      "alpha_constraint": null, "shared_axes": null}},
    {"class_name": "SpatialDropout1D", "config": {"name": "sd", "trainable": true,
                                                  "dtype": "float32", "rate": 0.3,
                                                  "noise_shape": null, "seed": null}},
    {"class_name": "GaussianNoise", "config": {"name": "gn", "trainable": true,
                                               "dtype": "float32", "stddev": 0.5}},
    {"class_name": "UnitNormalization", "config": {"name": "un", "trainable": true,
                                                   "dtype": "float32", "axis": [1, 2]}}
  ]}, "keras_version": "2.9.0", "backend": "tensorflow"})");
  const LoadedModel lm = load_config(cfg, test::scratch_dir("other_tf2_read"));
  const Model& m = *lm.model;
  ASSERT_EQ(m.num_layers(), 8u);
  EXPECT_EQ(m.planned(0).params.size(), 1u);  // scale false: beta only
  EXPECT_EQ(m.planned(0).params[0].shape, (Shape{5, 6}));
  EXPECT_FLOAT_EQ(m.layer(1).keras_config()["activation"]["config"]["negative_slope"].get<float>(),
                  0.25f);
  EXPECT_FLOAT_EQ(m.layer(2).keras_config()["negative_slope"].get<float>(), 0.2f);
  EXPECT_EQ(m.planned(4).params[0].shape, (Shape{5, 3}));
}

// Options nnfleet does not run are refused by key, naming the layer.
TEST(KerasOtherLayers, RefusesUnsupportedOptionsByKey) {
  const std::string dir = test::scratch_dir("other_refuse");
  auto message = [&](const std::string& cls, const Json& layer_cfg) {
    Json j = {
        {"class_name", "Sequential"},
        {"config",
         {{"name", "s"},
          {"layers",
           Json::array({{{"class_name", "InputLayer"},
                         {"config", {{"batch_input_shape", {nullptr, 3, 4}}, {"name", "in"}}}},
                        {{"class_name", cls}, {"config", layer_cfg}}})}}}};
    return test::file_error_of([&] { load_config(j, dir); });
  };
  EXPECT_NE(message("LayerNormalization", {{"rms_scaling", true}}).find("rms_scaling"),
            std::string::npos);
  // A constraint is read (and applied in training); a class Keras lacks names its key.
  EXPECT_NE(message("LayerNormalization", {{"gamma_constraint", {{"class_name", "NonNegish"}}}})
                .find("gamma_constraint"),
            std::string::npos);
  // noise_shape and channels_first are taken since issue 35; a noise_shape that does not fit
  // the input, or is no shape, and an unknown data_format are refused by key.
  EXPECT_NE(message("AlphaDropout", {{"rate", 0.1}, {"noise_shape", {nullptr, 2, 4}}})
                .find("noise_shape"),
            std::string::npos);
  EXPECT_NE(message("Dropout", {{"rate", 0.1}, {"noise_shape", "x"}}).find("noise_shape"),
            std::string::npos);
  EXPECT_NE(message("SpatialDropout2D", {{"rate", 0.1}, {"data_format", "channels_middle"}})
                .find("data_format"),
            std::string::npos);
  const std::string prelu = message(
      "Dense",
      {{"units", 2}, {"activation", {{"class_name", "PReLU"}, {"config", Json::object()}}}});
  EXPECT_NE(prelu.find("PReLU layer after it"), std::string::npos) << prelu;
  EXPECT_NE(message("Dot", {{"axes", Json{1, 2, 3}}}).find("axes"), std::string::npos);
  EXPECT_NE(message("PReLU", {{"shared_axes", -1}}).find("shared_axes"), std::string::npos);
}

}  // namespace
}  // namespace nnfleet
