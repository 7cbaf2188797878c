// MaxPooling1D, AveragePooling1D (windowed) and GlobalMaxPooling1D, GlobalAveragePooling1D:
// Keras semantics over sequences [T,C]. Window pools: pool_size (default 2), strides (default
// and null: pool_size), padding valid (a partial last window is dropped: floor) or same; padded
// positions never win a max and are not counted in an average. They run the 2-D pooling kernels
// on images of height 1. Global pools reduce [T,C] to [C] (keepdims false) or [1,C].
#include "kernels/pool.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class WindowPool1D final : public Layer {
 public:
  WindowPool1D(LayerConfig& c, const std::string& name, bool is_max) : Layer(name), max_(is_max) {
    opt_ = parse_conv1d_options(c, "pool_size", true);
  }
  const char* class_name() const override { return max_ ? "MaxPooling1D" : "AveragePooling1D"; }
  ConvGeometry geometry(const Shape& in) const {
    return make_geometry1d(opt_, in, in.rank() == 2 ? in[1] : 0);
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    const ConvGeometry g = geometry(in[0]);
    return Shape{g.ow, g.f};
  }
  void forward(const LayerArgs& a) const override {
    const ConvGeometry g = geometry(a.in_shapes[0]);
    if (max_)
      max_pool2d_forward(g, a.n, a.x[0], a.y);
    else
      avg_pool2d_forward(g, a.n, a.x[0], a.y);
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const ConvGeometry g = geometry(a.in_shapes[0]);
    if (max_)
      max_pool2d_backward(g, a.n, a.x[0], a.y, a.dy, a.dx[0]);
    else
      avg_pool2d_backward(g, a.n, a.dy, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j.update(conv1d_options_to_keras(opt_, "pool_size", true));
    return j;
  }

 private:
  bool max_;
  Conv1dOptions opt_;
};

class GlobalPool1D final : public Layer {
 public:
  GlobalPool1D(LayerConfig& c, const std::string& name, bool is_max) : Layer(name), max_(is_max) {
    keepdims_ = c.get_bool("keepdims", false);
    c.get_string("data_format", "channels_last", {"channels_last"});
  }
  const char* class_name() const override {
    return max_ ? "GlobalMaxPooling1D" : "GlobalAveragePooling1D";
  }
  // Keras's GlobalAveragePooling1D averages over the real steps only when a mask comes in
  // (sum of m x over sum of m; all steps masked gives 0/0 as in Keras); the max ignores masks.
  MaskUse mask_use() const override { return max_ ? MaskUse::kDrop : MaskUse::kConsume; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 2, "1-D global pooling takes sequences [batch,steps,channels]");
    return keepdims_ ? Shape{1, in[0][1]} : Shape{in[0][1]};
  }
  void forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const int t = static_cast<int>(s[0]), c = static_cast<int>(s[1]);
    if (!max_ && a.mask) {
      masked_average(a, t, c, false);
      return;
    }
    if (max_)
      global_max_pool_forward(a.n, t, c, a.x[0], a.y);
    else
      global_avg_pool_forward(a.n, t, c, a.x[0], a.y);
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const Shape& s = a.in_shapes[0];
    const int t = static_cast<int>(s[0]), c = static_cast<int>(s[1]);
    if (!max_ && a.mask) {
      masked_average(a, t, c, true);
      return;
    }
    if (max_)
      global_max_pool_backward(a.n, t, c, a.x[0], a.y, a.dy, a.dx[0]);
    else
      global_avg_pool_backward(a.n, t, c, a.dy, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["data_format"] = "channels_last";
    j["keepdims"] = keepdims_;
    return j;
  }

 private:
  // Forward: y[n,:] = sum_t m[n,t] x[n,t,:] / sum_t m[n,t]; backward: dx[n,t,:] += dy[n,:]
  // m[n,t] / sum_t m[n,t].
  static void masked_average(const LayerArgs& a, int t, int c, bool backward) {
    for (int n = 0; n < a.n; ++n) {
      const float* m = a.mask + static_cast<size_t>(n) * t;
      float count = 0;
      for (int i = 0; i < t; ++i) count += m[i];
      const size_t in = static_cast<size_t>(n) * t * c, out = static_cast<size_t>(n) * c;
      if (!backward) {
        for (int j = 0; j < c; ++j) a.y[out + j] = 0;
        for (int i = 0; i < t; ++i)
          for (int j = 0; j < c; ++j) a.y[out + j] += m[i] * a.x[0][in + i * c + j];
        for (int j = 0; j < c; ++j) a.y[out + j] /= count;
      } else {
        for (int i = 0; i < t; ++i)
          for (int j = 0; j < c; ++j) a.dx[0][in + i * c + j] += a.dy[out + j] * m[i] / count;
      }
    }
  }
  bool max_;
  bool keepdims_ = false;
};

std::vector<LayerExample> window_pool1d_examples() {
  return {{{{"pool_size", 2}}, {Shape{5, 2}}},  // odd length: the last step is dropped
          {{{"pool_size", 3}, {"strides", 2}, {"padding", "same"}}, {Shape{6, 2}}},
          {{{"pool_size", 2}, {"strides", 1}}, {Shape{3, 1}}},
          {{{"pool_size", 1}}, {Shape{1, 3}}}};
}
std::vector<LayerExample> global_pool1d_examples() {
  return {{{}, {Shape{5, 2}}}, {{{"keepdims", true}}, {Shape{3, 3}}}, {{}, {Shape{1, 2}}}};
}

}  // namespace

std::unique_ptr<Layer> make_max_pooling1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<WindowPool1D>(c, name, true);
}
std::unique_ptr<Layer> make_average_pooling1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<WindowPool1D>(c, name, false);
}
std::unique_ptr<Layer> make_global_average_pooling1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<GlobalPool1D>(c, name, false);
}
std::unique_ptr<Layer> make_global_max_pooling1d(LayerConfig& c, const std::string& name) {
  return std::make_unique<GlobalPool1D>(c, name, true);
}
std::vector<LayerExample> max_pooling1d_examples() { return window_pool1d_examples(); }
std::vector<LayerExample> average_pooling1d_examples() { return window_pool1d_examples(); }
std::vector<LayerExample> global_average_pooling1d_examples() { return global_pool1d_examples(); }
std::vector<LayerExample> global_max_pooling1d_examples() { return global_pool1d_examples(); }

}  // namespace nnfleet
