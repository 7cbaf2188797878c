// ONNX exporters of the recurrent kinds: SimpleRNN -> RNN, LSTM -> LSTM, GRU -> GRU, and
// Bidirectional as a forward and a reverse operator merged as Keras merges them.
//  - Gate order: Keras's LSTM kernel holds i, f, c, o; ONNX's W holds i, o, f, c, so the blocks
//    are reordered. GRU's z, r, h are the same in both.
//  - GRU reset_after=true (bias [2, 3U]: input and recurrent bias) is linear_before_reset=1 with
//    Wb and Rb; reset_after=false (one bias) is linear_before_reset=0 with Rb = 0.
//  - Keras's [batch, time, features] becomes ONNX's [time, batch, features] (layout 0).
//  - A Keras mask reaches the operator as sequence_lens, the number of kept steps of each sample:
//    the same computation as Keras's when the padding is at the end of the sequence (the kept
//    steps first). Masked outputs are zeros in ONNX, so return_sequences with a mask needs
//    zero_output_for_mask (Keras's Bidirectional sets it) unless the layer goes backwards.
//  - Keras's initial_state ([N, U] tensors: h, and c for LSTM) is ONNX's initial_h / initial_c
//    ([1, N, U]); return_state's h and c are Y_h / Y_c squeezed to [N, U]. Bidirectional's are
//    the forward operator's, then the reverse one's.
#include <limits>

#include "io/onnx/onnx_builder.h"

namespace nnfleet::onnx_export {
namespace {

enum class Cell { kSimple, kLstm, kGru };

int gates(Cell c) { return c == Cell::kSimple ? 1 : c == Cell::kLstm ? 4 : 3; }

// The ONNX name and (alpha, beta) of a recurrent activation as nnfleet's keras_config names it.
struct RnnActivation {
  std::string op;
  bool has_alpha = false;
  float alpha = 0.0f, beta = 0.0f;
};

RnnActivation rnn_activation(const LayerNode& n, const Json& cfg, const char* key,
                             const char* def) {
  const std::string a = cfg.value(key, std::string(def));
  if (a == "tanh") return {"Tanh"};
  if (a == "sigmoid") return {"Sigmoid"};
  if (a == "relu") return {"Relu"};
  if (a == "linear") return {"Affine", true, 1.0f, 0.0f};
  if (a == "hard_sigmoid") return {"HardSigmoid", true, 1.0f / 6.0f, 0.5f};  // Keras 3
  if (a == "hard_sigmoid_keras2") return {"HardSigmoid", true, 0.2f, 0.5f};
  refuse(n, "the recurrent activation '" + a + "' has no ONNX form");
}

struct Converted {
  std::string w, r, b;
  std::vector<RnnActivation> acts;
  int64_t units = 0;
  bool reset_after = false;
};

// Keras kernel [I, G*U], recurrent kernel [U, G*U] and bias ([G*U] or [2, G*U]) as ONNX's
// W [1, G*U, I], R [1, G*U, U], B [1, 2*G*U], with LSTM's blocks reordered.
Converted convert(Builder& b, const LayerNode& n, const Json& cfg, Cell cell, const float* const* p,
                  int64_t in, const std::string& name) {
  Converted c;
  const int g = gates(cell);
  c.units = cfg.value("units", int64_t{0});
  const int64_t u = c.units, gu = g * u;
  const bool use_bias = cfg.value("use_bias", true);
  c.reset_after = cell == Cell::kGru && cfg.value("reset_after", false);
  // ONNX block j reads Keras block order[j].
  std::vector<int> order(static_cast<size_t>(g));
  for (int j = 0; j < g; ++j) order[static_cast<size_t>(j)] = j;
  if (cell == Cell::kLstm) order = {0, 3, 1, 2};
  auto rows = [&](const float* k, int64_t fan_in) {
    std::vector<float> out(static_cast<size_t>(gu * fan_in));
    for (int j = 0; j < g; ++j)
      for (int64_t v = 0; v < u; ++v)
        for (int64_t i = 0; i < fan_in; ++i)
          out[static_cast<size_t>((j * u + v) * fan_in + i)] =
              k[i * gu + order[static_cast<size_t>(j)] * u + v];
    return out;
  };
  c.w = b.weight(name + "/W", {1, gu, in}, rows(p[0], in));
  c.r = b.weight(name + "/R", {1, gu, u}, rows(p[1], u));
  std::vector<float> bias(static_cast<size_t>(2 * gu), 0.0f);
  if (use_bias) {
    for (int half = 0; half < (c.reset_after ? 2 : 1); ++half)
      for (int j = 0; j < g; ++j)
        for (int64_t v = 0; v < u; ++v)
          bias[static_cast<size_t>(half * gu + j * u + v)] =
              p[2][half * gu + order[static_cast<size_t>(j)] * u + v];
  }
  c.b = b.weight(name + "/B", {1, 2 * gu}, bias);
  if (cell == Cell::kSimple) {
    c.acts = {rnn_activation(n, cfg, "activation", "tanh")};
  } else {
    const RnnActivation f = rnn_activation(n, cfg, "recurrent_activation", "sigmoid");
    const RnnActivation h = rnn_activation(n, cfg, "activation", "tanh");
    c.acts = cell == Cell::kLstm ? std::vector<RnnActivation>{f, h, h}
                                 : std::vector<RnnActivation>{f, h};
  }
  return c;
}

// What one ONNX recurrent operator returns in Keras's terms: the layer's output (the sequence
// [N, T, U] with steps in input order, or the last output [N, U]) and the final h and c [N, U]
// (c for LSTM only).
struct CellOut {
  std::string y, h, c;
};

// One ONNX recurrent operator over x_t ([T, N, I]); `reverse` reads the sequence from its end.
// h0 and c0 ([N, U], "" when none) are the initial states.
CellOut run_cell(Builder& b, const LayerNode& n, const Json& cfg, Cell cell, const float* const* p,
                 const std::string& x_t, const std::string& lens, bool reverse, bool sequences,
                 const std::string& name, const std::string& h0 = "", const std::string& c0 = "") {
  const int64_t in = n.plan.in_shapes[0][1];
  const Converted c = convert(b, n, cfg, cell, p, in, name);
  std::vector<std::string> names;
  std::vector<float> alphas, betas;
  for (const auto& a : c.acts) {
    names.push_back(a.op);
    if (a.has_alpha) {
      alphas.push_back(a.alpha);
      betas.push_back(a.beta);
    }
  }
  std::vector<Attr> attrs = {attr("hidden_size", c.units), attr_ss("activations", names),
                             attr_s("direction", reverse ? "reverse" : "forward")};
  if (!alphas.empty()) {
    attrs.push_back(attr_fs("activation_alpha", alphas));
    attrs.push_back(attr_fs("activation_beta", betas));
  }
  if (cell == Cell::kGru) attrs.push_back(attr("linear_before_reset", c.reset_after ? 1 : 0));
  const char* op = cell == Cell::kSimple ? "RNN" : cell == Cell::kLstm ? "LSTM" : "GRU";
  // ONNX's initial_h / initial_c are [num_directions = 1, N, U].
  std::vector<std::string> ins = {x_t, c.w, c.r, c.b, lens};
  const auto directions = [&](const std::string& s) {
    return b.node("Unsqueeze", {s, b.ints(name + "/axes0", {0})}, name);
  };
  if (!h0.empty()) ins.push_back(directions(h0));
  if (!c0.empty()) ins.push_back(directions(c0));
  std::vector<std::string> outs;
  b.node(op, ins, name, attrs, cell == Cell::kLstm ? 3 : 2, &outs);
  CellOut r;
  const auto squeeze0 = [&](const std::string& s) {
    return b.node("Squeeze", {s, b.ints(name + "/axes0", {0})}, name);
  };
  r.h = squeeze0(outs[1]);  // Y_h [1, N, U]: the state after the last kept step
  if (cell == Cell::kLstm) r.c = squeeze0(outs[2]);
  if (!sequences) {
    r.y = r.h;
    return r;
  }
  const std::string y = b.node("Squeeze", {outs[0], b.ints(name + "/axes1", {1})}, name);
  r.y = b.transpose(y, {1, 0, 2}, name);  // [N, T, U]; a reverse operator's Y is in input order
  return r;
}

std::string lens_of(Builder& b, const LayerNode& n) {
  return n.mask.empty() ? std::string() : b.lengths_of_mask(n.mask, n.layer.name());
}

// With a mask, Keras's return_sequences output at a masked step is the previous output
// (zero_output_for_mask false) or zeros; ONNX writes zeros. Going forwards the masked steps
// follow the kept ones, so they would repeat the last kept output: refused. Going backwards
// (go_backwards) they come first, before any output: zeros in Keras too, unless an initial state
// is carried into them.
void check_masked_sequences(const LayerNode& n, const Json& cfg, bool initial_state = false) {
  if (n.mask.empty() || !cfg.value("return_sequences", false) ||
      cfg.value("zero_output_for_mask", false))
    return;
  if (!cfg.value("go_backwards", false))
    refuse(n,
           "return_sequences with a mask repeats the last kept output at masked steps in "
           "Keras (zero_output_for_mask false), and ONNX writes zeros there; expected "
           "zero_output_for_mask true");
  if (initial_state)
    refuse(n,
           "go_backwards with return_sequences, a mask and an initial_state carries the initial "
           "state into the masked steps (zero_output_for_mask false), and ONNX writes zeros "
           "there; expected zero_output_for_mask true or no initial_state");
}

std::string single(Builder& b, const LayerNode& n, Cell cell) {
  const Json& cfg = n.config;
  const bool initial_state = n.inputs.size() > 1;
  check_masked_sequences(n, cfg, initial_state);
  const bool backwards = cfg.value("go_backwards", false);
  const bool sequences = cfg.value("return_sequences", false);
  const std::string& name = n.layer.name();
  const std::string x_t = b.transpose(n.inputs[0], {1, 0, 2}, name);
  const std::string h0 = initial_state ? n.inputs[1] : "";
  const std::string c0 = initial_state && cell == Cell::kLstm ? n.inputs[2] : "";
  CellOut r = run_cell(b, n, cfg, cell, n.params.data(), x_t, lens_of(b, n), backwards, sequences,
                       name, h0, c0);
  if (backwards && sequences) {
    // Keras's go_backwards sequence is in reading order (its step t read input T-1-t); the
    // masked steps (the last ones of the input) come first in it, zeros in both.
    r.y = b.node("Slice",
                 {r.y, b.ints(name + "/rev_start", {-1}),
                  b.ints(name + "/rev_end", {std::numeric_limits<int64_t>::min()}),
                  b.ints(name + "/rev_axes", {1}), b.ints(name + "/rev_steps", {-1})},
                 name);
  }
  if (cfg.value("return_state", false) && n.extra_out) {
    n.extra_out->push_back(r.h);
    if (cell == Cell::kLstm) n.extra_out->push_back(r.c);
  }
  return r.y;
}

Cell cell_of(const LayerNode& n, const std::string& cls) {
  if (cls == "LSTM") return Cell::kLstm;
  if (cls == "GRU") return Cell::kGru;
  if (cls == "SimpleRNN") return Cell::kSimple;
  refuse(n, "its wrapped layer class '" + cls + "' has no ONNX exporter");
}

}  // namespace

std::string export_simple_rnn(Builder& b, const LayerNode& n) {
  return single(b, n, Cell::kSimple);
}
std::string export_lstm(Builder& b, const LayerNode& n) { return single(b, n, Cell::kLstm); }
std::string export_gru(Builder& b, const LayerNode& n) { return single(b, n, Cell::kGru); }

std::string export_bidirectional(Builder& b, const LayerNode& n) {
  // The forward layer's weights come first, then the backward layer's; the backward layer's
  // sequence output is aligned with the input's steps (Keras reverses it back), as ONNX's reverse
  // direction writes it.
  const Json& fcfg = n.config["layer"]["config"];
  const Json& bcfg = n.config.contains("backward_layer") && n.config["backward_layer"].is_object()
                         ? n.config["backward_layer"]["config"]
                         : fcfg;
  const Cell fc = cell_of(n, n.config["layer"].value("class_name", std::string()));
  const Cell bc = n.config.contains("backward_layer") && n.config["backward_layer"].is_object()
                      ? cell_of(n, n.config["backward_layer"].value("class_name", std::string()))
                      : fc;
  check_masked_sequences(n, fcfg, n.inputs.size() > 1);
  check_masked_sequences(n, bcfg, n.inputs.size() > 1);
  const bool sequences = fcfg.value("return_sequences", false);
  const std::string& name = n.layer.name();
  const std::string x_t = b.transpose(n.inputs[0], {1, 0, 2}, name);
  const std::string lens = lens_of(b, n);
  const size_t fparams = fcfg.value("use_bias", true) ? 3 : 2;
  // Keras's initial_state: the forward layer's states, then the backward layer's.
  const bool initial_state = n.inputs.size() > 1;
  const size_t fstates = fc == Cell::kLstm ? 2 : 1;
  const auto state = [&](size_t k) { return initial_state ? n.inputs[k] : std::string(); };
  const CellOut rf = run_cell(b, n, fcfg, fc, n.params.data(), x_t, lens, false, sequences,
                              name + "/forward", state(1), fc == Cell::kLstm ? state(2) : "");
  const CellOut rb =
      run_cell(b, n, bcfg, bc, n.params.data() + fparams, x_t, lens, true, sequences,
               name + "/backward", state(1 + fstates), bc == Cell::kLstm ? state(2 + fstates) : "");
  const std::string &yf = rf.y, &yb = rb.y;
  // return_state: the forward layer's h (and c), then the backward layer's.
  if (fcfg.value("return_state", false) && n.extra_out) {
    for (const CellOut* r : {&rf, &rb}) {
      n.extra_out->push_back(r->h);
      if (!r->c.empty()) n.extra_out->push_back(r->c);
    }
  }
  const std::string mode = n.config.value("merge_mode", std::string("concat"));
  if (mode == "concat") return b.node("Concat", {yf, yb}, name, {attr("axis", -1)});
  if (mode == "sum") return b.node("Add", {yf, yb}, name);
  if (mode == "mul") return b.node("Mul", {yf, yb}, name);
  if (mode == "ave") return b.node("Mean", {yf, yb}, name);
  refuse(n, "merge_mode '" + mode + "' has no exporter; expected concat, sum, mul or ave");
}

}  // namespace nnfleet::onnx_export
