// Recurrent kernels (see recurrent.h for shapes and the Keras cell equations they follow).
//
// Memory walk. The cache holds, per sample, in this order:
//   gates [N,T,GU]  time order: first x W + b for every step (one GEMM), then overwritten step by
//                   step with the post-activation gates, which backward differentiates from
//   h     [N,T,U]   step order: the state after each step (h_{s-1} feeds step s's GEMM directly,
//                   with row stride T*U, so no copy is made)
//   LSTM: c [N,T,U] and act(c) [N,T,U], step order. GRU reset_after: h R_h + b_rh [N,T,U].
// Backward writes the pre-activation gradient of every step into scratch dz [N,T,GU] in time
// order, so that dW, db and dx each come from one GEMM or one pass over all steps at the end;
// the recurrent kernel's gradient and the state gradient need one GEMM per step. With dropout
// masks inside the cell (RnnDropout) each gate's block gets its own GEMM over its masked copy of
// the input or state, made in the scratch after the buffers above.
#include "kernels/recurrent.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/gemm.h"
#include "kernels/vec_math.h"

namespace nnfleet {
namespace {

// y[len] = act(x[len]); x and y may be the same buffer. Sigmoid and tanh go through the
// vectorized kernels of vec_math.h (a libm call per element cost more than the cell's GEMMs).
void act_forward(RnnAct a, int len, const float* x, float* y) {
  switch (a) {
    case RnnAct::kSigmoid:
      sigmoid_forward(len, x, y);
      return;
    case RnnAct::kTanh:
      tanh_forward(len, x, y);
      return;
    case RnnAct::kLinear:
      if (x != y) std::copy_n(x, len, y);
      return;
    case RnnAct::kRelu:
      for (int j = 0; j < len; ++j) y[j] = x[j] > 0.0f ? x[j] : 0.0f;
      return;
    case RnnAct::kHardSigmoid:
      for (int j = 0; j < len; ++j) y[j] = std::clamp(x[j] / 6.0f + 0.5f, 0.0f, 1.0f);
      return;
    case RnnAct::kHardSigmoidKeras2:
      for (int j = 0; j < len; ++j) y[j] = std::clamp(0.2f * x[j] + 0.5f, 0.0f, 1.0f);
      return;
  }
}
// Derivative from the output y (every kind allows it; the hard sigmoids' slope holds strictly
// inside (0, 1), as TensorFlow's gradient).
inline float act_grad(RnnAct a, float y) {
  switch (a) {
    case RnnAct::kLinear:
      return 1.0f;
    case RnnAct::kRelu:
      return y > 0.0f ? 1.0f : 0.0f;
    case RnnAct::kSigmoid:
      return y * (1.0f - y);
    case RnnAct::kTanh:
      return 1.0f - y * y;
    case RnnAct::kHardSigmoid:
      return (y > 0.0f && y < 1.0f) ? 1.0f / 6.0f : 0.0f;
    case RnnAct::kHardSigmoidKeras2:
      return (y > 0.0f && y < 1.0f) ? 0.2f : 0.0f;
  }
  return 1.0f;
}

// Views into the cache.
struct CacheView {
  float *gates, *h, *c, *ac, *rh;
};
CacheView cache_view(const RnnDims& d, float* cache) {
  const size_t nt = static_cast<size_t>(d.n) * d.t, U = d.units;
  CacheView v{};
  v.gates = cache;
  v.h = v.gates + nt * rnn_gates(d.cell) * U;
  float* end = v.h + nt * U;
  if (d.cell == RnnCell::kLstm) {
    v.c = end;
    v.ac = v.c + nt * U;
  } else if (d.cell == RnnCell::kGru && d.reset_after) {
    v.rh = end;
  }
  return v;
}

// The scratch the dropout masks need, after everything else: the masked input [N,T,I] and its
// gradient [N,T,I], the masked state [N,U] and its gradient [N,U].
struct DropScratch {
  float *xm = nullptr, *xd = nullptr, *hm = nullptr, *hd = nullptr;
};
DropScratch drop_scratch(const RnnDims& d, float* scratch) {
  const size_t n = d.n, U = d.units, GU = rnn_gates(d.cell) * U, nti = n * d.t * d.in;
  float* p = scratch + n * d.t * GU + n * GU + 5 * n * U;
  DropScratch s;
  if (d.in_dropout) {
    s.xm = p;
    s.xd = p + nti;
    p += 2 * nti;
  }
  if (d.rec_dropout) {
    s.hm = p;
    s.hd = p + n * U;
  }
  return s;
}

// out[n, j, :] = v[n, j, :] * m[n, g, :]: rows of `cols` values, `per` rows per sample (row
// stride ld in v, cols in out), and a mask [N,G,cols] of which block g is used.
void mask_rows(const float* v, int ld, const float* m, int g, int gates, int n, int per, int cols,
               float* out) {
  for (int s = 0; s < n; ++s) {
    const float* ms = m + (static_cast<size_t>(s) * gates + g) * cols;
    for (int j = 0; j < per; ++j) {
      const size_t row = static_cast<size_t>(s) * per + j;
      const float* vr = v + row * ld;
      float* o = out + row * cols;
      for (int k = 0; k < cols; ++k) o[k] = vr[k] * ms[k];
    }
  }
}

bool is_real(const float* mask, const RnnDims& d, int n, int t) {
  return !mask || mask[static_cast<size_t>(n) * d.t + t] != 0.0f;
}

// Row n of the LSTM carry before step s: the cache's step s-1, or the initial c (null: zeros).
const float* prev_c(const CacheView& cv, const RnnStates& st, const RnnDims& d, int n, int s) {
  if (s > 0)
    return cv.c + static_cast<size_t>(n) * d.t * d.units + static_cast<size_t>(s - 1) * d.units;
  return st.c0 ? st.c0 + static_cast<size_t>(n) * d.units : nullptr;
}

// The element-wise part of forward step s, for one row. pre: x W + b of this step [GU] (becomes
// the gates i f c o); rec: the recurrent product [GU]; cp: the previous carry (null: zeros).
void lstm_row(const RnnDims& d, float* pre, const float* rec, const float* cp, float* h, float* c,
              float* ac) {
  const int U = d.units;
  for (int j = 0; j < 4 * U; ++j) pre[j] += rec[j];
  act_forward(d.ract, 2 * U, pre, pre);  // i and f
  act_forward(d.act, U, pre + 2 * U, pre + 2 * U);
  act_forward(d.ract, U, pre + 3 * U, pre + 3 * U);
  const float *i = pre, *f = pre + U, *g = pre + 2 * U, *o = pre + 3 * U;
  for (int j = 0; j < U; ++j) c[j] = f[j] * (cp ? cp[j] : 0.0f) + i[j] * g[j];
  act_forward(d.act, U, c, ac);
  for (int j = 0; j < U; ++j) h[j] = o[j] * ac[j];
}

// GRU step for every row: rec holds h_{s-1} R (+ b_rh with reset_after) for the z and r blocks,
// and for the h block too with reset_after; without it the h block is (r * h_{s-1}) R_h, made
// here between the two element-wise passes. hp has row stride ldhp (the cache's, or U for an
// initial state); h and rh_keep have ldh.
// rm_h: the recurrent dropout mask of the h block, [N,U] with row stride 3U (null: none).
void gru_step(const RnnDims& d, float* pre, int ldp, float* rec, const float* hp, int ldhp, int ldh,
              const float* w_rh, float* h, float* rh_keep, float* rhm, const float* rm_h) {
  const int U = d.units, GU = 3 * U;
  for (int n = 0; n < d.n; ++n) {
    float* p = pre + static_cast<size_t>(n) * ldp;
    const float* q = rec + static_cast<size_t>(n) * GU;
    for (int j = 0; j < 2 * U; ++j) p[j] += q[j];
    act_forward(d.ract, 2 * U, p, p);
  }
  if (!d.reset_after) {
    if (hp) {
      for (int n = 0; n < d.n; ++n)
        for (int j = 0; j < U; ++j)
          rhm[static_cast<size_t>(n) * U + j] =
              pre[static_cast<size_t>(n) * ldp + U + j] * hp[static_cast<size_t>(n) * ldhp + j] *
              (rm_h ? rm_h[static_cast<size_t>(n) * 3 * U + j] : 1.0f);
      gemm(false, false, d.n, U, U, rhm, U, w_rh, GU, 0.0f, rec + 2 * U, GU);
    } else {
      for (int n = 0; n < d.n; ++n) std::fill_n(rec + static_cast<size_t>(n) * GU + 2 * U, U, 0.0f);
    }
  }
  for (int n = 0; n < d.n; ++n) {
    float* p = pre + static_cast<size_t>(n) * ldp;
    const float* q = rec + static_cast<size_t>(n) * GU + 2 * U;
    float* hn = h + static_cast<size_t>(n) * ldh;
    const float* hpn = hp ? hp + static_cast<size_t>(n) * ldhp : nullptr;
    float* keep = d.reset_after ? rh_keep + static_cast<size_t>(n) * ldh : nullptr;
    float* hh = p + 2 * U;
    for (int j = 0; j < U; ++j) {
      if (keep) keep[j] = q[j];
      hh[j] += d.reset_after ? p[U + j] * q[j] : q[j];
    }
    act_forward(d.act, U, hh, hh);
    for (int j = 0; j < U; ++j) hn[j] = p[j] * (hpn ? hpn[j] : 0.0f) + (1.0f - p[j]) * hh[j];
  }
}

}  // namespace

int rnn_gates(RnnCell c) { return c == RnnCell::kSimple ? 1 : c == RnnCell::kLstm ? 4 : 3; }

size_t rnn_cache_floats(const RnnDims& d) {
  const size_t nt = static_cast<size_t>(d.n) * d.t, U = d.units;
  size_t f = nt * rnn_gates(d.cell) * U + nt * U;
  if (d.cell == RnnCell::kLstm) f += 2 * nt * U;
  if (d.cell == RnnCell::kGru && d.reset_after) f += nt * U;
  return f;
}

size_t rnn_scratch_floats(const RnnDims& d) {
  const size_t n = d.n, U = d.units, GU = rnn_gates(d.cell) * U;
  return n * d.t * GU + n * GU + 5 * n * U + (d.in_dropout ? 2 * n * d.t * d.in : 0) +
         (d.rec_dropout ? 2 * n * U : 0);
}

void rnn_forward(const RnnDims& d, const float* x, const float* w, const float* r, const float* b,
                 const float* mask, float* cache, float* scratch, float* y, const RnnStates& st,
                 const RnnDropout& dp) {
  const int N = d.n, T = d.t, U = d.units, G = rnn_gates(d.cell), GU = G * U;
  const int ldg = T * GU, ldh = T * U;
  const CacheView cv = cache_view(d, cache);
  const DropScratch ds = drop_scratch(d, scratch);
  if (dp.in) {
    for (int g = 0; g < G; ++g) {
      mask_rows(x, d.in, dp.in, g, G, N, T, d.in, ds.xm);
      gemm(false, false, N * T, U, d.in, ds.xm, d.in, w + g * U, GU, 0.0f, cv.gates + g * U, GU);
    }
  } else {
    gemm(false, false, N * T, GU, d.in, x, d.in, w, GU, 0.0f, cv.gates, GU);
  }
  if (b)
    for (size_t row = 0; row < static_cast<size_t>(N) * T; ++row)
      for (int j = 0; j < GU; ++j) cv.gates[row * GU + j] += b[j];
  float* rec = scratch;                            // [N,GU]
  float* rhm = rec + static_cast<size_t>(N) * GU;  // [N,U]
  const bool gru_plain = d.cell == RnnCell::kGru && !d.reset_after;
  const int rec_cols = gru_plain ? 2 * U : GU;
  const bool lstm = d.cell == RnnCell::kLstm;
  for (int s = 0; s < T; ++s) {
    const int t = d.go_backwards ? T - 1 - s : s;
    // The previous state: the cache's last step, or the initial state (row stride U) at s = 0.
    const float* hp = s > 0 ? cv.h + static_cast<size_t>(s - 1) * U : st.h0;
    const int ldp = s > 0 ? ldh : U;
    float* hs = cv.h + static_cast<size_t>(s) * U;
    float* pre = cv.gates + static_cast<size_t>(t) * GU;
    if (hp && dp.rec) {
      for (int g = 0; g < rec_cols / U; ++g) {
        mask_rows(hp, ldp, dp.rec, g, G, N, 1, U, ds.hm);
        gemm(false, false, N, U, U, ds.hm, U, r + g * U, GU, 0.0f, rec + g * U, GU);
      }
    } else if (hp) {
      gemm(false, false, N, rec_cols, U, hp, ldp, r, GU, 0.0f, rec, GU);
    } else {
      std::fill_n(rec, static_cast<size_t>(N) * GU, 0.0f);
    }
    if (b && d.cell == RnnCell::kGru && d.reset_after)
      for (int n = 0; n < N; ++n)
        for (int j = 0; j < GU; ++j) rec[static_cast<size_t>(n) * GU + j] += b[GU + j];
    if (d.cell == RnnCell::kGru) {
      gru_step(d, pre, ldg, rec, hp, ldp, ldh, r + 2 * U, hs,
               cv.rh ? cv.rh + static_cast<size_t>(s) * U : nullptr, rhm,
               dp.rec ? dp.rec + 2 * U : nullptr);
    }
    for (int n = 0; n < N; ++n) {
      const size_t ho = static_cast<size_t>(n) * ldh;
      float* p = pre + static_cast<size_t>(n) * ldg;
      const float* q = rec + static_cast<size_t>(n) * GU;
      if (d.cell == RnnCell::kSimple) {
        for (int j = 0; j < U; ++j) p[j] += q[j];
        act_forward(d.act, U, p, p);
        std::copy_n(p, U, hs + ho);
      } else if (lstm) {
        const size_t so = static_cast<size_t>(s) * U + ho;
        lstm_row(d, p, q, prev_c(cv, st, d, n, s), hs + ho, cv.c + so, cv.ac + so);
      }
      if (is_real(mask, d, n, t)) continue;
      // A skipped step carries the previous state over.
      const float* hpn = hp ? hp + static_cast<size_t>(n) * ldp : nullptr;
      for (int j = 0; j < U; ++j) hs[ho + j] = hpn ? hpn[j] : 0.0f;
      if (lstm) {
        float* cs = cv.c + static_cast<size_t>(s) * U + ho;
        const float* cp = prev_c(cv, st, d, n, s);
        for (int j = 0; j < U; ++j) cs[j] = cp ? cp[j] : 0.0f;
      }
    }
  }
  for (int n = 0; n < N; ++n) {
    const float* hn = cv.h + static_cast<size_t>(n) * ldh;
    const size_t last = static_cast<size_t>(n) * ldh + static_cast<size_t>(T - 1) * U;
    if (st.h_out)
      std::memcpy(st.h_out + static_cast<size_t>(n) * U, cv.h + last, sizeof(float) * U);
    if (st.c_out && lstm)
      std::memcpy(st.c_out + static_cast<size_t>(n) * U, cv.c + last, sizeof(float) * U);
    if (!d.return_sequences) {
      std::memcpy(y + static_cast<size_t>(n) * U, hn + static_cast<size_t>(T - 1) * U,
                  sizeof(float) * U);
      continue;
    }
    float* yn = y + static_cast<size_t>(n) * ldh;
    std::memcpy(yn, hn, sizeof(float) * ldh);
    if (d.zero_masked_output && mask)
      for (int s = 0; s < T; ++s)
        if (!is_real(mask, d, n, d.go_backwards ? T - 1 - s : s))
          std::fill_n(yn + static_cast<size_t>(s) * U, U, 0.0f);
  }
}

namespace {

// The element-wise part of backward step s for one row: from dh (and dc), writes the
// pre-activation gradient dz [GU], the direct part of dh_{s-1} (GRU: dh * z) into dhp, and the
// new dc. GRU reset_after also writes the recurrent pre-activation gradient dzr [GU].
// grad_a and grad_r are act' and ract' from the output: Keras's default pair (tanh, sigmoid)
// passes them as plain expressions, which lets the compiler vectorize the loop.
template <typename GradA, typename GradR>
void lstm_row_back_with(int U, GradA grad_a, GradR grad_r, const float* g, const float* ac,
                        const float* cp, const float* dh, float* dc, float* dz) {
  for (int j = 0; j < U; ++j) {
    const float i = g[j], f = g[U + j], gg = g[2 * U + j], o = g[3 * U + j];
    const float dct = dc[j] + dh[j] * o * grad_a(ac[j]);
    dz[j] = dct * gg * grad_r(i);
    dz[U + j] = dct * (cp ? cp[j] : 0.0f) * grad_r(f);
    dz[2 * U + j] = dct * i * grad_a(gg);
    dz[3 * U + j] = dh[j] * ac[j] * grad_r(o);
    dc[j] = dct * f;
  }
}

void lstm_row_back(const RnnDims& d, const float* g, const float* ac, const float* cp,
                   const float* dh, float* dc, float* dz) {
  if (d.act == RnnAct::kTanh && d.ract == RnnAct::kSigmoid) {
    lstm_row_back_with(
        d.units, [](float y) { return 1.0f - y * y; }, [](float y) { return y * (1.0f - y); }, g,
        ac, cp, dh, dc, dz);
    return;
  }
  lstm_row_back_with(
      d.units, [&d](float y) { return act_grad(d.act, y); },
      [&d](float y) { return act_grad(d.ract, y); }, g, ac, cp, dh, dc, dz);
}

void gru_row_back_a(const RnnDims& d, const float* g, const float* hp, const float* dh, float* dz,
                    float* dhp) {
  const int U = d.units;
  for (int j = 0; j < U; ++j) {
    const float z = g[j], hh = g[2 * U + j];
    dhp[j] = dh[j] * z;
    dz[j] = dh[j] * ((hp ? hp[j] : 0.0f) - hh) * act_grad(d.ract, z);
    dz[2 * U + j] = dh[j] * (1.0f - z) * act_grad(d.act, hh);
  }
}

// GRU without reset_after, step at time t: h~ = act(x W_h + (r * h_{s-1}) R_h), so
// d(r * h_{s-1}) = dz_h R_h^T reaches the reset gate (its pre-activation gradient, written into
// dz's r block) and h_{s-1} (added to dhp); R_h's gradient is (r * h_{s-1})^T dz_h.
// rm_h: the h block's recurrent dropout mask ([N,U], row stride 3U; null: none), which scales
// h_{s-1} inside the product.
void gru_plain_back(const RnnDims& d, int t, const float* hp, int ldp, const float* g,
                    const float* r, const float* mask, const float* rm_h, float* dzt, float* drh,
                    float* rhm, float* dhp, float* dr) {
  const int N = d.n, U = d.units, GU = 3 * U, ldg = d.t * GU;
  gemm(false, true, N, U, U, dzt + 2 * U, ldg, r + 2 * U, GU, 0.0f, drh, U);
  for (int n = 0; n < N; ++n) {
    const size_t ho = static_cast<size_t>(n) * ldp, go = static_cast<size_t>(n) * ldg;
    float* dzn = dzt + go;
    float* rm = rhm + static_cast<size_t>(n) * U;
    const bool real = is_real(mask, d, n, t);
    for (int j = 0; j < U; ++j) {
      const float mh = rm_h ? rm_h[static_cast<size_t>(n) * 3 * U + j] : 1.0f;
      const float hpj = (hp ? hp[ho + j] : 0.0f) * mh, rj = g[go + U + j];
      rm[j] = real ? rj * hpj : 0.0f;
      if (!real) continue;
      const float dq = drh[static_cast<size_t>(n) * U + j];
      dzn[U + j] = dq * hpj * act_grad(d.ract, rj);
      dhp[static_cast<size_t>(n) * U + j] += dq * rj * mh;
    }
  }
  if (hp) gemm(true, false, U, U, N, rhm, U, dzt + 2 * U, ldg, 1.0f, dr + 2 * U, GU);
}

}  // namespace

void rnn_backward(const RnnDims& d, const float* x, const float* w, const float* r,
                  const float* mask, const float* cache, const float* dy, float* scratch, float* dx,
                  float* dw, float* dr, float* db, const RnnStates& st, const RnnDropout& dp) {
  const int N = d.n, T = d.t, U = d.units, G = rnn_gates(d.cell), GU = G * U;
  const DropScratch ds = drop_scratch(d, scratch);
  const int ldg = T * GU, ldh = T * U;
  const CacheView cv = cache_view(d, const_cast<float*>(cache));
  const size_t nu = static_cast<size_t>(N) * U;
  float* dz = scratch;                                // [N,T,GU] time order
  float* dzr = dz + static_cast<size_t>(N) * T * GU;  // [N,GU]
  float* dh = dzr + static_cast<size_t>(N) * GU;      // [N,U]
  float* dhp = dh + nu;                               // [N,U]
  float* dc = dhp + nu;                               // [N,U]
  float* rhm = dc + nu;                               // [N,U]
  float* drh = rhm + nu;                              // [N,U]
  // The final states' gradients start the walk back (zeros when not given).
  if (st.dh_out)
    std::copy_n(st.dh_out, nu, dh);
  else
    std::fill_n(dh, nu, 0.0f);
  if (st.dc_out)
    std::copy_n(st.dc_out, nu, dc);
  else
    std::fill_n(dc, nu, 0.0f);
  const bool gru = d.cell == RnnCell::kGru, gru_plain = gru && !d.reset_after;
  const int rec_cols = gru_plain ? 2 * U : GU;
  for (int s = T - 1; s >= 0; --s) {
    const int t = d.go_backwards ? T - 1 - s : s;
    const float* hp = s > 0 ? cv.h + static_cast<size_t>(s - 1) * U : st.h0;
    const int ldp = s > 0 ? ldh : U;
    const float* g = cv.gates + static_cast<size_t>(t) * GU;
    float* dzt = dz + static_cast<size_t>(t) * GU;
    for (int n = 0; n < N; ++n) {
      float* dhn = dh + static_cast<size_t>(n) * U;
      if (d.return_sequences) {
        if (!(d.zero_masked_output && !is_real(mask, d, n, t)))
          for (int j = 0; j < U; ++j) dhn[j] += dy[static_cast<size_t>(n) * ldh + s * U + j];
      } else if (s == T - 1) {
        for (int j = 0; j < U; ++j) dhn[j] += dy[static_cast<size_t>(n) * U + j];
      }
    }
    for (int n = 0; n < N; ++n) {
      const size_t ho = static_cast<size_t>(n) * ldh, go = static_cast<size_t>(n) * ldg;
      const float* dhn = dh + static_cast<size_t>(n) * U;
      float* dhpn = dhp + static_cast<size_t>(n) * U;
      float* dzn = dzt + go;
      if (!is_real(mask, d, n, t)) {
        // The state passed through unchanged, so its gradient does too (dc stays as it is).
        std::fill_n(dzn, GU, 0.0f);
        std::copy_n(dhn, U, dhpn);
        if (gru && d.reset_after) std::fill_n(dzr + static_cast<size_t>(n) * GU, GU, 0.0f);
        continue;
      }
      if (d.cell == RnnCell::kSimple) {
        const float* hs = cv.h + ho + static_cast<size_t>(s) * U;
        for (int j = 0; j < U; ++j) dzn[j] = dhn[j] * act_grad(d.act, hs[j]);
        std::fill_n(dhpn, U, 0.0f);
      } else if (d.cell == RnnCell::kLstm) {
        const size_t so = ho + static_cast<size_t>(s) * U;
        lstm_row_back(d, g + go, cv.ac + so, prev_c(cv, st, d, n, s), dhn,
                      dc + static_cast<size_t>(n) * U, dzn);
        std::fill_n(dhpn, U, 0.0f);
      } else {
        gru_row_back_a(d, g + go, hp ? hp + static_cast<size_t>(n) * ldp : nullptr, dhn, dzn, dhpn);
        if (d.reset_after) {
          const float* rh = cv.rh + ho + static_cast<size_t>(s) * U;
          float* dzrn = dzr + static_cast<size_t>(n) * GU;
          for (int j = 0; j < U; ++j) {
            dzn[U + j] = dzn[2 * U + j] * rh[j] * act_grad(d.ract, g[go + U + j]);
            dzrn[j] = dzn[j];
            dzrn[U + j] = dzn[U + j];
            dzrn[2 * U + j] = dzn[2 * U + j] * g[go + U + j];
          }
        }
      }
    }
    if (gru_plain)
      gru_plain_back(d, t, hp, ldp, g, r, mask, dp.rec ? dp.rec + 2 * U : nullptr, dzt, drh, rhm,
                     dhp, dr);
    const float* src = gru && d.reset_after ? dzr : dzt;
    const int lds = gru && d.reset_after ? GU : ldg;
    if (gru && d.reset_after && db)
      for (int n = 0; n < N; ++n)
        for (int j = 0; j < GU; ++j) db[GU + j] += dzr[static_cast<size_t>(n) * GU + j];
    if (hp && dp.rec) {
      // Per gate block: dR_g += (h m_g)^T dz_g, and dh += (dz_g R_g^T) m_g.
      for (int gb = 0; gb < rec_cols / U; ++gb) {
        mask_rows(hp, ldp, dp.rec, gb, G, N, 1, U, ds.hm);
        gemm(true, false, U, U, N, ds.hm, U, src + gb * U, lds, 1.0f, dr + gb * U, GU);
        gemm(false, true, N, U, U, src + gb * U, lds, r + gb * U, GU, 0.0f, ds.hd, U);
        for (int n = 0; n < N; ++n) {
          const float* m = dp.rec + (static_cast<size_t>(n) * G + gb) * U;
          for (int j = 0; j < U; ++j)
            dhp[static_cast<size_t>(n) * U + j] += ds.hd[static_cast<size_t>(n) * U + j] * m[j];
        }
      }
    } else if (hp) {
      gemm(true, false, U, rec_cols, N, hp, ldp, src, lds, 1.0f, dr, GU);
      gemm(false, true, N, U, rec_cols, src, lds, r, GU, 1.0f, dhp, U);
    }
    std::swap(dh, dhp);
  }
  // dh and dc now hold the gradients of the state before the first step.
  if (st.dh0)
    for (size_t k = 0; k < nu; ++k) st.dh0[k] += dh[k];
  if (st.dc0 && d.cell == RnnCell::kLstm)
    for (size_t k = 0; k < nu; ++k) st.dc0[k] += dc[k];
  const int rows = N * T;
  if (dp.in) {
    // Per gate block: dW_g += (x m_g)^T dz_g, and dx += (dz_g W_g^T) m_g.
    for (int g = 0; g < G; ++g) {
      mask_rows(x, d.in, dp.in, g, G, N, T, d.in, ds.xm);
      gemm(true, false, d.in, U, rows, ds.xm, d.in, dz + g * U, GU, 1.0f, dw + g * U, GU);
      if (!dx) continue;
      gemm(false, true, rows, d.in, U, dz + g * U, GU, w + g * U, GU, 0.0f, ds.xd, d.in);
      for (int n = 0; n < N; ++n) {
        const float* m = dp.in + (static_cast<size_t>(n) * G + g) * d.in;
        for (int t = 0; t < T; ++t) {
          const size_t o = (static_cast<size_t>(n) * T + t) * d.in;
          for (int i = 0; i < d.in; ++i) dx[o + i] += ds.xd[o + i] * m[i];
        }
      }
    }
  } else {
    gemm(true, false, d.in, GU, rows, x, d.in, dz, GU, 1.0f, dw, GU);
    if (dx) gemm(false, true, rows, d.in, GU, dz, GU, w, GU, 1.0f, dx, d.in);
  }
  if (db)
    for (int row = 0; row < rows; ++row)
      for (int j = 0; j < GU; ++j) db[j] += dz[static_cast<size_t>(row) * GU + j];
}

}  // namespace nnfleet
