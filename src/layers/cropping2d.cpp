// Cropping2D, Keras semantics: [H,W,C] -> [H-top-bottom, W-left-right, C], cropping given as an
// int, [sym_h, sym_w] or [[top, bottom], [left, right]] (default none). Forward copies the kept
// rows; backward adds dy back onto them.
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class Cropping2D final : public Layer {
 public:
  Cropping2D(LayerConfig& c, const std::string& name) : Layer(name) {
    crop_ = parse_pairs2d(c, "cropping", 0);
    c.get_string("data_format", "channels_last", {"channels_last"});
  }
  const char* class_name() const override { return "Cropping2D"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 3, "Cropping2D takes images [batch,height,width,channels]");
    if (int64_t{crop_[0]} + crop_[1] >= in[0][0] || int64_t{crop_[2]} + crop_[3] >= in[0][1])
      throw ModelError("cropping [[" + std::to_string(crop_[0]) + ", " + std::to_string(crop_[1]) +
                       "], [" + std::to_string(crop_[2]) + ", " + std::to_string(crop_[3]) +
                       "]] removes every row or column of input " + keras_shape(in[0]) +
                       "; expected less than the height and the width in total");
    return Shape{in[0][0] - crop_[0] - crop_[1], in[0][1] - crop_[2] - crop_[3], in[0][2]};
  }
  void forward(const LayerArgs& a) const override {
    walk(a, [&](const float* src, float* dst, size_t len) {
      std::memcpy(dst, src, len * sizeof(float));
    });
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    // src walks x; the same offset into dx receives dy's row.
    walk(a, [&](const float* src, float* dst, size_t len) {
      float* d = a.dx[0] + (src - a.x[0]);
      const float* g = a.dy + (dst - a.y);
      for (size_t j = 0; j < len; ++j) d[j] += g[j];
    });
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["cropping"] = Json{Json{crop_[0], crop_[1]}, Json{crop_[2], crop_[3]}};
    j["data_format"] = "channels_last";
    return j;
  }

 private:
  // Calls f(x row start, y row start, floats) for every kept row of the batch: each output row
  // is one contiguous run of (W - left - right) * C floats of an input row.
  template <typename F>
  void walk(const LayerArgs& a, F f) const {
    const Shape& in = a.in_shapes[0];
    const size_t h = static_cast<size_t>(in[0]), w = static_cast<size_t>(in[1]);
    const size_t c = static_cast<size_t>(in[2]);
    const size_t oh = static_cast<size_t>(a.out_shape[0]), ow = static_cast<size_t>(a.out_shape[1]);
    for (size_t n = 0; n < static_cast<size_t>(a.n); ++n)
      for (size_t y = 0; y < oh; ++y)
        f(a.x[0] +
              ((n * h + y + static_cast<size_t>(crop_[0])) * w + static_cast<size_t>(crop_[2])) * c,
          a.y + (n * oh + y) * ow * c, ow * c);
  }
  std::array<int, 4> crop_{};
};

}  // namespace

std::unique_ptr<Layer> make_cropping2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<Cropping2D>(c, name);
}

std::vector<LayerExample> cropping2d_examples() {
  return {{{{"cropping", Json{Json{1, 0}, Json{2, 1}}}}, {Shape{4, 5, 2}}},
          {{{"cropping", 1}}, {Shape{3, 4, 1}}},
          {{{"cropping", Json{0, 1}}}, {Shape{2, 4, 3}}},
          {{{"cropping", Json{1, 2}}, {"data_format", "channels_first"}}, {Shape{2, 4, 5}}}};
}

}  // namespace nnfleet
