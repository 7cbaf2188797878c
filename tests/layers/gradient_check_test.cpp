// Gradient check for every layer kind, generated from the registry: for each kind's examples,
// backward() must match central differences of the scalar L = sum(y * r) (r random; summed over
// every output of a multi-output layer), for the inputs and every trainable parameter. Double
// accumulation; points that sit on a kink (where the left and right differences disagree) are left
// out, and at most a tenth may be.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "layers/activation_names.h"
#include "layers/kinds.h"
#include "layers/registry.h"
#include "tensor/rng.h"

namespace nnfleet {
namespace {

struct Case {
  std::string kind;
  size_t index;
  LayerExample ex;
};

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (const auto& k : layer_kinds()) {
    auto exs = k.examples();
    for (size_t i = 0; i < exs.size(); ++i) v.push_back({k.class_name, i, exs[i]});
  }
  return v;
}

// Values away from zero (magnitudes 0.1..2), where most activations have their kink.
float draw(Rng& r) {
  const float m = 0.1f + 1.9f * r.uniform();
  return r.uniform() < 0.5f ? -m : m;
}

class LayerGradient : public ::testing::TestWithParam<Case> {};

TEST_P(LayerGradient, BackwardMatchesNumericalGradient) {
  const Case& c = GetParam();
  const int n = 2;
  auto layer = make_layer(c.kind, c.ex.config, ConfigMode::kPlan, "layer");
  const std::vector<Shape>& ins = c.ex.inputs;
  const Shape out = layer->output_shape(ins);
  const auto specs = layer->param_specs(ins);
  Rng rng(1234 + c.index);

  std::vector<std::vector<float>> x(ins.size()), dx(ins.size()), p(specs.size()), dp;
  for (size_t i = 0; i < ins.size(); ++i) {
    x[i].resize(static_cast<size_t>(n * ins[i].size()));
    for (auto& v : x[i])
      v = c.ex.id_limit > 0
              ? static_cast<float>(static_cast<int64_t>(rng.uniform() * c.ex.id_limit) %
                                   c.ex.id_limit)
              : draw(rng);
    dx[i].assign(x[i].size(), 0.0f);
  }
  for (size_t j = 0; j < specs.size(); ++j) {
    p[j].resize(static_cast<size_t>(specs[j].shape.size()));
    for (auto& v : p[j])
      v = specs[j].name == "moving_variance" || specs[j].name == "variance"
              ? 0.5f + std::fabs(draw(rng))
              : 0.7f * draw(rng);
    if (specs[j].trainable) dp.emplace_back(p[j].size(), 0.0f);
  }
  std::vector<float> y(static_cast<size_t>(n * out.size())), r(y.size());
  for (auto& v : r) v = draw(rng);
  const std::vector<Shape> extra = layer->extra_output_shapes(ins);
  std::vector<std::vector<float>> ey(extra.size()), er(extra.size());
  std::vector<float*> eyp;
  std::vector<const float*> erp;
  for (size_t k = 0; k < extra.size(); ++k) {
    ey[k].resize(static_cast<size_t>(n * extra[k].size()));
    er[k].resize(ey[k].size());
    for (auto& v : er[k]) v = draw(rng);
    eyp.push_back(ey[k].data());
    erp.push_back(er[k].data());
  }
  std::vector<float> cache(layer->cache_floats(ins, n) + 1),
      scratch(layer->scratch_floats(ins, n) + 1);

  std::vector<const float*> xp;
  std::vector<float*> dxp, pp, dpp;
  for (auto& v : x) xp.push_back(v.data());
  for (auto& v : dx) dxp.push_back(v.data());
  for (auto& v : p) pp.push_back(v.data());
  for (auto& v : dp) dpp.push_back(v.data());
  // Moving statistics change in training forward passes; keep a pristine copy to restore.
  const auto p0 = p;

  Rng layer_rng;
  LayerArgs a;
  a.n = n;
  a.training = c.ex.training;
  a.n_inputs = static_cast<int>(ins.size());
  a.in_shapes = ins.data();
  a.out_shape = out;
  a.x = xp.data();
  a.y = y.data();
  a.extra_y = eyp.empty() ? nullptr : eyp.data();
  a.params = pp.data();
  a.cache = cache.data();
  a.scratch = scratch.data();
  a.rng = &layer_rng;
  auto objective = [&]() {
    for (size_t j = 0; j < p.size(); ++j)
      if (!specs[j].trainable) p[j] = p0[j];
    layer_rng = Rng(99);  // the same dropout mask on every pass
    layer->forward(a);
    double s = 0.0;
    for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
    for (size_t k = 0; k < ey.size(); ++k)
      for (size_t i = 0; i < ey[k].size(); ++i) s += static_cast<double>(ey[k][i]) * er[k][i];
    return s;
  };
  objective();
  a.dy = r.data();
  a.extra_dy = erp.empty() ? nullptr : erp.data();
  a.dx = dxp.data();
  a.dparams = dpp.data();
  layer->backward(a);

  int checked = 0, kinks = 0;
  auto check = [&](float& v, float analytic, const std::string& what) {
    const float h = 1e-3f;
    const float orig = v;
    v = orig + h;
    const double up = objective();
    v = orig - h;
    const double down = objective();
    v = orig;
    const double mid = objective();
    const double central = (up - down) / (2.0 * h);
    const double right = (up - mid) / h, left = (mid - down) / h;
    const double scale =
        std::max({1.0, std::fabs(central), std::fabs(static_cast<double>(analytic))});
    if (std::fabs(right - left) > 0.05 * scale) {
      ++kinks;
      return;
    }
    ++checked;
    EXPECT_NEAR(analytic, central, 2e-2 * scale) << c.kind << " example " << c.index << " " << what;
  };
  // Integer ids are not differentiable; backward must leave their gradient untouched.
  for (size_t i = 0; i < x.size() && c.ex.id_limit > 0; ++i)
    for (float g : dx[i]) EXPECT_EQ(g, 0.0f) << c.kind << " example " << c.index << " id input";
  for (size_t i = 0; i < x.size() && c.ex.id_limit == 0; ++i)
    for (size_t e = 0; e < x[i].size(); ++e)
      check(x[i][e], dx[i][e], "input " + std::to_string(i) + "[" + std::to_string(e) + "]");
  size_t t = 0;
  for (size_t j = 0; j < specs.size(); ++j) {
    if (!specs[j].trainable) continue;
    for (size_t e = 0; e < p[j].size(); ++e)
      check(p[j][e], dp[t][e], specs[j].name + "[" + std::to_string(e) + "]");
    ++t;
  }
  // A layer of ids only (CategoryEncoding) has nothing to differentiate: the check above is all.
  if (c.ex.id_limit == 0 || !dp.empty()) {
    EXPECT_GT(checked, 0);
  }
  EXPECT_LE(kinks * 10, checked + kinks) << "too many points on kinks for " << c.kind;
}

// A layer that writes its input or parameter gradients whole when they hold no zeros
// (Layer::writes_whole_dx, writes_whole_dparams; LayerArgs::dx_fresh, dparams_fresh; NaN stands
// for the stale numbers) gives the bits it adds onto zeroed ones, the other gradients included.
TEST_P(LayerGradient, FreshGradientsHaveTheBitsOfAddingOntoZeros) {
  const Case& c = GetParam();
  auto layer = make_layer(c.kind, c.ex.config, ConfigMode::kPlan, "layer");
  const bool fresh_dx = layer->writes_whole_dx(), fresh_dp = layer->writes_whole_dparams();
  if (!fresh_dx && !fresh_dp) return;  // it adds onto zeroed ones only (nothing to compare)
  const int n = 2;
  const std::vector<Shape>& ins = c.ex.inputs;
  const Shape out = layer->output_shape(ins);
  const auto specs = layer->param_specs(ins);
  Rng rng(77 + c.index);
  const auto drawn = [&](int64_t size) {
    std::vector<float> v(static_cast<size_t>(size));
    for (float& e : v) e = draw(rng);
    return v;
  };
  std::vector<std::vector<float>> x, p;
  std::vector<const float*> xp;
  std::vector<float*> pp;
  for (const Shape& s : ins) x.push_back(drawn(n * s.size()));
  for (const ParamSpec& s : specs) p.push_back(drawn(s.shape.size()));
  for (auto& v : x) xp.push_back(v.data());
  for (auto& v : p) pp.push_back(v.data());
  std::vector<float> y(static_cast<size_t>(n * out.size())), dy = drawn(n * out.size());
  std::vector<float> cache(layer->cache_floats(ins, n) + 1),
      scratch(layer->scratch_floats(ins, n) + 1);
  Rng layer_rng(99);
  LayerArgs a;
  a.n = n;
  a.training = c.ex.training;
  a.n_inputs = static_cast<int>(ins.size());
  a.in_shapes = ins.data();
  a.out_shape = out;
  a.x = xp.data();
  a.y = y.data();
  a.params = pp.data();
  a.cache = cache.data();
  a.scratch = scratch.data();
  a.rng = &layer_rng;
  layer->forward(a);
  // The input and parameter gradients of one backward, onto zeros or fresh.
  const auto gradients = [&](bool fresh) {
    std::vector<std::vector<float>> g;
    for (const Shape& s : ins)
      g.emplace_back(static_cast<size_t>(n * s.size()), fresh && fresh_dx ? NAN : 0.0f);
    for (const ParamSpec& s : specs)
      if (s.trainable)
        g.emplace_back(static_cast<size_t>(s.shape.size()), fresh && fresh_dp ? NAN : 0.0f);
    std::vector<float*> gp;
    for (auto& v : g) gp.push_back(v.data());
    LayerArgs b = a;
    b.dy = dy.data();
    b.dx = gp.data();
    b.dparams = gp.data() + ins.size();
    b.dx_fresh = fresh && fresh_dx;
    b.dparams_fresh = fresh && fresh_dp;
    layer->backward(b);
    return g;
  };
  const auto zeroed = gradients(false), fresh = gradients(true);
  for (size_t k = 0; k < zeroed.size(); ++k)
    EXPECT_EQ(std::memcmp(zeroed[k].data(), fresh[k].data(), zeroed[k].size() * sizeof(float)), 0)
        << c.kind << " example " << c.index << " gradient " << k;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.kind + "_" + std::to_string(info.param.index);
}

INSTANTIATE_TEST_SUITE_P(Registry, LayerGradient, ::testing::ValuesIn(all_cases()), case_name);

TEST(LayerRegistry, EveryKindHasGradientCheckExamples) {
  EXPECT_EQ(static_cast<int>(layer_kinds().size()), kNumLayerKinds);
  for (const auto& k : layer_kinds()) EXPECT_FALSE(k.examples().empty()) << k.class_name;
}

TEST(LayerRegistry, EveryActivationHasAGradientCheck) {
  const auto* k = find_layer_kind("Activation");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->examples().size(), activation_names().size());
}

TEST(LayerRegistry, UnknownClassListsValidOnes) {
  try {
    make_layer("Dense2", Json::object(), ConfigMode::kPlan, "x");
    FAIL() << "expected an error";
  } catch (const ModelError& e) {
    EXPECT_NE(
        std::string(e.what()).find("unknown layer class 'Dense2'; expected one of Dense, Conv2D"),
        std::string::npos)
        << e.what();
  }
}

TEST(LayerConfig, PlanModeRefusesUnknownKeyAndListsValidOnes) {
  try {
    make_layer("Dense", Json{{"units", 3}, {"unit", 4}}, ConfigMode::kPlan, "x");
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "unit");
    EXPECT_NE(std::string(e.what()).find("unknown key 'unit' for Dense; expected one of:"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("units"), std::string::npos) << e.what();
  }
}

// Every key a kind writes to its Keras config (to_json, a saved file) is one its "unknown key"
// message lists as valid, and one a plan may hold: a misspelt key is never answered with a list
// that leaves out the key meant (Dense's once left out kernel_regularizer).
TEST(LayerConfig, EveryKeyAKindWritesIsListedAsValid) {
  for (const LayerKindInfo& k : layer_kinds()) {
    for (const LayerExample& ex : k.examples()) {
      const auto layer = make_layer(k.class_name, ex.config, ConfigMode::kPlan, "x");
      const Json written = layer->keras_config();
      const auto valid = layer_config_keys(k.class_name, written, ConfigMode::kKeras);
      // And a plan may hold every one of them, at the value written (dtype: float32, seed: null).
      EXPECT_NO_THROW(make_layer(k.class_name, written, ConfigMode::kPlan, "x"))
          << k.class_name << " " << written.dump();
      for (auto it = written.begin(); it != written.end(); ++it) {
        if (it.key() == "name") continue;
        EXPECT_NE(std::find(valid.begin(), valid.end(), it.key()), valid.end())
            << k.class_name << " writes '" << it.key() << "' but lists only "
            << ::testing::PrintToString(valid) << " (config " << ex.config.dump() << ")";
      }
    }
  }
}

// A config missing any one key of a working example either builds or is refused by name, in
// both modes: RandomZoom once read its height_factor through a null pointer when it was absent
// (found by fuzz_plan under UBSan).
TEST(LayerConfig, EveryKindBuildsOrRefusesAConfigMissingAnyOneKey) {
  int refused = 0, built = 0;
  for (const LayerKindInfo& k : layer_kinds()) {
    for (const LayerExample& ex : k.examples()) {
      if (!ex.config.is_object()) continue;
      for (auto it = ex.config.begin(); it != ex.config.end(); ++it) {
        Json partial = ex.config;
        partial.erase(it.key());
        for (const ConfigMode mode : {ConfigMode::kPlan, ConfigMode::kKeras}) {
          try {
            make_layer(k.class_name, partial, mode, "x");
            ++built;
          } catch (const ModelError& e) {
            EXPECT_NE(std::string(e.what()), "") << k.class_name;
            ++refused;
          }
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(built, 0);
}

TEST(LayerConfig, AMisspeltKeyGetsADidYouMeanAndTheFullList) {
  for (const ConfigMode mode : {ConfigMode::kPlan, ConfigMode::kKeras}) {
    try {
      make_layer("Dense", Json{{"units", 3}, {"kernel_regulariser", "l2"}}, mode, "x");
      FAIL() << "expected an error";
    } catch (const ConfigError& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.key(), "kernel_regulariser");
      EXPECT_NE(m.find("activation, activity_regularizer, bias_constraint, bias_initializer, "
                       "bias_regularizer, dtype, kernel_constraint, kernel_initializer, "
                       "kernel_regularizer, trainable, units, use_bias"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("(did you mean 'kernel_regularizer'?)"), std::string::npos) << m;
    }
  }
}

TEST(LayerRegistry, AMisspeltClassGetsADidYouMean) {
  try {
    make_layer("Desne", Json::object(), ConfigMode::kPlan, "x");
    FAIL() << "expected an error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("(did you mean 'Dense'?)"), std::string::npos) << e.what();
  }
}

TEST(LayerConfig, BadValueNamesKeyAndExpectation) {
  try {
    make_layer("Dense", Json{{"units", "abc"}}, ConfigMode::kPlan, "x");
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "units");
    EXPECT_NE(std::string(e.what()).find("expected a positive integer, got \"abc\""),
              std::string::npos)
        << e.what();
  }
}

TEST(LayerConfig, KerasModeToleratesDefaultsButRefusesRealOptions) {
  EXPECT_NO_THROW(
      make_layer("Dense", Json{{"units", 3}, {"kernel_regularizer", nullptr}, {"dtype", "float32"}},
                 ConfigMode::kKeras, "x"));
  EXPECT_THROW(
      make_layer("Dense", Json{{"units", 3}, {"activity_regularizer", Json{{"class_name", "L2"}}}},
                 ConfigMode::kKeras, "x"),
      ConfigError);
  EXPECT_THROW(
      make_layer("Dense",
                 Json{{"units", 3}, {"kernel_constraint", Json{{"class_name", "MaxNorm"}}}},
                 ConfigMode::kKeras, "x"),
      ConfigError);
}

// Regularizers and constraints are training keys: make_layer_with_training takes them out of the
// config before the layer is built (model/layer_training.h, tested with the model). A layer built
// alone never drops one silently: it refuses it, naming the key.
TEST(LayerConfig, TrainingKeysGivenToALayerAloneAreRefusedByKey) {
  const Json l1{{"module", "keras.regularizers"},
                {"class_name", "L1"},
                {"config", {{"l1", 1e-5}}},
                {"registered_name", nullptr}};
  for (const char* cls : {"Dense", "Conv1D", "Conv2D", "Conv2DTranspose"}) {
    SCOPED_TRACE(cls);
    Json cfg =
        std::string(cls) == "Dense" ? Json{{"units", 3}} : Json{{"filters", 2}, {"kernel_size", 2}};
    cfg["kernel_regularizer"] = l1;
    try {
      make_layer(cls, cfg, ConfigMode::kKeras, "x");
      ADD_FAILURE() << "expected a ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "kernel_regularizer");
    }
  }
}

TEST(LayerConfig, NumericStringsFromGridsAreAccepted) {
  auto l = make_layer("Dense", Json{{"units", "32"}}, ConfigMode::kPlan, "x");
  EXPECT_EQ(l->output_shape({Shape{5}}), (Shape{32}));
}

TEST(Activation, UnknownNameListsValidOnes) {
  try {
    make_layer("Dense", Json{{"units", 3}, {"activation", "relux"}}, ConfigMode::kPlan, "x");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "activation");
    EXPECT_NE(std::string(e.what()).find("expected one of linear, relu, sigmoid"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nnfleet
