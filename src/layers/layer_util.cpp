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
  require_rank(in, 3,
               "convolution and pooling layers take images [batch,height,width,channels]; "
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
                     (o.same ? "same" : "valid") +
                     "'; expected an input at least as large as "
                     "the window");
  return g;
}

}  // namespace nnfleet

namespace nnfleet {

Conv2dOptions parse_conv_options(LayerConfig& c, const char* window_key, bool is_pool) {
  Conv2dOptions o;
  std::vector<int64_t> k =
      is_pool ? c.get_ints(window_key, 2, std::vector<int64_t>{2, 2}) : c.get_ints(window_key, 2);
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
  // ReLU's overwrite is one elementwise pass, so it may write over dy itself.
  if (a.dy_own && act.kind == Act::kRelu) buf = a.dy_own;
  activation_backward_overwrite(act, rows, features, fused_z(act, a), a.y, a.dy, buf);
  return buf;
}

Initializer parse_init_option(LayerConfig& c, const std::string& key, const char* def) {
  const Json* v = c.get_raw(key);
  return parse_initializer(v ? *v : Json(def), key);
}

}  // namespace nnfleet

namespace nnfleet {

Conv1dOptions parse_conv1d_options(LayerConfig& c, const char* window_key, bool is_pool) {
  Conv1dOptions o;
  const std::vector<int64_t> k =
      is_pool ? c.get_ints(window_key, 1, std::vector<int64_t>{2}) : c.get_ints(window_key, 1);
  o.k = static_cast<int>(k[0]);
  // A pool's strides may be null (Keras 2 writes that): the pool size then.
  o.s = static_cast<int>(c.get_ints("strides", 1, is_pool ? k : std::vector<int64_t>{1})[0]);
  const std::string pad =
      c.get_string("padding", "valid",
                   is_pool ? std::vector<std::string>{"valid", "same"}
                           : std::vector<std::string>{"valid", "same", "causal"});
  o.padding = pad == "same"     ? Padding1d::kSame
              : pad == "causal" ? Padding1d::kCausal
                                : Padding1d::kValid;
  if (!is_pool) {
    o.d = static_cast<int>(c.get_ints("dilation_rate", 1, std::vector<int64_t>{1})[0]);
    if (o.d > 1 && o.s > 1)
      c.fail("dilation_rate", "1 when strides > 1 (Keras does not allow both)");
  }
  c.get_string("data_format", "channels_last", {"channels_last"});
  return o;
}

Json conv1d_options_to_keras(const Conv1dOptions& o, const char* window_key, bool is_pool) {
  Json j;
  j[window_key] = {o.k};
  j["strides"] = {o.s};
  j["padding"] = o.padding == Padding1d::kSame     ? "same"
                 : o.padding == Padding1d::kCausal ? "causal"
                                                   : "valid";
  j["data_format"] = "channels_last";
  if (!is_pool) j["dilation_rate"] = {o.d};
  return j;
}

ConvGeometry make_geometry1d(const Conv1dOptions& o, const Shape& in, int64_t out_channels) {
  require_rank(in, 2,
               "1-D convolution and pooling layers take sequences [batch,steps,channels]; "
               "add a Reshape before it");
  const int64_t ek = (int64_t{o.k} - 1) * o.d + 1;
  if (in[0] + ek + o.s > limits::kMaxDimension || in[1] > limits::kMaxDimension ||
      out_channels > limits::kMaxDimension)
    throw ModelError("window " + std::to_string(o.k) + " (strides " + std::to_string(o.s) +
                     ", dilation " + std::to_string(o.d) + ") over input " + keras_shape(in) +
                     " with " + std::to_string(out_channels) +
                     " output channels is too large; expected input, window and stride sizes " +
                     "that add up to at most " + std::to_string(limits::kMaxDimension));
  ConvGeometry g;
  if (!conv1d_geometry(g, static_cast<int>(in[0]), static_cast<int>(in[1]), o.k, o.s, o.d,
                       o.padding, static_cast<int>(out_channels)))
    throw ModelError("window " + std::to_string(o.k) + " (dilation " + std::to_string(o.d) +
                     ") does not fit input " + keras_shape(in) +
                     " with padding 'valid'; expected at least " + std::to_string(ek) +
                     " steps, or padding 'same' or 'causal'");
  return g;
}

KernelBias::KernelBias(LayerConfig& c)
    : act(parse_activation(c.get_raw("activation"), "activation")),
      use_bias(c.get_bool("use_bias", true)),
      kinit(parse_init_option(c, "kernel_initializer", "glorot_uniform")),
      binit(parse_init_option(c, "bias_initializer", "zeros")) {}

std::vector<ParamSpec> KernelBias::params(Shape kernel, int64_t units) const {
  std::vector<ParamSpec> p{{"kernel", std::move(kernel), kinit, true}};
  if (use_bias) p.push_back({"bias", Shape{units}, binit, true});
  return p;
}

void KernelBias::to_keras(Json& j, bool activity) const {
  j["activation"] = activation_to_keras(act);
  j["use_bias"] = use_bias;
  j["kernel_initializer"] = initializer_to_keras(kinit);
  j["bias_initializer"] = initializer_to_keras(binit);
  j["kernel_regularizer"] = nullptr;
  j["bias_regularizer"] = nullptr;
  if (activity) j["activity_regularizer"] = nullptr;
  j["kernel_constraint"] = nullptr;
  j["bias_constraint"] = nullptr;
}

std::array<int, 4> parse_pairs2d(LayerConfig& c, const char* key, int def) {
  std::array<int, 4> out{};
  const Json* p = c.get_raw(key);
  const char* what = "an integer, [h, w] or [[top, bottom], [left, right]]";
  auto nonneg = [&](const Json& v) {
    const std::optional<int64_t> i = config_int(v, 0);
    if (!i) c.fail(key, what);
    return static_cast<int>(*i);
  };
  if (!p) {
    out[0] = out[1] = out[2] = out[3] = def;
  } else if (p->is_number_integer()) {
    out[0] = out[1] = out[2] = out[3] = nonneg(*p);
  } else if (p->is_array() && p->size() == 2 && (*p)[0].is_number_integer()) {
    out[0] = out[1] = nonneg((*p)[0]);
    out[2] = out[3] = nonneg((*p)[1]);
  } else if (p->is_array() && p->size() == 2 && (*p)[0].is_array() && (*p)[1].is_array() &&
             (*p)[0].size() == 2 && (*p)[1].size() == 2) {
    out[0] = nonneg((*p)[0][0]);
    out[1] = nonneg((*p)[0][1]);
    out[2] = nonneg((*p)[1][0]);
    out[3] = nonneg((*p)[1][1]);
  } else {
    c.fail(key, what);
  }
  return out;
}

}  // namespace nnfleet
