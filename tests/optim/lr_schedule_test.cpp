// Learning-rate schedules: each Keras formula at hand-computed steps (boundaries, staircase,
// cycle, warmup, restarts), the optimizer using the scheduled rate, parsing errors, and the Keras
// config written back and read again.
#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <vector>

#include "optim/optimizer.h"

namespace nnfleet {
namespace {

double rate(const char* json, int64_t step) {
  return lr_at(parse_lr_schedule(Json::parse(json)), step);
}

TEST(LrSchedule, ExponentialDecaySmoothAndStaircase) {
  const char* smooth = R"({"ExponentialDecay": {"initial_learning_rate": 0.1, "decay_steps": 10,
                          "decay_rate": 0.5}})";
  EXPECT_DOUBLE_EQ(rate(smooth, 0), 0.1);
  EXPECT_DOUBLE_EQ(rate(smooth, 20), 0.025);
  EXPECT_NEAR(rate(smooth, 5), 0.1 * 0.7071067811865476, 1e-15);
  const char* stairs = R"({"ExponentialDecay": {"initial_learning_rate": 0.1, "decay_steps": 10,
                          "decay_rate": 0.5, "staircase": true}})";
  EXPECT_DOUBLE_EQ(rate(stairs, 9), 0.1);
  EXPECT_DOUBLE_EQ(rate(stairs, 15), 0.05);
}

TEST(LrSchedule, PiecewiseConstantIncludesEachBoundaryInTheEarlierPiece) {
  const char* j =
      R"({"PiecewiseConstantDecay": {"boundaries": [10, 20], "values": [1.0, 0.5, 0.1]}})";
  EXPECT_DOUBLE_EQ(rate(j, 0), 1.0);
  EXPECT_DOUBLE_EQ(rate(j, 10), 1.0);
  EXPECT_DOUBLE_EQ(rate(j, 11), 0.5);
  EXPECT_DOUBLE_EQ(rate(j, 20), 0.5);
  EXPECT_DOUBLE_EQ(rate(j, 21), 0.1);
}

TEST(LrSchedule, InverseTimeAndPolynomialWithAndWithoutCycle) {
  EXPECT_DOUBLE_EQ(rate(R"({"InverseTimeDecay": {"initial_learning_rate": 0.1, "decay_steps": 10,
                       "decay_rate": 1.0}})",
                        10),
                   0.05);
  const char* poly = R"({"PolynomialDecay": {"initial_learning_rate": 0.1, "decay_steps": 10,
                        "end_learning_rate": 0.01, "power": 2}})";
  EXPECT_NEAR(rate(poly, 5), 0.09 * 0.25 + 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(rate(poly, 20), 0.01);
  const char* cyc = R"({"PolynomialDecay": {"initial_learning_rate": 0.1, "decay_steps": 10,
                       "end_learning_rate": 0.01, "power": 2, "cycle": true}})";
  EXPECT_DOUBLE_EQ(rate(cyc, 0), 0.1);
  EXPECT_NEAR(rate(cyc, 15), 0.09 * 0.0625 + 0.01, 1e-15);  // decay_steps becomes 20
}

TEST(LrSchedule, CosineDecayWithAlphaAndWarmup) {
  EXPECT_NEAR(rate(R"({"CosineDecay": {"initial_learning_rate": 0.1, "decay_steps": 10,
                     "alpha": 0.1}})",
                   5),
              0.1 * (0.9 * 0.5 + 0.1), 1e-15);
  const char* warm = R"({"CosineDecay": {"initial_learning_rate": 0.0, "decay_steps": 10,
                        "warmup_target": 0.1, "warmup_steps": 10}})";
  EXPECT_DOUBLE_EQ(rate(warm, 0), 0.0);
  EXPECT_DOUBLE_EQ(rate(warm, 5), 0.05);
  EXPECT_DOUBLE_EQ(rate(warm, 10), 0.1);
  EXPECT_NEAR(rate(warm, 15), 0.05, 1e-15);
  EXPECT_NEAR(rate(warm, 1000), 0.0, 1e-15);  // clamped at the end of the decay
}

TEST(LrSchedule, CosineDecayRestartsLengthensPeriodsAndLowersPeaks) {
  const char* j = R"({"CosineDecayRestarts": {"initial_learning_rate": 1.0,
                     "first_decay_steps": 10, "t_mul": 2.0, "m_mul": 0.5}})";
  EXPECT_DOUBLE_EQ(rate(j, 0), 1.0);
  EXPECT_NEAR(rate(j, 5), 0.5, 1e-15);
  EXPECT_NEAR(rate(j, 10), 0.5, 1e-15);   // second period starts at m_mul
  EXPECT_NEAR(rate(j, 20), 0.25, 1e-15);  // half way through the 20-step period
  EXPECT_NEAR(rate(j, 30), 0.25, 1e-12);  // third period starts at m_mul^2
  const char* flat = R"({"CosineDecayRestarts": {"initial_learning_rate": 1.0,
                        "first_decay_steps": 10, "t_mul": 1.0}})";
  EXPECT_NEAR(rate(flat, 15), 0.5, 1e-15);
}

TEST(LrSchedule, KerasFormAndConfigRoundTrip) {
  const Json keras = Json::parse(R"({"module": "keras.optimizers.schedules",
      "class_name": "PolynomialDecay", "config": {"initial_learning_rate": 0.1,
      "decay_steps": 100, "end_learning_rate": 0.001, "power": 0.5, "cycle": false,
      "name": "PolynomialDecay"}, "registered_name": null})");
  ASSERT_TRUE(is_lr_schedule(keras));
  const LrSchedule s = parse_lr_schedule(keras);
  EXPECT_EQ(lr_schedule_keras_config(s), keras);
  for (
      const char* text :
      {R"({"ExponentialDecay": {"initial_learning_rate": 0.1, "decay_steps": 7, "decay_rate": 0.9}})",
       R"({"PiecewiseConstantDecay": {"boundaries": [3], "values": [0.1, 0.01]}})",
       R"({"CosineDecay": {"initial_learning_rate": 0.0, "decay_steps": 9, "warmup_target": 0.1,
            "warmup_steps": 3}})",
       R"({"CosineDecayRestarts": {"initial_learning_rate": 0.1, "first_decay_steps": 4}})"}) {
    const LrSchedule a = parse_lr_schedule(Json::parse(text));
    const LrSchedule b = parse_lr_schedule(lr_schedule_keras_config(a));
    for (int64_t step : {0, 1, 3, 8, 50}) EXPECT_DOUBLE_EQ(lr_at(a, step), lr_at(b, step)) << text;
  }
}

TEST(LrSchedule, BadConfigsNameTheKeyAndRule) {
  auto key_of = [](const char* text) {
    try {
      parse_lr_schedule(Json::parse(text));
    } catch (const ConfigError& e) {
      return std::string(e.key()) + ": " + e.what();
    }
    return std::string("nothing thrown");
  };
  EXPECT_EQ(key_of(R"({"ExponentialDecay": {"initial_learning_rate": 0.1, "decay_steps": 0,
                      "decay_rate": 0.5}})")
                .rfind("decay_steps:", 0),
            0u);
  EXPECT_EQ(key_of(R"({"ExponentialDecay": {"initial_learning_rate": 0.1, "decay_steps": 5}})")
                .rfind("decay_rate:", 0),
            0u);
  EXPECT_EQ(key_of(R"({"PiecewiseConstantDecay": {"boundaries": [5, 3], "values": [1, 2, 3]}})")
                .rfind("boundaries:", 0),
            0u);
  EXPECT_EQ(key_of(R"({"PiecewiseConstantDecay": {"boundaries": [5], "values": [1]}})")
                .rfind("values:", 0),
            0u);
  EXPECT_EQ(key_of(R"({"CosineDecay": {"initial_learning_rate": 0.1, "decay_steps": 5,
                      "frobnicate": 1}})")
                .rfind("frobnicate:", 0),
            0u);
  EXPECT_NE(key_of(R"({"StepDecay": {}})").find("ExponentialDecay"), std::string::npos);
}

TEST(LrSchedule, OptimizerStepUsesTheRateOfEachIteration) {
  const OptimizerSpec s = parse_optimizer(Json::parse(R"({"SGD": {"learning_rate":
      {"PiecewiseConstantDecay": {"boundaries": [0, 1], "values": [0.5, 0.25, 0.125]}}}})"));
  ASSERT_TRUE(s.schedule.has_value());
  EXPECT_DOUBLE_EQ(s.learning_rate, 0.5);  // the first update's rate
  std::vector<float> p = {1.0f}, g = {1.0f};
  std::vector<float> state(optimizer_state_floats(s, 1) + 1);
  const float want[] = {0.5f, 0.25f, 0.125f, 0.0f};  // after steps 0, 1, 2, 3
  for (int64_t it = 0; it < 4; ++it) {
    g[0] = 1.0f;
    optimizer_step(s, it, 1, p.data(), g.data(), state.data(), {});
    EXPECT_FLOAT_EQ(p[0], want[it]) << it;
  }
  EXPECT_DOUBLE_EQ(learning_rate_at(s, 2), 0.125);
  const Json back = optimizer_keras_config(s);
  EXPECT_EQ(back["learning_rate"]["class_name"], "PiecewiseConstantDecay");
  const OptimizerSpec t = parse_optimizer(Json{{"class_name", "SGD"}, {"config", back}});
  ASSERT_TRUE(t.schedule.has_value());
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 1), 0.25);
}

}  // namespace
}  // namespace nnfleet
