// Dense: y = activation(x W + b), Keras semantics. Input [N,I] (rank 2; no implicit flattening),
// kernel [I,O] (Keras layout), bias [O]. With a non-linear activation the pre-activation z is kept
// in the cache for backward.
#include "kernels/gemm.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class Dense final : public Layer {
 public:
  Dense(LayerConfig& c, const std::string& name) : Layer(name) {
    units_ = c.get_int("units");
    act_ = parse_activation(c.get_raw("activation"), "activation");
    use_bias_ = c.get_bool("use_bias", true);
    kinit_ = parse_init_option(c, "kernel_initializer", "glorot_uniform");
    binit_ = parse_init_option(c, "bias_initializer", "zeros");
  }
  const char* class_name() const override { return "Dense"; }

  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 1, "add a Flatten before it");
    return Shape{units_};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    std::vector<ParamSpec> p{{"kernel", Shape{in[0][0], units_}, kinit_, true}};
    if (use_bias_) p.push_back({"bias", Shape{units_}, binit_, true});
    return p;
  }
  size_t cache_floats(const std::vector<Shape>&, int n) const override {
    return fused_cache_floats(act_, static_cast<size_t>(n) * units_);
  }
  size_t scratch_floats(const std::vector<Shape>&, int n) const override {
    return act_.kind == Act::kLinear ? 0 : static_cast<size_t>(n) * units_;
  }
  void forward(const LayerArgs& a) const override {
    const int in = static_cast<int>(a.in_shapes[0][0]), out = static_cast<int>(units_);
    const float* b = use_bias_ ? a.params[1] : nullptr;
    dense_forward(a.n, in, out, a.x[0], a.params[0], b, fused_z(act_, a));
    fused_activation_forward(act_, a.n, out, a);
  }
  void backward(const LayerArgs& a) const override {
    const int in = static_cast<int>(a.in_shapes[0][0]), out = static_cast<int>(units_);
    const float* dz = pre_activation_grad(act_, a.n, out, a, a.scratch);
    dense_backward(a.n, in, out, a.x[0], a.params[0], dz, a.dx[0], a.dparams[0],
                   use_bias_ ? a.dparams[1] : nullptr);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["units"] = units_;
    j["activation"] = activation_name(act_);
    j["use_bias"] = use_bias_;
    j["kernel_initializer"] = initializer_to_keras(kinit_);
    j["bias_initializer"] = initializer_to_keras(binit_);
    j["kernel_regularizer"] = nullptr;
    j["bias_regularizer"] = nullptr;
    j["kernel_constraint"] = nullptr;
    j["bias_constraint"] = nullptr;
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return 2.0 * static_cast<double>(in[0][0]) * static_cast<double>(units_);
  }

 private:
  int64_t units_ = 0;
  Activation act_;
  bool use_bias_ = true;
  Initializer kinit_, binit_;
};

}  // namespace

std::unique_ptr<Layer> make_dense(LayerConfig& c, const std::string& name) {
  return std::make_unique<Dense>(c, name);
}

std::vector<LayerExample> dense_examples() {
  return {{{{"units", 4}}, {Shape{5}}},
          {{{"units", 3}, {"activation", "tanh"}, {"use_bias", false}}, {Shape{1}}},
          {{{"units", 7}, {"activation", "softmax"}}, {Shape{6}}}};
}

}  // namespace nnfleet
