// Keras's image preprocessing layers that change the image's size: Resizing (tf.image.resize,
// bilinear / nearest / bicubic / area, optionally after the largest centred crop of the target
// aspect ratio), CenterCrop (the centred window; a crop-to-aspect resize when the image is
// smaller) and RandomCrop (a random window in training, the crop-to-aspect resize at inference).
// Each is linear in its input: backward is the adjoint of the same sampling.
#include <cmath>
#include <cstring>

#include "layers/image_util.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {

Json read_image_common(LayerConfig& c, bool has_seed) {
  const Json* df = c.get_raw("data_format");
  if (df && !df->is_null() && *df != "channels_last")
    c.fail("data_format",
           "\"channels_last\" (channels_first image preprocessing is not "
           "implemented)");
  if (!has_seed) return nullptr;
  const Json* seed = c.get_raw("seed");
  if (seed && !seed->is_null() && !seed->is_number_integer()) c.fail("seed", "null or an integer");
  return seed ? *seed : Json(nullptr);
}

void write_image_common(Json& j, const Json& seed) {
  j["data_format"] = "channels_last";
  j["seed"] = seed;
}

ResizeGeom aspect_crop(int h, int w, int c, int th, int tw) {
  ResizeGeom g;
  g.h = h;
  g.w = w;
  g.c = c;
  // crop_height = int32(float32(w * th) / tw), within [1, h]; likewise the width.
  const auto ch = static_cast<int>(static_cast<float>(int64_t{w} * th) / static_cast<float>(tw));
  const auto cw = static_cast<int>(static_cast<float>(int64_t{h} * tw) / static_cast<float>(th));
  g.ch = std::max(std::min(h, ch), 1);
  g.cw = std::max(std::min(w, cw), 1);
  g.y0 = static_cast<int>(static_cast<float>(h - g.ch) / 2.0f);
  g.x0 = static_cast<int>(static_cast<float>(w - g.cw) / 2.0f);
  g.oh = th;
  g.ow = tw;
  return g;
}

void require_image(const Shape& in, const char* cls) {
  require_rank(in, 3, (std::string(cls) + " takes images [batch,height,width,channels]").c_str());
}

namespace {

ResizeGeom whole(const Shape& s, int oh, int ow) {
  ResizeGeom g;
  g.h = g.ch = static_cast<int>(s[0]);
  g.w = g.cw = static_cast<int>(s[1]);
  g.c = static_cast<int>(s[2]);
  g.oh = oh;
  g.ow = ow;
  return g;
}

// The base of the three: a target size, and the window geometry a subclass picks.
class SizedImageLayer : public Layer {
 public:
  SizedImageLayer(LayerConfig& c, const std::string& name) : Layer(name) {
    h_ = static_cast<int>(c.get_int("height"));
    w_ = static_cast<int>(c.get_int("width"));
    if (h_ > limits::kMaxDimension)
      c.fail("height", "at most " + std::to_string(limits::kMaxDimension));
    if (w_ > limits::kMaxDimension)
      c.fail("width", "at most " + std::to_string(limits::kMaxDimension));
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_image(in[0], class_name());
    const Shape out{h_, w_, in[0][2]};
    if (!size_at_most(out, limits::kMaxSampleFloats))
      throw ModelError("output " + keras_shape(out) + " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return out;
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["height"] = h_;
    j["width"] = w_;
    return j;
  }

 protected:
  int h_ = 1, w_ = 1;
};

class Resizing final : public SizedImageLayer {
 public:
  Resizing(LayerConfig& c, const std::string& name) : SizedImageLayer(c, name) {
    interp_ = c.get_string("interpolation", "bilinear", {"bilinear", "nearest", "bicubic", "area"});
    method_ = interp_ == "bilinear"  ? ResizeMethod::kBilinear
              : interp_ == "nearest" ? ResizeMethod::kNearest
              : interp_ == "bicubic" ? ResizeMethod::kBicubic
                                     : ResizeMethod::kArea;
    crop_ = c.get_bool("crop_to_aspect_ratio", false);
    if (c.get_bool("pad_to_aspect_ratio", false))
      c.fail("pad_to_aspect_ratio", "false (padding to the aspect ratio is not implemented)");
    c.get_string("fill_mode", "constant", {"constant", "reflect", "wrap", "nearest"});
    fill_value_ = c.get_float("fill_value", 0.0);  // used only with pad_to_aspect_ratio
    if (c.get_bool("antialias", false))
      c.fail("antialias", "false (antialiased resizing is not implemented)");
    read_image_common(c, false);
  }
  const char* class_name() const override { return "Resizing"; }
  // The kernel's tap tables (resize_work_floats), rebuilt in scratch on every call.
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return resize_work_floats(method_, geom(in[0]));
  }
  void forward(const LayerArgs& a) const override {
    resize_forward(method_, a.n, geom(a.in_shapes[0]), a.x[0], a.y, a.scratch);
  }
  void backward(const LayerArgs& a) const override {
    if (a.dx[0]) resize_backward(method_, a.n, geom(a.in_shapes[0]), a.dy, a.dx[0], a.scratch);
  }
  Json keras_config() const override {
    Json j = SizedImageLayer::keras_config();
    j["interpolation"] = interp_;
    j["crop_to_aspect_ratio"] = crop_;
    j["pad_to_aspect_ratio"] = false;
    j["fill_mode"] = "constant";
    j["fill_value"] = fill_value_;
    j["antialias"] = false;
    j["data_format"] = "channels_last";
    return j;
  }

 private:
  ResizeGeom geom(const Shape& s) const {
    return crop_ ? aspect_crop(static_cast<int>(s[0]), static_cast<int>(s[1]),
                               static_cast<int>(s[2]), h_, w_)
                 : whole(s, h_, w_);
  }
  std::string interp_;
  ResizeMethod method_ = ResizeMethod::kBilinear;
  bool crop_ = false;
  double fill_value_ = 0.0;
};

// Keras's CenterCrop: the centred h x w window (h_start = int((H - h) / 2)) when the image is at
// least that large on both axes, else a bilinear resize after the crop to the target's aspect
// ratio. The window copy is the bilinear resize of a same-size window (weights exactly 1 and 0).
class CenterCrop final : public SizedImageLayer {
 public:
  CenterCrop(LayerConfig& c, const std::string& name) : SizedImageLayer(c, name) {
    read_image_common(c, false);
  }
  const char* class_name() const override { return "CenterCrop"; }
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return resize_work_floats(ResizeMethod::kBilinear, geom(in[0]));
  }
  void forward(const LayerArgs& a) const override {
    resize_forward(ResizeMethod::kBilinear, a.n, geom(a.in_shapes[0]), a.x[0], a.y, a.scratch);
  }
  void backward(const LayerArgs& a) const override {
    if (a.dx[0])
      resize_backward(ResizeMethod::kBilinear, a.n, geom(a.in_shapes[0]), a.dy, a.dx[0], a.scratch);
  }
  Json keras_config() const override {
    Json j = SizedImageLayer::keras_config();
    j["data_format"] = "channels_last";
    return j;
  }

 private:
  ResizeGeom geom(const Shape& s) const {
    const int ih = static_cast<int>(s[0]), iw = static_cast<int>(s[1]);
    if (ih < h_ || iw < w_) return aspect_crop(ih, iw, static_cast<int>(s[2]), h_, w_);
    ResizeGeom g = whole(s, h_, w_);
    g.ch = h_;
    g.cw = w_;
    g.y0 = static_cast<int>(static_cast<float>(ih - h_) / 2.0f);
    g.x0 = static_cast<int>(static_cast<float>(iw - w_) / 2.0f);
    return g;
  }
};

// RandomCrop: in training, when the image is larger than the target on both axes, each sample's
// window origin is drawn uniformly from [0, H - h] x [0, W - w] (Keras draws one origin for the
// whole batch; one per sample keeps a batch splittable); otherwise, and at inference, the crop to
// the target's aspect ratio, resized bilinearly (tf.keras's smart_resize, Keras's documented
// inference behaviour). The cache keeps each sample's origin.
class RandomCrop final : public SizedImageLayer {
 public:
  RandomCrop(LayerConfig& c, const std::string& name) : SizedImageLayer(c, name) {
    seed_ = read_image_common(c);
  }
  const char* class_name() const override { return "RandomCrop"; }
  size_t cache_floats(const std::vector<Shape>&, int n) const override {
    return 2 * static_cast<size_t>(n);
  }
  // The taps of the inference resize (the random crop is a copy).
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return resize_work_floats(ResizeMethod::kBilinear, fixed(in[0]));
  }
  void forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    if (!random(a))
      return resize_forward(ResizeMethod::kBilinear, a.n, fixed(s), a.x[0], a.y, a.scratch);
    for (int i = 0; i < a.n; ++i) {
      // u * (H - h + 1) < H - h + 1; the min guards the float product's rounding.
      const auto y0 = std::min(
          static_cast<int64_t>(a.rng->uniform() * static_cast<float>(s[0] - h_ + 1)), s[0] - h_);
      const auto x0 = std::min(
          static_cast<int64_t>(a.rng->uniform() * static_cast<float>(s[1] - w_ + 1)), s[1] - w_);
      a.cache[2 * i] = static_cast<float>(y0);
      a.cache[2 * i + 1] = static_cast<float>(x0);
      each_row(a, i, y0, x0, [&](int64_t src, int64_t dst, size_t len) {
        std::memcpy(a.y + dst, a.x[0] + src, len * sizeof(float));
      });
    }
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const Shape& s = a.in_shapes[0];
    if (!random(a))
      return resize_backward(ResizeMethod::kBilinear, a.n, fixed(s), a.dy, a.dx[0], a.scratch);
    for (int i = 0; i < a.n; ++i)
      each_row(a, i, static_cast<int64_t>(a.cache[2 * i]), static_cast<int64_t>(a.cache[2 * i + 1]),
               [&](int64_t src, int64_t dst, size_t len) {
                 for (size_t k = 0; k < len; ++k) a.dx[0][src + k] += a.dy[dst + k];
               });
  }
  Json keras_config() const override {
    Json j = SizedImageLayer::keras_config();
    write_image_common(j, seed_);
    return j;
  }

 private:
  bool random(const LayerArgs& a) const {
    return a.training && a.in_shapes[0][0] > h_ && a.in_shapes[0][1] > w_;
  }
  ResizeGeom fixed(const Shape& s) const {
    return aspect_crop(static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2]), h_,
                       w_);
  }
  // Calls f(input offset, output offset, floats) for the h rows of sample i's window at (y0, x0).
  template <typename F>
  void each_row(const LayerArgs& a, int i, int64_t y0, int64_t x0, F f) const {
    const Shape& s = a.in_shapes[0];
    const int64_t c = s[2];
    for (int64_t r = 0; r < h_; ++r)
      f(((i * s[0] + y0 + r) * s[1] + x0) * c, (i * int64_t{h_} + r) * w_ * c,
        static_cast<size_t>(w_ * c));
  }
  Json seed_;
};

}  // namespace

std::unique_ptr<Layer> make_resizing(LayerConfig& c, const std::string& name) {
  return std::make_unique<Resizing>(c, name);
}
std::unique_ptr<Layer> make_center_crop(LayerConfig& c, const std::string& name) {
  return std::make_unique<CenterCrop>(c, name);
}
std::unique_ptr<Layer> make_random_crop(LayerConfig& c, const std::string& name) {
  return std::make_unique<RandomCrop>(c, name);
}

std::vector<LayerExample> resizing_examples() {
  std::vector<LayerExample> ex;
  for (const char* m : {"bilinear", "nearest", "bicubic", "area"}) {
    ex.push_back({{{"height", 5}, {"width", 3}, {"interpolation", m}}, {Shape{3, 4, 2}}});
    ex.push_back({{{"height", 2}, {"width", 3}, {"interpolation", m}}, {Shape{5, 7, 1}}});
  }
  ex.push_back({{{"height", 3}, {"width", 3}, {"crop_to_aspect_ratio", true}}, {Shape{4, 6, 2}}});
  ex.push_back(
      {{{"height", 4}, {"width", 2}, {"interpolation", "bicubic"}, {"crop_to_aspect_ratio", true}},
       {Shape{5, 5, 1}}});
  return ex;
}
std::vector<LayerExample> center_crop_examples() {
  return {{{{"height", 2}, {"width", 3}}, {Shape{5, 4, 2}}},
          {{{"height", 6}, {"width", 3}}, {Shape{4, 4, 1}}}};
}
std::vector<LayerExample> random_crop_examples() {
  return {{{{"height", 2}, {"width", 3}}, {Shape{5, 4, 2}}, true},
          {{{"height", 2}, {"width", 3}}, {Shape{5, 4, 2}}, false},
          {{{"height", 6}, {"width", 3}}, {Shape{4, 4, 1}}, true}};
}

}  // namespace nnfleet
