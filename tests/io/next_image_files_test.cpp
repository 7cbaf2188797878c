// Real Keras files with image preprocessing and augmentation layers (issue 35's next/ set,
// described by its MANIFEST.md, read in place): the potato-leaf CNNs with Resizing, Rescaling,
// RandomFlip and RandomRotation in nested Sequentials, in Keras 3.10 and tf.keras 2.9 form. Each
// loads, predicts its expected/ outputs within 1e-4, and is written back as .keras and .h5 and
// read again with bit-identical predictions and parameters.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "model/network.h"

namespace nnfleet::test {
namespace {

std::string next_dir() { return real_models_dir() + "/next"; }

LoadedModel expect_parity(const std::string& file, const std::string& stem) {
  const std::string dir = next_dir();
  const Array x = load_npy(dir + "/expected/" + stem + ".input.npy");
  const Shape sample = x.sample_shape();
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

void expect_round_trip(const LoadedModel& lm, const std::string& stem) {
  const Array x = load_npy(next_dir() + "/expected/" + stem + ".input.npy");
  const auto before = run_model(lm, x);
  const std::string dir = scratch_dir("next_image_" + stem);
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data());
  save_keras(dir + "/m.keras", *lm.model, lm.params.data());
  for (const std::string name : {"/m.h5", "/m.keras"}) {
    const Shape sample = x.sample_shape();
    const LoadedModel back = load_keras_model(dir + name, "", &sample);
    EXPECT_EQ(run_model(back, x), before) << stem << name;
    EXPECT_EQ(back.params, lm.params) << stem << name;
  }
}

// A fixed batch of 32 in every batch_shape (also the nested Sequentials'); the expected batch
// has 4 rows, as Keras 3 relaxes the batch axis. RandomFlip's mode "vertical and horizontal" is
// none of Keras's names: Keras 3.10 accepts it and never flips with it; so does nnfleet, and it
// writes the mode back as read.
TEST(RealFileImage, PotatoCnnRandomFlipKeras310MatchesReference) {
  const auto lm = expect_parity("potato_cnn_randomflip_k310.keras", "potato_cnn_randomflip_k310");
  expect_round_trip(lm, "potato_cnn_randomflip_k310");
  bool found = false;
  for (size_t i = 0; i < lm.model->num_layers(); ++i) {
    const Layer& l = lm.model->layer(i);
    if (std::string(l.class_name()) != "RandomFlip") continue;
    found = true;
    EXPECT_EQ(l.keras_config()["mode"], "vertical and horizontal");
  }
  EXPECT_TRUE(found);
}

// tf.keras 2.9's Resizing: no module, no data_format, no antialias.
TEST(RealFileImage, PotatoCnnResizingTf290MatchesReference) {
  const auto lm = expect_parity("potato_cnn_resizing_tf290.h5", "potato_cnn_resizing_tf290");
  expect_round_trip(lm, "potato_cnn_resizing_tf290");
}

// Every image kind with non-default options, written as .keras and .h5: the same configs (the
// seed and a Keras-only RandomFlip mode included), weights and bit-identical predictions.
TEST(ImageLayersRoundTrip, EveryKindReadsBackWithItsConfig) {
  std::vector<std::unique_ptr<Layer>> ls;
  auto add = [&](const char* cls, Json cfg, const std::string& name) {
    ls.push_back(make_layer(cls, cfg, ConfigMode::kKeras, name));
  };
  add("Resizing", {{"height", 9}, {"width", 7}, {"interpolation", "bicubic"}}, "resizing");
  add("RandomFlip", {{"mode", "vertical and horizontal"}, {"seed", 7}}, "random_flip");
  add("RandomRotation", {{"factor", Json{-0.1, 0.3}}, {"fill_mode", "wrap"}}, "random_rotation");
  add("RandomZoom",
      {{"height_factor", 0.2}, {"width_factor", Json{-0.1, 0.1}}, {"interpolation", "nearest"}},
      "random_zoom");
  add("RandomTranslation",
      {{"height_factor", 0.1},
       {"width_factor", 0.2},
       {"fill_mode", "constant"},
       {"fill_value", 0.5}},
      "random_translation");
  add("RandomContrast", {{"factor", Json{0.1, 0.4}}, {"value_range", Json{0, 1}}},
      "random_contrast");
  add("RandomBrightness", {{"factor", 0.2}, {"value_range", Json{0, 1}}}, "random_brightness");
  add("CenterCrop", {{"height", 8}, {"width", 6}}, "center_crop");
  add("RandomCrop", {{"height", 6}, {"width", 5}, {"seed", 1337}}, "random_crop");
  add("Resizing",
      {{"height", 4}, {"width", 4}, {"interpolation", "area"}, {"crop_to_aspect_ratio", true}},
      "resizing_1");
  add("Resizing", {{"height", 3}, {"width", 5}, {"interpolation", "nearest"}}, "resizing_2");
  add("UpSampling2D", {{"size", Json{2, 1}}, {"interpolation", "bicubic"}}, "up_sampling2d");
  add("Flatten", Json::object(), "flatten");
  add("Dense", {{"units", 3}}, "dense");
  const auto m = Model::sequential("augment", Shape{6, 5, 2}, std::move(ls));
  size_t total = 0;
  param_offsets(*m, &total);
  std::vector<float> params(total);
  for (size_t i = 0; i < total; ++i) params[i] = std::sin(static_cast<float>(i) * 0.7f);
  Array x = Array::zeros(DType::kF32, Shape{2, 6, 5, 2});
  for (int i = 0; i < 120; ++i) static_cast<float*>(x.mutable_data())[i] = std::cos(i * 0.3f);
  const std::vector<float> want = run_model(m, params.data(), x);
  const std::string dir = scratch_dir("image_roundtrip");
  save_keras(dir + "/m.keras", *m, params.data());
  save_keras_h5(dir + "/m.h5", *m, params.data());
  for (const char* f : {"/m.keras", "/m.h5"}) {
    SCOPED_TRACE(f);
    const LoadedModel back = load_keras_model(dir + f);
    ASSERT_EQ(back.model->num_layers(), m->num_layers());
    for (size_t i = 0; i < m->num_layers(); ++i)
      EXPECT_EQ(back.model->layer_keras_config(i), m->layer_keras_config(i)) << i;
    EXPECT_EQ(back.params, params);
    EXPECT_EQ(run_model(back, x), want);
  }
}

}  // namespace
}  // namespace nnfleet::test
