// The recurrent kernels against their naive twins over a shape sweep (sequence length 1, odd
// lengths, batch 1), every cell and option, with and without a mask; and alignment independence.
#include "kernels/recurrent.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace nnfleet {
namespace {

using testing::expect_near_all;
using testing::random_floats;

struct Case {
  RnnCell cell;
  RnnAct act, ract;
  bool reset_after, go_backwards, return_sequences, zero_masked, bias, masked;
};

std::string describe(const RnnDims& d, const Case& c) {
  return "cell " + std::to_string(static_cast<int>(d.cell)) + " n" + std::to_string(d.n) + " t" +
         std::to_string(d.t) + " i" + std::to_string(d.in) + " u" + std::to_string(d.units) +
         (c.reset_after ? " reset_after" : "") + (c.go_backwards ? " backwards" : "") +
         (c.return_sequences ? " seq" : "") + (c.masked ? " masked" : "") +
         (c.zero_masked ? " zero" : "") + (c.bias ? " bias" : "");
}

// With `states`, the run starts from random initial states, writes the final ones, and backward
// takes the final states' gradients and gives the initial states' (return_state, initial_state).
// With `drop`, per-gate dropout masks inside the cell (entries 0 or 1 / (1 - 0.4)) scale the
// input and the previous state.
void check(const Case& c, int n, int t, int in, int u, uint32_t seed, bool states = false,
           bool drop = false) {
  RnnDims d;
  d.n = n, d.t = t, d.in = in, d.units = u, d.cell = c.cell, d.act = c.act, d.ract = c.ract;
  d.reset_after = c.reset_after, d.go_backwards = c.go_backwards;
  d.return_sequences = c.return_sequences, d.zero_masked_output = c.zero_masked;
  const int gu = rnn_gates(c.cell) * u;
  const size_t bsz = (c.cell == RnnCell::kGru && c.reset_after) ? 2 * gu : gu;
  const auto x = random_floats(static_cast<size_t>(n) * t * in, seed);
  const auto w = random_floats(static_cast<size_t>(in) * gu, seed + 1, -0.6f, 0.6f);
  const auto r = random_floats(static_cast<size_t>(u) * gu, seed + 2, -0.6f, 0.6f);
  const auto b = random_floats(bsz, seed + 3, -0.3f, 0.3f);
  std::vector<float> mask(static_cast<size_t>(n) * t, 1.0f);
  if (c.masked)  // post-padding of varying length, plus one hole inside a sequence
    for (int i = 0; i < n; ++i)
      for (int s = 0; s < t; ++s)
        if (s >= t - (i % 3) || (s == 1 && i % 2 == 1)) mask[static_cast<size_t>(i) * t + s] = 0;
  const size_t g = static_cast<size_t>(rnn_gates(c.cell));
  auto draw_mask = [&](size_t count, uint32_t s) {
    std::vector<float> m = random_floats(count, s, 0.0f, 1.0f);
    for (float& v : m) v = v < 0.4f ? 0.0f : 1.0f / 0.6f;
    return m;
  };
  const auto in_mask = draw_mask(static_cast<size_t>(n) * g * in, seed + 9);
  const auto rec_mask = draw_mask(static_cast<size_t>(n) * g * u, seed + 10);
  RnnDropout dp;
  if (drop) {
    dp = {in_mask.data(), rec_mask.data()};
    d.in_dropout = d.rec_dropout = true;
  }
  const float* bp = c.bias ? b.data() : nullptr;
  const float* mp = c.masked ? mask.data() : nullptr;
  const size_t ysz = static_cast<size_t>(n) * (c.return_sequences ? t : 1) * u;
  std::vector<float> y(ysz), y_ref(ysz), cache(rnn_cache_floats(d)), scratch(rnn_scratch_floats(d));
  const size_t nu = static_cast<size_t>(n) * u;
  const auto h0 = random_floats(nu, seed + 5), c0 = random_floats(nu, seed + 6);
  const auto dh_out = random_floats(nu, seed + 7), dc_out = random_floats(nu, seed + 8);
  std::vector<float> h_out(nu), c_out(nu), h_out_ref(nu), c_out_ref(nu);
  std::vector<float> dh0(nu, 0.5f), dc0(nu, 0.5f), dh0_ref(nu, 0.5f), dc0_ref(nu, 0.5f);
  RnnStates st, st_ref;
  if (states) {
    st = {h0.data(),     c0.data(),     h_out.data(), c_out.data(),
          dh_out.data(), dc_out.data(), dh0.data(),   dc0.data()};
    st_ref = {h0.data(),     c0.data(),     h_out_ref.data(), c_out_ref.data(),
              dh_out.data(), dc_out.data(), dh0_ref.data(),   dc0_ref.data()};
  }
  rnn_forward(d, x.data(), w.data(), r.data(), bp, mp, cache.data(), scratch.data(), y.data(), st,
              dp);
  rnn_forward_ref(d, x.data(), w.data(), r.data(), bp, mp, y_ref.data(), st_ref, dp);
  const std::string what = describe(d, c) + (states ? " states" : "") + (drop ? " dropout" : "");
  expect_near_all(y, y_ref, 1e-5, 1e-4, "forward " + what);
  if (states) {
    expect_near_all(h_out, h_out_ref, 1e-5, 1e-4, "h_out " + what);
    if (c.cell == RnnCell::kLstm) expect_near_all(c_out, c_out_ref, 1e-5, 1e-4, "c_out " + what);
  }

  const auto dy = random_floats(ysz, seed + 4);
  // Gradients start non-zero: the kernels accumulate.
  std::vector<float> dx(x.size(), 0.5f), dw(w.size(), 0.5f), dr(r.size(), 0.5f), db(bsz, 0.5f);
  auto dx_ref = dx, dw_ref = dw, dr_ref = dr, db_ref = db;
  rnn_backward(d, x.data(), w.data(), r.data(), mp, cache.data(), dy.data(), scratch.data(),
               dx.data(), dw.data(), dr.data(), c.bias ? db.data() : nullptr, st, dp);
  rnn_backward_ref(d, x.data(), w.data(), r.data(), bp, mp, dy.data(), dx_ref.data(), dw_ref.data(),
                   dr_ref.data(), c.bias ? db_ref.data() : nullptr, st_ref, dp);
  const double tol = 2e-5 * (n * t + 4);
  if (states) {
    expect_near_all(dh0, dh0_ref, tol, 1e-4, "dh0 " + what);
    if (c.cell == RnnCell::kLstm) expect_near_all(dc0, dc0_ref, tol, 1e-4, "dc0 " + what);
  }
  expect_near_all(dx, dx_ref, tol, 1e-4, "dx " + what);
  expect_near_all(dw, dw_ref, tol, 1e-4, "dw " + what);
  expect_near_all(dr, dr_ref, tol, 1e-4, "dr " + what);
  expect_near_all(db, db_ref, tol, 1e-4, "db " + what);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const RnnCell cells[] = {RnnCell::kSimple, RnnCell::kLstm, RnnCell::kGru};
  for (RnnCell cell : cells)
    for (int opt = 0; opt < 8; ++opt) {
      Case c{cell,           RnnAct::kTanh,  RnnAct::kSigmoid,
             (opt & 1) != 0, (opt & 2) != 0, (opt & 4) != 0,
             false,          true,           false};
      v.push_back(c);
      c.masked = true;
      c.zero_masked = opt % 3 == 0;
      v.push_back(c);
    }
  v.push_back({RnnCell::kLstm, RnnAct::kRelu, RnnAct::kHardSigmoid, false, false, true, false,
               false, false});
  v.push_back({RnnCell::kGru, RnnAct::kTanh, RnnAct::kHardSigmoidKeras2, false, true, true, false,
               true, false});
  v.push_back(
      {RnnCell::kSimple, RnnAct::kRelu, RnnAct::kSigmoid, false, false, true, false, false, true});
  v.push_back(
      {RnnCell::kLstm, RnnAct::kLinear, RnnAct::kSigmoid, false, true, false, false, true, false});
  return v;
}

TEST(RecurrentKernels, MatchReferenceOverShapeSweep) {
  const int shapes[][4] = {{1, 1, 1, 1}, {1, 5, 3, 4}, {3, 1, 2, 3}, {4, 7, 5, 6}, {2, 3, 9, 17}};
  uint32_t seed = 1;
  for (const Case& c : cases())
    for (const auto& s : shapes) check(c, s[0], s[1], s[2], s[3], seed += 7);
}

TEST(RecurrentKernels, InitialAndFinalStatesMatchReference) {
  const int shapes[][4] = {{1, 1, 1, 1}, {3, 1, 2, 3}, {4, 7, 5, 6}};
  uint32_t seed = 5;
  for (const Case& c : cases())
    for (const auto& s : shapes) check(c, s[0], s[1], s[2], s[3], seed += 7, true);
}

TEST(RecurrentKernels, DropoutMasksInsideTheCellMatchReference) {
  const int shapes[][4] = {{1, 1, 1, 1}, {3, 2, 2, 3}, {4, 7, 5, 6}};
  uint32_t seed = 9;
  for (const Case& c : cases())
    for (const auto& s : shapes) {
      seed += 7;
      check(c, s[0], s[1], s[2], s[3], seed, /*states=*/(seed & 8) != 0, /*drop=*/true);
    }
}

TEST(RecurrentKernels, ResultsIndependentOfAlignment) {
  for (RnnCell cell : {RnnCell::kSimple, RnnCell::kLstm, RnnCell::kGru}) {
    RnnDims d;
    d.n = 3, d.t = 5, d.in = 3, d.units = 7, d.cell = cell, d.return_sequences = true;
    const int gu = rnn_gates(cell) * d.units;
    const size_t bsz = cell == RnnCell::kGru ? 2 * gu : gu;
    const auto x = random_floats(static_cast<size_t>(d.n) * d.t * d.in, 3);
    const auto w = random_floats(static_cast<size_t>(d.in) * gu, 4);
    const auto r = random_floats(static_cast<size_t>(d.units) * gu, 5);
    const auto b = random_floats(bsz, 6);
    const auto dy = random_floats(static_cast<size_t>(d.n) * d.t * d.units, 7);
    const size_t ysz = dy.size();
    testing::expect_alignment_independent(
        {x, w, r, b, dy},
        {ysz, rnn_cache_floats(d), rnn_scratch_floats(d), x.size(), w.size(), r.size(), bsz},
        [&](const std::vector<const float*>& in, const std::vector<float*>& out) {
          rnn_forward(d, in[0], in[1], in[2], in[3], nullptr, out[1], out[2], out[0]);
          rnn_backward(d, in[0], in[1], in[2], nullptr, out[1], in[4], out[2], out[3], out[4],
                       out[5], out[6]);
        },
        "rnn cell " + std::to_string(static_cast<int>(cell)));
  }
}

}  // namespace
}  // namespace nnfleet
