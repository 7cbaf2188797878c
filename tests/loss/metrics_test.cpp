// Metrics: Keras 3's resolution of "accuracy", history keys, and the per-batch sums.
#include <gtest/gtest.h>

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
  const std::vector<float> p = {0.9f, 0.8f, 0.5f, 0.7f, 0.6f, 0.1f, 0.0f,
                                0.1f, 0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.0f,
                                0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.1f, 0.5f};
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
