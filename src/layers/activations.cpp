// Element-wise activation layers: Activation (any named activation), and Keras's dedicated
// classes ReLU (max_value, negative_slope, threshold: ReLU6 is max_value 6), LeakyReLU
// (negative_slope, Keras 2's alpha; default 0.3), ELU (alpha 1.0), Softmax (over `axis`, an
// int or a list, default -1) and Rescaling (y = x * scale + offset).
#include <algorithm>

#include "layers/axes.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(std::string name, const char* cls, Activation act)
      : Layer(std::move(name)), cls_(cls), act_(act) {}
  const char* class_name() const override { return cls_; }
  Shape output_shape(const std::vector<Shape>& in) const override { return in[0]; }
  // Keras's activation layers support masking: element-wise, the mask passes through.
  MaskUse mask_use() const override { return MaskUse::kPropagate; }
  void forward(const LayerArgs& a) const override {
    const int64_t f = a.out_shape[-1];
    activation_forward(act_, static_cast<int64_t>(rows_floats(a.n, a.out_shape)) / f, f, a.x[0],
                       a.y);
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const int64_t f = a.out_shape[-1];
    activation_backward(act_, static_cast<int64_t>(rows_floats(a.n, a.out_shape)) / f, f, a.x[0],
                        a.y, a.dy, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    const std::string cls = cls_;
    if (cls == "Activation") {
      j["activation"] = activation_to_keras(act_);
    } else if (cls == "ReLU") {
      if (std::isinf(act_.max_value))
        j["max_value"] = nullptr;
      else
        j["max_value"] = act_.max_value;
      j["negative_slope"] = act_.alpha;
      j["threshold"] = act_.threshold;
    } else if (cls == "LeakyReLU") {
      j["negative_slope"] = act_.alpha;
    } else if (cls == "ELU") {
      j["alpha"] = act_.alpha;
    } else if (cls == "Softmax") {
      j["axis"] = -1;
    }
    return j;
  }

 private:
  const char* cls_;
  Activation act_;
};

// Softmax over axes other than the last one alone: each sample is viewed as rows of the
// softmax axes (layers/axes.h), gathered into scratch when they are not the trailing ones.
class AxisSoftmax final : public Layer {
 public:
  AxisSoftmax(std::string name, KerasAxes axes) : Layer(std::move(name)), axes_(std::move(axes)) {}
  const char* class_name() const override { return "Softmax"; }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    resolve_axes(axes_, in[0], "takes the softmax over");
    return in[0];
  }
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return 3 * static_cast<size_t>(in[0].size());
  }
  void forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const unsigned mask = resolve_axes_unchecked(axes_, s);
    const AxisSplit sp = split_axes(s, mask);
    const Activation act{Act::kSoftmax};
    if (sp.trailing) {
      activation_forward(act, a.n * sp.rows, sp.cols, a.x[0], a.y);
      return;
    }
    const int64_t per = s.size();
    float* xs = a.scratch;
    for (int i = 0; i < a.n; ++i) {
      const float* xi = a.x[0] + i * per;
      float* yi = a.y + i * per;
      for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { xs[k] = xi[o]; });
      activation_forward(act, sp.rows, sp.cols, xs, xs);
      for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { yi[o] = xs[k]; });
    }
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const Shape& s = a.in_shapes[0];
    const unsigned mask = resolve_axes_unchecked(axes_, s);
    const AxisSplit sp = split_axes(s, mask);
    const Activation act{Act::kSoftmax};
    if (sp.trailing) {
      activation_backward(act, a.n * sp.rows, sp.cols, a.x[0], a.y, a.dy, a.dx[0]);
      return;
    }
    const int64_t per = s.size();
    float* ys = a.scratch;
    float* dys = ys + per;
    float* dxs = dys + per;
    for (int i = 0; i < a.n; ++i) {
      const float* yi = a.y + i * per;
      const float* dyi = a.dy + i * per;
      for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) {
        ys[k] = yi[o];
        dys[k] = dyi[o];
        dxs[k] = 0.0f;
      });
      activation_backward(act, sp.rows, sp.cols, ys, ys, dys, dxs);
      float* dxi = a.dx[0] + i * per;
      for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { dxi[o] += dxs[k]; });
    }
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["axis"] = keras_axes_json(axes_);
    return j;
  }

 private:
  KerasAxes axes_;
};

class Rescaling final : public Layer {
 public:
  Rescaling(LayerConfig& c, const std::string& name) : Layer(name) {
    scale_ = static_cast<float>(c.get_float("scale"));
    offset_ = static_cast<float>(c.get_float("offset", 0.0));
  }
  const char* class_name() const override { return "Rescaling"; }
  Shape output_shape(const std::vector<Shape>& in) const override { return in[0]; }
  void forward(const LayerArgs& a) const override {
    const size_t m = rows_floats(a.n, a.out_shape);
    for (size_t i = 0; i < m; ++i) a.y[i] = a.x[0][i] * scale_ + offset_;
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const size_t m = rows_floats(a.n, a.out_shape);
    for (size_t i = 0; i < m; ++i) a.dx[0][i] += a.dy[i] * scale_;
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["scale"] = scale_;
    j["offset"] = offset_;
    return j;
  }

 private:
  float scale_ = 1.0f, offset_ = 0.0f;
};

}  // namespace

std::unique_ptr<Layer> make_activation(LayerConfig& c, const std::string& name) {
  if (!c.has("activation")) c.fail("activation", "an activation name");
  return std::make_unique<ActivationLayer>(name, "Activation",
                                           parse_activation(c.get_raw("activation"), "activation"));
}

std::unique_ptr<Layer> make_relu(LayerConfig& c, const std::string& name) {
  Activation a{Act::kRelu};
  if (c.has("max_value")) {
    a.max_value = static_cast<float>(c.get_float("max_value"));
    if (a.max_value < 0) c.fail("max_value", "a non-negative number or null");
  } else {
    c.ignore("max_value");
  }
  a.alpha = static_cast<float>(c.get_float("negative_slope", 0.0));
  a.threshold = static_cast<float>(c.get_float("threshold", 0.0));
  return std::make_unique<ActivationLayer>(name, "ReLU", a);
}

std::unique_ptr<Layer> make_leaky_relu(LayerConfig& c, const std::string& name) {
  Activation a{Act::kLeakyRelu, 0.3f};
  if (c.has("alpha"))
    a.alpha = static_cast<float>(c.get_float("alpha"));
  else
    c.ignore("alpha");
  a.alpha = static_cast<float>(c.get_float("negative_slope", a.alpha));
  return std::make_unique<ActivationLayer>(name, "LeakyReLU", a);
}

std::unique_ptr<Layer> make_elu(LayerConfig& c, const std::string& name) {
  Activation a{Act::kElu, static_cast<float>(c.get_float("alpha", 1.0))};
  return std::make_unique<ActivationLayer>(name, "ELU", a);
}

std::unique_ptr<Layer> make_softmax(LayerConfig& c, const std::string& name) {
  KerasAxes axes = parse_keras_axes(c, "axis", -1);
  if (axes.values.size() == 1 && axes.values[0] == -1)
    return std::make_unique<ActivationLayer>(name, "Softmax", Activation{Act::kSoftmax});
  return std::make_unique<AxisSoftmax>(name, std::move(axes));
}

std::unique_ptr<Layer> make_rescaling(LayerConfig& c, const std::string& name) {
  return std::make_unique<Rescaling>(c, name);
}

// One example per activation name, so every activation has its gradient check.
std::vector<LayerExample> activation_examples() {
  std::vector<LayerExample> ex;
  for (const auto& n : activation_names()) ex.push_back({{{"activation", n}}, {Shape{2, 5}}});
  return ex;
}
std::vector<LayerExample> relu_examples() {
  return {{{}, {Shape{6}}},
          {{{"max_value", 0.5}, {"negative_slope", 0.1}, {"threshold", -0.2}}, {Shape{2, 4}}}};
}
std::vector<LayerExample> leaky_relu_examples() {
  return {{{}, {Shape{6}}}, {{{"negative_slope", 0.05}}, {Shape{3, 2}}}};
}
std::vector<LayerExample> elu_examples() { return {{{{"alpha", 0.7}}, {Shape{6}}}}; }
std::vector<LayerExample> softmax_examples() {
  return {{{}, {Shape{2, 4}}},
          {{{"axis", 1}}, {Shape{3, 2}}},
          {{{"axis", Json{1, 3}}}, {Shape{2, 2, 3}}},
          {{{"axis", Json{-2, -1}}}, {Shape{2, 3, 2}}}};
}
std::vector<LayerExample> rescaling_examples() {
  return {{{{"scale", 0.5}, {"offset", -1.0}}, {Shape{2, 3}}}};
}

}  // namespace nnfleet
