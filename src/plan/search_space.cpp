// A search space's distributions: each read and checked, drawn (random or Sobol) and mapped from
// u in [0, 1) to a value.
#include "plan/search_space.h"

#include <gsl/gsl_qrng.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/limits.h"
#include "plan/plan_yaml.h"
#include "tensor/rng.h"

namespace nnfleet::plan_detail {

const std::vector<std::string> kDistributionKeys = {
    "choice", "fixed", "float", "int", "log", "loguniform", "per", "step", "uniform", "when"};

namespace {

const std::vector<std::string> kForms = {"uniform", "loguniform", "float",
                                         "int",     "choice",     "fixed"};
constexpr double kTwo30 = 1073741824.0;  // GSL's Sobol points have 30 bits

// A range [lo, hi] at `path`: two numbers (integers for `integer`); false after reporting.
bool read_range(Problems& pr, const std::string& path, const Json& v, bool integer, double& lo,
                double& hi) {
  const char* what = integer ? "[lo, hi], two integers" : "[lo, hi], two numbers";
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number()) {
    pr.add(path, std::string("expected ") + what + ", got " + show(v));
    return false;
  }
  lo = v[0].get<double>();
  hi = v[1].get<double>();
  const double kMax = static_cast<double>(limits::kMaxConfigInt);
  if (!std::isfinite(lo) || !std::isfinite(hi) ||
      (integer && (lo != std::floor(lo) || hi != std::floor(hi) || std::fabs(lo) > kMax ||
                   std::fabs(hi) > kMax))) {
    pr.add(path, std::string("expected ") + what +
                     (integer ? " of at most " + std::to_string(limits::kMaxConfigInt) : "") +
                     ", got " + show(v));
    return false;
  }
  if (integer ? lo > hi : lo >= hi) {
    pr.add(path, std::string("empty range; expected lo ") + (integer ? "<=" : "<") + " hi, got " +
                     show(v));
    return false;
  }
  return true;
}

// choice: a non-empty list of scalars.
bool read_choice(Problems& pr, const std::string& path, const Json& v, SpaceParameter& p) {
  if (!v.is_array() || v.empty()) {
    pr.add(path, std::string(v.is_array() ? "empty choice; " : "") +
                     "expected a non-empty list of values, got " + show(v));
    return false;
  }
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].is_structured() || v[i].is_null()) {
      pr.add(index_path(path, i), "expected a value (a string, number or bool), got " + show(v[i]));
      return false;
    }
  p.kind = SpaceParameter::Kind::kChoice;
  p.values = v;
  return true;
}

// log and step, on float and int ranges only.
bool read_modifiers(Problems& pr, const std::string& path, const Json& v, const std::string& form,
                    SpaceParameter& p) {
  const bool range = p.kind == SpaceParameter::Kind::kFloat || p.kind == SpaceParameter::Kind::kInt;
  bool ok = true;
  for (const char* k : {"log", "step"})
    if (v.contains(k) && !range) {
      pr.add(child_path(path, k), std::string(k) + " applies to uniform, loguniform, float and " +
                                      "int ranges; expected no " + k + " with " + form);
      ok = false;
    }
  if (!ok) return false;
  if (v.contains("log")) {
    const auto log = check_bool(pr, child_path(path, "log"), v["log"]);
    if (!log) return false;
    if (form == "loguniform" && !*log) {
      pr.add(child_path(path, "log"), "loguniform is drawn on a log scale; expected no log: false");
      return false;
    }
    p.log = p.log || *log;
  }
  if (v.contains("step")) {
    const std::string sp = child_path(path, "step");
    const bool integer = p.kind == SpaceParameter::Kind::kInt;
    std::optional<double> step;
    if (!integer)
      step = check_number(pr, sp, v["step"], 0, true, INFINITY, true, "a step > 0");
    else if (const auto s = check_int(pr, sp, v["step"], 1))
      step = static_cast<double>(*s);
    if (!step) return false;
    if (p.log) {
      pr.add(sp, "step and log are exclusive; expected one of them");
      return false;
    }
    p.step = *step;
  }
  if (p.log && p.lo <= 0) {
    pr.add(child_path(path, form),
           "a log range cannot pass through zero or negative values; "
           "expected lo > 0, got " +
               show(v[form]));
    return false;
  }
  return true;
}

// Text of %.12g read back: lo + k * step without the float noise of the multiplication
// (0.1 * 3 = 0.30000000000000004 becomes 0.3).
double clean(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return std::strtod(buf, nullptr);
}

// floor(u * n) for u in [0, 1), at most n - 1 (u * n may round up to n).
int64_t index_of(double u, double n) {
  return std::min(static_cast<int64_t>(n) - 1, static_cast<int64_t>(std::floor(u * n)));
}

}  // namespace

bool same_value(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

bool SpaceParameter::can_take(const Json& v) const {
  if (!checked) return true;
  switch (kind) {
    case Kind::kFixed:
      return same_value(v, values);
    case Kind::kChoice:
      return std::any_of(values.begin(), values.end(),
                         [&](const Json& c) { return same_value(v, c); });
    case Kind::kInt:
      return v.is_number() && v.get<double>() == std::floor(v.get<double>()) &&
             v.get<double>() >= lo && v.get<double>() <= hi;
    case Kind::kFloat:
      return v.is_number() && v.get<double>() >= lo && v.get<double>() <= hi;
  }
  return false;
}

const char* SpaceParameter::kind_name() const {
  switch (kind) {
    case Kind::kFloat:
      return "float";
    case Kind::kInt:
      return "int";
    case Kind::kChoice:
      return "choice";
    case Kind::kFixed:
      return "fixed";
  }
  return "fixed";
}

std::optional<SpaceParameter> read_distribution(Problems& pr, const std::string& path,
                                                const std::string& name, const Json& v) {
  if (!v.is_object()) {
    pr.add(path,
           "expected a distribution such as {uniform: [0, 1]}, {int: [1, 8]} or {choice: "
           "[a, b]}, got " +
               show(v));
    return std::nullopt;
  }
  check_keys(pr, path, v, kDistributionKeys);
  std::vector<std::string> forms;
  for (const auto& f : kForms)
    if (v.contains(f)) forms.push_back(f);
  if (forms.size() != 1) {
    pr.add(path, std::string(forms.empty() ? "no distribution"
                                           : "several distributions (" + join(forms) + ")") +
                     "; expected exactly one of " + join(kForms));
    return std::nullopt;
  }
  const std::string& form = forms[0];
  const std::string fp = child_path(path, form);
  SpaceParameter p;
  p.name = name;
  p.path = path;
  if (form == "fixed") {
    p.kind = SpaceParameter::Kind::kFixed;
    p.values = v[form];
  } else if (form == "choice") {
    if (!read_choice(pr, fp, v[form], p)) return std::nullopt;
  } else {
    p.kind = form == "int" ? SpaceParameter::Kind::kInt : SpaceParameter::Kind::kFloat;
    p.log = form == "loguniform";
    if (!read_range(pr, fp, v[form], form == "int", p.lo, p.hi)) return std::nullopt;
  }
  if (!read_modifiers(pr, path, v, form, p)) return std::nullopt;
  return p;
}

Json value_at(const SpaceParameter& p, double u) {
  using Kind = SpaceParameter::Kind;
  if (p.kind == Kind::kFixed) return p.values;
  if (p.kind == Kind::kChoice)
    return p.values[static_cast<size_t>(index_of(u, static_cast<double>(p.values.size())))];
  if (p.step > 0) {
    const double n = std::floor((p.hi - p.lo) / p.step + 1e-9) + 1;
    const double x = p.lo + static_cast<double>(index_of(u, n)) * p.step;
    if (p.kind == Kind::kInt) return static_cast<int64_t>(x);
    return std::min(p.hi, clean(x));
  }
  if (p.kind == Kind::kInt) {
    if (!p.log) return static_cast<int64_t>(p.lo) + index_of(u, p.hi - p.lo + 1);
    const double x =
        std::floor(std::exp(std::log(p.lo) + u * (std::log(p.hi + 1) - std::log(p.lo))));
    return static_cast<int64_t>(std::clamp(x, p.lo, p.hi));
  }
  const double x = p.log ? std::exp(std::log(p.lo) + u * (std::log(p.hi) - std::log(p.lo)))
                         : p.lo + u * (p.hi - p.lo);
  return std::clamp(x, p.lo, p.hi);
}

double random_u(uint64_t seed, size_t trial, const std::string& name) {
  Rng rng(seed, "trial/" + std::to_string(trial), "param/" + name);
  return rng.uniform_double();
}

SobolSequence::SobolSequence(uint64_t seed, size_t dimensions)
    : q_(nullptr), shift_(dimensions), point_(dimensions) {
  // gsl_qrng_alloc calls GSL's error handler (which aborts) past its limits: checked here.
  NNFLEET_CHECK(dimensions >= 1 && dimensions <= kMaxDimensions);
  q_ = gsl_qrng_alloc(gsl_qrng_sobol, static_cast<unsigned>(dimensions));
  NNFLEET_CHECK(q_ != nullptr);
  for (size_t d = 0; d < dimensions; ++d) {
    Rng rng(seed, "sobol", "dim/" + std::to_string(d));
    shift_[d] = static_cast<uint32_t>(rng.next() >> 34);  // 30 bits
  }
}

SobolSequence::~SobolSequence() { gsl_qrng_free(static_cast<gsl_qrng*>(q_)); }

const std::vector<double>& SobolSequence::next() {
  // GSL's first point is the one after the origin (0.5, 0.5, ...): point 1.
  gsl_qrng_get(static_cast<gsl_qrng*>(q_), point_.data());
  for (size_t d = 0; d < point_.size(); ++d) {
    const auto bits = static_cast<uint32_t>(point_[d] * kTwo30);  // exact: 30-bit numerators
    point_[d] = static_cast<double>(bits ^ shift_[d]) / kTwo30;
  }
  return point_;
}

void SearchSpace::add(SpaceParameter p) {
  p.dimension = names.size();
  if (p.per.empty()) {
    names.push_back(p.name);
  } else {
    for (size_t i = 0; i < p.per_max; ++i) names.push_back(p.name + "_" + std::to_string(i));
  }
  params.push_back(std::move(p));
}

const SpaceParameter* SearchSpace::find(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

const Json* SearchSpace::value(const Trial& t, const std::string& name) const {
  for (const auto& [d, v] : t)
    if (names[d] == name) return &v;
  return nullptr;
}

bool SearchSpace::holds(const When& when, const Trial& t) const {
  for (const auto& [name, allowed] : when) {
    const Json* v = value(t, name);
    if (!v || std::none_of(allowed.begin(), allowed.end(),
                           [&](const Json& a) { return same_value(*v, a); }))
      return false;
  }
  return true;
}

Parameters SearchSpace::named(const Trial& t) const {
  Parameters out;
  out.reserve(t.size());
  for (const auto& [d, v] : t) out.emplace_back(names[d], v);
  return out;
}

std::vector<Trial> SearchSpace::draw(uint64_t seed, size_t n, const std::string& sampler) const {
  std::vector<Trial> out(n);
  std::optional<SobolSequence> sobol;
  if (sampler == "sobol") sobol.emplace(seed, names.size());
  for (size_t k = 0; k < n; ++k) {
    const std::vector<double>* point = sobol ? &sobol->next() : nullptr;
    Trial& t = out[k];
    auto draw_one = [&](const SpaceParameter& p, size_t d) {
      const double u = point ? (*point)[d] : random_u(seed, k, names[d]);
      t.emplace_back(static_cast<uint32_t>(d), value_at(p, u));
    };
    for (const auto& p : params) {
      if (!holds(p.when, t)) continue;
      if (p.per.empty()) {
        draw_one(p, p.dimension);
        continue;
      }
      const Json* count = value(t, p.per);
      if (!count) continue;  // its count was not drawn: neither is it
      const auto c = std::min<size_t>(p.per_max, static_cast<size_t>(count->get<int64_t>()));
      for (size_t i = 0; i < c; ++i) draw_one(p, p.dimension + i);
    }
    t.shrink_to_fit();
  }
  return out;
}

Json sample_one(uint64_t seed, size_t trial, const std::string& name, const Json& d,
                const std::string& sampler, size_t dimension) {
  const std::string head = "failed to sample parameter '" + name + "': ";
  if (name.empty()) throw UsageError(head + "empty name; expected the parameter's name");
  if (sampler != "random" && sampler != "sobol")
    throw UsageError(head + "unknown sampler '" + sampler + "'; expected random or sobol");
  if (sampler == "sobol" && dimension >= SobolSequence::kMaxDimensions)
    throw UsageError(head + "sobol draws at most " + std::to_string(SobolSequence::kMaxDimensions) +
                     " dimensions; expected a dimension below that, got " +
                     std::to_string(dimension));
  for (const char* k : {"when", "per"})
    if (d.is_object() && d.contains(k))
      throw UsageError(head + k +
                       " applies in a plan's search.space; expected a distribution "
                       "alone, such as {\"uniform\": [0, 1]}");
  const std::map<std::string, int> no_lines;
  Problems pr = Problems::recorder("", no_lines);
  const std::optional<SpaceParameter> p = read_distribution(pr, name, name, d);
  const std::vector<Problems::Call> calls = pr.take_calls();
  if (!calls.empty() || !p) {
    std::string why;
    for (const auto& c : calls) why += (why.empty() ? "" : "; and ") + c.path + ": " + c.message;
    throw UsageError(head + why);
  }
  if (sampler == "random") return value_at(*p, random_u(seed, trial, name));
  SobolSequence sobol(seed, dimension + 1);
  for (size_t k = 0; k < trial; ++k) sobol.next();
  return value_at(*p, sobol.next()[dimension]);
}

}  // namespace nnfleet::plan_detail
