// Discretization and CategoryEncoding, Keras semantics (Keras 3 and tf.keras 2.x): both turn
// numbers into category ids and encode them, so they share the encoder.
// Discretization: id = the number of bin_boundaries <= x (np.digitize, right=False), so
// boundaries [0, 1] give ids 0 (x < 0), 1 (0 <= x < 1), 2 (x >= 1); depth = boundaries + 1. Given
// num_bins instead, the boundaries are adapted from data (discretization_boundaries below, Keras's
// quantile summary) before the model is built. No weights; a NaN input gets id 0.
// CategoryEncoding: reads integer ids in [0, num_tokens) like Embedding (input_id_limit: it must
// take a model input, whose values the loaders check, so an id out of range is refused with the
// data, as Keras refuses it); an id outside the range that only a changed array could bring adds
// nothing here.
// Encodings over depth k: int (the ids, as floats; Discretization only), one_hot (a trailing
// axis of size 1 is replaced by k, otherwise k is appended), multi_hot (1 for every id present
// in the last axis) and count (how often each id occurs in it): [..., F] -> [..., k].
// Ids are piecewise constant in the input: no gradient flows back (dx stays as it is).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/preprocessing.h"

namespace nnfleet {
namespace {

enum class Encoding { kInt, kOneHot, kMultiHot, kCount };

Encoding parse_encoding(LayerConfig& c, const char* def, bool with_int) {
  std::vector<std::string> modes = {"one_hot", "multi_hot", "count"};
  if (with_int) modes.insert(modes.begin(), "int");
  std::string m =
      c.get_string("output_mode", std::string(def), with_int ? modes : std::vector<std::string>{});
  if (!with_int && m == "binary") m = "multi_hot";  // Keras's deprecated name
  if (m == "int") return Encoding::kInt;
  if (m == "one_hot") return Encoding::kOneHot;
  if (m == "multi_hot") return Encoding::kMultiHot;
  if (m == "count") return Encoding::kCount;
  c.fail("output_mode", "one of one_hot, multi_hot, count");
}

const char* encoding_name(Encoding e) {
  switch (e) {
    case Encoding::kInt:
      return "int";
    case Encoding::kOneHot:
      return "one_hot";
    case Encoding::kMultiHot:
      return "multi_hot";
    case Encoding::kCount:
      return "count";
  }
  return "int";
}

void refuse_sparse(LayerConfig& c) {
  if (c.get_bool("sparse", false))
    c.fail("sparse", "false (nnfleet's tensors are dense; the dense output is the same numbers)");
}

Shape encoded_shape(const Shape& in, Encoding e, int64_t depth) {
  if (e == Encoding::kInt) return in;
  Shape out;
  if (e == Encoding::kOneHot) {
    const bool replace = in.rank() >= 1 && in[in.rank() - 1] == 1;
    if (!replace && in.rank() + 1 >= Shape::kMaxRank)
      throw ModelError("one_hot adds an axis to input " + keras_shape(in) +
                       "; expected rank at most " + std::to_string(Shape::kMaxRank - 1));
    for (int i = 0; i < in.rank() - (replace ? 1 : 0); ++i) out.push_back(in[i]);
  } else {
    if (in.rank() != 1)
      throw ModelError(std::string(e == Encoding::kCount ? "count" : "multi_hot") +
                       " encodes the ids of each sample; expected an input [batch, ids], got " +
                       keras_shape(in));
  }
  out.push_back(depth);
  if (!size_at_most(out, limits::kMaxSampleFloats))
    throw ModelError("output " + keras_shape(out) + " is too large; expected at most " +
                     std::to_string(limits::kMaxSampleFloats) + " values per sample");
  return out;
}

// Writes the encoding of `n` samples of ids (ids[i] < 0 or >= depth: none) of per-sample shape
// `in` to y [n, encoded_shape].
template <typename Id>
void encode(const LayerArgs& a, Encoding e, int64_t depth, Id id_of) {
  const Shape& in = a.in_shapes[0];
  const int64_t total = static_cast<int64_t>(rows_floats(a.n, in));
  if (e == Encoding::kInt) {
    for (int64_t i = 0; i < total; ++i) a.y[i] = static_cast<float>(id_of(i));
    return;
  }
  std::memset(a.y, 0, rows_floats(a.n, a.out_shape) * sizeof(float));
  // one_hot: every id has its own row of depth; multi_hot and count: every sample's last axis
  // shares one row.
  const int64_t group = e == Encoding::kOneHot ? 1 : in[in.rank() - 1];
  for (int64_t i = 0; i < total; ++i) {
    const int64_t id = id_of(i);
    if (id < 0 || id >= depth) continue;
    float* row = a.y + (i / group) * depth;
    row[id] = e == Encoding::kCount ? row[id] + 1.0f : 1.0f;
  }
}

class CategoryEncoding final : public Layer {
 public:
  CategoryEncoding(LayerConfig& c, const std::string& name) : Layer(name) {
    num_tokens_ = c.get_int("num_tokens", std::nullopt, 1);
    if (num_tokens_ > (int64_t{1} << 24))
      c.fail("num_tokens", "at most 16777216 (ids travel as float32, exact up to 2^24)");
    mode_ = parse_encoding(c, "multi_hot", false);
    refuse_sparse(c);
  }
  const char* class_name() const override { return "CategoryEncoding"; }
  int64_t input_id_limit() const override { return num_tokens_; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    return encoded_shape(in[0], mode_, num_tokens_);
  }
  void forward(const LayerArgs& a) const override {
    const float* x = a.x[0];
    const auto limit = static_cast<float>(num_tokens_);
    encode(a, mode_, num_tokens_, [&](int64_t i) -> int64_t {
      return x[i] >= 0 && x[i] < limit ? static_cast<int64_t>(x[i]) : -1;
    });
  }
  void backward(const LayerArgs&) const override {}
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["num_tokens"] = num_tokens_;
    j["output_mode"] = encoding_name(mode_);
    j["sparse"] = false;
    return j;
  }

 private:
  int64_t num_tokens_ = 0;
  Encoding mode_ = Encoding::kMultiHot;
};

class Discretization final : public Layer {
 public:
  Discretization(LayerConfig& c, const std::string& name) : Layer(name) {
    if (const Json* b = c.get_raw("bin_boundaries")) {
      if (!b->is_array() || b->size() > static_cast<size_t>(limits::kMaxConfigInt))
        c.fail("bin_boundaries", "a list of numbers in ascending order");
      for (const Json& v : *b) {
        const double d = v.is_number() ? v.get<double>() : NAN;
        if (!std::isfinite(d) || (!bounds_.empty() && d < bounds_.back()))
          c.fail("bin_boundaries", "a list of finite numbers in ascending order");
        bounds_.push_back(d);
      }
      has_bounds_ = true;
    }
    if (c.has("num_bins")) num_bins_ = c.get_int("num_bins", std::nullopt, 1);
    if (!has_bounds_ && num_bins_ < 0)
      c.fail("num_bins", "bin_boundaries or num_bins (then the boundaries are adapted from data)");
    epsilon_ = c.get_float("epsilon", 0.01);
    if (!(epsilon_ > 0 && epsilon_ <= 1)) c.fail("epsilon", "a number in (0, 1]");
    mode_ = parse_encoding(c, "int", true);
    refuse_sparse(c);
  }
  const char* class_name() const override { return "Discretization"; }
  bool adapted() const { return has_bounds_; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (!has_bounds_)
      throw ModelError("has num_bins but no bin_boundaries; expected boundaries in its config, " +
                       std::string("or the layer on a model input of a plan, which adapts them"));
    return encoded_shape(in[0], mode_, static_cast<int64_t>(bounds_.size()) + 1);
  }
  void forward(const LayerArgs& a) const override {
    const float* x = a.x[0];
    encode(a, mode_, static_cast<int64_t>(bounds_.size()) + 1, [&](int64_t i) -> int64_t {
      // Keras compares float32 inputs with float32 boundaries.
      const float v = x[i];
      if (std::isnan(v)) return 0;
      int64_t lo = 0, hi = static_cast<int64_t>(bounds_.size());
      while (lo < hi) {  // the first boundary > v
        const int64_t mid = (lo + hi) / 2;
        if (static_cast<float>(bounds_[static_cast<size_t>(mid)]) <= v)
          lo = mid + 1;
        else
          hi = mid;
      }
      return lo;
    });
  }
  void backward(const LayerArgs&) const override {}
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["bin_boundaries"] = has_bounds_ ? Json(bounds_) : Json(nullptr);
    j["num_bins"] = num_bins_ >= 0 ? Json(num_bins_) : Json(nullptr);
    j["epsilon"] = epsilon_;
    j["output_mode"] = encoding_name(mode_);
    j["sparse"] = false;
    return j;
  }

 private:
  std::vector<double> bounds_;
  bool has_bounds_ = false;
  int64_t num_bins_ = -1;
  double epsilon_ = 0.01;
  Encoding mode_ = Encoding::kInt;
};

}  // namespace

std::unique_ptr<Layer> make_category_encoding(LayerConfig& c, const std::string& name) {
  return std::make_unique<CategoryEncoding>(c, name);
}
std::unique_ptr<Layer> make_discretization(LayerConfig& c, const std::string& name) {
  return std::make_unique<Discretization>(c, name);
}

std::vector<LayerExample> category_encoding_examples() {
  std::vector<LayerExample> v;
  for (const char* mode : {"one_hot", "multi_hot", "count"}) {
    LayerExample e{{{"num_tokens", 4}, {"output_mode", mode}}, {Shape{3}}};
    e.id_limit = 4;  // ids repeat within a sample: count adds them up
    v.push_back(e);
  }
  LayerExample single{{{"num_tokens", 3}, {"output_mode", "one_hot"}}, {Shape{2, 1}}};
  single.id_limit = 3;
  v.push_back(single);
  return v;
}

std::vector<LayerExample> discretization_examples() {
  std::vector<LayerExample> v;
  for (const char* mode : {"int", "one_hot", "multi_hot", "count"})
    v.push_back({{{"bin_boundaries", Json{-0.55, 0.05, 0.65}}, {"output_mode", mode}}, {Shape{3}}});
  return v;
}

}  // namespace nnfleet

namespace nnfleet {
namespace {

// np.interp(x, xp, fp) for ascending xp (float32 values, computed in double as numpy does).
double interp(double x, const std::vector<float>& xp, const std::vector<float>& fp) {
  const size_t n = xp.size();
  if (x < xp[0]) return fp[0];
  if (x > xp[n - 1]) return fp[n - 1];
  // j: the last index with xp[j] <= x
  const size_t j = static_cast<size_t>(std::upper_bound(xp.begin(), xp.end(), x,
                                                        [](double v, float e) { return v < e; }) -
                                       xp.begin()) -
                   1;
  if (j == n - 1 || static_cast<double>(xp[j]) == x) return fp[j];
  const double slope =
      (static_cast<double>(fp[j + 1]) - fp[j]) / (static_cast<double>(xp[j + 1]) - xp[j]);
  double r = slope * (x - xp[j]) + fp[j];
  if (std::isnan(r)) {
    r = slope * (x - xp[j + 1]) + fp[j + 1];
    if (std::isnan(r) && fp[j] == fp[j + 1]) r = fp[j];
  }
  return r;
}

// A summary: values and weights (counts), float32 as Keras keeps them.
struct Summary {
  std::vector<float> values, weights;
};

// Keras's compress_summary: the summary re-sampled at the cumulative-weight fractions epsilon,
// 2 epsilon, ..., 1 (unchanged when it has fewer than 1/epsilon points).
Summary compress(const Summary& s, double epsilon) {
  if (static_cast<double>(s.values.size()) * epsilon < 1) return s;
  std::vector<float> cum(s.weights.size()), frac(s.weights.size());
  float acc = 0.0f;  // numpy's float32 cumsum: sequential, in float32
  for (size_t i = 0; i < cum.size(); ++i) cum[i] = acc += s.weights[i];
  for (size_t i = 0; i < cum.size(); ++i) frac[i] = cum[i] / cum.back();
  const auto points = static_cast<size_t>(std::ceil(1.0 / epsilon));  // np.arange(0, 1, eps)
  Summary out;
  double prev = 0.0;
  for (size_t i = 0; i < points; ++i) {
    const double p = epsilon + static_cast<double>(i) * epsilon;
    out.values.push_back(static_cast<float>(interp(p, frac, s.values)));
    const double c = interp(p, frac, cum);
    out.weights.push_back(static_cast<float>(c - prev));
    prev = c;
  }
  return out;
}

}  // namespace

bool discretization_adapts(const Layer& layer) {
  const auto* d = dynamic_cast<const Discretization*>(&layer);
  return d && !d->adapted();
}

std::vector<double> discretization_boundaries(std::vector<float>& values, int64_t num_bins,
                                              double epsilon) {
  std::sort(values.begin(), values.end());
  // summarize(): every step-th sorted value, each standing for `step` values.
  const double step = std::max(static_cast<double>(values.size()) / (1.0 / epsilon), 1.0);
  Summary s;
  for (auto i = static_cast<size_t>(step - 1); i < values.size(); i += static_cast<size_t>(step)) {
    s.values.push_back(values[i]);
    s.weights.push_back(static_cast<float>(step));
  }
  if (s.values.empty()) return {};
  s = compress(compress(s, epsilon), 1.0 / static_cast<double>(std::max<int64_t>(num_bins, 1)));
  if (s.values.empty()) return {};
  return std::vector<double>(s.values.begin(), s.values.end() - 1);
}

}  // namespace nnfleet
