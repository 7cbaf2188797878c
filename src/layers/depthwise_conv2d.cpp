// DepthwiseConv2D: each input channel c convolved with its own D filters (D = depth_multiplier),
// output channel c*D+d; Keras kernel layout [KH,KW,C,D], bias [C*D], optional activation.
#include "kernels/conv2d.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class DepthwiseConv2D final : public Layer {
 public:
  DepthwiseConv2D(LayerConfig& c, const std::string& name) : Layer(name) {
    opt_ = parse_conv_options(c, "kernel_size", false);
    mult_ = c.get_int("depth_multiplier", 1);
    act_ = parse_activation(c.get_raw("activation"), "activation");
    use_bias_ = c.get_bool("use_bias", true);
    kinit_ = parse_init_option(c, "depthwise_initializer", "glorot_uniform");
    binit_ = parse_init_option(c, "bias_initializer", "zeros");
    c.ignore("depthwise_constraint");
  }
  const char* class_name() const override { return "DepthwiseConv2D"; }

  ConvGeometry geometry(const Shape& in) const {
    return make_geometry(opt_, in, in.rank() == 3 ? in[2] * mult_ : 0);
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    ConvGeometry g = geometry(in[0]);
    return Shape{g.oh, g.ow, g.f};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    std::vector<ParamSpec> p{
        {"depthwise_kernel", Shape{opt_.kh, opt_.kw, in[0][2], mult_}, kinit_, true}};
    if (use_bias_) p.push_back({"bias", Shape{in[0][2] * mult_}, binit_, true});
    return p;
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return fused_cache_floats(act_, rows_floats(n, output_shape(in)));
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return act_.kind == Act::kLinear ? 0 : rows_floats(n, output_shape(in));
  }
  void forward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    const float* b = use_bias_ ? a.params[1] : nullptr;
    depthwise_conv2d_forward(g, a.n, a.x[0], a.params[0], b, fused_z(act_, a));
    fused_activation_forward(act_, static_cast<int64_t>(a.n) * g.oh * g.ow, g.f, a);
  }
  void backward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    const float* dz =
        pre_activation_grad(act_, static_cast<int64_t>(a.n) * g.oh * g.ow, g.f, a, a.scratch);
    depthwise_conv2d_backward(g, a.n, a.x[0], a.params[0], dz, a.dx[0], a.dparams[0],
                              use_bias_ ? a.dparams[1] : nullptr);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j.update(conv_options_to_keras(opt_, "kernel_size", false));
    j["depth_multiplier"] = mult_;
    j["activation"] = activation_to_keras(act_);
    j["use_bias"] = use_bias_;
    j["depthwise_initializer"] = initializer_to_keras(kinit_);
    j["bias_initializer"] = initializer_to_keras(binit_);
    j["depthwise_regularizer"] = nullptr;
    j["bias_regularizer"] = nullptr;
    j["activity_regularizer"] = nullptr;
    j["depthwise_constraint"] = nullptr;
    j["bias_constraint"] = nullptr;
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return 2.0 * g.oh * g.ow * g.f * static_cast<double>(g.kh) * g.kw;
  }

 private:
  Conv2dOptions opt_;
  int64_t mult_ = 1;
  Activation act_;
  bool use_bias_ = true;
  Initializer kinit_, binit_;
};

}  // namespace

std::unique_ptr<Layer> make_depthwise_conv2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<DepthwiseConv2D>(c, name);
}

std::vector<LayerExample> depthwise_conv2d_examples() {
  return {
      {{{"kernel_size", 3}}, {Shape{5, 5, 2}}},
      {{{"kernel_size", 2},
        {"depth_multiplier", 2},
        {"strides", 2},
        {"padding", "same"},
        {"activation", "sigmoid"}},
       {Shape{5, 6, 3}}},
      {{{"kernel_size", Json{2, 1}}, {"depth_multiplier", 2}, {"data_format", "channels_first"}},
       {Shape{2, 4, 3}}}};
}

}  // namespace nnfleet
