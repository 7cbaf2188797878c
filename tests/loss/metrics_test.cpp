// Metrics: Keras 3's resolution of "accuracy", history keys, and the per-batch sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loss/loss.h"

namespace nnfleet {
namespace {

LossSpec spec(LossKind k) {
  LossSpec l;
  l.kind = k;
  return l;
}

TEST(Metrics, AccuracyResolvesLikeKeras3) {
  const LossSpec scce = spec(LossKind::kSparseCategoricalCrossentropy);
  const LossSpec cce = spec(LossKind::kCategoricalCrossentropy);
  const LossSpec bce = spec(LossKind::kBinaryCrossentropy);
  const LossSpec mse = spec(LossKind::kMeanSquaredError);
  for (const char* name : {"accuracy", "acc"}) {
    EXPECT_EQ(resolve_metric(name, scce, 10), MetricKind::kSparseCategoricalAccuracy);
    EXPECT_EQ(resolve_metric(name, cce, 10), MetricKind::kCategoricalAccuracy);
    EXPECT_EQ(resolve_metric(name, bce, 1), MetricKind::kBinaryAccuracy);
    EXPECT_EQ(resolve_metric(name, mse, 1), MetricKind::kBinaryAccuracy);
    // Keras 3 decides from shapes only: multi-output BCE gets categorical_accuracy.
    EXPECT_EQ(resolve_metric(name, bce, 3), MetricKind::kCategoricalAccuracy);
  }
  EXPECT_EQ(resolve_metric("binary_accuracy", bce, 3), MetricKind::kBinaryAccuracy);
  EXPECT_EQ(resolve_metric("categorical_accuracy", cce, 3), MetricKind::kCategoricalAccuracy);
  EXPECT_EQ(resolve_metric("sparse_categorical_accuracy", scce, 3),
            MetricKind::kSparseCategoricalAccuracy);
  EXPECT_EQ(resolve_metric("mae", mse, 3), MetricKind::kMeanAbsoluteError);
  EXPECT_EQ(resolve_metric("mean_squared_error", mse, 3), MetricKind::kMeanSquaredError);
}

TEST(Metrics, RejectsUnknownAndMismatchedMetrics) {
  const LossSpec scce = spec(LossKind::kSparseCategoricalCrossentropy);
  const LossSpec cce = spec(LossKind::kCategoricalCrossentropy);
  try {
    resolve_metric("f1", cce, 3);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown metric \"f1\"; expected one of accuracy, acc,"), std::string::npos)
        << m;
  }
  try {
    resolve_metric("acuracy", cce, 3);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(did you mean 'accuracy'?)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(resolve_metric("categorical_accuracy", scce, 3), ConfigError);
  EXPECT_THROW(resolve_metric("mae", scce, 3), ConfigError);
  EXPECT_THROW(resolve_metric("sparse_categorical_accuracy", cce, 3), ConfigError);
}

TEST(Metrics, KeysAreCanonical) {
  EXPECT_EQ(metric_key("accuracy"), "accuracy");
  EXPECT_EQ(metric_key("acc"), "accuracy");
  EXPECT_EQ(metric_key("mae"), "mae");
  EXPECT_EQ(metric_key("mean_absolute_error"), "mae");
  EXPECT_EQ(metric_key("mean_squared_error"), "mse");
  EXPECT_EQ(metric_key("binary_accuracy"), "binary_accuracy");
  EXPECT_THROW(metric_key("nope"), ConfigError);
}

TEST(Metrics, SparseAccuracyFirstMaximumWinsTies) {
  const std::vector<float> p = {0.5f, 0.5f, 0.0f, 0.1f, 0.2f, 0.7f, 0.3f, 0.3f, 0.3f};
  const std::vector<int32_t> labels = {0, 2, 1};
  // Row 0: tie at 0 and 1 -> 0 (hit). Row 1: 2 (hit). Row 2: three-way tie -> 0 (miss).
  EXPECT_DOUBLE_EQ(metric_sum(MetricKind::kSparseCategoricalAccuracy, 3, 3, p.data(),
                              {nullptr, labels.data()}, false),
                   2.0);
  const std::vector<int32_t> labels2 = {1, 2, 0};
  EXPECT_DOUBLE_EQ(metric_sum(MetricKind::kSparseCategoricalAccuracy, 3, 3, p.data(),
                              {nullptr, labels2.data()}, false),
                   2.0);
}

// The accuracy of one label per row (MetricSet's shortcut and metric_sum alike) against a plain
// first-maximum scan: random rows, rows with ties, and rows with a NaN (never a maximum).
TEST(Metrics, SparseAccuracyMatchesAPlainFirstMaximumScan) {
  const int n = 200, k = 10;
  std::vector<float> p(static_cast<size_t>(n) * k);
  std::vector<int32_t> labels(n);
  uint32_t seed = 7;
  const auto next = [&seed] { return (seed = seed * 1664525u + 1013904223u) >> 8; };
  double hits = 0;
  for (int i = 0; i < n; ++i) {
    float* row = p.data() + static_cast<size_t>(i) * k;
    for (int j = 0; j < k; ++j) row[j] = static_cast<float>(next() % 8) / 8.0f;  // many ties
    if (i % 7 == 3) row[next() % k] = std::nanf("");
    labels[i] = static_cast<int32_t>(next() % k);
    int best = 0;
    for (int j = 1; j < k; ++j)
      if (row[j] > row[best]) best = j;
    hits += best == labels[i] ? 1.0 : 0.0;
  }
  ASSERT_GT(hits, 0.0);
  ASSERT_LT(hits, n);
  const Targets t{nullptr, labels.data()};
  EXPECT_EQ(metric_sum(MetricKind::kSparseCategoricalAccuracy, n, k, p.data(), t, false), hits);
  const MetricSet ms({"accuracy"}, spec(LossKind::kSparseCategoricalCrossentropy), k);
  std::vector<double> state(ms.state_size(), 0.0);
  ms.accumulate(state.data(), n, p.data(), t, nullptr);
  EXPECT_EQ(ms.value(0, state.data()), hits / n);
}

TEST(Metrics, CategoricalAccuracyComparesArgmaxes) {
  const std::vector<float> p = {0.1f, 0.9f, 0.8f, 0.2f, 2.0f, 1.0f};
  const std::vector<float> y = {0, 1, 0, 1, 1, 0};
  EXPECT_DOUBLE_EQ(
      metric_sum(MetricKind::kCategoricalAccuracy, 3, 2, p.data(), {y.data(), nullptr}, false),
      2.0);
}

TEST(Metrics, BinaryAccuracyThresholds) {
  // Probabilities: strictly greater than 0.5 counts as 1.
  const std::vector<float> p = {0.7f, 0.5f, 0.2f, 0.51f};
  const std::vector<float> y = {1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(
      metric_sum(MetricKind::kBinaryAccuracy, 4, 1, p.data(), {y.data(), nullptr}, false), 2.0);
  // K = 2: each sample counts the fraction of its outputs that match.
  EXPECT_DOUBLE_EQ(
      metric_sum(MetricKind::kBinaryAccuracy, 2, 2, p.data(), {y.data(), nullptr}, false), 1.0);
  // Logits threshold at 0.
  const std::vector<float> x = {0.1f, -0.1f, 0.3f, -2.0f};
  const std::vector<float> yx = {1, 0, 0, 0};
  EXPECT_DOUBLE_EQ(
      metric_sum(MetricKind::kBinaryAccuracy, 4, 1, x.data(), {yx.data(), nullptr}, true), 3.0);
  // Integer labels with one output: predictions 1, 0, 0, 1.
  const std::vector<int32_t> labels = {1, 0, 1, 1};
  EXPECT_DOUBLE_EQ(
      metric_sum(MetricKind::kBinaryAccuracy, 4, 1, p.data(), {nullptr, labels.data()}, false),
      3.0);
}

TEST(Metrics, MeanErrorsAverageOverOutputs) {
  const std::vector<float> p = {1, 2, 0, 0}, y = {0, 4, 1, 1};
  EXPECT_DOUBLE_EQ(
      metric_sum(MetricKind::kMeanAbsoluteError, 2, 2, p.data(), {y.data(), nullptr}, false),
      1.5 + 1.0);
  EXPECT_DOUBLE_EQ(
      metric_sum(MetricKind::kMeanSquaredError, 2, 2, p.data(), {y.data(), nullptr}, false),
      2.5 + 1.0);
}

TEST(Metrics, TopKCountsTiesAtTheBoundaryAsHits) {
  // Seven classes; in row 0 the true class 2 has four strictly greater outputs (a hit), in row 1
  // the true class 0 has five (a miss), in row 2 class 6 ties with the fifth largest (a hit).
  const std::vector<float> p = {0.9f, 0.8f, 0.5f, 0.7f, 0.6f, 0.1f, 0.0f, 0.1f, 0.9f, 0.8f, 0.7f,
                                0.6f, 0.5f, 0.0f, 0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.1f, 0.5f};
  const std::vector<int32_t> labels = {2, 0, 6};
  EXPECT_DOUBLE_EQ(metric_sum(MetricKind::kSparseTopKCategoricalAccuracy, 3, 7, p.data(),
                              {nullptr, labels.data()}, false),
                   2.0);
  std::vector<float> onehot(21, 0.0f);
  for (int i = 0; i < 3; ++i) onehot[static_cast<size_t>(i * 7 + labels[i])] = 1.0f;
  EXPECT_DOUBLE_EQ(metric_sum(MetricKind::kTopKCategoricalAccuracy, 3, 7, p.data(),
                              {onehot.data(), nullptr}, false),
                   2.0);
  EXPECT_EQ(resolve_metric("sparse_top_k_categorical_accuracy",
                           spec(LossKind::kSparseCategoricalCrossentropy), 7),
            MetricKind::kSparseTopKCategoricalAccuracy);
  EXPECT_THROW(resolve_metric("top_k_categorical_accuracy",
                              spec(LossKind::kSparseCategoricalCrossentropy), 7),
               ConfigError);
}

TEST(Metrics, MeanAbsolutePercentageErrorGuardsZeroTargets) {
  const std::vector<float> p = {110, 0.5f}, y = {100, 0};
  // Row 0: 100 * 10 / 100 = 10; row 1: 100 * 0.5 / 1e-7 (Keras's epsilon guards the zero).
  EXPECT_NEAR(metric_sum(MetricKind::kMeanAbsolutePercentageError, 2, 1, p.data(),
                         {y.data(), nullptr}, false),
              10.0 + 100.0 * 0.5 / 1e-7, 1e-3);
  EXPECT_EQ(metric_key("mean_absolute_percentage_error"), "mape");
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// The data of tools/metrics_reference.py (Keras 3's formulas written out in numpy).
const std::vector<float> kY = {1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0,
                               1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0};
const std::vector<float> kP = {0.91f, 0.12f, 0.33f, 0.61f, 0.72f, 0.87f, 0.44f, 0.38f,
                               0.58f, 0.07f, 0.21f, 0.49f, 0.66f, 0.93f, 0.52f, 0.77f,
                               0.09f, 0.29f, 0.47f, 0.55f, 0.81f, 0.64f, 0.62f, 0.18f};
const std::vector<float> kW = {1.0f, 2.0f,  0.5f, 1.5f, 0.0f,  3.0f,
                               1.0f, 0.25f, 2.0f, 1.0f, 0.75f, 1.25f};
const std::vector<float> kYR = {1.5f, -2.0f, 0.25f, 3.0f, 2.0f, 1.0f, -1.0f, 0.5f, 0.75f, -0.25f};
const std::vector<float> kPR = {1.25f, -1.5f, 0.5f, 2.5f, 1.75f, 1.5f, -0.5f, 0.0f, 1.0f, -0.75f};
const std::vector<float> kWR = {2.0f, 1.0f, 0.5f, 1.0f, 3.0f};

// Accumulates rows [0, n) in batches of `batch` rows (epoch-level: the batches' statistics add
// up, they are not averaged) and returns every metric's value.
std::vector<double> epoch_values(const MetricSet& ms, int n, int k, const std::vector<float>& p,
                                 const std::vector<float>& y, const float* w, int batch) {
  std::vector<double> state(ms.state_size(), 0.0);
  for (int r = 0; r < n; r += batch) {
    const int m = std::min(batch, n - r);
    Targets t;
    t.values = y.data() + static_cast<size_t>(r) * k;
    ms.accumulate(state.data(), m, p.data() + static_cast<size_t>(r) * k, t, w ? w + r : nullptr);
  }
  std::vector<double> v;
  for (size_t i = 0; i < ms.size(); ++i) v.push_back(ms.value(i, state.data()));
  return v;
}

TEST(MetricSet, PrecisionRecallAucMatchKerasFormulasOverAnEpoch) {
  LossSpec bce;
  bce.kind = LossKind::kBinaryCrossentropy;
  const MetricSet ms({"precision", "Recall", "auc"}, bce, 2);
  EXPECT_EQ(ms.key(1), "Recall");  // Keras 3 names a metric as written
  for (int batch : {12, 5, 1}) {
    const auto v = epoch_values(ms, 12, 2, kP, kY, nullptr, batch);
    EXPECT_NEAR(v[0], 0.69230769230769229, 1e-12) << batch;
    EXPECT_NEAR(v[1], 0.81818181818181823, 1e-12) << batch;
    EXPECT_NEAR(v[2], 0.90909090909090906, 1e-12) << batch;
    const auto w = epoch_values(ms, 12, 2, kP, kY, kW.data(), batch);
    EXPECT_NEAR(w[0], 0.56097560975609762, 1e-12) << batch;
    EXPECT_NEAR(w[1], 0.69696969696969702, 1e-12) << batch;
    EXPECT_NEAR(w[2], 0.87429854096520754, 1e-12) << batch;
  }
}

TEST(MetricSet, RmseAndR2MatchKerasFormulasOverAnEpoch) {
  LossSpec mse;
  const MetricSet ms({"root_mean_squared_error", "r2_score"}, mse, 2);
  for (int batch : {5, 2}) {
    const auto v = epoch_values(ms, 5, 2, kPR, kYR, nullptr, batch);
    EXPECT_NEAR(v[0], 0.41833001326703778, 1e-12) << batch;
    EXPECT_NEAR(v[1], 0.90692456948823663, 1e-12) << batch;
    const auto w = epoch_values(ms, 5, 2, kPR, kYR, kWR.data(), batch);
    EXPECT_NEAR(w[0], 0.41079191812887461, 1e-12) << batch;
    EXPECT_NEAR(w[1], 0.88461638425405287, 1e-12) << batch;
  }
}

TEST(MetricSet, MeansEqualTheBatchSumsAndWeightsWeighSamples) {
  LossSpec mse;
  const MetricSet ms({"mae", "mse"}, mse, 2);
  // Unweighted: the batches' metric_sum added up, over the rows, bit for bit.
  double sum = 0;
  for (int r = 0; r < 5; r += 2) {
    Targets t;
    t.values = kYR.data() + 2 * r;
    sum += metric_sum(MetricKind::kMeanAbsoluteError, std::min(2, 5 - r), 2, kPR.data() + 2 * r, t,
                      false);
  }
  EXPECT_EQ(epoch_values(ms, 5, 2, kPR, kYR, nullptr, 2)[0], sum / 5);
  // Weighted: sum(w * value) / sum(w).
  double num = 0, den = 0;
  for (int i = 0; i < 5; ++i) {
    const double a =
        (std::fabs(kPR[2 * i] - kYR[2 * i]) + std::fabs(kPR[2 * i + 1] - kYR[2 * i + 1])) / 2;
    num += kWR[i] * a;
    den += kWR[i];
  }
  EXPECT_NEAR(epoch_values(ms, 5, 2, kPR, kYR, kWR.data(), 5)[0], num / den, 1e-12);
  // Nothing counted: 0, as Keras's divide_no_nan.
  const std::vector<float> zeros(5, 0.0f);
  EXPECT_EQ(epoch_values(ms, 5, 2, kPR, kYR, zeros.data(), 5)[0], 0.0);
}

TEST(MetricSet, ConfusionMetricsNeedTargetsLikeThePredictions) {
  LossSpec scce;
  scce.kind = LossKind::kSparseCategoricalCrossentropy;
  for (const char* name : {"precision", "recall", "auc", "root_mean_squared_error", "r2_score"})
    EXPECT_THROW(MetricSet({name}, scce, 3), ConfigError) << name;
  EXPECT_TRUE(metric_goes_up("auc"));
  EXPECT_TRUE(metric_goes_up("r2_score"));
  EXPECT_FALSE(metric_goes_up("root_mean_squared_error"));
}

}  // namespace
}  // namespace nnfleet
