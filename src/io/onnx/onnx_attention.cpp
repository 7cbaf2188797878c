// ONNX exporters of the attention kinds, decomposed into standard operators (opset 13):
// MultiHeadAttention as MatMul projections, Reshape/Transpose to [N, heads, T, dim], MatMul
// scores, Add of the masks (causal and attention_mask as -1e9, Keras's own adder), Softmax over
// the value steps, MatMul with the values and the output projection; Attention ("dot" and
// "concat") and AdditiveAttention likewise, the tanh forms through Unsqueeze broadcasting. The
// Keras masks of the inputs (Embedding mask_zero, Masking) are refused by layer name.
#include <cmath>

#include "io/onnx/onnx_builder.h"

namespace nnfleet::onnx_export {
namespace {

constexpr float kMasked = -1e9f;  // Keras's _large_negative_number for float32

const std::string& base(const LayerNode& n) { return n.layer.name(); }

void refuse_masks(const LayerNode& n) {
  if (!n.mask.empty())
    refuse(n,
           "its query carries a Keras mask (Embedding mask_zero or Masking), which the exported "
           "attention does not apply; expected unmasked inputs");
}

// The masks added to scores [.., Tq, Tv]: causal (a constant) and the attention_mask input.
std::string add_masks(Builder& b, const LayerNode& n, std::string s, int64_t tq, int64_t tv,
                      bool causal, const std::string& attention_mask) {
  if (causal) {
    std::vector<float> m(static_cast<size_t>(tq * tv), 0.0f);
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = i + 1; j < tv; ++j) m[static_cast<size_t>(i * tv + j)] = kMasked;
    s = b.node("Add", {s, b.weight(base(n) + "/causal", {tq, tv}, m)}, base(n));
  }
  if (!attention_mask.empty()) {
    // [N, Tq, Tv] -> 1 where masked (0), times -1e9.
    const std::string off =
        b.node("Equal", {attention_mask, b.scalar(base(n) + "/zero", 0.0f)}, base(n));
    std::string add =
        b.node("Mul",
               {b.node("Cast", {off}, base(n), {attr("to", onnx::TensorProto::FLOAT)}),
                b.scalar(base(n) + "/masked", kMasked)},
               base(n));
    if (s.empty()) return add;
    s = b.node("Add", {s, add}, base(n));
  }
  return s;
}

// x [N, T, d] times a kernel [d, H*k] plus bias [H*k], as [N, H, T, k] (or [N, H, k, T] with
// `keys_last`).
std::string heads(Builder& b, const LayerNode& n, const std::string& x, int64_t t, int64_t d,
                  int64_t h, int64_t k, const float* kernel, const float* bias,
                  const std::string& tag, bool keys_last) {
  std::string y =
      b.node("MatMul", {x, b.weight(base(n) + "/" + tag + "_kernel", {d, h * k}, kernel)}, base(n));
  if (bias) y = b.node("Add", {y, b.weight(base(n) + "/" + tag + "_bias", {h * k}, bias)}, base(n));
  y = b.reshape(y, Shape{t, h, k}, base(n));
  return b.transpose(
      y, keys_last ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3}, base(n));
}

}  // namespace

std::string export_multi_head_attention(Builder& b, const LayerNode& n) {
  refuse_masks(n);
  const auto& in = n.plan.in_shapes;
  const int64_t tq = in[0][0], dq = in[0][1], tv = in[1][0], dv = in[1][1];
  const bool mask_input = n.config.value("attention_mask", false);
  const bool has_key = in.size() > 2;
  const int64_t dk = has_key ? in[2][1] : dv;
  const int64_t h = n.config["num_heads"].get<int64_t>(), kd = n.config["key_dim"].get<int64_t>();
  const int64_t vd = n.config["value_dim"].get<int64_t>();
  const int64_t out = n.plan.out_shape[1];
  const bool bias = n.config.value("use_bias", true);
  const int step = bias ? 2 : 1;
  auto bias_of = [&](int k) {
    return bias ? n.params[static_cast<size_t>(k * step + 1)] : nullptr;
  };
  auto kernel_of = [&](int k) { return n.params[static_cast<size_t>(k * step)]; };
  const std::string& key = has_key ? n.inputs[2] : n.inputs[1];
  std::string q = heads(b, n, n.inputs[0], tq, dq, h, kd, kernel_of(0), bias_of(0), "query", false);
  q = b.node("Mul", {q, b.scalar(base(n) + "/scale", 1.0f / std::sqrt(static_cast<float>(kd)))},
             base(n));
  const std::string k = heads(b, n, key, tv, dk, h, kd, kernel_of(1), bias_of(1), "key", true);
  const std::string v =
      heads(b, n, n.inputs[1], tv, dv, h, vd, kernel_of(2), bias_of(2), "value", false);
  std::string s = b.node("MatMul", {q, k}, base(n));  // [N, H, Tq, Tv]
  if (mask_input) {
    // The mask [N, Tq, Tv] broadcast over the heads.
    const std::string m =
        b.node("Unsqueeze", {n.inputs[3], b.ints(base(n) + "/axis1", {1})}, base(n));
    s = b.node("Add", {s, add_masks(b, n, "", tq, tv, false, m)}, base(n));
  }
  s = add_masks(b, n, s, tq, tv, n.config.value("use_causal_mask", false), "");
  const std::string p = b.node("Softmax", {s}, base(n), {attr("axis", -1)});
  if (n.config.value("return_attention_scores", false) && n.extra_out) n.extra_out->push_back(p);
  std::string o = b.transpose(b.node("MatMul", {p, v}, base(n)), {0, 2, 1, 3}, base(n));
  o = b.reshape(o, Shape{tq, h * vd}, base(n));
  o = b.node("MatMul", {o, b.weight(base(n) + "/output_kernel", {h * vd, out}, kernel_of(3))},
             base(n));
  if (bias) o = b.node("Add", {o, b.weight(base(n) + "/output_bias", {out}, bias_of(3))}, base(n));
  return o;
}

namespace {

// Attention and AdditiveAttention: scores, masks, softmax, weighted values.
std::string export_luong_or_bahdanau(Builder& b, const LayerNode& n, bool additive) {
  refuse_masks(n);
  const auto& in = n.plan.in_shapes;
  const int64_t tq = in[0][0], tv = in[1][0], d = in[0][1];
  const bool use_scale = n.config.value("use_scale", additive);
  const std::string& key = in.size() > 2 ? n.inputs[2] : n.inputs[1];
  const bool concat = !additive && n.config.value("score_mode", std::string("dot")) == "concat";
  std::string s;
  if (!additive && !concat) {
    s = b.node("MatMul", {n.inputs[0], b.transpose(key, {0, 2, 1}, base(n))}, base(n));
    if (use_scale) s = b.node("Mul", {s, b.scalar(base(n) + "/scale", n.params[0][0])}, base(n));
  } else {
    // [N, Tq, 1, d] + [N, 1, Tv, d] -> tanh -> weighted sum over d.
    std::string u =
        b.node("Add",
               {b.node("Unsqueeze", {n.inputs[0], b.ints(base(n) + "/axis2", {2})}, base(n)),
                b.node("Unsqueeze", {key, b.ints(base(n) + "/axis1", {1})}, base(n))},
               base(n));
    if (concat && use_scale)
      u = b.node("Mul", {u, b.scalar(base(n) + "/scale", n.params[0][0])}, base(n));
    std::string t = b.node("Tanh", {u}, base(n));
    if (additive && use_scale)
      t = b.node("Mul", {t, b.weight(base(n) + "/scale", {d}, n.params[0])}, base(n));
    s = b.node("ReduceSum", {t, b.ints(base(n) + "/axes", {-1})}, base(n), {attr("keepdims", 0)});
    if (concat)
      s = b.node("Mul",
                 {s, b.scalar(base(n) + "/concat_score_weight", n.params[use_scale ? 1 : 0][0])},
                 base(n));
  }
  s = add_masks(b, n, s, tq, tv, n.config.value("use_causal_mask", false), "");
  const std::string p = b.node("Softmax", {s}, base(n), {attr("axis", -1)});
  if (n.config.value("return_attention_scores", false) && n.extra_out) n.extra_out->push_back(p);
  return b.node("MatMul", {p, n.inputs[1]}, base(n));
}

}  // namespace

std::string export_attention(Builder& b, const LayerNode& n) {
  return export_luong_or_bahdanau(b, n, false);
}
std::string export_additive_attention(Builder& b, const LayerNode& n) {
  return export_luong_or_bahdanau(b, n, true);
}

}  // namespace nnfleet::onnx_export
