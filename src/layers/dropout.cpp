// Dropout: in training, each value is kept with probability 1 - rate and scaled by 1/(1 - rate)
// (inverted dropout, as Keras); at inference the layer is the identity. The mask is kept in the
// cache for backward, one byte per value (1: kept), a quarter of a float mask's memory (W1's m7
// held 0.6 MB of it per piece at its peak); it is drawn from the model's own dropout stream. With
// a noise_shape, one keep/drop is drawn per entry of that shape and shared along its axes of size
// 1, and the cache holds the spread factors (0 or the scale) as floats.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/noise_shape.h"

namespace nnfleet {
namespace {

class Dropout final : public Layer {
 public:
  Dropout(LayerConfig& c, const std::string& name) : Layer(name) {
    rate_ = c.get_float("rate");
    if (rate_ < 0.0 || rate_ >= 1.0) c.fail("rate", "a number in [0, 1)");
    noise_ = parse_noise_shape(c);
  }
  const char* class_name() const override { return "Dropout"; }
  MaskUse mask_use() const override { return MaskUse::kPropagate; }  // as Keras's Dropout
  Shape output_shape(const std::vector<Shape>& in) const override {
    check_noise_shape(noise_, in[0], "Dropout");
    return in[0];
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    const size_t m = rows_floats(n, in[0]);
    return noise_.given ? m : (m + sizeof(float) - 1) / sizeof(float);  // bytes, in floats
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return noise_.given ? noise_draws(noise_, in[0], n) : 0;
  }
  void forward(const LayerArgs& a) const override {
    const size_t m = rows_floats(a.n, a.out_shape);
    if (!a.training || rate_ == 0.0) {
      std::memcpy(a.y, a.x[0], m * sizeof(float));
      return;
    }
    // A value is kept when its 24-bit uniform u / 2^24 is at least the rate, i.e. when
    // u >= ceil(rate * 2^24) (exact: a float times 2^24 is exact in double). Each 64-bit draw of
    // the stream gives two such u, made a block at a time so the masking loop vectorizes.
    const float scale = kept_scale();
    const auto threshold = static_cast<uint32_t>(
        std::ceil(static_cast<double>(static_cast<float>(rate_)) * 16777216.0));
    if (noise_.given) {
      forward_shared(a, scale, threshold);
      return;
    }
    constexpr size_t kBlock = 256;
    uint32_t u[kBlock];
    for (size_t i0 = 0; i0 < m; i0 += kBlock) {
      const size_t len = std::min(kBlock, m - i0);
      for (size_t j = 0; j < len; j += 2) {
        const uint64_t r = a.rng->next();
        u[j] = static_cast<uint32_t>(r >> 40);
        u[j + 1] = static_cast<uint32_t>(r >> 8) & 0xFFFFFFu;
      }
      const float* __restrict x = a.x[0] + i0;
      float* __restrict y = a.y + i0;
      uint8_t* __restrict kept = reinterpret_cast<uint8_t*>(a.cache) + i0;
      for (size_t j = 0; j < len; ++j) {
        const bool keep = u[j] >= threshold;
        kept[j] = keep ? 1 : 0;
        y[j] = x[j] * (keep ? scale : 0.0f);
      }
    }
  }
  // m7's first dropout's input gradient, 1.2 MB a step, is written unzeroed.
  bool writes_whole_dx() const override { return true; }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    if (a.dx_fresh) {
      backward_into<true>(a);
    } else {
      backward_into<false>(a);
    }
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["rate"] = rate_;
    j["seed"] = nullptr;
    j["noise_shape"] = noise_shape_to_keras(noise_);
    return j;
  }

 private:
  // dx += the gradient, or, Fresh (LayerArgs::dx_fresh), dx = 0 + it: the same bits on zeros.
  template <bool Fresh>
  void backward_into(const LayerArgs& a) const {
    const size_t m = rows_floats(a.n, a.out_shape);
    float* dx = a.dx[0];
    const auto at = [dx](size_t i) { return Fresh ? 0.0f : dx[i]; };
    if (!a.training || rate_ == 0.0) {
      for (size_t i = 0; i < m; ++i) dx[i] = at(i) + a.dy[i];
      return;
    }
    if (noise_.given) {
      for (size_t i = 0; i < m; ++i) dx[i] = at(i) + a.dy[i] * a.cache[i];
      return;
    }
    // The same products as with a float mask: dy times the scale, or times 0.
    const float scale = kept_scale();
    const uint8_t* kept = reinterpret_cast<const uint8_t*>(a.cache);
    for (size_t i = 0; i < m; ++i) dx[i] = at(i) + a.dy[i] * (kept[i] ? scale : 0.0f);
  }
  // A kept value's factor, 1 / (1 - rate): forward and the byte mask's backward multiply by the
  // same float, so the gradient is the float mask's.
  float kept_scale() const { return static_cast<float>(1.0 / (1.0 - rate_)); }
  // With a noise_shape: the keep factors of the draws (in the scratch, drawn as above, two per
  // 64-bit value), spread over the input into the cache.
  void forward_shared(const LayerArgs& a, float scale, uint32_t threshold) const {
    const size_t draws = noise_draws(noise_, a.in_shapes[0], a.n);
    for (size_t j = 0; j < draws; j += 2) {
      const uint64_t r = a.rng->next();
      a.scratch[j] = static_cast<uint32_t>(r >> 40) >= threshold ? scale : 0.0f;
      if (j + 1 < draws)
        a.scratch[j + 1] = (static_cast<uint32_t>(r >> 8) & 0xFFFFFFu) >= threshold ? scale : 0.0f;
    }
    broadcast_noise(noise_, a.in_shapes[0], a.n, a.scratch, a.cache);
    const size_t m = rows_floats(a.n, a.out_shape);
    for (size_t i = 0; i < m; ++i) a.y[i] = a.x[0][i] * a.cache[i];
  }

  double rate_ = 0.0;
  NoiseShape noise_;
};

}  // namespace

std::unique_ptr<Layer> make_dropout(LayerConfig& c, const std::string& name) {
  return std::make_unique<Dropout>(c, name);
}
// The gradient check runs with a fixed mask: forward draws from a freshly seeded stream each time.
std::vector<LayerExample> dropout_examples() {
  return {{{{"rate", 0.5}}, {Shape{3, 4}}, true},
          {{{"rate", 0.25}}, {Shape{5}}, false},
          // One draw per (sample, feature), shared over the time axis; then one for the batch.
          {{{"rate", 0.5}, {"noise_shape", Json{nullptr, 1, 4}}}, {Shape{3, 4}}, true},
          {{{"rate", 0.4}, {"noise_shape", Json{1, 2, nullptr, 1}}}, {Shape{2, 3, 2}}, true}};
}

}  // namespace nnfleet
