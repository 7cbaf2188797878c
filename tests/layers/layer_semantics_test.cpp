// Keras semantics of individual layers: shapes, padding, dropout scaling, batch normalization
// statistics, merge layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "kernels/recurrent.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

struct LayerRun {
  std::unique_ptr<Layer> layer;
  std::vector<Shape> ins;
  Shape out;
  std::vector<std::vector<float>> params;
  std::vector<float> y, cache, scratch;
  Rng rng{7};

  LayerRun(const char* cls, Json cfg, std::vector<Shape> in) : ins(std::move(in)) {
    layer = make_layer(cls, cfg, ConfigMode::kPlan, "l");
    out = layer->output_shape(ins);
    for (const auto& s : layer->param_specs(ins))
      params.emplace_back(static_cast<size_t>(s.shape.size()), 0.0f);
  }
  std::vector<float>& forward(int n, std::vector<std::vector<float>> xs, bool training,
                              const float* mask = nullptr) {
    std::vector<const float*> xp;
    for (auto& v : xs) xp.push_back(v.data());
    std::vector<float*> pp;
    for (auto& v : params) pp.push_back(v.data());
    y.assign(static_cast<size_t>(n * out.size()), 0.0f);
    cache.assign(layer->cache_floats(ins, n) + 1, 0.0f);
    scratch.assign(layer->scratch_floats(ins, n) + 1, 0.0f);
    LayerArgs a;
    a.n = n;
    a.training = training;
    a.n_inputs = static_cast<int>(xs.size());
    a.in_shapes = ins.data();
    a.out_shape = out;
    a.x = xp.data();
    a.y = y.data();
    a.params = pp.data();
    a.cache = cache.data();
    a.scratch = scratch.data();
    a.rng = &rng;
    a.mask = mask;
    layer->forward(a);
    return y;
  }
};

TEST(Conv2D, SamePaddingPutsTheExtraPixelAfter) {
  // 4x4 input, 2x2 kernel of ones, stride 2... use stride 1 "same": total pad 1, all of it after.
  LayerRun r("Conv2D",
             {{"filters", 1}, {"kernel_size", 2}, {"padding", "same"}, {"use_bias", false}},
             {Shape{3, 3, 1}});
  EXPECT_EQ(r.out, (Shape{3, 3, 1}));
  std::fill(r.params[0].begin(), r.params[0].end(), 1.0f);
  std::vector<float> x(9);
  std::iota(x.begin(), x.end(), 1.0f);  // 1..9
  auto& y = r.forward(1, {x}, false);
  // Top-left output covers x[0,0], x[0,1], x[1,0], x[1,1] = 1+2+4+5; the bottom-right sees only 9.
  EXPECT_FLOAT_EQ(y[0], 12.0f);
  EXPECT_FLOAT_EQ(y[8], 9.0f);
  EXPECT_FLOAT_EQ(y[2], 3.0f + 6.0f);
}

TEST(Conv2D, ValidAndStridedOutputShapesFollowKeras) {
  EXPECT_EQ(LayerRun("Conv2D", {{"filters", 8}, {"kernel_size", 3}}, {Shape{28, 28, 1}}).out,
            (Shape{26, 26, 8}));
  EXPECT_EQ(
      LayerRun("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"strides", 2}, {"padding", "same"}},
               {Shape{7, 7, 2}})
          .out,
      (Shape{4, 4, 4}));
  EXPECT_EQ(
      LayerRun("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"strides", 2}}, {Shape{7, 7, 2}})
          .out,
      (Shape{3, 3, 4}));
}

TEST(Conv2D, KernelLargerThanInputIsAClearError) {
  auto l = make_layer("Conv2D", {{"filters", 1}, {"kernel_size", 5}}, ConfigMode::kPlan, "c");
  try {
    l->output_shape({Shape{3, 3, 1}});
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("window 5x5 does not fit input [None,3,3,1]"),
              std::string::npos)
        << e.what();
  }
}

// A network hands a trained node's backward its own dy to overwrite (LayerArgs::dy_own): a fused
// ReLU's pre-activation gradient goes there instead of into the scratch, which is planned smaller
// by as much; the gradients are the same bits. Without dy_own, dy is left as it was.
TEST(Conv2D, BackwardOverItsOwnDyGivesTheSameGradientsWithLessScratch) {
  for (const char* act : {"relu", "tanh", "linear"}) {
    SCOPED_TRACE(act);
    LayerRun r("Conv2D", {{"filters", 5}, {"kernel_size", 3}, {"activation", act}},
               {Shape{9, 8, 3}});
    const int n = 4;
    Rng fill(11);
    for (auto& p : r.params)
      for (float& v : p) v = static_cast<float>(fill.uniform()) - 0.5f;
    std::vector<float> x(static_cast<size_t>(n * r.ins[0].size()));
    for (float& v : x) v = static_cast<float>(fill.uniform()) * 2.0f - 1.0f;
    r.forward(n, {x}, true);
    std::vector<float> dy(static_cast<size_t>(n * r.out.size()));
    for (float& v : dy) v = static_cast<float>(fill.uniform()) - 0.5f;
    const size_t full = r.layer->scratch_floats(r.ins, n);
    const size_t owning = r.layer->scratch_floats_owning_dy(r.ins, n);
    if (std::string(act) == "relu")
      EXPECT_EQ(full - owning, dy.size());
    else
      EXPECT_EQ(full, owning);
    auto run = [&](bool own, std::vector<float>& dy_buf, std::vector<float>& scratch) {
      std::vector<float> dx(x.size(), 0.0f);
      std::vector<std::vector<float>> dp;
      for (auto& p : r.params) dp.emplace_back(p.size(), 0.0f);
      std::vector<float*> dpp, pp;
      for (auto& v : dp) dpp.push_back(v.data());
      for (auto& v : r.params) pp.push_back(v.data());
      const float* xp = x.data();
      float* dxp = dx.data();
      LayerArgs a;
      a.n = n;
      a.training = true;
      a.in_shapes = r.ins.data();
      a.out_shape = r.out;
      a.x = &xp;
      a.y = r.y.data();
      a.params = pp.data();
      a.cache = r.cache.data();
      a.scratch = scratch.data();
      a.dy = dy_buf.data();
      if (own) a.dy_own = dy_buf.data();
      a.dx = &dxp;
      a.dparams = dpp.data();
      r.layer->backward(a);
      dp.push_back(dx);
      return dp;
    };
    std::vector<float> dy_kept = dy, dy_own = dy;
    std::vector<float> scratch_full(full), scratch_owning(owning);
    const auto want = run(false, dy_kept, scratch_full);
    const auto got = run(true, dy_own, scratch_owning);
    ASSERT_EQ(want.size(), got.size());
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_EQ(0, std::memcmp(want[k].data(), got[k].data(), want[k].size() * sizeof(float)))
          << "gradient " << k;
    EXPECT_EQ(dy_kept, dy);
  }
}

TEST(MaxPooling2D, StridesDefaultToPoolSizeAndSamePadsAfter) {
  EXPECT_EQ(LayerRun("MaxPooling2D", {{"pool_size", 2}}, {Shape{13, 13, 3}}).out, (Shape{6, 6, 3}));
  LayerRun r("MaxPooling2D", {{"pool_size", 2}, {"padding", "same"}}, {Shape{3, 3, 1}});
  EXPECT_EQ(r.out, (Shape{2, 2, 1}));
  std::vector<float> x = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
  auto& y = r.forward(1, {x}, false);
  EXPECT_FLOAT_EQ(y[3], -9.0f);  // the padded window holds only x[2,2]; padding never wins
}

TEST(AveragePooling2D, SamePaddingExcludesPadsFromTheCount) {
  LayerRun r("AveragePooling2D", {{"pool_size", 2}, {"padding", "same"}}, {Shape{3, 3, 1}});
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto& y = r.forward(1, {x}, false);
  EXPECT_FLOAT_EQ(y[0], 3.0f);
  EXPECT_FLOAT_EQ(y[1], 4.5f);  // (3 + 6) / 2
  EXPECT_FLOAT_EQ(y[3], 9.0f);
}

TEST(Dropout, ScalesKeptValuesAndIsIdentityAtInference) {
  LayerRun r("Dropout", {{"rate", 0.25}}, {Shape{1000}});
  std::vector<float> x(1000, 1.0f);
  auto y = r.forward(1, {x}, true);
  int kept = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.0f || std::fabs(v - 1.0f / 0.75f) < 1e-6f) << v;
    kept += v != 0.0f;
  }
  EXPECT_NEAR(kept, 750, 60);
  auto& yi = r.forward(1, {x}, false);
  for (float v : yi) EXPECT_EQ(v, 1.0f);
  // The mask is kept as one byte per value (W1's m7 held 0.6 MB of float mask per piece).
  EXPECT_EQ(r.layer->cache_floats(r.ins, 3), 750u);
}

// The mask draws two 24-bit uniforms per 64-bit random number, a block at a time: the kept
// fraction must still match 1 - rate on sizes with odd tails, and the backward must apply the same
// mask to the gradient.
TEST(Dropout, KeepsOneMinusRateOfValuesWhateverTheSizeAndBackwardUsesTheMask) {
  for (double rate : {0.1, 0.5, 0.9}) {
    const int size = 100001;
    LayerRun r("Dropout", {{"rate", rate}}, {Shape{size}});
    std::vector<float> x(size, 1.0f);
    const auto y = r.forward(1, {x}, true);
    int kept = 0;
    for (float v : y) kept += v != 0.0f;
    EXPECT_NEAR(static_cast<double>(kept) / size, 1.0 - rate, 0.01) << "rate " << rate;
    // Backward with dy = 1 into dx = 0 yields the mask itself, which here equals y.
    std::vector<float> dy(size, 1.0f), dx(size, 0.0f);
    const float* xp = x.data();
    float* dxp = dx.data();
    LayerArgs a;
    a.n = 1;
    a.training = true;
    a.n_inputs = 1;
    a.in_shapes = r.ins.data();
    a.out_shape = r.out;
    a.x = &xp;
    a.y = r.y.data();
    a.cache = r.cache.data();
    a.scratch = r.scratch.data();
    a.rng = &r.rng;
    a.dy = dy.data();
    a.dx = &dxp;
    r.layer->backward(a);
    EXPECT_EQ(dx, y) << "rate " << rate;
  }
}

TEST(BatchNormalization, TrainingUsesBatchStatisticsAndUpdatesMovingOnes) {
  LayerRun r("BatchNormalization", Json::object(), {Shape{1}});
  r.params = {{2.0f}, {0.5f}, {0.0f}, {1.0f}};  // gamma, beta, moving_mean, moving_variance
  std::vector<float> x = {1, 2, 3, 4};
  auto& y = r.forward(4, {x}, true);
  const double mean = 2.5, var = 1.25;
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(y[i], 2.0 * (x[i] - mean) / std::sqrt(var + 1e-3) + 0.5, 1e-5);
  EXPECT_NEAR(r.params[2][0], 0.01 * mean, 1e-6);
  EXPECT_NEAR(r.params[3][0], 0.99 + 0.01 * var, 1e-6);
  auto& yi = r.forward(1, {std::vector<float>{3.0f}}, false);
  EXPECT_NEAR(yi[0], 2.0 * (3.0 - r.params[2][0]) / std::sqrt(r.params[3][0] + 1e-3) + 0.5, 1e-5);
}

// Axis 1 (channels first) is taken since issue 35 (layers/channels_first.h); a middle axis is not.
TEST(BatchNormalization, RefusesANonLastAxis) {
  auto l = make_layer("BatchNormalization", {{"axis", 2}}, ConfigMode::kPlan, "bn");
  EXPECT_THROW(l->output_shape({Shape{4, 4, 3}}), ModelError);
  auto first = make_layer("BatchNormalization", {{"axis", 1}}, ConfigMode::kPlan, "bn");
  EXPECT_EQ(first->output_shape({Shape{4, 4, 3}}), (Shape{4, 4, 3}));
  auto ok = make_layer("BatchNormalization", {{"axis", Json{3}}}, ConfigMode::kKeras, "bn");
  EXPECT_EQ(ok->output_shape({Shape{4, 4, 3}}), (Shape{4, 4, 3}));
}

TEST(Concatenate, InterleavesInputsAlongTheAxis) {
  LayerRun r("Concatenate", {{"axis", -1}}, {Shape{2, 1}, Shape{2, 2}});
  EXPECT_EQ(r.out, (Shape{2, 3}));
  auto& y = r.forward(1, {{1, 2}, {3, 4, 5, 6}}, false);
  EXPECT_EQ(y, (std::vector<float>{1, 3, 4, 2, 5, 6}));
}

TEST(Add, RefusesDifferentShapes) {
  auto l = make_layer("Add", Json::object(), ConfigMode::kPlan, "add");
  EXPECT_THROW(l->output_shape({Shape{3}, Shape{4}}), ModelError);
}

TEST(Reshape, InfersTheMinusOneDimension) {
  EXPECT_EQ(LayerRun("Reshape", {{"target_shape", {-1, 4}}}, {Shape{2, 6}}).out, (Shape{3, 4}));
  auto l = make_layer("Reshape", {{"target_shape", {5, -1}}}, ConfigMode::kPlan, "r");
  EXPECT_THROW(l->output_shape({Shape{12}}), ModelError);
}

TEST(ReLU, MaxValueMakesReLU6) {
  LayerRun r("ReLU", {{"max_value", 6.0}}, {Shape{3}});
  auto& y = r.forward(1, {{-1.0f, 3.0f, 9.0f}}, false);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 3.0f, 6.0f}));
}

TEST(Conv1D, CausalOutputSeesOnlyThePastWithDilation) {
  // k=2, dilation 2, kernel of ones: y[t] = x[t-2] + x[t] (zeros before the start).
  LayerRun r("Conv1D",
             {{"filters", 1},
              {"kernel_size", 2},
              {"padding", "causal"},
              {"dilation_rate", 2},
              {"use_bias", false}},
             {Shape{5, 1}});
  EXPECT_EQ(r.out, (Shape{5, 1}));
  std::fill(r.params[0].begin(), r.params[0].end(), 1.0f);
  auto& y = r.forward(1, {{1, 2, 3, 4, 5}}, false);
  EXPECT_EQ(y, (std::vector<float>{1, 2, 4, 6, 8}));
}

TEST(Conv1D, RefusesGroupsOtherThanOne) {
  try {
    make_layer("Conv1D", Json{{"filters", 4}, {"kernel_size", 3}, {"groups", 2}},
               ConfigMode::kKeras, "c");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "groups");
    EXPECT_NE(std::string(e.what()).find("grouped Conv1D is not supported yet"), std::string::npos)
        << e.what();
  }
}

TEST(MaxPooling1D, OddLengthDropsThePartialWindow) {
  LayerRun r("MaxPooling1D", {{"pool_size", 2}}, {Shape{5, 1}});
  EXPECT_EQ(r.out, (Shape{2, 1}));
  EXPECT_EQ(r.forward(1, {{1, 5, 2, 3, 9}}, false), (std::vector<float>{5, 3}));
  LayerRun s("AveragePooling1D", {{"pool_size", 2}, {"padding", "same"}}, {Shape{5, 1}});
  EXPECT_EQ(s.out, (Shape{3, 1}));
  EXPECT_EQ(s.forward(1, {{1, 5, 2, 3, 9}}, false),
            (std::vector<float>{3, 2.5f, 9}));  // pad not counted
}

TEST(Embedding, LooksUpRowsAndMaskZeroProducesAMask) {
  LayerRun r("Embedding", {{"input_dim", 3}, {"output_dim", 2}}, {Shape{4}});
  EXPECT_EQ(r.out, (Shape{4, 2}));
  r.params[0] = {0, 1, 10, 11, 20, 21};
  EXPECT_EQ(r.forward(1, {{2, 0, 1, 2}}, false),
            (std::vector<float>{20, 21, 0, 1, 10, 11, 20, 21}));
  EXPECT_EQ(r.layer->mask_use(), MaskUse::kDrop);
  const auto masked =
      make_layer("Embedding", Json{{"input_dim", 3}, {"output_dim", 2}, {"mask_zero", true}},
                 ConfigMode::kKeras, "embedding_3");
  EXPECT_EQ(masked->mask_use(), MaskUse::kProduce);
  EXPECT_EQ(masked->keras_config()["mask_zero"], true);
  // The mask runs over the time axis: ids of rank 2 per sample have none.
  EXPECT_THROW(masked->output_shape({Shape{2, 3}}), ModelError);
}

TEST(UpSampling2D, RepeatsEachPixelOrInterpolatesAndRefusesLanczos) {
  LayerRun r("UpSampling2D", {{"size", Json{2, 1}}}, {Shape{1, 2, 1}});
  EXPECT_EQ(r.out, (Shape{2, 2, 1}));
  EXPECT_EQ(r.forward(1, {{3, 4}}, false), (std::vector<float>{3, 4, 3, 4}));
  // Half-pixel centres along the doubled width: samples at -0.25 (edge), 0.25, 0.75, 1.25 (edge).
  LayerRun b("UpSampling2D", {{"size", Json{1, 2}}, {"interpolation", "bilinear"}},
             {Shape{1, 2, 1}});
  EXPECT_EQ(b.forward(1, {{3, 4}}, false), (std::vector<float>{3, 3.25f, 3.75f, 4}));
  EXPECT_EQ(b.layer->keras_config()["interpolation"], "bilinear");
  // Keras 3's bicubic and area are tf.image.resize's (kernels/resize.h); lanczos is refused.
  EXPECT_EQ(make_layer("UpSampling2D", Json{{"interpolation", "bicubic"}}, ConfigMode::kKeras, "u")
                ->keras_config()["interpolation"],
            "bicubic");
  EXPECT_THROW(
      make_layer("UpSampling2D", Json{{"interpolation", "lanczos3"}}, ConfigMode::kKeras, "u"),
      ConfigError);
}

TEST(Conv2DTranspose, OutputSizesFollowKerasDeconvLength) {
  auto out = [](Json cfg, Shape in) { return LayerRun("Conv2DTranspose", cfg, {in}).out; };
  const Json base{{"filters", 2}, {"kernel_size", 3}, {"strides", 2}};
  Json same = base, valid_op = base, k1 = base;
  same["padding"] = "same";
  valid_op["output_padding"] = Json{1, 0};
  k1["kernel_size"] = 1;
  k1["strides"] = 3;
  EXPECT_EQ(out(base, Shape{7, 5, 4}), (Shape{15, 11, 2}));      // in*s + max(k - s, 0)
  EXPECT_EQ(out(same, Shape{7, 5, 4}), (Shape{14, 10, 2}));      // in*s
  EXPECT_EQ(out(valid_op, Shape{7, 5, 4}), (Shape{16, 11, 2}));  // (in-1)*s + k + p
  EXPECT_EQ(out(k1, Shape{2, 2, 1}), (Shape{6, 6, 2}));          // kernel below the stride
  LayerRun r("Conv2DTranspose", base, {Shape{7, 5, 4}});
  EXPECT_EQ(r.layer->param_specs(r.ins)[0].shape, (Shape{3, 3, 2, 4}));  // (kh, kw, out, in)
}

TEST(Conv2DTranspose, EachInputPixelAddsItsKernelWindowAtItsStride) {
  // 1x1 input of 2, kernel w[ky,kx] = 3*ky + kx + 1: valid gives 2*w; same (strides 2) keeps
  // output rows/cols [0, 2) of it (TensorFlow pads the associated convolution after).
  std::vector<float> w{1, 2, 3, 4, 5, 6, 7, 8, 9};
  LayerRun v("Conv2DTranspose", {{"filters", 1}, {"kernel_size", 3}, {"use_bias", false}},
             {Shape{1, 1, 1}});
  v.params[0] = w;
  EXPECT_EQ(v.forward(1, {{2}}, false), (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16, 18}));
  LayerRun s("Conv2DTranspose",
             {{"filters", 1}, {"kernel_size", 3}, {"strides", 2}, {"padding", "same"}},
             {Shape{1, 1, 1}});
  s.params[0] = w;
  s.params[1] = {0.5f};
  EXPECT_EQ(s.forward(1, {{2}}, false), (std::vector<float>{2.5f, 4.5f, 8.5f, 10.5f}));
}

TEST(Conv2DTranspose, RefusesDilationAnOutputPaddingNotBelowTheStrideAndSizesTensorFlowRefuses) {
  EXPECT_THROW(
      make_layer("Conv2DTranspose", {{"filters", 1}, {"kernel_size", 3}, {"dilation_rate", 2}},
                 ConfigMode::kKeras, "t"),
      ConfigError);
  EXPECT_THROW(
      make_layer("Conv2DTranspose",
                 {{"filters", 1}, {"kernel_size", 3}, {"strides", 2}, {"output_padding", 2}},
                 ConfigMode::kKeras, "t"),
      ConfigError);
  // Even kernel, "same", output_padding 0: (3-1)*2 + 0 = 4 rows, whose convolution gives 2, not 3.
  auto l = make_layer("Conv2DTranspose",
                      {{"filters", 1},
                       {"kernel_size", 2},
                       {"strides", 2},
                       {"padding", "same"},
                       {"output_padding", 0}},
                      ConfigMode::kKeras, "t");
  EXPECT_THROW(l->output_shape({Shape{3, 3, 1}}), ModelError);
}

TEST(Conv2D, GroupsSplitChannelsAndFiltersAndMustDivideBoth) {
  // 2 groups, 1x1 kernel: output 0 sees input channel 0, output 1 input channel 1.
  LayerRun r("Conv2D", {{"filters", 2}, {"kernel_size", 1}, {"groups", 2}, {"use_bias", false}},
             {Shape{1, 1, 2}});
  ASSERT_EQ(r.layer->param_specs(r.ins)[0].shape, (Shape{1, 1, 1, 2}));
  r.params[0] = {10, 100};
  EXPECT_EQ(r.forward(1, {{1, 2}}, false), (std::vector<float>{10, 200}));
  EXPECT_EQ(r.layer->keras_config()["groups"], 2);
  EXPECT_THROW(make_layer("Conv2D", {{"filters", 3}, {"kernel_size", 1}, {"groups", 2}},
                          ConfigMode::kKeras, "c"),
               ConfigError);
  auto l = make_layer("Conv2D", {{"filters", 4}, {"kernel_size", 1}, {"groups", 2}},
                      ConfigMode::kKeras, "c");
  EXPECT_THROW(l->output_shape({Shape{3, 3, 3}}), ModelError);
}

TEST(SeparableConv2D, DepthwiseThenPointwiseWithKerasWeightNames) {
  LayerRun r("SeparableConv2D", {{"filters", 1}, {"kernel_size", 1}, {"depth_multiplier", 2}},
             {Shape{1, 1, 1}});
  const auto specs = r.layer->param_specs(r.ins);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].name, "depthwise_kernel");
  EXPECT_EQ(specs[0].shape, (Shape{1, 1, 1, 2}));
  EXPECT_EQ(specs[1].name, "pointwise_kernel");
  EXPECT_EQ(specs[1].shape, (Shape{1, 1, 2, 1}));
  r.params[0] = {2, 3};
  r.params[1] = {10, 100};
  r.params[2] = {0.5f};
  EXPECT_EQ(r.forward(1, {{1}}, false), (std::vector<float>{320.5f}));  // 2*10 + 3*100 + 0.5
}

TEST(Cropping2D, KeepsTheInnerRowsAndColumns) {
  LayerRun r("Cropping2D", {{"cropping", Json{Json{1, 0}, Json{0, 1}}}}, {Shape{2, 3, 1}});
  EXPECT_EQ(r.out, (Shape{1, 2, 1}));
  EXPECT_EQ(r.forward(1, {{1, 2, 3, 4, 5, 6}}, false), (std::vector<float>{4, 5}));
  auto l = make_layer("Cropping2D", {{"cropping", 1}}, ConfigMode::kKeras, "c");
  EXPECT_THROW(l->output_shape({Shape{2, 5, 1}}), ModelError);
}

TEST(SequenceReshaping, UpSamplingCroppingPaddingRepeatAndPermuteMoveValuesAsKeras) {
  EXPECT_EQ(LayerRun("UpSampling1D", {{"size", 2}}, {Shape{2, 1}}).forward(1, {{1, 2}}, false),
            (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(LayerRun("Cropping1D", {{"cropping", Json{1, 2}}}, {Shape{5, 1}})
                .forward(1, {{1, 2, 3, 4, 5}}, false),
            (std::vector<float>{2, 3}));
  EXPECT_EQ(LayerRun("ZeroPadding1D", {{"padding", Json{1, 2}}}, {Shape{2, 1}})
                .forward(1, {{1, 2}}, false),
            (std::vector<float>{0, 1, 2, 0, 0}));
  EXPECT_EQ(LayerRun("RepeatVector", {{"n", 2}}, {Shape{2}}).forward(1, {{1, 2}}, false),
            (std::vector<float>{1, 2, 1, 2}));
  LayerRun p("Permute", {{"dims", Json{2, 1}}}, {Shape{2, 3}});
  EXPECT_EQ(p.out, (Shape{3, 2}));
  EXPECT_EQ(p.forward(1, {{1, 2, 3, 4, 5, 6}}, false), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(TimeDistributed, AppliesTheWrappedLayerToEveryStep) {
  const Json cfg{
      {"layer", {{"class_name", "Dense"}, {"config", {{"units", 1}, {"use_bias", false}}}}}};
  LayerRun r("TimeDistributed", cfg, {Shape{3, 2}});
  EXPECT_EQ(r.out, (Shape{3, 1}));
  ASSERT_EQ(r.params.size(), 1u);
  r.params[0] = {1, 10};
  EXPECT_EQ(r.forward(1, {{1, 2, 3, 4, 5, 6}}, false), (std::vector<float>{21, 43, 65}));
  EXPECT_EQ(r.layer->keras_config()["layer"]["class_name"], "Dense");
}

// Bidirectional over a post-padded, masked sequence: the forward half carries its state over
// the padding, the backward half starts at the last real step, and with return_sequences both
// output zeros at masked steps (tf.keras >= 2.2.4 and Keras 3); the backward half is reversed
// back into time order before the concat.
TEST(Bidirectional, MaskedBackwardHalfStartsAtLastRealStep) {
  const Json lstm = {{"class_name", "LSTM"},
                     {"config", {{"units", 2}, {"return_sequences", true}}}};
  LayerRun r("Bidirectional", {{"layer", lstm}}, {Shape{4, 1}});
  ASSERT_EQ(r.out, (Shape{4, 4}));
  float v = 0.1f;
  for (auto& p : r.params)
    for (float& w : p) w = (v = -v * 1.3f + 0.05f);
  const std::vector<float> x = {0.5f, -1.0f, 0.0f, 0.0f}, mask = {1, 1, 0, 0};
  const auto y = r.forward(1, {x}, false, mask.data());
  // Only the real steps [0.5, -1.0], run each way from a zero state.
  RnnDims d;
  d.n = 1, d.t = 2, d.in = 1, d.units = 2, d.return_sequences = true;
  std::vector<float> yf(4), yb(4);
  rnn_forward_ref(d, x.data(), r.params[0].data(), r.params[1].data(), r.params[2].data(), nullptr,
                  yf.data());
  d.go_backwards = true;
  rnn_forward_ref(d, x.data(), r.params[3].data(), r.params[4].data(), r.params[5].data(), nullptr,
                  yb.data());
  const std::vector<float> want = {yf[0], yf[1], yb[2], yb[3],  // t = 0: backward's last step
                                   yf[2], yf[3], yb[0], yb[1],  // t = 1: backward's first step
                                   0,     0,     0,     0,     0, 0, 0, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
}

// Bidirectional with dropout and recurrent_dropout trains as Keras's two layers do: each half
// draws its own per-sequence masks, the forward half first and then the backward half from the
// same stream, exactly as the two recurrent layers run alone one after the other; inference is
// unaffected.
TEST(Bidirectional, DropoutHalvesDrawTheirOwnMasksAsTheWrappedLayersDoAlone) {
  for (const char* cls : {"SimpleRNN", "LSTM", "GRU"}) {
    SCOPED_TRACE(cls);
    const Json cfg = {
        {"units", 3}, {"return_sequences", true}, {"dropout", 0.3}, {"recurrent_dropout", 0.4}};
    const int n = 2, t = 4, in = 3, u = 3;
    LayerRun bi("Bidirectional", {{"layer", {{"class_name", cls}, {"config", cfg}}}},
                {Shape{t, in}});
    Json back_cfg = cfg;
    back_cfg["go_backwards"] = true;
    LayerRun fwd(cls, cfg, {Shape{t, in}}), bwd(cls, back_cfg, {Shape{t, in}});
    Rng w(11);
    for (auto& p : bi.params)
      for (float& v : p) v = 0.5f * static_cast<float>(w.normal());
    const size_t np = fwd.params.size();
    for (size_t k = 0; k < np; ++k) {
      fwd.params[k] = bi.params[k];
      bwd.params[k] = bi.params[np + k];
    }
    std::vector<float> x(static_cast<size_t>(n * t * in));
    for (float& v : x) v = static_cast<float>(w.normal());
    bi.rng = Rng(5);
    fwd.rng = Rng(5);
    const auto y = bi.forward(n, {x}, true);
    const auto yf = fwd.forward(n, {x}, true);
    bwd.rng = fwd.rng;  // the backward half continues the stream
    const auto yb = bwd.forward(n, {x}, true);
    for (int r = 0; r < n; ++r)
      for (int s = 0; s < t; ++s)
        for (int j = 0; j < u; ++j) {
          const size_t o = (static_cast<size_t>(r) * t + s) * 2 * u;
          EXPECT_EQ(y[o + j], yf[(static_cast<size_t>(r) * t + s) * u + j]);
          EXPECT_EQ(y[o + u + j], yb[(static_cast<size_t>(r) * t + (t - 1 - s)) * u + j]);
        }
    // Training differs from inference, which is the plain layer's.
    Json plain_cfg = cfg;
    plain_cfg.erase("dropout");
    plain_cfg.erase("recurrent_dropout");
    LayerRun plain("Bidirectional", {{"layer", {{"class_name", cls}, {"config", plain_cfg}}}},
                   {Shape{t, in}});
    plain.params = bi.params;
    EXPECT_NE(y, plain.forward(n, {x}, false));
    EXPECT_EQ(bi.forward(n, {x}, false), plain.forward(n, {x}, false));
    EXPECT_EQ(bi.layer->training_refusal(), "");
  }
}

TEST(Recurrent, StatefulIsRefusedByName) {
  try {
    make_layer("LSTM", {{"units", 2}, {"stateful", true}}, ConfigMode::kKeras, "lstm");
    ADD_FAILURE() << "stateful was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "stateful");
    EXPECT_NE(std::string(e.what()).find("expected false"), std::string::npos) << e.what();
  }
}

// return_state: the final states are outputs 1 (and 2 for LSTM's c) of the layer; initial states
// are further inputs of [units] each, and a wrong one names its shape.
TEST(Recurrent, ReturnStateAddsStateOutputsAndInitialStatesAreInputs) {
  auto lstm = make_layer("LSTM", {{"units", 3}, {"return_state", true}}, ConfigMode::kKeras, "l");
  EXPECT_EQ(lstm->extra_output_shapes({Shape{4, 2}}), (std::vector<Shape>{Shape{3}, Shape{3}}));
  EXPECT_EQ(lstm->optional_inputs(), 2);
  EXPECT_EQ(lstm->keras_config()["return_state"], true);
  auto gru = make_layer("GRU", {{"units", 3}, {"return_state", true}}, ConfigMode::kKeras, "g");
  EXPECT_EQ(gru->extra_output_shapes({Shape{4, 2}}), (std::vector<Shape>{Shape{3}}));
  EXPECT_EQ(gru->optional_inputs(), 1);
  auto plain = make_layer("SimpleRNN", {{"units", 3}}, ConfigMode::kKeras, "s");
  EXPECT_TRUE(plain->extra_output_shapes({Shape{4, 2}}).empty());
  try {
    lstm->output_shape({Shape{4, 2}, Shape{3}, Shape{2}});
    ADD_FAILURE() << "a [2] state was accepted for 3 units";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("initial state 2 of shape [None,2]; expected [None,3]"),
              std::string::npos)
        << e.what();
  }
  // Bidirectional: the forward layer's states, then the backward layer's; initial states split
  // half and half.
  auto bi = make_layer(
      "Bidirectional",
      {{"layer", {{"class_name", "LSTM"}, {"config", {{"units", 2}, {"return_state", true}}}}}},
      ConfigMode::kKeras, "b");
  EXPECT_EQ(bi->extra_output_shapes({Shape{4, 3}}), (std::vector<Shape>(4, Shape{2})));
  EXPECT_EQ(bi->optional_inputs(), 4);
  EXPECT_EQ(bi->output_shape({Shape{4, 3}, Shape{2}, Shape{2}, Shape{2}, Shape{2}}), Shape{4});
  EXPECT_EQ(bi->keras_config()["layer"]["config"]["return_state"], true);
  try {
    make_layer(
        "Bidirectional",
        {{"layer", {{"class_name", "LSTM"}, {"config", {{"units", 2}, {"return_state", true}}}}},
         {"backward_layer",
          {{"class_name", "LSTM"}, {"config", {{"units", 2}, {"go_backwards", true}}}}}},
        ConfigMode::kKeras, "b");
    ADD_FAILURE() << "halves with different return_state were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the same return_state as 'layer'"), std::string::npos)
        << e.what();
  }
  auto mixed =
      make_layer("Bidirectional",
                 {{"layer", {{"class_name", "LSTM"}, {"config", {{"units", 2}}}}},
                  {"backward_layer",
                   {{"class_name", "GRU"}, {"config", {{"units", 2}, {"go_backwards", true}}}}}},
                 ConfigMode::kKeras, "b");
  try {
    mixed->output_shape({Shape{4, 3}, Shape{2}, Shape{2}, Shape{2}});
    ADD_FAILURE() << "initial states for an LSTM and a GRU half were accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("split half and half"), std::string::npos) << e.what();
  }
}

// Keras's input dropout in recurrent layers: one mask per sample and sequence (0 or 1/(1-rate)
// for each feature), drawn from the layer's stream and applied at every step; inference ignores
// it.
TEST(RecurrentDropout, OneInputMaskPerSequenceReusedAtEveryStep) {
  for (const char* cls : {"SimpleRNN", "LSTM", "GRU"}) {
    SCOPED_TRACE(cls);
    const int n = 3, t = 4, in = 5;
    const Json cfg = {{"units", 2}, {"return_sequences", true}};
    Json dropped = cfg;
    dropped["dropout"] = 0.5;
    LayerRun plain(cls, cfg, {Shape{t, in}}), drop(cls, dropped, {Shape{t, in}});
    Rng w(3);
    for (auto& p : plain.params)
      for (float& v : p) v = 0.5f * static_cast<float>(w.normal());
    drop.params = plain.params;
    std::vector<float> x(static_cast<size_t>(n) * t * in);
    for (float& v : x) v = static_cast<float>(w.normal());
    // Inference: the dropout rate changes nothing.
    EXPECT_EQ(drop.forward(n, {x}, false), plain.forward(n, {x}, false));
    const std::vector<float> y = drop.forward(n, {x}, true);
    RnnDims d;
    d.cell = std::string(cls) == "LSTM"  ? RnnCell::kLstm
             : std::string(cls) == "GRU" ? RnnCell::kGru
                                         : RnnCell::kSimple;
    d.n = n, d.t = t, d.in = in, d.units = 2, d.return_sequences = true;
    const float* mask = drop.cache.data() + rnn_cache_floats(d);
    int zeros = 0;
    for (int i = 0; i < n * in; ++i) {
      EXPECT_TRUE(mask[i] == 0.0f || mask[i] == 2.0f) << mask[i];
      zeros += mask[i] == 0.0f;
    }
    EXPECT_GT(zeros, 0);
    EXPECT_LT(zeros, n * in);
    // Training equals inference on the inputs times the per-sequence mask, broadcast over time.
    std::vector<float> xm = x;
    for (int s = 0; s < n; ++s)
      for (int k = 0; k < t; ++k)
        for (int i = 0; i < in; ++i)
          xm[(static_cast<size_t>(s) * t + k) * in + i] *= mask[s * in + i];
    const std::vector<float> want = plain.forward(n, {xm}, false);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
  }
}

// recurrent_dropout (Keras's DropoutRNNCell): one mask per sample and sequence over the previous
// state, fixed for every step. With a linear SimpleRNN whose kernel is 0, bias 1 and recurrent
// kernel the identity, unit k follows h_t = 1 + m_k h_{t-1}: all ones where the mask drops it,
// 1, 1 + s, 1 + s + s^2, ... (s = 1 / (1 - rate)) where it keeps it, and never switches.
TEST(RecurrentDropout, RecurrentMaskIsFixedPerSequenceAndInferenceIgnoresIt) {
  const int n = 4, t = 6, u = 8;
  const Json cfg = {{"units", u}, {"activation", "linear"}, {"return_sequences", true}};
  Json dropped = cfg;
  dropped["recurrent_dropout"] = 0.5;
  LayerRun plain("SimpleRNN", cfg, {Shape{t, 1}}), drop("SimpleRNN", dropped, {Shape{t, 1}});
  for (int k = 0; k < u; ++k) drop.params[1][static_cast<size_t>(k) * u + k] = 1.0f;
  for (float& b : drop.params[2]) b = 1.0f;
  plain.params = drop.params;
  const std::vector<float> x(static_cast<size_t>(n) * t, 0.3f);
  EXPECT_EQ(drop.forward(n, {x}, false), plain.forward(n, {x}, false));
  const std::vector<float> y = drop.forward(n, {x}, true);
  int kept = 0;
  std::vector<int> pattern;
  for (int s = 0; s < n; ++s)
    for (int k = 0; k < u; ++k) {
      const bool keeps = y[(static_cast<size_t>(s) * t + 1) * u + k] > 1.5f;
      kept += keeps;
      pattern.push_back(keeps);
      float want = 1.0f;
      for (int step = 0; step < t; ++step) {
        EXPECT_FLOAT_EQ(y[(static_cast<size_t>(s) * t + step) * u + k], want)
            << "sample " << s << " unit " << k << " step " << step;
        want = 1.0f + (keeps ? 2.0f * want : 0.0f);
      }
    }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n * u);
  // Each sample draws its own mask.
  EXPECT_FALSE(std::equal(pattern.begin(), pattern.begin() + u, pattern.begin() + u) &&
               std::equal(pattern.begin(), pattern.begin() + u, pattern.begin() + 2 * u));
}

// Inference ignores recurrent_dropout in every cell, and it trains, inside Bidirectional too.
TEST(RecurrentDropout, InferenceIsUnaffectedAndItTrainsEverywhere) {
  for (const char* cls : {"SimpleRNN", "LSTM", "GRU"}) {
    SCOPED_TRACE(cls);
    const Json cfg = {{"units", 3}, {"return_sequences", true}};
    Json dropped = cfg;
    dropped["recurrent_dropout"] = 0.4;
    dropped["dropout"] = 0.2;
    LayerRun plain(cls, cfg, {Shape{5, 2}}), drop(cls, dropped, {Shape{5, 2}});
    Rng w(4);
    for (auto& p : plain.params)
      for (float& v : p) v = 0.5f * static_cast<float>(w.normal());
    drop.params = plain.params;
    std::vector<float> x(2 * 5 * 2);
    for (float& v : x) v = static_cast<float>(w.normal());
    EXPECT_EQ(drop.forward(2, {x}, false), plain.forward(2, {x}, false));
    EXPECT_NE(drop.forward(2, {x}, true), plain.forward(2, {x}, false));
    EXPECT_EQ(drop.layer->training_refusal(), "");
  }
  auto b = make_layer(
      "Bidirectional",
      {{"layer", {{"class_name", "GRU"}, {"config", {{"units", 2}, {"recurrent_dropout", 0.2}}}}}},
      ConfigMode::kPlan, "b");
  EXPECT_EQ(b->training_refusal(), "");
  EXPECT_EQ(make_layer("GRU", {{"units", 2}, {"dropout", 0.2}}, ConfigMode::kPlan, "g")
                ->training_refusal(),
            "");
}

}  // namespace
}  // namespace nnfleet
