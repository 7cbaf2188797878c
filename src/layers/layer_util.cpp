// Shared layer helpers.
#include "layers/layer_util.h"

#include <algorithm>

namespace nnfleet {

void require_rank(const Shape& in, int rank, const char* hint) {
  if (in.rank() == rank) return;  // no string is built on this path: it runs inside steps
  throw ModelError("expects rank " + std::to_string(rank + 1) + " input, got " + keras_shape(in) +
                   (*hint ? "; " + std::string(hint) : std::string()));
}

Json base_keras_config(const Layer& l) {
  return Json{{"name", l.name()}, {"trainable", true}, {"dtype", "float32"}};
}

ConvGeometry make_geometry(const Conv2dOptions& o, const Shape& in, int64_t out_channels) {
  require_rank(in, 3, "convolution and pooling layers take images [batch,height,width,channels]; "
                      "add a Reshape before it");
  // conv_geometry computes in int: input + dilated window + stride must fit, per axis.
  const int64_t ekh = (int64_t{o.kh} - 1) * o.dh + 1, ekw = (int64_t{o.kw} - 1) * o.dw + 1;
  if (in[0] + ekh + o.sh > limits::kMaxDimension || in[1] + ekw + o.sw > limits::kMaxDimension ||
      in[2] > limits::kMaxDimension || out_channels > limits::kMaxDimension)
    throw ModelError("window " + std::to_string(o.kh) + "x" + std::to_string(o.kw) + " (strides " +
                     std::to_string(o.sh) + "x" + std::to_string(o.sw) + ", dilation " +
                     std::to_string(o.dh) + "x" + std::to_string(o.dw) + ") over input " +
                     keras_shape(in) + " with " + std::to_string(out_channels) +
                     " output channels is too large; expected input, window and stride sizes " +
                     "that add up to at most " + std::to_string(limits::kMaxDimension) +
                     " per axis");
  ConvGeometry g;
  g.h = static_cast<int>(in[0]);
  g.w = static_cast<int>(in[1]);
  g.c = static_cast<int>(in[2]);
  g.kh = o.kh;
  g.kw = o.kw;
  g.sh = o.sh;
  g.sw = o.sw;
  g.dh = o.dh;
  g.dw = o.dw;
  g.f = static_cast<int>(out_channels);
  if (!conv_geometry(g, o.same))
    throw ModelError("window " + std::to_string(o.kh) + "x" + std::to_string(o.kw) +
                     " does not fit input " + keras_shape(in) + " with padding '" +
                     (o.same ? "same" : "valid") + "'; expected an input at least as large as "
                     "the window");
  return g;
}

}  // namespace nnfleet

namespace nnfleet {

Conv2dOptions parse_conv_options(LayerConfig& c, const char* window_key, bool is_pool) {
  Conv2dOptions o;
  std::vector<int64_t> k = is_pool ? c.get_ints(window_key, 2, std::vector<int64_t>{2, 2})
                                   : c.get_ints(window_key, 2);
  o.kh = static_cast<int>(k[0]);
  o.kw = static_cast<int>(k[1]);
  std::vector<int64_t> s = c.get_ints("strides", 2, is_pool ? k : std::vector<int64_t>{1, 1});
  o.sh = static_cast<int>(s[0]);
  o.sw = static_cast<int>(s[1]);
  o.same = c.get_string("padding", "valid", {"valid", "same"}) == "same";
  if (!is_pool) {
    std::vector<int64_t> d = c.get_ints("dilation_rate", 2, std::vector<int64_t>{1, 1});
    o.dh = static_cast<int>(d[0]);
    o.dw = static_cast<int>(d[1]);
    if ((o.dh > 1 || o.dw > 1) && (o.sh > 1 || o.sw > 1))
      c.fail("dilation_rate", "1 when strides > 1 (Keras does not allow both)");
  }
  c.get_string("data_format", "channels_last", {"channels_last"});
  return o;
}

Json conv_options_to_keras(const Conv2dOptions& o, const char* window_key, bool is_pool) {
  Json j;
  j[window_key] = {o.kh, o.kw};
  j["strides"] = {o.sh, o.sw};
  j["padding"] = o.same ? "same" : "valid";
  j["data_format"] = "channels_last";
  if (!is_pool) j["dilation_rate"] = {o.dh, o.dw};
  return j;
}

bool fused_keeps_z(const Activation& act) { return !activation_backward_from_y(act); }

void fused_activation_forward(const Activation& act, int64_t rows, int64_t features,
                              const LayerArgs& a) {
  if (act.kind != Act::kLinear) activation_forward(act, rows, features, fused_z(act, a), a.y);
}

const float* pre_activation_grad(const Activation& act, int64_t rows, int64_t features,
                                 const LayerArgs& a, float* buf) {
  if (act.kind == Act::kLinear) return a.dy;
  std::fill(buf, buf + rows * features, 0.0f);  // activation_backward accumulates
  activation_backward(act, rows, features, fused_z(act, a), a.y, a.dy, buf);
  return buf;
}

Initializer parse_init_option(LayerConfig& c, const std::string& key, const char* def) {
  const Json* v = c.get_raw(key);
  return parse_initializer(v ? *v : Json(def), key);
}

}  // namespace nnfleet
