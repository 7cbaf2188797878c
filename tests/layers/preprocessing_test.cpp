// Numeric preprocessing layers against Keras's documented results and NumPy's formulas:
// Normalization (config constants, adapted weights, invert, axes, the epsilon floor),
// NormalizationStats (adapt), Discretization (np.digitize) and CategoryEncoding.
#include "layers/preprocessing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "layers/registry.h"

namespace nnfleet {
namespace {

// One layer on one input: forward and backward over a batch of n, with given weights.
struct LayerRun {
  std::unique_ptr<Layer> layer;
  Shape in, out;
  std::vector<std::vector<float>> params;
  LayerRun(const char* cls, const Json& cfg, Shape s) : in(std::move(s)) {
    layer = make_layer(cls, cfg, ConfigMode::kPlan, "l");
    out = layer->output_shape({in});
    for (const auto& p : layer->param_specs({in}))
      params.emplace_back(static_cast<size_t>(p.shape.size()), 0.0f);
  }
  LayerArgs args(int n, const float*& x, std::vector<float*>& pp, std::vector<float>& scratch) {
    for (auto& v : params) pp.push_back(v.data());
    scratch.assign(layer->scratch_floats({in}, n) + 1, 0.0f);
    LayerArgs a;
    a.n = n;
    a.in_shapes = &in;
    a.out_shape = out;
    a.x = &x;
    a.params = pp.data();
    a.scratch = scratch.data();
    return a;
  }
  std::vector<float> forward(int n, const std::vector<float>& xv) {
    const float* x = xv.data();
    std::vector<float*> pp;
    std::vector<float> scratch, y(static_cast<size_t>(n * out.size()), -9.0f);
    LayerArgs a = args(n, x, pp, scratch);
    a.y = y.data();
    layer->forward(a);
    return y;
  }
  std::vector<float> backward(int n, const std::vector<float>& xv, const std::vector<float>& dy) {
    const float* x = xv.data();
    std::vector<float*> pp;
    std::vector<float> scratch, dx(xv.size(), 0.5f);  // backward adds to what is there
    float* dxp = dx.data();
    LayerArgs a = args(n, x, pp, scratch);
    a.dy = dy.data();
    a.dx = &dxp;
    layer->backward(a);
    return dx;
  }
};

void expect_near(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(Normalization, ConfigMeanAndVarianceAsKerasDocuments) {
  // keras.layers.Normalization(mean=3., variance=2.) on [[1.], [2.], [3.]].
  LayerRun r("Normalization", {{"mean", 3.0}, {"variance", 2.0}}, Shape{1});
  EXPECT_TRUE(r.params.empty());  // constants, not weights (as Keras builds them)
  expect_near(r.forward(3, {1, 2, 3}), {-1.4142135, -0.70710677, 0.0}, 1e-6);
  // The gradient is dy / sqrt(variance), added.
  expect_near(r.backward(3, {1, 2, 3}, {1, 2, 4}),
              {0.5 + 1 / std::sqrt(2.0), 0.5 + 2 / std::sqrt(2.0), 0.5 + 4 / std::sqrt(2.0)}, 1e-6);
}

TEST(Normalization, AdaptedInvertAsKerasDocuments) {
  // adapt([[0,7,4],[2,9,6],[0,7,4],[2,9,6]]) then invert=True on [[1,2,3]] gives [[2,10,8]].
  LayerRun r("Normalization", {{"axis", -1}, {"invert", true}}, Shape{3});
  ASSERT_EQ(r.params.size(), 3u);  // mean, variance, count
  NormalizationStats st(*r.layer, r.in);
  const std::vector<float> data = {0, 7, 4, 2, 9, 6, 0, 7, 4, 2, 9, 6};
  st.add_for_mean(data.data(), 4);
  st.add_for_variance(data.data(), 4);
  st.finish(r.params[0].data(), r.params[1].data(), r.params[2].data());
  expect_near(r.params[0], {1, 8, 5}, 0);  // np.mean(axis=0)
  expect_near(r.params[1], {1, 1, 1}, 0);  // np.var(axis=0), population
  EXPECT_EQ(r.params[2][0], 4.0f);
  expect_near(r.forward(1, {1, 2, 3}), {2, 10, 8}, 1e-6);
}

TEST(Normalization, AdaptReducesEveryAxisButTheKeptOnes) {
  // x [2 samples, 2, 3], axis 1 (the middle axis): numpy mean/var over axes (0, 2).
  LayerRun r("Normalization", {{"axis", 1}}, Shape{2, 3});
  const std::vector<float> x = {1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60};
  NormalizationStats st(*r.layer, r.in);
  st.add_for_mean(x.data(), 1);  // in chunks, as the fleet reads rows
  st.add_for_mean(x.data() + 6, 1);
  st.add_for_variance(x.data(), 1);
  st.add_for_variance(x.data() + 6, 1);
  st.finish(r.params[0].data(), r.params[1].data(), r.params[2].data());
  // np.mean([[1,2,3],[4,5,6]]) = 3.5, np.var = 35/12; the second row ten times both.
  expect_near(r.params[0], {3.5, 35}, 1e-6);
  expect_near(r.params[1], {35.0 / 12, 3500.0 / 12}, 1e-4);
  EXPECT_EQ(r.params[2][0], 6.0f);
  const auto y = r.forward(2, x);
  EXPECT_NEAR(y[0], (1 - 3.5) / std::sqrt(35.0 / 12), 1e-6);
  EXPECT_NEAR(y[11], (60 - 35) / std::sqrt(3500.0 / 12), 1e-6);
}

TEST(Normalization, ConfigStatsBroadcastFromTheRightAndZeroVarianceUsesTheEpsilonFloor) {
  // axis [1, 2] keeps [2, 3]; a mean of shape [3] applies to both rows.
  LayerRun r(
      "Normalization",
      {{"axis", Json{1, 2}}, {"mean", Json{1.0, 2.0, 3.0}}, {"variance", Json{4.0, 0.0, 1.0}}},
      Shape{2, 3});
  const auto y = r.forward(1, {3, 2, 5, 1, 2.5, 3});
  expect_near({y[0], y[2], y[3], y[5]}, {1, 2, 0, 0}, 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[4], 0.5 / 1e-7, 1.0);  // max(sqrt(0), 1e-7), Keras's backend.epsilon()
  EXPECT_EQ(r.layer->keras_config()["mean"], (Json{1.0, 2.0, 3.0}));
}

TEST(Normalization, RefusesHalfTheStatsAndStatsThatDoNotBroadcast) {
  try {
    make_layer("Normalization", {{"mean", 1.0}}, ConfigMode::kPlan, "n");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("both mean and variance, or neither"), std::string::npos)
        << e.what();
  }
  const auto l = make_layer("Normalization", {{"mean", Json{1.0, 2.0}}, {"variance", Json{1, 1}}},
                            ConfigMode::kPlan, "n");
  try {
    (void)l->output_shape({Shape{3}});
    FAIL() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("does not broadcast over the kept axes [3]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(
      make_layer("Normalization", {{"mean", 1.0}, {"variance", -1.0}}, ConfigMode::kPlan, "n"),
      ConfigError);
}

TEST(Discretization, DigitizesAsKerasDocuments) {
  // bin_boundaries [0., 1., 2.] on [[-1.5, 1.0, 3.4, .5], [0.0, 3.0, 1.3, 0.0]].
  const std::vector<float> x = {-1.5f, 1.0f, 3.4f, 0.5f, 0.0f, 3.0f, 1.3f, 0.0f};
  LayerRun r("Discretization", {{"bin_boundaries", Json{0.0, 1.0, 2.0}}}, Shape{4});
  expect_near(r.forward(2, x), {0, 2, 3, 1, 1, 3, 2, 1}, 0);
  LayerRun hot("Discretization",
               {{"bin_boundaries", Json{0.0, 1.0, 2.0}}, {"output_mode", "multi_hot"}}, Shape{4});
  EXPECT_EQ(hot.out, (Shape{4}));
  expect_near(hot.forward(2, x), {1, 1, 1, 1, 0, 1, 1, 1}, 0);
  LayerRun count("Discretization",
                 {{"bin_boundaries", Json{0.0, 1.0, 2.0}}, {"output_mode", "count"}}, Shape{4});
  expect_near(count.forward(2, x), {1, 1, 1, 1, 0, 2, 1, 1}, 0);
  LayerRun one("Discretization", {{"bin_boundaries", Json{0.0}}, {"output_mode", "one_hot"}},
               Shape{2});
  EXPECT_EQ(one.out, (Shape{2, 2}));
  expect_near(one.forward(1, {-1, 1}), {1, 0, 0, 1}, 0);
  // No gradient through the ids.
  expect_near(r.backward(2, x, std::vector<float>(8, 1.0f)), std::vector<double>(8, 0.5), 0);
}

TEST(Discretization, NumBinsWithoutBoundariesNeedsAdapt) {
  const auto l = make_layer("Discretization", {{"num_bins", 4}}, ConfigMode::kPlan, "d");
  try {
    (void)l->output_shape({Shape{3}});
    FAIL() << "expected a ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("num_bins but no bin_boundaries"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(
      make_layer("Discretization", {{"bin_boundaries", Json{1.0, 0.0}}}, ConfigMode::kPlan, "d"),
      ConfigError);  // not ascending
  EXPECT_THROW(make_layer("Discretization", {{"bin_boundaries", Json{0.0}}, {"sparse", true}},
                          ConfigMode::kPlan, "d"),
               ConfigError);
}

TEST(Discretization, AdaptFindsKerasQuantileBoundaries) {
  // Keras 3's Discretization(num_bins=4).adapt(x) on the same values (its epsilon 0.01): the
  // boundaries its summarize / compress_summary steps give, as float32.
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i * 37 % 1000) / 10.0f;
  const auto b = discretization_boundaries(x, 4, 0.01);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_FLOAT_EQ(static_cast<float>(b[0]), 24.89997673034668f);
  EXPECT_FLOAT_EQ(static_cast<float>(b[1]), 49.89998245239258f);
  EXPECT_FLOAT_EQ(static_cast<float>(b[2]), 74.89999389648438f);
  // Fewer values than 1/epsilon: each is its own point before the last compression.
  std::vector<float> few = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  const auto c = discretization_boundaries(few, 4, 0.01);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_FLOAT_EQ(static_cast<float>(c[0]), 1.4999998807907104f);
  EXPECT_FLOAT_EQ(static_cast<float>(c[1]), 3.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(c[2]), 5.0f);
}

TEST(CategoryEncoding, EncodesAsKerasDocumentsAndReadsIdsLikeEmbedding) {
  const std::vector<float> ids = {0, 1, 0, 0, 1, 2, 3, 1};  // [[0,1],[0,0],[1,2],[3,1]]
  LayerRun multi("CategoryEncoding", {{"num_tokens", 4}, {"output_mode", "multi_hot"}}, Shape{2});
  EXPECT_EQ(multi.layer->input_id_limit(), 4);
  expect_near(multi.forward(4, ids), {1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1}, 0);
  LayerRun count("CategoryEncoding", {{"num_tokens", 4}, {"output_mode", "count"}}, Shape{2});
  expect_near(count.forward(4, ids), {1, 1, 0, 0, 2, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1}, 0);
  // one_hot on [3, 2, 0, 1] as (None, 1): the size-1 axis is replaced by num_tokens.
  LayerRun one("CategoryEncoding", {{"num_tokens", 4}, {"output_mode", "one_hot"}}, Shape{1});
  EXPECT_EQ(one.out, (Shape{4}));
  expect_near(one.forward(4, {3, 2, 0, 1}), {0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0}, 0);
  // Keras's deprecated "binary" is multi_hot; num_tokens is required.
  EXPECT_EQ(make_layer("CategoryEncoding", {{"num_tokens", 2}, {"output_mode", "binary"}},
                       ConfigMode::kPlan, "c")
                ->keras_config()["output_mode"],
            "multi_hot");
  EXPECT_THROW(make_layer("CategoryEncoding", Json::object(), ConfigMode::kPlan, "c"), ConfigError);
}

}  // namespace
}  // namespace nnfleet
