// LayerConfig's integer reads and parse_json_bounded (issue 10, items 4 and 5): every integer
// lands in [min, limits::kMaxConfigInt] or is refused by name, never truncated to 32 bits or cast
// from an out-of-range float; JSON nested past the limit is refused while it is parsed.
#include "core/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/limits.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;

// The ConfigError message of get_int("k") on {"k": v}, or "" when it returns.
std::string int_error(const Json& v, int64_t min = 1) {
  LayerConfig c(Json{{"k", v}}, ConfigMode::kPlan, "Test");
  try {
    c.get_int("k", {}, min);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "k");
    return e.what();
  }
  return "";
}

std::string ints_error(const Json& v) {
  LayerConfig c(Json{{"k", v}}, ConfigMode::kPlan, "Test");
  try {
    c.get_ints("k", 2);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LayerConfigInt, AcceptsIntegersUpToTheLimitInEveryForm) {
  for (const Json& v : {Json(3), Json(3u), Json(3.0), Json("3")}) {
    LayerConfig c(Json{{"k", v}}, ConfigMode::kPlan, "Test");
    EXPECT_EQ(c.get_int("k"), 3) << v.dump();
  }
  LayerConfig c(Json{{"k", limits::kMaxConfigInt}}, ConfigMode::kPlan, "Test");
  EXPECT_EQ(c.get_int("k"), limits::kMaxConfigInt);
  LayerConfig n(Json{{"k", -5}}, ConfigMode::kPlan, "Test");
  EXPECT_EQ(n.get_int("k", {}, -10), -5);
}

TEST(LayerConfigInt, RefusesValuesBeyond32BitsNamingTheLimit) {
  const std::string want =
      "bad value for 'k'; expected a positive integer at most 2147483647, got ";
  EXPECT_EQ(int_error(int64_t{1} << 31), want + "2147483648");
  EXPECT_EQ(int_error(4294967299LL), want + "4294967299");
  EXPECT_EQ(int_error(UINT64_MAX), want + "18446744073709551615");
  EXPECT_EQ(int_error(INT64_MAX), want + "9223372036854775807");
  EXPECT_EQ(int_error(1e300), want + "1e+300");
  EXPECT_EQ(int_error("4294967299"), want + "\"4294967299\"");
}

TEST(LayerConfigInt, RefusesNonIntegersWithoutAnUndefinedCast) {
  EXPECT_EQ(int_error(INT64_MIN),
            "bad value for 'k'; expected a positive integer, got "
            "-9223372036854775808");
  EXPECT_EQ(int_error(-1e300), "bad value for 'k'; expected a positive integer, got -1e+300");
  EXPECT_NE(int_error("nan"), "");
  EXPECT_NE(int_error("inf"), "");
  EXPECT_NE(int_error(2.5), "");
  EXPECT_NE(int_error(true), "");
  EXPECT_EQ(int_error(-1, 0), "bad value for 'k'; expected a non-negative integer, got -1");
}

TEST(LayerConfigInts, EachElementIsRangeChecked) {
  LayerConfig ok(Json{{"k", Json::array({3, 4})}}, ConfigMode::kPlan, "Test");
  EXPECT_EQ(ok.get_ints("k", 2), (std::vector<int64_t>{3, 4}));
  const std::string over =
      "bad value for 'k'; expected a positive integer or a list of 2 of "
      "them (each at most 2147483647), got ";
  EXPECT_EQ(ints_error(4294967299LL), over + "4294967299");
  EXPECT_EQ(ints_error(Json::array({3, 4294967297LL})), over + "[3,4294967297]");
  EXPECT_EQ(ints_error(Json::array({3, 1e300})), over + "[3,1e+300]");
  EXPECT_NE(ints_error(Json::array({3, -1e300})), "");
  EXPECT_NE(ints_error(Json::array({3})), "");
}

TEST(ConfigInt, TakesOnlyJsonIntegersInRange) {
  EXPECT_EQ(config_int(Json(7), 0), 7);
  EXPECT_EQ(config_int(Json(7u), 0), 7);
  EXPECT_EQ(config_int(Json(-1), -1), -1);
  EXPECT_FALSE(config_int(Json(UINT64_MAX), -1));  // not -1 after a wrap
  EXPECT_FALSE(config_int(Json(int64_t{1} << 31), 0));
  EXPECT_FALSE(config_int(Json(3.0), 0));
  EXPECT_FALSE(config_int(Json(-2), -1));
}

// The ModelError message of `cls`'s output shape for a per-sample input `in`.
std::string shape_error(const std::string& cls, const Json& cfg, const Shape& in) {
  auto l = make_layer(cls, cfg, ConfigMode::kPlan, "l");
  try {
    l->output_shape({in});
  } catch (const ModelError& e) {
    return e.what();
  }
  ADD_FAILURE() << cls << " " << cfg.dump() << " built";
  return "";
}

TEST(LayerConfigInt, LargestIntegersDoNotOverflowTheShapeArithmetic) {
  // Each value is valid alone; the sizes they make together used to overflow int (nonsense
  // messages, undefined behaviour) or int64 (a wrong memory estimate).
  const Shape img{28, 28, 1};
  const int64_t m = limits::kMaxConfigInt;
  EXPECT_THAT(
      shape_error("Conv2D",
                  {{"filters", 2}, {"kernel_size", 3}, {"strides", m}, {"padding", "same"}}, img),
      HasSubstr("window 3x3 (strides 2147483647x2147483647, dilation 1x1) over input "
                "[None,28,28,1] with 2 output channels is too large"));
  EXPECT_THAT(shape_error("Conv2D", {{"filters", 2}, {"kernel_size", m}, {"padding", "same"}}, img),
              HasSubstr("is too large; expected input, window and stride sizes that add up"));
  EXPECT_THAT(
      shape_error(
          "Conv2D",
          {{"filters", 2}, {"kernel_size", 1 << 30}, {"dilation_rate", 4}, {"padding", "same"}},
          img),
      HasSubstr("is too large"));
  EXPECT_THAT(shape_error("DepthwiseConv2D", {{"kernel_size", 1}, {"depth_multiplier", m}},
                          Shape{28, 28, 3}),
              HasSubstr("with 6442450941 output channels is too large"));
  EXPECT_THAT(shape_error("ZeroPadding2D", {{"padding", m}}, img),
              HasSubstr("padding input [None,28,28,1] to [None,4294967322,4294967322,1] is too "
                        "large"));
  EXPECT_THAT(shape_error("Reshape", {{"target_shape", {m, m, m, m, m, m}}}, img),
              HasSubstr("cannot reshape input [None,28,28,1] (784 values)"));
}

std::string nested(int levels) {
  return std::string(static_cast<size_t>(levels), '[') +
         std::string(static_cast<size_t>(levels), ']');
}

// An activation given as a layer object (Keras 3: {"class_name": "LeakyReLU", ...}) is written
// back as that object with its options by every layer kind that takes an activation, not as a
// bare name that would lose the slope.
TEST(LayerConfigActivation, ObjectsAreWrittenBackWithTheirOptions) {
  // (A slope of 0.2 is written as "leaky_relu", which Keras 3 reads with that slope.)
  const Json leaky = {{"class_name", "LeakyReLU"}, {"config", {{"negative_slope", 0.1}}}};
  const std::vector<std::pair<std::string, Json>> kinds = {
      {"Dense", {{"units", 2}}},
      {"Conv1D", {{"filters", 2}, {"kernel_size", 3}}},
      {"Conv2D", {{"filters", 2}, {"kernel_size", 3}}},
      {"Conv2DTranspose", {{"filters", 2}, {"kernel_size", 3}}},
      {"SeparableConv2D", {{"filters", 2}, {"kernel_size", 3}}},
      {"DepthwiseConv2D", {{"kernel_size", 3}}},
  };
  for (auto [cls, cfg] : kinds) {
    SCOPED_TRACE(cls);
    cfg["activation"] = leaky;
    const Json back = make_layer(cls, cfg, ConfigMode::kKeras, "l")->keras_config();
    ASSERT_TRUE(back["activation"].is_object()) << back["activation"].dump();
    EXPECT_EQ(back["activation"]["class_name"], "LeakyReLU");
    EXPECT_FLOAT_EQ(back["activation"]["config"]["negative_slope"].get<float>(), 0.1f);
  }
}

TEST(ParseJsonBounded, AcceptsTheLimitAndRefusesOneLevelMore) {
  const int d = limits::kMaxNestingDepth;
  EXPECT_NO_THROW(parse_json_bounded(nested(d)));
  EXPECT_NO_THROW(parse_json_bounded("{\"a\": " + nested(d - 1) + "}"));
  EXPECT_THROW(parse_json_bounded(nested(d + 1)), JsonTooDeep);
  EXPECT_THROW(parse_json_bounded("{\"a\": " + nested(d) + "}"), JsonTooDeep);
  EXPECT_THROW(parse_json_bounded("[1, 2"), Json::parse_error);
}

TEST(ParseJsonBounded, RefusesVeryDeepDocumentsWithoutRecursing) {
  // 300,000 levels overflowed the stack when the parsed value was copied (issue 10, item 4).
  try {
    parse_json_bounded("{\"config\": " + nested(300000) + "}");
    ADD_FAILURE() << "no JsonTooDeep";
  } catch (const JsonTooDeep& e) {
    EXPECT_EQ(e.limit(), limits::kMaxNestingDepth);
    EXPECT_STREQ(e.what(),
                 "nested more than 128 levels deep; expected at most 128 levels of "
                 "lists and mappings");
  }
}

}  // namespace
}  // namespace nnfleet
