// Keras semantics of LayerNormalization, UnitNormalization, PReLU, the activation-layer objects,
// Softmax over other axes, the element-wise and Dot merges, and the noise layers (values,
// shapes, refusals, and that training noise comes from the model's stream alone).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "layers/activation_names.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

// One layer over a batch: forward, then backward with dy.
struct OneLayer {
  std::unique_ptr<Layer> layer;
  std::vector<Shape> ins;
  Shape out;
  std::vector<std::vector<float>> params, dparams, dx;
  std::vector<float> y, cache, scratch;

  OneLayer(const char* cls, Json cfg, std::vector<Shape> in, ConfigMode mode = ConfigMode::kPlan)
      : ins(std::move(in)) {
    layer = make_layer(cls, cfg, mode, "l");
    out = layer->output_shape(ins);
    for (const auto& s : layer->param_specs(ins)) {
      params.emplace_back(static_cast<size_t>(s.shape.size()), 1.0f);
      dparams.emplace_back(static_cast<size_t>(s.shape.size()), 0.0f);
    }
  }
  LayerArgs args(int n, std::vector<const float*>& xp, std::vector<float*>& pp, bool training,
                 Rng* rng) {
    for (auto& v : params) pp.push_back(v.data());
    LayerArgs a;
    a.n = n;
    a.training = training;
    a.n_inputs = static_cast<int>(ins.size());
    a.in_shapes = ins.data();
    a.out_shape = out;
    a.x = xp.data();
    a.y = y.data();
    a.params = pp.data();
    a.cache = cache.data();
    a.scratch = scratch.data();
    a.rng = rng;
    return a;
  }
  std::vector<float> forward(int n, const std::vector<std::vector<float>>& xs,
                             bool training = false, uint64_t seed = 1) {
    xs_ = xs;
    std::vector<const float*> xp;
    for (auto& v : xs_) xp.push_back(v.data());
    std::vector<float*> pp;
    y.assign(static_cast<size_t>(n * out.size()), 0.0f);
    cache.assign(layer->cache_floats(ins, n) + 1, 0.0f);
    scratch.assign(layer->scratch_floats(ins, n) + 1, 0.0f);
    Rng rng(seed);
    layer->forward(args(n, xp, pp, training, &rng));
    n_ = n;
    training_ = training;
    return y;
  }
  void backward(const std::vector<float>& dy) {
    std::vector<const float*> xp;
    for (auto& v : xs_) xp.push_back(v.data());
    std::vector<float*> pp, dxp, dpp;
    dx.clear();
    for (auto& v : xs_) dx.emplace_back(v.size(), 0.0f);
    for (auto& v : dx) dxp.push_back(v.data());
    for (auto& v : dparams) dpp.push_back(v.data());
    LayerArgs a = args(n_, xp, pp, training_, nullptr);
    a.dy = dy.data();
    a.dx = dxp.data();
    a.dparams = dpp.data();
    layer->backward(a);
  }

 private:
  std::vector<std::vector<float>> xs_;
  int n_ = 0;
  bool training_ = false;
};

std::vector<float> ramp(size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(1.7f * static_cast<float>(i) + 0.3f) * scale;
  return v;
}

TEST(LayerNormalization, NormalizesEachSampleOverItsAxesWithBiasedVarianceAndEpsilonInside) {
  // [2,3] per sample, axis -1: each row of 3 separately.
  OneLayer r("LayerNormalization", {{"epsilon", 0.5}}, {Shape{2, 3}});
  std::fill(r.params[1].begin(), r.params[1].end(), 0.0f);  // beta 0, gamma 1
  const std::vector<float> x = {1, 2, 6, -1, -1, -1};
  const auto y = r.forward(1, {x});
  const double mean = 3.0, var = (4.0 + 1.0 + 9.0) / 3.0;  // biased
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(y[j], (x[j] - mean) / std::sqrt(var + 0.5), 1e-6);
  for (int j = 3; j < 6; ++j) EXPECT_NEAR(y[j], 0.0, 1e-6);  // constant row: exactly 0
}

TEST(LayerNormalization, GammaAndBetaSpanTheSortedAxesAndApplyInThatLayout) {
  // axis [3, 1] of [2,2,3]: normalize over steps and channels for each of the 2 middle rows.
  OneLayer r("LayerNormalization", {{"axis", Json{3, 1}}}, {Shape{2, 2, 3}});
  ASSERT_EQ(r.layer->param_specs(r.ins)[0].shape, (Shape{2, 3}));
  for (size_t j = 0; j < 6; ++j) r.params[0][j] = static_cast<float>(j + 1);  // gamma[a1][a3]
  std::fill(r.params[1].begin(), r.params[1].end(), 0.0f);
  const auto x = ramp(12);
  const auto y = r.forward(1, {x});
  for (int h = 0; h < 2; ++h) {  // the free axis (Keras axis 2)
    double s = 0, q = 0;
    for (int t = 0; t < 2; ++t)
      for (int c = 0; c < 3; ++c) s += x[(t * 2 + h) * 3 + c];
    const double mean = s / 6;
    for (int t = 0; t < 2; ++t)
      for (int c = 0; c < 3; ++c) q += std::pow(x[(t * 2 + h) * 3 + c] - mean, 2);
    const double inv = 1 / std::sqrt(q / 6 + 1e-3);
    for (int t = 0; t < 2; ++t)
      for (int c = 0; c < 3; ++c) {
        const int o = (t * 2 + h) * 3 + c;
        EXPECT_NEAR(y[o], (x[o] - mean) * inv * (t * 3 + c + 1), 1e-5) << o;
      }
  }
}

TEST(LayerNormalization, RefusesTheBatchAxisARepeatedAxisAndRmsScaling) {
  EXPECT_THROW(OneLayer("LayerNormalization", {{"axis", 0}}, {Shape{3}}), ModelError);
  EXPECT_THROW(OneLayer("LayerNormalization", {{"axis", Json{1, -2}}}, {Shape{3, 2}}), ModelError);
  EXPECT_THROW(OneLayer("LayerNormalization", {{"axis", 3}}, {Shape{3, 2}}), ModelError);
  EXPECT_THROW(OneLayer("LayerNormalization", {{"rms_scaling", true}}, {Shape{3}}), ConfigError);
}

TEST(UnitNormalization, GivesUnitNormsAndAZeroVectorStaysZeroWithAFiniteGradient) {
  OneLayer r("UnitNormalization", {{"axis", 1}}, {Shape{3, 2}});
  std::vector<float> x = {3, 0, 4, 0, 0, 0};  // column 0 has norm 5, column 1 is zero
  const auto y = r.forward(1, {x});
  EXPECT_NEAR(y[0], 0.6, 1e-6);
  EXPECT_NEAR(y[2], 0.8, 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  r.backward(std::vector<float>(6, 1.0f));
  for (float v : r.dx[0]) EXPECT_TRUE(std::isfinite(v));
}

TEST(PReLU, SlopesNegativeValuesByAlphaSharedAlongSharedAxes) {
  OneLayer r("PReLU", {{"shared_axes", Json{1}}}, {Shape{2, 2}});
  ASSERT_EQ(r.layer->param_specs(r.ins)[0].shape, (Shape{1, 2}));
  r.params[0] = {0.5f, 0.1f};
  const auto y = r.forward(1, {{-2, -2, 3, -4}});
  EXPECT_EQ(y, (std::vector<float>{-1.0f, -0.2f, 3.0f, -0.4f}));
  r.backward({1, 1, 1, 1});
  EXPECT_EQ(r.dparams[0], (std::vector<float>{-2.0f, -6.0f}));
  EXPECT_THROW(OneLayer("PReLU", {{"shared_axes", 3}}, {Shape{2, 2}}), ModelError);
}

TEST(ActivationObjects, KerasLayerObjectsParseWithTheirOptionsAndWriteBack) {
  const Json leaky = Json::parse(R"({"module": "keras.layers", "class_name": "LeakyReLU",
      "config": {"name": "leaky_re_lu", "trainable": true, "dtype": "float32",
                 "negative_slope": 0.3}, "registered_name": null})");
  const Activation a = parse_activation(&leaky, "activation");
  EXPECT_EQ(a.kind, Act::kLeakyRelu);
  EXPECT_FLOAT_EQ(a.alpha, 0.3f);
  EXPECT_EQ(activation_to_keras(a)["class_name"], "LeakyReLU");
  EXPECT_EQ(activation_to_keras(Activation{Act::kLeakyRelu, 0.2f}), "leaky_relu");
  const Json relu =
      Json::parse(R"({"class_name": "ReLU", "config": {"max_value": null, "threshold": 0.5}})");
  const Activation b = parse_activation(&relu, "activation");
  EXPECT_TRUE(std::isinf(b.max_value));
  EXPECT_FLOAT_EQ(b.threshold, 0.5f);
  const Json b_back = activation_to_keras(b);
  EXPECT_EQ(b_back["class_name"], "ReLU");
  EXPECT_EQ(parse_activation(&b_back, "activation").threshold, 0.5f);
  const Json elu = Json::parse(R"({"class_name": "ELU", "config": {"alpha": 1.0}})");
  EXPECT_EQ(activation_to_keras(parse_activation(&elu, "activation")), "elu");
  const Json bad = Json::parse(R"({"class_name": "ELU", "config": {"beta": 1.0}})");
  EXPECT_THROW(parse_activation(&bad, "activation"), ConfigError);
  // The Dense layer computes with the object's slope.
  OneLayer d("Dense", {{"units", 1}, {"use_bias", false}, {"activation", leaky}}, {Shape{1}});
  EXPECT_FLOAT_EQ(d.forward(1, {{-2.0f}})[0], -0.6f);
}

TEST(Softmax, NormalizesOverTheGivenAxes) {
  OneLayer r("Softmax", {{"axis", 1}}, {Shape{3, 2}});
  const auto y = r.forward(2, {ramp(12)});
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c) {
      double s = 0;
      for (int t = 0; t < 3; ++t) s += y[(n * 3 + t) * 2 + c];
      EXPECT_NEAR(s, 1.0, 1e-6);
    }
  EXPECT_THROW(OneLayer("Softmax", {{"axis", 0}}, {Shape{3}}), ModelError);
}

TEST(Merges, ComputeAsKerasAndRefuseMismatchedInputs) {
  const std::vector<float> a = {1, -2, 3}, b = {2, 5, -1}, c = {0, 1, 3};
  EXPECT_EQ(OneLayer("Multiply", {}, {Shape{3}, Shape{3}, Shape{3}}).forward(1, {a, b, c}),
            (std::vector<float>{0, -10, -9}));
  EXPECT_EQ(OneLayer("Subtract", {}, {Shape{3}, Shape{3}}).forward(1, {a, b}),
            (std::vector<float>{-1, -7, 4}));
  EXPECT_EQ(OneLayer("Average", {}, {Shape{3}, Shape{3}}).forward(1, {a, b}),
            (std::vector<float>{1.5f, 1.5f, 1}));
  EXPECT_EQ(OneLayer("Minimum", {}, {Shape{3}, Shape{3}}).forward(1, {a, b}),
            (std::vector<float>{1, -2, -1}));
  OneLayer mx("Maximum", {}, {Shape{3}, Shape{3}, Shape{3}});
  EXPECT_EQ(mx.forward(1, {a, b, c}), (std::vector<float>{2, 5, 3}));
  mx.backward({1, 1, 1});  // a tie at 3 (inputs 0 and 2): the first one gets the gradient
  EXPECT_EQ(mx.dx[0], (std::vector<float>{0, 0, 1}));
  EXPECT_EQ(mx.dx[2], (std::vector<float>{0, 0, 0}));
  EXPECT_THROW(OneLayer("Subtract", {}, {Shape{3}, Shape{3}, Shape{3}}), ModelError);
  EXPECT_THROW(OneLayer("Multiply", {}, {Shape{3}, Shape{2}}), ModelError);
}

TEST(Dot, ContractsTheGivenAxesWithKerasOutputShapes) {
  EXPECT_EQ(OneLayer("Dot", {{"axes", 1}}, {Shape{4}, Shape{4}}).out, (Shape{1}));
  EXPECT_EQ(OneLayer("Dot", {{"axes", Json{2, 2}}}, {Shape{3, 4}, Shape{5, 4}}).out, (Shape{3, 5}));
  EXPECT_EQ(OneLayer("Dot", {{"axes", Json{1, 1}}}, {Shape{3, 4}, Shape{3, 2}}).out, (Shape{4, 2}));
  OneLayer r("Dot", {{"axes", Json{2, 1}}}, {Shape{2, 3}, Shape{3}});
  EXPECT_EQ(r.out, (Shape{2}));
  EXPECT_EQ(r.forward(1, {{1, 2, 3, 4, 5, 6}, {1, 0, -1}}), (std::vector<float>{-2, -2}));
  OneLayer cos("Dot", {{"axes", -1}, {"normalize", true}}, {Shape{2}, Shape{2}});
  EXPECT_NEAR(cos.forward(1, {{3, 4}, {4, 3}})[0], 24.0 / 25.0, 1e-6);
  EXPECT_THROW(OneLayer("Dot", {{"axes", 1}}, {Shape{4}, Shape{3}}), ModelError);
  EXPECT_THROW(OneLayer("Dot", {{"axes", 0}}, {Shape{4}, Shape{4}}), ConfigError);
}

TEST(NoiseLayers, AreTheIdentityAtInference) {
  const auto x = ramp(24);
  for (const auto& [cls, cfg] :
       std::vector<std::pair<const char*, Json>>{{"SpatialDropout1D", {{"rate", 0.5}}},
                                                 {"SpatialDropout2D", {{"rate", 0.5}}},
                                                 {"GaussianNoise", {{"stddev", 1.0}}},
                                                 {"GaussianDropout", {{"rate", 0.5}}},
                                                 {"AlphaDropout", {{"rate", 0.5}}}}) {
    const Shape s = std::string(cls) == "SpatialDropout2D" ? Shape{2, 3, 4} : Shape{6, 4};
    EXPECT_EQ(OneLayer(cls, cfg, {s}).forward(1, {x}), x) << cls;
  }
}

TEST(NoiseLayers, TrainingNoiseHasKerasStatisticsAndDependsOnlyOnTheStream) {
  const int n = 200, t = 5, c = 20;
  std::vector<float> ones(n * t * c, 1.0f);
  // SpatialDropout1D: a channel is dropped or kept for every step of a sample.
  OneLayer sd("SpatialDropout1D", {{"rate", 0.4}}, {Shape{t, c}});
  const auto y = sd.forward(n, {ones}, true, 5);
  int kept = 0;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < c; ++k) {
      const float v = y[(i * t) * c + k];
      for (int s = 1; s < t; ++s) EXPECT_EQ(y[(i * t + s) * c + k], v);
      kept += v != 0.0f;
      if (v != 0.0f) {
        EXPECT_FLOAT_EQ(v, 1.0f / 0.6f);
      }
    }
  EXPECT_NEAR(kept / double(n * c), 0.6, 0.03);
  EXPECT_EQ(sd.forward(n, {ones}, true, 5), y);  // the same stream, the same draw
  EXPECT_NE(sd.forward(n, {ones}, true, 6), y);
  // GaussianNoise: mean x, standard deviation stddev.
  std::vector<float> zeros(ones.size(), 0.0f);
  OneLayer gn("GaussianNoise", {{"stddev", 0.5}}, {Shape{t, c}});
  const auto g = gn.forward(n, {zeros}, true);
  double m = 0, q = 0;
  for (float v : g) m += v;
  m /= g.size();
  for (float v : g) q += (v - m) * (v - m);
  EXPECT_NEAR(m, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(q / g.size()), 0.5, 0.02);
  // GaussianDropout: multiplicative noise of mean 1 and variance rate / (1 - rate).
  OneLayer gd("GaussianDropout", {{"rate", 0.2}}, {Shape{t, c}});
  const auto d = gd.forward(n, {ones}, true);
  m = q = 0;
  for (float v : d) m += v;
  m /= d.size();
  for (float v : d) q += (v - m) * (v - m);
  EXPECT_NEAR(m, 1.0, 0.02);
  EXPECT_NEAR(q / d.size(), 0.25, 0.02);
  // AlphaDropout keeps a standard normal input at mean 0 and variance 1 (SELU's fixed point).
  OneLayer ad("AlphaDropout", {{"rate", 0.3}}, {Shape{t, c}});
  Rng r(3);
  std::vector<float> z(ones.size());
  for (auto& v : z) v = static_cast<float>(r.normal());
  const auto o = ad.forward(n, {z}, true);
  m = q = 0;
  for (float v : o) m += v;
  m /= o.size();
  for (float v : o) q += (v - m) * (v - m);
  EXPECT_NEAR(m, 0.0, 0.05);
  EXPECT_NEAR(q / o.size(), 1.0, 0.06);
}

}  // namespace
}  // namespace nnfleet
