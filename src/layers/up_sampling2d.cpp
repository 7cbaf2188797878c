// UpSampling2D, Keras semantics: [H,W,C] -> [H*sh, W*sw, C]. Interpolation "nearest" (the Keras
// default and the only one of Keras 2.0-2.2) repeats each pixel sh x sw times, and backward adds
// each output pixel's gradient back to the pixel it came from; "bilinear" is TensorFlow's
// half-pixel resize_bilinear (kernels/resize.h), what tf.keras 2.3+ and Keras 3 compute; Keras 3's
// "bicubic" and "area" are tf.image.resize's (resize_bicubic with Keys a = -0.5, resize_area).
// Keras 2.2's TensorFlow 1 bilinear (no half-pixel centres) and "lanczos3"/"lanczos5" are refused.
#include <cstring>

#include "kernels/resize.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class UpSampling2D final : public Layer {
 public:
  UpSampling2D(LayerConfig& c, const std::string& name) : Layer(name) {
    const std::vector<int64_t> s = c.get_ints("size", 2, std::vector<int64_t>{2, 2});
    sh_ = s[0];
    sw_ = s[1];
    c.get_string("data_format", "channels_last", {"channels_last"});
    interp_ = c.get_string("interpolation", "nearest", {"nearest", "bilinear", "bicubic", "area"});
    bilinear_ = interp_ == "bilinear";
  }
  const char* class_name() const override { return "UpSampling2D"; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 3, "UpSampling2D takes images [batch,height,width,channels]");
    if (in[0][0] > limits::kMaxDimension / sh_ || in[0][1] > limits::kMaxDimension / sw_)
      throw ModelError("size [" + std::to_string(sh_) + "," + std::to_string(sw_) +
                       "] makes input " + keras_shape(in[0]) + " too large");
    const Shape out{in[0][0] * sh_, in[0][1] * sw_, in[0][2]};
    if (!size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("output " + keras_shape(out) + " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return out;
  }
  // The resize kernel's tap tables (resize_work_floats), rebuilt in scratch on every call;
  // "nearest" needs none.
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return interp_ == "nearest" ? 0 : resize_work_floats(method(), geom(in[0]));
  }
  void forward(const LayerArgs& a) const override {
    // Bilinear too: resize_forward(kBilinear) is resize_bilinear_forward bit for bit.
    if (interp_ != "nearest")
      return resize_forward(method(), a.n, geom(a.in_shapes[0]), a.x[0], a.y, a.scratch);
    each_pixel(a, [&](const float* src, size_t dst) {
      std::memcpy(a.y + dst, src, channels(a) * sizeof(float));
    });
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    if (interp_ == "bicubic" || interp_ == "area")
      return resize_backward(method(), a.n, geom(a.in_shapes[0]), a.dy, a.dx[0], a.scratch);
    if (bilinear_) {
      const Shape& s = a.in_shapes[0];
      resize_bilinear_backward(a.n, static_cast<int>(s[0]), static_cast<int>(s[1]),
                               static_cast<int>(s[2]), static_cast<int>(sh_), static_cast<int>(sw_),
                               a.dy, a.dx[0]);
      return;
    }
    const size_t c = channels(a);
    // The source pointer walks x; the same offset into dx receives the gradient.
    each_pixel(a, [&](const float* src, size_t dst) {
      float* d = a.dx[0] + (src - a.x[0]);
      for (size_t j = 0; j < c; ++j) d[j] += a.dy[dst + j];
    });
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["size"] = Json{sh_, sw_};
    j["data_format"] = "channels_last";
    j["interpolation"] = interp_;
    return j;
  }

 private:
  static size_t channels(const LayerArgs& a) { return static_cast<size_t>(a.in_shapes[0][2]); }
  // Calls f(input pixel, output offset) for every output pixel of the batch.
  template <typename F>
  void each_pixel(const LayerArgs& a, F f) const {
    const size_t h = static_cast<size_t>(a.in_shapes[0][0]),
                 w = static_cast<size_t>(a.in_shapes[0][1]);
    const size_t c = channels(a), sh = static_cast<size_t>(sh_), sw = static_cast<size_t>(sw_);
    const size_t oh = h * sh, ow = w * sw;
    for (size_t n = 0; n < static_cast<size_t>(a.n); ++n)
      for (size_t y = 0; y < oh; ++y)
        for (size_t x = 0; x < ow; ++x)
          f(a.x[0] + ((n * h + y / sh) * w + x / sw) * c, ((n * oh + y) * ow + x) * c);
  }
  ResizeMethod method() const {
    return bilinear_              ? ResizeMethod::kBilinear
           : interp_ == "bicubic" ? ResizeMethod::kBicubic
                                  : ResizeMethod::kArea;
  }
  ResizeGeom geom(const Shape& s) const {
    return upsample_geom(static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2]),
                         static_cast<int>(sh_), static_cast<int>(sw_));
  }
  int64_t sh_ = 2, sw_ = 2;
  std::string interp_ = "nearest";
  bool bilinear_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_up_sampling2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<UpSampling2D>(c, name);
}

std::vector<LayerExample> up_sampling2d_examples() {
  return {{{}, {Shape{2, 3, 2}}},
          {{{"size", Json{1, 3}}}, {Shape{3, 1, 1}}},
          {{{"interpolation", "bilinear"}}, {Shape{3, 2, 2}}},
          {{{"size", Json{3, 2}}, {"interpolation", "bilinear"}}, {Shape{2, 3, 1}}},
          {{{"size", Json{1, 2}}, {"data_format", "channels_first"}}, {Shape{2, 2, 3}}},
          {{{"size", Json{2, 3}}, {"interpolation", "bicubic"}}, {Shape{3, 2, 2}}},
          {{{"size", Json{3, 2}}, {"interpolation", "area"}}, {Shape{2, 3, 1}}}};
}

}  // namespace nnfleet
