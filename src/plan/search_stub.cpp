// TEMPORARY (replaced by the plan helper's parser): lets the fleet link before it lands.
#include "plan/plan.h"
namespace nnfleet {
std::vector<std::pair<std::string, Json>> PlanModels::parameters(size_t) const { return {}; }
Json SearchSpec::to_json() const { return Json::object(); }
}  // namespace nnfleet
