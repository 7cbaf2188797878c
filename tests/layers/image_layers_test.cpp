// Semantics of the image preprocessing and augmentation layers beyond the gradient check:
// Keras's inference behaviour (resize windows, centre crops, identities), what training draws,
// and config validation by name.
#include <gtest/gtest.h>

#include <numeric>

#include "layers/kinds.h"

namespace nnfleet {
namespace {

// Runs one layer forward on a batch; the stream is fixed.
struct ImageRun {
  std::unique_ptr<Layer> layer;
  Shape in, out;
  std::vector<float> y, cache, scratch;
  Rng rng{11};
  ImageRun(const char* cls, const Json& cfg, Shape s, ConfigMode mode = ConfigMode::kPlan)
      : in(std::move(s)) {
    layer = make_layer(cls, cfg, mode, "l");
    out = layer->output_shape({in});
  }
  std::vector<float>& forward(int n, const std::vector<float>& x, bool training) {
    y.assign(static_cast<size_t>(n) * out.size(), 0.0f);
    cache.assign(layer->cache_floats({in}, n) + 1, 0.0f);
    scratch.assign(layer->scratch_floats({in}, n) + 1, 0.0f);
    const float* xp = x.data();
    LayerArgs a;
    a.n = n;
    a.training = training;
    a.in_shapes = &in;
    a.out_shape = out;
    a.x = &xp;
    a.y = y.data();
    a.cache = cache.data();
    a.scratch = scratch.data();
    a.rng = &rng;
    layer->forward(a);
    return y;
  }
};

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(Resizing, CropToAspectRatioTakesTheCentredWindow) {
  // 4 x 6 to 2 x 2: the centred 4 x 4 window (columns 1..4), then halved bilinearly.
  ImageRun r(
      "Resizing",
      {{"height", 2}, {"width", 2}, {"crop_to_aspect_ratio", true}, {"interpolation", "area"}},
      Shape{4, 6, 1});
  const auto x = iota(24);
  const auto& y = r.forward(1, x, false);
  EXPECT_FLOAT_EQ(y[0], (1 + 2 + 7 + 8) / 4.0f);
  EXPECT_FLOAT_EQ(y[3], (15 + 16 + 21 + 22) / 4.0f);
  EXPECT_EQ(r.layer->keras_config()["interpolation"], "area");
}

TEST(Resizing, RefusesWhatItDoesNotImplementByName) {
  auto msg = [](Json cfg) {
    try {
      make_layer("Resizing", cfg, ConfigMode::kKeras, "r");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg({{"height", 2}, {"width", 2}, {"interpolation", "lanczos3"}}).find("interpolation"),
            std::string::npos);
  EXPECT_NE(msg({{"height", 2}, {"width", 2}, {"antialias", true}}).find("antialias"),
            std::string::npos);
  EXPECT_NE(
      msg({{"height", 2}, {"width", 2}, {"pad_to_aspect_ratio", true}}).find("pad_to_aspect_ratio"),
      std::string::npos);
  EXPECT_NE(
      msg({{"height", 2}, {"width", 2}, {"data_format", "channels_first"}}).find("data_format"),
      std::string::npos);
  EXPECT_NE(msg({{"width", 2}}).find("height"), std::string::npos);
  EXPECT_THROW(make_layer("Resizing", Json{{"height", 2}, {"width", 2}, {"colour", 1}},
                          ConfigMode::kPlan, "r"),
               ConfigError);
}

TEST(CenterCrop, SlicesTheCentreOrResizesASmallerImage) {
  ImageRun r("CenterCrop", {{"height", 2}, {"width", 2}}, Shape{4, 5, 1});
  // h_start = int(2 / 2) = 1, w_start = int(3 / 2) = 1.
  EXPECT_EQ(r.forward(1, iota(20), false), (std::vector<float>{6, 7, 11, 12}));
  ImageRun small("CenterCrop", {{"height", 4}, {"width", 2}}, Shape{2, 2, 1});
  EXPECT_EQ(small.out, (Shape{4, 2, 1}));
}

TEST(RandomCrop, CropsAtRandomInTrainingAndToTheAspectRatioAtInference) {
  ImageRun r("RandomCrop", {{"height", 2}, {"width", 2}}, Shape{4, 4, 1});
  const auto x = iota(16);
  // Inference: the whole (square) image halved bilinearly = 2 x 2 block means.
  EXPECT_EQ(r.forward(1, x, false), (std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
  const auto y = r.forward(1, x, true);
  const float y0 = r.cache[0], x0 = r.cache[1];
  EXPECT_EQ(y[0], x[static_cast<size_t>(y0 * 4 + x0)]);
  EXPECT_EQ(y[3], x[static_cast<size_t>((y0 + 1) * 4 + x0 + 1)]);
}

TEST(RandomLayers, AreTheIdentityAtInference) {
  const std::vector<std::pair<const char*, Json>> layers = {
      {"RandomFlip", Json::object()},
      {"RandomRotation", {{"factor", 0.3}}},
      {"RandomZoom", {{"height_factor", 0.3}}},
      {"RandomTranslation", {{"height_factor", 0.3}, {"width_factor", 0.1}}},
      {"RandomContrast", {{"factor", 0.5}}},
      {"RandomBrightness", {{"factor", 0.5}}}};
  const auto x = iota(2 * 3 * 4 * 2);
  for (const auto& [cls, cfg] : layers) {
    ImageRun r(cls, cfg, Shape{3, 4, 2});
    EXPECT_EQ(r.forward(2, x, false), x) << cls;
    EXPECT_NE(r.forward(2, x, true), x) << cls;  // the fixed stream moves each of them
  }
}

TEST(RandomFlip, FlipsBothAxesOnOneDrawAndAcceptsKerasUnknownModes) {
  ImageRun r("RandomFlip", Json::object(), Shape{2, 2, 1});
  const std::vector<float> x = {1, 2, 3, 4, 1, 2, 3, 4};
  const auto& y = r.forward(2, x, true);
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> got(y.begin() + 4 * i, y.begin() + 4 * i + 4);
    EXPECT_EQ(
        got, r.cache[i] != 0 ? (std::vector<float>{4, 3, 2, 1}) : (std::vector<float>{1, 2, 3, 4}));
  }
  // Keras 3.10 keeps a mode that is none of its names and never flips with it.
  ImageRun odd("RandomFlip", {{"mode", "vertical and horizontal"}}, Shape{2, 2, 1},
               ConfigMode::kKeras);
  EXPECT_EQ(odd.forward(2, x, true), x);
  EXPECT_EQ(odd.layer->keras_config()["mode"], "vertical and horizontal");
  EXPECT_THROW(make_layer("RandomFlip", Json{{"mode", "diagonal"}}, ConfigMode::kPlan, "f"),
               ConfigError);
}

TEST(RandomLayers, ValidateFactorsAndFillModesByName) {
  auto bad = [](const char* cls, Json cfg) {
    EXPECT_THROW(make_layer(cls, cfg, ConfigMode::kKeras, "l"), ConfigError) << cfg.dump();
  };
  bad("RandomRotation", {{"factor", Json{0.1, 0.2, 0.3}}});
  bad("RandomRotation", {{"factor", 0.2}, {"fill_mode", "mirror"}});
  bad("RandomRotation", {{"factor", 0.2}, {"interpolation", "bicubic"}});
  bad("RandomZoom", {{"height_factor", 1.5}});
  bad("RandomTranslation", {{"height_factor", 0.2}});
  bad("RandomContrast", {{"factor", 1.5}});
  bad("RandomBrightness", {{"factor", 0.2}, {"value_range", Json{0}}});
  bad("RandomBrightness", {{"factor", 0.2}, {"seed", "x"}});
  // Keras's factor forms: a number f is [-f, f] (contrast's bounds make it [0, f]).
  const auto rot =
      make_layer("RandomRotation", Json{{"factor", 0.2}, {"seed", 5}}, ConfigMode::kKeras, "r");
  EXPECT_EQ(rot->keras_config()["factor"], (Json{-0.2, 0.2}));
  EXPECT_EQ(rot->keras_config()["seed"], 5);
  const auto con = make_layer("RandomContrast", Json{{"factor", 0.2}}, ConfigMode::kKeras, "c");
  EXPECT_EQ(con->keras_config()["factor"], (Json{0.0, 0.2}));
}

TEST(RandomBrightness, AddsOneDeltaPerSampleAndClipsToTheValueRange) {
  ImageRun r("RandomBrightness", {{"factor", Json{0.5, 0.5}}, {"value_range", Json{0, 10}}},
             Shape{1, 2, 1});
  EXPECT_EQ(r.forward(1, {1, 8}, true), (std::vector<float>{6, 10}));
}

TEST(RandomContrast, ScalesAroundTheChannelMean) {
  ImageRun r("RandomContrast", {{"factor", Json{0.5, 0.5}}, {"value_range", Json{-100, 100}}},
             Shape{1, 2, 1});
  const auto& y = r.forward(1, {1, 3}, true);
  // factor in [1 - 0.5, 1 + 0.5], kept in the cache; mean 2, (x - 2) * factor + 2.
  const float f = r.cache[0];
  EXPECT_GE(f, 0.5f);
  EXPECT_LE(f, 1.5f);
  EXPECT_EQ(y, (std::vector<float>{(1 - 2.0f) * f + 2, (3 - 2.0f) * f + 2}));
}

}  // namespace
}  // namespace nnfleet
