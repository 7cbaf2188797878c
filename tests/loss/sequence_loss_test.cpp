// Per-timestep losses and metrics (outputs [N,T,C], labels [N,T]) and Keras's mask weighting,
// against written-out formulas: the loss is the mean over every step of every sample, or with a
// mask sum(loss*mask)/sum(mask); a metric is sum(value*mask)/sum(mask).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "loss/loss.h"
#include "tensor/rng.h"

namespace nnfleet {
namespace {

constexpr int kN = 3, kT = 4, kC = 5, kK = kT * kC;

LossSpec spec(LossKind k, bool logits = false) {
  LossSpec l;
  l.kind = k;
  l.from_logits = logits;
  return l;
}

struct SeqBatch {
  std::vector<float> pred, onehot, values, mask;
  std::vector<int32_t> labels;
};

// Unnormalized probabilities (or logits) in (0.2, 1), labels, their one-hot rows, regression
// targets, and a mask with a fully masked sample (row 1) and some masked steps.
SeqBatch make_seq(uint64_t seed) {
  Rng rng(seed);
  SeqBatch b;
  for (int i = 0; i < kN * kK; ++i) {
    b.pred.push_back(static_cast<float>(0.2 + 0.8 * rng.uniform_double()));
    b.values.push_back(static_cast<float>(rng.normal()));
  }
  b.onehot.assign(b.pred.size(), 0.0f);
  for (int r = 0; r < kN * kT; ++r) {
    b.labels.push_back(static_cast<int32_t>(rng.below(kC)));
    b.onehot[static_cast<size_t>(r) * kC + b.labels.back()] = 1.0f;
  }
  b.mask = {1, 1, 0, 1, /**/ 0, 0, 0, 0, /**/ 1, 0, 1, 1};
  return b;
}

// -log of the normalized, clipped probability of the label (Keras's sparse CE on one step).
double step_ce(const float* p, int32_t label) {
  double s = 0;
  for (int j = 0; j < kC; ++j) s += p[j];
  const double q = std::clamp(p[label] / s, static_cast<double>(1e-7f), 1.0 - 1e-7);
  return -std::log(q);
}

TEST(SequenceLoss, SparsePerTimestepIsTheMeanOverEveryStep) {
  const SeqBatch b = make_seq(1);
  Targets t;
  t.labels = b.labels.data();
  t.steps = kT;
  std::vector<float> per(kN);
  const double sum = loss_forward(spec(LossKind::kSparseCategoricalCrossentropy), kN, kK,
                                  b.pred.data(), t, per.data());
  double total = 0;
  for (int i = 0; i < kN; ++i) {
    double row = 0;
    for (int s = 0; s < kT; ++s) {
      const size_t r = static_cast<size_t>(i) * kT + s;
      row += step_ce(&b.pred[r * kC], b.labels[r]);
    }
    EXPECT_NEAR(per[i], row / kT, 1e-6) << "sample " << i;
    total += row;
  }
  // Keras's sum_over_batch_size on [N,T]: the mean over N*T (times N, as loss_forward returns).
  EXPECT_NEAR(sum / kN, total / (kN * kT), 1e-6);
}

TEST(SequenceLoss, OneHotPerTimestepEqualsSparseLabels) {
  const SeqBatch b = make_seq(2);
  Targets sparse, dense;
  sparse.labels = b.labels.data();
  dense.values = b.onehot.data();
  sparse.steps = dense.steps = kT;
  std::vector<float> ps(kN), pd(kN);
  loss_forward(spec(LossKind::kSparseCategoricalCrossentropy), kN, kK, b.pred.data(), sparse,
               ps.data());
  loss_forward(spec(LossKind::kCategoricalCrossentropy), kN, kK, b.pred.data(), dense, pd.data());
  for (int i = 0; i < kN; ++i) EXPECT_NEAR(ps[i], pd[i], 1e-6);
  std::vector<float> gs(b.pred.size()), gd(b.pred.size());
  loss_backward(spec(LossKind::kSparseCategoricalCrossentropy), kN, kK, b.pred.data(), sparse,
                gs.data());
  loss_backward(spec(LossKind::kCategoricalCrossentropy), kN, kK, b.pred.data(), dense, gd.data());
  for (size_t i = 0; i < gs.size(); ++i) EXPECT_NEAR(gs[i], gd[i], 1e-6);
}

TEST(SequenceLoss, RegressionOnSequencesIsTheMeanOverStepsAndFeatures) {
  const SeqBatch b = make_seq(3);
  for (LossKind k : {LossKind::kMeanSquaredError, LossKind::kMeanAbsoluteError, LossKind::kHuber}) {
    Targets flat, seq;
    flat.values = seq.values = b.values.data();
    seq.steps = kT;
    std::vector<float> pf(kN), ps(kN);
    loss_forward(spec(k), kN, kK, b.pred.data(), flat, pf.data());
    loss_forward(spec(k), kN, kK, b.pred.data(), seq, ps.data());
    for (int i = 0; i < kN; ++i) EXPECT_NEAR(ps[i], pf[i], 1e-6);
  }
}

TEST(SequenceLoss, MaskWeightsTheBatchLossByTheKeptSteps) {
  const SeqBatch b = make_seq(4);
  Targets t;
  t.labels = b.labels.data();
  t.steps = kT;
  t.mask = b.mask.data();
  std::vector<float> per(kN);
  const double sum = loss_forward(spec(LossKind::kSparseCategoricalCrossentropy), kN, kK,
                                  b.pred.data(), t, per.data());
  double weighted = 0, kept = 0;
  for (int i = 0; i < kN; ++i) {
    double row = 0, row_kept = 0;
    for (int s = 0; s < kT; ++s) {
      const size_t r = static_cast<size_t>(i) * kT + s;
      row += b.mask[r] * step_ce(&b.pred[r * kC], b.labels[r]);
      row_kept += b.mask[r];
    }
    EXPECT_NEAR(per[i], row_kept > 0 ? row / row_kept : 0.0, 1e-6) << "sample " << i;
    weighted += row;
    kept += row_kept;
  }
  EXPECT_EQ(kept, 6.0);
  EXPECT_NEAR(sum / kN, weighted / kept, 1e-6);  // Keras 3: sum(loss*mask) / sum(mask)

  // The gradient is mask / sum(mask) times the step's derivative: zero on masked steps.
  std::vector<float> g(b.pred.size(), NAN);
  loss_backward(spec(LossKind::kSparseCategoricalCrossentropy), kN, kK, b.pred.data(), t, g.data());
  for (int r = 0; r < kN * kT; ++r)
    for (int j = 0; j < kC; ++j)
      if (b.mask[static_cast<size_t>(r)] == 0) {
        EXPECT_EQ(g[static_cast<size_t>(r) * kC + j], 0.0f);
      }
}

TEST(SequenceLoss, NothingKeptGivesZeroLossAndGradient) {
  const SeqBatch b = make_seq(5);
  const std::vector<float> none(kN * kT, 0.0f);
  Targets t;
  t.labels = b.labels.data();
  t.steps = kT;
  t.mask = none.data();
  std::vector<float> per(kN, NAN), g(b.pred.size(), NAN);
  EXPECT_EQ(loss_forward(spec(LossKind::kSparseCategoricalCrossentropy), kN, kK, b.pred.data(), t,
                         per.data()),
            0.0);
  loss_backward(spec(LossKind::kSparseCategoricalCrossentropy), kN, kK, b.pred.data(), t, g.data());
  for (float v : per) EXPECT_EQ(v, 0.0f);
  for (float v : g) EXPECT_EQ(v, 0.0f);
}

// d(batch loss)/d pred by central differences, for every loss kind, per timestep with and without
// a mask. The batch loss is loss_forward's value / N.
TEST(SequenceLoss, EveryLossPerTimestepMatchesNumericalGradient) {
  for (const LossSpec& l : all_loss_specs()) {
    for (bool masked : {false, true}) {
      SCOPED_TRACE(loss_name(l) + (l.from_logits ? " logits" : "") + (masked ? " masked" : ""));
      SeqBatch b = make_seq(6);
      if (l.kind == LossKind::kBinaryCrossentropy)
        for (float& v : b.values) v = v > 0 ? 1.0f : 0.0f;
      if (l.kind == LossKind::kHuber || l.kind == LossKind::kMeanAbsoluteError)
        for (size_t i = 0; i < b.values.size(); ++i)
          b.values[i] = b.pred[i] + 0.3f + 0.1f * (i % 7);
      Targets t;
      if (l.sparse())
        t.labels = b.labels.data();
      else
        t.values = l.kind == LossKind::kCategoricalCrossentropy ? b.onehot.data() : b.values.data();
      t.steps = kT;
      if (masked) t.mask = b.mask.data();
      std::vector<float> g(b.pred.size(), NAN), per(kN);
      loss_backward(l, kN, kK, b.pred.data(), t, g.data());
      auto value = [&] { return loss_forward(l, kN, kK, b.pred.data(), t, per.data()) / kN; };
      const double h = 1e-3;
      for (size_t i = 0; i < b.pred.size(); ++i) {
        const float orig = b.pred[i];
        const float xp = static_cast<float>(orig + h), xm = static_cast<float>(orig - h);
        b.pred[i] = xp;
        const double lp = value();
        b.pred[i] = xm;
        const double lm = value();
        b.pred[i] = orig;
        const double num = (lp - lm) / (static_cast<double>(xp) - xm);
        EXPECT_NEAR(g[i], num, 2e-3 * std::fabs(num) + 1e-4) << "element " << i;
      }
    }
  }
}

TEST(SequenceMetrics, AccuracyPerTimestepIsTheMeanOverSteps) {
  const SeqBatch b = make_seq(7);
  Targets t;
  t.labels = b.labels.data();
  t.steps = kT;
  double hits = 0;
  for (int r = 0; r < kN * kT; ++r) {
    const float* p = &b.pred[static_cast<size_t>(r) * kC];
    hits += std::max_element(p, p + kC) - p == b.labels[static_cast<size_t>(r)];
  }
  const double sum =
      metric_sum(MetricKind::kSparseCategoricalAccuracy, kN, kK, b.pred.data(), t, false);
  EXPECT_DOUBLE_EQ(metric_weight(kN, t), kN);
  EXPECT_NEAR(sum / metric_weight(kN, t), hits / (kN * kT), 1e-12);
  // One-hot targets give the same categorical accuracy.
  Targets d;
  d.values = b.onehot.data();
  d.steps = kT;
  EXPECT_NEAR(metric_sum(MetricKind::kCategoricalAccuracy, kN, kK, b.pred.data(), d, false), sum,
              1e-12);
}

TEST(SequenceMetrics, MaskedAccuracyIsKeptHitsOverKeptSteps) {
  const SeqBatch b = make_seq(8);
  Targets t;
  t.labels = b.labels.data();
  t.steps = kT;
  t.mask = b.mask.data();
  double hits = 0, kept = 0;
  for (int r = 0; r < kN * kT; ++r) {
    const float* p = &b.pred[static_cast<size_t>(r) * kC];
    const double m = b.mask[static_cast<size_t>(r)];
    hits += m * (std::max_element(p, p + kC) - p == b.labels[static_cast<size_t>(r)]);
    kept += m;
  }
  const double sum =
      metric_sum(MetricKind::kSparseCategoricalAccuracy, kN, kK, b.pred.data(), t, false);
  // Keras's Mean with the mask as sample weight: total = sum_i mean_t(v*m), count =
  // sum_i mean_t(m), so the result is sum(v*m) / sum(m).
  EXPECT_NEAR(metric_weight(kN, t), kept / kT, 1e-12);
  EXPECT_NEAR(sum / metric_weight(kN, t), hits / kept, 1e-12);
}

}  // namespace
}  // namespace nnfleet
