// The leaderboard and the exit code of `nnfleet train` (leaderboard.h).
#include "leaderboard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace nnfleet::cli {
namespace {

const double* find(const api::Logs& logs, const std::string& key) {
  for (const auto& [k, v] : logs)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace

std::string leaderboard_text(const api::RunResult& r, int top) {
  std::ostringstream o;
  size_t w = 5;
  for (const auto& m : r.models) w = std::max(w, m.name.size());
  char line[512];
  std::snprintf(line, sizeof line, "%4s  %-*s  %-9s %6s %12s %9s %10s\n", "rank",
                static_cast<int>(w), "model", "status", "epochs", r.rank_by.c_str(), "seconds",
                "samples/s");
  o << line;
  int i = 0;
  for (size_t index : r.ranking) {
    if (++i > top) break;
    const api::ModelResult& m = r.models.at(index);
    const double* v = find(m.metrics, r.rank_by);
    std::snprintf(line, sizeof line, "%4d  %-*s  %-9s %6d %12s %9.1f %10.0f\n", i,
                  static_cast<int>(w), m.name.c_str(), api::status_name(m.status), m.epochs,
                  v ? api::figure_text(*v).c_str() : "-", m.seconds, m.samples_per_second);
    o << line;
  }
  return o.str();
}

bool none_done(const api::RunResult& r) {
  const bool done = std::any_of(r.models.begin(), r.models.end(), [](const api::ModelResult& m) {
    return m.status == api::Status::kDone;
  });
  return !done && !r.models.empty() && !r.interrupted;
}

int exit_code(const api::RunResult& r) {
  const bool failed = std::any_of(r.models.begin(), r.models.end(), [](const api::ModelResult& m) {
    return m.status == api::Status::kFailed;
  });
  return !r.write_error.empty() || !r.report_error.empty() ? 1
         : r.interrupted                                   ? 130
         : failed || none_done(r)                          ? 3
                                                           : 0;
}

}  // namespace nnfleet::cli
