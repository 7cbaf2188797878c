// Merge layers of two or more inputs, Keras semantics: Add, Multiply, Average, Maximum and
// Minimum (element-wise over inputs of one shape; Maximum/Minimum send the gradient to the first
// input holding the extreme, as TensorFlow's gradients do pairwise), Subtract (exactly two),
// Concatenate (along one axis, default the last; the other axes must match) and Dot (a batch
// dot product over one axis of each of two inputs, optionally of L2-normalized inputs).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

std::string shapes_str(const std::vector<Shape>& in) {
  std::string s;
  for (const auto& x : in) s += (s.empty() ? "" : ", ") + keras_shape(x);
  return s;
}

class Add final : public Layer {
 public:
  using Layer::Layer;
  const char* class_name() const override { return "Add"; }
  int arity() const override { return 0; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in.size() < 2)
      throw ModelError("needs at least 2 inputs, got " + std::to_string(in.size()));
    for (const auto& s : in)
      if (!(s == in[0]))
        throw ModelError("adds inputs of different shapes " + shapes_str(in) +
                         "; expected every input to have the same shape");
    return in[0];
  }
  void forward(const LayerArgs& a) const override {
    const size_t m = rows_floats(a.n, a.out_shape);
    std::memcpy(a.y, a.x[0], m * sizeof(float));
    for (size_t k = 1; k < num_inputs(a); ++k)
      for (size_t i = 0; i < m; ++i) a.y[i] += a.x[k][i];
  }
  void backward(const LayerArgs& a) const override {
    const size_t m = rows_floats(a.n, a.out_shape);
    for (size_t k = 0; k < num_inputs(a); ++k)
      if (a.dx[k])
        for (size_t i = 0; i < m; ++i) a.dx[k][i] += a.dy[i];
  }
  Json keras_config() const override { return base_keras_config(*this); }

 private:
  static size_t num_inputs(const LayerArgs& a) { return static_cast<size_t>(a.n_inputs); }
};

enum class MergeOp { kMultiply, kSubtract, kAverage, kMaximum, kMinimum };

void require_same_shapes(const std::vector<Shape>& in, size_t exactly) {
  if (exactly ? in.size() != exactly : in.size() < 2)
    throw ModelError("needs " + std::string(exactly ? "exactly " : "at least ") +
                     std::to_string(exactly ? exactly : 2) + " inputs, got " +
                     std::to_string(in.size()));
  for (const auto& s : in)
    if (!(s == in[0]))
      throw ModelError("merges inputs of different shapes " + shapes_str(in) +
                       "; expected every input to have the same shape");
}

class ElementwiseMerge final : public Layer {
 public:
  ElementwiseMerge(const std::string& name, MergeOp op) : Layer(name), op_(op) {}
  const char* class_name() const override {
    switch (op_) {
      case MergeOp::kMultiply:
        return "Multiply";
      case MergeOp::kSubtract:
        return "Subtract";
      case MergeOp::kAverage:
        return "Average";
      case MergeOp::kMaximum:
        return "Maximum";
      case MergeOp::kMinimum:
        return "Minimum";
    }
    return "";
  }
  int arity() const override { return 0; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_same_shapes(in, op_ == MergeOp::kSubtract ? 2 : 0);
    return in[0];
  }
  void forward(const LayerArgs& a) const override {
    const size_t m = rows_floats(a.n, a.out_shape);
    const size_t k_n = static_cast<size_t>(a.n_inputs);
    std::memcpy(a.y, a.x[0], m * sizeof(float));
    for (size_t k = 1; k < k_n; ++k) {
      const float* x = a.x[k];
      float* y = a.y;
      switch (op_) {
        case MergeOp::kMultiply:
          for (size_t i = 0; i < m; ++i) y[i] *= x[i];
          break;
        case MergeOp::kSubtract:
          for (size_t i = 0; i < m; ++i) y[i] -= x[i];
          break;
        case MergeOp::kAverage:
          for (size_t i = 0; i < m; ++i) y[i] += x[i];
          break;
        case MergeOp::kMaximum:
          for (size_t i = 0; i < m; ++i) y[i] = std::max(y[i], x[i]);
          break;
        case MergeOp::kMinimum:
          for (size_t i = 0; i < m; ++i) y[i] = std::min(y[i], x[i]);
          break;
      }
    }
    if (op_ == MergeOp::kAverage) {
      const float inv = 1.0f / static_cast<float>(k_n);
      for (size_t i = 0; i < m; ++i) a.y[i] *= inv;
    }
  }
  void backward(const LayerArgs& a) const override {
    const size_t m = rows_floats(a.n, a.out_shape);
    const size_t k_n = static_cast<size_t>(a.n_inputs);
    switch (op_) {
      case MergeOp::kSubtract:
        if (a.dx[0])
          for (size_t i = 0; i < m; ++i) a.dx[0][i] += a.dy[i];
        if (a.dx[1])
          for (size_t i = 0; i < m; ++i) a.dx[1][i] -= a.dy[i];
        return;
      case MergeOp::kAverage: {
        const float inv = 1.0f / static_cast<float>(k_n);
        for (size_t k = 0; k < k_n; ++k)
          if (a.dx[k])
            for (size_t i = 0; i < m; ++i) a.dx[k][i] += a.dy[i] * inv;
        return;
      }
      case MergeOp::kMultiply:
        // d/dx_k = dy * the product of the other inputs (no division: inputs may be zero).
        for (size_t k = 0; k < k_n; ++k) {
          if (!a.dx[k]) continue;
          for (size_t i = 0; i < m; ++i) {
            float p = a.dy[i];
            for (size_t j = 0; j < k_n; ++j)
              if (j != k) p *= a.x[j][i];
            a.dx[k][i] += p;
          }
        }
        return;
      case MergeOp::kMaximum:
      case MergeOp::kMinimum:
        // The output is the input itself; the first input equal to it gets the gradient.
        for (size_t i = 0; i < m; ++i) {
          size_t k = 0;
          while (k + 1 < k_n && a.x[k][i] != a.y[i]) ++k;
          if (a.dx[k]) a.dx[k][i] += a.dy[i];
        }
        return;
    }
  }
  Json keras_config() const override { return base_keras_config(*this); }

 private:
  MergeOp op_;
};

// Dot: per-sample inputs A and B contract one axis each (Keras's `axes`, an int for both or
// [a, b], counted with the batch axis as 0, negative from the end). Each input is viewed as
// [pre, K, post] around its axis; the output holds A's other axes then B's, as Keras's
// batch_dot, or [1] when there are none. normalize divides each fibre along K by its L2 norm
// first (Keras 3's ops.normalize: the squared norm clamped at 1e-14).
constexpr double kDotNormMin = 1e-14;

struct DotView {
  int64_t pre = 1, k = 1, post = 1;
};

class Dot final : public Layer {
 public:
  Dot(LayerConfig& c, const std::string& name) : Layer(name) {
    const Json* ax = c.get_raw("axes");
    const char* what = "an axis or a list of two axes (ints other than the batch axis 0)";
    if (!ax || ax->is_null()) c.fail("axes", what);
    auto one = [&](const Json& e) {
      const std::optional<int64_t> i = config_int(e, -Shape::kMaxRank - 1);
      if (!i || *i == 0 || *i > Shape::kMaxRank) c.fail("axes", what);
      return *i;
    };
    if (ax->is_array()) {
      if (ax->size() != 2) c.fail("axes", what);
      axes_ = {one((*ax)[0]), one((*ax)[1])};
      list_ = true;
    } else {
      axes_[0] = axes_[1] = one(*ax);
    }
    normalize_ = c.get_bool("normalize", false);
  }
  const char* class_name() const override { return "Dot"; }
  int arity() const override { return 0; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in.size() != 2)
      throw ModelError("needs exactly 2 inputs, got " + std::to_string(in.size()));
    const int a0 = axis(0, in[0]), a1 = axis(1, in[1]);
    if (a0 < 0 || a1 < 0)
      throw ModelError("takes the dot product over axes " + axes_json().dump() + " of inputs " +
                       shapes_str(in) +
                       "; expected an axis of each input other than the batch axis");
    if (in[0][a0] != in[1][a1])
      throw ModelError("takes the dot product over axes " + axes_json().dump() + " of inputs " +
                       shapes_str(in) + "; expected the two axes to have the same size, got " +
                       std::to_string(in[0][a0]) + " and " + std::to_string(in[1][a1]));
    if (in[0].rank() + in[1].rank() - 2 > Shape::kMaxRank)
      throw ModelError("takes the dot product of inputs " + shapes_str(in) +
                       "; expected an output of rank at most " + std::to_string(Shape::kMaxRank));
    Shape out;
    for (int i = 0; i < in[0].rank(); ++i)
      if (i != a0) out.push_back(in[0][i]);
    for (int i = 0; i < in[1].rank(); ++i)
      if (i != a1) out.push_back(in[1][i]);
    if (out.rank() == 0) out.push_back(1);
    return out;
  }
  // normalize: both normalized inputs and the squared norm of each fibre.
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    if (!normalize_) return 0;
    const DotView v0 = view(0, in[0]), v1 = view(1, in[1]);
    return static_cast<size_t>(n) *
           static_cast<size_t>(in[0].size() + in[1].size() + v0.pre * v0.post + v1.pre * v1.post);
  }
  // Backward with normalize: the gradient of each normalized input.
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return normalize_ ? static_cast<size_t>(n) * static_cast<size_t>(in[0].size() + in[1].size())
                      : 0;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    const DotView v0 = view(0, in[0]), v1 = view(1, in[1]);
    return 2.0 * static_cast<double>(v0.pre * v0.post * v1.pre * v1.post * v0.k);
  }
  void forward(const LayerArgs& a) const override {
    const DotView v0 = view(0, a.in_shapes[0]), v1 = view(1, a.in_shapes[1]);
    const float* x0 = a.x[0];
    const float* x1 = a.x[1];
    if (normalize_) {
      const int64_t s0 = a.in_shapes[0].size(), s1 = a.in_shapes[1].size();
      float* n0 = a.cache;
      float* n1 = n0 + a.n * s0;
      float* ss0 = n1 + a.n * s1;
      float* ss1 = ss0 + a.n * v0.pre * v0.post;
      normalize_fibres(v0, a.n, x0, n0, ss0);
      normalize_fibres(v1, a.n, x1, n1, ss1);
      x0 = n0;
      x1 = n1;
    }
    const int64_t s0 = a.in_shapes[0].size(), s1 = a.in_shapes[1].size();
    const int64_t i_n = v0.pre * v0.post, j_n = v1.pre * v1.post;
    for (int n = 0; n < a.n; ++n) {
      const float* p0 = x0 + n * s0;
      const float* p1 = x1 + n * s1;
      float* y = a.y + n * i_n * j_n;
      for (int64_t i = 0; i < i_n; ++i) {
        const float* r0 = p0 + (i / v0.post) * v0.k * v0.post + i % v0.post;
        for (int64_t j = 0; j < j_n; ++j) {
          const float* r1 = p1 + (j / v1.post) * v1.k * v1.post + j % v1.post;
          float acc = 0.0f;
          for (int64_t k = 0; k < v0.k; ++k) acc += r0[k * v0.post] * r1[k * v1.post];
          y[i * j_n + j] = acc;
        }
      }
    }
  }
  void backward(const LayerArgs& a) const override {
    const DotView v0 = view(0, a.in_shapes[0]), v1 = view(1, a.in_shapes[1]);
    const int64_t s0 = a.in_shapes[0].size(), s1 = a.in_shapes[1].size();
    const float* x0 = normalize_ ? a.cache : a.x[0];
    const float* x1 = normalize_ ? a.cache + a.n * s0 : a.x[1];
    // Gradients of the (normalized) inputs: straight into dx without normalize.
    float* g0 = normalize_ ? a.scratch : a.dx[0];
    float* g1 = normalize_ ? a.scratch + a.n * s0 : a.dx[1];
    if (normalize_) std::fill(a.scratch, a.scratch + a.n * (s0 + s1), 0.0f);
    const int64_t i_n = v0.pre * v0.post, j_n = v1.pre * v1.post;
    for (int n = 0; n < a.n; ++n) {
      const float* dy = a.dy + n * i_n * j_n;
      for (int64_t i = 0; i < i_n; ++i) {
        const int64_t o0 = n * s0 + (i / v0.post) * v0.k * v0.post + i % v0.post;
        for (int64_t j = 0; j < j_n; ++j) {
          const int64_t o1 = n * s1 + (j / v1.post) * v1.k * v1.post + j % v1.post;
          const float d = dy[i * j_n + j];
          for (int64_t k = 0; k < v0.k; ++k) {
            if (g0) g0[o0 + k * v0.post] += d * x1[o1 + k * v1.post];
            if (g1) g1[o1 + k * v1.post] += d * x0[o0 + k * v0.post];
          }
        }
      }
    }
    if (!normalize_) return;
    const float* ss0 = a.cache + a.n * (s0 + s1);
    const float* ss1 = ss0 + a.n * v0.pre * v0.post;
    if (a.dx[0]) normalize_backward(v0, a.n, x0, ss0, g0, a.dx[0]);
    if (a.dx[1]) normalize_backward(v1, a.n, x1, ss1, g1, a.dx[1]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["axes"] = axes_json();
    j["normalize"] = normalize_;
    return j;
  }

 private:
  Json axes_json() const { return list_ ? Json{axes_[0], axes_[1]} : Json(axes_[0]); }
  // The per-sample axis of input `which`, or -1 when it names the batch axis or lies outside.
  int axis(int which, const Shape& s) const {
    const int64_t v = axes_[which];
    const int64_t full = v < 0 ? v + s.rank() + 1 : v;  // Keras: axes % ndim
    return full >= 1 && full <= s.rank() ? static_cast<int>(full - 1) : -1;
  }
  DotView view(int which, const Shape& s) const {
    const int ax = axis(which, s);
    DotView v;
    for (int i = 0; i < s.rank(); ++i) (i < ax ? v.pre : i == ax ? v.k : v.post) *= s[i];
    return v;
  }
  // out = x / sqrt(max(sum_k x^2, eps)) along K for every (pre, post) fibre; ss keeps the sums.
  static void normalize_fibres(const DotView& v, int n, const float* x, float* out, float* ss) {
    const int64_t fibres = v.pre * v.post;
    for (int64_t f = 0; f < n * fibres; ++f) {
      const int64_t base = (f / v.post) * v.k * v.post + f % v.post;
      double s = 0.0;
      for (int64_t k = 0; k < v.k; ++k)
        s += static_cast<double>(x[base + k * v.post]) * x[base + k * v.post];
      ss[f] = static_cast<float>(s);
      const auto inv = static_cast<float>(1.0 / std::sqrt(std::max(s, kDotNormMin)));
      for (int64_t k = 0; k < v.k; ++k) out[base + k * v.post] = x[base + k * v.post] * inv;
    }
  }
  // dx += inv * (g - u * sum_k(g * u)) along K, with u the normalized input (inv * g when the
  // clamp holds).
  static void normalize_backward(const DotView& v, int n, const float* u, const float* ss,
                                 const float* g, float* dx) {
    const int64_t fibres = v.pre * v.post;
    for (int64_t f = 0; f < n * fibres; ++f) {
      const int64_t base = (f / v.post) * v.k * v.post + f % v.post;
      const bool clamped = ss[f] < kDotNormMin;
      const double inv = 1.0 / std::sqrt(std::max(static_cast<double>(ss[f]), kDotNormMin));
      double dot = 0.0;
      for (int64_t k = 0; k < v.k; ++k)
        dot += static_cast<double>(g[base + k * v.post]) * u[base + k * v.post];
      if (clamped) dot = 0.0;
      for (int64_t k = 0; k < v.k; ++k) {
        const int64_t o = base + k * v.post;
        dx[o] += static_cast<float>(inv * (g[o] - u[o] * dot));
      }
    }
  }
  std::array<int64_t, 2> axes_{-1, -1};
  bool list_ = false, normalize_ = false;
};

class Concatenate final : public Layer {
 public:
  Concatenate(LayerConfig& c, const std::string& name) : Layer(name) {
    axis_ = static_cast<int>(c.get_int("axis", -1, -1000));
  }
  const char* class_name() const override { return "Concatenate"; }
  int arity() const override { return 0; }
  // Axis within the per-sample shape.
  int sample_axis(const Shape& s) const { return axis_ < 0 ? s.rank() + axis_ : axis_ - 1; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in.size() < 2)
      throw ModelError("needs at least 2 inputs, got " + std::to_string(in.size()));
    const int ax = sample_axis(in[0]);
    if (ax < 0 || ax >= in[0].rank())
      throw ModelError("concatenates along axis " + std::to_string(axis_) + " of inputs " +
                       shapes_str(in) +
                       "; expected an axis of the inputs other than the batch axis");
    Shape out = in[0];
    out[ax] = 0;
    for (const auto& s : in) {
      bool ok = s.rank() == in[0].rank();
      for (int i = 0; ok && i < s.rank(); ++i) ok = i == ax || s[i] == in[0][i];
      if (!ok)
        throw ModelError("concatenates inputs " + shapes_str(in) + " along axis " +
                         std::to_string(axis_) + "; expected equal shapes except on that axis");
      out[ax] += s[ax];
    }
    return out;
  }
  // Each sample is outer x (axis part) x inner; the output interleaves the inputs' axis parts.
  void forward(const LayerArgs& a) const override { walk(a, false); }
  void backward(const LayerArgs& a) const override { walk(a, true); }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["axis"] = axis_;
    return j;
  }

 private:
  void walk(const LayerArgs& a, bool backward) const {
    const Shape& out = a.out_shape;
    const int ax = sample_axis(out);
    int64_t outer = a.n, inner = 1;
    for (int i = 0; i < ax; ++i) outer *= out[i];
    for (int i = ax + 1; i < out.rank(); ++i) inner *= out[i];
    const int64_t out_row = out[ax] * inner;
    int64_t col = 0;
    for (int k = 0; k < a.n_inputs; ++k) {
      const int64_t len = a.in_shapes[k][ax] * inner;
      for (int64_t o = 0; o < outer; ++o) {
        if (!backward) {
          std::memcpy(a.y + o * out_row + col, a.x[k] + o * len, len * sizeof(float));
        } else if (a.dx[k]) {
          const float* src = a.dy + o * out_row + col;
          float* dst = a.dx[k] + o * len;
          for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
        }
      }
      col += len;
    }
  }
  int axis_ = -1;
};

}  // namespace

std::unique_ptr<Layer> make_add(LayerConfig&, const std::string& name) {
  return std::make_unique<Add>(name);
}
std::unique_ptr<Layer> make_concatenate(LayerConfig& c, const std::string& name) {
  return std::make_unique<Concatenate>(c, name);
}
std::unique_ptr<Layer> make_multiply(LayerConfig&, const std::string& name) {
  return std::make_unique<ElementwiseMerge>(name, MergeOp::kMultiply);
}
std::unique_ptr<Layer> make_subtract(LayerConfig&, const std::string& name) {
  return std::make_unique<ElementwiseMerge>(name, MergeOp::kSubtract);
}
std::unique_ptr<Layer> make_average(LayerConfig&, const std::string& name) {
  return std::make_unique<ElementwiseMerge>(name, MergeOp::kAverage);
}
std::unique_ptr<Layer> make_maximum(LayerConfig&, const std::string& name) {
  return std::make_unique<ElementwiseMerge>(name, MergeOp::kMaximum);
}
std::unique_ptr<Layer> make_minimum(LayerConfig&, const std::string& name) {
  return std::make_unique<ElementwiseMerge>(name, MergeOp::kMinimum);
}
std::unique_ptr<Layer> make_dot(LayerConfig& c, const std::string& name) {
  return std::make_unique<Dot>(c, name);
}
std::vector<LayerExample> add_examples() {
  return {{{}, {Shape{2, 3}, Shape{2, 3}}}, {{}, {Shape{4}, Shape{4}, Shape{4}}}};
}
std::vector<LayerExample> concatenate_examples() {
  return {{{}, {Shape{2, 3}, Shape{2, 1}}}, {{{"axis", 1}}, {Shape{2, 3}, Shape{1, 3}}}};
}

std::vector<LayerExample> multiply_examples() {
  return {{{}, {Shape{2, 3}, Shape{2, 3}}}, {{}, {Shape{4}, Shape{4}, Shape{4}}}};
}
std::vector<LayerExample> subtract_examples() { return {{{}, {Shape{2, 3}, Shape{2, 3}}}}; }
std::vector<LayerExample> average_examples() {
  return {{{}, {Shape{5}, Shape{5}}}, {{}, {Shape{2, 2}, Shape{2, 2}, Shape{2, 2}}}};
}
std::vector<LayerExample> maximum_examples() {
  return {{{}, {Shape{6}, Shape{6}}}, {{}, {Shape{2, 3}, Shape{2, 3}, Shape{2, 3}}}};
}
std::vector<LayerExample> minimum_examples() { return {{{}, {Shape{6}, Shape{6}, Shape{6}}}}; }
std::vector<LayerExample> dot_examples() {
  return {{{{"axes", 1}}, {Shape{4}, Shape{4}}},
          {{{"axes", -1}, {"normalize", true}}, {Shape{5}, Shape{5}}},
          {{{"axes", Json{2, 2}}}, {Shape{3, 4}, Shape{2, 4}}},
          {{{"axes", Json{1, 1}}, {"normalize", true}}, {Shape{3, 2}, Shape{3, 4}}},
          {{{"axes", Json{1, 2}}}, {Shape{4}, Shape{3, 4}}}};
}

}  // namespace nnfleet
