// channels_first layers (built as channels_last twins between transposes) and Dropout's
// noise_shape: values against hand-computed NumPy results, against the channels_last layer on
// transposed data, and the configs written back as read.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/registry.h"

namespace nnfleet {
namespace {

// Runs one forward of `layer` over n samples with all parameters set to `params` (or 1).
std::vector<float> run(const Layer& layer, const Shape& in, int n, const std::vector<float>& x,
                       const std::vector<std::vector<float>>& params = {}, bool training = false,
                       uint64_t seed = 1) {
  const std::vector<Shape> ins{in};
  const Shape out = layer.output_shape(ins);
  std::vector<std::vector<float>> p;
  const auto specs = layer.param_specs(ins);
  for (size_t j = 0; j < specs.size(); ++j)
    p.push_back(j < params.size()
                    ? params[j]
                    : std::vector<float>(static_cast<size_t>(specs[j].shape.size()), 1.0f));
  std::vector<float*> pp;
  for (auto& v : p) pp.push_back(v.data());
  std::vector<float> y(static_cast<size_t>(n * out.size())), cache(layer.cache_floats(ins, n) + 1),
      scratch(layer.scratch_floats(ins, n) + 1);
  const float* xp = x.data();
  Rng rng(seed);
  LayerArgs a;
  a.n = n;
  a.training = training;
  a.in_shapes = ins.data();
  a.out_shape = out;
  a.x = &xp;
  a.y = y.data();
  a.params = pp.data();
  a.cache = cache.data();
  a.scratch = scratch.data();
  a.rng = &rng;
  layer.forward(a);
  return y;
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(1.3f * static_cast<float>(i) + 0.2f);
  return v;
}

// GlobalAveragePooling1D(channels_first) on a (steps, features) tensor averages the LAST axis
// (Keras reads it as (channels, steps)): the geolife transformer's pooling leaves (None, 5).
// Expected: x = arange(24).reshape(2,3,4) * 0.5 - 3; x.mean(-1) and x.max(-1) in NumPy.
TEST(ChannelsFirst, GlobalPooling1DAveragesTheLastAxisAsNumpy) {
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const Json cf{{"data_format", "channels_first"}};
  const auto avg = make_layer("GlobalAveragePooling1D", cf, ConfigMode::kKeras, "gap");
  EXPECT_EQ(avg->output_shape({Shape{3, 4}}), (Shape{3}));
  EXPECT_EQ(run(*avg, Shape{3, 4}, 2, x),
            (std::vector<float>{-2.25f, -0.25f, 1.75f, 3.75f, 5.75f, 7.75f}));
  const auto mx = make_layer("GlobalMaxPooling1D", cf, ConfigMode::kKeras, "gmp");
  EXPECT_EQ(run(*mx, Shape{3, 4}, 2, x), (std::vector<float>{-1.5f, 0.5f, 2.5f, 4.5f, 6.5f, 8.5f}));
  EXPECT_EQ(avg->keras_config()["data_format"], "channels_first");
  EXPECT_EQ(avg->class_name(), std::string("GlobalAveragePooling1D"));
}

// A channels_first Conv2D equals the channels_last Conv2D on the transposed input, transposed
// back, with the same kernel (Keras stores both as (kh, kw, in, out)).
TEST(ChannelsFirst, Conv2DMatchesChannelsLastOnTransposedData) {
  const Json base{{"filters", 3}, {"kernel_size", Json{1, 4}}, {"padding", "same"}};
  Json cf = base;
  cf["data_format"] = "channels_first";
  const auto first = make_layer("Conv2D", cf, ConfigMode::kKeras, "c");
  const auto last = make_layer("Conv2D", base, ConfigMode::kKeras, "c");
  const int64_t c = 2, h = 3, w = 7;
  const std::vector<float> x = ramp(static_cast<size_t>(2 * c * h * w));
  std::vector<float> xt(x.size());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t s = 0; s < h * w; ++s)
        xt[static_cast<size_t>((b * h * w + s) * c + k)] =
            x[static_cast<size_t>((b * c + k) * h * w + s)];
  const std::vector<std::vector<float>> p{ramp(4 * 2 * 3), ramp(3)};
  EXPECT_EQ(first->output_shape({Shape{c, h, w}}), (Shape{3, h, w}));
  const auto y1 = run(*first, Shape{c, h, w}, 2, x, p);
  const auto y2 = run(*last, Shape{h, w, c}, 2, xt, p);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t s = 0; s < h * w; ++s)
        EXPECT_EQ(y1[static_cast<size_t>((b * 3 + k) * h * w + s)],
                  y2[static_cast<size_t>((b * h * w + s) * 3 + k)]);
}

// Flatten(channels_first) flattens in NHWC order (Keras transposes first).
TEST(ChannelsFirst, FlattenTakesChannelsLastOrder) {
  const auto f =
      make_layer("Flatten", Json{{"data_format", "channels_first"}}, ConfigMode::kKeras, "f");
  EXPECT_FALSE(f->output_aliases_input());
  // x [1, C=2, S=3] = [[0,1,2],[3,4,5]] -> [0,3,1,4,2,5].
  EXPECT_EQ(run(*f, Shape{2, 3, 1}, 1, {0, 1, 2, 3, 4, 5}), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(ChannelsFirst, BatchNormalizationAxisOneKeepsItsAxisWhenWritten) {
  const auto bn =
      make_layer("BatchNormalization", Json{{"axis", Json{1}}}, ConfigMode::kKeras, "bn");
  EXPECT_EQ(bn->keras_config()["axis"], Json{1});
  EXPECT_EQ(bn->param_specs({Shape{4, 2, 3}})[0].shape, (Shape{4}));
}

// Dropout(noise_shape=(None, 1, 4)) over [2, 3, 4]: one keep/drop per (sample, feature), the
// same at every step; written back as read.
TEST(NoiseShape, DropoutSharesOneDrawAlongAxesOfSizeOne) {
  const Json cfg{{"rate", 0.5}, {"noise_shape", Json{nullptr, 1, 4}}};
  const auto d = make_layer("Dropout", cfg, ConfigMode::kKeras, "d");
  EXPECT_EQ(d->keras_config()["noise_shape"], (Json{nullptr, 1, 4}));
  std::vector<float> x(24, 1.0f);
  int kept = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const auto y = run(*d, Shape{3, 4}, 2, x, {}, true, seed);
    for (int b = 0; b < 2; ++b)
      for (int f = 0; f < 4; ++f) {
        const float v = y[static_cast<size_t>(b * 12 + f)];
        EXPECT_TRUE(v == 0.0f || v == 2.0f);
        kept += v != 0.0f;
        for (int t = 1; t < 3; ++t) EXPECT_EQ(y[static_cast<size_t>(b * 12 + t * 4 + f)], v);
      }
  }
  EXPECT_GT(kept, 4);
  EXPECT_LT(kept, 28);
  // A batch entry of 1: every row gets the same draw.
  const auto shared = make_layer("Dropout", Json{{"rate", 0.5}, {"noise_shape", Json{1, 3, 4}}},
                                 ConfigMode::kKeras, "d");
  const auto y = run(*shared, Shape{3, 4}, 3, std::vector<float>(36, 1.0f), {}, true, 7);
  for (size_t i = 0; i < 12; ++i) EXPECT_TRUE(y[i] == y[i + 12] && y[i] == y[i + 24]);
}

TEST(NoiseShape, AlphaDropoutSharesItsDrawAndBadShapesAreNamed) {
  const auto d =
      make_layer("AlphaDropout", Json{{"rate", 0.5}, {"noise_shape", Json{nullptr, 1, 2}}},
                 ConfigMode::kKeras, "a");
  const auto y = run(*d, Shape{3, 2}, 2, std::vector<float>(12, 0.5f), {}, true, 3);
  for (int b = 0; b < 2; ++b)
    for (int f = 0; f < 2; ++f)
      for (int t = 1; t < 3; ++t)
        EXPECT_EQ(y[static_cast<size_t>(b * 6 + t * 2 + f)], y[static_cast<size_t>(b * 6 + f)]);
  const auto bad = make_layer("Dropout", Json{{"rate", 0.5}, {"noise_shape", Json{nullptr, 2, 4}}},
                              ConfigMode::kKeras, "d");
  try {
    bad->output_shape({Shape{3, 4}});
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("expected None, 1 or 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      make_layer("Dropout", Json{{"rate", 0.5}, {"noise_shape", "x"}}, ConfigMode::kKeras, "d"),
      ConfigError);
}

}  // namespace
}  // namespace nnfleet
