// Dense: y = activation(x W + b), Keras semantics. Input [N,...,I] of any rank: like Keras, the
// product is over the last axis only, so [N,T,I] gives [N,T,O] (each of the N*T rows is one GEMM
// row; row-major order makes them contiguous). Kernel [I,O] (Keras layout), bias [O]. With a
// non-linear activation the pre-activation z is kept in the cache for backward.
#include "kernels/gemm.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class Dense final : public Layer {
 public:
  Dense(LayerConfig& c, const std::string& name) : Layer(name) {
    units_ = c.get_int("units");
    kb_ = KernelBias(c);
  }
  const char* class_name() const override { return "Dense"; }
  // Keras's Dense supports masking: a mask over the time axis passes through (Dense on sequences).
  MaskUse mask_use() const override { return MaskUse::kPropagate; }

  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1)
      throw ModelError("expects an input with a feature axis, got " + keras_shape(in[0]));
    Shape out = in[0];
    out[out.rank() - 1] = units_;
    if (!size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("output " + keras_shape(out) + " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return out;
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return kb_.params(Shape{features(in[0]), units_}, units_);
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return kb_.cache_floats(rows(in[0], n) * units_);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return kb_.scratch_floats(rows(in[0], n) * units_);
  }
  void forward(const LayerArgs& a) const override {
    const int in = static_cast<int>(features(a.in_shapes[0])), out = static_cast<int>(units_);
    const int m = static_cast<int>(rows(a.in_shapes[0], a.n));
    const float* b = kb_.bias(a);
    dense_forward(m, in, out, a.x[0], a.params[0], b, fused_z(kb_.act, a));
    fused_activation_forward(kb_.act, m, out, a);
  }
  // m7's 9216 x 128 kernel gradient is written, not read and added to (4.7 MB a batch piece).
  bool writes_whole_dparams() const override { return true; }
  void backward(const LayerArgs& a) const override {
    const int in = static_cast<int>(features(a.in_shapes[0])), out = static_cast<int>(units_);
    const int m = static_cast<int>(rows(a.in_shapes[0], a.n));
    const float* dz = pre_activation_grad(kb_.act, m, out, a, a.scratch);
    dense_backward(m, in, out, a.x[0], a.params[0], dz, a.dx[0], a.dparams[0], kb_.dbias(a),
                   a.dparams_fresh);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["units"] = units_;
    kb_.to_keras(j, /*activity=*/false);
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
  KernelBias kb_;
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
