// Dense: y = activation(x W + b), Keras semantics. Input [N,...,I] of any rank: like Keras, the
// product is over the last axis only, so [N,T,I] gives [N,T,O] (each of the N*T rows is one GEMM
// row; row-major order makes them contiguous). Kernel [I,O] (Keras layout), bias [O]. With a
// non-linear activation the pre-activation z is kept in the cache for backward. kernel/bias
// regularizers (L1, L2, L1L2) are kept for writing back; training refuses them.
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
    kreg_ = parse_regularizer(c, "kernel_regularizer");
    breg_ = parse_regularizer(c, "bias_regularizer");
  }
  const char* class_name() const override { return "Dense"; }
  // Keras's Dense supports masking: a mask over the time axis passes through (Dense on sequences).
  MaskUse mask_use() const override { return MaskUse::kPropagate; }

  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1) throw ModelError("expects an input with a feature axis, got " +
                                           keras_shape(in[0]));
    Shape out = in[0];
    out[out.rank() - 1] = units_;
    if (!size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("output " + keras_shape(out) + " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return out;
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    std::vector<ParamSpec> p{{"kernel", Shape{features(in[0]), units_}, kinit_, true}};
    if (use_bias_) p.push_back({"bias", Shape{units_}, binit_, true});
    return p;
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return fused_cache_floats(act_, rows(in[0], n) * units_);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return act_.kind == Act::kLinear ? 0 : rows(in[0], n) * units_;
  }
  void forward(const LayerArgs& a) const override {
    const int in = static_cast<int>(features(a.in_shapes[0])), out = static_cast<int>(units_);
    const int m = static_cast<int>(rows(a.in_shapes[0], a.n));
    const float* b = use_bias_ ? a.params[1] : nullptr;
    dense_forward(m, in, out, a.x[0], a.params[0], b, fused_z(act_, a));
    fused_activation_forward(act_, m, out, a);
  }
  void backward(const LayerArgs& a) const override {
    const int in = static_cast<int>(features(a.in_shapes[0])), out = static_cast<int>(units_);
    const int m = static_cast<int>(rows(a.in_shapes[0], a.n));
    const float* dz = pre_activation_grad(act_, m, out, a, a.scratch);
    dense_backward(m, in, out, a.x[0], a.params[0], dz, a.dx[0], a.dparams[0],
                   use_bias_ ? a.dparams[1] : nullptr);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["units"] = units_;
    j["activation"] = activation_to_keras(act_);
    j["use_bias"] = use_bias_;
    j["kernel_initializer"] = initializer_to_keras(kinit_);
    j["bias_initializer"] = initializer_to_keras(binit_);
    j["kernel_regularizer"] = kreg_;
    j["bias_regularizer"] = breg_;
    j["kernel_constraint"] = nullptr;
    j["bias_constraint"] = nullptr;
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return 2.0 * static_cast<double>(in[0].size()) * static_cast<double>(units_);
  }

 private:
  static int64_t features(const Shape& in) { return in[in.rank() - 1]; }
  // GEMM rows of a batch of n: every position of the leading axes is one row.
  static size_t rows(const Shape& in, int n) {
    return static_cast<size_t>(n) * static_cast<size_t>(in.size() / features(in));
  }

  int64_t units_ = 0;
  Activation act_;
  bool use_bias_ = true;
  Initializer kinit_, binit_;
  Json kreg_, breg_;
};

}  // namespace

std::unique_ptr<Layer> make_dense(LayerConfig& c, const std::string& name) {
  return std::make_unique<Dense>(c, name);
}

std::vector<LayerExample> dense_examples() {
  return {{{{"units", 4}}, {Shape{5}}},
          {{{"units", 3}, {"activation", "tanh"}, {"use_bias", false}}, {Shape{1}}},
          {{{"units", 7}, {"activation", "softmax"}}, {Shape{6}}},
          // Rank 3 and 4: applied to the last axis of every position, as Keras does.
          {{{"units", 3}, {"activation", "relu"}}, {Shape{4, 5}}},
          {{{"units", 2}, {"activation", "softmax"}}, {Shape{2, 3, 4}}}};
}

}  // namespace nnfleet
