// Normalization (keras.layers.Normalization, Keras 3 and tf.keras 2.x compute the same):
// y = (x - mean) / max(sqrt(variance), 1e-7), and with invert y = mean + x * max(sqrt(var), 1e-7),
// 1e-7 being backend.epsilon(). mean and variance are per position of the kept axes (`axis`, an
// int or a list, default -1; [] keeps none: one mean for everything) and broadcast over the rest.
// They come either from the config (constants, no weights, as Keras builds them), a scalar or a
// nested list aligned with the kept axes from the right, or from adapt(): then the layer has the
// non-trainable weights Keras stores, mean [kept], variance [kept] and count [] (zeros, ones and
// zero until adapted; NormalizationStats in layers/preprocessing.h computes them from data).
// Backward passes dy scaled by the same divisor; mean and variance get no gradient.
#include <cmath>

#include "layers/axes.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/preprocessing.h"

namespace nnfleet {
namespace {

constexpr float kEpsilon = 1e-7f;  // Keras's backend.epsilon()

// A mean or variance from the config: its dims (outermost first) and values, row-major.
struct Stat {
  std::vector<int64_t> dims;
  std::vector<float> values;
};

// Reads `v` as a number or a nested list of equal-length lists of numbers (a numpy array's
// tolist()): the dims come from the first elements, every other element must match them.
void read_stat_values(LayerConfig& c, const std::string& key, const Json& v, Stat& s,
                      size_t depth) {
  if (depth == s.dims.size()) {
    const double d = v.is_number() ? v.get<double>() : NAN;
    if (!std::isfinite(d) || std::fabs(d) > 3e38)
      c.fail(key, "a number or equal-length nested lists of finite numbers");
    s.values.push_back(static_cast<float>(d));
    return;
  }
  if (!v.is_array() || static_cast<int64_t>(v.size()) != s.dims[depth])
    c.fail(key, "a number or equal-length nested lists of finite numbers");
  for (const Json& e : v) read_stat_values(c, key, e, s, depth + 1);
}

void read_stat(LayerConfig& c, const std::string& key, const Json& v, Stat& s) {
  for (const Json* e = &v; e->is_array(); e = &(*e)[0]) {
    if (e->empty() || s.dims.size() >= static_cast<size_t>(Shape::kMaxRank))
      c.fail(key, "a number or non-empty nested lists of numbers, at most " +
                      std::to_string(Shape::kMaxRank) + " levels");
    s.dims.push_back(static_cast<int64_t>(e->size()));
  }
  read_stat_values(c, key, v, s, 0);
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

class Normalization final : public Layer {
 public:
  Normalization(LayerConfig& c, const std::string& name) : Layer(name) {
    const Json* ax = c.get_raw("axis");
    if (!(ax && ax->is_array() && ax->empty())) axes_ = parse_keras_axes(c, "axis", -1);
    axes_.is_list = true;  // Keras keeps a tuple, written as a list
    invert_ = c.get_bool("invert", false);
    const Json* m = c.get_raw("mean");
    const Json* v = c.get_raw("variance");
    if ((m == nullptr) != (v == nullptr))
      c.fail(m ? "variance" : "mean",
             "both mean and variance, or neither (then the layer adapts them from data)");
    if (!m) return;
    mean_json_ = *m;
    var_json_ = *v;
    read_stat(c, "mean", *m, mean_);
    read_stat(c, "variance", *v, var_);
    if (mean_.dims != var_.dims) c.fail("variance", "the same shape as mean");
    for (float x : var_.values)
      if (x < 0) c.fail("variance", "values >= 0");
    has_stats_ = true;
  }
  const char* class_name() const override { return "Normalization"; }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }
  bool adapts() const { return !has_stats_; }
  const KerasAxes& axes() const { return axes_; }

  Shape output_shape(const std::vector<Shape>& in) const override {
    const Shape kept = kept_shape(in[0], resolve_axes(axes_, in[0], "normalizes over"));
    if (has_stats_) {
      const size_t r = mean_.dims.size();
      bool ok = r <= static_cast<size_t>(kept.rank());
      for (size_t i = 0; ok && i < r; ++i) {
        const int64_t d = mean_.dims[r - 1 - i], k = kept[kept.rank() - 1 - static_cast<int>(i)];
        ok = d == 1 || d == k;
      }
      if (!ok)
        throw ModelError("mean of shape " + dims_str(mean_.dims) +
                         " does not broadcast over the kept axes " + kept.str() + " of input " +
                         keras_shape(in[0]) + "; expected a scalar or dims aligned from the right");
    }
    return in[0];
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    if (has_stats_) return {};
    const Shape kept = kept_shape(in[0], resolve_axes_unchecked(axes_, in[0]));
    return {{"mean", kept, Initializer{InitKind::kZeros}, false},
            {"variance", kept, Initializer{InitKind::kOnes}, false},
            {"count", Shape{}, Initializer{InitKind::kZeros}, false}};
  }
  // The mean and the divisor of every kept position, expanded once per call.
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return 2 * static_cast<size_t>(split(in[0]).cols);
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return 2.0 * static_cast<double>(in[0].size());
  }

  void forward(const LayerArgs& a) const override {
    const float* m = a.scratch;
    const float* d = a.scratch + stats(a);
    walk(a, [&](int64_t o, int64_t c) {
      a.y[o] = invert_ ? m[c] + a.x[0][o] * d[c] : (a.x[0][o] - m[c]) / d[c];
    });
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const float* d = a.scratch + stats(a);
    walk(a, [&](int64_t o, int64_t c) { a.dx[0][o] += invert_ ? a.dy[o] * d[c] : a.dy[o] / d[c]; });
  }

  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["axis"] = keras_axes_json(axes_);
    j["invert"] = invert_;
    j["mean"] = has_stats_ ? mean_json_ : Json(nullptr);
    j["variance"] = has_stats_ ? var_json_ : Json(nullptr);
    return j;
  }

 private:
  static Shape kept_shape(const Shape& in, unsigned mask) {
    Shape k;
    for (int i = 0; i < in.rank(); ++i)
      if (mask >> i & 1u) k.push_back(in[i]);
    return k;
  }
  AxisSplit split(const Shape& in) const {
    return split_axes(in, resolve_axes_unchecked(axes_, in));
  }
  // Writes the mean and the divisor max(sqrt(var), eps) of every kept position to scratch
  // (mean first); returns the number of kept positions.
  int64_t stats(const LayerArgs& a) const {
    const Shape& in = a.in_shapes[0];
    const int64_t cols = split(in).cols;
    constants(in, a.params, a.scratch, a.scratch + cols);
    return cols;
  }

 public:
  // The mean m and divisor d [kept positions] over input `in`, with the layer's weights `params`
  // (none when the config gives them).
  void constants(const Shape& in, const float* const* params, float* m, float* d) const {
    const Shape kept = kept_shape(in, resolve_axes_unchecked(axes_, in));
    for (int64_t c = 0; c < kept.size(); ++c) {
      const int64_t i = has_stats_ ? stat_index(kept, c) : c;
      m[c] = has_stats_ ? mean_.values[static_cast<size_t>(i)] : params[0][c];
      const float var = has_stats_ ? var_.values[static_cast<size_t>(i)] : params[1][c];
      d[c] = std::fmax(std::sqrt(var), kEpsilon);
    }
  }
  bool inverts() const { return invert_; }

 private:
  // The index into the config's mean of kept position c, broadcast from the right.
  int64_t stat_index(const Shape& kept, int64_t c) const {
    const size_t r = mean_.dims.size();
    int64_t idx = 0, stride = 1;
    for (size_t i = 0; i < r; ++i) {
      const int64_t k = kept[kept.rank() - 1 - static_cast<int>(i)];
      const int64_t d = mean_.dims[r - 1 - i];
      const int64_t coord = c % k;
      c /= k;
      if (d != 1) idx += coord * stride;
      stride *= d;
    }
    return idx;
  }
  // Calls f(flat offset, kept position) for every value of the batch.
  template <typename F>
  void walk(const LayerArgs& a, F f) const {
    const Shape& in = a.in_shapes[0];
    const unsigned mask = resolve_axes_unchecked(axes_, in);
    const AxisSplit sp = split_axes(in, mask);
    if (sp.trailing) {
      const int64_t total = static_cast<int64_t>(rows_floats(a.n, in));
      for (int64_t o = 0; o < total; ++o) f(o, o % sp.cols);
      return;
    }
    const int64_t per = in.size();
    for (int64_t i = 0; i < a.n; ++i)
      for_each_axis_offset(in, mask, [&](int64_t o, int64_t k) { f(i * per + o, k % sp.cols); });
  }

  KerasAxes axes_;
  bool invert_ = false, has_stats_ = false;
  Stat mean_, var_;
  Json mean_json_, var_json_;
};

}  // namespace

std::unique_ptr<Layer> make_normalization(LayerConfig& c, const std::string& name) {
  return std::make_unique<Normalization>(c, name);
}

bool normalization_adapts(const Layer& layer) {
  const auto* n = dynamic_cast<const Normalization*>(&layer);
  return n && n->adapts();
}

NormalizationStats::NormalizationStats(const Layer& layer, const Shape& in) : in_(in) {
  const auto* n = dynamic_cast<const Normalization*>(&layer);
  NNFLEET_CHECK(n && n->adapts());
  mask_ = resolve_axes_unchecked(n->axes(), in);
  const AxisSplit sp = split_axes(in, mask_);
  sum_.assign(static_cast<size_t>(sp.cols), 0.0);
  sq_.assign(sum_.size(), 0.0);
  n_.assign(sum_.size(), 0);
}

void NormalizationStats::add_for_mean(const float* rows, int64_t n) {
  const int64_t per = in_.size(), cols = kept();
  for (int64_t i = 0; i < n; ++i)
    for_each_axis_offset(in_, mask_, [&](int64_t o, int64_t k) {
      sum_[static_cast<size_t>(k % cols)] += rows[i * per + o];
      ++n_[static_cast<size_t>(k % cols)];
    });
}

void NormalizationStats::add_for_variance(const float* rows, int64_t n) {
  const int64_t per = in_.size(), cols = kept();
  for (int64_t i = 0; i < n; ++i)
    for_each_axis_offset(in_, mask_, [&](int64_t o, int64_t k) {
      const size_t c = static_cast<size_t>(k % cols);
      const double mean = n_[c] ? sum_[c] / static_cast<double>(n_[c]) : 0.0;
      const double dev = rows[i * per + o] - mean;
      sq_[c] += dev * dev;
    });
}

void NormalizationStats::finish(float* mean, float* variance, float* count) const {
  for (size_t c = 0; c < sum_.size(); ++c) {
    const auto cnt = static_cast<double>(n_[c]);
    mean[c] = cnt > 0 ? static_cast<float>(sum_[c] / cnt) : 0.0f;
    variance[c] = cnt > 0 ? static_cast<float>(sq_[c] / cnt) : 1.0f;
  }
  *count = static_cast<float>(n_.empty() ? 0 : n_[0]);
}

NormalizationConstants normalization_constants(const Layer& layer, const Shape& in,
                                               const float* const* params) {
  const auto* n = dynamic_cast<const Normalization*>(&layer);
  NNFLEET_CHECK(n != nullptr);
  NormalizationConstants k;
  k.invert = n->inverts();
  const unsigned mask = resolve_axes_unchecked(n->axes(), in);
  int64_t cols = 1;
  for (int i = 0; i < in.rank(); ++i) {
    k.dims.push_back(mask >> i & 1u ? in[i] : 1);
    cols *= k.dims.back();
  }
  k.mean.resize(static_cast<size_t>(cols));
  k.divisor.resize(k.mean.size());
  n->constants(in, params, k.mean.data(), k.divisor.data());
  return k;
}

std::vector<LayerExample> normalization_examples() {
  return {
      {{}, {Shape{4}}},
      {{{"axis", Json::array()}, {"invert", true}}, {Shape{3, 2}}},
      {{{"axis", Json{1}}}, {Shape{2, 3}}},
      {{{"axis", Json{-1}}, {"mean", Json{1.0, 2.0, 3.0}}, {"variance", Json{4.0, 0.25, 1.0}}},
       {Shape{2, 3}}},
      {{{"axis", Json{1, 2}}, {"mean", 0.5}, {"variance", 2.0}, {"invert", true}}, {Shape{2, 3}}}};
}

}  // namespace nnfleet
