// Keras's training options on a Network: weight and activity regularizers in the loss and its
// gradient, constraints after each update, and frozen layers (unchanged weights, no optimizer
// state, batch normalization in inference mode), plus the specs' parsing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/layer_training.h"
#include "model/network.h"

namespace nnfleet {
namespace {

ModelNode node(const char* cls, Json cfg, const char* name, int input) {
  cfg["name"] = name;
  auto [layer, training] = make_layer_with_training(cls, cfg, ConfigMode::kPlan, name);
  return {std::move(layer), {input}, std::move(training)};
}

std::shared_ptr<const Model> chain(std::vector<ModelNode> nodes, Shape in) {
  const int out = static_cast<int>(nodes.size());
  return std::make_shared<const Model>("m", in, std::move(nodes), out);
}

// Dense(4, tanh) -> Dense(3, softmax), with `first` and `second` merged into their configs.
std::shared_ptr<const Model> mlp(Json first, Json second = Json::object()) {
  Json a = {{"units", 4}, {"activation", "tanh"}}, b = {{"units", 3}, {"activation", "softmax"}};
  a.update(first);
  b.update(second);
  std::vector<ModelNode> n;
  n.push_back(node("Dense", a, "dense", 0));
  n.push_back(node("Dense", b, "dense_1", 1));
  return chain(std::move(n), Shape{5});
}

TrainSpec sgd(double lr) {
  return TrainSpec{parse_loss("sparse_categorical_crossentropy"),
                   parse_optimizer(Json{{"SGD", {{"learning_rate", lr}}}})};
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};
Batch batch(int n) {
  Batch b;
  Rng r(11);
  for (int i = 0; i < n * 5; ++i) b.x.push_back(static_cast<float>(r.uniform() * 2 - 1));
  for (int i = 0; i < n; ++i) b.y.push_back(i % 3);
  return b;
}

// One training step's loss (before the update), from a network at `params`.
double step_loss(std::shared_ptr<const Model> m, const std::vector<float>& params, const Batch& b,
                 std::vector<float>* after = nullptr, int pieces = 1) {
  const int n = static_cast<int>(b.y.size());
  Network net(m, n, sgd(1.0), pieces);
  Rng init(3);
  net.initialize(init);
  std::copy(params.begin(), params.end(), net.params());
  std::copy(b.x.begin(), b.x.end(), net.input());
  Targets t;
  t.labels = b.y.data();
  const double loss = net.train_step(n, t);
  if (after) after->assign(net.params(), net.params() + net.num_params());
  return loss;
}

std::vector<float> initial(std::shared_ptr<const Model> m) {
  Network net(m, 1);
  Rng init(3);
  net.initialize(init);
  return {net.params(), net.params() + net.num_params()};
}

TEST(Regularizer, ParsesKeras2Keras3AndPlanForms) {
  const Regularizer a = parse_regularizer_spec(
      Json{{"class_name", "L1L2"}, {"config", {{"l1", 0.0}, {"l2", 0.001}}}}, "kernel_regularizer");
  EXPECT_DOUBLE_EQ(a.l2, 0.001);
  EXPECT_DOUBLE_EQ(a.l1, 0.0);
  const Regularizer b = parse_regularizer_spec(Json{{"module", "keras.regularizers"},
                                                    {"class_name", "L2"},
                                                    {"config", {{"l2", 0.02}}},
                                                    {"registered_name", nullptr}},
                                               "k");
  EXPECT_DOUBLE_EQ(b.l2, 0.02);
  EXPECT_DOUBLE_EQ(parse_regularizer_spec("l1", "k").l1, 0.01);
  EXPECT_DOUBLE_EQ(parse_regularizer_spec("l1_l2", "k").l2, 0.01);
  EXPECT_DOUBLE_EQ(parse_regularizer_spec(Json{{"L1L2", {{"l1", 0.5}}}}, "k").l2, 0.0);
  EXPECT_FALSE(
      parse_regularizer_spec(
          Json{{"class_name", "OrthogonalRegularizer"}, {"config", {{"factor", 0.01}}}}, "k")
          .refusal.empty());
  try {
    parse_regularizer_spec(Json{{"L2", {{"l2", -1}}}}, "kernel_regularizer");
    ADD_FAILURE() << "a negative factor was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "kernel_regularizer");
  }
  EXPECT_THROW(parse_regularizer_spec("l3", "k"), ConfigError);
}

TEST(Constraint, ProjectsAsKerasWithItsAxisDefaults) {
  // A [2,3] kernel: axis 0 gives one norm per column (output unit).
  const Shape s{2, 3};
  std::vector<float> w = {3, 0, -1, 4, 0.5f, 1};
  Constraint c = parse_constraint_spec(
      Json{{"class_name", "MaxNorm"}, {"config", {{"max_value", 2}, {"axis", 0}}}},
      "kernel_constraint");
  ASSERT_TRUE(resolve_constraint_axes(c, s));
  apply_constraint(c, s, w.data());
  EXPECT_NEAR(w[0], 3 * 2 / (5 + 1e-7), 1e-6);
  EXPECT_NEAR(w[3], 4 * 2 / (5 + 1e-7), 1e-6);
  EXPECT_NEAR(w[1], 0.0f, 1e-7);  // norm 0.5 is under the bound: scaled by 0.5/(0.5+eps)
  EXPECT_NEAR(w[4], 0.5f, 1e-6);
  Constraint u = parse_constraint_spec("unit_norm", "k");
  ASSERT_TRUE(resolve_constraint_axes(u, s));
  std::vector<float> v = {3, 0, -1, 4, 0.5f, 1};
  apply_constraint(u, s, v.data());
  EXPECT_NEAR(v[0] * v[0] + v[3] * v[3], 1.0, 1e-5);
  EXPECT_NEAR(v[2] * v[2] + v[5] * v[5], 1.0, 1e-5);
  Constraint mm = parse_constraint_spec(
      Json{{"MinMaxNorm", {{"min_value", 1.0}, {"max_value", 1.0}, {"rate", 0.5}, {"axis", -1}}}},
      "k");
  ASSERT_TRUE(resolve_constraint_axes(mm, s));
  std::vector<float> r = {3, 0, 4, 0, 0, 0};  // row 0 norm 5 -> 0.5*1 + 0.5*5 = 3
  apply_constraint(mm, s, r.data());
  EXPECT_NEAR(std::hypot(r[0], r[2]), 3.0, 1e-5);
  std::vector<float> nn = {-1, 2, -0.5f, 0, 1, -3};
  apply_constraint(parse_constraint_spec("NonNeg", "k"), s, nn.data());
  EXPECT_EQ(nn, (std::vector<float>{0, 2, 0, 0, 1, 0}));
  Constraint bad = parse_constraint_spec(Json{{"MaxNorm", {{"axis", 2}}}}, "k");
  EXPECT_FALSE(resolve_constraint_axes(bad, s));
}

TEST(Regularization, WeightPenaltyIsInTheLossAndItsGradientInTheUpdate) {
  const Json reg = {{"kernel_regularizer", {{"L1L2", {{"l1", 0.01}, {"l2", 0.05}}}}},
                    {"bias_regularizer", "l2"}};
  const auto plain = mlp(Json::object()), regd = mlp(reg);
  const auto p0 = initial(plain);
  const Batch b = batch(6);
  std::vector<float> a_plain, a_reg;
  const double l_plain = step_loss(plain, p0, b, &a_plain);
  const double l_reg = step_loss(regd, p0, b, &a_reg);
  // dense kernel [5,4] at offset 0, its bias [4] at 20.
  double penalty = 0.0;
  for (int i = 0; i < 20; ++i) penalty += 0.01 * std::fabs(p0[i]) + 0.05 * p0[i] * p0[i];
  for (int i = 20; i < 24; ++i) penalty += 0.01 * p0[i] * p0[i];
  EXPECT_NEAR(l_reg - l_plain, penalty, 1e-6);
  // SGD with rate 1: the difference of the updates is the penalty's gradient.
  for (int i = 0; i < 20; ++i) {
    const double g = 0.01 * (p0[i] > 0 ? 1 : -1) + 2 * 0.05 * p0[i];
    EXPECT_NEAR(a_plain[i] - a_reg[i], g, 1e-6) << i;
  }
  for (int i = 20; i < 24; ++i) EXPECT_NEAR(a_plain[i] - a_reg[i], 2 * 0.01 * p0[i], 1e-6);
  for (size_t i = 24; i < p0.size(); ++i) EXPECT_FLOAT_EQ(a_plain[i], a_reg[i]);
  // Split into pieces, the same loss and update.
  std::vector<float> a_split;
  EXPECT_NEAR(step_loss(regd, p0, b, &a_split, 3), l_reg, 1e-6);
  for (size_t i = 0; i < p0.size(); ++i) EXPECT_NEAR(a_split[i], a_reg[i], 1e-6);
}

TEST(Regularization, ActivityPenaltyIsDividedByTheBatchAndMatchesNumericalGradient) {
  const auto m = mlp(Json{{"activity_regularizer", {{"L1L2", {{"l1", 0.03}, {"l2", 0.2}}}}}});
  const auto plain = mlp(Json::object());
  const auto p0 = initial(m);
  const Batch b = batch(6);
  // The penalty over the first layer's outputs (recomputed here from the weights), / 6.
  double pen = 0.0;
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 4; ++o) {
      double z = p0[20 + o];
      for (int i = 0; i < 5; ++i) z += b.x[r * 5 + i] * p0[i * 4 + o];
      const double y = std::tanh(z);
      pen += 0.03 * std::fabs(y) + 0.2 * y * y;
    }
  std::vector<float> after;
  const double loss = step_loss(m, p0, b, &after);
  EXPECT_NEAR(loss - step_loss(plain, p0, b), pen / 6, 1e-6);
  // Central differences of the loss against the update (SGD rate 1: grad = before - after).
  for (int i : {0, 7, 13, 21, 30}) {
    std::vector<float> hi = p0, lo = p0;
    const float h = 1e-2f;
    hi[i] += h;
    lo[i] -= h;
    const double num = (step_loss(m, hi, b) - step_loss(m, lo, b)) / (2 * h);
    EXPECT_NEAR(p0[i] - after[i], num, 2e-3 * std::fabs(num) + 2e-4) << i;
  }
  // Evaluation sees the raw sum of the batch (the fleet divides by the rows it evaluated).
  Network ev(m, 6);
  std::copy(p0.begin(), p0.end(), ev.params());
  std::copy(b.x.begin(), b.x.end(), ev.input());
  ev.forward(6, false);
  EXPECT_NEAR(ev.activity_penalty_sum(), pen, 1e-5);
}

TEST(Regularization, ConstraintHoldsAfterEveryUpdate) {
  const auto m = mlp(Json{{"kernel_constraint", {{"MaxNorm", {{"max_value", 0.1}}}}},
                          {"bias_constraint", "non_neg"}});
  const Batch b = batch(6);
  std::vector<float> after;
  step_loss(m, initial(m), b, &after);
  for (int o = 0; o < 4; ++o) {
    double sq = 0;
    for (int i = 0; i < 5; ++i) sq += after[i * 4 + o] * after[i * 4 + o];
    EXPECT_LE(std::sqrt(sq), 0.1 + 1e-6);
  }
  for (int o = 20; o < 24; ++o) EXPECT_GE(after[o], 0.0f);
}

TEST(Regularization, OptionOnAWeightTheLayerLacksIsRefused) {
  std::vector<ModelNode> n;
  n.push_back(node("Flatten", Json{{"kernel_regularizer", "l2"}}, "flat", 0));
  try {
    chain(std::move(n), Shape{5});
    ADD_FAILURE() << "a regularizer on Flatten was accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("has kernel_regularizer but no trainable weight 'kernel'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Regularization, UnsupportedRegularizerLoadsButRefusesTraining) {
  const auto m =
      mlp(Json{{"kernel_regularizer",
                {{"class_name", "OrthogonalRegularizer"}, {"config", {{"factor", 0.01}}}}}});
  EXPECT_NE(m->training_refusal().find("OrthogonalRegularizer"), std::string::npos);
  EXPECT_NO_THROW(Network(m, 2));
  EXPECT_THROW(Network(m, 2, sgd(0.1)), ModelError);
}

TEST(Frozen, WeightsStayBitForBitAndHaveNoOptimizerState) {
  std::vector<ModelNode> n;
  n.push_back(
      node("Dense", {{"units", 6}, {"activation", "relu"}, {"trainable", false}}, "base", 0));
  n.push_back(node("BatchNormalization", {{"trainable", false}}, "bn", 1));
  n.push_back(node("Dense", {{"units", 3}, {"activation", "softmax"}}, "head", 2));
  const auto m = chain(std::move(n), Shape{5});
  EXPECT_EQ(m->trainable_params(), 6u * 3 + 3);
  EXPECT_EQ(m->non_trainable_params(), 5u * 6 + 6 + 4 * 6);
  EXPECT_FALSE(m->mixes_samples());  // the frozen BN runs in inference mode
  TrainSpec adam{parse_loss("sparse_categorical_crossentropy"), parse_optimizer("adam")};
  Network net(m, 6, adam);
  EXPECT_EQ(net.optimizer_state_floats(), 2 * net.num_trainable());
  Rng init(4);
  net.initialize(init);
  // Moving statistics away from their initial values, so inference mode shows.
  float* mean = net.param(1, 2);
  for (int c = 0; c < 6; ++c) mean[c] = 0.1f * c;
  const std::vector<float> p0(net.params(), net.params() + net.num_params());
  const Batch b = batch(6);
  std::copy(b.x.begin(), b.x.end(), net.input());
  net.forward(6, false);
  const std::vector<float> inference(net.output(), net.output() + 18);
  Targets t;
  t.labels = b.y.data();
  for (int s = 0; s < 3; ++s) {
    std::copy(b.x.begin(), b.x.end(), net.input());
    net.train_step(6, t);
    if (s == 0) {  // the step's forward ran the frozen BN on its moving statistics
      for (int i = 0; i < 18; ++i) EXPECT_FLOAT_EQ(net.output()[i], inference[i]);
    }
  }
  const size_t fixed0 = net.num_trainable();
  for (size_t i = fixed0; i < net.num_params(); ++i)
    EXPECT_EQ(net.params()[i], p0[i]) << "frozen parameter " << i << " changed";
  bool moved = false;
  for (size_t i = 0; i < fixed0; ++i) moved = moved || net.params()[i] != p0[i];
  EXPECT_TRUE(moved);
}

TEST(Frozen, FrozenLayerBetweenTrainableOnesPassesGradientsThrough) {
  std::vector<ModelNode> n;
  n.push_back(node("Dense", {{"units", 4}, {"activation", "tanh"}}, "a", 0));
  n.push_back(node("Dense", {{"units", 4}, {"activation", "tanh"}, {"trainable", false}}, "b", 1));
  n.push_back(node("Dense", {{"units", 3}, {"activation", "softmax"}}, "c", 2));
  const auto frozen = chain(std::move(n), Shape{5});
  std::vector<ModelNode> n2;
  n2.push_back(node("Dense", {{"units", 4}, {"activation", "tanh"}}, "a", 0));
  n2.push_back(node("Dense", {{"units", 4}, {"activation", "tanh"}}, "b", 1));
  n2.push_back(node("Dense", {{"units", 3}, {"activation", "softmax"}}, "c", 2));
  const auto open = chain(std::move(n2), Shape{5});
  const auto p_open = initial(open);
  std::vector<float> p_frozen(p_open.size());
  remap_params(*open, p_open.data(), *frozen, p_frozen.data());
  const Batch b = batch(6);
  std::vector<float> a_open, a_frozen;
  EXPECT_NEAR(step_loss(frozen, p_frozen, b, &a_frozen), step_loss(open, p_open, b, &a_open), 1e-7);
  std::vector<float> back(a_frozen.size());
  remap_params(*frozen, a_frozen.data(), *open, back.data());
  // Layer a (first 24) and c train exactly as without freezing; b is unchanged.
  for (int i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(back[i], a_open[i]);
  for (int i = 24; i < 44; ++i) EXPECT_EQ(back[i], p_open[i]);
  for (size_t i = 44; i < back.size(); ++i) EXPECT_FLOAT_EQ(back[i], a_open[i]);
}

TEST(LayerTraining, KeysAreTakenOutAndPutBack) {
  Json cfg = {{"units", 2},
              {"trainable", false},
              {"kernel_regularizer", "l1_l2"},
              {"kernel_constraint", {{"class_name", "MaxNorm"}, {"config", {{"max_value", 3}}}}},
              {"bias_regularizer", nullptr}};
  const LayerTraining t = take_layer_training(cfg);
  EXPECT_EQ(cfg, (Json{{"units", 2}}));
  EXPECT_TRUE(t.frozen);
  ASSERT_EQ(t.regularizers.size(), 1u);
  EXPECT_EQ(t.regularizers[0].first, "kernel");
  const Json back = put_layer_training(Json{{"units", 2}, {"kernel_regularizer", nullptr}}, t);
  EXPECT_EQ(back["trainable"], false);
  EXPECT_EQ(back["kernel_regularizer"]["config"]["l1"], 0.01);  // the name written out
  EXPECT_EQ(back["kernel_constraint"]["config"]["max_value"], 3);
  // A wrapped layer's options belong to the wrapper's weights.
  Json td = {{"layer",
              {{"class_name", "Dense"}, {"config", {{"units", 2}, {"kernel_regularizer", "l2"}}}}}};
  const LayerTraining w = take_layer_training(td);
  EXPECT_FALSE(td["layer"]["config"].contains("kernel_regularizer"));
  ASSERT_EQ(w.regularizers.size(), 1u);
  const Json td_back = put_layer_training(td, w);
  EXPECT_TRUE(td_back["layer"]["config"].contains("kernel_regularizer"));
}

}  // namespace
}  // namespace nnfleet
