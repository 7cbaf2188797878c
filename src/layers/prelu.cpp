// PReLU, Keras semantics: y = x for x > 0, alpha * x otherwise, with a trainable alpha of the
// per-sample input shape, 1 along each of `shared_axes` (Keras axes, batch = 0) where one alpha
// serves the whole axis. alpha_initializer defaults to zeros; the mask passes through.
#include "layers/axes.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class PRelu final : public Layer {
 public:
  PRelu(LayerConfig& c, const std::string& name) : Layer(name) {
    init_ = parse_init_option(c, "alpha_initializer", "zeros");
    const Json* sh = c.get_raw("shared_axes");
    if (sh && !sh->is_null()) {
      shared_ = parse_keras_axes(c, "shared_axes", 0);
      // Keras indexes param_shape[axis - 1], so a negative axis would not count from the end.
      for (int64_t v : shared_.values)
        if (v < 1) c.fail("shared_axes", "null, or positive axes (1 = the first after the batch)");
    }
  }
  const char* class_name() const override { return "PReLU"; }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (!shared_.values.empty()) resolve_axes(shared_, in[0], "shares alpha along");
    return in[0];
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return {{"alpha", alpha_shape(in[0]), init_, true}};
  }
  void forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const unsigned mask = shared_mask(s);
    const int64_t per = s.size(), p = alpha_size(s, mask);
    const float* alpha = a.params[0];
    for (int n = 0; n < a.n; ++n) {
      const float* x = a.x[0] + n * per;
      float* y = a.y + n * per;
      // The row view puts the shared axes in rows, so the column is the index into alpha.
      for_each_axis_offset(s, ~mask & ((1u << s.rank()) - 1), [&](int64_t o, int64_t k) {
        const float v = x[o];
        y[o] = v > 0.0f ? v : alpha[k % p] * v;
      });
    }
  }
  void backward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const unsigned mask = shared_mask(s);
    const int64_t per = s.size(), p = alpha_size(s, mask);
    const float* alpha = a.params[0];
    float* dalpha = a.dparams[0];
    float* dx = a.dx[0];
    for (int n = 0; n < a.n; ++n) {
      const float* x = a.x[0] + n * per;
      const float* dy = a.dy + n * per;
      for_each_axis_offset(s, ~mask & ((1u << s.rank()) - 1), [&](int64_t o, int64_t k) {
        const float v = x[o];
        const int64_t j = k % p;
        if (v > 0.0f) {
          if (dx) dx[n * per + o] += dy[o];
        } else {
          dalpha[j] += dy[o] * v;
          if (dx) dx[n * per + o] += dy[o] * alpha[j];
        }
      });
    }
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["alpha_initializer"] = initializer_to_keras(init_);
    j["alpha_regularizer"] = nullptr;
    j["alpha_constraint"] = nullptr;
    // Keras keeps shared_axes as a list (an int is wrapped).
    j["shared_axes"] = shared_.values.empty() ? Json(nullptr) : Json(shared_.values);
    return j;
  }

 private:
  unsigned shared_mask(const Shape& s) const {
    return shared_.values.empty() ? 0u : resolve_axes_unchecked(shared_, s);
  }
  static int64_t alpha_size(const Shape& s, unsigned mask) {
    int64_t p = 1;
    for (int i = 0; i < s.rank(); ++i)
      if (!(mask >> i & 1u)) p *= s[i];
    return p;
  }
  Shape alpha_shape(const Shape& s) const {
    const unsigned mask = shared_mask(s);
    Shape out;
    for (int i = 0; i < s.rank(); ++i) out.push_back(mask >> i & 1u ? 1 : s[i]);
    return out;
  }
  Initializer init_;
  KerasAxes shared_;  // empty: no shared axes
};

}  // namespace

std::unique_ptr<Layer> make_prelu(LayerConfig& c, const std::string& name) {
  return std::make_unique<PRelu>(c, name);
}
std::vector<LayerExample> prelu_examples() {
  return {{{}, {Shape{5}}},
          {{{"shared_axes", Json{1, 2}}}, {Shape{2, 3, 2}}},
          {{{"shared_axes", 1}, {"alpha_initializer", "ones"}}, {Shape{3, 2}}}};
}

}  // namespace nnfleet
