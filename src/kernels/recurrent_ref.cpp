// Naive recurrent kernels: one sample and one step at a time, in double, written straight from
// Keras's cell equations (keras/src/layers/rnn/{simple_rnn,lstm,gru}.py). Tests only.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/recurrent.h"

namespace nnfleet {
namespace {

using Vec = std::vector<double>;

double act_ref(RnnAct a, double x) {
  switch (a) {
    case RnnAct::kLinear:
      return x;
    case RnnAct::kRelu:
      return x > 0 ? x : 0.0;
    case RnnAct::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case RnnAct::kTanh:
      return std::tanh(x);
    case RnnAct::kHardSigmoid:
      return std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
    case RnnAct::kHardSigmoidKeras2:
      return std::clamp(0.2 * x + 0.5, 0.0, 1.0);
  }
  return x;
}
// The derivative as a function of the output y.
double dact_ref(RnnAct a, double y) {
  switch (a) {
    case RnnAct::kLinear:
      return 1.0;
    case RnnAct::kRelu:
      return y > 0 ? 1.0 : 0.0;
    case RnnAct::kSigmoid:
      return y * (1.0 - y);
    case RnnAct::kTanh:
      return 1.0 - y * y;
    case RnnAct::kHardSigmoid:
      return (y > 0 && y < 1) ? 1.0 / 6.0 : 0.0;
    case RnnAct::kHardSigmoidKeras2:
      return (y > 0 && y < 1) ? 0.2 : 0.0;
  }
  return 1.0;
}

// Everything one sample's forward keeps, per step s (step order).
struct Trace {
  std::vector<Vec> h, c, gates, rh;  // h, c after step s; post-activation gates; GRU recurrent h
  std::vector<bool> real;
};

// Row n's initial state (zeros when not given).
Vec initial(const float* s, int n, int U) {
  Vec v(U, 0.0);
  if (s)
    for (int j = 0; j < U; ++j) v[j] = s[static_cast<size_t>(n) * U + j];
  return v;
}

// One sample's dropout masks: in [G,I] and rec [G,U] (null: ones).
struct Masks {
  const float* in = nullptr;
  const float* rec = nullptr;
  double at_in(int g, int i, int I) const { return in ? in[static_cast<size_t>(g) * I + i] : 1.0; }
  double at_rec(int g, int k, int U) const {
    return rec ? rec[static_cast<size_t>(g) * U + k] : 1.0;
  }
};

Masks sample_masks(const RnnDropout& dp, const RnnDims& d, int n) {
  const size_t G = static_cast<size_t>(rnn_gates(d.cell));
  return {dp.in ? dp.in + n * G * d.in : nullptr, dp.rec ? dp.rec + n * G * d.units : nullptr};
}

Trace run_sample(const RnnDims& d, const float* x, const float* w, const float* r, const float* b,
                 const float* mask, Vec h, Vec c, const Masks& dm) {
  const int U = d.units, I = d.in, G = rnn_gates(d.cell), GU = G * U;
  Trace tr;
  for (int s = 0; s < d.t; ++s) {
    const int t = d.go_backwards ? d.t - 1 - s : s;
    const float* xt = x + static_cast<size_t>(t) * I;
    Vec zx(GU, 0.0), zr(GU, 0.0);  // input and recurrent projections (with their biases)
    for (int j = 0; j < GU; ++j) {
      double a = b ? b[j] : 0.0;
      for (int i = 0; i < I; ++i)
        a += double(xt[i]) * dm.at_in(j / U, i, I) * w[static_cast<size_t>(i) * GU + j];
      zx[j] = a;
      double q = (b && d.cell == RnnCell::kGru && d.reset_after) ? b[GU + j] : 0.0;
      for (int k = 0; k < U; ++k)
        q += h[k] * dm.at_rec(j / U, k, U) * r[static_cast<size_t>(k) * GU + j];
      zr[j] = q;
    }
    Vec gates(GU), hn(U), cn(U, 0.0), rh(U, 0.0);
    if (d.cell == RnnCell::kSimple) {
      for (int j = 0; j < U; ++j) hn[j] = gates[j] = act_ref(d.act, zx[j] + zr[j]);
    } else if (d.cell == RnnCell::kLstm) {
      for (int j = 0; j < U; ++j) {
        const double i = act_ref(d.ract, zx[j] + zr[j]);
        const double f = act_ref(d.ract, zx[U + j] + zr[U + j]);
        const double g = act_ref(d.act, zx[2 * U + j] + zr[2 * U + j]);
        const double o = act_ref(d.ract, zx[3 * U + j] + zr[3 * U + j]);
        gates[j] = i, gates[U + j] = f, gates[2 * U + j] = g, gates[3 * U + j] = o;
        cn[j] = f * c[j] + i * g;
        hn[j] = o * act_ref(d.act, cn[j]);
      }
    } else {
      Vec z(U), rr(U);
      for (int j = 0; j < U; ++j) {
        z[j] = act_ref(d.ract, zx[j] + zr[j]);
        rr[j] = act_ref(d.ract, zx[U + j] + zr[U + j]);
      }
      for (int j = 0; j < U; ++j) {
        if (d.reset_after) {
          rh[j] = zr[2 * U + j];
        } else {
          double q = 0.0;
          for (int k = 0; k < U; ++k)
            q += rr[k] * h[k] * dm.at_rec(2, k, U) * r[static_cast<size_t>(k) * GU + 2 * U + j];
          rh[j] = q;
        }
        const double hh = act_ref(d.act, zx[2 * U + j] + (d.reset_after ? rr[j] * rh[j] : rh[j]));
        gates[j] = z[j], gates[U + j] = rr[j], gates[2 * U + j] = hh;
        hn[j] = z[j] * h[j] + (1.0 - z[j]) * hh;
      }
    }
    const bool real = !mask || mask[t] != 0.0f;
    if (real) {
      h = hn;
      c = cn;
    }
    tr.h.push_back(h);
    tr.c.push_back(c);
    tr.gates.push_back(gates);
    tr.rh.push_back(rh);
    tr.real.push_back(real);
  }
  return tr;
}

}  // namespace

void rnn_forward_ref(const RnnDims& d, const float* x, const float* w, const float* r,
                     const float* b, const float* mask, float* y, const RnnStates& st,
                     const RnnDropout& dp) {
  const int U = d.units;
  for (int n = 0; n < d.n; ++n) {
    const float* m = mask ? mask + static_cast<size_t>(n) * d.t : nullptr;
    const Trace tr = run_sample(d, x + static_cast<size_t>(n) * d.t * d.in, w, r, b, m,
                                initial(st.h0, n, U), initial(st.c0, n, U), sample_masks(dp, d, n));
    for (int j = 0; j < U; ++j) {
      if (st.h_out) st.h_out[static_cast<size_t>(n) * U + j] = float(tr.h.back()[j]);
      if (st.c_out && d.cell == RnnCell::kLstm)
        st.c_out[static_cast<size_t>(n) * U + j] = float(tr.c.back()[j]);
    }
    if (!d.return_sequences) {
      for (int j = 0; j < U; ++j) y[static_cast<size_t>(n) * U + j] = float(tr.h.back()[j]);
      continue;
    }
    for (int s = 0; s < d.t; ++s)
      for (int j = 0; j < U; ++j)
        y[(static_cast<size_t>(n) * d.t + s) * U + j] =
            (d.zero_masked_output && !tr.real[s]) ? 0.0f : float(tr.h[s][j]);
  }
}

void rnn_backward_ref(const RnnDims& d, const float* x, const float* w, const float* r,
                      const float* b, const float* mask, const float* dy, float* dx, float* dw,
                      float* dr, float* db, const RnnStates& st, const RnnDropout& dp) {
  const int U = d.units, I = d.in, G = rnn_gates(d.cell), GU = G * U, T = d.t;
  const bool two_bias = d.cell == RnnCell::kGru && d.reset_after;
  Vec gw(static_cast<size_t>(I) * GU, 0.0), gr(static_cast<size_t>(U) * GU, 0.0),
      gb(two_bias ? 2 * GU : GU, 0.0);
  for (int n = 0; n < d.n; ++n) {
    const float* m = mask ? mask + static_cast<size_t>(n) * T : nullptr;
    const float* xn = x + static_cast<size_t>(n) * T * I;
    const Vec h0 = initial(st.h0, n, U), c0 = initial(st.c0, n, U);
    const Masks dm = sample_masks(dp, d, n);
    const Trace tr = run_sample(d, xn, w, r, b, m, h0, c0, dm);
    Vec dh = initial(st.dh_out, n, U), dc = initial(st.dc_out, n, U);
    Vec dxn(static_cast<size_t>(T) * I, 0.0);
    for (int s = T - 1; s >= 0; --s) {
      const int t = d.go_backwards ? T - 1 - s : s;
      if (d.return_sequences) {
        if (!(d.zero_masked_output && !tr.real[s]))
          for (int j = 0; j < U; ++j) dh[j] += dy[(static_cast<size_t>(n) * T + s) * U + j];
      } else if (s == T - 1) {
        for (int j = 0; j < U; ++j) dh[j] += dy[static_cast<size_t>(n) * U + j];
      }
      if (!tr.real[s]) continue;  // the state passed through unchanged: so does its gradient
      const Vec& hp = s > 0 ? tr.h[s - 1] : h0;
      const Vec& cp = s > 0 ? tr.c[s - 1] : c0;
      const Vec& gt = tr.gates[s];
      Vec dzx(GU, 0.0), dzr(GU, 0.0), dhp(U, 0.0);
      if (d.cell == RnnCell::kSimple) {
        for (int j = 0; j < U; ++j) dzx[j] = dzr[j] = dh[j] * dact_ref(d.act, gt[j]);
      } else if (d.cell == RnnCell::kLstm) {
        for (int j = 0; j < U; ++j) {
          const double i = gt[j], f = gt[U + j], g = gt[2 * U + j], o = gt[3 * U + j];
          const double ac = act_ref(d.act, tr.c[s][j]);
          const double dct = dc[j] + dh[j] * o * dact_ref(d.act, ac);
          dzx[j] = dct * g * dact_ref(d.ract, i);
          dzx[U + j] = dct * cp[j] * dact_ref(d.ract, f);
          dzx[2 * U + j] = dct * i * dact_ref(d.act, g);
          dzx[3 * U + j] = dh[j] * ac * dact_ref(d.ract, o);
          dc[j] = dct * f;
        }
        dzr = dzx;
      } else {
        Vec dr_gate(U, 0.0);
        for (int j = 0; j < U; ++j) {
          const double z = gt[j], hh = gt[2 * U + j];
          dhp[j] += dh[j] * z;
          dzx[j] = dh[j] * (hp[j] - hh) * dact_ref(d.ract, z);
          dzx[2 * U + j] = dh[j] * (1.0 - z) * dact_ref(d.act, hh);
        }
        if (d.reset_after) {
          for (int j = 0; j < U; ++j) {
            dr_gate[j] = dzx[2 * U + j] * tr.rh[s][j];
            dzr[2 * U + j] = dzx[2 * U + j] * gt[U + j];
          }
        } else {
          // rh = (r * hp) R_h: the gradient reaches r and hp through the product r * hp.
          for (int k = 0; k < U; ++k) {
            double drh = 0.0;
            for (int j = 0; j < U; ++j) {
              drh += dzx[2 * U + j] * r[static_cast<size_t>(k) * GU + 2 * U + j];
              gr[static_cast<size_t>(k) * GU + 2 * U + j] +=
                  gt[U + k] * hp[k] * dm.at_rec(2, k, U) * dzx[2 * U + j];
            }
            dr_gate[k] = drh * hp[k] * dm.at_rec(2, k, U);
            dhp[k] += drh * gt[U + k] * dm.at_rec(2, k, U);
          }
        }
        for (int j = 0; j < U; ++j) {
          dzx[U + j] = dr_gate[j] * dact_ref(d.ract, gt[U + j]);
          dzr[j] = dzx[j];
          dzr[U + j] = dzx[U + j];
        }
      }
      const int rec_cols = (d.cell == RnnCell::kGru && !d.reset_after) ? 2 * U : GU;
      for (int k = 0; k < U; ++k)
        for (int j = 0; j < rec_cols; ++j) {
          gr[static_cast<size_t>(k) * GU + j] += hp[k] * dm.at_rec(j / U, k, U) * dzr[j];
          dhp[k] += dzr[j] * r[static_cast<size_t>(k) * GU + j] * dm.at_rec(j / U, k, U);
        }
      for (int j = 0; j < GU; ++j) {
        gb[j] += dzx[j];
        if (two_bias) gb[GU + j] += dzr[j];
      }
      const float* xt = xn + static_cast<size_t>(t) * I;
      for (int i = 0; i < I; ++i)
        for (int j = 0; j < GU; ++j) {
          gw[static_cast<size_t>(i) * GU + j] += double(xt[i]) * dm.at_in(j / U, i, I) * dzx[j];
          dxn[static_cast<size_t>(t) * I + i] +=
              dzx[j] * w[static_cast<size_t>(i) * GU + j] * dm.at_in(j / U, i, I);
        }
      dh = dhp;
    }
    if (dx)
      for (size_t k = 0; k < dxn.size(); ++k)
        dx[static_cast<size_t>(n) * T * I + k] += float(dxn[k]);
    // dh and dc are now the gradients of the state before the first step.
    for (int j = 0; j < U; ++j) {
      if (st.dh0) st.dh0[static_cast<size_t>(n) * U + j] += float(dh[j]);
      if (st.dc0 && d.cell == RnnCell::kLstm)
        st.dc0[static_cast<size_t>(n) * U + j] += float(dc[j]);
    }
  }
  for (size_t k = 0; k < gw.size(); ++k) dw[k] += float(gw[k]);
  for (size_t k = 0; k < gr.size(); ++k) dr[k] += float(gr[k]);
  if (db)
    for (size_t k = 0; k < gb.size(); ++k) db[k] += float(gb[k]);
}

}  // namespace nnfleet
