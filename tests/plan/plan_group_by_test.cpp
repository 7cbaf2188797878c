// `group_by:` at the top of a plan: the parameter the report groups the models by. It must name a
// recorded parameter (a grid variable, a search parameter or a `parameters:` key), else the plan
// is refused at its file:line with the names it could be; the run folder's plan copy keeps it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "plan/plan.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;

// A W4-like plan: one grid variable k (the series) over two entries, lstm-{k} and gru-{k}, and a
// `parameters:` key on a third entry.
std::string w4_plan(const std::string& group_by) {
  return "data:\n  train: fashion-mnist:train\n" + group_by + R"(
models:
  - name: lstm-{k}
    grid: {k: [1, 2, 3]}
    layers:
      - Dense: {units: 4}
  - name: gru-{k}
    grid: {k: [1, 2, 3]}
    layers:
      - Dense: {units: 8}
  - name: plain
    parameters: {width: 2}
    layers:
      - Dense: {units: 2}
)";
}

std::string error_of(const std::string& text) {
  try {
    (void)parse_plan(text, "w4.yaml", ".");
  } catch (const PlanError& e) {
    return e.what();
  }
  ADD_FAILURE() << "the plan was accepted";
  return "";
}

TEST(PlanGroupBy, NamesAGridVariableOrAParametersKeyAndIsKeptInThePlanCopy) {
  const Plan p = parse_plan(w4_plan("group_by: k"), "w4.yaml", ".");
  EXPECT_EQ(p.group_by, "k");
  const std::string yaml = plan_to_yaml(p);
  EXPECT_THAT(yaml, HasSubstr("\ngroup_by: k\n"));
  // The copy reads back with the same key (a run resumed from it).
  EXPECT_EQ(parse_plan(w4_plan("group_by: width"), "w4.yaml", ".").group_by, "width");
  EXPECT_EQ(parse_plan(w4_plan(""), "w4.yaml", ".").group_by, "");
  EXPECT_THAT(plan_to_yaml(parse_plan(w4_plan(""), "w4.yaml", ".")),
              ::testing::Not(HasSubstr("group_by")));
}

TEST(PlanGroupBy, AnUnknownNameIsRefusedAtItsLineListingTheParameters) {
  EXPECT_THAT(error_of(w4_plan("group_by: series")),
              HasSubstr("w4.yaml:3: group_by: names no recorded parameter; expected a grid "
                        "variable, search parameter or `parameters:` key of this plan (k, "
                        "width), got \"series\""));
  EXPECT_THAT(error_of(w4_plan("group_by: [k]")),
              HasSubstr("w4.yaml:3: group_by: is not a parameter name; expected"));
}

TEST(PlanGroupBy, ASearchGroupsByOneOfItsParameters) {
  const std::string search = R"(data:
  train: fashion-mnist:train
group_by: family
search:
  trials: 4
  scheduler: {successive_halving: {reduction_factor: 3, min_epochs: 1, max_epochs: 9}}
  space:
    family: {choice: [mlp, cnn]}
    lr: {loguniform: [1.0e-4, 1.0e-2]}
models:
  - name: "t-{trial}"
    optimizer: {SGD: {learning_rate: "{lr}"}}
    layers:
      - Dense: {units: 4}
)";
  EXPECT_EQ(parse_plan(search, "s.yaml", ".").group_by, "family");
  std::string bad = search;
  bad.replace(bad.find("group_by: family"), 16, "group_by: width");
  EXPECT_THAT(error_of(bad), HasSubstr("group_by: names no recorded parameter"));
  EXPECT_THAT(error_of(bad), HasSubstr("(family, lr)"));
}

}  // namespace
}  // namespace nnfleet
