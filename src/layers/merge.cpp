// Merge layers of two or more inputs: Add (element-wise sum of equal shapes) and Concatenate
// (along one axis, default the last; the other axes must match).
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
    if (in.size() < 2) throw ModelError("needs at least 2 inputs, got " + std::to_string(in.size()));
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
    if (in.size() < 2) throw ModelError("needs at least 2 inputs, got " + std::to_string(in.size()));
    const int ax = sample_axis(in[0]);
    if (ax < 0 || ax >= in[0].rank())
      throw ModelError("concatenates along axis " + std::to_string(axis_) + " of inputs " +
                       shapes_str(in) + "; expected an axis of the inputs other than the batch axis");
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
std::vector<LayerExample> add_examples() {
  return {{{}, {Shape{2, 3}, Shape{2, 3}}}, {{}, {Shape{4}, Shape{4}, Shape{4}}}};
}
std::vector<LayerExample> concatenate_examples() {
  return {{{}, {Shape{2, 3}, Shape{2, 1}}}, {{{"axis", 1}}, {Shape{2, 3}, Shape{1, 3}}}};
}

}  // namespace nnfleet
