// Recurrent kernels: SimpleRNN, LSTM and GRU over a whole sequence, forward and backward through
// time, with Keras's cell math, weight layouts and gate orders.
// Dimension letters: N batch rows, T time steps, I input features, U units, G gates (SimpleRNN 1,
// LSTM 4 in the order i f c o, GRU 3 in the order z r h); GU = G * U.
// Weights use Keras's layout: kernel w [I,GU], recurrent kernel r [U,GU], bias b [GU], or for a
// GRU with reset_after b [2,GU] (row 0 the input bias, row 1 the recurrent bias).
// The fast kernels make the input projection of all steps with one GEMM and the recurrent
// product with one GEMM per step (the GEMM library of gemm.h); the gates' sigmoid and tanh go
// through the 8-lane kernels of vec_math.h and the rest of the element-wise math is plain scalar
// code, so results do not depend on buffer alignment. Each has a naive `_ref` twin
// (no GEMM, double accumulation) used only by tests.
#pragma once

#include <cstddef>

namespace nnfleet {

enum class RnnCell { kSimple, kLstm, kGru };
// The activations a recurrent cell accepts; all are differentiated from their output.
enum class RnnAct {
  kLinear,
  kRelu,
  kSigmoid,
  kTanh,
  kHardSigmoid,        // Keras 3: clip(x / 6 + 0.5, 0, 1)
  kHardSigmoidKeras2,  // Keras 2 and tf.keras: clip(0.2 x + 0.5, 0, 1)
};

struct RnnDims {
  int n = 0, t = 0, in = 0, units = 0;
  RnnCell cell = RnnCell::kLstm;
  RnnAct act = RnnAct::kTanh;      // SimpleRNN output, LSTM candidate and o * act(c), GRU candidate
  RnnAct ract = RnnAct::kSigmoid;  // LSTM i f o and GRU z r gates
  bool reset_after = true;         // GRU only
  bool go_backwards = false;       // step s reads time T-1-s; outputs stay in step order
  bool return_sequences = false;   // y [N,T,U] in step order, else the last step's h [N,U]
  bool zero_masked_output = false;  // with a mask: a masked step outputs 0 (else the carried h)
  bool in_dropout = false;          // scratch for RnnDropout::in
  bool rec_dropout = false;         // scratch for RnnDropout::rec
};

// Keras's dropout inside the cell (training only): one mask per sample and sequence, drawn when
// the sequence starts and reused at every step, entries 0 or 1 / (1 - rate). in [N,G,I] scales
// the input that gate g's block of the kernel sees, rec [N,G,U] the previous state that gate g's
// block of the recurrent kernel sees (Keras's implementation 1; a mask shared by every gate is G
// equal blocks). The GRU's own update h = z h_{s-1} + (1 - z) h~ uses the unmasked state, as in
// Keras. Null: no mask. RnnDims::in_dropout and rec_dropout make room for them in the scratch.
struct RnnDropout {
  const float* in = nullptr;
  const float* rec = nullptr;
};

// A layer's initial and final states, each [N,U] (LSTM: h and c; SimpleRNN and GRU: h only, the c
// pointers unused). Every pointer may be null: a null initial state is zeros, a null output is
// not written, a null gradient is zeros (forward reads h0, c0 and writes h_out, c_out; backward
// reads h0, c0, dh_out, dc_out and accumulates into dh0, dc0). The final state is the state after
// the last step (with a mask, the state carried over the last real step), as Keras's return_state.
struct RnnStates {
  const float* h0 = nullptr;
  const float* c0 = nullptr;
  float* h_out = nullptr;
  float* c_out = nullptr;
  const float* dh_out = nullptr;
  const float* dc_out = nullptr;
  float* dh0 = nullptr;
  float* dc0 = nullptr;
};

// Gates per cell (1, 4, 3).
int rnn_gates(RnnCell c);
// Floats of the cache forward fills and backward reads.
size_t rnn_cache_floats(const RnnDims& d);
// Floats of scratch space one forward or backward call uses.
size_t rnn_scratch_floats(const RnnDims& d);

// Forward over the sequence x [N,T,I] from the initial state st (zeros by default). b may be null
// (use_bias false).
// mask [N,T] (time order; 1 = real step, 0 = skipped) may be null: a skipped step keeps the state
// (h, and c for LSTM) and outputs the carried h, or 0 with zero_masked_output, as Keras does.
// Writes y (see RnnDims::return_sequences), the cache, and the final states st asks for.
void rnn_forward(const RnnDims& d, const float* x, const float* w, const float* r, const float* b,
                 const float* mask, float* cache, float* scratch, float* y,
                 const RnnStates& st = RnnStates{}, const RnnDropout& dp = RnnDropout{});
// Backward through time from dy (shaped as y). Accumulates (+=): dx [N,T,I] (skipped when null),
// dw [I,GU], dr [U,GU], db (shaped as b; skipped when null), and the initial states' gradients
// st asks for; st's initial states must be the forward's. cache is the forward's.
void rnn_backward(const RnnDims& d, const float* x, const float* w, const float* r,
                  const float* mask, const float* cache, const float* dy, float* scratch, float* dx,
                  float* dw, float* dr, float* db, const RnnStates& st = RnnStates{},
                  const RnnDropout& dp = RnnDropout{});

// Naive twins with the same contract (they allocate; tests only).
void rnn_forward_ref(const RnnDims& d, const float* x, const float* w, const float* r,
                     const float* b, const float* mask, float* y, const RnnStates& st = RnnStates{},
                     const RnnDropout& dp = RnnDropout{});
void rnn_backward_ref(const RnnDims& d, const float* x, const float* w, const float* r,
                      const float* b, const float* mask, const float* dy, float* dx, float* dw,
                      float* dr, float* db, const RnnStates& st = RnnStates{},
                      const RnnDropout& dp = RnnDropout{});

}  // namespace nnfleet
