// Conv2DTranspose: y = activation(conv^T(x, W) + b), Keras semantics: input [N,H,W,C], kernel
// [KH,KW,F,C] (Keras's layout: filters before input channels), bias [F], padding valid/same,
// strides, output_padding (each below its stride), dilation_rate 1. The output size per axis is
// Keras's deconv_output_length: valid in*s + max(k - s, 0), same in*s, and with output_padding p
// (in - 1)*s + k + p (valid) or (in - 1)*s + k % 2 + p (same). TensorFlow then runs the
// input-gradient of the "valid"/"same" convolution of that output size, whose padding is the
// usual one (extra pixel after); a size whose convolution does not give back the input (same
// padding, even kernel, no output_padding... see geometry()) is refused as TensorFlow refuses it.
#include <algorithm>
#include <array>

#include "kernels/conv2d_variants.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class Conv2DTranspose final : public Layer {
 public:
  Conv2DTranspose(LayerConfig& c, const std::string& name) : Layer(name) {
    filters_ = c.get_int("filters");
    opt_ = parse_conv_options(c, "kernel_size", false);
    if (opt_.dh != 1 || opt_.dw != 1)
      c.fail("dilation_rate", "1 (dilated Conv2DTranspose is not supported yet)");
    if (c.has("output_padding")) {
      const std::vector<int64_t> p = c.get_ints("output_padding", 2, std::nullopt, 0);
      if (p[0] >= opt_.sh || p[1] >= opt_.sw)
        c.fail("output_padding", "values smaller than the strides " + std::to_string(opt_.sh) +
                                     "x" + std::to_string(opt_.sw) + " (Keras's rule)");
      out_pad_ = {static_cast<int>(p[0]), static_cast<int>(p[1])};
      has_out_pad_ = true;
    } else {
      c.ignore("output_padding");
    }
    kb_ = KernelBias(c);
  }
  const char* class_name() const override { return "Conv2DTranspose"; }

  // Keras's deconv_output_length for one axis.
  int64_t out_length(int64_t in, int k, int s, int pad) const {
    if (!has_out_pad_) return opt_.same ? in * s : in * s + std::max(k - s, 0);
    return (in - 1) * s + (opt_.same ? k % 2 : k) + pad;
  }
  // The geometry of the convolution whose input-gradient this layer computes: its input is this
  // layer's output [OH', OW', F], its output this layer's input [H, W, C].
  ConvGeometry geometry(const Shape& in) const {
    require_rank(in, 3, "Conv2DTranspose takes images [batch,height,width,channels]");
    if (in[0] > limits::kMaxDimension / opt_.sh || in[1] > limits::kMaxDimension / opt_.sw)
      throw ModelError("strides " + std::to_string(opt_.sh) + "x" + std::to_string(opt_.sw) +
                       " make input " + keras_shape(in) + " too large; expected at most " +
                       std::to_string(limits::kMaxDimension) + " per axis");
    const Shape out{out_length(in[0], opt_.kh, opt_.sh, out_pad_[0]),
                    out_length(in[1], opt_.kw, opt_.sw, out_pad_[1]), filters_};
    const ConvGeometry g = make_geometry(opt_, out, in[2]);
    if (g.oh != in[0] || g.ow != in[1])
      throw ModelError("kernel " + std::to_string(opt_.kh) + "x" + std::to_string(opt_.kw) +
                       " with strides " + std::to_string(opt_.sh) + "x" + std::to_string(opt_.sw) +
                       " and padding '" + (opt_.same ? "same" : "valid") + "' maps input " +
                       keras_shape(in) + " to " + keras_shape(out) +
                       ", whose convolution does not give back the input (TensorFlow refuses "
                       "it too); expected an output_padding that makes the sizes agree");
    if (!size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("output " + keras_shape(out) + " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return g;
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return Shape{g.h, g.w, g.c};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return kb_.params(Shape{opt_.kh, opt_.kw, filters_, in[0][2]}, filters_);
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return kb_.cache_floats(rows_floats(n, output_shape(in)));
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    size_t s = conv2d_transpose_scratch_floats(geometry(in[0]), n);
    s += kb_.scratch_floats(rows_floats(n, output_shape(in)));
    return s;
  }
  void forward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    conv2d_transpose_forward(g, a.n, a.x[0], a.params[0], kb_.bias(a), fused_z(kb_.act, a),
                             a.scratch);
    fused_activation_forward(kb_.act, static_cast<int64_t>(a.n) * g.h * g.w, g.c, a);
  }
  void backward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    const float* dz = pre_activation_grad(kb_.act, static_cast<int64_t>(a.n) * g.h * g.w, g.c, a,
                                          a.scratch + conv2d_transpose_scratch_floats(g, a.n));
    conv2d_transpose_backward(g, a.n, a.x[0], a.params[0], dz, a.dx[0], a.dparams[0], kb_.dbias(a),
                              a.scratch);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["filters"] = filters_;
    j.update(conv_options_to_keras(opt_, "kernel_size", false));
    j["output_padding"] = has_out_pad_ ? Json{out_pad_[0], out_pad_[1]} : Json(nullptr);
    kb_.to_keras(j, /*activity=*/true);
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return 2.0 * g.oh * g.ow * g.f * static_cast<double>(g.kh) * g.kw * g.c;
  }

 private:
  int64_t filters_ = 0;
  Conv2dOptions opt_;
  std::array<int, 2> out_pad_{0, 0};
  bool has_out_pad_ = false;
  KernelBias kb_;
};

}  // namespace

std::unique_ptr<Layer> make_conv2d_transpose(LayerConfig& c, const std::string& name) {
  return std::make_unique<Conv2DTranspose>(c, name);
}

std::vector<LayerExample> conv2d_transpose_examples() {
  return {{{{"filters", 2}, {"kernel_size", 3}}, {Shape{3, 4, 2}}},
          {{{"filters", 3},
            {"kernel_size", 3},
            {"strides", 2},
            {"padding", "same"},
            {"activation", "relu"}},
           {Shape{3, 2, 2}}},
          {{{"filters", 2},
            {"kernel_size", Json{2, 3}},
            {"strides", Json{2, 3}},
            {"output_padding", Json{1, 2}},
            {"activation", "tanh"}},
           {Shape{2, 3, 1}}},
          {{{"filters", 2},
            {"kernel_size", 3},
            {"strides", 2},
            {"padding", "same"},
            {"output_padding", 0},
            {"use_bias", false}},
           {Shape{3, 3, 2}}},
          {{{"filters", 1}, {"kernel_size", 1}, {"strides", 3}}, {Shape{2, 2, 3}}},
          {{{"filters", 2}, {"kernel_size", 2}, {"strides", 2}, {"data_format", "channels_first"}},
           {Shape{3, 2, 3}}}};
}

}  // namespace nnfleet
