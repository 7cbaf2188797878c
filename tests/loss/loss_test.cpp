// Losses: a central-difference gradient check for every entry of all_loss_specs(), values against
// hand computations (and the examples in Keras's docstrings), clipping, and config parsing.
#include "loss/loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/rng.h"

namespace nnfleet {
namespace {

struct Batch {
  int n = 0, k = 0;
  std::vector<float> pred, values;
  std::vector<int32_t> labels;
  Targets targets() const {
    Targets t;
    if (!values.empty()) t.values = values.data();
    if (!labels.empty()) t.labels = labels.data();
    return t;
  }
};

double uniform(Rng& rng, double lo, double hi) { return lo + (hi - lo) * rng.uniform_double(); }

// Random predictions and targets for `l`, kept away from every kink and clipping boundary of the
// loss so that central differences are valid. The switch has no default: a new LossKind does not
// compile cleanly (-Wswitch) until it has test data here.
Batch make_batch(const LossSpec& l, int n, int k, Rng& rng) {
  Batch b;
  b.n = n;
  b.k = k;
  b.pred.resize(static_cast<size_t>(n) * k);
  if (!l.sparse()) b.values.resize(b.pred.size());
  switch (l.kind) {
    case LossKind::kMeanSquaredError:
    case LossKind::kMeanAbsoluteError:
    case LossKind::kHuber:
      for (size_t i = 0; i < b.pred.size(); ++i) {
        b.values[i] = static_cast<float>(rng.normal());
        double e;
        do {
          e = uniform(rng, 0.1, 1.5) * (rng.below(2) ? 1 : -1);
        } while (std::fabs(std::fabs(e) - l.delta) < 0.05);  // away from Huber's kink
        b.pred[i] = static_cast<float>(b.values[i] + e);
      }
      break;
    case LossKind::kBinaryCrossentropy:
      for (size_t i = 0; i < b.pred.size(); ++i) {
        // Hard and soft targets (Keras accepts both).
        b.values[i] =
            i % 3 == 2 ? static_cast<float>(uniform(rng, 0, 1)) : static_cast<float>(rng.below(2));
        b.pred[i] =
            static_cast<float>(l.from_logits ? uniform(rng, -3, 3) : uniform(rng, 0.15, 0.85));
      }
      break;
    case LossKind::kCategoricalCrossentropy:
    case LossKind::kSparseCategoricalCrossentropy:
      for (int i = 0; i < n; ++i) {
        float* p = &b.pred[static_cast<size_t>(i) * k];
        // Unnormalized probabilities exercise Keras's p / sum(p).
        for (int j = 0; j < k; ++j)
          p[j] = static_cast<float>(l.from_logits ? uniform(rng, -3, 3) : uniform(rng, 0.2, 1.0));
        if (l.sparse()) {
          b.labels.push_back(static_cast<int32_t>(rng.below(k)));
        } else if (i % 2 == 0) {
          b.values[static_cast<size_t>(i) * k + rng.below(k)] = 1.0f;  // one-hot
        } else {
          double s = 0;
          for (int j = 0; j < k; ++j)
            s += (b.values[static_cast<size_t>(i) * k + j] =
                      static_cast<float>(uniform(rng, 0.1, 1)));
          for (int j = 0; j < k; ++j) b.values[static_cast<size_t>(i) * k + j] /= s;  // soft
        }
      }
      break;
  }
  return b;
}

// The batch loss (mean of the per-sample losses) in double.
double batch_loss(const LossSpec& l, const Batch& b) {
  std::vector<float> per(b.n);
  loss_forward(l, b.n, b.k, b.pred.data(), b.targets(), per.data());
  double s = 0;
  for (float v : per) s += v;
  return s / b.n;
}

std::string describe(const LossSpec& l) {
  return loss_name(l) + (l.from_logits ? " (from_logits)" : "") +
         (l.kind == LossKind::kHuber ? " delta " + std::to_string(l.delta) : "");
}

void gradient_check(const LossSpec& l, int n, int k, uint64_t seed) {
  SCOPED_TRACE(describe(l) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
  Rng rng(seed);
  Batch b = make_batch(l, n, k, rng);
  std::vector<float> grad(b.pred.size(), NAN);
  loss_backward(l, n, k, b.pred.data(), b.targets(), grad.data());
  double gmax = 0;
  for (float g : grad) gmax = std::max(gmax, static_cast<double>(std::fabs(g)));
  ASSERT_GT(gmax, 0.0);
  // Probabilities use a smaller step (log has large higher derivatives near 0); everything else
  // is piecewise polynomial or smooth and bounded.
  const bool prob = !l.from_logits && (l.kind == LossKind::kBinaryCrossentropy ||
                                       l.kind == LossKind::kCategoricalCrossentropy || l.sparse());
  const double h = prob ? 1e-3 : 1e-2;
  for (size_t i = 0; i < b.pred.size(); ++i) {
    const float orig = b.pred[i];
    const float xp = static_cast<float>(orig + h), xm = static_cast<float>(orig - h);
    b.pred[i] = xp;
    const double lp = batch_loss(l, b);
    b.pred[i] = xm;
    const double lm = batch_loss(l, b);
    b.pred[i] = orig;
    const double num = (lp - lm) / (static_cast<double>(xp) - xm);
    // Float per-sample losses limit the numerical derivative to ~1e-4 of the gradient's scale.
    EXPECT_NEAR(grad[i], num, 1e-3 * (std::fabs(num) + gmax)) << "element " << i;
  }
}

TEST(Loss, EveryLossMatchesNumericalGradient) {
  uint64_t seed = 1;
  for (const LossSpec& l : all_loss_specs()) {
    const bool categorical = l.kind == LossKind::kCategoricalCrossentropy || l.sparse();
    for (auto [n, k] : {std::pair{1, 1}, std::pair{3, 4}, std::pair{5, 7}, std::pair{2, 10}}) {
      if (categorical && k == 1) continue;  // one class: p / sum(p) == 1, always clipped
      gradient_check(l, n, k, seed++);
    }
  }
}

TEST(Loss, EveryNamedLossIsInTheGradientCheckList) {
  const auto specs = all_loss_specs();
  for (const auto& name : loss_names()) {
    const LossSpec l = parse_loss(Json(name));
    bool found = false;
    for (const auto& s : specs) found = found || s.kind == l.kind;
    EXPECT_TRUE(found) << name;
    for (bool logits : {false, true}) {
      const bool xent = l.kind == LossKind::kBinaryCrossentropy ||
                        l.kind == LossKind::kCategoricalCrossentropy || l.sparse();
      if (logits && !xent) continue;
      bool variant = false;
      for (const auto& s : specs)
        variant = variant || (s.kind == l.kind && s.from_logits == logits);
      EXPECT_TRUE(variant) << name << " from_logits=" << logits;
    }
  }
}

// ---- values against hand computations ----

LossSpec spec(LossKind k, bool logits = false) {
  LossSpec l;
  l.kind = k;
  l.from_logits = logits;
  return l;
}

std::vector<float> forward(const LossSpec& l, int n, int k, const std::vector<float>& p,
                           const Targets& t) {
  std::vector<float> per(n);
  loss_forward(l, n, k, p.data(), t, per.data());
  return per;
}

std::vector<float> backward(const LossSpec& l, int n, int k, const std::vector<float>& p,
                            const Targets& t) {
  std::vector<float> g(p.size(), NAN);
  loss_backward(l, n, k, p.data(), t, g.data());
  return g;
}

void expect_all_near(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "index " << i;
}

TEST(Loss, MeanSquaredAndAbsoluteErrorByHand) {
  const std::vector<float> p = {1, 2, 0, 0}, y = {0, 4, 1, 1};
  const Targets t{y.data(), nullptr};
  // mse: ((1)^2 + (-2)^2) / 2 = 2.5, (1 + 1) / 2 = 1; d = 2 (p - y) / (K N).
  expect_all_near(forward(spec(LossKind::kMeanSquaredError), 2, 2, p, t), {2.5, 1.0}, 1e-6);
  expect_all_near(backward(spec(LossKind::kMeanSquaredError), 2, 2, p, t), {0.5, -1.0, -0.5, -0.5},
                  1e-6);
  // mae: (1 + 2) / 2 = 1.5, 1; d = sign(p - y) / (K N).
  expect_all_near(forward(spec(LossKind::kMeanAbsoluteError), 2, 2, p, t), {1.5, 1.0}, 1e-6);
  expect_all_near(backward(spec(LossKind::kMeanAbsoluteError), 2, 2, p, t),
                  {0.25, -0.25, -0.25, -0.25}, 1e-6);
}

TEST(Loss, HuberByHand) {
  // e = [0.5, -2], delta 1: 0.5 * 0.25 = 0.125 and 1 * 2 - 0.5 = 1.5; mean 0.8125.
  const std::vector<float> p = {0.5f, -2}, y = {0, 0};
  const Targets t{y.data(), nullptr};
  LossSpec l = spec(LossKind::kHuber);
  expect_all_near(forward(l, 1, 2, p, t), {0.8125}, 1e-6);
  expect_all_near(backward(l, 1, 2, p, t), {0.25, -0.5}, 1e-6);
  l.delta = 3;  // both quadratic: (0.125 + 2) / 2
  expect_all_near(forward(l, 1, 2, p, t), {1.0625}, 1e-6);
}

TEST(Loss, BinaryCrossentropyMatchesKerasDocExample) {
  // keras.losses.binary_crossentropy([[0, 1], [0, 0]], [[0.6, 0.4], [0.4, 0.6]]) = [0.916, 0.714]
  const std::vector<float> p = {0.6f, 0.4f, 0.4f, 0.6f}, y = {0, 1, 0, 0};
  const Targets t{y.data(), nullptr};
  const auto per = forward(spec(LossKind::kBinaryCrossentropy), 2, 2, p, t);
  expect_all_near(per, {-std::log(0.4), -(std::log(0.6) + std::log(0.4)) / 2}, 1e-6);
  EXPECT_NEAR(per[0], 0.916, 5e-4);
  EXPECT_NEAR(per[1], 0.714, 5e-4);
  // d/dp of -(y log p + (1-y) log(1-p)) = -y/p + (1-y)/(1-p), over K N = 4.
  expect_all_near(backward(spec(LossKind::kBinaryCrossentropy), 2, 2, p, t),
                  {1 / 0.4 / 4, -1 / 0.4 / 4, 1 / 0.6 / 4, 1 / 0.4 / 4}, 1e-6);
}

TEST(Loss, BinaryCrossentropyFromLogitsByHand) {
  const std::vector<float> x = {0, 2, -30, 30}, y = {1, 1, 0, 1};
  const Targets t{y.data(), nullptr};
  // log(1 + e^-x) for y = 1, log(1 + e^x) for y = 0; stable at |x| = 30.
  const auto per = forward(spec(LossKind::kBinaryCrossentropy, true), 1, 4, x, t);
  EXPECT_NEAR(per[0],
              (std::log(2.0) + std::log1p(std::exp(-2.0)) + 2 * std::log1p(std::exp(-30.0))) / 4,
              1e-6);
  const auto g = backward(spec(LossKind::kBinaryCrossentropy, true), 1, 4, x, t);
  expect_all_near(g, {(0.5 - 1) / 4, (1 / (1 + std::exp(-2.0)) - 1) / 4, 0, 0}, 1e-6);
}

TEST(Loss, CategoricalCrossentropyMatchesKerasDocExample) {
  const std::vector<float> y = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const std::vector<float> p = {.9f, .05f, .05f, .05f, .89f, .06f, .05f, .01f, .94f};
  const auto per = forward(spec(LossKind::kCategoricalCrossentropy), 3, 3, p, {y.data(), nullptr});
  expect_all_near(per, {0.10536, 0.11653, 0.06188}, 1e-5);
  // categorical_crossentropy(a, a) = 0 (clipped at 1 - eps: -log(1 - 1e-7) ~ 1e-7).
  expect_all_near(forward(spec(LossKind::kCategoricalCrossentropy), 3, 3, y, {y.data(), nullptr}),
                  {0, 0, 0}, 1e-6);
}

TEST(Loss, CategoricalCrossentropyNormalizesProbabilities) {
  // p = [1, 3] -> q = [0.25, 0.75]; y = [0, 1]: loss = -log 0.75.
  // dL/dp = (dq - sum dq q) / S with dq = [0, -1/0.75], sum dq q = -1, S = 4: [0.25, -1/12].
  const std::vector<float> p = {1, 3}, y = {0, 1};
  const Targets t{y.data(), nullptr};
  expect_all_near(forward(spec(LossKind::kCategoricalCrossentropy), 1, 2, p, t), {-std::log(0.75)},
                  1e-6);
  expect_all_near(backward(spec(LossKind::kCategoricalCrossentropy), 1, 2, p, t), {0.25, -1.0 / 12},
                  1e-6);
}

TEST(Loss, SparseCategoricalCrossentropyMatchesKerasDocExample) {
  // keras.losses.sparse_categorical_crossentropy([1, 2], [[0.05, 0.95, 0], [0.1, 0.8, 0.1]])
  // = [0.0513, 2.3026]
  const std::vector<float> p = {0.05f, 0.95f, 0, 0.1f, 0.8f, 0.1f};
  const std::vector<int32_t> labels = {1, 2};
  const auto per =
      forward(spec(LossKind::kSparseCategoricalCrossentropy), 2, 3, p, {nullptr, labels.data()});
  expect_all_near(per, {-std::log(0.95), -std::log(0.1)}, 1e-6);
}

TEST(Loss, SoftmaxCrossentropyFromLogitsByHand) {
  // logits [1, 2, 3], class 2: log(e + e^2 + e^3) - 3 = 0.4076059644.
  const std::vector<float> x = {1, 2, 3};
  const std::vector<float> y = {0, 0, 1};
  const std::vector<int32_t> label = {2};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const std::vector<double> grad = {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z - 1};
  LossSpec cce = spec(LossKind::kCategoricalCrossentropy, true);
  LossSpec scce = spec(LossKind::kSparseCategoricalCrossentropy, true);
  expect_all_near(forward(cce, 1, 3, x, {y.data(), nullptr}), {0.4076059644}, 1e-6);
  expect_all_near(forward(scce, 1, 3, x, {nullptr, label.data()}), {0.4076059644}, 1e-6);
  expect_all_near(backward(cce, 1, 3, x, {y.data(), nullptr}), grad, 1e-6);
  expect_all_near(backward(scce, 1, 3, x, {nullptr, label.data()}), grad, 1e-6);
  // Large logits stay finite.
  const std::vector<float> big = {1000, 0, -1000};
  const auto per = forward(scce, 1, 3, big, {nullptr, label.data()});
  EXPECT_NEAR(per[0], 2000, 1e-3);
}

TEST(Loss, BackwardIncludesTheBatchMean) {
  // The same sample twice: per-sample gradients halve.
  const std::vector<float> p1 = {0.3f, 0.7f}, p2 = {0.3f, 0.7f, 0.3f, 0.7f};
  const std::vector<int32_t> l1 = {1}, l2 = {1, 1};
  LossSpec l = spec(LossKind::kSparseCategoricalCrossentropy);
  const auto g1 = backward(l, 1, 2, p1, {nullptr, l1.data()});
  const auto g2 = backward(l, 2, 2, p2, {nullptr, l2.data()});
  EXPECT_NEAR(g2[0], g1[0] / 2, 1e-7);
  EXPECT_NEAR(g2[3], g1[1] / 2, 1e-7);
}

TEST(Loss, ClippedProbabilitiesHaveZeroGradient) {
  const double log_eps = -std::log(static_cast<double>(1e-7f));  // 16.118...
  // BCE at p = 0 and p = 1 with the wrong targets: clipped, loss -log(eps), no gradient.
  const std::vector<float> p = {0, 1, 1e-9f}, y = {1, 0, 1};
  const Targets t{y.data(), nullptr};
  const auto per = forward(spec(LossKind::kBinaryCrossentropy), 1, 3, p, t);
  // The upper bound is float32(1 - 1e-7), so 1 - hi is 1.19e-7, not 1e-7.
  const double log_hi = -std::log(1.0 - static_cast<float>(1.0 - 1e-7));
  EXPECT_NEAR(per[0], (2 * log_eps + log_hi) / 3, 1e-5);
  expect_all_near(backward(spec(LossKind::kBinaryCrossentropy), 1, 3, p, t), {0, 0, 0}, 0);
  // CCE with the true class at 0: q = [0, 0.5, 0.5] -> clipped; nothing else carries weight.
  const std::vector<float> pc = {0, 1, 1}, yc = {1, 0, 0};
  const Targets tc{yc.data(), nullptr};
  expect_all_near(forward(spec(LossKind::kCategoricalCrossentropy), 1, 3, pc, tc), {log_eps}, 1e-4);
  expect_all_near(backward(spec(LossKind::kCategoricalCrossentropy), 1, 3, pc, tc), {0, 0, 0}, 0);
  // Sparse likewise.
  const std::vector<int32_t> label = {0};
  LossSpec s = spec(LossKind::kSparseCategoricalCrossentropy);
  expect_all_near(forward(s, 1, 3, pc, {nullptr, label.data()}), {log_eps}, 1e-4);
  expect_all_near(backward(s, 1, 3, pc, {nullptr, label.data()}), {0, 0, 0}, 0);
}

// Sparse labels take a shortcut (every column but the label's gets the same value); it must give
// the bits of the general form, which categorical cross-entropy with one-hot targets runs: over
// random softmax-like rows of 10 classes, rows whose label's probability is clipped low or high,
// and batch sizes that scale the gradient.
TEST(Loss, SparseGradientEqualsOneHotCategoricalBitForBit) {
  Rng r(11);
  const int n = 64, k = 10;
  std::vector<float> p(n * k), onehot(n * k, 0.0f);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) {
    float* row = p.data() + i * k;
    for (int j = 0; j < k; ++j) row[j] = r.uniform() + 1e-3f;
    labels[i] = static_cast<int32_t>(r.below(k));
    if (i % 8 == 1) row[labels[i]] = 1e-12f;  // clipped low
    if (i % 8 == 2)
      for (int j = 0; j < k; ++j) row[j] = j == labels[i] ? 1.0f : 0.0f;  // clipped high
    onehot[i * k + labels[i]] = 1.0f;
  }
  for (int batch : {n, 2 * n, 0}) {
    std::vector<float> gs(n * k, 7.0f), gc(n * k, 7.0f);
    loss_backward(spec(LossKind::kSparseCategoricalCrossentropy), n, k, p.data(),
                  {nullptr, labels.data()}, gs.data(), batch);
    loss_backward(spec(LossKind::kCategoricalCrossentropy), n, k, p.data(),
                  {onehot.data(), nullptr}, gc.data(), batch);
    EXPECT_EQ(std::memcmp(gs.data(), gc.data(), gs.size() * sizeof(float)), 0) << batch;
  }
}

// One label per row without a mask or weights takes a shortcut (label_head_forward/backward);
// sample weights of exactly 1 take the general loops and must give the same bits, loss and
// gradient, over softmax-like rows of 2, 10 and 37 classes with clipped ones among them.
TEST(Loss, LabelShortcutGivesTheGeneralLoopsBits) {
  Rng r(23);
  for (const int k : {2, 10, 37}) {
    const int n = 48;
    std::vector<float> p(static_cast<size_t>(n) * k), per(n), per_w(n), ones(n, 1.0f);
    std::vector<int32_t> labels(n);
    for (int i = 0; i < n; ++i) {
      float* row = p.data() + static_cast<size_t>(i) * k;
      for (int j = 0; j < k; ++j) row[j] = r.uniform() + 1e-3f;
      labels[i] = static_cast<int32_t>(r.below(k));
      if (i % 6 == 1) row[labels[i]] = 1e-12f;  // clipped low
      if (i % 6 == 2)
        for (int j = 0; j < k; ++j) row[j] = j == labels[i] ? 1.0f : 0.0f;  // clipped high
    }
    const LossSpec l = spec(LossKind::kSparseCategoricalCrossentropy);
    Targets plain{nullptr, labels.data()}, weighted = plain;
    weighted.weights = ones.data();
    const double sum = loss_forward(l, n, k, p.data(), plain, per.data());
    const double sum_w = loss_forward(l, n, k, p.data(), weighted, per_w.data());
    EXPECT_EQ(std::memcmp(&sum, &sum_w, sizeof sum), 0) << k;
    EXPECT_EQ(std::memcmp(per.data(), per_w.data(), per.size() * sizeof(float)), 0) << k;
    for (int batch : {n, 3 * n, 0}) {
      std::vector<float> g(p.size(), 7.0f), g_w(p.size(), 5.0f);
      loss_backward(l, n, k, p.data(), plain, g.data(), batch);
      loss_backward(l, n, k, p.data(), weighted, g_w.data(), batch);
      EXPECT_EQ(std::memcmp(g.data(), g_w.data(), g.size() * sizeof(float)), 0)
          << k << " classes, batch " << batch;
    }
  }
}

TEST(Loss, ValidateLabelsRejectsOutOfRange) {
  const std::vector<int32_t> ok = {0, 2, 1}, bad = {0, 3, 1};
  EXPECT_NO_THROW(validate_labels(3, 3, ok.data()));
  try {
    validate_labels(3, 3, bad.data());
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("at sample 1; expected 0..2, got 3"), std::string::npos)
        << e.what();
  }
}

// ---- parsing ----

TEST(LossParse, NamesAndAliases) {
  EXPECT_EQ(parse_loss(Json("mse")).kind, LossKind::kMeanSquaredError);
  EXPECT_EQ(parse_loss(Json("MSE")).kind, LossKind::kMeanSquaredError);
  EXPECT_EQ(parse_loss(Json("mean_absolute_error")).kind, LossKind::kMeanAbsoluteError);
  EXPECT_EQ(parse_loss(Json("huber")).kind, LossKind::kHuber);
  EXPECT_FLOAT_EQ(parse_loss(Json("huber")).delta, 1.0f);
  EXPECT_EQ(parse_loss(Json("bce")).kind, LossKind::kBinaryCrossentropy);
  EXPECT_EQ(parse_loss(Json("CategoricalCrossentropy")).kind, LossKind::kCategoricalCrossentropy);
  const LossSpec s = parse_loss(Json("sparse_categorical_crossentropy"));
  EXPECT_TRUE(s.sparse());
  EXPECT_FALSE(s.from_logits);
  for (const auto& n : loss_names()) {
    const LossSpec l = parse_loss(Json(n));
    EXPECT_EQ(parse_loss(Json(loss_name(l))).kind, l.kind) << n;
  }
}

TEST(LossParse, PlanFormTakesOptions) {
  LossSpec l = parse_loss(Json::parse(R"({"CategoricalCrossentropy": {"from_logits": true}})"));
  EXPECT_EQ(l.kind, LossKind::kCategoricalCrossentropy);
  EXPECT_TRUE(l.from_logits);
  l = parse_loss(Json::parse(R"({"huber": {"delta": "0.5"}})"));
  EXPECT_FLOAT_EQ(l.delta, 0.5f);
}

TEST(LossParse, KerasFormToleratesDefaults) {
  const Json j = Json::parse(R"({"module": "keras.losses",
      "class_name": "SparseCategoricalCrossentropy",
      "config": {"name": "sparse_categorical_crossentropy", "reduction": "sum_over_batch_size",
                 "from_logits": true, "ignore_class": null, "axis": -1},
      "registered_name": null})");
  const LossSpec l = parse_loss(j);
  EXPECT_TRUE(l.sparse());
  EXPECT_TRUE(l.from_logits);
  const Json c = Json::parse(R"({"class_name": "CategoricalCrossentropy",
      "config": {"name": "cce", "reduction": "sum_over_batch_size", "from_logits": false,
                 "label_smoothing": 0.0, "axis": -1, "dtype": null}})");
  EXPECT_EQ(parse_loss(c).kind, LossKind::kCategoricalCrossentropy);
}

TEST(LossParse, ErrorsNameTheKey) {
  try {
    parse_loss(Json("cross_entropy"));
    FAIL();
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown loss \"cross_entropy\"; expected one of mean_squared_error, mse"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("sparse_categorical_crossentropy"), std::string::npos) << m;
  }
  try {
    parse_loss(Json::parse(R"({"class_name": "SparseCategoricalCrossentropi", "config": {}})"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(did you mean 'SparseCategoricalCrossentropy'?)"),
              std::string::npos)
        << e.what();
  }
  try {
    parse_loss(Json::parse(R"({"class_name": "CategoricalCrossentropy",
                               "config": {"label_smoothing": 0.1}})"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "label_smoothing");
    EXPECT_NE(std::string(e.what()).find("got 0.1"), std::string::npos) << e.what();
  }
  try {
    parse_loss(Json::parse(R"({"mse": {"from_logits": true}})"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "from_logits");
    EXPECT_NE(std::string(e.what()).find("unknown key 'from_logits'"), std::string::npos);
  }
  EXPECT_THROW(parse_loss(Json::parse(R"({"huber": {"delta": 0}})")), ConfigError);
  EXPECT_THROW(parse_loss(Json::parse(R"({"bce": {"from_logits": "maybe"}})")), ConfigError);
  EXPECT_THROW(parse_loss(Json::parse(R"({"mse": {}, "mae": {}})")), ConfigError);
  EXPECT_THROW(parse_loss(Json::parse(R"({"class_name": "MeanSquaredError",
                                          "config": {"reduction": "sum"}})")),
               ConfigError);
}

TEST(LossParse, KerasFormRoundTrips) {
  for (const LossSpec& l : all_loss_specs()) {
    const LossSpec r = parse_loss(loss_to_keras(l));
    EXPECT_EQ(r.kind, l.kind) << describe(l);
    EXPECT_EQ(r.from_logits, l.from_logits) << describe(l);
    EXPECT_FLOAT_EQ(r.delta, l.delta) << describe(l);
  }
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// Keras 3: losses * sample_weight, then sum_over_batch_size divides by N (not by sum(w)).
TEST(LossWeights, SampleWeightsScaleEachSampleAndTheMeanIsOverTheBatchSize) {
  LossSpec mse;
  const float pred[3] = {1, 2, 3}, y[3] = {0, 0, 0}, w[3] = {2.0f, 0.5f, 0.0f};
  Targets t;
  t.values = y;
  t.weights = w;
  float per[3], g[3];
  loss_forward(mse, 3, 1, pred, t, per);
  EXPECT_EQ(per[0], 2.0f);
  EXPECT_EQ(per[1], 2.0f);
  EXPECT_EQ(per[2], 0.0f);
  loss_backward(mse, 3, 1, pred, t, g);
  EXPECT_FLOAT_EQ(g[0], 2.0f * 1 * 2.0f / 3);
  EXPECT_FLOAT_EQ(g[1], 2.0f * 2 * 0.5f / 3);
  EXPECT_EQ(g[2], 0.0f);
  // Weights of one are bit for bit no weights, for every kind.
  const float ones[2] = {1, 1};
  const float p2[6] = {0.2f, 0.5f, 0.3f, 0.6f, 0.1f, 0.3f}, y2[6] = {0, 1, 0, 1, 0, 0};
  const int32_t labels[2] = {1, 0};
  for (const LossSpec& l : all_loss_specs()) {
    Targets a, b;
    if (l.sparse())
      a.labels = b.labels = labels;
    else
      a.values = b.values = y2;
    b.weights = ones;
    float pa[2], pb[2], ga[6], gb[6];
    loss_forward(l, 2, 3, p2, a, pa);
    loss_forward(l, 2, 3, p2, b, pb);
    loss_backward(l, 2, 3, p2, a, ga);
    loss_backward(l, 2, 3, p2, b, gb);
    EXPECT_EQ(0, std::memcmp(pa, pb, sizeof pa)) << loss_name(l);
    EXPECT_EQ(0, std::memcmp(ga, gb, sizeof ga)) << loss_name(l);
  }
}

}  // namespace
}  // namespace nnfleet
