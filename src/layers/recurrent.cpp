// SimpleRNN, LSTM and GRU with Keras semantics (keras/src/layers/rnn/{simple_rnn,lstm,gru}.py):
// input [T,I] per sample, output [T,U] with return_sequences (in step order, so reversed time
// with go_backwards, as Keras returns it) or the last state [U]. Weights in Keras's layout and
// gate order: kernel [I,GU], recurrent_kernel [U,GU], bias [GU] (GRU with reset_after [2,GU]).
// The math is in kernels/recurrent.h; the cache keeps the states and gates of every step for
// backward through time. With return_state the final states are extra outputs (LSTM: output, h,
// c; the others: output, h), and initial states (Keras's initial_state: LSTM h and c, the others
// h, each [U]) may follow the sequence as further inputs.
#include "kernels/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

// Keras 2's hard_sigmoid (0.2 x + 0.5) differs from Keras 3's (x / 6 + 0.5); the Keras importer
// names the old one so for files older than Keras 3 (see keras_reader.cpp).
constexpr const char* kHardSigmoidKeras2 = "hard_sigmoid_keras2";

RnnAct parse_rnn_activation(LayerConfig& c, const std::string& key, const char* def) {
  const Json* raw = c.get_raw(key);
  if (raw && raw->is_string() && raw->get<std::string>() == kHardSigmoidKeras2)
    return RnnAct::kHardSigmoidKeras2;
  const Json fallback(def);
  const Activation a = parse_activation(raw ? raw : &fallback, key);
  const bool plain = a.alpha == 0.0f && a.threshold == 0.0f && std::isinf(a.max_value);
  switch (a.kind) {
    case Act::kLinear:
      return RnnAct::kLinear;
    case Act::kRelu:
      if (plain) return RnnAct::kRelu;
      break;
    case Act::kSigmoid:
      return RnnAct::kSigmoid;
    case Act::kTanh:
      return RnnAct::kTanh;
    case Act::kHardSigmoid:
      return RnnAct::kHardSigmoid;
    default:
      break;
  }
  c.fail(key,
         "one of tanh, sigmoid, hard_sigmoid, relu, linear (the activations recurrent "
         "layers support)");
}

const char* rnn_act_name(RnnAct a) {
  switch (a) {
    case RnnAct::kLinear:
      return "linear";
    case RnnAct::kRelu:
      return "relu";
    case RnnAct::kSigmoid:
      return "sigmoid";
    case RnnAct::kTanh:
      return "tanh";
    case RnnAct::kHardSigmoid:
      return "hard_sigmoid";
    case RnnAct::kHardSigmoidKeras2:
      return kHardSigmoidKeras2;
  }
  return "linear";
}

// A regularizer config is kept as written so that the model can be saved back; it has no effect
// at inference, and training refuses it (Layer::training_refusal) until the penalty is applied.
Json read_regularizer(LayerConfig& c, const std::string& key) {
  const Json* raw = c.get_raw(key);
  return raw ? *raw : Json(nullptr);
}

class Recurrent final : public Layer {
 public:
  Recurrent(RnnCell cell, const char* cls, LayerConfig& c, const std::string& name)
      : Layer(name), cls_(cls) {
    d_.cell = cell;
    units_ = c.get_int("units");
    d_.act = parse_rnn_activation(c, "activation", "tanh");
    if (cell != RnnCell::kSimple)
      d_.ract = parse_rnn_activation(c, "recurrent_activation", "sigmoid");
    use_bias_ = c.get_bool("use_bias", true);
    d_.return_sequences = c.get_bool("return_sequences", false);
    d_.go_backwards = c.get_bool("go_backwards", false);
    unroll_ = c.get_bool("unroll", false);  // an execution strategy in Keras: no effect here
    if (c.get_bool("stateful", false))
      c.fail("stateful",
             "false (nnfleet does not keep a layer's state from one batch to the next)");
    return_state_ = c.get_bool("return_state", false);
    d_.zero_masked_output = c.get_bool("zero_output_for_mask", false);
    if (cell == RnnCell::kLstm) unit_forget_bias_ = c.get_bool("unit_forget_bias", true);
    // Keras 3 made reset_after true by default; Keras 2.0 files predate the key (false then).
    if (cell == RnnCell::kGru)
      d_.reset_after = c.get_bool("reset_after", c.mode() == ConfigMode::kPlan);
    kinit_ = parse_init_option(c, "kernel_initializer", "glorot_uniform");
    rinit_ = parse_init_option(c, "recurrent_initializer", "orthogonal");
    binit_ = parse_init_option(c, "bias_initializer", "zeros");
    kreg_ = read_regularizer(c, "kernel_regularizer");
    rreg_ = read_regularizer(c, "recurrent_regularizer");
    breg_ = read_regularizer(c, "bias_regularizer");
    dropout_ = c.get_float("dropout", 0.0);
    rdropout_ = c.get_float("recurrent_dropout", 0.0);
    if (dropout_ < 0.0 || dropout_ >= 1.0) c.fail("dropout", "a number in [0, 1)");
    if (rdropout_ < 0.0 || rdropout_ >= 1.0) c.fail("recurrent_dropout", "a number in [0, 1)");
    // Keras's implementation mode changes only the dropout masks: 1 (and Keras 2.0's 0) draws
    // one per gate, 2 one for all gates. Keras 2 files name it; Keras 3 (>= 3.8) runs 1 whenever
    // recurrent_dropout is set and 2 otherwise, and does not write it.
    const int64_t impl = c.get_int("implementation", rdropout_ > 0.0 ? 1 : 2, 0);
    gate_masks_ = cell != RnnCell::kSimple && impl != 2;
    d_.in_dropout = cell_masks() && dropout_ > 0.0;
    d_.rec_dropout = rdropout_ > 0.0;
    if (c.get_bool("time_major", false))
      c.fail("time_major", "false (inputs are [batch,time,features])");
    if (c.mode() == ConfigMode::kKeras) c.ignore("use_cudnn");
  }
  const char* class_name() const override { return cls_; }
  bool use_bias() const { return use_bias_; }
  int64_t units() const { return units_; }
  bool return_sequences() const { return d_.return_sequences; }
  bool return_state() const { return return_state_; }
  // The states a cell carries: h (and c for LSTM).
  int num_states() const { return d_.cell == RnnCell::kLstm ? 2 : 1; }
  int optional_inputs() const override { return num_states(); }
  void set_zero_masked_output(bool z) { d_.zero_masked_output = z; }
  // This layer's kernel dimensions for a per-sample input [T,I] and n rows.
  RnnDims dims(const Shape& in, int n) const {
    RnnDims d = d_;
    d.n = n;
    d.t = static_cast<int>(in[0]);
    d.in = static_cast<int>(in[1]);
    d.units = static_cast<int>(units_);
    return d;
  }

  Shape output_shape(const std::vector<Shape>& in) const override {
    require_rank(in[0], 2, "recurrent layers take sequences [batch,time,features]");
    if (in[0][0] < 1) throw ModelError("needs at least one time step, got " + keras_shape(in[0]));
    for (size_t k = 1; k < in.size(); ++k)
      if (in[k] != Shape{units_})
        throw ModelError("takes initial state " + std::to_string(k) + " of shape " +
                         keras_shape(in[k]) + "; expected " + keras_shape(Shape{units_}) +
                         " (one value per unit)");
    return d_.return_sequences ? Shape{in[0][0], units_} : Shape{units_};
  }
  std::vector<Shape> extra_output_shapes(const std::vector<Shape>&) const override {
    if (!return_state_) return {};
    return std::vector<Shape>(static_cast<size_t>(num_states()), Shape{units_});
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    const int64_t gu = rnn_gates(d_.cell) * units_;
    std::vector<ParamSpec> p{{"kernel", Shape{in[0][1], gu}, kinit_, true},
                             {"recurrent_kernel", Shape{units_, gu}, rinit_, true}};
    if (use_bias_) {
      Initializer b = binit_;
      b.unit_forget_bias = unit_forget_bias_;
      const bool two = d_.cell == RnnCell::kGru && d_.reset_after;
      p.push_back({"bias", two ? Shape{2, gu} : Shape{gu}, b, true});
    }
    return p;
  }
  // With dropout, the cache also holds the sequence's input mask [N,I] and the masked inputs
  // [N,T,I], and scratch the masked inputs' gradient [N,T,I].
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    return rnn_cache_floats(dims(in, n)) + dropout_floats(in[0], n, true);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    return rnn_scratch_floats(dims(in, n)) + dropout_floats(in[0], n, false);
  }
  // Keras's dropout (DropoutRNNCell): masks per sample and sequence, 0 or 1/(1-rate) for each
  // input feature (dropout) and each unit of the previous state (recurrent_dropout), drawn when
  // the sequence starts and applied at every step; per gate with implementation 1 (see
  // cell_masks). Inference ignores them.
  void forward(const LayerArgs& a) const override {
    const RnnDims d = dims(a.in_shapes[0], a.n);
    const float* x = a.x[0];
    if (a.training && cell_masks()) {
      rnn_forward(d, x, a.params[0], a.params[1], use_bias_ ? a.params[2] : nullptr, a.mask,
                  a.cache, a.scratch, a.y, states(a), draw_cell_masks(*a.rng, d, a.cache));
      return;
    }
    if (a.training && dropout_ > 0.0) {
      float* mask = a.cache + rnn_cache_floats(d);
      float* xd = mask + static_cast<size_t>(d.n) * d.in;
      draw_input_mask(*a.rng, static_cast<size_t>(d.n) * d.in, mask);
      for (int n = 0; n < d.n; ++n)
        for (int t = 0; t < d.t; ++t)
          for (int i = 0; i < d.in; ++i) {
            const size_t o = (static_cast<size_t>(n) * d.t + t) * d.in + i;
            xd[o] = x[o] * mask[static_cast<size_t>(n) * d.in + i];
          }
      x = xd;
    }
    rnn_forward(d, x, a.params[0], a.params[1], use_bias_ ? a.params[2] : nullptr, a.mask, a.cache,
                a.scratch, a.y, states(a));
  }
  void backward(const LayerArgs& a) const override {
    const RnnDims d = dims(a.in_shapes[0], a.n);
    const RnnStates st = states(a);
    if (a.training && cell_masks()) {
      rnn_backward(d, a.x[0], a.params[0], a.params[1], a.mask, a.cache, a.dy, a.scratch, a.dx[0],
                   a.dparams[0], a.dparams[1], use_bias_ ? a.dparams[2] : nullptr, st,
                   cell_mask_views(d, a.cache));
      return;
    }
    if (!a.training || dropout_ == 0.0) {
      rnn_backward(d, a.x[0], a.params[0], a.params[1], a.mask, a.cache, a.dy, a.scratch, a.dx[0],
                   a.dparams[0], a.dparams[1], use_bias_ ? a.dparams[2] : nullptr, st);
      return;
    }
    const float* mask = a.cache + rnn_cache_floats(d);
    const float* xd = mask + static_cast<size_t>(d.n) * d.in;
    const size_t nti = static_cast<size_t>(d.n) * d.t * d.in;
    float* dxd = a.dx[0] ? a.scratch + rnn_scratch_floats(d) : nullptr;
    if (dxd) std::fill_n(dxd, nti, 0.0f);
    rnn_backward(d, xd, a.params[0], a.params[1], a.mask, a.cache, a.dy, a.scratch, dxd,
                 a.dparams[0], a.dparams[1], use_bias_ ? a.dparams[2] : nullptr, st);
    if (!dxd) return;
    for (size_t o = 0; o < nti; ++o)
      a.dx[0][o] += dxd[o] * mask[(o / (static_cast<size_t>(d.t) * d.in)) * d.in + o % d.in];
  }
  double dropout() const { return dropout_; }
  double recurrent_dropout() const { return rdropout_; }
  MaskUse mask_use() const override { return MaskUse::kConsume; }
  bool passes_mask() const override { return d_.return_sequences; }
  // Regularizers are refused by Model::training_refusal, which reads every layer's config.
  std::string training_refusal() const override { return {}; }

  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["return_sequences"] = d_.return_sequences;
    j["return_state"] = return_state_;
    j["go_backwards"] = d_.go_backwards;
    j["stateful"] = false;
    j["unroll"] = unroll_;
    j["zero_output_for_mask"] = d_.zero_masked_output;
    j["units"] = units_;
    j["activation"] = rnn_act_name(d_.act);
    if (d_.cell != RnnCell::kSimple) j["recurrent_activation"] = rnn_act_name(d_.ract);
    j["use_bias"] = use_bias_;
    j["kernel_initializer"] = initializer_to_keras(kinit_);
    j["recurrent_initializer"] = initializer_to_keras(rinit_);
    j["bias_initializer"] = initializer_to_keras(binit_);
    if (d_.cell == RnnCell::kLstm) j["unit_forget_bias"] = unit_forget_bias_;
    j["kernel_regularizer"] = kreg_;
    j["recurrent_regularizer"] = rreg_;
    j["bias_regularizer"] = breg_;
    j["activity_regularizer"] = nullptr;
    j["kernel_constraint"] = nullptr;
    j["recurrent_constraint"] = nullptr;
    j["bias_constraint"] = nullptr;
    j["dropout"] = dropout_;
    j["recurrent_dropout"] = rdropout_;
    if (d_.cell == RnnCell::kGru) j["reset_after"] = d_.reset_after;
    j["seed"] = nullptr;
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    const double gu = rnn_gates(d_.cell) * static_cast<double>(units_);
    return 2.0 * static_cast<double>(in[0][0]) * gu * static_cast<double>(in[0][1] + units_);
  }

 private:
  RnnDims dims(const std::vector<Shape>& in, int n) const { return dims(in[0], n); }
  // The initial states among the inputs, the final ones among the outputs, and their gradients.
  RnnStates states(const LayerArgs& a) const {
    RnnStates st;
    const bool lstm = d_.cell == RnnCell::kLstm;
    if (a.n_inputs > 1) {
      st.h0 = a.x[1];
      if (lstm) st.c0 = a.x[2];
      if (a.dx) {
        st.dh0 = a.dx[1];
        if (lstm) st.dc0 = a.dx[2];
      }
    }
    if (return_state_) {
      st.h_out = a.extra_y[0];
      if (lstm) st.c_out = a.extra_y[1];
      if (a.extra_dy) {
        st.dh_out = a.extra_dy[0];
        if (lstm) st.dc_out = a.extra_dy[1];
      }
    }
    return st;
  }
  // The kernel applies the masks (recurrent_dropout, or input masks per gate); otherwise an
  // input dropout mask shared by the gates is applied to a copy of the input here.
  bool cell_masks() const { return rdropout_ > 0.0 || (gate_masks_ && dropout_ > 0.0); }
  // The cache after the kernel's: with cell_masks() the masks [N,G,I] (dropout) and [N,G,U]
  // (recurrent_dropout); otherwise the input mask [N,I] and the masked input [N,T,I] (and the
  // scratch its gradient [N,T,I]).
  size_t dropout_floats(const Shape& in, int n, bool cache) const {
    const size_t g = static_cast<size_t>(rnn_gates(d_.cell)), nn = static_cast<size_t>(n);
    if (cell_masks()) {
      if (!cache) return 0;
      return (dropout_ > 0.0 ? nn * g * static_cast<size_t>(in[1]) : 0) +
             (rdropout_ > 0.0 ? nn * g * static_cast<size_t>(units_) : 0);
    }
    if (dropout_ == 0.0) return 0;
    const size_t ni = static_cast<size_t>(n) * static_cast<size_t>(in[1]);
    return (cache ? ni : 0) + ni * static_cast<size_t>(in[0]);
  }
  RnnDropout cell_mask_views(const RnnDims& d, float* cache) const {
    const size_t g = static_cast<size_t>(rnn_gates(d.cell));
    float* p = cache + rnn_cache_floats(d);
    RnnDropout dp;
    if (dropout_ > 0.0) {
      dp.in = p;
      p += static_cast<size_t>(d.n) * g * d.in;
    }
    if (rdropout_ > 0.0) dp.rec = p;
    return dp;
  }
  // Fills the masks of cell_mask_views: per sample, one block per gate, or with one mask for all
  // gates (implementation 2) one block drawn and copied to the others.
  RnnDropout draw_cell_masks(Rng& rng, const RnnDims& d, float* cache) const {
    const RnnDropout dp = cell_mask_views(d, cache);
    const size_t g = static_cast<size_t>(rnn_gates(d.cell));
    auto fill = [&](const float* m, size_t width, double rate) {
      float* mm = const_cast<float*>(m);
      for (int n = 0; n < d.n; ++n) {
        float* s = mm + static_cast<size_t>(n) * g * width;
        draw_mask(rng, rate, gate_masks_ ? g * width : width, s);
        if (!gate_masks_)
          for (size_t k = 1; k < g; ++k) std::copy_n(s, width, s + k * width);
      }
    };
    if (dp.in) fill(dp.in, static_cast<size_t>(d.in), dropout_);
    if (dp.rec) fill(dp.rec, static_cast<size_t>(d.units), rdropout_);
    return dp;
  }
  void draw_input_mask(Rng& rng, size_t m, float* mask) const { draw_mask(rng, dropout_, m, mask); }
  // mask[m] = 0 or 1/(1 - rate), kept with probability 1 - rate, drawn as the Dropout layer does
  // (two 24-bit uniforms per 64-bit draw of the stream).
  static void draw_mask(Rng& rng, double rate, size_t m, float* mask) {
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    const auto threshold = static_cast<uint32_t>(
        std::ceil(static_cast<double>(static_cast<float>(rate)) * 16777216.0));
    for (size_t j = 0; j < m; j += 2) {
      const uint64_t r = rng.next();
      mask[j] = static_cast<uint32_t>(r >> 40) >= threshold ? scale : 0.0f;
      if (j + 1 < m)
        mask[j + 1] = (static_cast<uint32_t>(r >> 8) & 0xFFFFFFu) >= threshold ? scale : 0.0f;
    }
  }

  const char* cls_;
  RnnDims d_;
  int64_t units_ = 0;
  bool use_bias_ = true, unroll_ = false, unit_forget_bias_ = false, return_state_ = false;
  bool gate_masks_ = false;  // one dropout mask per gate (Keras's implementation 1)
  Initializer kinit_, rinit_, binit_;
  Json kreg_, rreg_, breg_;
  double dropout_ = 0.0, rdropout_ = 0.0;
};

std::string keras_snake(const std::string& cls) {
  return cls == "LSTM" ? "lstm" : cls == "GRU" ? "gru" : "simple_rnn";
}

// The recurrent layer a Keras config object ({"class_name": "LSTM", "config": {...}}) describes,
// for Bidirectional's `layer` and `backward_layer`.
std::unique_ptr<Recurrent> make_recurrent(const Json& obj, ConfigMode mode, const std::string& key,
                                          const std::string& prefix, bool flip_backwards) {
  if (!obj.is_object() || !obj.contains("class_name") || !obj["class_name"].is_string())
    throw ConfigError(key, "'" + key +
                               "' must be a layer object {\"class_name\": ..., "
                               "\"config\": ...}; expected LSTM, GRU or SimpleRNN");
  const std::string cls = obj["class_name"].get<std::string>();
  Json cfg = obj.contains("config") && obj["config"].is_object() ? obj["config"] : Json::object();
  const char* known = cls == "LSTM"        ? "LSTM"
                      : cls == "GRU"       ? "GRU"
                      : cls == "SimpleRNN" ? "SimpleRNN"
                                           : nullptr;
  if (!known)
    throw ConfigError(key, "'" + key + "' wraps " + cls + "; expected LSTM, GRU or SimpleRNN");
  // Keras builds the backward copy of `layer` with go_backwards flipped.
  if (flip_backwards) cfg["go_backwards"] = !cfg.value("go_backwards", false);
  const RnnCell cell = cls == "LSTM"  ? RnnCell::kLstm
                       : cls == "GRU" ? RnnCell::kGru
                                      : RnnCell::kSimple;
  LayerConfig c(cfg, mode, known);
  // Keras names the halves forward_<name> and backward_<name> (tf.keras: forward_lstm, ...).
  const std::string inner = cfg.contains("name") && cfg["name"].is_string()
                                ? cfg["name"].get<std::string>()
                                : keras_snake(cls);
  c.ignore("name");
  auto layer = std::make_unique<Recurrent>(cell, known, c, prefix.empty() ? inner : prefix + inner);
  c.finish([&layer] { return written_config(*layer); });
  return layer;
}

enum class MergeMode { kConcat, kSum, kMul, kAve };

// Bidirectional (keras/src/layers/rnn/bidirectional.py): the wrapped layer runs forward and a
// second copy (its own weights, `backward_layer` when given) over reversed time; with
// return_sequences the backward output is reversed back so both halves align by time step, then
// the two are merged. Weights: the forward layer's, then the backward layer's. Each half is a
// whole recurrent layer with its own cache, so it draws its own dropout masks (forward first,
// from the model's stream), as Keras's two layers do. With return_state the layer's extra
// outputs are the forward half's states, then the backward half's; initial states (Keras's
// initial_state) are split half and half in the same order.
class Bidirectional final : public Layer {
 public:
  Bidirectional(LayerConfig& c, const std::string& name) : Layer(name) {
    const Json* inner = c.get_raw("layer");
    if (!inner) c.fail("layer", "a recurrent layer to wrap (LSTM, GRU or SimpleRNN)");
    fwd_ = make_recurrent(*inner, c.mode(), "layer", "forward_", false);
    const Json* back = c.get_raw("backward_layer");
    bwd_ = back ? make_recurrent(*back, c.mode(), "backward_layer", "", false)
                : make_recurrent(*inner, c.mode(), "layer", "backward_", true);
    if (!back) backward_given_ = false;
    const std::string m =
        c.get_string("merge_mode", std::string("concat"), {"concat", "sum", "mul", "ave"});
    merge_ = m == "concat" ? MergeMode::kConcat
             : m == "sum"  ? MergeMode::kSum
             : m == "mul"  ? MergeMode::kMul
                           : MergeMode::kAve;
    // tf.keras >= 2.2.4-tf and Keras 3 make both halves output zeros at masked steps.
    fwd_->set_zero_masked_output(fwd_->return_sequences());
    bwd_->set_zero_masked_output(bwd_->return_sequences());
    if (fwd_->return_state() != bwd_->return_state())
      c.fail("backward_layer", "the same return_state as 'layer'");
    if (fwd_->return_sequences() != bwd_->return_sequences())
      c.fail("backward_layer", "the same return_sequences as 'layer'");
    if (merge_ != MergeMode::kConcat && fwd_->units() != bwd_->units())
      c.fail("backward_layer", "as many units as 'layer' with merge_mode " + m);
  }
  const char* class_name() const override { return "Bidirectional"; }
  int optional_inputs() const override { return fwd_->num_states() + bwd_->num_states(); }

  Shape output_shape(const std::vector<Shape>& in) const override {
    if (in.size() > 1 && fwd_->num_states() != bwd_->num_states())
      throw ModelError(
          "takes initial states split half and half between its layers (as Keras "
          "does), which needs as many states in each; expected the same recurrent "
          "class for 'layer' and 'backward_layer', got " +
          std::string(fwd_->class_name()) + " and " + bwd_->class_name());
    Shape f = fwd_->output_shape(half_inputs(in, false));
    const Shape b = bwd_->output_shape(half_inputs(in, true));
    if (merge_ == MergeMode::kConcat) f[f.rank() - 1] += b[b.rank() - 1];
    return f;
  }
  std::vector<Shape> extra_output_shapes(const std::vector<Shape>& in) const override {
    auto s = fwd_->extra_output_shapes(in);
    for (const Shape& b : bwd_->extra_output_shapes(in)) s.push_back(b);
    return s;
  }
  std::vector<ParamSpec> param_specs(const std::vector<Shape>& in) const override {
    auto p = fwd_->param_specs(in);
    for (auto& s : bwd_->param_specs(in)) p.push_back(s);
    return p;
  }
  size_t cache_floats(const std::vector<Shape>& in, int n) const override {
    const std::vector<Shape> seq{in[0]};
    return fwd_->cache_floats(seq, n) + bwd_->cache_floats(seq, n) + half_floats(in, n, *fwd_) +
           half_floats(in, n, *bwd_);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int n) const override {
    const std::vector<Shape> seq{in[0]};
    return std::max(fwd_->scratch_floats(seq, n), bwd_->scratch_floats(seq, n)) +
           half_floats(in, n, *fwd_) + half_floats(in, n, *bwd_);
  }
  void forward(const LayerArgs& a) const override {
    const Views v = views(a);
    Half f, b;
    half_args(a, v, false, f);
    half_args(a, v, true, b);
    fwd_->forward(f.a);
    bwd_->forward(b.a);
    merge_forward(v, a);
  }
  void backward(const LayerArgs& a) const override {
    const Views v = views(a);
    merge_backward(v, a, v.dyf, v.dyb);
    Half f, b;
    half_args(a, v, false, f);
    half_args(a, v, true, b);
    fwd_->backward(f.a);
    bwd_->backward(b.a);
  }
  MaskUse mask_use() const override { return MaskUse::kConsume; }
  bool passes_mask() const override { return fwd_->return_sequences(); }
  std::string training_refusal() const override {
    const std::string f = fwd_->training_refusal();
    return f.empty() ? bwd_->training_refusal() : f;
  }
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    Json inner = fwd_->keras_config();
    inner["name"] = fwd_->name().substr(std::string("forward_").size());
    j["layer"] = {{"module", "keras.layers"},
                  {"class_name", fwd_->class_name()},
                  {"config", inner},
                  {"registered_name", nullptr}};
    if (backward_given_)
      j["backward_layer"] = {{"module", "keras.layers"},
                             {"class_name", bwd_->class_name()},
                             {"config", bwd_->keras_config()},
                             {"registered_name", nullptr}};
    const char* names[] = {"concat", "sum", "mul", "ave"};
    j["merge_mode"] = names[static_cast<int>(merge_)];
    return j;
  }
  double forward_flops(const std::vector<Shape>& in) const override {
    return fwd_->forward_flops(in) + bwd_->forward_flops(in);
  }

 private:
  // The cache holds each half's own cache, then the halves' outputs yf and yb (each shaped as
  // its layer's output); the scratch is the larger half's, then the halves' output gradients.
  struct Views {
    RnnDims df, db;
    float *cf, *cb, *yf, *yb, *dyf, *dyb;
  };
  // One half's call: the sequence and that half's initial states as inputs, its own cache and
  // output, its weights, and its share of the layer's extra outputs. The recurrent layer reads
  // only in_shapes[0], the sequence's shape, so the layer's own shapes are handed on.
  struct Half {
    LayerArgs a;
    const float* x[3] = {};
    float* dx[3] = {};
  };
  static size_t half_floats(const std::vector<Shape>& in, int n, const Recurrent& r) {
    return rows_floats(n, r.output_shape({in[0]}));
  }
  // The inputs of one half: the sequence, and (when given) its half of the initial states.
  std::vector<Shape> half_inputs(const std::vector<Shape>& in, bool back) const {
    std::vector<Shape> h{in[0]};
    if (in.size() == 1) return h;
    const size_t s0 = back ? 1 + static_cast<size_t>(fwd_->num_states()) : 1;
    const size_t ns = static_cast<size_t>((back ? bwd_ : fwd_)->num_states());
    for (size_t k = 0; k < ns && s0 + k < in.size(); ++k) h.push_back(in[s0 + k]);
    return h;
  }
  size_t nf_params() const { return fwd_->use_bias() ? 3 : 2; }
  Views views(const LayerArgs& a) const {
    Views v{};
    const std::vector<Shape> seq{a.in_shapes[0]};
    v.df = fwd_->dims(a.in_shapes[0], a.n);
    v.db = bwd_->dims(a.in_shapes[0], a.n);
    const size_t half_f = half_floats(seq, a.n, *fwd_);
    v.cf = a.cache;
    v.cb = v.cf + fwd_->cache_floats(seq, a.n);
    v.yf = v.cb + bwd_->cache_floats(seq, a.n);
    v.yb = v.yf + half_f;
    v.dyf = a.scratch + std::max(fwd_->scratch_floats(seq, a.n), bwd_->scratch_floats(seq, a.n));
    v.dyb = v.dyf + half_f;
    return v;
  }
  void half_args(const LayerArgs& a, const Views& v, bool back, Half& h) const {
    const Recurrent& r = back ? *bwd_ : *fwd_;
    const int ns = r.num_states();
    const int s0 = back ? 1 + fwd_->num_states() : 1;  // its first initial state among the inputs
    const int e0 = back ? fwd_->num_states() : 0;      // its first state among the extra outputs
    const size_t p0 = back ? nf_params() : 0;
    const bool init = a.n_inputs > 1;
    h.x[0] = a.x[0];
    if (a.dx) h.dx[0] = a.dx[0];
    for (int k = 0; init && k < ns; ++k) {
      h.x[1 + k] = a.x[s0 + k];
      if (a.dx) h.dx[1 + k] = a.dx[s0 + k];
    }
    LayerArgs& s = h.a;
    s.n = a.n;
    s.training = a.training;
    s.n_inputs = init ? 1 + ns : 1;
    s.in_shapes = a.in_shapes;
    s.x = h.x;
    s.y = back ? v.yb : v.yf;
    s.params = a.params + p0;
    s.cache = back ? v.cb : v.cf;
    s.scratch = a.scratch;
    s.rng = a.rng;
    s.mask = a.mask;
    s.dy = back ? v.dyb : v.dyf;
    s.dx = a.dx ? h.dx : nullptr;
    s.dparams = a.dparams ? a.dparams + p0 : nullptr;
    if (r.return_state()) {
      s.extra_y = a.extra_y ? a.extra_y + e0 : nullptr;
      s.extra_dy = a.extra_dy ? a.extra_dy + e0 : nullptr;
    }
  }
  // Row and step of the backward half that pairs with forward time step s (reversed back when
  // the halves are sequences).
  const float* back_at(const Views& v, int n, int s, int steps, int ub) const {
    const int sb = steps > 1 ? steps - 1 - s : 0;
    return v.yb + (static_cast<size_t>(n) * steps + sb) * ub;
  }
  void merge_forward(const Views& v, const LayerArgs& a) const {
    const int steps = fwd_->return_sequences() ? v.df.t : 1, uf = v.df.units, ub = v.db.units;
    for (int n = 0; n < a.n; ++n)
      for (int s = 0; s < steps; ++s) {
        const float* f = v.yf + (static_cast<size_t>(n) * steps + s) * uf;
        const float* b = back_at(v, n, s, steps, ub);
        if (merge_ == MergeMode::kConcat) {
          float* y = a.y + (static_cast<size_t>(n) * steps + s) * (uf + ub);
          std::copy_n(f, uf, y);
          std::copy_n(b, ub, y + uf);
          continue;
        }
        float* y = a.y + (static_cast<size_t>(n) * steps + s) * uf;
        for (int j = 0; j < uf; ++j)
          y[j] = merge_ == MergeMode::kSum   ? f[j] + b[j]
                 : merge_ == MergeMode::kMul ? f[j] * b[j]
                                             : (f[j] + b[j]) / 2.0f;
      }
  }
  void merge_backward(const Views& v, const LayerArgs& a, float* dyf, float* dyb) const {
    const int steps = fwd_->return_sequences() ? v.df.t : 1, uf = v.df.units, ub = v.db.units;
    for (int n = 0; n < a.n; ++n)
      for (int s = 0; s < steps; ++s) {
        const size_t fo = (static_cast<size_t>(n) * steps + s) * uf;
        const size_t bo = static_cast<size_t>(back_at(v, n, s, steps, ub) - v.yb);
        if (merge_ == MergeMode::kConcat) {
          const float* dy = a.dy + (static_cast<size_t>(n) * steps + s) * (uf + ub);
          std::copy_n(dy, uf, dyf + fo);
          std::copy_n(dy + uf, ub, dyb + bo);
          continue;
        }
        const float* dy = a.dy + fo;
        for (int j = 0; j < uf; ++j) {
          const float g = dy[j];
          dyf[fo + j] = merge_ == MergeMode::kSum   ? g
                        : merge_ == MergeMode::kMul ? g * v.yb[bo + j]
                                                    : g / 2.0f;
          dyb[bo + j] = merge_ == MergeMode::kSum   ? g
                        : merge_ == MergeMode::kMul ? g * v.yf[fo + j]
                                                    : g / 2.0f;
        }
      }
  }

  std::unique_ptr<Recurrent> fwd_, bwd_;
  bool backward_given_ = true;
  MergeMode merge_ = MergeMode::kConcat;
};

}  // namespace

std::unique_ptr<Layer> make_bidirectional(LayerConfig& c, const std::string& name) {
  return std::make_unique<Bidirectional>(c, name);
}
std::vector<LayerExample> bidirectional_examples() {
  const Json lstm = {{"class_name", "LSTM"}, {"config", {{"units", 2}}}};
  const Json gru_seq = {{"class_name", "GRU"},
                        {"config", {{"units", 2}, {"return_sequences", true}}}};
  const Json rnn_seq = {{"class_name", "SimpleRNN"},
                        {"config", {{"units", 3}, {"return_sequences", true}}}};
  return {
      {{{"layer", lstm}}, {Shape{4, 2}}},
      {{{"layer", gru_seq}, {"merge_mode", "mul"}}, {Shape{3, 2}}},
      {{{"layer", rnn_seq},
        {"merge_mode", "ave"},
        {"backward_layer",
         {{"class_name", "SimpleRNN"},
          {"config",
           {{"units", 3},
            {"return_sequences", true},
            {"go_backwards", true},
            {"activation", "relu"}}}}}},
       {Shape{4, 2}}},
      {{{"layer", lstm}, {"merge_mode", "sum"}}, {Shape{1, 3}}},
      // dropout and recurrent_dropout: each half draws its own masks (the gradient check
      // draws the same ones on every pass); GRU's input dropout alone masks a copy of x.
      {{{"layer",
         {{"class_name", "LSTM"},
          {"config",
           {{"units", 2},
            {"dropout", 0.3},
            {"recurrent_dropout", 0.4},
            {"return_sequences", true}}}}}},
       {Shape{4, 3}},
       true},
      {{{"layer", {{"class_name", "GRU"}, {"config", {{"units", 2}, {"dropout", 0.3}}}}},
        {"merge_mode", "ave"}},
       {Shape{3, 2}},
       true},
      // return_state (forward states, then backward) and initial_state split half and half.
      {{{"layer", {{"class_name", "LSTM"}, {"config", {{"units", 2}, {"return_state", true}}}}},
        {"merge_mode", "sum"}},
       {Shape{3, 2}, Shape{2}, Shape{2}, Shape{2}, Shape{2}}},
      {{{"layer",
         {{"class_name", "GRU"},
          {"config", {{"units", 2}, {"return_state", true}, {"return_sequences", true}}}}}},
       {Shape{3, 2}}},
      {{{"layer",
         {{"class_name", "SimpleRNN"},
          {"config",
           {{"units", 2}, {"return_state", true}, {"recurrent_dropout", 0.3}, {"dropout", 0.2}}}}}},
       {Shape{3, 2}, Shape{2}, Shape{2}},
       true}};
}

std::unique_ptr<Layer> make_simple_rnn(LayerConfig& c, const std::string& name) {
  return std::make_unique<Recurrent>(RnnCell::kSimple, "SimpleRNN", c, name);
}
std::unique_ptr<Layer> make_lstm(LayerConfig& c, const std::string& name) {
  return std::make_unique<Recurrent>(RnnCell::kLstm, "LSTM", c, name);
}
std::unique_ptr<Layer> make_gru(LayerConfig& c, const std::string& name) {
  return std::make_unique<Recurrent>(RnnCell::kGru, "GRU", c, name);
}

std::vector<LayerExample> simple_rnn_examples() {
  return {
      {{{"units", 3}}, {Shape{4, 2}}},
      {{{"units", 2}, {"return_sequences", true}, {"go_backwards", true}}, {Shape{3, 3}}},
      {{{"units", 3}, {"activation", "relu"}, {"use_bias", false}}, {Shape{1, 2}}},
      {{{"units", 3}, {"dropout", 0.4}, {"return_sequences", true}}, {Shape{3, 3}}, true},
      // return_state and initial_state.
      {{{"units", 3}, {"return_state", true}}, {Shape{3, 2}, Shape{3}}},
      {{{"units", 2}, {"return_state", true}, {"return_sequences", true}}, {Shape{4, 2}}},
      // recurrent_dropout (the gradient check draws the same masks on every pass).
      {{{"units", 3}, {"recurrent_dropout", 0.4}, {"return_sequences", true}}, {Shape{4, 2}}, true},
      {{{"units", 3}, {"recurrent_dropout", 0.3}, {"dropout", 0.3}},
       {Shape{3, 2}, Shape{3}},
       true}};
}
std::vector<LayerExample> lstm_examples() {
  return {
      {{{"units", 3}}, {Shape{4, 2}}},
      {{{"units", 2}, {"return_sequences", true}, {"go_backwards", true}}, {Shape{5, 3}}},
      {{{"units", 3},
        {"activation", "relu"},
        {"recurrent_activation", "hard_sigmoid"},
        {"use_bias", false}},
       {Shape{3, 2}}},
      {{{"units", 2}, {"return_sequences", true}}, {Shape{1, 1}}},
      {{{"units", 2}, {"dropout", 0.5}}, {Shape{4, 3}}, true},
      // return_state and initial_state (the seq2seq encoder and decoder).
      {{{"units", 3}, {"return_state", true}}, {Shape{4, 2}}},
      {{{"units", 2}, {"return_sequences", true}}, {Shape{3, 2}, Shape{2}, Shape{2}}},
      {{{"units", 2},
        {"return_state", true},
        {"go_backwards", true},
        {"recurrent_activation", "hard_sigmoid"}},
       {Shape{3, 3}, Shape{2}, Shape{2}}},
      {{{"units", 2}, {"return_state", true}, {"dropout", 0.5}},
       {Shape{3, 2}, Shape{2}, Shape{2}},
       true},
      // recurrent_dropout: per-gate masks (Keras 3's implementation 1), and one mask for all
      // gates (a Keras 2 file's implementation 2).
      {{{"units", 2}, {"recurrent_dropout", 0.4}, {"dropout", 0.3}, {"return_sequences", true}},
       {Shape{4, 3}},
       true},
      {{{"units", 2}, {"recurrent_dropout", 0.4}, {"implementation", 2}, {"return_state", true}},
       {Shape{3, 2}, Shape{2}, Shape{2}},
       true}};
}
std::vector<LayerExample> gru_examples() {
  return {
      {{{"units", 3}}, {Shape{4, 2}}},
      {{{"units", 3}, {"reset_after", false}, {"return_sequences", true}}, {Shape{4, 2}}},
      {{{"units", 2}, {"reset_after", false}, {"go_backwards", true}}, {Shape{3, 3}}},
      {{{"units", 2}, {"use_bias", false}, {"return_sequences", true}}, {Shape{1, 2}}},
      {{{"units", 2}, {"dropout", 0.3}, {"reset_after", false}}, {Shape{3, 4}}, true},
      {{{"units", 2}, {"dropout", 0.3}, {"go_backwards", true}}, {Shape{3, 4}}, true},
      // return_state and initial_state, both reset_after forms.
      {{{"units", 3}, {"return_state", true}}, {Shape{3, 2}, Shape{3}}},
      {{{"units", 2}, {"return_state", true}, {"reset_after", false}, {"return_sequences", true}},
       {Shape{4, 2}, Shape{2}}},
      // recurrent_dropout, both reset_after forms.
      {{{"units", 3}, {"recurrent_dropout", 0.4}, {"dropout", 0.3}}, {Shape{4, 2}}, true},
      {{{"units", 2},
        {"recurrent_dropout", 0.5},
        {"reset_after", false},
        {"return_sequences", true}},
       {Shape{3, 3}, Shape{2}},
       true}};
}

}  // namespace nnfleet
