// Pooling layers, Keras semantics, channels last:
// - Window pools MaxPooling1D/2D, AveragePooling1D/2D: pool_size (default 2), strides (default
//   and null: pool_size), padding valid (a partial last window is dropped: floor) or same; padded
//   positions never win a max and are not counted in an average. The 1-D ones run the 2-D
//   kernels on images of height 1.
// - Global pools GlobalMaxPooling1D/2D, GlobalAveragePooling1D/2D reduce [T,C] or [H,W,C] to
//   [C] (keepdims false) or to [1,C] / [1,1,C] (keepdims true).
// One class of each kind serves both ranks; Rank1/Rank2 say what differs (options, geometry,
// shapes, names).
#include <algorithm>

#include "kernels/pool.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

struct Rank1 {
  using Options = Conv1dOptions;
  static constexpr const char* kMax = "MaxPooling1D";
  static constexpr const char* kAverage = "AveragePooling1D";
  static constexpr const char* kGlobalMax = "GlobalMaxPooling1D";
  static constexpr const char* kGlobalAverage = "GlobalAveragePooling1D";
  static constexpr const char* kGlobalInput =
      "1-D global pooling takes sequences [batch,steps,channels]";
  static Options parse(LayerConfig& c) { return parse_conv1d_options(c, "pool_size", true); }
  static Json to_keras(const Options& o) { return conv1d_options_to_keras(o, "pool_size", true); }
  static ConvGeometry geometry(const Options& o, const Shape& in) {
    return make_geometry1d(o, in, in.rank() == 2 ? in[1] : 0);
  }
  static Shape window_output(const ConvGeometry& g) { return Shape{g.ow, g.f}; }
  static Shape global_output(int64_t c, bool keepdims) { return keepdims ? Shape{1, c} : Shape{c}; }
};

struct Rank2 {
  using Options = Conv2dOptions;
  static constexpr const char* kMax = "MaxPooling2D";
  static constexpr const char* kAverage = "AveragePooling2D";
  static constexpr const char* kGlobalMax = "GlobalMaxPooling2D";
  static constexpr const char* kGlobalAverage = "GlobalAveragePooling2D";
  static constexpr const char* kGlobalInput =
      "global pooling takes images [batch,height,width,channels]";
  static Options parse(LayerConfig& c) { return parse_conv_options(c, "pool_size", true); }
  static Json to_keras(const Options& o) { return conv_options_to_keras(o, "pool_size", true); }
  static ConvGeometry geometry(const Options& o, const Shape& in) {
    return make_geometry(o, in, in.rank() == 3 ? in[2] : 0);
  }
  static Shape window_output(const ConvGeometry& g) { return Shape{g.oh, g.ow, g.f}; }
  static Shape global_output(int64_t c, bool keepdims) {
    return keepdims ? Shape{1, 1, c} : Shape{c};
  }
};

template <class R>
class WindowPool final : public Layer {
 public:
  WindowPool(LayerConfig& c, const std::string& name, bool is_max)
      : Layer(name), max_(is_max), opt_(R::parse(c)) {}
  const char* class_name() const override { return max_ ? R::kMax : R::kAverage; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    return R::window_output(R::geometry(opt_, in[0]));
  }
  void forward(const LayerArgs& a) const override {
    const ConvGeometry g = R::geometry(opt_, a.in_shapes[0]);
    if (max_)
      max_pool2d_forward(g, a.n, a.x[0], a.y);
    else
      avg_pool2d_forward(g, a.n, a.x[0], a.y);
  }
  // Max pooling writes m7's 2x2 pooling's input gradient whole (4.7 MB a step unzeroed); the
  // others zero theirs here as the network would have.
  bool writes_whole_dx() const override { return true; }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const ConvGeometry g = R::geometry(opt_, a.in_shapes[0]);
    if (max_) {
      max_pool2d_backward(g, a.n, a.x[0], a.y, a.dy, a.dx[0], a.dx_fresh);
      return;
    }
    if (a.dx_fresh) std::fill_n(a.dx[0], rows_floats(a.n, a.in_shapes[0]), 0.0f);
    avg_pool2d_backward(g, a.n, a.dy, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j.update(R::to_keras(opt_));
    return j;
  }

 private:
  bool max_;
  typename R::Options opt_;
};

// Forward: y[n,:] = sum_t m[n,t] x[n,t,:] / sum_t m[n,t]; backward: dx[n,t,:] += dy[n,:]
// m[n,t] / sum_t m[n,t] (all steps masked gives 0/0, as in Keras).
void masked_average(const LayerArgs& a, int t, int c, bool backward) {
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

template <class R>
class GlobalPool final : public Layer {
 public:
  static constexpr int kRank = std::is_same_v<R, Rank1> ? 2 : 3;  // of one sample's input
  GlobalPool(LayerConfig& c, const std::string& name, bool is_max) : Layer(name), max_(is_max) {
    keepdims_ = c.get_bool("keepdims", false);
    c.get_string("data_format", "channels_last", {"channels_last"});
  }
  const char* class_name() const override { return max_ ? R::kGlobalMax : R::kGlobalAverage; }
  // Keras's GlobalAveragePooling1D averages over the real steps only when a mask comes in (sum
  // of m x over sum of m); the max ignores masks, and 2-D pooling never receives one.
  MaskUse mask_use() const override {
    return !max_ && kRank == 2 ? MaskUse::kConsume : MaskUse::kDrop;
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], kRank, R::kGlobalInput);
    return R::global_output(in[0][kRank - 1], keepdims_);
  }
  void forward(const LayerArgs& a) const override {
    const auto [steps, c] = sizes(a.in_shapes[0]);
    if (!max_ && a.mask)
      masked_average(a, steps, c, false);
    else if (max_)
      global_max_pool_forward(a.n, steps, c, a.x[0], a.y);
    else
      global_avg_pool_forward(a.n, steps, c, a.x[0], a.y);
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const auto [steps, c] = sizes(a.in_shapes[0]);
    if (!max_ && a.mask)
      masked_average(a, steps, c, true);
    else if (max_)
      global_max_pool_backward(a.n, steps, c, a.x[0], a.y, a.dy, a.dx[0]);
    else
      global_avg_pool_backward(a.n, steps, c, a.dy, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["data_format"] = "channels_last";
    j["keepdims"] = keepdims_;
    return j;
  }

 private:
  // The positions pooled over (steps, or height x width) and the channels of one sample.
  static std::pair<int, int> sizes(const Shape& s) {
    int64_t positions = 1;
    for (int i = 0; i + 1 < kRank; ++i) positions *= s[i];
    return {static_cast<int>(positions), static_cast<int>(s[kRank - 1])};
  }
  bool max_;
  bool keepdims_ = false;
};

template <template <class> class Pool, class R>
std::unique_ptr<Layer> make(LayerConfig& c, const std::string& name, bool is_max) {
  return std::make_unique<Pool<R>>(c, name, is_max);
}

std::vector<LayerExample> window_pool_examples() {
  return {{{{"pool_size", 2}}, {Shape{4, 5, 2}}},
          {{{"pool_size", 3}, {"strides", 2}, {"padding", "same"}}, {Shape{5, 6, 2}}},
          {{{"pool_size", Json{2, 1}}, {"strides", 1}}, {Shape{3, 3, 1}}},
          {{{"pool_size", Json{1, 2}}, {"data_format", "channels_first"}}, {Shape{2, 3, 5}}}};
}
std::vector<LayerExample> global_pool_examples() {
  return {{{}, {Shape{3, 4, 2}}},
          {{{"keepdims", true}}, {Shape{2, 2, 3}}},
          {{{"data_format", "channels_first"}}, {Shape{2, 3, 4}}},
          {{{"keepdims", true}, {"data_format", "channels_first"}}, {Shape{3, 2, 2}}}};
}
std::vector<LayerExample> window_pool1d_examples() {
  return {{{{"pool_size", 2}}, {Shape{5, 2}}},  // odd length: the last step is dropped
          {{{"pool_size", 3}, {"strides", 2}, {"padding", "same"}}, {Shape{6, 2}}},
          {{{"pool_size", 2}, {"strides", 1}}, {Shape{3, 1}}},
          {{{"pool_size", 1}}, {Shape{1, 3}}},
          {{{"pool_size", 2}, {"data_format", "channels_first"}}, {Shape{2, 5}}}};
}
std::vector<LayerExample> global_pool1d_examples() {
  return {{{}, {Shape{5, 2}}},
          {{{"keepdims", true}}, {Shape{3, 3}}},
          {{}, {Shape{1, 2}}},
          {{{"data_format", "channels_first"}}, {Shape{3, 4}}}};
}

}  // namespace

std::unique_ptr<Layer> make_max_pooling2d(LayerConfig& c, const std::string& name) {
  return make<WindowPool, Rank2>(c, name, true);
}
std::unique_ptr<Layer> make_average_pooling2d(LayerConfig& c, const std::string& name) {
  return make<WindowPool, Rank2>(c, name, false);
}
std::unique_ptr<Layer> make_global_average_pooling2d(LayerConfig& c, const std::string& name) {
  return make<GlobalPool, Rank2>(c, name, false);
}
std::unique_ptr<Layer> make_global_max_pooling2d(LayerConfig& c, const std::string& name) {
  return make<GlobalPool, Rank2>(c, name, true);
}
std::unique_ptr<Layer> make_max_pooling1d(LayerConfig& c, const std::string& name) {
  return make<WindowPool, Rank1>(c, name, true);
}
std::unique_ptr<Layer> make_average_pooling1d(LayerConfig& c, const std::string& name) {
  return make<WindowPool, Rank1>(c, name, false);
}
std::unique_ptr<Layer> make_global_average_pooling1d(LayerConfig& c, const std::string& name) {
  return make<GlobalPool, Rank1>(c, name, false);
}
std::unique_ptr<Layer> make_global_max_pooling1d(LayerConfig& c, const std::string& name) {
  return make<GlobalPool, Rank1>(c, name, true);
}

std::vector<LayerExample> max_pooling2d_examples() { return window_pool_examples(); }
std::vector<LayerExample> average_pooling2d_examples() { return window_pool_examples(); }
std::vector<LayerExample> global_average_pooling2d_examples() { return global_pool_examples(); }
std::vector<LayerExample> global_max_pooling2d_examples() { return global_pool_examples(); }
std::vector<LayerExample> max_pooling1d_examples() { return window_pool1d_examples(); }
std::vector<LayerExample> average_pooling1d_examples() { return window_pool1d_examples(); }
std::vector<LayerExample> global_average_pooling1d_examples() { return global_pool1d_examples(); }
std::vector<LayerExample> global_max_pooling1d_examples() { return global_pool1d_examples(); }

}  // namespace nnfleet
