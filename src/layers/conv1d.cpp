// Conv1D: y = activation(conv1d(x, W) + b), Keras semantics: input [N,T,C] (channels last),
// kernel [K,C,F] (Keras layout), padding valid / same (extra zero after) / causal ((K-1)*d zeros
// before), strides, dilation_rate, groups 1.
#include "kernels/conv1d.h"

#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class Conv1D final : public Layer {
 public:
  Conv1D(LayerConfig& c, const std::string& name) : Layer(name) {
    filters_ = c.get_int("filters");
    opt_ = parse_conv1d_options(c, "kernel_size", false);
    if (c.get_int("groups", 1) != 1) c.fail("groups", "1 (grouped Conv1D is not supported yet)");
    kb_ = KernelBias(c);
  }
  const char* class_name() const override { return "Conv1D"; }

  ConvGeometry geometry(const Shape& in) const { return make_geometry1d(opt_, in, filters_); }
  Shape output_shape(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return Shape{g.ow, g.f};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return kb_.params(Shape{opt_.k, in[0][1], filters_}, filters_);
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return kb_.cache_floats(rows_floats(n, output_shape(in)));
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    size_t s = conv1d_scratch_floats(geometry(in[0]), n);
    s += kb_.scratch_floats(rows_floats(n, output_shape(in)));
    return s;
  }
  void forward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    const float* b = kb_.bias(a);
    conv1d_forward(g, a.n, a.x[0], a.params[0], b, fused_z(kb_.act, a), a.scratch,
                   kb_.act.kind == Act::kLinear ? nullptr : &kb_.act, a.y);
  }
  void backward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    // The conv kernel's scratch comes first, the pre-activation gradient after it.
    const float* dz = pre_activation_grad(kb_.act, static_cast<int64_t>(a.n) * g.ow, g.f, a,
                                          a.scratch + conv1d_scratch_floats(g, a.n));
    conv1d_backward(g, a.n, a.x[0], a.params[0], dz, a.dx[0], a.dparams[0], kb_.dbias(a),
                    a.scratch);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["filters"] = filters_;
    j.update(conv1d_options_to_keras(opt_, "kernel_size", false));
    j["groups"] = 1;
    kb_.to_keras(j, /*activity=*/true);
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return 2.0 * g.ow * g.f * static_cast<double>(g.kw) * g.c;
  }

 private:
  int64_t filters_ = 0;
  Conv1dOptions opt_;
  KernelBias kb_;
};

}  // namespace

std::unique_ptr<Layer> make_conv1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<Conv1D>(c, name);
}

std::vector<LayerExample> conv1d_examples() {
  return {{{{"filters", 3}, {"kernel_size", 3}}, {Shape{6, 2}}},
          {{{"filters", 2},
            {"kernel_size", 2},
            {"strides", 2},
            {"padding", "same"},
            {"activation", "relu"}},
           {Shape{7, 3}}},
          {{{"filters", 2},
            {"kernel_size", 3},
            {"padding", "causal"},
            {"dilation_rate", 2},
            {"activation", "tanh"}},
           {Shape{7, 2}}},
          {{{"filters", 1}, {"kernel_size", 2}, {"padding", "causal"}, {"use_bias", false}},
           {Shape{1, 3}}},
          {{{"filters", 2}, {"kernel_size", 2}, {"strides", 2}, {"data_format", "channels_first"}},
           {Shape{3, 5}}}};
}

}  // namespace nnfleet
