// SeparableConv2D: y = activation(pointwise(depthwise(x, Wd), Wp) + b), Keras semantics: the
// depthwise step convolves each input channel c with its own D filters (D = depth_multiplier,
// channel c*D+d; kernel [KH,KW,C,D]) with the layer's strides, padding and dilation and no bias;
// the pointwise step is a 1x1 convolution over the C*D channels (kernel [1,1,C*D,F]), then the
// bias [F] and the activation. Weights in Keras's order: depthwise_kernel, pointwise_kernel,
// bias. The depthwise output is kept in the cache for the pointwise kernel's gradient.
#include <algorithm>

#include "kernels/conv2d.h"
#include "kernels/gemm.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class SeparableConv2D final : public Layer {
 public:
  SeparableConv2D(LayerConfig& c, const std::string& name) : Layer(name) {
    filters_ = c.get_int("filters");
    opt_ = parse_conv_options(c, "kernel_size", false);
    mult_ = c.get_int("depth_multiplier", 1);
    act_ = parse_activation(c.get_raw("activation"), "activation");
    use_bias_ = c.get_bool("use_bias", true);
    dinit_ = parse_init_option(c, "depthwise_initializer", "glorot_uniform");
    pinit_ = parse_init_option(c, "pointwise_initializer", "glorot_uniform");
    binit_ = parse_init_option(c, "bias_initializer", "zeros");
    // tf.keras 1.x wrote its base Conv's kernel_* keys too, which SeparableConv2D never uses
    // (the EEGNet file of arl-eegmodels): read and dropped in Keras files only.
    if (c.mode() == ConfigMode::kKeras)
      for (const char* k : {"kernel_initializer", "kernel_regularizer", "kernel_constraint"})
        c.get_raw(k);
  }
  const char* class_name() const override { return "SeparableConv2D"; }

  // The depthwise step's geometry (g.f = C*D).
  ConvGeometry geometry(const Shape& in) const {
    return make_geometry(opt_, in, in.rank() == 3 ? in[2] * mult_ : 0);
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return Shape{g.oh, g.ow, filters_};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    const int64_t mid = in[0][2] * mult_;
    std::vector<ParamSpec> p{
        {"depthwise_kernel", Shape{opt_.kh, opt_.kw, in[0][2], mult_}, dinit_, true},
        {"pointwise_kernel", Shape{1, 1, mid, filters_}, pinit_, true}};
    if (use_bias_) p.push_back({"bias", Shape{filters_}, binit_, true});
    return p;
  }
  // Cache: [fused z] | depthwise output [N,OH,OW,C*D].
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    const ConvGeometry g = geometry(in[0]);
    return fused_cache_floats(act_, rows_floats(n, output_shape(in))) +
           static_cast<size_t>(n) * g.oh * g.ow * g.f;
  }
  // Scratch: gradient of the depthwise output | [pre-activation gradient].
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    const ConvGeometry g = geometry(in[0]);
    size_t s = static_cast<size_t>(n) * g.oh * g.ow * g.f;
    if (act_.kind != Act::kLinear) s += rows_floats(n, output_shape(in));
    return s;
  }
  void forward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    const int rows = a.n * g.oh * g.ow;
    float* mid = middle(a);
    depthwise_conv2d_forward(g, a.n, a.x[0], a.params[0], nullptr, mid);
    dense_forward(rows, g.f, static_cast<int>(filters_), mid, a.params[1],
                  use_bias_ ? a.params[2] : nullptr, fused_z(act_, a));
    fused_activation_forward(act_, rows, filters_, a);
  }
  void backward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    const int rows = a.n * g.oh * g.ow;
    float* dmid = a.scratch;
    const size_t mid_floats = static_cast<size_t>(rows) * g.f;
    const float* dz = pre_activation_grad(act_, rows, filters_, a, a.scratch + mid_floats);
    std::fill_n(dmid, mid_floats, 0.0f);
    dense_backward(rows, g.f, static_cast<int>(filters_), middle(a), a.params[1], dz, dmid,
                   a.dparams[1], use_bias_ ? a.dparams[2] : nullptr);
    depthwise_conv2d_backward(g, a.n, a.x[0], a.params[0], dmid, a.dx[0], a.dparams[0], nullptr);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["filters"] = filters_;
    j.update(conv_options_to_keras(opt_, "kernel_size", false));
    j["depth_multiplier"] = mult_;
    j["activation"] = activation_to_keras(act_);
    j["use_bias"] = use_bias_;
    j["depthwise_initializer"] = initializer_to_keras(dinit_);
    j["pointwise_initializer"] = initializer_to_keras(pinit_);
    j["bias_initializer"] = initializer_to_keras(binit_);
    j["depthwise_regularizer"] = nullptr;
    j["pointwise_regularizer"] = nullptr;
    j["bias_regularizer"] = nullptr;
    j["activity_regularizer"] = nullptr;
    j["depthwise_constraint"] = nullptr;
    j["pointwise_constraint"] = nullptr;
    j["bias_constraint"] = nullptr;
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return 2.0 * g.oh * g.ow * g.f * (static_cast<double>(g.kh) * g.kw + filters_);
  }

 private:
  float* middle(const LayerArgs& a) const {
    return a.cache + fused_cache_floats(act_, rows_floats(a.n, a.out_shape));
  }
  int64_t filters_ = 0, mult_ = 1;
  Conv2dOptions opt_;
  Activation act_;
  bool use_bias_ = true;
  Initializer dinit_, pinit_, binit_;
};

}  // namespace

std::unique_ptr<Layer> make_separable_conv2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<SeparableConv2D>(c, name);
}

std::vector<LayerExample> separable_conv2d_examples() {
  return {{{{"filters", 3}, {"kernel_size", 3}}, {Shape{5, 5, 2}}},
          {{{"filters", 2},
            {"kernel_size", 2},
            {"depth_multiplier", 2},
            {"strides", 2},
            {"padding", "same"},
            {"activation", "relu"}},
           {Shape{5, 6, 3}}},
          {{{"filters", 2},
            {"kernel_size", 2},
            {"dilation_rate", 2},
            {"use_bias", false},
            {"activation", "tanh"}},
           {Shape{5, 5, 2}}},
          {{{"filters", 2},
            {"kernel_size", Json{1, 2}},
            {"padding", "same"},
            {"data_format", "channels_first"}},
           {Shape{2, 3, 4}}}};
}

}  // namespace nnfleet
