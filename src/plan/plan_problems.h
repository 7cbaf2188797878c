// Collecting the problems of a plan file, each with its file:line and field path, and the typed
// field checks that report into it. Internal to src/fleet.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"

namespace nnfleet::plan_detail {

// Every problem found in one plan file, reported together by throw_if_any().
class Problems {
 public:
  // `lines` maps field paths to 1-based lines (LocatedJson::lines); it must outlive this object.
  Problems(std::string file, const std::map<std::string, int>& lines)
      : file_(std::move(file)), lines_(lines) {}

  // Records "<file>:<line>: <path>: <message>"; an identical line is recorded once (a mistake in
  // a grid entry or in `defaults` shows up once, not once per expanded model).
  void add(const std::string& path, const std::string& message);
  // The same at an explicit line (a problem of a key rather than of a field's value).
  void add_at(int line, const std::string& path, const std::string& message);
  const std::string& file() const { return file_; }
  // The line of `path`, or of its nearest ancestor that has one.
  int line(const std::string& path) const;
  // "<file>:<line>: <path>" for ModelSpec::where and LayerEntry::where.
  std::string where(const std::string& path) const;
  // Drops later problems at `path`, below it, or at the list holding it: they would only repeat
  // the one already reported there (an unknown placeholder makes its value invalid too).
  void mute(const std::string& path);
  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }
  // Throws PlanError "failed to load plan '<file>': N problem(s)" and one line per problem, in
  // line order. Does nothing when there are none.
  void throw_if_any() const;

  // For work done apart (a thread's share of a plan's models): a recorder keeps every add and
  // mute as it comes, unfiltered, and take_calls() hands them over in order; replay() makes the
  // same calls on this object, which then ends as if they had been made on it in that order.
  struct Call {
    bool mute = false;
    int line = 0;
    std::string path, message;
  };
  static Problems recorder(std::string file, const std::map<std::string, int>& lines);
  std::vector<Call> take_calls();
  void replay(const std::vector<Call>& calls);

 private:
  struct Entry {
    int line;
    std::string text;
  };
  std::string file_;
  const std::map<std::string, int>& lines_;
  std::vector<Entry> list_;
  std::set<std::string> seen_;
  std::set<std::string> muted_;
  void record(Call c);
  bool recording_ = false;
  std::vector<Call> calls_;  // recording_ only (seen_ then holds the calls recorded)
};

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

using nnfleet::near_miss;  // core/config.h

// Reports every key of mapping `obj` not in `valid` ("unknown key 'epoch'; expected one of: ...",
// with a "did you mean" for a near miss).
void check_keys(Problems& pr, const std::string& path, const Json& obj,
                const std::vector<std::string>& valid);

// Typed checks: report and return nullopt on a bad value. Integers accept integral floats (1.0);
// nothing accepts strings for numbers or bools.
std::optional<int64_t> check_int(Problems& pr, const std::string& path, const Json& v, int64_t min,
                                 int64_t max = limits::kMaxConfigInt);
std::optional<double> check_number(Problems& pr, const std::string& path, const Json& v, double lo,
                                   bool lo_open, double hi, bool hi_open, const std::string& what);
std::optional<bool> check_bool(Problems& pr, const std::string& path, const Json& v);
std::optional<std::string> check_string(Problems& pr, const std::string& path, const Json& v,
                                        const std::vector<std::string>& allowed = {});

}  // namespace nnfleet::plan_detail
