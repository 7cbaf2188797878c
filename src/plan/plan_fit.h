// The fit options of a plan's model entry beyond epochs and batches: Keras's ReduceLROnPlateau
// callback (and, with issue 12, the weights per class). Internal to src/plan (plan_models.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan/plan_problems.h"
#include "plan/plan_yaml.h"

namespace nnfleet::plan_detail {

// Reads the fit options of the merged entry `m` into `s` and its expanded form `ex`, reporting
// every problem into `pr`. `at(key)` is the field path of a key of `m`; `monitors` lists the
// quantities a callback may monitor; `s.optimizer` is already parsed.
void fit_options(Problems& pr, const Json& m,
                 const std::function<std::string(const std::string&)>& at,
                 std::vector<std::string> monitors, ModelSpec& s, Json& ex);

}  // namespace nnfleet::plan_detail
