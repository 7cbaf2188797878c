// The public draw of a search's parameter (nnfleet/search.h), over the plan's own.
#include "nnfleet/search.h"

#include "core/config.h"
#include "plan/search_space.h"

namespace nnfleet::api {

std::string sample_parameter(uint64_t seed, size_t trial, const std::string& name,
                             const std::string& distribution_json, const std::string& sampler,
                             size_t dimension) {
  Json d;
  try {
    d = Json::parse(distribution_json);
  } catch (const Json::exception& e) {
    throw UsageError("failed to sample parameter '" + name +
                     "': the distribution is not JSON; expected a mapping such as "
                     "{\"uniform\": [0, 1]}, got " +
                     show(distribution_json) + " (" + e.what() + ")");
  }
  return plan_detail::sample_one(seed, trial, name, d, sampler, dimension).dump();
}

}  // namespace nnfleet::api
