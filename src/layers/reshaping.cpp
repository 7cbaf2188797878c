// Flatten, Reshape and ZeroPadding2D: layers that move values without arithmetic. Flatten and
// Reshape copy rows unchanged (row-major order is already Keras's order), so a Network plans them
// as views and never calls them; ZeroPadding2D pads H and W with zeros (padding: int,
// [sym_h, sym_w] or [[top, bottom], [left, right]]).
#include <cstring>

#include "kernels/pool.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

void copy_rows(const LayerArgs& a) {
  std::memcpy(a.y, a.x[0], rows_floats(a.n, a.out_shape) * sizeof(float));
}
void add_rows(const LayerArgs& a) {
  if (!a.dx[0]) return;
  const size_t m = rows_floats(a.n, a.out_shape);
  for (size_t i = 0; i < m; ++i) a.dx[0][i] += a.dy[i];
}

class Flatten final : public Layer {
 public:
  Flatten(LayerConfig& c, const std::string& name) : Layer(name) {
    c.get_string("data_format", "channels_last", {"channels_last"});
  }
  const char* class_name() const override { return "Flatten"; }
  Shape output_shape(const std::vector<Shape>& in) const override { return Shape{in[0].size()}; }
  void forward(const LayerArgs& a) const override { copy_rows(a); }
  void backward(const LayerArgs& a) const override { add_rows(a); }
  bool output_aliases_input() const override { return true; }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["data_format"] = "channels_last";
    return j;
  }
};

class Reshape final : public Layer {
 public:
  Reshape(LayerConfig& c, const std::string& name) : Layer(name) {
    const Json* t = c.get_raw("target_shape");
    if (!t || !t->is_array() || t->empty() || t->size() > Shape::kMaxRank)
      c.fail("target_shape", "a list of 1 to 6 dimensions (one may be -1)");
    for (const auto& d : *t) {
      const std::optional<int64_t> i = config_int(d, -1);
      if (!i || *i == 0)
        c.fail("target_shape", "a list of positive integers (one may be -1), each at most " +
                                   std::to_string(limits::kMaxConfigInt));
      target_.push_back(*i);
    }
  }
  const char* class_name() const override { return "Reshape"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    Shape s = target_;
    int unknown = -1;
    int64_t known = 1;
    for (int i = 0; i < s.rank(); ++i) {
      if (s[i] == -1) {
        if (unknown >= 0)
          throw ModelError("target_shape " + target_.str() + " has more than one -1");
        unknown = i;
      } else {
        if (s[i] > in[0].size() / known)  // checked before multiplying: no overflow
          throw ModelError("cannot reshape input " + keras_shape(in[0]) + " (" +
                           std::to_string(in[0].size()) + " values) to target_shape " +
                           target_.str() + "; expected the same number of values");
        known *= s[i];
      }
    }
    if (unknown >= 0 && known > 0 && in[0].size() % known == 0) s[unknown] = in[0].size() / known;
    if (s.size() != in[0].size() || (unknown >= 0 && s[unknown] < 1))
      throw ModelError("cannot reshape input " + keras_shape(in[0]) + " (" +
                       std::to_string(in[0].size()) + " values) to target_shape " + target_.str() +
                       "; expected the same number of values");
    return s;
  }
  void forward(const LayerArgs& a) const override { copy_rows(a); }
  void backward(const LayerArgs& a) const override { add_rows(a); }
  bool output_aliases_input() const override { return true; }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["target_shape"] = Json::array();
    for (int64_t d : target_) j["target_shape"].push_back(d);
    return j;
  }

 private:
  Shape target_;
};

class ZeroPadding2D final : public Layer {
 public:
  ZeroPadding2D(LayerConfig& c, const std::string& name) : Layer(name) {
    const std::array<int, 4> p = parse_pairs2d(c, "padding", 1);
    top_ = p[0];
    bottom_ = p[1];
    left_ = p[2];
    right_ = p[3];
    c.get_string("data_format", "channels_last", {"channels_last"});
  }
  const char* class_name() const override { return "ZeroPadding2D"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 3, "ZeroPadding2D takes images [batch,height,width,channels]");
    const Shape out{in[0][0] + top_ + bottom_, in[0][1] + left_ + right_, in[0][2]};
    if (!size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("padding input " + keras_shape(in[0]) + " to " + keras_shape(out) +
                       " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return out;
  }
  void forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    zero_pad2d_forward(a.n, static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2]),
                       top_, bottom_, left_, right_, a.x[0], a.y);
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const Shape& s = a.in_shapes[0];
    zero_pad2d_backward(a.n, static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2]),
                        top_, bottom_, left_, right_, a.dy, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["padding"] = {{top_, bottom_}, {left_, right_}};
    j["data_format"] = "channels_last";
    return j;
  }

 private:
  int top_ = 1, bottom_ = 1, left_ = 1, right_ = 1;
};

}  // namespace

std::unique_ptr<Layer> make_flatten(LayerConfig& c, const std::string& name) {
  return std::make_unique<Flatten>(c, name);
}
std::unique_ptr<Layer> make_reshape(LayerConfig& c, const std::string& name) {
  return std::make_unique<Reshape>(c, name);
}
std::unique_ptr<Layer> make_zero_padding2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<ZeroPadding2D>(c, name);
}
std::vector<LayerExample> flatten_examples() {
  return {{{}, {Shape{2, 3, 2}}}, {{{"data_format", "channels_first"}}, {Shape{2, 3, 2}}}};
}
std::vector<LayerExample> reshape_examples() {
  return {{{{"target_shape", Json{3, -1}}}, {Shape{12}}},
          {{{"target_shape", Json{6}}}, {Shape{2, 3}}}};
}
std::vector<LayerExample> zero_padding2d_examples() {
  return {{{{"padding", 1}}, {Shape{2, 3, 2}}},
          {{{"padding", Json{Json{0, 2}, Json{1, 0}}}}, {Shape{3, 2, 1}}},
          {{{"padding", Json{1, 2}}, {"data_format", "channels_first"}}, {Shape{2, 2, 3}}}};
}

}  // namespace nnfleet
