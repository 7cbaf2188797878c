// Problem collection and typed field checks for plans.
#include "plan/plan_problems.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "plan/plan_yaml.h"

namespace nnfleet::plan_detail {

void Problems::add(const std::string& path, const std::string& message) {
  add_at(line(path), path, message);
}

void Problems::add_at(int line, const std::string& path, const std::string& message) {
  if (recording_) {
    record({false, line, path, message});
    return;
  }
  // Whether field `a` lies below `b`, entered through one of `seps`.
  auto under = [](const std::string& a, const std::string& b, const char* seps) {
    return a.size() > b.size() && a.compare(0, b.size(), b) == 0 &&
           std::string(seps).find(a[b.size()]) != std::string::npos;
  };
  for (const auto& m : muted_)
    if (path == m || under(path, m, ".[") || under(m, path, "[")) return;
  std::string text = file_ + ":" + std::to_string(line) + ": ";
  if (!path.empty()) text += path + ": ";
  text += message;
  if (!seen_.insert(text).second) return;
  list_.push_back({line, std::move(text)});
}

void Problems::mute(const std::string& path) {
  if (recording_)
    record({true, 0, path, {}});
  else
    muted_.insert(path);
}

void Problems::record(Call c) {
  // A call made before, and so replayed before, changes nothing when replayed again (problems
  // are added once and mutes only accumulate): a grid whose every model has the same problem is
  // held once per thread, as one after the other it would be.
  std::string key =
      std::to_string(c.mute) + '\n' + std::to_string(c.line) + '\n' + c.path + '\n' + c.message;
  if (seen_.insert(std::move(key)).second) calls_.push_back(std::move(c));
}

Problems Problems::recorder(std::string file, const std::map<std::string, int>& lines) {
  Problems p(std::move(file), lines);
  p.recording_ = true;
  return p;
}

std::vector<Problems::Call> Problems::take_calls() { return std::exchange(calls_, {}); }

void Problems::replay(const std::vector<Call>& calls) {
  for (const Call& c : calls)
    if (c.mute)
      mute(c.path);
    else
      add_at(c.line, c.path, c.message);
}

int Problems::line(const std::string& path) const {
  std::string p = path;
  for (;;) {
    auto it = lines_.find(p);
    if (it != lines_.end()) return it->second;
    if (p.empty()) return 1;
    p = parent_path(p);
  }
}

std::string Problems::where(const std::string& path) const {
  return file_ + ":" + std::to_string(line(path)) + ": " + path;
}

void Problems::throw_if_any() const {
  if (list_.empty()) return;
  std::vector<Entry> sorted = list_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Entry& a, const Entry& b) { return a.line < b.line; });
  std::string msg =
      "failed to load plan '" + file_ + "': " + std::to_string(sorted.size()) + " problem(s)";
  for (const auto& e : sorted) msg += "\n" + e.text;
  throw PlanError(msg);
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

void check_keys(Problems& pr, const std::string& path, const Json& obj,
                const std::vector<std::string>& valid) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(valid.begin(), valid.end(), key) != valid.end()) continue;
    pr.add(path.empty() ? key : path + "." + key,
           "unknown key '" + key + "'; expected one of: " + join(valid) + near_miss(key, valid));
  }
}

std::optional<int64_t> check_int(Problems& pr, const std::string& path, const Json& v, int64_t min,
                                 int64_t max) {
  std::string what = min == 1   ? "a positive integer"
                     : min == 0 ? "a non-negative integer"
                                : "an integer >= " + std::to_string(min);
  double d = 0;
  bool ok = false;
  if (v.is_number_unsigned()) {  // compared as an integer: no rounding through double
    const uint64_t u = v.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(max) && (min <= 0 || u >= static_cast<uint64_t>(min));
    d = static_cast<double>(u);
    if (ok) return static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    ok = i >= min && i <= max;
    d = static_cast<double>(i);
    if (ok) return i;
  } else if (v.is_number()) {
    d = v.get<double>();
    ok = std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(min) &&
         d <= static_cast<double>(max);
  }
  if (!ok) {
    if (v.is_number() && d > static_cast<double>(max)) what += " at most " + std::to_string(max);
    pr.add(path, "expected " + what + ", got " + show(v));
    return std::nullopt;
  }
  return static_cast<int64_t>(d);
}

std::optional<double> check_number(Problems& pr, const std::string& path, const Json& v, double lo,
                                   bool lo_open, double hi, bool hi_open, const std::string& what) {
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && (lo_open ? d > lo : d >= lo) && (hi_open ? d < hi : d <= hi)) return d;
  }
  pr.add(path, "expected " + what + ", got " + show(v));
  return std::nullopt;
}

std::optional<bool> check_bool(Problems& pr, const std::string& path, const Json& v) {
  if (v.is_boolean()) return v.get<bool>();
  pr.add(path, "expected true or false, got " + show(v));
  return std::nullopt;
}

std::optional<std::string> check_string(Problems& pr, const std::string& path, const Json& v,
                                        const std::vector<std::string>& allowed) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (allowed.empty() || std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return s;
  }
  pr.add(path, "expected " +
                   (allowed.empty() ? std::string("a string") : "one of " + join(allowed)) +
                   ", got " + show(v));
  return std::nullopt;
}

}  // namespace nnfleet::plan_detail
