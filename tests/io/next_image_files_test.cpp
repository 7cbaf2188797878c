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

}  // namespace
}  // namespace nnfleet::test
