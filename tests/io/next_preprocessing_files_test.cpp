// Real third-party Keras files with numeric preprocessing layers (Normalization), from the shared
// folder's next/ set described by its MANIFEST.md (never copied into the repository): each loads,
// predicts its expected/ outputs within 1e-4, and is written back as .keras and legacy .h5 and
// read again with bit-identical predictions and weights.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "io/keras/hdf5.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "model/network.h"

namespace nnfleet::test {
namespace {

std::string next_dir() { return real_models_dir() + "/next"; }

LoadedModel expect_parity(const std::string& file, const std::string& stem) {
  const Array x = load_npy(next_dir() + "/expected/" + stem + ".input.npy");
  const Shape sample = x.sample_shape();
  LoadedModel lm = load_keras_model(next_dir() + "/" + file, "", &sample);
  const Array want = load_npy(next_dir() + "/expected/" + stem + ".output.npy");
  const auto got = run_model(lm, x);
  EXPECT_EQ(got.size(), static_cast<size_t>(want.shape().size())) << file;
  const double err = max_abs_diff(got, static_cast<const float*>(want.data()),
                                  std::min(got.size(), static_cast<size_t>(want.shape().size())));
  EXPECT_LE(err, 1e-4) << file;
  std::printf("[ parity   ] %s max abs error %.3g\n", file.c_str(), err);
  return lm;
}

// Writes `lm` as .keras and .h5 into `dir` and reads both back with identical predictions and
// parameters.
void expect_round_trip(const LoadedModel& lm, const std::string& stem, const std::string& dir) {
  const Array x = load_npy(next_dir() + "/expected/" + stem + ".input.npy");
  const auto before = run_model(lm, x);
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data());
  save_keras(dir + "/m.keras", *lm.model, lm.params.data());
  for (const char* name : {"/m.h5", "/m.keras"}) {
    const Shape sample = x.sample_shape();
    const LoadedModel back = load_keras_model(dir + name, "", &sample);
    EXPECT_EQ(run_model(back, x), before) << stem << name;
    EXPECT_EQ(back.params, lm.params) << stem << name;
  }
}

// Keras 3.3.3: an adapted Normalization (mean, variance, count at vars/0..2, count an int64
// scalar; the vars groups have no name attribute) before three Dense layers whose config names
// (dense_5..) differ from their weight groups (dense, dense_1, dense_2).
TEST(RealFileNextPreprocessing, AutoMpgNormalizationKeras333MatchesReference) {
  const std::string stem = "autompg_normalization_dnn_k333";
  const LoadedModel lm = expect_parity(stem + ".keras", stem);
  const Model& m = *lm.model;
  ASSERT_EQ(std::string(m.layer(0).class_name()), "Normalization");
  const auto& specs = m.planned(0).params;
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].name, "mean");
  EXPECT_EQ(specs[0].shape, (Shape{9}));
  EXPECT_EQ(specs[2].name, "count");
  EXPECT_EQ(specs[2].shape.rank(), 0);
  for (const auto& s : specs) EXPECT_FALSE(s.trainable) << s.name;
  const std::string dir = scratch_dir("next_preprocessing_" + stem);
  expect_round_trip(lm, stem, dir);
  // Keras's own dtypes: count is written back as an int64 scalar, as Keras reads it.
  const h5::File f = h5::File::open(dir + "/m.h5");
  const h5::Dataset count =
      f.root().group("model_weights/normalization/normalization").dataset("count:0");
  EXPECT_TRUE(count.dims().empty());
  EXPECT_EQ(count.read_int64(), 0);
}

// A sequential model over `in` of (class, config) layers, with weights 0.1, 0.2, ... (variances
// stay positive).
std::shared_ptr<const Model> chain(const Shape& in,
                                   const std::vector<std::pair<const char*, Json>>& layers) {
  std::vector<ModelNode> nodes;
  for (size_t i = 0; i < layers.size(); ++i)
    nodes.push_back(
        {make_layer(layers[i].first, layers[i].second, ConfigMode::kPlan, "l" + std::to_string(i)),
         {static_cast<int>(i)}});
  return std::make_shared<const Model>("m", std::vector<ModelInput>{{"x", in}}, std::move(nodes),
                                       std::vector<int>{static_cast<int>(layers.size())});
}

// Every option of the three kinds survives .keras and .h5: configs, weights (count as int64) and
// predictions bit for bit.
TEST(KerasPreprocessingRoundTrip, NormalizationDiscretizationCategoryEncodingReadBackIdentically) {
  const std::vector<std::shared_ptr<const Model>> models = {
      chain(Shape{4}, {{"Normalization", Json::object()},
                       {"Discretization",
                        {{"bin_boundaries", Json{-0.5, 0.0, 0.7}},
                         {"output_mode", "one_hot"},
                         {"num_bins", 4}}},
                       {"Flatten", Json::object()},
                       {"Dense", {{"units", 2}}}}),
      chain(Shape{2, 3},
            {{"Normalization",
              {{"axis", Json{1, 2}},
               {"invert", true},
               {"mean", Json{1.0, 2.0, 3.0}},
               {"variance", Json{4.0, 0.5, 1.0}}}},
             {"Normalization", {{"axis", Json::array()}}},
             {"Discretization",
              {{"bin_boundaries", Json{0.0, 1.5}}, {"output_mode", "int"}, {"epsilon", 0.05}}},
             {"Flatten", Json::object()},
             {"Dense", {{"units", 1}}}}),
      chain(Shape{3}, {{"CategoryEncoding", {{"num_tokens", 5}, {"output_mode", "count"}}},
                       {"Dense", {{"units", 2}}}}),
  };
  const std::string dir = scratch_dir("preprocessing_round_trip");
  int k = 0;
  for (const auto& m : models) {
    SCOPED_TRACE(k);
    std::vector<float> params(m->trainable_params() + m->non_trainable_params());
    for (size_t i = 0; i < params.size(); ++i) params[i] = 0.1f * static_cast<float>(i % 7 + 1);
    size_t fixed = m->trainable_params();  // non-trainable weights follow the trainable ones
    for (size_t i = 0; i < m->num_layers(); ++i)
      for (const ParamSpec& p : m->planned(i).params) {
        if (p.trainable) continue;
        if (p.name == "count") params[fixed] = 42.0f;  // a count is whole (Keras: int64)
        fixed += static_cast<size_t>(p.shape.size());
      }
    Array x = Array::zeros(DType::kF32, m->input_shape().with_batch(3));
    auto* xs = static_cast<float*>(x.mutable_data());
    for (int64_t i = 0; i < x.shape().size(); ++i)
      xs[i] = k == 2 ? static_cast<float>(i * 3 % 5) : 0.37f * static_cast<float>(i % 9) - 1.2f;
    const auto before = run_model(m, params.data(), x);
    const std::string stem = dir + "/m" + std::to_string(k++);
    save_keras(stem + ".keras", *m, params.data());
    save_keras_h5(stem + ".h5", *m, params.data());
    for (const std::string& f : {stem + ".keras", stem + ".h5"}) {
      const LoadedModel back = load_keras_model(f);
      EXPECT_EQ(back.params, params) << f;
      EXPECT_EQ(run_model(back, x), before) << f;
      for (size_t i = 0; i < m->num_layers(); ++i)
        EXPECT_EQ(written_config(back.model->layer(i)), written_config(m->layer(i))) << f << i;
    }
  }
}

}  // namespace
}  // namespace nnfleet::test
