// Keras files with the convolution variants (Conv2DTranspose, SeparableConv2D, Conv2D groups,
// Cropping2D, bilinear UpSampling2D): the real Keras 3.4.1 denoising autoencoder of the shared
// set (mnist_denoise_convtranspose_k341.h5, never copied into the repository) predicts within
// 1e-4 of its independent reference and round-trips; a synthetic model with every variant is
// written as .keras and legacy .h5 in Keras's layout (weight names and order, config keys) and
// read back with bit-identical predictions.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "io/keras/hdf5.h"
#include "io/keras/keras_writer.h"
#include "io_test_util.h"
#include "layers/registry.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using test::fixture;

TEST(RealFileConvTranspose, DenoisingAutoencoderPredictsWithin1e4AndRoundTrips) {
  const std::string stem = "mnist_denoise_convtranspose_k341";
  const LoadedModel lm = load_keras_model(fixture(stem + ".h5"));
  ASSERT_TRUE(lm.has_weights);
  EXPECT_EQ(lm.model->input_shape(), (Shape{28, 28, 1}));
  EXPECT_EQ(lm.model->output_shape(), (Shape{28, 28, 1}));
  const Array x = load_npy(fixture("expected/" + stem + ".input.npy"));
  const Array y = load_npy(fixture("expected/" + stem + ".output.npy"));
  const std::vector<float> out = test::run_model(lm, x);
  ASSERT_EQ(out.size(), static_cast<size_t>(y.shape().size()));
  const double err = test::max_abs_diff(out, static_cast<const float*>(y.data()), out.size());
  std::printf("[ parity   ] %s max abs error %.3g\n", stem.c_str(), err);
  RecordProperty("max_abs_error", std::to_string(err));
  EXPECT_LT(err, 1e-4);

  const std::string dir = test::scratch_dir("conv_" + stem);
  KerasSaveInfo info;
  info.keras_class = lm.class_name;
  save_keras(dir + "/m.keras", *lm.model, lm.params.data(), info);
  save_keras_h5(dir + "/m.h5", *lm.model, lm.params.data(), info);
  for (const char* f : {"/m.keras", "/m.h5"}) {
    SCOPED_TRACE(f);
    const LoadedModel back = load_keras_model(dir + f);
    EXPECT_EQ(back.params, lm.params);
    ASSERT_EQ(back.model->num_layers(), lm.model->num_layers());
    for (size_t i = 0; i < lm.model->num_layers(); ++i)
      EXPECT_EQ(back.model->layer(i).keras_config(), lm.model->layer(i).keras_config());
    EXPECT_EQ(test::run_model(back, x), out);  // bit-identical
  }
}

// [8,8,4] -> Conv2D(groups 2) -> SeparableConv2D(depth_multiplier 2, strides 2) ->
// Conv2DTranspose(strides 2, output_padding 1) -> UpSampling2D(bilinear) -> Cropping2D ->
// Flatten -> Dense.
std::shared_ptr<const Model> variants_model() {
  std::vector<std::unique_ptr<Layer>> ls;
  auto add = [&](const char* cls, Json cfg, const char* name) {
    ls.push_back(make_layer(cls, cfg, ConfigMode::kPlan, name));
  };
  add("Conv2D",
      {{"filters", 4},
       {"kernel_size", 3},
       {"groups", 2},
       {"padding", "same"},
       {"activation", "relu"}},
      "grouped");
  add("SeparableConv2D",
      {{"filters", 3},
       {"kernel_size", 3},
       {"depth_multiplier", 2},
       {"strides", 2},
       {"padding", "same"}},
      "sep");
  add("Conv2DTranspose",
      {{"filters", 2},
       {"kernel_size", 3},
       {"strides", 2},
       {"output_padding", 1},
       {"activation", "tanh"}},
      "tconv");
  add("UpSampling2D", {{"interpolation", "bilinear"}}, "up");
  add("Cropping2D", {{"cropping", Json{Json{1, 2}, Json{0, 3}}}}, "crop");
  add("Flatten", Json::object(), "flatten");
  add("Dense", {{"units", 3}}, "dense");
  return Model::sequential("variants", Shape{8, 8, 4}, std::move(ls));
}

TEST(KerasConvVariants, WrittenInKerasLayoutAndReadBackIdentically) {
  const auto m = variants_model();
  EXPECT_EQ(m->planned(2).out_shape, (Shape{10, 10, 2}));  // (4-1)*2 + 3 + 1
  size_t total = 0;
  param_offsets(*m, &total);
  std::vector<float> params(total);
  for (size_t i = 0; i < total; ++i) params[i] = 0.3f * std::sin(static_cast<float>(i) * 0.7f);
  Array x = Array::zeros(DType::kF32, Shape{2, 8, 8, 4});
  for (int i = 0; i < 512; ++i)
    static_cast<float*>(x.mutable_data())[i] = std::cos(static_cast<float>(i) * 0.3f);
  const std::vector<float> want = test::run_model(m, params.data(), x);
  const std::string dir = test::scratch_dir("conv_variants");
  save_keras(dir + "/m.keras", *m, params.data());
  save_keras_h5(dir + "/m.h5", *m, params.data());

  // Legacy .h5: the weight names and order Keras 2 gives these layers.
  {
    auto lock = h5::hdf5_lock();
    h5::File f = h5::File::open(dir + "/m.h5");
    const h5::Group mw = f.root().group("model_weights");
    EXPECT_EQ(mw.group("sep").string_list_attr("weight_names"),
              (std::vector<std::string>{"sep/depthwise_kernel:0", "sep/pointwise_kernel:0",
                                        "sep/bias:0"}));
    EXPECT_EQ(mw.group("tconv").group("tconv").dataset("kernel:0").dims(),
              (std::vector<int64_t>{3, 3, 2, 3}));  // (kh, kw, out, in)
    EXPECT_EQ(mw.group("grouped").group("grouped").dataset("kernel:0").dims(),
              (std::vector<int64_t>{3, 3, 2, 4}));  // (kh, kw, in / groups, out)
  }
  // .keras: Keras 3's config keys and the variables in Keras's order.
  const Json cfg = Json::parse(ZipReader(dir + "/m.keras").read("config.json", 1 << 26));
  const Json& layers = cfg["config"]["layers"];
  auto layer = [&](const std::string& name) {
    for (const auto& l : layers)
      if (l["config"].value("name", "") == name) return l;
    ADD_FAILURE() << "no layer " << name;
    return Json();
  };
  EXPECT_EQ(layer("tconv")["class_name"], "Conv2DTranspose");
  EXPECT_EQ(layer("tconv")["config"]["output_padding"], Json({1, 1}));
  EXPECT_TRUE(layer("tconv").contains("build_config"));
  EXPECT_EQ(layer("sep")["class_name"], "SeparableConv2D");
  for (const char* k : {"depthwise_initializer", "pointwise_initializer", "depth_multiplier",
                        "pointwise_regularizer", "depthwise_constraint"})
    EXPECT_TRUE(layer("sep")["config"].contains(k)) << k;
  EXPECT_EQ(layer("grouped")["config"]["groups"], 2);
  EXPECT_EQ(layer("up")["config"]["interpolation"], "bilinear");
  EXPECT_EQ(layer("crop")["config"]["cropping"], Json({{1, 2}, {0, 3}}));
  {
    ZipReader z(dir + "/m.keras");
    const std::string bytes = z.read("model.weights.h5", uint64_t{1} << 32);
    auto lock = h5::hdf5_lock();
    h5::File f = h5::File::open_image(dir + "/m.keras", bytes);
    const h5::Group vars = f.root().group("layers").group("separable_conv2d").group("vars");
    EXPECT_EQ(vars.dataset("0").dims(), (std::vector<int64_t>{3, 3, 4, 2}));  // depthwise
    EXPECT_EQ(vars.dataset("1").dims(), (std::vector<int64_t>{1, 1, 8, 3}));  // pointwise
    EXPECT_EQ(vars.dataset("2").dims(), (std::vector<int64_t>{3}));           // bias
  }
  for (const char* f : {"/m.keras", "/m.h5"}) {
    SCOPED_TRACE(f);
    const LoadedModel back = load_keras_model(dir + f);
    ASSERT_EQ(back.model->num_layers(), m->num_layers());
    for (size_t i = 0; i < m->num_layers(); ++i)
      EXPECT_EQ(back.model->layer(i).keras_config(), m->layer(i).keras_config()) << i;
    EXPECT_EQ(back.params, params);
    EXPECT_EQ(test::run_model(back, x), want);
  }
}

}  // namespace
}  // namespace nnfleet
