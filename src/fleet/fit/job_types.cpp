// Names of job statuses (api::status_name, include/nnfleet/results.h: the fleet writes them)
// and the lookup of a metric (job_types.h).
#include "fleet/fit/job_types.h"

namespace nnfleet {

const char* api::status_name(api::Status s) {
  switch (s) {
    case JobStatus::kPending:
      return "pending";
    case JobStatus::kDone:
      return "done";
    case JobStatus::kDiverged:
      return "diverged";
    case JobStatus::kFailed:
      return "failed";
    case JobStatus::kCancelled:
      return "cancelled";
    case JobStatus::kPruned:
      return "pruned";
  }
  return "pending";
}

JobStatus job_status_from_name(const std::string& s) {
  for (JobStatus st : {JobStatus::kDone, JobStatus::kDiverged, JobStatus::kFailed,
                       JobStatus::kCancelled, JobStatus::kPruned})
    if (s == api::status_name(st)) return st;
  return JobStatus::kPending;
}

const double* find_metric(const Metrics& m, const std::string& key) {
  for (const auto& [k, v] : m)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace nnfleet
