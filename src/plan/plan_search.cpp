// A plan's `search:`: its space (each parameter's distribution, `per` and `when`), sampler,
// scheduler and its rungs, metric and mode, and the budgets (max_total_epochs, time_limit), each
// checked with its problems reported at file:line:field; the planned epochs of a schedule; and
// the search's plan.yaml form.
#include <algorithm>
#include <cmath>

#include "core/limits.h"
#include "plan/plan_loader.h"

namespace nnfleet {
namespace plan_detail {
namespace {

const std::vector<std::string> kSearchKeys = {"max_total_epochs", "metric", "mode",       "sampler",
                                              "scheduler",        "space",  "time_limit", "trials"};
const std::vector<std::string> kSchedulers = {"successive_halving", "median_stopping", "none"};
// Budgets in samples may pass INT32_MAX (60,000 rows x 100,000 epochs); kept exact in a double.
constexpr int64_t kMaxSamples = int64_t{1} << 53;

bool is_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// The keys of scheduler `kind`, its budgets in epochs or in samples.
std::vector<std::string> scheduler_keys(const std::string& kind) {
  if (kind == "successive_halving")
    return {"brackets",   "max_epochs",  "max_samples",
            "min_epochs", "min_samples", "reduction_factor"};
  if (kind == "median_stopping")
    return {"interval",    "interval_samples", "max_epochs",
            "max_samples", "min_epochs",       "min_samples"};
  return {"max_epochs", "max_samples"};
}

// The budgets of scheduler mapping `v` at `path` (min, max, interval, in epochs or samples).
void read_budgets(Problems& pr, const std::string& path, const Json& v, const std::string& kind,
                  SearchSchedule& s) {
  const bool epochs =
      v.contains("max_epochs") || v.contains("min_epochs") || v.contains("interval");
  s.samples =
      v.contains("max_samples") || v.contains("min_samples") || v.contains("interval_samples");
  if (epochs && s.samples)
    pr.add(path,
           "budgets are in epochs or in samples; expected *_epochs (and interval) or "
           "*_samples, not both");
  const std::string unit = s.samples ? "_samples" : "_epochs";
  const int64_t most = s.samples ? kMaxSamples : limits::kMaxConfigInt;
  auto budget = [&](const std::string& key, int64_t fallback, bool required) {
    const std::string p = child_path(path, key);
    if (!v.contains(key) || v[key].is_null()) {
      if (required) pr.add(p, "required key missing; expected the budget of the last rung");
      return fallback;
    }
    return check_int(pr, p, v[key], 1, most).value_or(fallback);
  };
  s.max_budget = budget("max" + unit, 1, true);
  if (kind == "none") {
    s.min_budget = s.max_budget;
    return;
  }
  s.min_budget = budget("min" + unit, 1, s.samples);
  if (kind == "median_stopping")
    s.interval = budget(s.samples ? "interval_samples" : "interval", s.min_budget, false);
  if (s.min_budget > s.max_budget)
    pr.add(child_path(path, "min" + unit),
           "min" + unit + " is above max" + unit + "; expected min <= max, got " +
               std::to_string(s.min_budget) + " > " + std::to_string(s.max_budget));
}

// `scheduler:` at `path`: exactly one of kSchedulers.
void read_scheduler(Problems& pr, const std::string& path, const Json& v, SearchSchedule& s) {
  if (!v.is_object() || v.size() != 1) {
    pr.add(path, "expected a mapping with exactly one scheduler (" + join(kSchedulers) +
                     "), such as {successive_halving: {max_epochs: 9}}, got " + show(v));
    return;
  }
  const std::string kind = v.begin().key();
  const std::string kp = child_path(path, kind);
  if (std::find(kSchedulers.begin(), kSchedulers.end(), kind) == kSchedulers.end()) {
    pr.add(kp, "unknown scheduler '" + kind + "'; expected one of " + join(kSchedulers) +
                   near_miss(kind, kSchedulers));
    return;
  }
  const Json& c = v.begin().value().is_null() ? Json::object() : v.begin().value();
  if (!c.is_object()) {
    pr.add(kp, "expected a mapping of " + kind + " settings, got " + show(c));
    return;
  }
  check_keys(pr, kp, c, scheduler_keys(kind));
  s.kind = kind == "successive_halving" ? SearchSchedule::Kind::kHalving
           : kind == "median_stopping"  ? SearchSchedule::Kind::kMedian
                                        : SearchSchedule::Kind::kNone;
  read_budgets(pr, kp, c, kind, s);
  if (s.kind != SearchSchedule::Kind::kHalving) return;
  if (c.contains("reduction_factor"))
    s.reduction_factor = static_cast<int>(
        check_int(pr, child_path(kp, "reduction_factor"), c["reduction_factor"], 2).value_or(3));
  if (c.contains("brackets")) {
    const std::string bp = child_path(kp, "brackets");
    s.brackets = static_cast<int>(check_int(pr, bp, c["brackets"], 1).value_or(1));
    const size_t rungs = s.rungs().size();
    if (s.min_budget <= s.max_budget && static_cast<size_t>(s.brackets) > rungs) {
      s.brackets = 1;
      pr.add(bp, "more brackets than rungs; expected at most " + std::to_string(rungs) +
                     " (a bracket starts at each rung but the last), got " + show(c["brackets"]));
    }
  }
}

// `per` at `path` of parameter `p`: an earlier int parameter (or a fixed integer) with values
// in [0, kMaxRepeat], whose value says how many values `p` has.
void read_per(Problems& pr, const std::string& path, const Json& v, const SearchSpace& space,
              SpaceParameter& p) {
  std::vector<std::string> ints;
  for (const auto& q : space.params)
    if (q.per.empty() && (q.kind == SpaceParameter::Kind::kInt ||
                          (q.kind == SpaceParameter::Kind::kFixed && q.values.is_number_integer())))
      ints.push_back(q.name);
  const SpaceParameter* q =
      v.is_string() && std::find(ints.begin(), ints.end(), v.get<std::string>()) != ints.end()
          ? space.find(v.get<std::string>())
          : nullptr;
  if (!q) {
    pr.add(path, "per names no int parameter; expected the name of an earlier int parameter (" +
                     (ints.empty() ? std::string("there is none") : "one of " + join(ints)) +
                     "), got " + show(v));
    return;
  }
  const bool fixed = q->kind == SpaceParameter::Kind::kFixed;
  const double lo = fixed ? q->values.get<double>() : q->lo;
  const double hi = fixed ? q->values.get<double>() : q->hi;
  if (!q->checked) return;
  if (lo < 0 || hi > static_cast<double>(kMaxRepeat)) {
    pr.add(path, "per takes its count from '" + q->name +
                     "'; expected a parameter whose values "
                     "lie in [0, " +
                     std::to_string(kMaxRepeat) + "], got [" + number_text(lo) + ", " +
                     number_text(hi) + "]");
    return;
  }
  p.per = q->name;
  p.per_max = static_cast<size_t>(hi);
}

// mode: min, max or auto (from the metric's name, as early stopping's monitor).
void read_mode(Problems& pr, const Json& r, SearchSpec& spec) {
  if (r.contains("metric") && !r["metric"].is_null())
    spec.metric = check_string(pr, "search.metric", r["metric"]).value_or(spec.metric);
  std::string mode = "auto";
  if (r.contains("mode") && !r["mode"].is_null())
    mode = check_string(pr, "search.mode", r["mode"], {"auto", "min", "max"}).value_or("auto");
  if (mode != "auto") {
    spec.higher_is_better = mode == "max";
    return;
  }
  const std::string& m = spec.metric;
  const std::string name = m.rfind("val_", 0) == 0 ? m.substr(4) : m;
  try {
    spec.higher_is_better = name != "loss" && metric_goes_up(name);
  } catch (const Error&) {
    pr.add(r.contains("mode") ? "search.mode" : "search.metric",
           "mode auto cannot tell whether '" + m +
               "' is better higher or lower (it is not a known metric); expected mode: min or "
               "mode: max");
  }
}

// trials, max_total_epochs and time_limit.
void read_budget_keys(Problems& pr, const Json& r, SearchSpec& spec) {
  if (r.contains("trials") && !r["trials"].is_null()) {
    if (!spec.sampled)
      pr.add("search.trials",
             "trials are drawn from search.space; expected no trials without "
             "a space (every model of the plan is then a trial)");
    else if (const auto n = check_int(pr, "search.trials", r["trials"], 1,
                                      static_cast<int64_t>(limits::kMaxPlanModels)))
      spec.trials = static_cast<size_t>(*n);
  } else if (spec.sampled) {
    pr.add("search.trials",
           "required key missing; expected the number of trials to draw from "
           "search.space (at most " +
               std::to_string(limits::kMaxPlanModels) + ")");
  }
  if (r.contains("max_total_epochs") && !r["max_total_epochs"].is_null()) {
    spec.max_total_epochs =
        check_int(pr, "search.max_total_epochs", r["max_total_epochs"], 1, kMaxSamples).value_or(0);
    if (spec.max_total_epochs > 0 && spec.schedule.samples) {
      pr.add("search.max_total_epochs",
             "max_total_epochs applies to budgets in epochs; expected the scheduler's *_epochs, "
             "or no max_total_epochs with *_samples");
      spec.max_total_epochs = 0;
    }
  }
  if (r.contains("time_limit") && !r["time_limit"].is_null())
    spec.time_limit_seconds = check_number(pr, "search.time_limit", r["time_limit"], 0, true,
                                           INFINITY, true, "a number of seconds > 0")
                                  .value_or(0);
}

}  // namespace

void read_space(const PlanContext& cx, const Json& v, SearchSpace& space) {
  Problems& pr = cx.pr;
  if (!v.is_object() || v.empty()) {
    pr.add("search.space",
           "expected a mapping of parameter names to distributions, such as "
           "{lr: {loguniform: [1.0e-4, 1.0e-2]}}, got " +
               show(v));
    return;
  }
  auto order = cx.doc.keys.find("search.space");
  for (const auto& name : order != cx.doc.keys.end() ? order->second : std::vector<std::string>{}) {
    const std::string path = child_path("search.space", name);
    if (!is_name(name) || name == "trial") {
      pr.add(path, "bad parameter name " + show(name) +
                       "; expected letters, digits and '_', not "
                       "starting with a digit, and not 'trial' (the {trial} placeholder's)");
      continue;
    }
    const Json& d = v[name];
    std::optional<SpaceParameter> p = read_distribution(pr, path, name, d);
    if (!p) {  // kept, so that what names it is not reported again as unknown
      p.emplace();
      p->name = name;
      p->checked = false;
    }
    if (d.is_object() && d.contains("per"))
      read_per(pr, child_path(path, "per"), d["per"], space, *p);
    if (d.is_object() && d.contains("when"))
      p->when = read_when(pr, child_path(path, "when"), d["when"], space, space.params.size(),
                          "before it");
    space.add(std::move(*p));
  }
  std::vector<std::string> seen;
  for (const auto& p : space.params)
    for (size_t i = 0; i < std::max<size_t>(1, p.per.empty() ? 1 : p.per_max); ++i) {
      const std::string n = p.per.empty() ? p.name : p.name + "_" + std::to_string(i);
      if (std::find(seen.begin(), seen.end(), n) != seen.end())
        pr.add(child_path("search.space", p.name),
               "parameter name '" + n + "' is taken twice (a per parameter's values are named " +
                   "NAME_0, NAME_1, ...); expected names unique across the space");
      seen.push_back(n);
    }
}

}  // namespace plan_detail

std::vector<int64_t> SearchSchedule::rungs() const {
  std::vector<int64_t> out;
  if (kind != Kind::kNone) {
    for (int64_t b = min_budget; b < max_budget;) {
      out.push_back(b);
      if (kind == Kind::kMedian)
        b += std::max<int64_t>(1, interval);
      else if (b > max_budget / reduction_factor)
        break;
      else
        b *= reduction_factor;
    }
  }
  out.push_back(max_budget);
  return out;
}

namespace plan_detail {

int64_t planned_epochs(const SearchSchedule& s, size_t n) {
  if (s.kind != SearchSchedule::Kind::kHalving) return static_cast<int64_t>(n) * s.max_budget;
  const std::vector<int64_t> rungs = s.rungs();
  const auto brackets = static_cast<size_t>(s.brackets);
  int64_t total = 0;
  for (size_t b = 0; b < brackets && b < rungs.size(); ++b) {
    // Trial k goes to bracket k % brackets; bracket b starts at rung b.
    const size_t nb = n / brackets + (b < n % brackets ? 1 : 0);
    if (nb == 0) continue;
    size_t reach = nb;  // floor(nb / rf^j)
    int64_t prev = 0;
    for (size_t j = b; j < rungs.size(); ++j) {
      total += static_cast<int64_t>(std::max<size_t>(1, reach)) * (rungs[j] - prev);
      prev = rungs[j];
      reach /= static_cast<size_t>(s.reduction_factor);
    }
  }
  return total;
}

size_t fit_trials(Problems& pr, const SearchSpec& spec, size_t n) {
  if (spec.max_total_epochs <= 0 || n == 0) return n;
  const int64_t one = planned_epochs(spec.schedule, 1);
  if (one > spec.max_total_epochs) {
    pr.add("search.max_total_epochs",
           "max_total_epochs is smaller than one trial of the schedule; expected at least " +
               std::to_string(one) + " (one trial trained to max_epochs), got " +
               std::to_string(spec.max_total_epochs));
    return n;
  }
  // planned_epochs grows with n: the largest n that fits, by bisection.
  size_t lo = 1, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (planned_epochs(spec.schedule, mid) <= spec.max_total_epochs)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

void read_search(const PlanContext& cx, const Json& r, uint64_t seed, SearchSpec& spec,
                 SearchTrials& out) {
  Problems& pr = cx.pr;
  spec.where = pr.where("search");
  if (!r.is_object()) {
    pr.add("search",
           "expected a mapping with scheduler (and space, trials, metric, ...), got " + show(r));
    return;
  }
  check_keys(pr, "search", r, kSearchKeys);
  const size_t before = pr.size();
  spec.sampled = r.contains("space") && !r["space"].is_null();
  if (spec.sampled) read_space(cx, r["space"], out.space);
  if (r.contains("sampler") && !r["sampler"].is_null())
    spec.sampler =
        check_string(pr, "search.sampler", r["sampler"], {"random", "sobol"}).value_or("random");
  if (spec.sampler == "sobol" && out.space.names.size() > SobolSequence::kMaxDimensions)
    pr.add("search.sampler",
           "sobol draws at most " + std::to_string(SobolSequence::kMaxDimensions) +
               " dimensions (GSL's Sobol sequence); expected a space of at most that many values "
               "(a per parameter counts one per index), got " +
               std::to_string(out.space.names.size()) + "; hint: use sampler: random");
  if (!r.contains("scheduler") || r["scheduler"].is_null())
    pr.add("search.scheduler", "required key missing; expected one of " + join(kSchedulers) +
                                   ", such as {successive_halving: {max_epochs: 9}}");
  else
    read_scheduler(pr, "search.scheduler", r["scheduler"], spec.schedule);
  read_mode(pr, r, spec);
  read_budget_keys(pr, r, spec);
  for (const auto& p : out.space.params) spec.parameters.push_back({p.name, p.kind_name(), p.log});
  out.sampled = spec.sampled;
  if (!spec.schedule.samples) out.epochs = static_cast<int>(spec.schedule.max_budget);
  out.epochs_path = "search.scheduler";
  if (!spec.sampled || pr.size() != before) return;
  spec.trials = fit_trials(pr, spec, spec.trials);
  out.digits = static_cast<int>(std::to_string(spec.trials == 0 ? 0 : spec.trials - 1).size());
  out.trials = out.space.draw(seed, spec.trials, spec.sampler);
}

When read_when(Problems& pr, const std::string& path, const Json& v, const SearchSpace& space,
               size_t earlier, const char* whose) {
  When when;
  if (!v.is_object() || v.empty()) {
    pr.add(path,
           "expected a mapping of parameters to a value or a list of values, such as "
           "{family: mlp}, got " +
               show(v));
    return when;
  }
  std::vector<std::string> known;
  for (size_t i = 0; i < earlier; ++i)
    if (space.params[i].per.empty()) known.push_back(space.params[i].name);
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string p = child_path(path, it.key());
    const auto k = std::find(known.begin(), known.end(), it.key());
    if (k == known.end()) {
      pr.add(p, "when names an unknown parameter '" + it.key() + "'; expected one of " +
                    (known.empty() ? std::string("none (there is no parameter ") + whose + ")"
                                   : std::string("the parameters ") + whose + ": " + join(known)) +
                    near_miss(it.key(), known));
      continue;
    }
    const SpaceParameter& sp = *space.find(it.key());
    std::vector<Json> values;
    if (it.value().is_array())
      values.assign(it.value().begin(), it.value().end());
    else
      values.push_back(it.value());
    for (const Json& x : values)
      if (!sp.can_take(x))
        pr.add(
            p,
            "when names a value " + show(x) + " that parameter '" + sp.name +
                "' never takes; expected one of its values (" + std::string(sp.kind_name()) + " " +
                (sp.kind == SpaceParameter::Kind::kChoice || sp.kind == SpaceParameter::Kind::kFixed
                     ? show(sp.values)
                     : "[" + number_text(sp.lo) + ", " + number_text(sp.hi) + "]") +
                ")");
    when.emplace_back(it.key(), std::move(values));
  }
  return when;
}

}  // namespace plan_detail

Json SearchSpec::to_json() const {
  const char* kinds[] = {"none", "successive_halving", "median_stopping"};
  const SearchSchedule& s = schedule;
  const std::string unit = s.samples ? "_samples" : "_epochs";
  Json c = Json::object({{"max" + unit, s.max_budget}});
  if (s.kind != SearchSchedule::Kind::kNone) c["min" + unit] = s.min_budget;
  if (s.kind == SearchSchedule::Kind::kMedian)
    c[s.samples ? "interval_samples" : "interval"] = s.interval;
  if (s.kind == SearchSchedule::Kind::kHalving) {
    c["reduction_factor"] = s.reduction_factor;
    c["brackets"] = s.brackets;
  }
  // The trials themselves are the plan's models (each with its drawn `parameters:`), so the
  // space, the sampler and the number of trials are not repeated: this form loads back to the
  // same trials, and a change to any of them changes the models' text.
  Json j = Json::object({{"scheduler", {{kinds[static_cast<int>(s.kind)], c}}},
                         {"metric", metric},
                         {"mode", higher_is_better ? "max" : "min"}});
  if (max_total_epochs > 0) j["max_total_epochs"] = max_total_epochs;
  if (time_limit_seconds > 0) j["time_limit"] = time_limit_seconds;
  return j;
}

}  // namespace nnfleet
