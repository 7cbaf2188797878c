// channels_first layers as channels_last twins with transposes in scratch (see channels_first.h).
// Per sample, moving the channel axis is a 2-D transpose: [C, S] -> [S, C] with S the product
// of the spatial sizes, and back.
#include "layers/channels_first.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "layers/layer_util.h"

namespace nnfleet {
namespace {

// Kinds whose config reads data_format (their twin gets "channels_last"), and Keras 3 kinds
// that take data_format although nnfleet's twin has no such key (their twin gets none).
constexpr std::string_view kReadsFormat[] = {"Conv1D",
                                             "Conv2D",
                                             "DepthwiseConv2D",
                                             "SeparableConv2D",
                                             "Conv2DTranspose",
                                             "MaxPooling1D",
                                             "MaxPooling2D",
                                             "AveragePooling1D",
                                             "AveragePooling2D",
                                             "GlobalMaxPooling1D",
                                             "GlobalAveragePooling1D",
                                             "GlobalMaxPooling2D",
                                             "GlobalAveragePooling2D",
                                             "UpSampling2D",
                                             "ZeroPadding2D",
                                             "Cropping2D",
                                             "Flatten",
                                             "SpatialDropout2D"};
constexpr std::string_view kIgnoresFormat[] = {"UpSampling1D", "ZeroPadding1D", "Cropping1D",
                                               "SpatialDropout1D"};

bool listed(std::string_view cls, const auto& list) {
  return std::find(std::begin(list), std::end(list), cls) != std::end(list);
}

// [C, d1..dk] -> [d1..dk, C] and back; rank 0 and 1 shapes stay.
Shape channels_to_last(const Shape& s) {
  if (s.rank() < 2) return s;
  Shape t;
  for (int i = 1; i < s.rank(); ++i) t.push_back(s[i]);
  t.push_back(s[0]);
  return t;
}
Shape channels_to_first(const Shape& s) {
  if (s.rank() < 2) return s;
  Shape t{s[-1]};
  for (int i = 0; i + 1 < s.rank(); ++i) t.push_back(s[i]);
  return t;
}

// For n samples: dst[b, j, i] (+)= src[b, i, j], src [n, rows, cols].
template <bool kAdd>
void transpose_rows(int n, int64_t rows, int64_t cols, const float* src, float* dst) {
  const int64_t per = rows * cols;
  for (int b = 0; b < n; ++b) {
    const float* s = src + b * per;
    float* d = dst + b * per;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        if constexpr (kAdd)
          d[j * rows + i] += s[i * cols + j];
        else
          d[j * rows + i] = s[i * cols + j];
      }
  }
}

// Scratch segments start on 64-byte boundaries, as the arena's own views do.
size_t padded(size_t floats) { return (floats + 15) / 16 * 16; }

class ChannelsFirst final : public Layer {
 public:
  ChannelsFirst(std::unique_ptr<Layer> twin, Json restore)
      : Layer(twin->name()), twin_(std::move(twin)), restore_(std::move(restore)) {}
  const Layer& twin() const { return *twin_; }

  const char* class_name() const override { return twin_->class_name(); }
  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1)
      throw ModelError(std::string("takes the channels on axis 1 (channels_first); expected ") +
                       "an input of rank 2 or more, got " + keras_shape(in[0]));
    return channels_to_first(twin_->output_shape({channels_to_last(in[0])}));
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    return twin_->param_specs({channels_to_last(in[0])});
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return twin_->cache_floats({channels_to_last(in[0])}, n);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    const Shape x = channels_to_last(in[0]);
    const Shape y = twin_->output_shape({x});
    return 2 * padded(rows_floats(n, x)) + 2 * padded(rows_floats(n, y)) +
           twin_->scratch_floats({x}, n);
  }
  void forward(const LayerArgs& a) const override {
    Views v = views(a);
    LayerArgs t = a;
    t.in_shapes = &v.x_shape;
    t.out_shape = v.y_shape;
    t.x = &v.x_cl;
    t.y = v.y_cl;
    t.mask = nullptr;
    t.scratch = v.rest;
    if (v.move_in)
      transpose_rows<false>(a.n, a.in_shapes[0][0], v.x_shape.size() / a.in_shapes[0][0], a.x[0],
                            v.x_buf);
    twin_->forward(t);
    if (v.move_out)
      transpose_rows<false>(a.n, a.out_shape.size() / a.out_shape[0], a.out_shape[0], v.y_cl, a.y);
  }
  void backward(const LayerArgs& a) const override {
    Views v = views(a);
    const int64_t c_in = a.in_shapes[0][0];
    // The twin's backward may read its input and output (a fused activation's y, a max pool's
    // argmax): both are moved to channels_last again from the wrapper's own x and y.
    if (v.move_in) transpose_rows<false>(a.n, c_in, v.x_shape.size() / c_in, a.x[0], v.x_buf);
    const float* dy = a.dy;
    if (v.move_out) {
      const int64_t c_out = a.out_shape[0], s_out = a.out_shape.size() / c_out;
      transpose_rows<false>(a.n, c_out, s_out, a.y, v.y_cl);
      transpose_rows<false>(a.n, c_out, s_out, a.dy, v.dy_buf);
      dy = v.dy_buf;
    }
    float* dx = a.dx[0];
    if (dx && v.move_in) {
      dx = v.dx_buf;
      std::memset(dx, 0, rows_floats(a.n, v.x_shape) * sizeof(float));
    }
    LayerArgs t = a;
    t.in_shapes = &v.x_shape;
    t.out_shape = v.y_shape;
    t.x = &v.x_cl;
    t.y = v.y_cl;
    t.dy = dy;
    t.dy_own = nullptr;  // the twin's scratch was planned whole
    t.dx = &dx;
    t.mask = nullptr;
    t.scratch = v.rest;
    twin_->backward(t);
    if (a.dx[0] && v.move_in) transpose_rows<true>(a.n, v.x_shape.size() / c_in, c_in, dx, a.dx[0]);
  }
  Json keras_config() const override {
    Json j = twin_->keras_config();
    for (auto it = restore_.begin(); it != restore_.end(); ++it) j[it.key()] = it.value();
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return twin_->forward_flops({channels_to_last(in[0])});
  }
  bool mixes_samples() const override { return twin_->mixes_samples(); }
  MaskUse mask_use() const override {
    // A mask is over the first per-sample axis, which here holds the channels: only passed on.
    return twin_->mask_use() == MaskUse::kPropagate ? MaskUse::kPropagate : MaskUse::kDrop;
  }
  std::string training_refusal() const override { return twin_->training_refusal(); }

 private:
  // The channels_last views of one call, carved from the scratch: x, y, dy, dx, then the twin's.
  struct Views {
    Shape x_shape, y_shape;
    bool move_in = false, move_out = false;
    const float* x_cl = nullptr;
    float* x_buf = nullptr;
    float* y_cl = nullptr;
    float* dy_buf = nullptr;
    float* dx_buf = nullptr;
    float* rest = nullptr;
  };
  Views views(const LayerArgs& a) const {
    Views v;
    v.x_shape = channels_to_last(a.in_shapes[0]);
    v.y_shape = channels_to_last(a.out_shape);
    v.move_in = a.in_shapes[0].rank() >= 2;
    v.move_out = a.out_shape.rank() >= 2;
    float* s = a.scratch;
    const size_t xs = padded(rows_floats(a.n, v.x_shape)), ys = padded(rows_floats(a.n, v.y_shape));
    v.x_buf = s;
    v.y_cl = v.move_out ? s + xs : a.y;
    v.dy_buf = s + xs + ys;
    v.dx_buf = s + xs + 2 * ys;
    v.rest = s + 2 * xs + 2 * ys;
    v.x_cl = v.move_in ? v.x_buf : a.x[0];
    return v;
  }

  std::unique_ptr<Layer> twin_;
  Json restore_;
};

// BatchNormalization(axis=1): the channel axis first (Keras 1 and Theano-era files).
bool is_axis_one(const Json* ax) {
  if (!ax) return false;
  const Json& v = ax->is_array() && ax->size() == 1 ? (*ax)[0] : *ax;
  return v.is_number_integer() && v.get<int64_t>() == 1;
}

}  // namespace

bool channels_first_twin_config(std::string_view cls, const Json& config, Json* twin,
                                Json* restore) {
  if (!config.is_object()) return false;
  if (cls == "BatchNormalization") {
    const auto it = config.find("axis");
    if (it == config.end() || !is_axis_one(&*it)) return false;
    *twin = config;
    (*twin)["axis"] = -1;
    *restore = Json{{"axis", *it}};
    return true;
  }
  const auto it = config.find("data_format");
  if (it == config.end() || *it != Json("channels_first")) return false;
  const bool reads = listed(cls, kReadsFormat);
  if (!reads && !listed(cls, kIgnoresFormat)) return false;
  *twin = config;
  if (reads)
    (*twin)["data_format"] = "channels_last";
  else
    twin->erase("data_format");
  *restore = Json{{"data_format", "channels_first"}};
  return true;
}

std::unique_ptr<Layer> wrap_channels_first(std::unique_ptr<Layer> twin, Json restore) {
  return std::make_unique<ChannelsFirst>(std::move(twin), std::move(restore));
}

const Layer* channels_last_twin(const Layer& l) {
  const auto* w = dynamic_cast<const ChannelsFirst*>(&l);
  return w ? &w->twin() : nullptr;
}

}  // namespace nnfleet
