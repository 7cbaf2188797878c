// Optimizers: each update rule against an independent scalar re-implementation of Keras 3's
// rule (in double), clipping and weight decay, the golden trajectories from
// tools/make_optimizer_fixtures.py, state layout, config parsing and the Keras config.
#include "optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "npy_fixture.h"
#include "tensor/rng.h"

namespace nnfleet {
namespace {

// Keras 3's update for one scalar parameter, written straight from keras/src/optimizers/*.py in
// double, independent of the library's flat loops and state layout.
struct RefScalar {
  double m = 0, v = 0, vhat = 0, ag = 0, acc = 0;

  void init(const OptimizerSpec& s) { acc = s.initial_accumulator_value; }

  void step(const OptimizerSpec& s, int64_t iteration, double& p, double g) {
    const double lr = s.learning_rate;
    p = p - p * s.weight_decay * lr;
    switch (s.kind) {
      case OptKind::kSGD:
        if (s.momentum != 0) {
          m = s.momentum * m - lr * g;
          p += s.nesterov ? s.momentum * m - lr * g : m;
        } else {
          p -= lr * g;
        }
        break;
      case OptKind::kAdam:
      case OptKind::kAdamW: {
        const double t = static_cast<double>(iteration + 1);
        m = m + (g - m) * (1 - s.beta_1);
        v = v + (g * g - v) * (1 - s.beta_2);
        const double mhat_scale = 1 / (1 - std::pow(s.beta_1, t));
        const double vscale = std::sqrt(1 - std::pow(s.beta_2, t));
        double vv = v;
        if (s.amsgrad) vv = vhat = std::max(vhat, v);
        p -= lr * vscale * mhat_scale * m / (std::sqrt(vv) + s.epsilon);
        break;
      }
      case OptKind::kRMSprop: {
        v = s.rho * v + (1 - s.rho) * g * g;
        double denom = v + s.epsilon;
        if (s.centered) {
          ag = s.rho * ag + (1 - s.rho) * g;
          denom = v - ag * ag + s.epsilon;
        }
        const double inc = lr * g / std::sqrt(denom);
        if (s.momentum > 0) {
          m = s.momentum * m + inc;
          p -= m;
        } else {
          p -= inc;
        }
        break;
      }
      case OptKind::kAdagrad:
        acc += g * g;
        p -= lr * g / std::sqrt(acc + s.epsilon);
        break;
    }
  }
};

// Runs `steps` steps of the library and of the reference on n parameters with random gradients
// and expects agreement within a float tolerance.
void expect_matches_reference(const OptimizerSpec& s, int steps = 6) {
  const size_t n = 37;
  Rng rng(7);
  std::vector<float> p(n), g(n), state(optimizer_state_floats(s, n));
  std::vector<double> rp(n);
  std::vector<RefScalar> ref(n);
  for (size_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>(rng.normal());
    rp[i] = p[i];
    ref[i].init(s);
  }
  optimizer_init_state(s, n, state.data());
  for (int t = 0; t < steps; ++t) {
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(rng.normal() * (0.1 + i % 3));
    for (size_t i = 0; i < n; ++i) ref[i].step(s, t, rp[i], g[i]);
    optimizer_step(s, t, n, p.data(), g.data(), state.data(), {{0, n}});
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(p[i], rp[i], 2e-5 * (1 + std::fabs(rp[i])))
          << optimizer_class(s.kind) << " step " << t << " element " << i;
  }
}

OptimizerSpec spec(OptKind k, double lr) {
  OptimizerSpec s;
  s.kind = k;
  s.learning_rate = lr;
  if (k == OptKind::kAdamW) s.weight_decay = 0.004;
  return s;
}

TEST(Optimizer, SgdMatchesReference) { expect_matches_reference(spec(OptKind::kSGD, 0.1)); }

TEST(Optimizer, SgdMomentumMatchesReference) {
  OptimizerSpec s = spec(OptKind::kSGD, 0.1);
  s.momentum = 0.9;
  expect_matches_reference(s);
}

TEST(Optimizer, SgdNesterovMatchesReference) {
  OptimizerSpec s = spec(OptKind::kSGD, 0.1);
  s.momentum = 0.8;
  s.nesterov = true;
  expect_matches_reference(s);
}

TEST(Optimizer, AdamMatchesReference) { expect_matches_reference(spec(OptKind::kAdam, 0.05)); }

TEST(Optimizer, AdamAmsgradMatchesReference) {
  OptimizerSpec s = spec(OptKind::kAdam, 0.05);
  s.amsgrad = true;
  s.beta_2 = 0.8;  // v shrinks often, so v_hat matters
  expect_matches_reference(s, 10);
}

TEST(Optimizer, AdamWMatchesReference) {
  OptimizerSpec s = spec(OptKind::kAdamW, 0.05);
  s.weight_decay = 0.1;
  expect_matches_reference(s);
}

TEST(Optimizer, RmspropMatchesReference) {
  expect_matches_reference(spec(OptKind::kRMSprop, 0.01));
}

TEST(Optimizer, RmspropMomentumMatchesReference) {
  OptimizerSpec s = spec(OptKind::kRMSprop, 0.01);
  s.momentum = 0.5;
  expect_matches_reference(s);
}

TEST(Optimizer, RmspropCenteredMatchesReference) {
  OptimizerSpec s = spec(OptKind::kRMSprop, 0.01);
  s.centered = true;
  expect_matches_reference(s);
  s.momentum = 0.3;
  expect_matches_reference(s);
}

TEST(Optimizer, AdagradMatchesReference) { expect_matches_reference(spec(OptKind::kAdagrad, 0.1)); }

TEST(Optimizer, WeightDecayAppliesToEveryOptimizer) {
  for (OptKind k : {OptKind::kSGD, OptKind::kAdam, OptKind::kRMSprop, OptKind::kAdagrad}) {
    OptimizerSpec s = spec(k, 0.05);
    s.weight_decay = 0.2;
    expect_matches_reference(s);
  }
}

// optimizer_update over any split of the parameters into ranges (as Network::update_piece does
// for the pieces of a split batch) gives exactly optimizer_step's result, for every kind.
TEST(Optimizer, UpdateInRangesEqualsTheWholeStepBitForBit) {
  std::vector<OptimizerSpec> specs;
  for (OptKind k :
       {OptKind::kSGD, OptKind::kAdam, OptKind::kAdamW, OptKind::kRMSprop, OptKind::kAdagrad})
    specs.push_back(spec(k, 0.05));
  specs.push_back(spec(OptKind::kSGD, 0.05));
  specs.back().momentum = 0.9;
  specs.back().nesterov = true;
  specs.push_back(spec(OptKind::kAdam, 0.05));
  specs.back().amsgrad = true;
  specs.back().weight_decay = 0.1;
  specs.push_back(spec(OptKind::kRMSprop, 0.05));
  specs.back().centered = true;
  specs.back().momentum = 0.5;
  const size_t n = 37;
  for (const OptimizerSpec& s : specs) {
    std::vector<float> p_whole(n), p_ranges(n), state_whole(optimizer_state_floats(s, n));
    Rng rng(9);
    for (float& v : p_whole) v = rng.uniform() - 0.5f;
    p_ranges = p_whole;
    optimizer_init_state(s, n, state_whole.data());
    std::vector<float> state_ranges = state_whole;
    for (int step = 0; step < 4; ++step) {
      std::vector<float> g(n);
      for (float& v : g) v = rng.uniform() - 0.5f;
      std::vector<float> g2 = g;
      optimizer_step(s, step, n, p_whole.data(), g.data(), state_whole.data(), {{0, n}});
      for (auto [b, e] : {std::pair<size_t, size_t>{20, 37}, {0, 3}, {3, 20}})
        optimizer_update(s, step, n, p_ranges.data(), g2.data(), state_ranges.data(), b, e);
    }
    EXPECT_EQ(p_ranges, p_whole) << optimizer_class(s.kind);
    EXPECT_EQ(state_ranges, state_whole) << optimizer_class(s.kind);
  }
}

TEST(Optimizer, WeightDecayUsesParametersBeforeTheUpdate) {
  // SGD lr 0.5, wd 0.1, g 2: p = 3 - 3*0.1*0.5 = 2.85, then p -= 0.5*2 -> 1.85.
  OptimizerSpec s = spec(OptKind::kSGD, 0.5);
  s.weight_decay = 0.1;
  float p = 3, g = 2;
  optimizer_step(s, 0, 1, &p, &g, nullptr, {{0, 1}});
  EXPECT_FLOAT_EQ(p, 1.85f);
}

TEST(Optimizer, AdamFirstStepMovesByLearningRate) {
  // t = 1: alpha = lr sqrt(1 - b2) / (1 - b1); m = 0.1 g, v = 0.001 g^2, so the step is
  // lr * g sqrt(0.001) / (sqrt(0.001)|g| + eps), just under lr * sign(g).
  OptimizerSpec s = spec(OptKind::kAdam, 0.001);
  std::vector<float> state(2);
  float p = 1, g = 0.5f;
  optimizer_step(s, 0, 1, &p, &g, state.data(), {{0, 1}});
  const double expect = 1 - 0.001 * 0.5 * std::sqrt(0.001) / (std::sqrt(0.001) * 0.5 + 1e-7);
  EXPECT_NEAR(p, expect, 1e-7);
  EXPECT_FLOAT_EQ(state[0], 0.05f);     // momentum
  EXPECT_FLOAT_EQ(state[1], 0.00025f);  // velocity
}

// SGD with lr 1 turns a step into "p -= clipped g", which shows the clipped gradient.
std::vector<float> clipped(const OptimizerSpec& s, std::vector<float> g,
                           const std::vector<VarRange>& vars) {
  std::vector<float> p(g.size(), 0.0f);
  std::vector<float> gg = g;
  optimizer_step(s, 0, g.size(), p.data(), gg.data(), nullptr, vars);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_FLOAT_EQ(-p[i], gg[i]) << "gradients are clipped in place";
  }
  return gg;
}

TEST(Optimizer, ClipnormClipsEachVariableByItsOwnNorm) {
  OptimizerSpec s = spec(OptKind::kSGD, 1.0);
  s.clipnorm = 1.0;
  // var 0: [3, 4] norm 5 -> [0.6, 0.8]; var 1: [0.3, 0.4] norm 0.5 -> unchanged.
  auto g = clipped(s, {3, 4, 0.3f, 0.4f}, {{0, 2}, {2, 2}});
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.8f);
  EXPECT_FLOAT_EQ(g[2], 0.3f);
  EXPECT_FLOAT_EQ(g[3], 0.4f);
}

TEST(Optimizer, GlobalClipnormClipsAllVariablesTogether) {
  OptimizerSpec s = spec(OptKind::kSGD, 1.0);
  s.global_clipnorm = 2.5;
  // global norm sqrt(9 + 16 + 0 + 0) = 5 -> scale 0.5 for both variables.
  auto g = clipped(s, {3, 4, 0, 0}, {{0, 2}, {2, 2}});
  EXPECT_FLOAT_EQ(g[0], 1.5f);
  EXPECT_FLOAT_EQ(g[1], 2.0f);
  g = clipped(s, {3, 0, 0, 4}, {{0, 2}, {2, 2}});
  EXPECT_FLOAT_EQ(g[0], 1.5f);
  EXPECT_FLOAT_EQ(g[3], 2.0f);
  // Under the norm: unchanged.
  g = clipped(s, {1, 1, 1, 1}, {{0, 2}, {2, 2}});
  EXPECT_FLOAT_EQ(g[0], 1.0f);
}

TEST(Optimizer, ClipvalueClipsElementWise) {
  OptimizerSpec s = spec(OptKind::kSGD, 1.0);
  s.clipvalue = 0.5;
  auto g = clipped(s, {3, -4, 0.25f, -0.5f}, {{0, 4}});
  EXPECT_FLOAT_EQ(g[0], 0.5f);
  EXPECT_FLOAT_EQ(g[1], -0.5f);
  EXPECT_FLOAT_EQ(g[2], 0.25f);
  EXPECT_FLOAT_EQ(g[3], -0.5f);
}

TEST(Optimizer, ClippingHappensBeforeAdamStatisticsAreUpdated) {
  OptimizerSpec s = spec(OptKind::kAdam, 0.1);
  s.clipvalue = 0.5;
  std::vector<float> state(2, 0.0f);
  float p = 0, g = 4;
  optimizer_step(s, 0, 1, &p, &g, state.data(), {{0, 1}});
  EXPECT_FLOAT_EQ(state[0], 0.05f);  // momentum from the clipped 0.5
}

TEST(Optimizer, StateSlotsAreNamedAndSizedInKerasOrder) {
  OptimizerSpec s = spec(OptKind::kAdam, 0.001);
  EXPECT_EQ(optimizer_state_slots(s), (std::vector<std::string>{"momentum", "velocity"}));
  EXPECT_EQ(optimizer_state_floats(s, 10), 20u);
  s.amsgrad = true;
  EXPECT_EQ(optimizer_state_slots(s),
            (std::vector<std::string>{"momentum", "velocity", "velocity_hat"}));
  EXPECT_EQ(optimizer_state_floats(s, 10), 30u);
  s = spec(OptKind::kSGD, 0.01);
  EXPECT_TRUE(optimizer_state_slots(s).empty());
  EXPECT_EQ(optimizer_state_floats(s, 10), 0u);
  s.momentum = 0.9;
  EXPECT_EQ(optimizer_state_slots(s), (std::vector<std::string>{"momentum"}));
  s = spec(OptKind::kRMSprop, 0.01);
  s.momentum = 0.5;
  s.centered = true;
  EXPECT_EQ(optimizer_state_slots(s),
            (std::vector<std::string>{"velocity", "momentum", "average_gradient"}));
  s = spec(OptKind::kAdagrad, 0.01);
  EXPECT_EQ(optimizer_state_slots(s), (std::vector<std::string>{"accumulator"}));
  std::vector<float> state(optimizer_state_floats(s, 4), -1.0f);
  optimizer_init_state(s, 4, state.data());
  for (float v : state) EXPECT_FLOAT_EQ(v, 0.1f);
}

TEST(Optimizer, StateIsSlotMajor) {
  // RMSprop with momentum and centered: [velocity x n][momentum x n][average_gradient x n].
  OptimizerSpec s = spec(OptKind::kRMSprop, 0.1);
  s.momentum = 0.5;
  s.centered = true;
  std::vector<float> p = {1, 1}, g = {1, 2}, state(optimizer_state_floats(s, 2));
  optimizer_init_state(s, 2, state.data());
  optimizer_step(s, 0, 2, p.data(), g.data(), state.data(), {{0, 2}});
  EXPECT_FLOAT_EQ(state[0], 0.1f * 1);  // velocity
  EXPECT_FLOAT_EQ(state[1], 0.1f * 4);
  EXPECT_FLOAT_EQ(state[4], 0.1f * 1);  // average_gradient
  EXPECT_FLOAT_EQ(state[5], 0.1f * 2);
  EXPECT_FLOAT_EQ(state[2], 1 - p[0]);  // momentum = the first increment
}

// ---- golden trajectories (tools/make_optimizer_fixtures.py) ----

std::string fixture(const std::string& name) {
  return std::string(NNFLEET_SOURCE_DIR) + "/tests/optim/fixtures/" + name + ".npy";
}

void expect_trajectory(const std::string& name, const OptimizerSpec& s) {
  SCOPED_TRACE(name);
  const auto grads = testing::read_npy(fixture("grads"));
  const auto want = testing::read_npy(fixture(name));
  ASSERT_EQ(grads.shape.size(), 2u);
  ASSERT_EQ(want.shape.size(), 2u);
  const size_t steps = grads.shape[0], n = grads.shape[1];
  ASSERT_EQ(static_cast<size_t>(want.shape[0]), steps + 1);
  ASSERT_EQ(static_cast<size_t>(want.shape[1]), n);
  std::vector<float> p(n), g(n), state(optimizer_state_floats(s, n));
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(want.values[i]);
  optimizer_init_state(s, n, state.data());
  for (size_t t = 0; t < steps; ++t) {
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(grads.values[t * n + i]);
    optimizer_step(s, static_cast<int64_t>(t), n, p.data(), g.data(), state.data(), {{0, n}});
    for (size_t i = 0; i < n; ++i) {
      const double e = want.values[(t + 1) * n + i], p0 = want.values[i];
      EXPECT_NEAR(p[i], e, 1e-5 * std::fabs(e) + 1e-7) << "step " << t + 1 << " element " << i;
      // The movement itself, so a small error in a small update still shows.
      EXPECT_NEAR(p[i] - p0, e - p0, 1e-4 * std::fabs(e - p0) + 2e-7)
          << "step " << t + 1 << " element " << i;
    }
  }
}

TEST(OptimizerGolden, MatchesKerasRuleTrajectories) {
  OptimizerSpec s = spec(OptKind::kSGD, 0.1);
  expect_trajectory("sgd", s);
  s.momentum = 0.9;
  expect_trajectory("sgd_momentum", s);
  s.nesterov = true;
  expect_trajectory("sgd_nesterov", s);
  s = spec(OptKind::kAdam, 0.1);
  expect_trajectory("adam", s);
  s.amsgrad = true;
  s.beta_2 = 0.9;
  expect_trajectory("adam_amsgrad", s);
  s = spec(OptKind::kAdamW, 0.1);
  expect_trajectory("adamw", s);
  s = spec(OptKind::kRMSprop, 0.05);
  expect_trajectory("rmsprop", s);
  s.momentum = 0.5;
  s.centered = true;
  expect_trajectory("rmsprop_centered_momentum", s);
  s = spec(OptKind::kAdagrad, 0.5);
  expect_trajectory("adagrad", s);
}

// ---- parsing ----

TEST(OptimizerParse, NamesAreCaseInsensitiveWithKerasDefaults) {
  OptimizerSpec s = parse_optimizer(Json("adam"));
  EXPECT_EQ(s.kind, OptKind::kAdam);
  EXPECT_DOUBLE_EQ(s.learning_rate, 0.001);
  EXPECT_DOUBLE_EQ(s.beta_1, 0.9);
  EXPECT_DOUBLE_EQ(s.beta_2, 0.999);
  EXPECT_DOUBLE_EQ(s.epsilon, 1e-7);
  EXPECT_DOUBLE_EQ(s.weight_decay, 0.0);
  EXPECT_EQ(parse_optimizer(Json("Adam")).kind, OptKind::kAdam);
  s = parse_optimizer(Json("sgd"));
  EXPECT_EQ(s.kind, OptKind::kSGD);
  EXPECT_DOUBLE_EQ(s.learning_rate, 0.01);
  EXPECT_DOUBLE_EQ(s.momentum, 0.0);
  s = parse_optimizer(Json("AdamW"));
  EXPECT_DOUBLE_EQ(s.weight_decay, 0.004);
  s = parse_optimizer(Json("rmsprop"));
  EXPECT_EQ(s.kind, OptKind::kRMSprop);
  EXPECT_DOUBLE_EQ(s.rho, 0.9);
  s = parse_optimizer(Json("Adagrad"));
  EXPECT_DOUBLE_EQ(s.initial_accumulator_value, 0.1);
}

TEST(OptimizerParse, PlanFormAcceptsNumericStrings) {
  OptimizerSpec s = parse_optimizer(Json::parse(R"({"SGD": {"learning_rate": "0.05",
      "momentum": 0.9, "nesterov": true}})"));
  EXPECT_EQ(s.kind, OptKind::kSGD);
  EXPECT_DOUBLE_EQ(s.learning_rate, 0.05);
  EXPECT_DOUBLE_EQ(s.momentum, 0.9);
  EXPECT_TRUE(s.nesterov);
}

TEST(OptimizerParse, PlanFormRefusesUnknownKeysListingValidOnes) {
  try {
    parse_optimizer(Json::parse(R"({"Adam": {"learning_rate": 0.01, "momentum": 0.9}})"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "momentum");
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown key 'momentum'"), std::string::npos) << m;
    EXPECT_NE(m.find("beta_1"), std::string::npos) << m;
    EXPECT_NE(m.find("learning_rate"), std::string::npos) << m;
  }
}

TEST(OptimizerParse, UnknownNameListsValidNames) {
  try {
    parse_optimizer(Json("adamax"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown optimizer \"adamax\"; expected one of SGD, Adam, AdamW, RMSprop, "
                     "Adagrad"),
              std::string::npos)
        << m;
  }
  try {
    parse_optimizer(Json("Adma"));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(did you mean 'Adam'?)"), std::string::npos) << e.what();
  }
}

TEST(OptimizerParse, BadValuesNameTheKey) {
  try {
    parse_optimizer(Json::parse(R"({"Adam": {"learning_rate": -1}})"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "learning_rate");
    EXPECT_NE(std::string(e.what()).find("expected a number > 0, got -1"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_optimizer(Json::parse(R"({"Adam": {"learning_rate": "fast"}})")), ConfigError);
  EXPECT_THROW(parse_optimizer(Json::parse(R"({"Adam": {"beta_1": 1.0}})")), ConfigError);
  EXPECT_THROW(parse_optimizer(Json::parse(R"({"SGD": {"momentum": 1.5}})")), ConfigError);
  EXPECT_THROW(parse_optimizer(Json::parse(R"({"SGD": {"clipnorm": 1, "clipvalue": 1}})")),
               ConfigError);
  EXPECT_THROW(parse_optimizer(Json::parse(R"({"Adam": 3})")), ConfigError);
  EXPECT_THROW(parse_optimizer(Json::parse(R"({"Adam": {}, "SGD": {}})")), ConfigError);
  EXPECT_THROW(parse_optimizer(Json(3)), ConfigError);
}

TEST(OptimizerParse, KerasFormToleratesKerasKeysAtDefaults) {
  const Json j = Json::parse(R"({"module": "keras.optimizers", "class_name": "Adam",
    "config": {"name": "adam", "learning_rate": 0.0020000000949949026, "weight_decay": null,
      "clipnorm": null, "global_clipnorm": null, "clipvalue": null, "use_ema": false,
      "ema_momentum": 0.99, "ema_overwrite_frequency": null, "loss_scale_factor": null,
      "gradient_accumulation_steps": null, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07,
      "amsgrad": false, "jit_compile": true, "is_legacy_optimizer": false, "decay": 0.0},
    "registered_name": null})");
  OptimizerSpec s = parse_optimizer(j);
  EXPECT_EQ(s.kind, OptKind::kAdam);
  EXPECT_NEAR(s.learning_rate, 0.002, 1e-9);
}

TEST(OptimizerParse, KerasFormRefusesUnsupportedFeatures) {
  EXPECT_THROW(
      parse_optimizer(Json::parse(R"({"class_name": "Adam", "config": {"use_ema": true}})")),
      ConfigError);
  EXPECT_THROW(parse_optimizer(Json::parse(
                   R"({"class_name": "Adam", "config": {"gradient_accumulation_steps": 4}})")),
               ConfigError);
  try {
    parse_optimizer(Json::parse(R"({"class_name": "Adam", "config": {"learning_rate":
        {"class_name": "MyOwnSchedule", "config": {}}}})"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "learning_rate");
    EXPECT_NE(std::string(e.what()).find("CosineDecayRestarts"), std::string::npos) << e.what();
  }
  try {
    parse_optimizer(Json::parse(R"({"class_name": "SGD", "config": {"frobnicate": 2}})"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "frobnicate");
  }
}

TEST(OptimizerParse, KerasConfigRoundTrips) {
  for (const char* text :
       {R"({"Adam": {"learning_rate": 0.01, "amsgrad": true, "clipnorm": 2}})",
        R"({"AdamW": {"weight_decay": 0.01, "beta_2": 0.99}})",
        R"({"SGD": {"momentum": 0.9, "nesterov": true, "global_clipnorm": 1}})",
        R"({"RMSprop": {"rho": 0.8, "momentum": 0.1, "centered": true, "clipvalue": 0.5}})",
        R"({"Adagrad": {"initial_accumulator_value": 0.2, "epsilon": 1e-6}})"}) {
    const OptimizerSpec s = parse_optimizer(Json::parse(text));
    const Json c = optimizer_keras_config(s);
    const OptimizerSpec r =
        parse_optimizer(Json{{"class_name", optimizer_class(s.kind)}, {"config", c}});
    EXPECT_EQ(r.kind, s.kind) << text;
    EXPECT_DOUBLE_EQ(r.learning_rate, s.learning_rate) << text;
    EXPECT_DOUBLE_EQ(r.momentum, s.momentum) << text;
    EXPECT_EQ(r.nesterov, s.nesterov) << text;
    EXPECT_DOUBLE_EQ(r.beta_2, s.beta_2) << text;
    EXPECT_EQ(r.amsgrad, s.amsgrad) << text;
    EXPECT_DOUBLE_EQ(r.weight_decay, s.weight_decay) << text;
    EXPECT_DOUBLE_EQ(r.rho, s.rho) << text;
    EXPECT_EQ(r.centered, s.centered) << text;
    EXPECT_DOUBLE_EQ(r.initial_accumulator_value, s.initial_accumulator_value) << text;
    EXPECT_DOUBLE_EQ(r.epsilon, s.epsilon) << text;
    EXPECT_DOUBLE_EQ(r.clipnorm, s.clipnorm) << text;
    EXPECT_DOUBLE_EQ(r.global_clipnorm, s.global_clipnorm) << text;
    EXPECT_DOUBLE_EQ(r.clipvalue, s.clipvalue) << text;
  }
}

TEST(OptimizerParse, KerasConfigHasKeras3Keys) {
  const Json c = optimizer_keras_config(parse_optimizer(Json("adam")));
  EXPECT_EQ(c["name"], "adam");
  EXPECT_DOUBLE_EQ(c["learning_rate"].get<double>(), 0.001);
  EXPECT_TRUE(c["weight_decay"].is_null());
  EXPECT_TRUE(c["clipnorm"].is_null());
  EXPECT_TRUE(c["global_clipnorm"].is_null());
  EXPECT_TRUE(c["clipvalue"].is_null());
  EXPECT_EQ(c["use_ema"], false);
  EXPECT_DOUBLE_EQ(c["ema_momentum"].get<double>(), 0.99);
  EXPECT_TRUE(c["ema_overwrite_frequency"].is_null());
  EXPECT_TRUE(c["loss_scale_factor"].is_null());
  EXPECT_TRUE(c["gradient_accumulation_steps"].is_null());
  EXPECT_EQ(c["amsgrad"], false);
  EXPECT_DOUBLE_EQ(c["epsilon"].get<double>(), 1e-7);
  const Json w = optimizer_keras_config(parse_optimizer(Json("adamw")));
  EXPECT_DOUBLE_EQ(w["weight_decay"].get<double>(), 0.004);
  EXPECT_EQ(w["name"], "adam_w");  // Keras's auto_name: to_snake_case("AdamW")
  EXPECT_EQ(optimizer_keras_config(parse_optimizer(Json("rmsprop")))["name"], "rm_sprop");
}

}  // namespace
}  // namespace nnfleet
