// Regularization noise layers, Keras semantics; each is the identity at inference and in
// training draws from the model's own dropout stream (LayerArgs::rng) as Dropout does, so a
// result depends only on the plan seed, never on workers or resume:
//   SpatialDropout1D/2D  Dropout of whole channels: one keep/drop per (sample, channel), the
//                        kept channels scaled by 1/(1 - rate) (channels_last).
//   GaussianNoise        y = x + stddev * z, z ~ N(0, 1).
//   GaussianDropout      y = x * (1 + sqrt(rate / (1 - rate)) * z).
//   AlphaDropout         dropped values set to alpha' = -SELU's alpha * scale, then y = a x' + b
//                        with a = ((1 - rate)(1 + rate alpha'^2))^-1/2 and b = -a alpha' rate,
//                        which keeps SELU's mean and variance.
// The factor dy/dx of each value (or channel) is kept in the cache for backward.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/noise_shape.h"

namespace nnfleet {
namespace {

// Keep decisions as Dropout draws them: a value is kept when its 24-bit uniform u satisfies
// u / 2^24 >= rate; each 64-bit draw gives two u. Calls keep(i, kept) for i in [0, m).
template <typename F>
void draw_keep(Rng& rng, double rate, size_t m, F keep) {
  const auto threshold =
      static_cast<uint32_t>(std::ceil(static_cast<double>(static_cast<float>(rate)) * 16777216.0));
  for (size_t i = 0; i < m; i += 2) {
    const uint64_t r = rng.next();
    keep(i, static_cast<uint32_t>(r >> 40) >= threshold);
    if (i + 1 < m) keep(i + 1, (static_cast<uint32_t>(r >> 8) & 0xFFFFFFu) >= threshold);
  }
}

// Standard normals, two per Box-Muller pair of 53-bit uniforms. Calls put(i, z) for i in [0, m).
template <typename F>
void draw_normal(Rng& rng, size_t m, F put) {
  for (size_t i = 0; i < m; i += 2) {
    double u1 = rng.uniform_double();
    const double u2 = rng.uniform_double();
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 6.283185307179586 * u2;
    put(i, r * std::cos(t));
    if (i + 1 < m) put(i + 1, r * std::sin(t));
  }
}

double parse_rate(LayerConfig& c) {
  const double rate = c.get_float("rate");
  if (rate < 0.0 || rate >= 1.0) c.fail("rate", "a number in [0, 1)");
  return rate;
}

enum class Noise { kSpatial1d, kSpatial2d, kGaussianNoise, kGaussianDropout, kAlphaDropout };

class NoiseLayer final : public Layer {
 public:
  NoiseLayer(LayerConfig& c, const std::string& name, Noise kind) : Layer(name), kind_(kind) {
    if (kind_ == Noise::kGaussianNoise) {
      amount_ = c.get_float("stddev");
      if (amount_ < 0.0) c.fail("stddev", "a non-negative number");
    } else {
      amount_ = parse_rate(c);
    }
    if (kind_ == Noise::kSpatial2d) c.get_string("data_format", "channels_last", {"channels_last"});
    if (kind_ == Noise::kAlphaDropout) noise_ = parse_noise_shape(c);
  }
  const char* class_name() const override {
    switch (kind_) {
      case Noise::kSpatial1d:
        return "SpatialDropout1D";
      case Noise::kSpatial2d:
        return "SpatialDropout2D";
      case Noise::kGaussianNoise:
        return "GaussianNoise";
      case Noise::kGaussianDropout:
        return "GaussianDropout";
      case Noise::kAlphaDropout:
        return "AlphaDropout";
    }
    return "";
  }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (kind_ == Noise::kSpatial1d)
      require_rank(in[0], 2, "SpatialDropout1D takes sequences [batch,steps,channels]");
    if (kind_ == Noise::kSpatial2d)
      require_rank(in[0], 3, "SpatialDropout2D takes images [batch,height,width,channels]");
    check_noise_shape(noise_, in[0], "AlphaDropout");
    return in[0];
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return noise_.given ? noise_draws(noise_, in[0], n) : 0;
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    if (kind_ == Noise::kGaussianNoise) return 0;
    if (spatial()) return static_cast<size_t>(n) * static_cast<size_t>(in[0][-1]);
    return rows_floats(n, in[0]);
  }
  void forward(const LayerArgs& a) const override {
    const size_t m = rows_floats(a.n, a.out_shape);
    const float* x = a.x[0];
    float* y = a.y;
    if (!a.training || amount_ == 0.0) {
      std::memcpy(y, x, m * sizeof(float));
      return;
    }
    switch (kind_) {
      case Noise::kSpatial1d:
      case Noise::kSpatial2d: {
        const size_t ch = static_cast<size_t>(a.out_shape[-1]);
        const size_t per = static_cast<size_t>(a.out_shape.size()), sites = per / ch;
        const auto scale = static_cast<float>(1.0 / (1.0 - amount_));
        draw_keep(*a.rng, amount_, static_cast<size_t>(a.n) * ch,
                  [&](size_t i, bool kept) { a.cache[i] = kept ? scale : 0.0f; });
        for (size_t n = 0; n < static_cast<size_t>(a.n); ++n)
          for (size_t s = 0; s < sites; ++s)
            for (size_t c = 0; c < ch; ++c) {
              const size_t o = (n * sites + s) * ch + c;
              y[o] = x[o] * a.cache[n * ch + c];
            }
        return;
      }
      case Noise::kGaussianNoise:
        draw_normal(*a.rng, m,
                    [&](size_t i, double z) { y[i] = x[i] + static_cast<float>(amount_ * z); });
        return;
      case Noise::kGaussianDropout: {
        const double sd = std::sqrt(amount_ / (1.0 - amount_));
        draw_normal(*a.rng, m, [&](size_t i, double z) {
          a.cache[i] = static_cast<float>(1.0 + sd * z);
          y[i] = x[i] * a.cache[i];
        });
        return;
      }
      case Noise::kAlphaDropout: {
        const double alpha_p =
            -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946;
        const double ka = 1.0 / std::sqrt((1.0 - amount_) * (1.0 + amount_ * alpha_p * alpha_p));
        const double kb = -ka * alpha_p * amount_;
        const auto fa = static_cast<float>(ka);
        const auto dropped = static_cast<float>(ka * alpha_p + kb), fb = static_cast<float>(kb);
        if (noise_.given) {
          // One keep/drop per draw of the noise_shape, spread over the input: 1 kept, 0 dropped.
          draw_keep(*a.rng, amount_, noise_draws(noise_, a.in_shapes[0], a.n),
                    [&](size_t i, bool kept) { a.scratch[i] = kept ? 1.0f : 0.0f; });
          broadcast_noise(noise_, a.in_shapes[0], a.n, a.scratch, a.cache);
          for (size_t i = 0; i < m; ++i) {
            const bool kept = a.cache[i] != 0.0f;
            a.cache[i] = kept ? fa : 0.0f;
            y[i] = kept ? fa * x[i] + fb : dropped;
          }
          return;
        }
        draw_keep(*a.rng, amount_, m, [&](size_t i, bool kept) {
          a.cache[i] = kept ? fa : 0.0f;
          y[i] = kept ? fa * x[i] + fb : dropped;
        });
        return;
      }
    }
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const size_t m = rows_floats(a.n, a.out_shape);
    float* dx = a.dx[0];
    if (!a.training || amount_ == 0.0 || kind_ == Noise::kGaussianNoise) {
      for (size_t i = 0; i < m; ++i) dx[i] += a.dy[i];
      return;
    }
    if (spatial()) {
      const size_t ch = static_cast<size_t>(a.out_shape[-1]);
      const size_t rows = m / ch;
      const size_t sites = static_cast<size_t>(a.out_shape.size()) / ch;
      for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < ch; ++c)
          dx[r * ch + c] += a.dy[r * ch + c] * a.cache[(r / sites) * ch + c];
      return;
    }
    for (size_t i = 0; i < m; ++i) dx[i] += a.dy[i] * a.cache[i];
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j[kind_ == Noise::kGaussianNoise ? "stddev" : "rate"] = amount_;
    j["seed"] = nullptr;
    if (kind_ == Noise::kAlphaDropout) j["noise_shape"] = noise_shape_to_keras(noise_);
    if (kind_ == Noise::kSpatial2d) j["data_format"] = "channels_last";
    // Keras 3's SpatialDropout takes only rate, seed, name, dtype (and data_format): it writes
    // no trainable, and a config with one does not load there.
    if (spatial()) j.erase("trainable");
    return j;
  }

 private:
  bool spatial() const { return kind_ == Noise::kSpatial1d || kind_ == Noise::kSpatial2d; }
  Noise kind_;
  double amount_ = 0.0;
  NoiseShape
      noise_;  // AlphaDropout's; never given for the others  // rate, or GaussianNoise's stddev
};

}  // namespace

std::unique_ptr<Layer> make_spatial_dropout1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<NoiseLayer>(c, name, Noise::kSpatial1d);
}
std::unique_ptr<Layer> make_spatial_dropout2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<NoiseLayer>(c, name, Noise::kSpatial2d);
}
std::unique_ptr<Layer> make_gaussian_noise(LayerConfig& c, const std::string& name) {
  return std::make_unique<NoiseLayer>(c, name, Noise::kGaussianNoise);
}
std::unique_ptr<Layer> make_gaussian_dropout(LayerConfig& c, const std::string& name) {
  return std::make_unique<NoiseLayer>(c, name, Noise::kGaussianDropout);
}
std::unique_ptr<Layer> make_alpha_dropout(LayerConfig& c, const std::string& name) {
  return std::make_unique<NoiseLayer>(c, name, Noise::kAlphaDropout);
}
// Training examples run with a fixed draw: the check seeds the stream afresh for each forward.
std::vector<LayerExample> spatial_dropout1d_examples() {
  return {{{{"rate", 0.5}}, {Shape{3, 4}}, true}, {{{"rate", 0.3}}, {Shape{2, 3}}, false}};
}
std::vector<LayerExample> spatial_dropout2d_examples() {
  return {{{{"rate", 0.4}}, {Shape{2, 2, 3}}, true},
          {{{"rate", 0.4}, {"data_format", "channels_first"}}, {Shape{3, 2, 2}}, true}};
}
std::vector<LayerExample> gaussian_noise_examples() {
  return {{{{"stddev", 0.3}}, {Shape{2, 3}}, true}, {{{"stddev", 0.1}}, {Shape{4}}, false}};
}
std::vector<LayerExample> gaussian_dropout_examples() {
  return {{{{"rate", 0.3}}, {Shape{2, 3}}, true}};
}
std::vector<LayerExample> alpha_dropout_examples() {
  return {{{{"rate", 0.25}}, {Shape{6}}, true},
          {{{"rate", 0.1}}, {Shape{2, 2}}, false},
          {{{"rate", 0.4}, {"noise_shape", Json{nullptr, 3, 1}}}, {Shape{3, 2}}, true}};
}

}  // namespace nnfleet
