// Golden parity with PyTorch (fixtures by tools/make_golden_fixtures.py and
// tools/make_sequence_golden_fixtures.py, computed in float64 with Keras's formulas): outputs,
// gradients, and weights after 3 Adam and 3 SGD-momentum steps, for a Dense model, a Conv2D
// model, a causal Conv1D model and a dilated Conv1D model; outputs, gradients and 3 Adam steps
// for recurrent models (tools/make_recurrent_golden_fixtures.py), among them a per-timestep
// classifier (labels [N,T]) and one whose Embedding(mask_zero) mask weights the loss; the same
// four for LayerNormalization (trailing and non-trailing axis) and UnitNormalization models
// (tools/make_norm_golden_fixtures.py), and for the convolution variants
// (tools/make_conv_variants_golden_fixtures.py: Conv2DTranspose, SeparableConv2D, grouped Conv2D
// + bilinear UpSampling2D + Cropping2D); outputs, gradients and 3 Adam steps for
// MultiHeadAttention (plain and causal) and AdditiveAttention self-attention models
// (tools/make_attention_golden_fixtures.py, PyTorch's multi_head_attention_forward). Compared
// within 1e-5 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "data/dataset.h"
#include "layers/registry.h"
#include "model/network.h"

namespace nnfleet {
namespace {

std::string fixture(const std::string& name) {
  return std::string(NNFLEET_SOURCE_DIR) + "/tests/model/fixtures/" + name + ".npy";
}

const float* floats(const Array& a) { return static_cast<const float*>(a.data()); }

void expect_close(const float* got, const Array& want, const std::string& what,
                  double abs_tol = 1e-7) {
  const float* w = floats(want);
  for (int64_t i = 0; i < want.shape().size(); ++i)
    EXPECT_NEAR(got[i], w[i], 1e-5 * std::fabs(w[i]) + abs_tol) << what << "[" << i << "]";
}

// MultiHeadAttention's key bias adds q.b to every score of a row, which the softmax cancels: its
// gradient is 0 but for rounding (1e-17 in the float64 fixtures, 1e-9 in float32), and Adam's
// steps of lr * g / (|g| + 1e-7) then move it by up to 1e-5 in float32 over 3 steps.
double adam_abs_tol(const std::string& prefix, int param) {
  return (prefix == "mha" || prefix == "mha_causal") && param == 3 ? 3e-5 : 1e-7;
}

// Attention models (tools/make_attention_golden_fixtures.py): self-attention over x [4, 6], then
// GlobalAveragePooling1D and Dense(3, softmax).
std::shared_ptr<const Model> attention_golden_model(const std::string& prefix) {
  Json cfg = {{"num_heads", 2}, {"key_dim", 3}};
  const char* cls = "MultiHeadAttention";
  if (prefix == "mha_causal")
    cfg = {{"num_heads", 2},
           {"key_dim", 3},
           {"value_dim", 2},
           {"output_shape", 5},
           {"use_causal_mask", true}};
  if (prefix == "additive") cls = "AdditiveAttention", cfg = Json::object();
  std::vector<ModelNode> nodes;
  nodes.push_back({make_layer(cls, cfg, ConfigMode::kPlan, "attention"), {0, 0}});
  nodes.push_back(
      {make_layer("GlobalAveragePooling1D", Json::object(), ConfigMode::kPlan, "gap"), {1}});
  nodes.push_back(
      {make_layer("Dense", {{"units", 3}, {"activation", "softmax"}}, ConfigMode::kPlan, "dense"),
       {2}});
  return std::make_shared<const Model>(prefix, std::vector<ModelInput>{{"x", Shape{4, 6}}},
                                       std::move(nodes), std::vector<int>{3});
}

std::shared_ptr<const Model> golden_model(const std::string& prefix) {
  if (prefix == "mha" || prefix == "mha_causal" || prefix == "additive")
    return attention_golden_model(prefix);
  std::vector<std::unique_ptr<Layer>> ls;
  auto add = [&](const char* cls, Json cfg, const char* name) {
    ls.push_back(make_layer(cls, cfg, ConfigMode::kPlan, name));
  };
  const std::map<std::string, std::pair<const char*, Json>> recurrent = {
      {"lstm", {"LSTM", {{"units", 4}}}},
      {"gru", {"GRU", {{"units", 4}}}},
      {"gru_plain", {"GRU", {{"units", 4}, {"reset_after", false}}}},
      {"simple_rnn", {"SimpleRNN", {{"units", 4}}}},
  };
  if (prefix == "bilstm") {
    add("Bidirectional", {{"layer", {{"class_name", "LSTM"}, {"config", {{"units", 4}}}}}}, "bi");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{5, 3}, std::move(ls));
  }
  if (prefix == "masked_lstm") {
    add("Masking", {{"mask_value", 0.0}}, "masking");
    add("LSTM", {{"units", 4}}, "rnn");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{5, 3}, std::move(ls));
  }
  if (prefix == "seq_lstm") {
    add("LSTM", {{"units", 4}, {"return_sequences", true}}, "rnn");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{5, 3}, std::move(ls));
  }
  if (prefix == "masked_seq_lstm") {
    add("Embedding", {{"input_dim", 6}, {"output_dim", 3}, {"mask_zero", true}}, "embedding");
    add("LSTM", {{"units", 4}, {"return_sequences", true}}, "rnn");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{5}, std::move(ls));
  }
  if (auto it = recurrent.find(prefix); it != recurrent.end()) {
    add(it->second.first, it->second.second, "rnn");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{5, 3}, std::move(ls));
  }
  if (prefix == "layer_norm") {
    add("Dense", {{"units", 5}, {"activation", "relu"}}, "dense");
    add("LayerNormalization", {{"axis", -1}, {"epsilon", 1e-3}}, "layer_normalization");
    add("Flatten", Json::object(), "flatten");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense_1");
    return Model::sequential(prefix, Shape{3, 4}, std::move(ls));
  }
  if (prefix == "layer_norm_axes") {
    add("LayerNormalization", {{"axis", 1}, {"epsilon", 1e-5}}, "layer_normalization");
    add("UnitNormalization", {{"axis", -1}}, "unit_normalization");
    add("Flatten", Json::object(), "flatten");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{3, 4}, std::move(ls));
  }
  if (prefix == "dense") {
    add("Dense", {{"units", 6}, {"activation", "relu"}}, "dense");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense_1");
    return Model::sequential("dense", Shape{5}, std::move(ls));
  }
  if (prefix == "conv1d_causal") {
    add("Conv1D",
        {{"filters", 3}, {"kernel_size", 3}, {"padding", "causal"}, {"activation", "relu"}},
        "conv1d");
    add("Flatten", Json::object(), "flatten");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential("conv1d_causal", Shape{7, 2}, std::move(ls));
  }
  if (prefix == "conv1d_dilated") {
    add("Conv1D",
        {{"filters", 3},
         {"kernel_size", 3},
         {"padding", "causal"},
         {"dilation_rate", 2},
         {"activation", "tanh"}},
        "conv1d");
    add("Conv1D", {{"filters", 2}, {"kernel_size", 2}, {"dilation_rate", 3}}, "conv1d_1");
    add("GlobalAveragePooling1D", Json::object(), "global_average_pooling1d");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential("conv1d_dilated", Shape{11, 2}, std::move(ls));
  }
  if (prefix == "conv_transpose") {
    add("Conv2DTranspose",
        {{"filters", 3},
         {"kernel_size", 3},
         {"strides", 2},
         {"padding", "same"},
         {"activation", "relu"}},
        "conv2d_transpose");
    add("Conv2DTranspose",
        {{"filters", 2},
         {"kernel_size", 3},
         {"strides", 2},
         {"output_padding", 1},
         {"activation", "tanh"}},
        "conv2d_transpose_1");
    add("GlobalAveragePooling2D", Json::object(), "global_average_pooling2d");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{3, 3, 2}, std::move(ls));
  }
  if (prefix == "separable_conv") {
    add("SeparableConv2D",
        {{"filters", 4},
         {"kernel_size", 3},
         {"depth_multiplier", 2},
         {"strides", 2},
         {"padding", "same"},
         {"activation", "relu"}},
        "separable_conv2d");
    add("SeparableConv2D", {{"filters", 3}, {"kernel_size", 2}}, "separable_conv2d_1");
    add("Flatten", Json::object(), "flatten");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{6, 6, 2}, std::move(ls));
  }
  if (prefix == "grouped_bilinear") {
    add("Conv2D", {{"filters", 4}, {"kernel_size", 3}, {"groups", 2}, {"activation", "relu"}},
        "conv2d");
    add("UpSampling2D", {{"interpolation", "bilinear"}}, "up_sampling2d");
    add("Cropping2D", {{"cropping", Json{Json{1, 0}, Json{0, 2}}}}, "cropping2d");
    add("Flatten", Json::object(), "flatten");
    add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
    return Model::sequential(prefix, Shape{5, 5, 4}, std::move(ls));
  }
  add("Conv2D", {{"filters", 2}, {"kernel_size", 3}, {"activation", "relu"}}, "conv2d");
  add("MaxPooling2D", {{"pool_size", 2}}, "max_pooling2d");
  add("Flatten", Json::object(), "flatten");
  add("Dense", {{"units", 3}, {"activation", "softmax"}}, "dense");
  return Model::sequential("conv", Shape{6, 6, 1}, std::move(ls));
}

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  // A network at the fixture's initial weights with its batch loaded.
  std::unique_ptr<Network> make(const Json& optimizer) {
    const std::string p = GetParam();
    auto net = std::make_unique<Network>(
        golden_model(p), 8,
        TrainSpec{parse_loss("sparse_categorical_crossentropy"), parse_optimizer(optimizer)});
    x_ = load_npy(fixture(p + "_x"));
    y_ = load_npy(fixture(p + "_y"));
    n_ = static_cast<int>(x_.rows());
    std::copy(floats(x_), floats(x_) + x_.shape().size(), net->input());
    float* dst = net->params();
    num_params_ = 0;
    for (size_t l = 0; l < net->model().num_layers(); ++l)
      num_params_ += static_cast<int>(net->model().planned(l).params.size());
    for (int i = 0; i < num_params_; ++i) {
      Array w = load_npy(fixture(p + "_w" + std::to_string(i)));
      dst = std::copy(floats(w), floats(w) + w.shape().size(), dst);
    }
    t_.labels = static_cast<const int32_t*>(y_.data());
    return net;
  }
  void expect_params(const Network& net, const std::string& kind) {
    const float* got = net.params();
    for (int i = 0; i < num_params_; ++i) {
      Array w = load_npy(fixture(GetParam() + "_" + kind + std::to_string(i)));
      expect_close(got, w, kind + " param " + std::to_string(i), adam_abs_tol(GetParam(), i));
      got += w.shape().size();
    }
  }
  Array x_, y_;
  int n_ = 0, num_params_ = 0;
  Targets t_;
};

void expect_forward_and_gradients(Golden& g, Network& net, int n, const Targets& t, int n_params) {
  const std::string p = g.GetParam();
  net.forward(n, false);
  expect_close(net.output(), load_npy(fixture(p + "_out")), "output");
  const double loss = net.train_step(n, t);
  EXPECT_NEAR(loss, floats(load_npy(fixture(p + "_loss")))[0], 1e-5 * loss);
  const float* grad = net.gradients();
  for (int i = 0; i < n_params; ++i) {
    Array w = load_npy(fixture(p + "_grad" + std::to_string(i)));
    expect_close(grad, w, "gradient " + std::to_string(i));
    grad += w.shape().size();
  }
}

TEST_P(Golden, ForwardLossAndGradientsMatchPyTorch) {
  auto net = make("adam");
  net->forward(n_, false);
  expect_close(net->output(), load_npy(fixture(GetParam() + "_out")), "output");
  const double loss = net->train_step(n_, t_);
  EXPECT_NEAR(loss, floats(load_npy(fixture(GetParam() + "_loss")))[0], 1e-5 * loss);
  const float* g = net->gradients();
  for (int i = 0; i < num_params_; ++i) {
    Array w = load_npy(fixture(GetParam() + "_grad" + std::to_string(i)));
    expect_close(g, w, "gradient " + std::to_string(i));
    g += w.shape().size();
  }
}

TEST_P(Golden, ThreeAdamStepsMatchKerasFormula) {
  auto net = make("adam");
  for (int s = 0; s < 3; ++s) net->train_step(n_, t_);
  expect_params(*net, "adam");
}

TEST_P(Golden, ThreeSgdMomentumStepsMatch) {
  auto net = make(Json{{"SGD", {{"learning_rate", 0.05}, {"momentum", 0.9}}}});
  for (int s = 0; s < 3; ++s) net->train_step(n_, t_);
  expect_params(*net, "sgdm");
}

INSTANTIATE_TEST_SUITE_P(Models, Golden,
                         ::testing::Values("dense", "conv", "conv1d_causal", "conv1d_dilated",
                                           "layer_norm", "layer_norm_axes", "conv_transpose",
                                           "separable_conv", "grouped_bilinear"));

// Recurrent models: fixtures hold outputs, gradients and Adam steps (no SGD-momentum run).
class GoldenRecurrent : public Golden {};

TEST_P(GoldenRecurrent, ForwardLossAndGradientsMatchPyTorch) {
  auto net = make("adam");
  expect_forward_and_gradients(*this, *net, n_, t_, num_params_);
}

TEST_P(GoldenRecurrent, ThreeAdamStepsMatchKerasFormula) {
  auto net = make("adam");
  for (int s = 0; s < 3; ++s) net->train_step(n_, t_);
  expect_params(*net, "adam");
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenRecurrent,
                         ::testing::Values("lstm", "gru", "gru_plain", "simple_rnn", "bilstm",
                                           "masked_lstm", "seq_lstm", "masked_seq_lstm"));

// Attention models: outputs, gradients and 3 Adam steps, as the recurrent ones.
INSTANTIATE_TEST_SUITE_P(Attention, GoldenRecurrent,
                         ::testing::Values("mha", "mha_causal", "additive"));

}  // namespace
}  // namespace nnfleet
