// Element-wise activation layers: Activation (any named activation), and Keras's dedicated
// classes ReLU (max_value, negative_slope, threshold: ReLU6 is max_value 6), LeakyReLU
// (negative_slope, Keras 2's alpha; default 0.3), ELU (alpha 1.0), Softmax (last axis) and
// Rescaling (y = x * scale + offset).
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
    activation_forward(act_, static_cast<int64_t>(rows_floats(a.n, a.out_shape)) / f, f, a.x[0], a.y);
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
      j["activation"] = activation_name(act_);
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
  if (c.has("alpha")) a.alpha = static_cast<float>(c.get_float("alpha"));
  else c.ignore("alpha");
  a.alpha = static_cast<float>(c.get_float("negative_slope", a.alpha));
  return std::make_unique<ActivationLayer>(name, "LeakyReLU", a);
}

std::unique_ptr<Layer> make_elu(LayerConfig& c, const std::string& name) {
  Activation a{Act::kElu, static_cast<float>(c.get_float("alpha", 1.0))};
  return std::make_unique<ActivationLayer>(name, "ELU", a);
}

std::unique_ptr<Layer> make_softmax(LayerConfig& c, const std::string& name) {
  const Json* ax = c.get_raw("axis");
  if (ax) {
    const Json& v = ax->is_array() && ax->size() == 1 ? (*ax)[0] : *ax;
    if (!v.is_number_integer() || v.get<int64_t>() != -1)
      c.fail("axis", "-1 (softmax over the last axis)");
  }
  return std::make_unique<ActivationLayer>(name, "Softmax", Activation{Act::kSoftmax});
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
std::vector<LayerExample> softmax_examples() { return {{{}, {Shape{2, 4}}}}; }
std::vector<LayerExample> rescaling_examples() {
  return {{{{"scale", 0.5}, {"offset", -1.0}}, {Shape{2, 3}}}};
}

}  // namespace nnfleet
