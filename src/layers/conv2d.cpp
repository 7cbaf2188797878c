// Conv2D: y = activation(conv(x, W) + b), Keras semantics: NHWC input [N,H,W,C], kernel
// [KH,KW,C/G,F], padding valid/same (extra pixel after), strides, dilation, optional bias, and
// groups G (Keras 2.5+/3): output channel f sees only the C/G input channels of its group
// f / (F/G); G must divide both C and F.
#include "kernels/conv2d.h"

#include <algorithm>

#include "kernels/conv2d_variants.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class Conv2D final : public Layer {
 public:
  Conv2D(LayerConfig& c, const std::string& name) : Layer(name) {
    filters_ = c.get_int("filters");
    opt_ = parse_conv_options(c, "kernel_size", false);
    groups_ = c.get_int("groups", 1);
    if (filters_ % groups_ != 0)
      c.fail("groups", "a divisor of filters " + std::to_string(filters_) + " (Keras's rule)");
    kb_ = KernelBias(c);
  }
  const char* class_name() const override { return "Conv2D"; }

  ConvGeometry geometry(const Shape& in) const {
    if (in.rank() == 3 && in[2] % groups_ != 0)
      throw ModelError("groups " + std::to_string(groups_) + " does not divide the " +
                       std::to_string(in[2]) + " channels of input " + keras_shape(in) +
                       "; expected input channels divisible by groups");
    return make_geometry(opt_, in, filters_);
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    ConvGeometry g = geometry(in[0]);
    return Shape{g.oh, g.ow, g.f};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return kb_.params(Shape{opt_.kh, opt_.kw, in[0][2] / groups_, filters_}, filters_);
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return kb_.cache_floats(rows_floats(n, output_shape(in)));
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    size_t s = kernel_scratch(geometry(in[0]), n);
    s += kb_.scratch_floats(rows_floats(n, output_shape(in)));
    return s;
  }
  // W1's m7: its second convolution's pre-activation gradient (2.4 MB per batch piece) was the
  // larger part of every piece's scratch.
  size_t scratch_floats_owning_dy(const std::vector<Shape>& in, int n) const override {
    return kernel_scratch(geometry(in[0]), n) +
           kb_.scratch_floats_owning_dy(rows_floats(n, output_shape(in)));
  }
  void forward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    const float* b = kb_.bias(a);
    if (groups_ > 1) {
      conv2d_grouped_forward(g, static_cast<int>(groups_), a.n, a.x[0], a.params[0], b,
                             fused_z(kb_.act, a), a.scratch);
      fused_activation_forward(kb_.act, static_cast<int64_t>(a.n) * g.oh * g.ow, g.f, a);
      return;
    }
    // The activation runs on each chunk of z as the kernel produces it.
    conv2d_forward(g, a.n, a.x[0], a.params[0], b, fused_z(kb_.act, a), a.scratch,
                   kb_.act.kind == Act::kLinear ? nullptr : &kb_.act, a.y);
  }
  // m7's second convolution writes its input gradient (2.8 MB a step) unzeroed.
  bool writes_whole_dx() const override { return true; }
  void backward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    // The conv kernel's scratch comes first, the pre-activation gradient after it.
    const float* dz = pre_activation_grad(kb_.act, static_cast<int64_t>(a.n) * g.oh * g.ow, g.f, a,
                                          a.scratch + kernel_scratch(g, a.n));
    if (groups_ > 1) {
      if (a.dx_fresh && a.dx[0]) std::fill_n(a.dx[0], rows_floats(a.n, a.in_shapes[0]), 0.0f);
      conv2d_grouped_backward(g, static_cast<int>(groups_), a.n, a.x[0], a.params[0], dz, a.dx[0],
                              a.dparams[0], kb_.dbias(a), a.scratch);
      return;
    }
    conv2d_backward(g, a.n, a.x[0], a.params[0], dz, a.dx[0], a.dparams[0], kb_.dbias(a), a.scratch,
                    a.dx_fresh);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["filters"] = filters_;
    j.update(conv_options_to_keras(opt_, "kernel_size", false));
    j["groups"] = groups_;
    kb_.to_keras(j, /*activity=*/true);
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return 2.0 * g.oh * g.ow * g.f * static_cast<double>(g.kh) * g.kw * g.c / groups_;
  }

 private:
  size_t kernel_scratch(const ConvGeometry& g, int n) const {
    return groups_ > 1 ? conv2d_grouped_scratch_floats(g, static_cast<int>(groups_), n)
                       : conv2d_scratch_floats(g, n);
  }
  int64_t groups_ = 1;
  int64_t filters_ = 0;
  Conv2dOptions opt_;
  KernelBias kb_;
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<Conv2D>(c, name);
}

std::vector<LayerExample> conv2d_examples() {
  return {{{{"filters", 3}, {"kernel_size", 3}}, {Shape{5, 6, 2}}},
          {{{"filters", 2},
            {"kernel_size", Json{2, 3}},
            {"strides", 2},
            {"padding", "same"},
            {"activation", "relu"}},
           {Shape{5, 7, 3}}},
          {{{"filters", 2},
            {"kernel_size", 2},
            {"dilation_rate", 2},
            {"use_bias", false},
            {"activation", "tanh"}},
           {Shape{6, 6, 1}}},
          {{{"filters", 4},
            {"kernel_size", 3},
            {"groups", 2},
            {"padding", "same"},
            {"activation", "relu"}},
           {Shape{4, 5, 6}}},
          {{{"filters", 3}, {"kernel_size", 2}, {"groups", 3}, {"strides", 2}}, {Shape{5, 5, 3}}},
          // channels_first: [C,H,W] in and out.
          {{{"filters", 2},
            {"kernel_size", Json{2, 3}},
            {"padding", "same"},
            {"activation", "relu"},
            {"data_format", "channels_first"}},
           {Shape{3, 4, 5}}}};
}

}  // namespace nnfleet
