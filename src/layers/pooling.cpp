// MaxPooling2D, AveragePooling2D (windowed) and GlobalAveragePooling2D, GlobalMaxPooling2D:
// Keras semantics, NHWC. Window pools: pool_size (default 2), strides (default pool_size),
// padding valid/same; padded positions never win a max and are not counted in an average.
// Global pools reduce [H,W,C] to [C] (keepdims false) or [1,1,C] (keepdims true).
#include "kernels/pool.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

class WindowPool final : public Layer {
 public:
  WindowPool(LayerConfig& c, const std::string& name, bool is_max) : Layer(name), max_(is_max) {
    opt_ = parse_conv_options(c, "pool_size", true);
  }
  const char* class_name() const override { return max_ ? "MaxPooling2D" : "AveragePooling2D"; }
  ConvGeometry geometry(const Shape& in) const {
    return make_geometry(opt_, in, in.rank() == 3 ? in[2] : 0);
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    ConvGeometry g = geometry(in[0]);
    return Shape{g.oh, g.ow, g.f};
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
    j.update(conv_options_to_keras(opt_, "pool_size", true));
    return j;
  }

 private:
  bool max_;
  Conv2dOptions opt_;
};

class GlobalPool final : public Layer {
 public:
  GlobalPool(LayerConfig& c, const std::string& name, bool is_max) : Layer(name), max_(is_max) {
    keepdims_ = c.get_bool("keepdims", false);
    c.get_string("data_format", "channels_last", {"channels_last"});
  }
  const char* class_name() const override {
    return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D";
  }
  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 3, "global pooling takes images [batch,height,width,channels]");
    return keepdims_ ? Shape{1, 1, in[0][2]} : Shape{in[0][2]};
  }
  void forward(const LayerArgs& a) const override {
    const Shape& s = a.in_shapes[0];
    const int sp = static_cast<int>(s[0] * s[1]), c = static_cast<int>(s[2]);
    if (max_)
      global_max_pool_forward(a.n, sp, c, a.x[0], a.y);
    else
      global_avg_pool_forward(a.n, sp, c, a.x[0], a.y);
  }
  void backward(const LayerArgs& a) const override {
    if (!a.dx[0]) return;
    const Shape& s = a.in_shapes[0];
    const int sp = static_cast<int>(s[0] * s[1]), c = static_cast<int>(s[2]);
    if (max_)
      global_max_pool_backward(a.n, sp, c, a.x[0], a.y, a.dy, a.dx[0]);
    else
      global_avg_pool_backward(a.n, sp, c, a.dy, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["data_format"] = "channels_last";
    j["keepdims"] = keepdims_;
    return j;
  }

 private:
  bool max_;
  bool keepdims_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_max_pooling2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<WindowPool>(c, name, true);
}
std::unique_ptr<Layer> make_average_pooling2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<WindowPool>(c, name, false);
}
std::unique_ptr<Layer> make_global_average_pooling2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<GlobalPool>(c, name, false);
}
std::unique_ptr<Layer> make_global_max_pooling2d(LayerConfig& c, const std::string& name) {
  return std::make_unique<GlobalPool>(c, name, true);
}

namespace {
std::vector<LayerExample> window_pool_examples() {
  return {{{{"pool_size", 2}}, {Shape{4, 5, 2}}},
          {{{"pool_size", 3}, {"strides", 2}, {"padding", "same"}}, {Shape{5, 6, 2}}},
          {{{"pool_size", Json{2, 1}}, {"strides", 1}}, {Shape{3, 3, 1}}}};
}
std::vector<LayerExample> global_pool_examples() {
  return {{{}, {Shape{3, 4, 2}}}, {{{"keepdims", true}}, {Shape{2, 2, 3}}}};
}
}  // namespace

std::vector<LayerExample> max_pooling2d_examples() { return window_pool_examples(); }
std::vector<LayerExample> average_pooling2d_examples() { return window_pool_examples(); }
std::vector<LayerExample> global_average_pooling2d_examples() { return global_pool_examples(); }
std::vector<LayerExample> global_max_pooling2d_examples() { return global_pool_examples(); }

}  // namespace nnfleet
