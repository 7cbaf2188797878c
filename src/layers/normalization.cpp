// Per-sample normalizations, Keras semantics (Keras 3 and tf.keras 2 compute the same):
// LayerNormalization over `axis` (an int or a list; default -1): mean and biased variance over
// those axes of each sample, y = (x - mean) / sqrt(var + epsilon) * gamma + beta, with gamma and
// beta shaped by the normalized axes in ascending order (Keras sorts them) and optional (scale,
// center). UnitNormalization: y = x / sqrt(max(sum(x^2), 1e-24)) over `axis` (Keras 3's
// ops.normalize with epsilon 1e-12, whose clamp applies to the norm). Both keep the mask.
//
// Each sample is viewed as [rows, cols] with cols the normalized axes (layers/axes.h); when those
// axes are the trailing ones the batch is already rows, otherwise each sample is gathered into
// scratch, worked on as rows and scattered back (over_rows forward, over_rows_backward backward).
#include <cmath>
#include <cstring>

#include "layers/axes.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

// Runs `rows_fn(x rows, y rows, row count, first row)` over the [rows, cols] view of every
// sample of a.x[0]. Scratch holds 2 * sample floats when the axes are not trailing.
template <typename F>
void over_rows(const LayerArgs& a, unsigned mask, const AxisSplit& sp, const float* x, float* y,
               F rows_fn) {
  const Shape& s = a.in_shapes[0];
  const int64_t per = s.size();
  if (sp.trailing) {
    rows_fn(x, y, a.n * sp.rows, int64_t{0});
    return;
  }
  float* xs = a.scratch;
  float* ys = a.scratch + per;
  for (int i = 0; i < a.n; ++i) {
    const float* xi = x + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { xs[k] = xi[o]; });
    rows_fn(xs, ys, sp.rows, i * sp.rows);
    float* yi = y + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { yi[o] = ys[k]; });
  }
}

// Runs `rows_fn(x rows, dy rows, dx rows or null, row count, first row)` over the [rows, cols]
// view of every sample for a backward pass, adding what it leaves in dx rows into a.dx[0] (null
// when the input needs no gradient). When the axes are not trailing, each sample's x and dy are
// gathered into scratch (3 * sample floats) beside zeroed dx rows, and those are scattered back.
template <typename F>
void over_rows_backward(const LayerArgs& a, unsigned mask, const AxisSplit& sp, F rows_fn) {
  const Shape& s = a.in_shapes[0];
  const int64_t per = s.size();
  if (sp.trailing) {
    rows_fn(a.x[0], a.dy, a.dx[0], a.n * sp.rows, int64_t{0});
    return;
  }
  float* xs = a.scratch;
  float* dys = a.scratch + per;
  float* dxs = a.scratch + 2 * per;
  for (int i = 0; i < a.n; ++i) {
    const float* xi = a.x[0] + i * per;
    const float* dyi = a.dy + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) {
      xs[k] = xi[o];
      dys[k] = dyi[o];
      dxs[k] = 0.0f;
    });
    rows_fn(xs, dys, a.dx[0] ? dxs : nullptr, sp.rows, i * sp.rows);
    if (!a.dx[0]) continue;
    float* dxi = a.dx[0] + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { dxi[o] += dxs[k]; });
  }
}

class LayerNormalization final : public Layer {
 public:
  LayerNormalization(LayerConfig& c, const std::string& name) : Layer(name) {
    axes_ = parse_keras_axes(c, "axis", -1);
    epsilon_ = c.get_float("epsilon", 1e-3);
    if (epsilon_ < 0) c.fail("epsilon", "a non-negative number");
    center_ = c.get_bool("center", true);
    scale_ = c.get_bool("scale", true);
    if (c.get_bool("rms_scaling", false))
      c.fail("rms_scaling", "false (Keras deprecated rms_scaling; use RMSNormalization)");
    beta_init_ = parse_init_option(c, "beta_initializer", "zeros");
    gamma_init_ = parse_init_option(c, "gamma_initializer", "ones");
  }
  const char* class_name() const override { return "LayerNormalization"; }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    resolve_axes(axes_, in[0], "normalizes");
    return in[0];
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    const unsigned mask = resolve_axes_unchecked(axes_, in[0]);
    Shape shape;
    for (int i = 0; i < in[0].rank(); ++i)
      if (mask >> i & 1u) shape.push_back(in[0][i]);
    std::vector<ParamSpec> p;
    if (scale_) p.push_back({"gamma", shape, gamma_init_, true});
    if (center_) p.push_back({"beta", shape, beta_init_, true});
    return p;
  }
  // Mean and 1/sqrt(var + eps) of every row.
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return 2 * static_cast<size_t>(n) * split(in[0]).rows;
  }
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return split(in[0]).trailing ? 0 : 3 * static_cast<size_t>(in[0].size());
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return 8.0 * static_cast<double>(in[0].size());
  }

  void forward(const LayerArgs& a) const override {
    const unsigned mask = resolve_axes_unchecked(axes_, a.in_shapes[0]);
    const AxisSplit sp = split_axes(a.in_shapes[0], mask);
    const float* gamma = scale_ ? a.params[0] : nullptr;
    const float* beta = center_ ? a.params[scale_ ? 1 : 0] : nullptr;
    const int64_t p = sp.cols;
    over_rows(a, mask, sp, a.x[0], a.y, [&](const float* x, float* y, int64_t rows, int64_t r0) {
      float* stats = a.cache + 2 * r0;
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * p;
        float* yr = y + r * p;
        double sum = 0.0;  // two passes in double: the mean, then the biased variance
        for (int64_t j = 0; j < p; ++j) sum += xr[j];
        const double mean = sum / static_cast<double>(p);
        double sq = 0.0;
        for (int64_t j = 0; j < p; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
        const double inv = 1.0 / std::sqrt(sq / static_cast<double>(p) + epsilon_);
        const auto m = static_cast<float>(mean), iv = static_cast<float>(inv);
        for (int64_t j = 0; j < p; ++j) {
          float v = (xr[j] - m) * iv;
          if (gamma) v *= gamma[j];
          if (beta) v += beta[j];
          yr[j] = v;
        }
        stats[2 * r] = m;
        stats[2 * r + 1] = iv;
      }
    });
  }

  // With xh = (x - mean) * inv and g = dy * gamma over a row of P values:
  // dx = inv * (g - mean(g) - xh * mean(g * xh)); dgamma += dy * xh; dbeta += dy.
  void backward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const unsigned mask = resolve_axes_unchecked(axes_, s);
    const AxisSplit sp = split_axes(s, mask);
    const int64_t p = sp.cols;
    const float* gamma = scale_ ? a.params[0] : nullptr;
    float* dgamma = scale_ ? a.dparams[0] : nullptr;
    float* dbeta = center_ ? a.dparams[scale_ ? 1 : 0] : nullptr;
    auto rows_fn = [&](const float* x, const float* dy, float* dx, int64_t rows, int64_t r0) {
      const float* stats = a.cache + 2 * r0;
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * p;
        const float* dyr = dy + r * p;
        const double mean = stats[2 * r], inv = stats[2 * r + 1];
        double sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < p; ++j) {
          const double xh = (xr[j] - mean) * inv;
          const double g = gamma ? dyr[j] * static_cast<double>(gamma[j]) : dyr[j];
          sg += g;
          sgx += g * xh;
          if (dgamma) dgamma[j] += static_cast<float>(dyr[j] * xh);
          if (dbeta) dbeta[j] += dyr[j];
        }
        if (!dx) continue;
        const double mg = sg / static_cast<double>(p), mgx = sgx / static_cast<double>(p);
        for (int64_t j = 0; j < p; ++j) {
          const double xh = (xr[j] - mean) * inv;
          const double g = gamma ? dyr[j] * static_cast<double>(gamma[j]) : dyr[j];
          dx[r * p + j] += static_cast<float>(inv * (g - mg - xh * mgx));
        }
      }
    };
    over_rows_backward(a, mask, sp, rows_fn);
  }

  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["axis"] = keras_axes_json(axes_);
    j["epsilon"] = epsilon_;
    j["center"] = center_;
    j["scale"] = scale_;
    j["beta_initializer"] = initializer_to_keras(beta_init_);
    j["gamma_initializer"] = initializer_to_keras(gamma_init_);
    j["beta_regularizer"] = nullptr;
    j["gamma_regularizer"] = nullptr;
    j["beta_constraint"] = nullptr;
    j["gamma_constraint"] = nullptr;
    return j;
  }

 private:
  AxisSplit split(const Shape& s) const { return split_axes(s, resolve_axes_unchecked(axes_, s)); }
  KerasAxes axes_;
  double epsilon_ = 1e-3;
  bool center_ = true, scale_ = true;
  Initializer beta_init_, gamma_init_;
};

// The squared norm is clamped at eps^2 (1e-24) as Keras 3's ops.normalize does it.
constexpr double kUnitNormMin = 1e-24;

class UnitNormalization final : public Layer {
 public:
  UnitNormalization(LayerConfig& c, const std::string& name) : Layer(name) {
    axes_ = parse_keras_axes(c, "axis", -1);
  }
  const char* class_name() const override { return "UnitNormalization"; }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    resolve_axes(axes_, in[0], "normalizes");
    return in[0];
  }
  // The squared norm of every row.
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return static_cast<size_t>(n) * split(in[0]).rows;
  }
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return split(in[0]).trailing ? 0 : 3 * static_cast<size_t>(in[0].size());
  }
  void forward(const LayerArgs& a) const override {
    const unsigned mask = resolve_axes_unchecked(axes_, a.in_shapes[0]);
    const AxisSplit sp = split_axes(a.in_shapes[0], mask);
    const int64_t p = sp.cols;
    over_rows(a, mask, sp, a.x[0], a.y, [&](const float* x, float* y, int64_t rows, int64_t r0) {
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0.0;
        for (int64_t j = 0; j < p; ++j) ss += static_cast<double>(x[r * p + j]) * x[r * p + j];
        a.cache[r0 + r] = static_cast<float>(ss);
        const auto inv = static_cast<float>(1.0 / std::sqrt(std::max(ss, kUnitNormMin)));
        for (int64_t j = 0; j < p; ++j) y[r * p + j] = x[r * p + j] * inv;
      }
    });
  }
  // dx = inv * dy - x * inv^3 * sum(dy * x) over a row; inv * dy alone where the clamp holds.
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const Shape& s = a.in_shapes[0];
    const unsigned mask = resolve_axes_unchecked(axes_, s);
    const AxisSplit sp = split_axes(s, mask);
    const int64_t p = sp.cols;
    auto rows_fn = [&](const float* x, const float* dy, float* dx, int64_t rows, int64_t r0) {
      for (int64_t r = 0; r < rows; ++r) {
        const double ss = a.cache[r0 + r];
        const bool clamped = ss < kUnitNormMin;
        const double inv = 1.0 / std::sqrt(std::max(ss, kUnitNormMin));
        double dot = 0.0;
        for (int64_t j = 0; j < p; ++j) dot += static_cast<double>(dy[r * p + j]) * x[r * p + j];
        const double k = clamped ? 0.0 : dot * inv * inv * inv;
        for (int64_t j = 0; j < p; ++j)
          dx[r * p + j] += static_cast<float>(inv * dy[r * p + j] - k * x[r * p + j]);
      }
    };
    over_rows_backward(a, mask, sp, rows_fn);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["axis"] = keras_axes_json(axes_);
    return j;
  }

 private:
  AxisSplit split(const Shape& s) const { return split_axes(s, resolve_axes_unchecked(axes_, s)); }
  KerasAxes axes_;
};

}  // namespace

std::unique_ptr<Layer> make_layer_normalization(LayerConfig& c, const std::string& name) {
  return std::make_unique<LayerNormalization>(c, name);
}
std::unique_ptr<Layer> make_unit_normalization(LayerConfig& c, const std::string& name) {
  return std::make_unique<UnitNormalization>(c, name);
}
std::vector<LayerExample> layer_normalization_examples() {
  return {{{}, {Shape{5}}},
          {{{"axis", Json{2, 3}}, {"epsilon", 0.01}}, {Shape{2, 3, 2}}},
          {{{"axis", 1}, {"center", false}}, {Shape{4, 3}}},
          {{{"axis", Json{-3, -1}}, {"scale", false}}, {Shape{2, 3, 2}}},
          {{{"axis", -2}, {"center", false}, {"scale", false}}, {Shape{3, 2}}}};
}
std::vector<LayerExample> unit_normalization_examples() {
  return {
      {{}, {Shape{4}}}, {{{"axis", 1}}, {Shape{3, 2}}}, {{{"axis", Json{1, 2}}}, {Shape{2, 2, 3}}}};
}

}  // namespace nnfleet
