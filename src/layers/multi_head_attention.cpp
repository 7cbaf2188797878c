// MultiHeadAttention, Keras semantics (keras/src/layers/attention/multi_head_attention.py) for a
// per-sample query [Tq, dq], value [Tv, dv] and optional key [Tv, dk] (key defaults to value),
// attention over the one time axis (attention_axes null or [1]):
//   Q = query Wq + bq [Tq, H, kd] scaled by 1/sqrt(kd) (Keras scales Q before the product),
//   K = key Wk + bk [Tv, H, kd], V = value Wv + bv [Tv, H, vd],
//   P_h = softmax over Tv of Q_h K_h^T (masked), O_h = dropout(P_h) V_h, y = O Wo + bo [Tq, d_out].
// Kernels keep Keras's shapes ([d, H, kd], output [H, vd, d_out]); row-major, they are the
// [d, H*kd] and [H*vd, d_out] matrices of plain GEMMs. Masks: the query's mask (LayerArgs::mask)
// masks rows; when value (or key) is the very same tensor as the query (self-attention), its mask
// masks columns too, as Keras combines query, value and key masks. use_causal_mask keeps column
// j <= row i. A row with every column masked becomes uniform (1 / Tv), as Keras's -1e9 adder
// gives in float32. Softmax sums run over j in order, per sample and head, so a result never
// depends on how a batch is split between workers.
#include <cmath>
#include <cstring>

#include "kernels/gemm.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

struct Dims {
  int tq = 0, tv = 0, dq = 0, dv = 0, dk = 0;  // time steps and input widths
  int h = 0, kd = 0, vd = 0, out = 0;          // heads, head widths, output width
  int hk() const { return h * kd; }
  int hv() const { return h * vd; }
  size_t scores() const { return static_cast<size_t>(h) * tq * tv; }  // per sample
};

class MultiHeadAttention final : public Layer {
 public:
  MultiHeadAttention(LayerConfig& c, const std::string& name) : Layer(name) {
    heads_ = c.get_int("num_heads");
    key_dim_ = c.get_int("key_dim");
    value_dim_ = c.has("value_dim") ? c.get_int("value_dim") : key_dim_;
    c.ignore("value_dim");
    dropout_ = c.get_float("dropout", 0.0);
    if (dropout_ < 0.0 || dropout_ >= 1.0) c.fail("dropout", "a number in [0, 1)");
    use_bias_ = c.get_bool("use_bias", true);
    parse_output_shape(c);
    parse_attention_axes(c);
    if (c.get_bool("use_gate", false)) c.fail("use_gate", "false (gated attention: not supported)");
    kinit_ = parse_init_option(c, "kernel_initializer", "glorot_uniform");
    binit_ = parse_init_option(c, "bias_initializer", "zeros");
    // Call arguments of Keras's call(), kept in the config (the Keras readers put them here).
    causal_ = c.get_bool("use_causal_mask", false);
    return_scores_ = c.get_bool("return_attention_scores", false);
    // Keras's attention_mask tensor: then the inputs are query, value, key and the mask.
    mask_input_ = c.get_bool("attention_mask", false);
    // tf.keras records the built shapes; nnfleet plans them from the inputs.
    for (const char* k : {"query_shape", "key_shape", "value_shape", "seed"}) c.ignore(k);
    if (heads_ * std::max(key_dim_, value_dim_) > limits::kMaxConfigInt)
      c.fail("num_heads", "num_heads * key_dim at most " + std::to_string(limits::kMaxConfigInt));
  }
  const char* class_name() const override { return "MultiHeadAttention"; }
  // query, value[, key]; with an attention mask always query, value, key, mask.
  int arity() const override { return mask_input_ ? 4 : 2; }
  int optional_inputs() const override { return mask_input_ ? 0 : 1; }
  MaskUse mask_use() const override { return MaskUse::kConsume; }
  bool passes_mask() const override { return true; }  // the output keeps the query's steps

  Shape output_shape(const std::vector<Shape>& in) const override {
    const Dims d = dims(in);
    if (mask_input_ && in[3] != (Shape{d.tq, d.tv}))
      throw ModelError("the attention mask is " + keras_shape(in[3]) + "; expected " +
                       keras_shape(Shape{d.tq, d.tv}) + " (query steps, value steps)");
    if (in[1][0] != (in.size() > 2 ? in[2][0] : in[1][0]))
      throw ModelError("key " + keras_shape(in[2]) + " and value " + keras_shape(in[1]) +
                       " differ in steps; expected the same number of steps");
    if (!size_at_most(Shape{d.tq, d.out}, limits::kMaxSampleFloats) ||
        !size_at_most(Shape{heads_, d.tq, d.tv}, limits::kMaxSampleFloats))
      throw ModelError("the attention of " + keras_shape(in[0]) + " over " + keras_shape(in[1]) +
                       " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return Shape{d.tq, d.out};
  }
  std::vector<Shape> extra_output_shapes(const std::vector<Shape>& in) const override {
    if (!return_scores_) return {};
    return {Shape{heads_, in[0][0], in[1][0]}};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override;
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    const Dims d = dims(in);
    const size_t per = static_cast<size_t>(d.tq) * d.hk() + static_cast<size_t>(d.tv) * d.hk() +
                       static_cast<size_t>(d.tv) * d.hv() + d.scores() * (dropout_ > 0 ? 2 : 1) +
                       static_cast<size_t>(d.tq) * d.hv();
    return per * static_cast<size_t>(n);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    const Dims d = dims(in);
    // Backward: dO, dQ, dK, dV for the batch, then dP and a dropped P for one head.
    const size_t per = static_cast<size_t>(d.tq) * (d.hv() + d.hk()) +
                       static_cast<size_t>(d.tv) * (d.hk() + d.hv());
    return per * static_cast<size_t>(n) + 2 * static_cast<size_t>(d.tq) * d.tv;
  }
  void forward(const LayerArgs& a) const override;
  void backward(const LayerArgs& a) const override;
  Json keras_config() const override;
  double forward_flops(const std::vector<Shape>& in) const override {
    const Dims d = dims(in);
    return 2.0 * (static_cast<double>(d.tq) * (d.dq * d.hk() + d.hv() * d.out) +
                  static_cast<double>(d.tv) * (d.dk * d.hk() + d.dv * d.hv()) +
                  static_cast<double>(d.scores()) * (d.kd + d.vd));
  }

 private:
  void parse_output_shape(LayerConfig& c);
  void parse_attention_axes(LayerConfig& c);
  Dims dims(const std::vector<Shape>& in) const {
    for (size_t i = 0; i < in.size(); ++i)
      require_rank(in[i], 2, "MultiHeadAttention takes sequences [steps, features]");
    Dims d;
    d.tq = static_cast<int>(in[0][0]);
    d.dq = static_cast<int>(in[0][1]);
    d.tv = static_cast<int>(in[1][0]);
    d.dv = static_cast<int>(in[1][1]);
    d.dk = static_cast<int>(in.size() > 2 ? in[2][1] : in[1][1]);
    d.h = static_cast<int>(heads_);
    d.kd = static_cast<int>(key_dim_);
    d.vd = static_cast<int>(value_dim_);
    d.out = static_cast<int>(out_dim_ > 0 ? out_dim_ : in[0][1]);
    return d;
  }
  // Cache views of sample block: Q, K, V, P, dropout keep factors, O.
  struct Cache {
    float *q, *k, *v, *p, *keep, *o;
  };
  Cache cache_of(const Dims& d, int n, float* c) const {
    Cache v{};
    v.q = c;
    v.k = v.q + static_cast<size_t>(n) * d.tq * d.hk();
    v.v = v.k + static_cast<size_t>(n) * d.tv * d.hk();
    v.p = v.v + static_cast<size_t>(n) * d.tv * d.hv();
    v.keep = v.p + static_cast<size_t>(n) * d.scores();
    v.o = v.keep + (dropout_ > 0 ? static_cast<size_t>(n) * d.scores() : 0);
    return v;
  }
  void softmax_rows(const Dims& d, const LayerArgs& a, int s, float* p) const;
  void draw_keep(size_t count, Rng& rng, float* keep) const;
  // Whether every column of query step i of sample s is masked (its probabilities are uniform).
  bool row_all_masked(const Dims& d, const LayerArgs& a, int s, int i) const;
  const float* key_input(const LayerArgs& a) const { return a.n_inputs > 2 ? a.x[2] : a.x[1]; }

  int64_t heads_ = 1, key_dim_ = 1, value_dim_ = 1, out_dim_ = 0;
  double dropout_ = 0.0;
  bool use_bias_ = true, causal_ = false, return_scores_ = false, mask_input_ = false;
  Json output_shape_json_, axes_json_;
  Initializer kinit_, binit_;
};

void MultiHeadAttention::parse_output_shape(LayerConfig& c) {
  const Json* v = c.get_raw("output_shape");
  output_shape_json_ = v ? *v : Json();
  if (!v || v->is_null()) return;
  const Json& one = v->is_array() && v->size() == 1 ? (*v)[0] : *v;
  const std::optional<int64_t> i = config_int(one, 1);
  if (!i || *i > limits::kMaxConfigInt)
    c.fail("output_shape", "null, a positive integer or a list of one (the last axis' width)");
  out_dim_ = *i;
}

void MultiHeadAttention::parse_attention_axes(LayerConfig& c) {
  const Json* v = c.get_raw("attention_axes");
  axes_json_ = v ? *v : Json();
  if (!v || v->is_null()) return;
  const Json& one = v->is_array() && v->size() == 1 ? (*v)[0] : *v;
  // Axis 1 (with the batch axis) or -2 is the time axis of a [batch, steps, features] input.
  if (!one.is_number_integer() || (one.get<int64_t>() != 1 && one.get<int64_t>() != -2))
    c.fail("attention_axes",
           "null or [1] (attention over the steps of [batch, steps, features]; other axes are "
           "not supported)");
}

std::vector<ParamSpec> MultiHeadAttention::param_specs(const std::vector<Shape>& in) const {
  const Dims d = dims(in);
  std::vector<ParamSpec> p;
  auto add = [&](Shape kernel, Shape bias) {
    p.push_back({"kernel", kernel, kinit_, true});
    if (use_bias_) p.push_back({"bias", bias, binit_, true});
  };
  add(Shape{d.dq, heads_, key_dim_}, Shape{heads_, key_dim_});
  add(Shape{d.dk, heads_, key_dim_}, Shape{heads_, key_dim_});
  add(Shape{d.dv, heads_, value_dim_}, Shape{heads_, value_dim_});
  add(Shape{heads_, value_dim_, d.out}, Shape{d.out});
  return p;
}

// Softmax over the Tv columns of each of sample s's H*Tq score rows in p (in place), with the
// masks and causality of the class comment.
void MultiHeadAttention::softmax_rows(const Dims& d, const LayerArgs& a, int s, float* p) const {
  const float* qmask = a.mask ? a.mask + static_cast<size_t>(s) * d.tq : nullptr;
  const bool self_v = a.mask && a.x[1] == a.x[0] && key_input(a) == a.x[0] && d.tq == d.tv;
  const float* vmask = self_v ? qmask : nullptr;
  const float* amask =
      mask_input_ ? a.x[3] + static_cast<size_t>(s) * d.tq * d.tv : nullptr;  // [Tq, Tv]
  for (int h = 0; h < d.h; ++h)
    for (int i = 0; i < d.tq; ++i) {
      float* row = p + (static_cast<size_t>(h) * d.tq + i) * d.tv;
      const bool row_on = !qmask || qmask[i] != 0.0f;
      auto on = [&](int j) {
        return row_on && (!vmask || vmask[j] != 0.0f) && (!causal_ || j <= i) &&
               (!amask || amask[static_cast<size_t>(i) * d.tv + j] != 0.0f);
      };
      float mx = -INFINITY;
      for (int j = 0; j < d.tv; ++j)
        if (on(j)) mx = std::max(mx, row[j]);
      if (mx == -INFINITY) {  // every column masked
        for (int j = 0; j < d.tv; ++j) row[j] = 1.0f / static_cast<float>(d.tv);
        continue;
      }
      float sum = 0.0f;
      for (int j = 0; j < d.tv; ++j) {
        row[j] = on(j) ? std::exp(row[j] - mx) : 0.0f;
        sum += row[j];
      }
      const float inv = 1.0f / sum;
      for (int j = 0; j < d.tv; ++j) row[j] *= inv;
    }
}

bool MultiHeadAttention::row_all_masked(const Dims& d, const LayerArgs& a, int s, int i) const {
  if (a.mask && a.mask[static_cast<size_t>(s) * d.tq + i] == 0.0f) return true;
  // Without an attention mask a row the query's mask keeps keeps column i (a self-attention's
  // value mask is the query's) and column 0 (causal).
  if (!mask_input_) return false;
  const float* amask = a.x[3] + (static_cast<size_t>(s) * d.tq + i) * d.tv;
  const bool self_v = a.mask && a.x[1] == a.x[0] && key_input(a) == a.x[0] && d.tq == d.tv;
  const float* vmask = self_v ? a.mask + static_cast<size_t>(s) * d.tq : nullptr;
  for (int j = 0; j < d.tv; ++j)
    if (amask[j] != 0.0f && (!vmask || vmask[j] != 0.0f) && (!causal_ || j <= i)) return false;
  return true;
}

// Keep factors (0 or 1 / (1 - rate)) as Dropout draws them: 24-bit uniforms, two per draw.
void MultiHeadAttention::draw_keep(size_t count, Rng& rng, float* keep) const {
  const float scale = static_cast<float>(1.0 / (1.0 - dropout_));
  const auto threshold = static_cast<uint32_t>(
      std::ceil(static_cast<double>(static_cast<float>(dropout_)) * 16777216.0));
  for (size_t j = 0; j < count; j += 2) {
    const uint64_t r = rng.next();
    keep[j] = static_cast<uint32_t>(r >> 40) >= threshold ? scale : 0.0f;
    if (j + 1 < count)
      keep[j + 1] = (static_cast<uint32_t>(r >> 8) & 0xFFFFFFu) >= threshold ? scale : 0.0f;
  }
}

void MultiHeadAttention::forward(const LayerArgs& a) const {
  const std::vector<Shape> in(a.in_shapes, a.in_shapes + a.n_inputs);
  const Dims d = dims(in);
  const Cache c = cache_of(d, a.n, a.cache);
  const bool drop = a.training && dropout_ > 0;
  const int b = use_bias_ ? 1 : 0;
  float* const* w = a.params;
  dense_forward(a.n * d.tq, d.dq, d.hk(), a.x[0], w[0], b ? w[1] : nullptr, c.q);
  dense_forward(a.n * d.tv, d.dk, d.hk(), key_input(a), w[1 + b], b ? w[2 + b] : nullptr, c.k);
  dense_forward(a.n * d.tv, d.dv, d.hv(), a.x[1], w[2 + 2 * b], b ? w[3 + 2 * b] : nullptr, c.v);
  const float scale = 1.0f / std::sqrt(static_cast<float>(key_dim_));
  for (size_t i = 0, m = static_cast<size_t>(a.n) * d.tq * d.hk(); i < m; ++i) c.q[i] *= scale;
  float* pd = a.scratch;  // one head's dropped probabilities [Tq, Tv]
  for (int s = 0; s < a.n; ++s) {
    const float* q = c.q + static_cast<size_t>(s) * d.tq * d.hk();
    const float* k = c.k + static_cast<size_t>(s) * d.tv * d.hk();
    const float* v = c.v + static_cast<size_t>(s) * d.tv * d.hv();
    float* p = c.p + static_cast<size_t>(s) * d.scores();
    float* o = c.o + static_cast<size_t>(s) * d.tq * d.hv();
    for (int h = 0; h < d.h; ++h)
      gemm(false, true, d.tq, d.tv, d.kd, q + h * d.kd, d.hk(), k + h * d.kd, d.hk(), 0.0f,
           p + static_cast<size_t>(h) * d.tq * d.tv, d.tv);
    softmax_rows(d, a, s, p);
    if (return_scores_)
      std::memcpy(a.extra_y[0] + static_cast<size_t>(s) * d.scores(), p,
                  d.scores() * sizeof(float));
    float* keep = c.keep + static_cast<size_t>(s) * d.scores();
    if (drop) draw_keep(d.scores(), *a.rng, keep);
    for (int h = 0; h < d.h; ++h) {
      const float* ph = p + static_cast<size_t>(h) * d.tq * d.tv;
      if (drop) {
        const float* kh = keep + static_cast<size_t>(h) * d.tq * d.tv;
        for (size_t i = 0, m = static_cast<size_t>(d.tq) * d.tv; i < m; ++i) pd[i] = ph[i] * kh[i];
        ph = pd;
      }
      gemm(false, false, d.tq, d.vd, d.tv, ph, d.tv, v + h * d.vd, d.hv(), 0.0f, o + h * d.vd,
           d.hv());
    }
  }
  dense_forward(a.n * d.tq, d.hv(), d.out, c.o, w[3 + 3 * b], b ? w[4 + 3 * b] : nullptr, a.y);
}

void MultiHeadAttention::backward(const LayerArgs& a) const {
  const std::vector<Shape> in(a.in_shapes, a.in_shapes + a.n_inputs);
  const Dims d = dims(in);
  const Cache c = cache_of(d, a.n, a.cache);
  const bool drop = a.training && dropout_ > 0;
  const int b = use_bias_ ? 1 : 0;
  float* const* w = a.params;
  float* const* dw = a.dparams;
  float* d_o = a.scratch;
  float* dq = d_o + static_cast<size_t>(a.n) * d.tq * d.hv();
  float* dk = dq + static_cast<size_t>(a.n) * d.tq * d.hk();
  float* dv = dk + static_cast<size_t>(a.n) * d.tv * d.hk();
  float* dp = dv + static_cast<size_t>(a.n) * d.tv * d.hv();
  float* pd = dp + static_cast<size_t>(d.tq) * d.tv;
  const size_t all = static_cast<size_t>(a.n) * (static_cast<size_t>(d.tq) * (d.hv() + d.hk()) +
                                                 static_cast<size_t>(d.tv) * (d.hk() + d.hv()));
  std::memset(d_o, 0, all * sizeof(float));
  dense_backward(a.n * d.tq, d.hv(), d.out, c.o, w[3 + 3 * b], a.dy, d_o, dw[3 + 3 * b],
                 b ? dw[4 + 3 * b] : nullptr);
  const size_t tt = static_cast<size_t>(d.tq) * d.tv;
  for (int s = 0; s < a.n; ++s) {
    const size_t qo = static_cast<size_t>(s) * d.tq, vo = static_cast<size_t>(s) * d.tv;
    for (int h = 0; h < d.h; ++h) {
      const size_t so = static_cast<size_t>(s) * d.scores() + static_cast<size_t>(h) * tt;
      const float* p = c.p + so;
      const float* keep = c.keep + so;
      const float* ph = p;
      if (drop) {
        for (size_t i = 0; i < tt; ++i) pd[i] = p[i] * keep[i];
        ph = pd;
      }
      const float* doh = d_o + qo * d.hv() + h * d.vd;
      // dV_h += P'^T dO_h; dP' = dO_h V_h^T.
      gemm(true, false, d.tv, d.vd, d.tq, ph, d.tv, doh, d.hv(), 1.0f, dv + vo * d.hv() + h * d.vd,
           d.hv());
      gemm(false, true, d.tq, d.tv, d.vd, doh, d.hv(), c.v + vo * d.hv() + h * d.vd, d.hv(), 0.0f,
           dp, d.tv);
      if (drop)
        for (size_t i = 0; i < tt; ++i) dp[i] *= keep[i];
      if (return_scores_)
        for (size_t i = 0; i < tt; ++i) dp[i] += a.extra_dy[0][so + i];
      // Softmax: dS = P * (dP - sum_j dP P); masked entries have P = 0 and a uniform row of a
      // fully masked query does not depend on the scores, so both get 0.
      for (int i = 0; i < d.tq; ++i) {
        float* r = dp + static_cast<size_t>(i) * d.tv;
        const float* pr = p + static_cast<size_t>(i) * d.tv;
        float dot = 0.0f;
        for (int j = 0; j < d.tv; ++j) dot += r[j] * pr[j];
        const bool uniform_masked = row_all_masked(d, a, s, i);
        for (int j = 0; j < d.tv; ++j) r[j] = uniform_masked ? 0.0f : pr[j] * (r[j] - dot);
      }
      // Q was scaled in forward: dQs_h += dS K_h, dK_h += dS^T Qs_h.
      gemm(false, false, d.tq, d.kd, d.tv, dp, d.tv, c.k + vo * d.hk() + h * d.kd, d.hk(), 1.0f,
           dq + qo * d.hk() + h * d.kd, d.hk());
      gemm(true, false, d.tv, d.kd, d.tq, dp, d.tv, c.q + qo * d.hk() + h * d.kd, d.hk(), 1.0f,
           dk + vo * d.hk() + h * d.kd, d.hk());
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(key_dim_));
  for (size_t i = 0, m = static_cast<size_t>(a.n) * d.tq * d.hk(); i < m; ++i) dq[i] *= scale;
  float* dkey = a.n_inputs > 2 ? a.dx[2] : a.dx[1];
  dense_backward(a.n * d.tq, d.dq, d.hk(), a.x[0], w[0], dq, a.dx[0], dw[0], b ? dw[1] : nullptr);
  dense_backward(a.n * d.tv, d.dk, d.hk(), key_input(a), w[1 + b], dk, dkey, dw[1 + b],
                 b ? dw[2 + b] : nullptr);
  dense_backward(a.n * d.tv, d.dv, d.hv(), a.x[1], w[2 + 2 * b], dv, a.dx[1], dw[2 + 2 * b],
                 b ? dw[3 + 2 * b] : nullptr);
}

Json MultiHeadAttention::keras_config() const {
  Json j = base_keras_config(*this);
  j["num_heads"] = heads_;
  j["key_dim"] = key_dim_;
  j["value_dim"] = value_dim_;
  j["dropout"] = dropout_;
  j["use_bias"] = use_bias_;
  j["output_shape"] = output_shape_json_;
  j["attention_axes"] = axes_json_;
  j["kernel_initializer"] = initializer_to_keras(kinit_);
  j["bias_initializer"] = initializer_to_keras(binit_);
  for (const char* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                        "kernel_constraint", "bias_constraint"})
    j[k] = nullptr;
  // Call arguments: the Keras writers move them to the call (multi_head_attention_call_keys).
  if (causal_) j["use_causal_mask"] = true;
  if (return_scores_) j["return_attention_scores"] = true;
  if (mask_input_) j["attention_mask"] = true;
  return j;
}

}  // namespace

std::unique_ptr<Layer> make_multi_head_attention(LayerConfig& c, const std::string& name) {
  return std::make_unique<MultiHeadAttention>(c, name);
}

std::vector<LayerExample> multi_head_attention_examples() {
  return {
      // Self-attention (query = value = key given as one tensor is the network's business; here
      // two inputs of the same shape).
      {{{"num_heads", 2}, {"key_dim", 3}}, {Shape{4, 5}, Shape{4, 5}}},
      // key != value, Tq != Tv, value_dim and output_shape set.
      {{{"num_heads", 2}, {"key_dim", 2}, {"value_dim", 3}, {"output_shape", 4}},
       {Shape{3, 5}, Shape{6, 2}, Shape{6, 4}}},
      // No bias, causal, one head.
      {{{"num_heads", 1}, {"key_dim", 4}, {"use_bias", false}, {"use_causal_mask", true}},
       {Shape{5, 3}, Shape{5, 3}}},
      // An attention mask as the fourth input (the key given as the value's twin).
      {{{"num_heads", 2}, {"key_dim", 2}, {"attention_mask", true}},
       {Shape{3, 4}, Shape{3, 4}, Shape{3, 4}, Shape{3, 3}}},
      // The scores as a second output.
      {{{"num_heads", 3}, {"key_dim", 2}, {"return_attention_scores", true}},
       {Shape{2, 4}, Shape{3, 4}}},
  };
}

}  // namespace nnfleet
