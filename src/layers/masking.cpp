// Masking (keras/src/layers/core/masking.py): a time step whose features all equal mask_value is
// padding. The layer zeroes such steps in its output and makes the mask [N,T] (1 = real step)
// that the network hands to the layers after it (recurrent layers skip masked steps). Input
// [T,F] per sample.
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class Masking final : public Layer {
 public:
  Masking(LayerConfig& c, const std::string& name) : Layer(name) {
    value_ = static_cast<float>(c.get_float("mask_value", 0.0));
  }
  const char* class_name() const override { return "Masking"; }
  MaskUse mask_use() const override { return MaskUse::kProduce; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 2, "Masking takes sequences [batch,time,features]");
    return in[0];
  }
  void forward(const LayerArgs& a) const override {
    const int64_t rows = static_cast<int64_t>(a.n) * a.in_shapes[0][0], f = a.in_shapes[0][1];
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = a.x[0] + r * f;
      float* y = a.y + r * f;
      const float keep = real_step(x, f) ? 1.0f : 0.0f;
      for (int64_t j = 0; j < f; ++j) y[j] = x[j] * keep;
      if (a.mask_out) a.mask_out[r] = keep;
    }
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const int64_t rows = static_cast<int64_t>(a.n) * a.in_shapes[0][0], f = a.in_shapes[0][1];
    for (int64_t r = 0; r < rows; ++r) {
      if (!real_step(a.x[0] + r * f, f)) continue;
      for (int64_t j = 0; j < f; ++j) a.dx[0][r * f + j] += a.dy[r * f + j];
    }
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["mask_value"] = value_;
    return j;
  }

 private:
  bool real_step(const float* x, int64_t f) const {
    for (int64_t j = 0; j < f; ++j)
      if (x[j] != value_) return true;
    return false;
  }
  float value_ = 0.0f;
};

}  // namespace

std::unique_ptr<Layer> make_masking(LayerConfig& c, const std::string& name) {
  return std::make_unique<Masking>(c, name);
}
std::vector<LayerExample> masking_examples() {
  // Random inputs never equal the mask value exactly; the masked path is covered by the golden
  // masked-LSTM test and tests/layers/layer_semantics_test.cpp.
  return {{{{"mask_value", 0.0}}, {Shape{3, 2}}}, {{{"mask_value", -1.0}}, {Shape{1, 4}}}};
}

}  // namespace nnfleet
