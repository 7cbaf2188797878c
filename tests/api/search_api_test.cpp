// The public draw of a search (nnfleet/search.h): the value a plan's space gives the same
// parameter of the same trial, as JSON text, and a UsageError naming the parameter on bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/config.h"
#include "nnfleet/nnfleet.h"
#include "plan/plan.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

TEST(SampleParameter, GivesWhatThePlansSpaceDraws) {
  const Plan p = load_plan(std::string(NNFLEET_SOURCE_DIR) + "/examples/search/w5.yaml");
  for (size_t k = 0; k < 10; ++k) {
    Json lr;
    for (const auto& [name, v] : p.models.parameters(k))
      if (name == "lr") lr = v;
    EXPECT_EQ(api::sample_parameter(p.seed, k, "lr", R"({"loguniform": [1.0e-4, 1.0e-2]})"),
              lr.dump());
  }
  EXPECT_EQ(api::sample_parameter(1, 2, "act", R"({"choice": ["relu", "tanh"]})"),
            api::sample_parameter(1, 2, "act", R"({"choice": ["relu", "tanh"]})"));
  EXPECT_EQ(api::sample_parameter(1, 2, "m", R"({"fixed": 0.9})"), "0.9");
  const std::string units = api::sample_parameter(4, 0, "units", R"({"int": [8, 8]})", "sobol", 3);
  EXPECT_EQ(units, "8");
}

TEST(SampleParameter, BadInputNamesTheParameterAndTheRule) {
  EXPECT_THAT(usage_error([] { api::sample_parameter(0, 0, "lr", R"({"uniform": [1, 0]})"); }),
              HasSubstr("failed to sample parameter 'lr': lr.uniform: empty range; expected lo < "
                        "hi"));
  EXPECT_THAT(usage_error([] { api::sample_parameter(0, 0, "lr", "{uniform"); }),
              HasSubstr("failed to sample parameter 'lr': the distribution is not JSON"));
  EXPECT_THAT(
      usage_error([] { api::sample_parameter(0, 0, "w", R"({"int": [1, 4], "per": "d"})"); }),
      HasSubstr("failed to sample parameter 'w': per applies in a plan's search.space"));
  EXPECT_THAT(usage_error([] { api::sample_parameter(0, 0, "x", R"({"fixed": 1})", "grid"); }),
              HasSubstr("unknown sampler 'grid'; expected random or sobol"));
}

}  // namespace
}  // namespace nnfleet
