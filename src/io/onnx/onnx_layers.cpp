// ONNX exporters of the feed-forward layer kinds: dense, convolutions, pools, normalization,
// reshaping, merges and activations (the recurrent ones are in onnx_recurrent.cpp). Each reads the
// layer's Keras config (Layer::keras_config), its planned shapes and its weights, and adds standard
// ONNX operators (opset 13) to the graph; convolutions and pools run channels-first between two
// Transposes, everything else stays channels-last as Keras computes it.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "io/onnx/onnx_builder.h"
#include "kernels/resize.h"

namespace nnfleet::onnx_export {

// Bicubic and area resizing as two MatMuls (onnx_image.cpp).
std::string resize_by_matrices(Builder& b, const LayerNode& n, const std::string& x,
                               const ResizeGeom& g, ResizeMethod m);

namespace {

const std::string& base(const LayerNode& n) { return n.layer.name(); }

std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> d;
  for (int64_t v : s) d.push_back(v);
  return d;
}

// Index of parameter `name` in the layer's param_specs, or -1.
int param_index(const LayerNode& n, const std::string& name) {
  for (size_t i = 0; i < n.plan.params.size(); ++i)
    if (n.plan.params[i].name == name) return static_cast<int>(i);
  return -1;
}

// Parameter `name` as an initializer, its data permuted: out[idx] = in[perm-mapped index] where
// `perm` says which input axis each output axis is (as Transpose does).
std::string permuted_weight(Builder& b, const LayerNode& n, const std::string& name,
                            const std::vector<int64_t>& perm) {
  const int i = param_index(n, name);
  if (i < 0) refuse(n, "it has no weight '" + name + "'");
  const Shape& s = n.plan.params[static_cast<size_t>(i)].shape;
  const float* src = n.params[static_cast<size_t>(i)];
  const int r = s.rank();
  std::vector<int64_t> in_dims = dims_of(s), out_dims(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a)
    out_dims[static_cast<size_t>(a)] = in_dims[static_cast<size_t>(perm[static_cast<size_t>(a)])];
  std::vector<int64_t> in_strides(static_cast<size_t>(r), 1);
  for (int a = r - 2; a >= 0; --a)
    in_strides[static_cast<size_t>(a)] =
        in_strides[static_cast<size_t>(a + 1)] * in_dims[static_cast<size_t>(a + 1)];
  const int64_t count = s.size();
  std::vector<float> out(static_cast<size_t>(count));
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (int64_t o = 0; o < count; ++o) {
    int64_t off = 0;
    for (int a = 0; a < r; ++a)
      off += idx[static_cast<size_t>(a)] *
             in_strides[static_cast<size_t>(perm[static_cast<size_t>(a)])];
    out[static_cast<size_t>(o)] = src[off];
    for (int a = r - 1; a >= 0; --a) {
      if (++idx[static_cast<size_t>(a)] < out_dims[static_cast<size_t>(a)]) break;
      idx[static_cast<size_t>(a)] = 0;
    }
  }
  return b.weight(base(n) + "/" + name, out_dims, out);
}

std::string plain_weight(Builder& b, const LayerNode& n, const std::string& name) {
  const int i = param_index(n, name);
  if (i < 0) refuse(n, "it has no weight '" + name + "'");
  return b.weight(base(n) + "/" + name, dims_of(n.plan.params[static_cast<size_t>(i)].shape),
                  n.params[static_cast<size_t>(i)]);
}

Shape drop_first(const Shape& s) {
  Shape r;
  for (int i = 1; i < s.rank(); ++i) r.push_back(s[i]);
  return r;
}

bool has_bias(const LayerNode& n) { return param_index(n, "bias") >= 0; }

// The padding of a convolution or pool over `rank` spatial axes of the input, ONNX's
// [begin..., end...].
std::vector<int64_t> conv_pads(const LayerNode& n, const Shape& in, const std::vector<int64_t>& k,
                               const std::vector<int64_t>& s, const std::vector<int64_t>& d) {
  const std::string padding = n.config.value("padding", std::string("valid"));
  const size_t rank = k.size();
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (size_t a = 0; a < rank; ++a) {
    if (padding == "same") {
      std::tie(begin[a], end[a]) = same_pads(in[static_cast<int>(a)], k[a], s[a], d[a]);
    } else if (padding == "causal") {
      begin[a] = d[a] * (k[a] - 1);
    } else if (padding != "valid") {
      refuse(n, "padding '" + padding + "' has no ONNX form; expected valid, same or causal");
    }
  }
  begin.insert(begin.end(), end.begin(), end.end());
  return begin;
}

std::vector<int64_t> or_ones(std::vector<int64_t> v, size_t rank) {
  if (v.empty()) v.assign(rank, 1);
  if (v.size() == 1 && rank > 1) v.assign(rank, v[0]);
  return v;
}

// Conv over channels-last x with an ONNX kernel `w` [O, I/g, k...] and optional bias.
std::string conv(Builder& b, const LayerNode& n, const std::string& w, const std::string& bias,
                 int64_t groups) {
  const Shape& in = n.plan.in_shapes[0];
  const int rank = in.rank() - 1;
  const auto k = or_ones(ints_of(n.config, "kernel_size"), static_cast<size_t>(rank));
  const auto s = or_ones(ints_of(n.config, "strides"), static_cast<size_t>(rank));
  const auto d = or_ones(ints_of(n.config, "dilation_rate"), static_cast<size_t>(rank));
  const std::string x = b.transpose(n.inputs[0], to_channels_first(rank), base(n));
  std::vector<std::string> ins = {x, w};
  if (!bias.empty()) ins.push_back(bias);
  const std::string y = b.node("Conv", ins, base(n),
                               {attr("kernel_shape", k), attr("strides", s), attr("dilations", d),
                                attr("pads", conv_pads(n, in, k, s, d)), attr("group", groups)});
  return b.activation(b.transpose(y, to_channels_last(rank), base(n)), activation_of(n), base(n));
}

std::string export_conv(Builder& b, const LayerNode& n) {
  const int rank = n.plan.in_shapes[0].rank() - 1;
  // Keras kernel [k..., I/g, O] -> ONNX [O, I/g, k...].
  std::vector<int64_t> perm = {rank + 1, rank};
  for (int i = 0; i < rank; ++i) perm.push_back(i);
  const std::string w = permuted_weight(b, n, "kernel", perm);
  const std::string bias = has_bias(n) ? plain_weight(b, n, "bias") : "";
  return conv(b, n, w, bias, n.config.value("groups", 1));
}

std::string export_depthwise(Builder& b, const LayerNode& n, const char* kernel, bool with_bias) {
  // Keras depthwise kernel [kh, kw, C, M] -> ONNX [C*M, 1, kh, kw] (output channel c*M + m).
  const int i = param_index(n, kernel);
  const Shape& s = n.plan.params[static_cast<size_t>(i)].shape;
  std::string w = permuted_weight(b, n, kernel, {2, 3, 0, 1});  // [C, M, kh, kw]
  w = b.node("Reshape", {w, b.ints(base(n) + "/dw_shape", {s[2] * s[3], 1, s[0], s[1]})}, base(n));
  const std::string bias = with_bias && has_bias(n) ? plain_weight(b, n, "bias") : "";
  return conv(b, n, w, bias, s[2]);
}

std::string pool(Builder& b, const LayerNode& n, const char* op) {
  const Shape& in = n.plan.in_shapes[0];
  const int rank = in.rank() - 1;
  const auto k = or_ones(ints_of(n.config, "pool_size"), static_cast<size_t>(rank));
  auto s = ints_of(n.config, "strides");
  s = s.empty() ? k : or_ones(s, static_cast<size_t>(rank));
  const std::vector<int64_t> d(static_cast<size_t>(rank), 1);
  const std::string x = b.transpose(n.inputs[0], to_channels_first(rank), base(n));
  std::vector<Attr> attrs = {attr("kernel_shape", k), attr("strides", s),
                             attr("pads", conv_pads(n, in, k, s, d))};
  const std::string y = b.node(op, {x}, base(n), attrs);
  return b.transpose(y, to_channels_last(rank), base(n));
}

std::string global_pool(Builder& b, const LayerNode& n, const char* op) {
  const int rank = n.plan.in_shapes[0].rank() - 1;
  std::vector<int64_t> axes;
  for (int i = 1; i <= rank; ++i) axes.push_back(i);
  return b.node(op, {n.inputs[0]}, base(n),
                {attr("axes", axes), attr("keepdims", n.config.value("keepdims", false) ? 1 : 0)});
}

std::string identity(Builder&, const LayerNode& n) { return n.inputs[0]; }

std::string reshape_to_output(Builder& b, const LayerNode& n) {
  return b.reshape(n.inputs[0], n.plan.out_shape, base(n));
}

std::string elementwise(Builder& b, const LayerNode& n, const char* op) {
  std::string y = n.inputs[0];
  for (size_t i = 1; i < n.inputs.size(); ++i) y = b.node(op, {y, n.inputs[i]}, base(n));
  return y;
}

// A Pad of channels-last x by pads[a] = {begin, end} per spatial axis (axes 1..).
std::string pad(Builder& b, const LayerNode& n, const std::vector<std::pair<int64_t, int64_t>>& p) {
  const int r = n.plan.in_shapes[0].rank() + 1;
  std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
  for (size_t a = 0; a < p.size(); ++a) {
    pads[a + 1] = p[a].first;
    pads[static_cast<size_t>(r) + a + 1] = p[a].second;
  }
  return b.node("Pad", {n.inputs[0], b.ints(base(n) + "/pads", pads)}, base(n));
}

std::vector<std::pair<int64_t, int64_t>> pairs_of(const LayerNode& n, const char* key,
                                                  size_t rank) {
  const Json v = n.config.contains(key) ? n.config[key] : Json(1);
  std::vector<std::pair<int64_t, int64_t>> p;
  if (v.is_number()) {
    const int64_t x = v.get<int64_t>();
    p.assign(rank, {x, x});
  } else if (v.is_array() && !v.empty() && v[0].is_array()) {
    for (const Json& e : v) p.push_back({e[0].get<int64_t>(), e[1].get<int64_t>()});
  } else if (v.is_array() && rank == 1 && v.size() == 2) {
    p.push_back({v[0].get<int64_t>(), v[1].get<int64_t>()});
  } else if (v.is_array()) {
    for (const Json& e : v) p.push_back({e.get<int64_t>(), e.get<int64_t>()});
  }
  return p;
}

// Slice of channels-last x: along spatial axis a, [begin[a], in - end[a]).
std::string crop(Builder& b, const LayerNode& n,
                 const std::vector<std::pair<int64_t, int64_t>>& c) {
  const Shape& in = n.plan.in_shapes[0];
  std::vector<int64_t> starts, ends, axes;
  for (size_t a = 0; a < c.size(); ++a) {
    starts.push_back(c[a].first);
    ends.push_back(in[static_cast<int>(a)] - c[a].second);
    axes.push_back(static_cast<int64_t>(a) + 1);
  }
  return b.node("Slice",
                {n.inputs[0], b.ints(base(n) + "/starts", starts), b.ints(base(n) + "/ends", ends),
                 b.ints(base(n) + "/axes", axes)},
                base(n));
}

// Repeats every step of channels-last x `size[a]` times along spatial axis a (nearest
// upsampling): [N, d0, 1, d1, 1, ..., C] tiled, then merged.
std::string repeat_steps(Builder& b, const LayerNode& n, const std::vector<int64_t>& size) {
  const Shape& in = n.plan.in_shapes[0];
  std::vector<int64_t> split = {-1}, tiles = {1};
  for (size_t a = 0; a < size.size(); ++a) {
    split.push_back(in[static_cast<int>(a)]);
    split.push_back(1);
    tiles.push_back(1);
    tiles.push_back(size[a]);
  }
  split.push_back(in[-1]);
  tiles.push_back(1);
  const std::string r =
      b.node("Reshape", {n.inputs[0], b.ints(base(n) + "/split", split)}, base(n));
  const std::string t = b.node("Tile", {r, b.ints(base(n) + "/tiles", tiles)}, base(n));
  return b.reshape(t, n.plan.out_shape, base(n));
}

// Keras axes (batch axis 0) over a normalization: the sorted positive axes.
std::vector<int64_t> norm_axes(const LayerNode& n) {
  const int r = n.plan.in_shapes[0].rank() + 1;
  std::vector<int64_t> axes = ints_of(n.config, "axis");
  if (axes.empty()) axes = {-1};
  for (auto& a : axes)
    if (a < 0) a += r;
  std::sort(axes.begin(), axes.end());
  return axes;
}

// Parameter `name` (its shape over `axes`) reshaped to broadcast against [N, sample...].
std::string broadcast_param(Builder& b, const LayerNode& n, const std::string& name,
                            const std::vector<int64_t>& axes) {
  const Shape& in = n.plan.in_shapes[0];
  std::vector<int64_t> shape(static_cast<size_t>(in.rank()), 1);
  for (int64_t a : axes) shape[static_cast<size_t>(a - 1)] = in[static_cast<int>(a - 1)];
  const int i = param_index(n, name);
  return b.weight(base(n) + "/" + name, shape, n.params[static_cast<size_t>(i)]);
}

}  // namespace

std::string export_dense(Builder& b, const LayerNode& n) {
  std::string y = b.node("MatMul", {n.inputs[0], plain_weight(b, n, "kernel")}, base(n));
  if (has_bias(n)) y = b.node("Add", {y, plain_weight(b, n, "bias")}, base(n));
  return b.activation(y, activation_of(n), base(n));
}

std::string export_batch_normalization(Builder& b, const LayerNode& n) {
  // y = x * scale + shift over the last axis, from the moving statistics (inference).
  const int im = param_index(n, "moving_mean"), iv = param_index(n, "moving_variance");
  const int ig = param_index(n, "gamma"), ib = param_index(n, "beta");
  const int64_t c = n.plan.params[static_cast<size_t>(im)].shape.size();
  const double eps = n.config.value("epsilon", 1e-3);
  std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    const auto u = static_cast<size_t>(i);
    const double g = ig >= 0 ? n.params[static_cast<size_t>(ig)][u] : 1.0;
    const double be = ib >= 0 ? n.params[static_cast<size_t>(ib)][u] : 0.0;
    const double inv = 1.0 / std::sqrt(static_cast<double>(n.params[static_cast<size_t>(iv)][u]) +
                                       static_cast<double>(static_cast<float>(eps)));
    scale[u] = static_cast<float>(g * inv);
    shift[u] = static_cast<float>(be - n.params[static_cast<size_t>(im)][u] * g * inv);
  }
  const std::string y =
      b.node("Mul", {n.inputs[0], b.weight(base(n) + "/scale", {c}, scale)}, base(n));
  return b.node("Add", {y, b.weight(base(n) + "/shift", {c}, shift)}, base(n));
}

std::string export_conv2d(Builder& b, const LayerNode& n) { return export_conv(b, n); }
std::string export_conv1d(Builder& b, const LayerNode& n) { return export_conv(b, n); }
std::string export_depthwise_conv2d(Builder& b, const LayerNode& n) {
  return export_depthwise(b, n, "depthwise_kernel", true);
}
std::string export_separable_conv2d(Builder& b, const LayerNode& n) {
  // Depthwise (no bias), then a 1x1 convolution with the pointwise kernel and the bias.
  LayerNode dw = n;
  dw.config["activation"] = "linear";
  const std::string mid = export_depthwise(b, dw, "depthwise_kernel", false);
  LayerNode pw = n;
  pw.inputs = {mid};
  pw.config["kernel_size"] = {1, 1};
  pw.config["strides"] = {1, 1};
  pw.config["dilation_rate"] = {1, 1};
  pw.config["padding"] = "valid";
  const std::string w = permuted_weight(b, n, "pointwise_kernel", {3, 2, 0, 1});
  return conv(b, pw, w, has_bias(n) ? plain_weight(b, n, "bias") : "", 1);
}
std::string export_conv2d_transpose(Builder& b, const LayerNode& n) {
  // Keras kernel [kh, kw, O, I] -> ONNX ConvTranspose [I, O, kh, kw]. Keras's output size is
  // fixed by the plan; the pads (or output_padding when the output is larger) reproduce it.
  const Shape& in = n.plan.in_shapes[0];
  const Shape& out = n.plan.out_shape;
  const auto k = or_ones(ints_of(n.config, "kernel_size"), 2);
  const auto s = or_ones(ints_of(n.config, "strides"), 2);
  const auto d = or_ones(ints_of(n.config, "dilation_rate"), 2);
  std::vector<int64_t> begin(2), end(2), out_pad(2, 0);
  const std::string padding = n.config.value("padding", std::string("valid"));
  for (int a = 0; a < 2; ++a) {
    const auto u = static_cast<size_t>(a);
    const int64_t full = s[u] * (in[a] - 1) + (k[u] - 1) * d[u] + 1;
    int64_t total = full - out[a];
    if (total < 0) {
      out_pad[u] = -total;
      total = 0;
    }
    // TensorFlow's transposed convolution crops as its forward convolution pads: the extra
    // row at the end for "same"; "valid" with output_padding crops nothing at the start.
    begin[u] = padding == "same" ? total / 2 : 0;
    end[u] = total - begin[u];
  }
  std::vector<int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  const std::string x = b.transpose(n.inputs[0], to_channels_first(2), base(n));
  std::vector<std::string> ins = {x, permuted_weight(b, n, "kernel", {3, 2, 0, 1})};
  if (has_bias(n)) ins.push_back(plain_weight(b, n, "bias"));
  const std::string y = b.node("ConvTranspose", ins, base(n),
                               {attr("kernel_shape", k), attr("strides", s), attr("dilations", d),
                                attr("pads", pads), attr("output_padding", out_pad)});
  return b.activation(b.transpose(y, to_channels_last(2), base(n)), activation_of(n), base(n));
}

std::string export_max_pooling2d(Builder& b, const LayerNode& n) { return pool(b, n, "MaxPool"); }
std::string export_average_pooling2d(Builder& b, const LayerNode& n) {
  return pool(b, n, "AveragePool");
}
std::string export_max_pooling1d(Builder& b, const LayerNode& n) { return pool(b, n, "MaxPool"); }
std::string export_average_pooling1d(Builder& b, const LayerNode& n) {
  return pool(b, n, "AveragePool");
}
std::string export_global_average_pooling2d(Builder& b, const LayerNode& n) {
  return global_pool(b, n, "ReduceMean");
}
std::string export_global_max_pooling2d(Builder& b, const LayerNode& n) {
  return global_pool(b, n, "ReduceMax");
}
std::string export_global_average_pooling1d(Builder& b, const LayerNode& n) {
  if (n.mask.empty()) return global_pool(b, n, "ReduceMean");
  // Keras's masked mean over the kept steps: sum_t m x / sum_t m (0/0 when every step is masked).
  const std::string m = b.node("Unsqueeze", {n.mask, b.ints(base(n) + "/axes2", {2})}, base(n));
  const std::vector<Attr> keep = {attr("keepdims", n.config.value("keepdims", false) ? 1 : 0)};
  const std::string steps = b.ints(base(n) + "/axes1", {1});
  const std::string sum =
      b.node("ReduceSum", {b.node("Mul", {n.inputs[0], m}, base(n)), steps}, base(n), keep);
  return b.node("Div", {sum, b.node("ReduceSum", {m, steps}, base(n), keep)}, base(n));
}
std::string export_global_max_pooling1d(Builder& b, const LayerNode& n) {
  return global_pool(b, n, "ReduceMax");
}

std::string export_flatten(Builder& b, const LayerNode& n) { return reshape_to_output(b, n); }
std::string export_reshape(Builder& b, const LayerNode& n) { return reshape_to_output(b, n); }

std::string export_dropout(Builder& b, const LayerNode& n) { return identity(b, n); }
std::string export_spatial_dropout1d(Builder& b, const LayerNode& n) { return identity(b, n); }
std::string export_spatial_dropout2d(Builder& b, const LayerNode& n) { return identity(b, n); }
std::string export_gaussian_noise(Builder& b, const LayerNode& n) { return identity(b, n); }
std::string export_gaussian_dropout(Builder& b, const LayerNode& n) { return identity(b, n); }
std::string export_alpha_dropout(Builder& b, const LayerNode& n) { return identity(b, n); }

std::string export_activation(Builder& b, const LayerNode& n) {
  return b.activation(n.inputs[0], activation_of(n), base(n));
}
std::string export_relu(Builder& b, const LayerNode& n) {
  Activation a;
  a.kind = Act::kRelu;
  if (n.config.contains("max_value") && n.config["max_value"].is_number())
    a.max_value = n.config["max_value"].get<float>();
  a.alpha = n.config.value("negative_slope", 0.0f);
  a.threshold = n.config.value("threshold", 0.0f);
  return b.activation(n.inputs[0], a, base(n));
}
std::string export_leaky_relu(Builder& b, const LayerNode& n) {
  Activation a;
  a.kind = Act::kLeakyRelu;
  a.alpha = n.config.value("negative_slope", n.config.value("alpha", 0.3f));
  return b.activation(n.inputs[0], a, base(n));
}
std::string export_elu(Builder& b, const LayerNode& n) {
  Activation a;
  a.kind = Act::kElu;
  a.alpha = n.config.value("alpha", 1.0f);
  return b.activation(n.inputs[0], a, base(n));
}
std::string export_softmax(Builder& b, const LayerNode& n) {
  std::vector<int64_t> axes = ints_of(n.config, "axis");
  if (axes.empty() ||
      (axes.size() == 1 && (axes[0] == -1 || axes[0] == n.plan.in_shapes[0].rank()))) {
    Activation a;
    a.kind = Act::kSoftmax;
    return b.activation(n.inputs[0], a, base(n));
  }
  // Over several axes (or one other than the last): exp(x - max) / sum, both over the axes.
  const std::string m =
      b.node("ReduceMax", {n.inputs[0]}, base(n), {attr("axes", axes), attr("keepdims", 1)});
  const std::string e = b.node("Exp", {b.node("Sub", {n.inputs[0], m}, base(n))}, base(n));
  const std::string sum =
      b.node("ReduceSum", {e, b.ints(base(n) + "/axes", axes)}, base(n), {attr("keepdims", 1)});
  return b.node("Div", {e, sum}, base(n));
}
std::string export_rescaling(Builder& b, const LayerNode& n) {
  const std::string y = b.node(
      "Mul", {n.inputs[0], b.scalar(base(n) + "/scale", n.config.value("scale", 1.0f))}, base(n));
  return b.node("Add", {y, b.scalar(base(n) + "/offset", n.config.value("offset", 0.0f))}, base(n));
}
std::string export_prelu(Builder& b, const LayerNode& n) {
  const int i = param_index(n, "alpha");
  return b.node("PRelu",
                {n.inputs[0], b.weight(base(n) + "/alpha", dims_of(n.plan.params[0].shape),
                                       n.params[static_cast<size_t>(i)])},
                base(n));
}

std::string export_zero_padding2d(Builder& b, const LayerNode& n) {
  return pad(b, n, pairs_of(n, "padding", 2));
}
std::string export_zero_padding1d(Builder& b, const LayerNode& n) {
  return pad(b, n, pairs_of(n, "padding", 1));
}
std::string export_cropping2d(Builder& b, const LayerNode& n) {
  return crop(b, n, pairs_of(n, "cropping", 2));
}
std::string export_cropping1d(Builder& b, const LayerNode& n) {
  return crop(b, n, pairs_of(n, "cropping", 1));
}
std::string export_up_sampling1d(Builder& b, const LayerNode& n) {
  return repeat_steps(b, n, {n.config.value("size", 2)});
}
std::string export_up_sampling2d(Builder& b, const LayerNode& n) {
  const auto size = or_ones(ints_of(n.config, "size"), 2);
  const std::string interp = n.config.value("interpolation", std::string("nearest"));
  if (interp == "nearest") return repeat_steps(b, n, size);
  if (interp == "bicubic" || interp == "area") {
    const Shape& in = n.plan.in_shapes[0];
    ResizeGeom g;
    g.h = g.ch = static_cast<int>(in[0]);
    g.w = g.cw = static_cast<int>(in[1]);
    g.c = static_cast<int>(in[2]);
    g.oh = static_cast<int>(in[0] * size[0]);
    g.ow = static_cast<int>(in[1] * size[1]);
    return resize_by_matrices(b, n, n.inputs[0], g,
                              interp == "area" ? ResizeMethod::kArea : ResizeMethod::kBicubic);
  }
  // Bilinear with half-pixel centres, as TensorFlow's resize (Keras's UpSampling2D).
  const std::string x = b.transpose(n.inputs[0], to_channels_first(2), base(n));
  const std::vector<float> scales = {1.0f, 1.0f, static_cast<float>(size[0]),
                                     static_cast<float>(size[1])};
  const std::string y =
      b.node("Resize", {x, "", b.weight(base(n) + "/scales", {4}, scales)}, base(n),
             {attr_s("mode", "linear"), attr_s("coordinate_transformation_mode", "half_pixel")});
  return b.transpose(y, to_channels_last(2), base(n));
}
std::string export_repeat_vector(Builder& b, const LayerNode& n) {
  const int64_t times = n.config.value("n", 1);
  const std::string u = b.node("Unsqueeze", {n.inputs[0], b.ints(base(n) + "/axes", {1})}, base(n));
  return b.node("Tile", {u, b.ints(base(n) + "/tiles", {1, times, 1})}, base(n));
}
std::string export_permute(Builder& b, const LayerNode& n) {
  std::vector<int64_t> perm = {0};
  for (int64_t d : ints_of(n.config, "dims")) perm.push_back(d);
  return b.transpose(n.inputs[0], perm, base(n));
}

std::string export_add(Builder& b, const LayerNode& n) { return elementwise(b, n, "Add"); }
std::string export_subtract(Builder& b, const LayerNode& n) { return elementwise(b, n, "Sub"); }
std::string export_multiply(Builder& b, const LayerNode& n) { return elementwise(b, n, "Mul"); }
std::string export_maximum(Builder& b, const LayerNode& n) { return elementwise(b, n, "Max"); }
std::string export_minimum(Builder& b, const LayerNode& n) { return elementwise(b, n, "Min"); }
std::string export_average(Builder& b, const LayerNode& n) {
  return b.node("Mean", n.inputs, base(n));
}
std::string export_concatenate(Builder& b, const LayerNode& n) {
  return b.node("Concat", n.inputs, base(n), {attr("axis", n.config.value("axis", -1))});
}
std::string export_dot(Builder& b, const LayerNode& n) {
  // Keras's batch_dot as an Einsum: the batch letter, then one letter per axis of each input, the
  // two contracted axes sharing one; the output keeps x's other axes, then y's (reshaped to the
  // planned shape, [N, 1] for two vectors). With normalize, each input is first divided by its L2
  // norm along its contracted axis (the squared norm clamped at 1e-24, as UnitNormalization).
  const int rx = n.plan.in_shapes[0].rank(), ry = n.plan.in_shapes[1].rank();
  std::vector<int64_t> axes = ints_of(n.config, "axes");
  if (axes.size() == 1) axes.push_back(axes[0]);
  if (axes.size() != 2 || rx + ry > 20)
    refuse(n, "expected two axes and inputs of rank 10 or less");
  int64_t ax = axes[0] < 0 ? axes[0] + rx + 1 : axes[0];
  int64_t ay = axes[1] < 0 ? axes[1] + ry + 1 : axes[1];
  std::string x = n.inputs[0], y = n.inputs[1];
  if (n.config.value("normalize", false)) {
    auto unit = [&](const std::string& v, int64_t axis) {
      const std::string ss =
          b.node("ReduceSumSquare", {v}, base(n),
                 {attr("axes", std::vector<int64_t>{axis}), attr("keepdims", 1)});
      const std::string clamp = b.node("Max", {ss, b.scalar(base(n) + "/eps", 1e-24f)}, base(n));
      return b.node("Div", {v, b.node("Sqrt", {clamp}, base(n))}, base(n));
    };
    x = unit(x, ax);
    y = unit(y, ay);
  }
  std::string ex = "a", ey = "a", out = "a";
  char next = 'c';
  for (int i = 1; i <= rx; ++i) {
    const char l = i == ax ? 'b' : next++;
    ex += l;
    if (i != ax) out += l;
  }
  for (int i = 1; i <= ry; ++i) {
    const char l = i == ay ? 'b' : next++;
    ey += l;
    if (i != ay) out += l;
  }
  const std::string z =
      b.node("Einsum", {x, y}, base(n), {attr_s("equation", ex + "," + ey + "->" + out)});
  return b.reshape(z, n.plan.out_shape, base(n));
}

std::string export_layer_normalization(Builder& b, const LayerNode& n) {
  const std::vector<int64_t> axes = norm_axes(n);
  const float eps = n.config.value("epsilon", 1e-3f);
  const std::string mean =
      b.node("ReduceMean", {n.inputs[0]}, base(n), {attr("axes", axes), attr("keepdims", 1)});
  const std::string c = b.node("Sub", {n.inputs[0], mean}, base(n));
  const std::string var = b.node("ReduceMean", {b.node("Mul", {c, c}, base(n))}, base(n),
                                 {attr("axes", axes), attr("keepdims", 1)});
  const std::string sd =
      b.node("Sqrt", {b.node("Add", {var, b.scalar(base(n) + "/eps", eps)}, base(n))}, base(n));
  std::string y = b.node("Div", {c, sd}, base(n));
  if (param_index(n, "gamma") >= 0)
    y = b.node("Mul", {y, broadcast_param(b, n, "gamma", axes)}, base(n));
  if (param_index(n, "beta") >= 0)
    y = b.node("Add", {y, broadcast_param(b, n, "beta", axes)}, base(n));
  return y;
}
std::string export_unit_normalization(Builder& b, const LayerNode& n) {
  const std::string ss = b.node("ReduceSumSquare", {n.inputs[0]}, base(n),
                                {attr("axes", norm_axes(n)), attr("keepdims", 1)});
  const std::string clamp = b.node("Max", {ss, b.scalar(base(n) + "/eps", 1e-24f)}, base(n));
  return b.node("Div", {n.inputs[0], b.node("Sqrt", {clamp}, base(n))}, base(n));
}

std::string export_embedding(Builder& b, const LayerNode& n) {
  // Keras's ids come in as floats (the model input); Gather wants integers.
  const std::string ids =
      b.node("Cast", {n.inputs[0]}, base(n), {attr("to", onnx::TensorProto::INT64)});
  if (n.config.value("mask_zero", false) && n.mask_out) {
    const std::string zero = b.node("Equal", {ids, b.ints(base(n) + "/zero", {0})}, base(n));
    *n.mask_out = b.node("Cast", {b.node("Not", {zero}, base(n))}, base(n),
                         {attr("to", onnx::TensorProto::FLOAT)});
  }
  return b.node("Gather", {plain_weight(b, n, "embeddings"), ids}, base(n), {attr("axis", 0)});
}
std::string export_masking(Builder& b, const LayerNode& n) {
  // mask [N, T]: a step is kept when any feature differs from mask_value; kept steps pass,
  // masked ones become 0 (Keras's Masking).
  const float v = n.config.value("mask_value", 0.0f);
  const std::string diff = b.node(
      "Cast",
      {b.node("Not", {b.node("Equal", {n.inputs[0], b.scalar(base(n) + "/value", v)}, base(n))},
              base(n))},
      base(n), {attr("to", onnx::TensorProto::FLOAT)});
  const std::string keep = b.node("ReduceMax", {diff}, base(n),
                                  {attr("axes", std::vector<int64_t>{-1}), attr("keepdims", 1)});
  if (n.mask_out) *n.mask_out = b.node("Squeeze", {keep, b.ints(base(n) + "/axes", {-1})}, base(n));
  return b.node("Mul", {n.inputs[0], keep}, base(n));
}

std::string export_time_distributed(Builder& b, const LayerNode& n) {
  // The inner layer on [N*T, step...], then back to [N, T, out...].
  const Json& inner = n.config["layer"];
  const std::string cls = inner.value("class_name", std::string());
  const KindExporter* e = nullptr;
  for (const auto& k : kind_exporters())
    if (cls == k.class_name) e = &k;
  if (!e) refuse(n, "its inner layer class '" + cls + "' has no exporter");
  const Shape& in = n.plan.in_shapes[0];
  PlannedNode plan = n.plan;
  plan.in_shapes = {drop_first(in)};
  plan.out_shape = drop_first(n.plan.out_shape);
  LayerNode step{n.layer, inner["config"], plan, {}, n.params, "", n.where, nullptr};
  step.inputs = {b.reshape(n.inputs[0], plan.in_shapes[0], base(n))};
  const std::string y = e->fn(b, step);
  return b.reshape(y, n.plan.out_shape, base(n));
}

}  // namespace nnfleet::onnx_export
