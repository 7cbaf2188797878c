// Keras's random image augmentation layers: RandomFlip, RandomRotation, RandomZoom,
// RandomTranslation, RandomContrast, RandomBrightness. At inference each is the identity (Keras's
// behaviour); in training each sample draws its transformation from the model's training stream
// (LayerArgs::rng, as Dropout), so results depend on the plan seed only, never on the workers.
// Rotation, zoom and translation resample through TensorFlow's projective transform
// (kernels/resize.h affine_transform_*) with Keras's fill modes and interpolations. Every layer is
// linear in its input for a fixed draw (contrast and brightness up to their clip to value_range),
// and backward is that linear map's adjoint (the clip passes the gradient where it did not clip).
// The cache keeps each sample's draw.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "layers/image_util.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

// A factor as Keras reads it: a number f gives [-|f|, |f|] (the lower end raised to `lo` for the
// layers on Keras's base _set_factor, base = true), a pair gives itself sorted; values must lie
// in [lo, hi] (base: the pair only needs to overlap it, as Keras checks).
std::pair<double, double> read_factor(LayerConfig& c, const std::string& key, double lo, double hi,
                                      bool base) {
  const Json* f = c.get_raw(key);
  const std::string want = "a number or a list of two numbers in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]";
  if (!f || f->is_null()) c.fail(key, want);
  if (f->is_number()) {
    const double v = f->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) c.fail(key, want);
    return {base ? std::max(-std::abs(v), lo) : -std::abs(v), std::abs(v)};
  }
  if (!f->is_array() || f->size() != 2 || !(*f)[0].is_number() || !(*f)[1].is_number())
    c.fail(key, want);
  double a = (*f)[0].get<double>(), b = (*f)[1].get<double>();
  if (!std::isfinite(a) || !std::isfinite(b)) c.fail(key, want);
  if (base ? (a > hi || b < lo) : (a < lo || a > hi || b < lo || b > hi)) c.fail(key, want);
  if (a > b) std::swap(a, b);
  return {a, b};
}

std::pair<double, double> read_value_range(LayerConfig& c) {
  const Json* v = c.get_raw("value_range");
  if (!v || v->is_null()) return {0.0, 255.0};
  if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number())
    c.fail("value_range", "a list of two numbers [low, high]");
  double a = (*v)[0].get<double>(), b = (*v)[1].get<double>();
  if (a > b) std::swap(a, b);
  return {a, b};
}

float draw(Rng* rng, double lo, double hi) {
  return static_cast<float>(lo + (hi - lo) * static_cast<double>(rng->uniform()));
}

void copy_rows(const LayerArgs& a) {
  std::memcpy(a.y, a.x[0], rows_floats(a.n, a.out_shape) * sizeof(float));
}
void add_rows(const LayerArgs& a) {
  const size_t m = rows_floats(a.n, a.out_shape);
  for (size_t i = 0; i < m; ++i) a.dx[0][i] += a.dy[i];
}

// The common part: image input, same-shape output, identity at inference.
class AugmentLayer : public Layer {
 public:
  using Layer::Layer;
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_image(in[0], class_name());
    return in[0];
  }
  void forward(const LayerArgs& a) const override {
    if (!a.training) return copy_rows(a);
    train_forward(a);
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    if (!a.training) return add_rows(a);
    train_backward(a);
  }

 protected:
  virtual void train_forward(const LayerArgs& a) const = 0;
  virtual void train_backward(const LayerArgs& a) const = 0;
  Json seed_;
};

// RandomFlip: each sample is flipped with probability 1/2 (u <= 0.5, one draw per sample, as
// Keras); "horizontal_and_vertical" flips both axes on the same draw, as Keras does. A mode that
// is none of Keras's names ("vertical and horizontal" in a real Keras 3.10 file) flips nothing,
// also in training, which is what Keras 3 does with it; such a mode is accepted from Keras files
// only and written back as read.
class RandomFlip final : public AugmentLayer {
 public:
  RandomFlip(LayerConfig& c, const std::string& name) : AugmentLayer(name) {
    const std::vector<std::string> modes = {"horizontal", "vertical", "horizontal_and_vertical"};
    mode_ = c.get_string("mode", "horizontal_and_vertical",
                         c.mode() == ConfigMode::kKeras ? std::vector<std::string>{} : modes);
    horizontal_ = mode_ == "horizontal" || mode_ == "horizontal_and_vertical";
    vertical_ = mode_ == "vertical" || mode_ == "horizontal_and_vertical";
    seed_ = read_image_common(c);
  }
  const char* class_name() const override { return "RandomFlip"; }
  size_t cache_floats(const std::vector<Shape>&, int n) const override {
    return static_cast<size_t>(n);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["mode"] = mode_;
    write_image_common(j, seed_);
    return j;
  }

 private:
  // Calls f(input offset, output offset) for every pixel of sample i (flipped or not).
  template <typename F>
  void each_pixel(const LayerArgs& a, int i, bool flip, F f) const {
    const Shape& s = a.in_shapes[0];
    const int64_t h = s[0], w = s[1], c = s[2];
    const bool fh = flip && horizontal_, fv = flip && vertical_;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sy = fv ? h - 1 - y : y, sx = fh ? w - 1 - x : x;
        f(((i * h + sy) * w + sx) * c, ((i * h + y) * w + x) * c, c);
      }
  }
  void train_forward(const LayerArgs& a) const override {
    for (int i = 0; i < a.n; ++i) {
      const bool flip = a.rng->uniform() <= 0.5f;
      a.cache[i] = flip ? 1.0f : 0.0f;
      each_pixel(a, i, flip, [&](int64_t src, int64_t dst, int64_t c) {
        std::memcpy(a.y + dst, a.x[0] + src, static_cast<size_t>(c) * sizeof(float));
      });
    }
  }
  void train_backward(const LayerArgs& a) const override {
    for (int i = 0; i < a.n; ++i)
      each_pixel(a, i, a.cache[i] != 0.0f, [&](int64_t src, int64_t dst, int64_t c) {
        for (int64_t k = 0; k < c; ++k) a.dx[0][src + k] += a.dy[dst + k];
      });
  }
  std::string mode_;
  bool horizontal_ = true, vertical_ = true;
};

// The three resampling layers: fill mode, fill value, interpolation, and a per-sample transform
// [a0 a1 a2 b0 b1 b2 c0 c1] drawn by transform().
class ResampleLayer : public AugmentLayer {
 public:
  ResampleLayer(LayerConfig& c, const std::string& name) : AugmentLayer(name) {
    const std::string fm =
        c.get_string("fill_mode", "reflect", {"reflect", "wrap", "constant", "nearest"});
    fill_ = fm == "reflect"    ? FillMode::kReflect
            : fm == "wrap"     ? FillMode::kWrap
            : fm == "constant" ? FillMode::kConstant
                               : FillMode::kNearest;
    fill_name_ = fm;
    fill_value_ = static_cast<float>(c.get_float("fill_value", 0.0));
    bilinear_ = c.get_string("interpolation", "bilinear", {"bilinear", "nearest"}) == "bilinear";
  }
  size_t cache_floats(const std::vector<Shape>&, int n) const override {
    return 8 * static_cast<size_t>(n);
  }

 protected:
  virtual void transform(Rng* rng, float h, float w, float* t) const = 0;
  void write_common(Json& j) const {
    j["fill_mode"] = fill_name_;
    j["fill_value"] = fill_value_;
    j["interpolation"] = bilinear_ ? "bilinear" : "nearest";
    write_image_common(j, seed_);
  }

 private:
  void train_forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    for (int i = 0; i < a.n; ++i)
      transform(a.rng, static_cast<float>(s[0]), static_cast<float>(s[1]), a.cache + 8 * i);
    affine_transform_forward(a.n, static_cast<int>(s[0]), static_cast<int>(s[1]),
                             static_cast<int>(s[2]), a.cache, bilinear_, fill_, fill_value_, a.x[0],
                             a.y);
  }
  void train_backward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    affine_transform_backward(a.n, static_cast<int>(s[0]), static_cast<int>(s[1]),
                              static_cast<int>(s[2]), a.cache, bilinear_, fill_, a.dy, a.dx[0]);
  }
  FillMode fill_ = FillMode::kReflect;
  std::string fill_name_;
  float fill_value_ = 0.0f;
  bool bilinear_ = true;
};

// RandomRotation: an angle drawn in [lower, upper] * 2 pi, rotating about the image centre
// (Keras's matrix: cos, -sin, x_offset, sin, cos, y_offset, 0, 0).
class RandomRotation final : public ResampleLayer {
 public:
  RandomRotation(LayerConfig& c, const std::string& name) : ResampleLayer(c, name) {
    factor_ = read_factor(c, "factor", -1.0, 1.0, true);
    seed_ = read_image_common(c);
  }
  const char* class_name() const override { return "RandomRotation"; }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["factor"] = Json{factor_.first, factor_.second};
    write_common(j);
    return j;
  }

 private:
  void transform(Rng* rng, float h, float w, float* t) const override {
    constexpr double kTwoPi = 6.283185307179586;
    const float angle = draw(rng, factor_.first * kTwoPi, factor_.second * kTwoPi);
    const float cs = std::cos(angle), sn = std::sin(angle);
    const float xo = ((w - 1) - (cs * (w - 1) - sn * (h - 1))) / 2.0f;
    const float yo = ((h - 1) - (sn * (w - 1) + cs * (h - 1))) / 2.0f;
    const float m[8] = {cs, -sn, xo, sn, cs, yo, 0.0f, 0.0f};
    std::copy(m, m + 8, t);
  }
  std::pair<double, double> factor_;
};

// RandomZoom: zooms 1 + f drawn per axis (the width's equal to the height's when width_factor is
// null), about the image centre; above 1 zooms out.
class RandomZoom final : public ResampleLayer {
 public:
  RandomZoom(LayerConfig& c, const std::string& name) : ResampleLayer(c, name) {
    hf_ = read_factor(c, "height_factor", -1.0, 1.0, false);  // refuses a missing factor first
    hf_raw_ = *c.get_raw("height_factor");
    const Json* wf = c.get_raw("width_factor");
    if (wf && !wf->is_null()) {
      wf_raw_ = *wf;
      wf_ = read_factor(c, "width_factor", -1.0, 1.0, false);
    }
    seed_ = read_image_common(c);
  }
  const char* class_name() const override { return "RandomZoom"; }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["height_factor"] = hf_raw_;
    j["width_factor"] = wf_raw_;
    write_common(j);
    return j;
  }

 private:
  void transform(Rng* rng, float h, float w, float* t) const override {
    const float zy = draw(rng, 1.0 + hf_.first, 1.0 + hf_.second);
    const float zx = wf_raw_.is_null() ? zy : draw(rng, 1.0 + wf_.first, 1.0 + wf_.second);
    const float m[8] = {zx,   0.0f, (w - 1.0f) / 2.0f * (1.0f - zx),
                        0.0f, zy,   (h - 1.0f) / 2.0f * (1.0f - zy),
                        0.0f, 0.0f};
    std::copy(m, m + 8, t);
  }
  Json hf_raw_, wf_raw_ = nullptr;
  std::pair<double, double> hf_, wf_;
};

// RandomTranslation: shifts drawn as fractions of the height and width (positive moves the image
// down / right), matrix [1 0 -dx 0 1 -dy 0 0].
class RandomTranslation final : public ResampleLayer {
 public:
  RandomTranslation(LayerConfig& c, const std::string& name) : ResampleLayer(c, name) {
    const Json* hf = c.get_raw("height_factor");
    if (hf) hf_raw_ = *hf;
    hf_ = read_factor(c, "height_factor", -1.0, 1.0, false);
    const Json* wf = c.get_raw("width_factor");
    if (wf) wf_raw_ = *wf;
    wf_ = read_factor(c, "width_factor", -1.0, 1.0, false);
    seed_ = read_image_common(c);
  }
  const char* class_name() const override { return "RandomTranslation"; }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["height_factor"] = hf_raw_;
    j["width_factor"] = wf_raw_;
    write_common(j);
    return j;
  }

 private:
  void transform(Rng* rng, float h, float w, float* t) const override {
    const float dy = draw(rng, hf_.first, hf_.second) * h;
    const float dx = draw(rng, wf_.first, wf_.second) * w;
    const float m[8] = {1.0f, 0.0f, -dx, 0.0f, 1.0f, -dy, 0.0f, 0.0f};
    std::copy(m, m + 8, t);
  }
  Json hf_raw_, wf_raw_;
  std::pair<double, double> hf_, wf_;
};

// The two colour layers: y = clip(g(x), low, high) per sample; the gradient passes where the
// value was not clipped (recomputed from x in backward).
class ColourLayer : public AugmentLayer {
 public:
  using AugmentLayer::AugmentLayer;
  size_t cache_floats(const std::vector<Shape>&, int n) const override {
    return static_cast<size_t>(n);
  }

 protected:
  std::pair<double, double> factor_, range_;
  Json range_json() const { return Json{range_.first, range_.second}; }
  bool inside(float v) const {
    return v >= static_cast<float>(range_.first) && v <= static_cast<float>(range_.second);
  }
  float clip(float v) const {
    return std::clamp(v, static_cast<float>(range_.first), static_cast<float>(range_.second));
  }
};

// RandomContrast: per sample a factor in [1 - lower, 1 + upper] (a number f gives lower 0,
// upper f, as Keras 3's factor bounds [0, 1] make it); each channel becomes
// (x - mean) * factor + mean, mean over the image's pixels, then clipped to value_range.
class RandomContrast final : public ColourLayer {
 public:
  RandomContrast(LayerConfig& c, const std::string& name) : ColourLayer(name) {
    factor_ = read_factor(c, "factor", 0.0, 1.0, true);
    range_ = read_value_range(c);
    seed_ = read_image_common(c);
  }
  const char* class_name() const override { return "RandomContrast"; }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["factor"] = Json{factor_.first, factor_.second};
    j["value_range"] = range_json();
    write_image_common(j, seed_);
    return j;
  }

 private:
  // The channel means of sample i into mean[c] (float sums over the pixels, as one reduction).
  static void means(const LayerArgs& a, int i, float* mean) {
    const Shape& s = a.in_shapes[0];
    const int64_t hw = s[0] * s[1], c = s[2];
    const float* x = a.x[0] + i * hw * c;
    for (int64_t k = 0; k < c; ++k) mean[k] = 0.0f;
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k) mean[k] += x[p * c + k];
    for (int64_t k = 0; k < c; ++k) mean[k] /= static_cast<float>(hw);
  }
  void train_forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const int64_t hw = s[0] * s[1], c = s[2];
    float* mean = a.scratch;
    for (int i = 0; i < a.n; ++i) {
      const float f = draw(a.rng, 1.0 - factor_.first, 1.0 + factor_.second);
      a.cache[i] = f;
      means(a, i, mean);
      const float* x = a.x[0] + i * hw * c;
      float* y = a.y + i * hw * c;
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t k = 0; k < c; ++k) y[p * c + k] = clip((x[p * c + k] - mean[k]) * f + mean[k]);
    }
  }
  // y_j = (x_j - m) f + m with m = mean(x): dx_j += f g_j + (1 - f) / HW * sum of g (unclipped).
  void train_backward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const int64_t hw = s[0] * s[1], c = s[2];
    float* mean = a.scratch;
    float* gsum = a.scratch + c;
    for (int i = 0; i < a.n; ++i) {
      const float f = a.cache[i];
      means(a, i, mean);
      const float* x = a.x[0] + i * hw * c;
      const float* g = a.dy + i * hw * c;
      float* dx = a.dx[0] + i * hw * c;
      for (int64_t k = 0; k < c; ++k) gsum[k] = 0.0f;
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t k = 0; k < c; ++k)
          if (inside((x[p * c + k] - mean[k]) * f + mean[k])) gsum[k] += g[p * c + k];
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t k = 0; k < c; ++k) {
          const float pass = inside((x[p * c + k] - mean[k]) * f + mean[k]) ? g[p * c + k] : 0.0f;
          dx[p * c + k] += f * pass + (1.0f - f) / static_cast<float>(hw) * gsum[k];
        }
    }
  }

 public:
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return 2 * static_cast<size_t>(in[0][2]);
  }
};

// RandomBrightness: per sample a delta drawn in [lower, upper] times (high - low) of value_range
// is added to every value, then clipped to value_range.
class RandomBrightness final : public ColourLayer {
 public:
  RandomBrightness(LayerConfig& c, const std::string& name) : ColourLayer(name) {
    factor_ = read_factor(c, "factor", -1.0, 1.0, true);
    range_ = read_value_range(c);
    seed_ = read_image_common(c);
  }
  const char* class_name() const override { return "RandomBrightness"; }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["factor"] = Json{factor_.first, factor_.second};
    j["value_range"] = range_json();
    write_image_common(j, seed_);
    return j;
  }

 private:
  void train_forward(const LayerArgs& a) const override {
    const size_t m = a.out_shape.size();
    for (int i = 0; i < a.n; ++i) {
      const float d = draw(a.rng, factor_.first, factor_.second) *
                      static_cast<float>(range_.second - range_.first);
      a.cache[i] = d;
      for (size_t j = i * m; j < (i + 1) * m; ++j) a.y[j] = clip(a.x[0][j] + d);
    }
  }
  void train_backward(const LayerArgs& a) const override {
    const size_t m = a.out_shape.size();
    for (int i = 0; i < a.n; ++i)
      for (size_t j = i * m; j < (i + 1) * m; ++j)
        if (inside(a.x[0][j] + a.cache[i])) a.dx[0][j] += a.dy[j];
  }
};

}  // namespace

std::unique_ptr<Layer> make_random_flip(LayerConfig& c, const std::string& name) {
  return std::make_unique<RandomFlip>(c, name);
}
std::unique_ptr<Layer> make_random_rotation(LayerConfig& c, const std::string& name) {
  return std::make_unique<RandomRotation>(c, name);
}
std::unique_ptr<Layer> make_random_zoom(LayerConfig& c, const std::string& name) {
  return std::make_unique<RandomZoom>(c, name);
}
std::unique_ptr<Layer> make_random_translation(LayerConfig& c, const std::string& name) {
  return std::make_unique<RandomTranslation>(c, name);
}
std::unique_ptr<Layer> make_random_contrast(LayerConfig& c, const std::string& name) {
  return std::make_unique<RandomContrast>(c, name);
}
std::unique_ptr<Layer> make_random_brightness(LayerConfig& c, const std::string& name) {
  return std::make_unique<RandomBrightness>(c, name);
}

// Training examples run with a fixed stream (the check reseeds it for every forward).
std::vector<LayerExample> random_flip_examples() {
  return {{{}, {Shape{3, 4, 2}}, true},
          {{{"mode", "horizontal"}}, {Shape{2, 3, 1}}, true},
          {{{"mode", "vertical"}}, {Shape{3, 2, 2}}, false}};
}
std::vector<LayerExample> random_rotation_examples() {
  return {{{{"factor", 0.2}}, {Shape{5, 4, 2}}, true},
          {{{"factor", Json{-0.3, 0.1}}, {"fill_mode", "constant"}, {"fill_value", 0.5}},
           {Shape{4, 4, 1}},
           true},
          {{{"factor", 0.25}, {"fill_mode", "wrap"}, {"interpolation", "nearest"}},
           {Shape{4, 5, 1}},
           true},
          {{{"factor", 0.1}}, {Shape{3, 3, 1}}, false}};
}
std::vector<LayerExample> random_zoom_examples() {
  return {{{{"height_factor", 0.3}}, {Shape{5, 4, 2}}, true},
          {{{"height_factor", Json{-0.4, -0.1}}, {"width_factor", 0.2}, {"fill_mode", "nearest"}},
           {Shape{4, 6, 1}},
           true}};
}
std::vector<LayerExample> random_translation_examples() {
  return {{{{"height_factor", 0.3}, {"width_factor", 0.2}}, {Shape{5, 4, 2}}, true},
          {{{"height_factor", Json{-0.5, 0.5}},
            {"width_factor", 0.4},
            {"fill_mode", "wrap"},
            {"interpolation", "nearest"}},
           {Shape{4, 4, 1}},
           true},
          {{{"height_factor", 0.2}, {"width_factor", 0.2}}, {Shape{3, 3, 1}}, false}};
}
std::vector<LayerExample> random_contrast_examples() {
  return {{{{"factor", 0.5}, {"value_range", Json{-100, 100}}}, {Shape{3, 4, 2}}, true},
          {{{"factor", 0.3}}, {Shape{2, 2, 3}}, false}};
}
std::vector<LayerExample> random_brightness_examples() {
  return {{{{"factor", 0.2}, {"value_range", Json{-100, 100}}}, {Shape{3, 4, 2}}, true},
          {{{"factor", Json{-0.1, 0.3}}}, {Shape{2, 2, 3}}, false}};
}

}  // namespace nnfleet
