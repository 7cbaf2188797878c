// Attention (Luong) and AdditiveAttention (Bahdanau), Keras semantics
// (keras/src/layers/attention/{attention,additive_attention}.py), for a per-sample query [Tq, d],
// value [Tv, dv] and optional key [Tv, d] (key defaults to value). Scores S [Tq, Tv]:
//   Attention "dot":    S = Q K^T, times the scalar weight `scale` with use_scale;
//   Attention "concat": S = concat_score_weight * sum_d tanh(scale * (q_d + k_d)), scale when
//                       use_scale (both scalars, ones-initialized);
//   AdditiveAttention:  S = sum_d scale_d * tanh(q_d + k_d), scale [d] (glorot_uniform) when
//                       use_scale (the default), else all ones.
// Then P = softmax over Tv (value mask and use_causal_mask as -inf; a row with every column
// masked is uniform, as Keras's -1e9 gives in float32), P' = dropout(P) in training, y = P' V,
// and rows the query's mask masks are zeroed. return_attention_scores adds P' [Tq, Tv] (Keras
// returns the weights after dropout). Masks: the query's mask (LayerArgs::mask); when value is the
// query tensor itself (self-attention) its mask is the value mask too. Sums run in a fixed order
// per sample, so results never depend on how a batch is split.
#include <cmath>
#include <cstring>

#include "kernels/gemm.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"

namespace nnfleet {
namespace {

enum class Score { kDot, kConcat, kAdditive };

class AttentionLayer final : public Layer {
 public:
  AttentionLayer(LayerConfig& c, const std::string& name, bool additive) : Layer(name) {
    mode_ = additive ? Score::kAdditive : Score::kDot;
    use_scale_ = c.get_bool("use_scale", additive);
    if (!additive && c.get_string("score_mode", "dot", {"dot", "concat"}) == "concat")
      mode_ = Score::kConcat;
    dropout_ = c.get_float("dropout", 0.0);
    if (dropout_ < 0.0 || dropout_ >= 1.0) c.fail("dropout", "a number in [0, 1)");
    causal_ = c.get_bool("use_causal_mask", false);
    // tf.keras 2.x's deprecated constructor form of use_causal_mask.
    if (c.get_bool("causal", false)) causal_ = true;
    return_scores_ = c.get_bool("return_attention_scores", false);
    c.ignore("seed");
  }
  const char* class_name() const override {
    return mode_ == Score::kAdditive ? "AdditiveAttention" : "Attention";
  }
  int arity() const override { return 2; }            // query, value
  int optional_inputs() const override { return 1; }  // key
  MaskUse mask_use() const override { return MaskUse::kConsume; }
  bool passes_mask() const override { return true; }  // Keras: compute_mask gives the query's

  Shape output_shape(const std::vector<Shape>& in) const override {
    for (const Shape& s : in) require_rank(s, 2, "attention takes sequences [steps, features]");
    const Shape& key = in.size() > 2 ? in[2] : in[1];
    if (key[0] != in[1][0])
      throw ModelError("key " + keras_shape(key) + " and value " + keras_shape(in[1]) +
                       " differ in steps; expected the same number of steps");
    if (key[1] != in[0][1])
      throw ModelError("query " + keras_shape(in[0]) + " and key " + keras_shape(key) +
                       " differ in features; expected the same last axis");
    if (!size_at_most(Shape{in[0][0], in[1][0], in[0][1]}, limits::kMaxSampleFloats))
      throw ModelError("the attention of " + keras_shape(in[0]) + " over " + keras_shape(in[1]) +
                       " is too large; expected at most " +
                       std::to_string(limits::kMaxSampleFloats) + " values per sample");
    return Shape{in[0][0], in[1][1]};
  }
  std::vector<Shape> extra_output_shapes(const std::vector<Shape>& in) const override {
    if (!return_scores_) return {};
    return {Shape{in[0][0], in[1][0]}};
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    std::vector<ParamSpec> p;
    Initializer ones;
    ones.kind = InitKind::kOnes;
    Initializer glorot;
    glorot.kind = InitKind::kGlorotUniform;
    if (mode_ == Score::kAdditive) {
      if (use_scale_) p.push_back({"scale", Shape{in[0][1]}, glorot, true});
      return p;
    }
    if (use_scale_) p.push_back({"scale", Shape{}, ones, true});
    if (mode_ == Score::kConcat) p.push_back({"concat_score_weight", Shape{}, ones, true});
    return p;
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return static_cast<size_t>(n) * in[0][0] * in[1][0] * (dropout_ > 0 ? 2 : 1);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int) const override {
    return 3 * static_cast<size_t>(in[0][0]) * in[1][0];  // P', dP and raw scores of one sample
  }
  void forward(const LayerArgs& a) const override;
  void backward(const LayerArgs& a) const override;
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["use_scale"] = use_scale_;
    if (mode_ != Score::kAdditive) j["score_mode"] = mode_ == Score::kDot ? "dot" : "concat";
    j["dropout"] = dropout_;
    // Call arguments: the Keras writers move them to the call.
    if (causal_) j["use_causal_mask"] = true;
    if (return_scores_) j["return_attention_scores"] = true;
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return 2.0 * static_cast<double>(in[0][0]) * static_cast<double>(in[1][0]) *
           static_cast<double>(in[0][1] + in[1][1]);
  }

 private:
  struct Dims {
    int tq, tv, d, dv;
  };
  static Dims dims(const LayerArgs& a) {
    return {static_cast<int>(a.in_shapes[0][0]), static_cast<int>(a.in_shapes[1][0]),
            static_cast<int>(a.in_shapes[0][1]), static_cast<int>(a.in_shapes[1][1])};
  }
  const float* key_of(const LayerArgs& a) const { return a.n_inputs > 2 ? a.x[2] : a.x[1]; }
  // The scalars c (concat_score_weight), a (scale inside tanh) and the vector w (scale_d) of the
  // tanh form S = c * sum_d w_d tanh(a (q_d + k_d)); null w means all ones.
  void tanh_form(const LayerArgs& a, float& c, float& s, const float*& w) const {
    c = 1.0f, s = 1.0f, w = nullptr;
    if (mode_ == Score::kAdditive) {
      if (use_scale_) w = a.params[0];
    } else {
      if (use_scale_) s = a.params[0][0];
      c = a.params[use_scale_ ? 1 : 0][0];
    }
  }
  void scores(const LayerArgs& a, const Dims& d, int smp, float* raw, float* out) const;
  void scores_backward(const LayerArgs& a, const Dims& d, int smp, float* dp, float* raw) const;
  bool column_on(const LayerArgs& a, const Dims& d, int smp, int i, int j) const {
    const bool self_v = a.mask && a.x[1] == a.x[0] && d.tq == d.tv;
    if (self_v && a.mask[static_cast<size_t>(smp) * d.tv + j] == 0.0f) return false;
    return !causal_ || j <= i;
  }
  bool query_on(const LayerArgs& a, const Dims& d, int smp, int i) const {
    return !a.mask || a.mask[static_cast<size_t>(smp) * d.tq + i] != 0.0f;
  }

  Score mode_ = Score::kDot;
  bool use_scale_ = false, causal_ = false, return_scores_ = false;
  double dropout_ = 0.0;
};

// Sample smp's scores into out [Tq, Tv]; for "dot", raw gets Q K^T before the scale.
void AttentionLayer::scores(const LayerArgs& a, const Dims& d, int smp, float* raw,
                            float* out) const {
  const float* q = a.x[0] + static_cast<size_t>(smp) * d.tq * d.d;
  const float* k = key_of(a) + static_cast<size_t>(smp) * d.tv * d.d;
  if (mode_ == Score::kDot) {
    gemm(false, true, d.tq, d.tv, d.d, q, d.d, k, d.d, 0.0f, raw, d.tv);
    const float s = use_scale_ ? a.params[0][0] : 1.0f;
    for (int i = 0; i < d.tq * d.tv; ++i) out[i] = raw[i] * s;
    return;
  }
  float c, s;
  const float* w;
  tanh_form(a, c, s, w);
  for (int i = 0; i < d.tq; ++i)
    for (int j = 0; j < d.tv; ++j) {
      float sum = 0.0f;
      for (int e = 0; e < d.d; ++e)
        sum += (w ? w[e] : 1.0f) * std::tanh(s * (q[i * d.d + e] + k[j * d.d + e]));
      out[i * d.tv + j] = c * sum;
    }
}

void AttentionLayer::forward(const LayerArgs& a) const {
  const Dims d = dims(a);
  const size_t tt = static_cast<size_t>(d.tq) * d.tv;
  const bool drop = a.training && dropout_ > 0;
  const float keep_scale = static_cast<float>(1.0 / (1.0 - dropout_));
  const auto threshold = static_cast<uint32_t>(
      std::ceil(static_cast<double>(static_cast<float>(dropout_)) * 16777216.0));
  float* pd = a.scratch;
  float* raw = a.scratch + tt;
  for (int smp = 0; smp < a.n; ++smp) {
    float* p = a.cache + static_cast<size_t>(smp) * tt;
    scores(a, d, smp, raw, p);
    for (int i = 0; i < d.tq; ++i) {
      float* row = p + static_cast<size_t>(i) * d.tv;
      float mx = -INFINITY;
      for (int j = 0; j < d.tv; ++j)
        if (column_on(a, d, smp, i, j)) mx = std::max(mx, row[j]);
      if (mx == -INFINITY) {  // every column masked: uniform
        for (int j = 0; j < d.tv; ++j) row[j] = 1.0f / static_cast<float>(d.tv);
        continue;
      }
      float sum = 0.0f;
      for (int j = 0; j < d.tv; ++j) {
        row[j] = column_on(a, d, smp, i, j) ? std::exp(row[j] - mx) : 0.0f;
        sum += row[j];
      }
      for (int j = 0; j < d.tv; ++j) row[j] /= sum;
    }
    const float* ph = p;
    if (drop) {  // keep factors drawn as Dropout draws them: 24-bit uniforms, two per draw
      float* keep = a.cache + static_cast<size_t>(a.n) * tt + static_cast<size_t>(smp) * tt;
      for (size_t j = 0; j < tt; j += 2) {
        const uint64_t r = a.rng->next();
        keep[j] = static_cast<uint32_t>(r >> 40) >= threshold ? keep_scale : 0.0f;
        if (j + 1 < tt)
          keep[j + 1] =
              (static_cast<uint32_t>(r >> 8) & 0xFFFFFFu) >= threshold ? keep_scale : 0.0f;
      }
      for (size_t j = 0; j < tt; ++j) pd[j] = p[j] * keep[j];
      ph = pd;
    }
    if (return_scores_) std::memcpy(a.extra_y[0] + smp * tt, ph, tt * sizeof(float));
    float* y = a.y + static_cast<size_t>(smp) * d.tq * d.dv;
    gemm(false, false, d.tq, d.dv, d.tv, ph, d.tv, a.x[1] + static_cast<size_t>(smp) * d.tv * d.dv,
         d.dv, 0.0f, y, d.dv);
    for (int i = 0; i < d.tq; ++i)
      if (!query_on(a, d, smp, i)) std::memset(y + i * d.dv, 0, d.dv * sizeof(float));
  }
}

void AttentionLayer::backward(const LayerArgs& a) const {
  const Dims d = dims(a);
  const size_t tt = static_cast<size_t>(d.tq) * d.tv;
  const bool drop = a.training && dropout_ > 0;
  float* pd = a.scratch;
  float* dp = a.scratch + tt;
  float* raw = a.scratch + 2 * tt;
  for (int smp = 0; smp < a.n; ++smp) {
    const float* p = a.cache + static_cast<size_t>(smp) * tt;
    const float* keep = a.cache + static_cast<size_t>(a.n) * tt + static_cast<size_t>(smp) * tt;
    const float* ph = p;
    if (drop) {
      for (size_t j = 0; j < tt; ++j) pd[j] = p[j] * keep[j];
      ph = pd;
    }
    const float* v = a.x[1] + static_cast<size_t>(smp) * d.tv * d.dv;
    const float* dy = a.dy + static_cast<size_t>(smp) * d.tq * d.dv;
    // dP' = dy V^T (rows of masked queries were zeroed: no gradient), dV += P'^T dy.
    for (int i = 0; i < d.tq; ++i) {
      float* r = dp + static_cast<size_t>(i) * d.tv;
      if (!query_on(a, d, smp, i)) {
        std::memset(r, 0, d.tv * sizeof(float));
        continue;
      }
      gemm(false, true, 1, d.tv, d.dv, dy + i * d.dv, d.dv, v, d.dv, 0.0f, r, d.tv);
      if (a.dx[1])
        gemm(true, false, d.tv, d.dv, 1, ph + static_cast<size_t>(i) * d.tv, d.tv, dy + i * d.dv,
             d.dv, 1.0f, a.dx[1] + static_cast<size_t>(smp) * d.tv * d.dv, d.dv);
    }
    if (return_scores_)
      for (size_t j = 0; j < tt; ++j) dp[j] += a.extra_dy[0][smp * tt + j];
    if (drop)
      for (size_t j = 0; j < tt; ++j) dp[j] *= keep[j];
    for (int i = 0; i < d.tq; ++i) {  // dS = P (dP - sum_j dP P); 0 on a uniform masked row
      float* r = dp + static_cast<size_t>(i) * d.tv;
      const float* pr = p + static_cast<size_t>(i) * d.tv;
      bool any = false;
      for (int j = 0; j < d.tv; ++j) any = any || column_on(a, d, smp, i, j);
      float dot = 0.0f;
      for (int j = 0; j < d.tv; ++j) dot += r[j] * pr[j];
      for (int j = 0; j < d.tv; ++j) r[j] = any ? pr[j] * (r[j] - dot) : 0.0f;
    }
    scores_backward(a, d, smp, dp, raw);
  }
}

// From dS [Tq, Tv] of sample smp (scratch, changed): the query, key and weight gradients (+=).
void AttentionLayer::scores_backward(const LayerArgs& a, const Dims& d, int smp, float* dp,
                                     float* raw) const {
  const size_t tt = static_cast<size_t>(d.tq) * d.tv;
  float* dkey = a.n_inputs > 2 ? a.dx[2] : a.dx[1];
  const float* q = a.x[0] + static_cast<size_t>(smp) * d.tq * d.d;
  const float* k = key_of(a) + static_cast<size_t>(smp) * d.tv * d.d;
  float* dq = a.dx[0] ? a.dx[0] + static_cast<size_t>(smp) * d.tq * d.d : nullptr;
  float* dk = dkey ? dkey + static_cast<size_t>(smp) * d.tv * d.d : nullptr;
  if (mode_ == Score::kDot) {
    const float s = use_scale_ ? a.params[0][0] : 1.0f;
    if (use_scale_) {
      gemm(false, true, d.tq, d.tv, d.d, q, d.d, k, d.d, 0.0f, raw, d.tv);
      float g = 0.0f;
      for (size_t j = 0; j < tt; ++j) g += dp[j] * raw[j];
      a.dparams[0][0] += g;
    }
    for (size_t j = 0; j < tt; ++j) dp[j] *= s;
    if (dq) gemm(false, false, d.tq, d.d, d.tv, dp, d.tv, k, d.d, 1.0f, dq, d.d);
    if (dk) gemm(true, false, d.tv, d.d, d.tq, dp, d.tv, q, d.d, 1.0f, dk, d.d);
    return;
  }
  float c, s;
  const float* w;
  tanh_form(a, c, s, w);
  float dc = 0.0f, ds = 0.0f;
  float* dw = mode_ == Score::kAdditive && use_scale_ ? a.dparams[0] : nullptr;
  for (int i = 0; i < d.tq; ++i)
    for (int j = 0; j < d.tv; ++j) {
      const float g = dp[static_cast<size_t>(i) * d.tv + j];
      for (int e = 0; e < d.d; ++e) {
        const float u = q[i * d.d + e] + k[j * d.d + e];
        const float t = std::tanh(s * u);
        const float we = w ? w[e] : 1.0f;
        dc += g * we * t;
        if (dw) dw[e] += g * c * t;
        const float du = g * c * we * (1.0f - t * t);
        ds += du * u;
        if (dq) dq[i * d.d + e] += du * s;
        if (dk) dk[j * d.d + e] += du * s;
      }
    }
  if (mode_ == Score::kConcat) {
    if (use_scale_) a.dparams[0][0] += ds;
    a.dparams[use_scale_ ? 1 : 0][0] += dc;
  }
}

}  // namespace

std::unique_ptr<Layer> make_attention(LayerConfig& c, const std::string& name) {
  return std::make_unique<AttentionLayer>(c, name, false);
}
std::unique_ptr<Layer> make_additive_attention(LayerConfig& c, const std::string& name) {
  return std::make_unique<AttentionLayer>(c, name, true);
}

std::vector<LayerExample> attention_examples() {
  return {
      {Json::object(), {Shape{3, 4}, Shape{5, 4}}},
      {{{"use_scale", true}}, {Shape{3, 4}, Shape{5, 2}, Shape{5, 4}}},
      {{{"score_mode", "concat"}, {"use_scale", true}}, {Shape{3, 2}, Shape{4, 3}, Shape{4, 2}}},
      {{{"score_mode", "concat"}, {"use_causal_mask", true}, {"return_attention_scores", true}},
       {Shape{4, 3}, Shape{4, 3}}},
  };
}
std::vector<LayerExample> additive_attention_examples() {
  return {
      {Json::object(), {Shape{3, 4}, Shape{5, 4}}},
      {{{"use_scale", false}, {"use_causal_mask", true}}, {Shape{4, 2}, Shape{4, 3}, Shape{4, 2}}},
      {{{"return_attention_scores", true}}, {Shape{2, 3}, Shape{3, 3}}},
  };
}

}  // namespace nnfleet
