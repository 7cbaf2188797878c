// Initializers (src/layers/initializer.cpp; tested here to stay out of tests/layers): fans,
// sample statistics over large draws, determinism, parsing and the Keras form.
#include "layers/initializer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

namespace nnfleet {
namespace {

struct Stats {
  double mean = 0, std = 0, min = 0, max = 0;
};

Stats draw(const Initializer& init, const Shape& shape, std::vector<float>* out = nullptr,
           uint64_t seed = 1) {
  std::vector<float> v(static_cast<size_t>(shape.size()));
  Rng rng(seed);
  initialize(init, shape, rng, v.data());
  Stats s;
  double sum = 0, sq = 0;
  for (float x : v) sum += x;
  s.mean = sum / v.size();
  for (float x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / v.size());
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  if (out) *out = v;
  return s;
}

Initializer make(InitKind k, double a = 0, double b = 0) { return Initializer{k, a, b}; }

TEST(Initializer, FansFollowKerasForRank1To4) {
  Fans f = initializer_fans(Shape{});
  EXPECT_EQ(f.in, 1);
  EXPECT_EQ(f.out, 1);
  f = initializer_fans(Shape{7});
  EXPECT_EQ(f.in, 7);
  EXPECT_EQ(f.out, 7);
  f = initializer_fans(Shape{20, 30});
  EXPECT_EQ(f.in, 20);
  EXPECT_EQ(f.out, 30);
  f = initializer_fans(Shape{3, 3, 8, 16});  // conv kernel [kh,kw,in,out]
  EXPECT_EQ(f.in, 72);
  EXPECT_EQ(f.out, 144);
  f = initializer_fans(Shape{5, 4, 6});  // conv1d [k,in,out]
  EXPECT_EQ(f.in, 20);
  EXPECT_EQ(f.out, 30);
}

// A sample of `n` values: the mean is within 5 standard errors and the std within 2%.
void expect_moments(const Stats& s, double mean, double std, double n) {
  EXPECT_NEAR(s.mean, mean, 5 * std / std::sqrt(n));
  EXPECT_NEAR(s.std, std, 0.02 * std);
}

TEST(Initializer, GlorotUniformLimitFromBothFans) {
  const Shape sh{300, 500};
  const double limit = std::sqrt(6.0 / 800);
  Stats s = draw(make(InitKind::kGlorotUniform), sh);
  expect_moments(s, 0, limit / std::sqrt(3.0), 150000);
  EXPECT_GE(s.min, -limit);
  EXPECT_LE(s.max, limit);
  EXPECT_GT(s.max, 0.99 * limit);
  EXPECT_LT(s.min, -0.99 * limit);
}

TEST(Initializer, UniformVarianceScalingLimits) {
  const Shape conv{3, 3, 32, 64};  // fan_in 288
  const double he = std::sqrt(6.0 / 288), lecun = std::sqrt(3.0 / 288);
  Stats s = draw(make(InitKind::kHeUniform), conv);
  EXPECT_LE(s.max, he);
  EXPECT_GT(s.max, 0.99 * he);
  expect_moments(s, 0, he / std::sqrt(3.0), conv.size());
  s = draw(make(InitKind::kLecunUniform), conv);
  EXPECT_LE(s.max, lecun);
  EXPECT_GT(s.max, 0.99 * lecun);
  expect_moments(s, 0, lecun / std::sqrt(3.0), conv.size());
}

// A truncated-normal variance-scaling draw has std sqrt(scale / n) (Keras divides by
// 0.8796..., the std of a unit normal truncated at +-2) and no value beyond 2 stddev.
void expect_truncated_scaling(InitKind k, const Shape& sh, double variance) {
  const double stddev = std::sqrt(variance) / 0.87962566103423978;
  Stats s = draw(make(k), sh);
  expect_moments(s, 0, std::sqrt(variance), sh.size());
  EXPECT_LE(s.max, 2 * stddev + 1e-6);
  EXPECT_GE(s.min, -2 * stddev - 1e-6);
  EXPECT_GT(s.max, 1.9 * stddev);
}

TEST(Initializer, NormalVarianceScalingIsTruncated) {
  expect_truncated_scaling(InitKind::kGlorotNormal, Shape{300, 500}, 2.0 / 800);
  expect_truncated_scaling(InitKind::kHeNormal, Shape{3, 3, 32, 64}, 2.0 / 288);
  expect_truncated_scaling(InitKind::kLecunNormal, Shape{400, 300}, 1.0 / 400);
  // Rank 1: fan_in = fan_out = n.
  expect_truncated_scaling(InitKind::kHeNormal, Shape{200000}, 2.0 / 200000);
}

// Keras 2 files spell glorot_uniform as VarianceScaling(1, fan_avg, uniform); Keras 2.2's
// "normal" is the truncated normal.
TEST(Initializer, KerasVarianceScalingObjectMatchesTheNamedKinds) {
  const Shape sh{300, 500};
  const Initializer vs =
      parse_initializer(Json::parse(R"({"class_name": "VarianceScaling", "config": {"scale": 1.0,
                   "mode": "fan_avg", "distribution": "uniform", "seed": null}})"),
                        "kernel_initializer");
  ASSERT_EQ(vs.kind, InitKind::kVarianceScaling);
  std::vector<float> a, b;
  draw(vs, sh, &a, 7);
  draw(make(InitKind::kGlorotUniform), sh, &b, 7);
  EXPECT_EQ(a, b);
  const Initializer he =
      parse_initializer(Json::parse(R"({"class_name": "VarianceScaling", "config": {"scale": 2.0,
                   "mode": "fan_in", "distribution": "normal", "seed": null}})"),
                        "kernel_initializer");
  draw(he, sh, &a, 3);
  draw(make(InitKind::kHeNormal), sh, &b, 3);
  EXPECT_EQ(a, b);
  const Initializer raw =
      parse_initializer(Json::parse(R"({"VarianceScaling": {"scale": 3.0, "mode": "fan_out",
                   "distribution": "untruncated_normal"}})"),
                        "kernel_initializer");
  Stats s = draw(raw, sh);
  expect_moments(s, 0, std::sqrt(3.0 / 500), 150000);
  EXPECT_EQ(parse_initializer(initializer_to_keras(raw), "k").distribution,
            InitDistribution::kUntruncatedNormal);
  EXPECT_THROW(parse_initializer(Json::parse(R"({"VarianceScaling": {"mode": "fan_sum"}})"), "k"),
               ConfigError);
}

TEST(Initializer, RandomKindsUseTheirParameters) {
  const Shape sh{400, 500};
  Stats s = draw(make(InitKind::kRandomNormal, 0.0, 0.05), sh);
  expect_moments(s, 0, 0.05, sh.size());
  EXPECT_GT(s.max, 0.2);  // untruncated: 4+ sigma values exist in 200k draws
  s = draw(make(InitKind::kRandomNormal, 1.5, 0.2), sh);
  expect_moments(s, 1.5, 0.2, sh.size());
  s = draw(make(InitKind::kRandomUniform, -0.05, 0.05), sh);
  expect_moments(s, 0, 0.1 / std::sqrt(12.0), sh.size());
  EXPECT_GE(s.min, -0.05);
  EXPECT_LE(s.max, 0.05);
  s = draw(make(InitKind::kRandomUniform, 1, 3), sh);
  expect_moments(s, 2, 2 / std::sqrt(12.0), sh.size());
  EXPECT_GE(s.min, 1);
  EXPECT_LE(s.max, 3);
  s = draw(make(InitKind::kTruncatedNormal, 0.0, 0.05), sh);
  expect_moments(s, 0, 0.05 * 0.87962566103423978, sh.size());
  EXPECT_LE(s.max, 0.1 + 1e-7);
  EXPECT_GE(s.min, -0.1 - 1e-7);
}

TEST(Initializer, ConstantKinds) {
  std::vector<float> v;
  draw(make(InitKind::kZeros), Shape{3, 4}, &v);
  for (float x : v) EXPECT_EQ(x, 0.0f);
  draw(make(InitKind::kOnes), Shape{5}, &v);
  for (float x : v) EXPECT_EQ(x, 1.0f);
  draw(make(InitKind::kConstant, 0.25), Shape{2, 2, 2}, &v);
  for (float x : v) EXPECT_EQ(x, 0.25f);
}

TEST(Initializer, SameSeedSameValues) {
  std::vector<float> a, b, c;
  draw(make(InitKind::kGlorotUniform), Shape{10, 10}, &a, 42);
  draw(make(InitKind::kGlorotUniform), Shape{10, 10}, &b, 42);
  draw(make(InitKind::kGlorotUniform), Shape{10, 10}, &c, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(InitializerParse, AcceptsSnakeCaseClassNamesAndAliases) {
  EXPECT_EQ(parse_initializer(Json("glorot_uniform"), "k").kind, InitKind::kGlorotUniform);
  EXPECT_EQ(parse_initializer(Json("GlorotUniform"), "k").kind, InitKind::kGlorotUniform);
  EXPECT_EQ(parse_initializer(Json("he_normal"), "k").kind, InitKind::kHeNormal);
  EXPECT_EQ(parse_initializer(Json("zero"), "k").kind, InitKind::kZeros);
  EXPECT_EQ(parse_initializer(Json("uniform"), "k").kind, InitKind::kRandomUniform);
  for (const auto& n : initializer_names()) {
    const Initializer i = parse_initializer(Json(n), "k");
    EXPECT_EQ(initializer_name(i.kind), n);
    EXPECT_EQ(parse_initializer(Json(initializer_class(i.kind)), "k").kind, i.kind);
  }
  Initializer i = parse_initializer(Json("random_normal"), "k");
  EXPECT_DOUBLE_EQ(i.a, 0.0);
  EXPECT_DOUBLE_EQ(i.b, 0.05);
  i = parse_initializer(Json("random_uniform"), "k");
  EXPECT_DOUBLE_EQ(i.a, -0.05);
  EXPECT_DOUBLE_EQ(i.b, 0.05);
}

TEST(InitializerParse, PlanFormTakesOptions) {
  Initializer i = parse_initializer(Json::parse(R"({"RandomNormal": {"stddev": 0.1}})"), "k");
  EXPECT_EQ(i.kind, InitKind::kRandomNormal);
  EXPECT_DOUBLE_EQ(i.a, 0.0);
  EXPECT_DOUBLE_EQ(i.b, 0.1);
  i = parse_initializer(Json::parse(R"({"constant": {"value": "0.5"}})"), "k");
  EXPECT_EQ(i.kind, InitKind::kConstant);
  EXPECT_DOUBLE_EQ(i.a, 0.5);
}

TEST(InitializerParse, KerasFormWithSeedAndAxes) {
  const Json j = Json::parse(R"({"module": "keras.initializers", "class_name": "GlorotUniform",
      "config": {"seed": null, "input_axes": null, "output_axes": null},
      "registered_name": null})");
  EXPECT_EQ(parse_initializer(j, "kernel_initializer").kind, InitKind::kGlorotUniform);
  const Json t = Json::parse(R"({"class_name": "TruncatedNormal",
      "config": {"mean": 0.0, "stddev": 0.02, "seed": 7}})");
  Initializer i = parse_initializer(t, "kernel_initializer");
  EXPECT_EQ(i.kind, InitKind::kTruncatedNormal);
  EXPECT_DOUBLE_EQ(i.b, 0.02);
}

TEST(InitializerParse, ErrorsNameTheKeyAndListChoices) {
  try {
    parse_initializer(Json("xavier"), "kernel_initializer");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "kernel_initializer");
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown initializer \"xavier\""), std::string::npos) << m;
    EXPECT_NE(m.find("expected one of zeros, ones, constant, glorot_uniform"), std::string::npos)
        << m;
  }
  try {
    parse_initializer(Json::parse(R"({"RandomNormal": {"sigma": 0.1}})"), "bias_initializer");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "bias_initializer");
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown key 'sigma'"), std::string::npos) << m;
    EXPECT_NE(m.find("mean, stddev"), std::string::npos) << m;
  }
  EXPECT_THROW(parse_initializer(Json::parse(R"({"RandomNormal": {"stddev": -1}})"), "k"),
               ConfigError);
  // Orthogonal is supported now (recurrent kernels); Identity is still unknown.
  EXPECT_THROW(parse_initializer(Json::parse(R"({"class_name": "Identity", "config": {}})"), "k"),
               ConfigError);
  EXPECT_THROW(parse_initializer(Json(5), "k"), ConfigError);
}

TEST(InitializerParse, KerasFormRoundTrips) {
  for (const Initializer& i :
       {make(InitKind::kGlorotUniform), make(InitKind::kZeros), make(InitKind::kConstant, 0.3),
        make(InitKind::kRandomNormal, 0.1, 0.2), make(InitKind::kRandomUniform, -1, 2),
        make(InitKind::kTruncatedNormal, 0, 0.01), make(InitKind::kLecunNormal)}) {
    const Json j = initializer_to_keras(i);
    EXPECT_EQ(j["module"], "keras.initializers");
    EXPECT_EQ(j["class_name"], initializer_class(i.kind));
    const Initializer r = parse_initializer(j, "k");
    EXPECT_EQ(r.kind, i.kind);
    EXPECT_DOUBLE_EQ(r.a, i.a);
    EXPECT_DOUBLE_EQ(r.b, i.b);
  }
}

// Keras's Orthogonal: columns orthonormal when rows >= cols, rows orthonormal otherwise (the
// recurrent kernel [U,4U] is the wide case), scaled by the gain; the config round-trips.
TEST(Initializer, OrthogonalGivesOrthonormalRowsOrColumnsTimesGain) {
  for (const auto& [rows, cols, gain] :
       std::vector<std::tuple<int, int, double>>{{6, 6, 1.0}, {8, 3, 2.0}, {3, 12, 0.5}}) {
    std::vector<float> w;
    draw(make(InitKind::kOrthogonal, gain), Shape{rows, cols}, &w, 7);
    const bool tall = rows >= cols;
    const int k = tall ? cols : rows, len = tall ? rows : cols;
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b) {
        double dot = 0;
        for (int i = 0; i < len; ++i)
          dot += tall ? double(w[i * cols + a]) * w[i * cols + b]
                      : double(w[a * cols + i]) * w[b * cols + i];
        EXPECT_NEAR(dot, a == b ? gain * gain : 0.0, 1e-5) << rows << "x" << cols;
      }
  }
  const Initializer o = parse_initializer(
      Json{{"class_name", "OrthogonalInitializer"}, {"config", {{"gain", 1.5}, {"seed", nullptr}}}},
      "recurrent_initializer");
  EXPECT_EQ(o.kind, InitKind::kOrthogonal);
  EXPECT_EQ(o.a, 1.5);
  EXPECT_EQ(initializer_to_keras(o)["class_name"], "Orthogonal");
}

// LSTM unit_forget_bias: the forget gate's quarter of the bias is ones, the rest as initialized.
TEST(Initializer, UnitForgetBiasSetsTheSecondQuarterToOnes) {
  Initializer b = make(InitKind::kZeros);
  b.unit_forget_bias = true;
  std::vector<float> v;
  draw(b, Shape{12}, &v);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[i], (i >= 3 && i < 6) ? 1.0f : 0.0f) << i;
}

}  // namespace
}  // namespace nnfleet
