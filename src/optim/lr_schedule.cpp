// Keras's learning-rate schedules: parsing their configs and the rate at each step. The formulas
// follow keras/src/optimizers/schedules/learning_rate_schedule.py; they are computed in double
// (Keras computes them in the initial rate's float32, which differs by at most 1 ulp of float).
#include "optim/lr_schedule.h"

#include <cmath>

namespace nnfleet {
namespace {

struct NamedSchedule {
  const char* cls;
  LrScheduleKind kind;
  const char* default_name;  // Keras's default `name`
};

const std::vector<NamedSchedule>& table() {
  static const std::vector<NamedSchedule> t = {
      {"ExponentialDecay", LrScheduleKind::kExponentialDecay, "ExponentialDecay"},
      {"PiecewiseConstantDecay", LrScheduleKind::kPiecewiseConstantDecay, "PiecewiseConstant"},
      {"InverseTimeDecay", LrScheduleKind::kInverseTimeDecay, "InverseTimeDecay"},
      {"PolynomialDecay", LrScheduleKind::kPolynomialDecay, "PolynomialDecay"},
      {"CosineDecay", LrScheduleKind::kCosineDecay, "CosineDecay"},
      {"CosineDecayRestarts", LrScheduleKind::kCosineDecayRestarts, "SGDRDecay"},
  };
  return t;
}

const NamedSchedule* find(const std::string& cls) {
  for (const auto& e : table())
    if (cls == e.cls) return &e;
  return nullptr;
}

std::string name_list() {
  std::string s;
  for (const auto& e : table()) s += (s.empty() ? "" : ", ") + std::string(e.cls);
  return s;
}

double positive(LayerConfig& c, const std::string& key, std::optional<double> def = {}) {
  const double v = c.get_float(key, def);
  if (!(v > 0) || !std::isfinite(v)) c.fail(key, "a number > 0");
  return v;
}

double non_negative(LayerConfig& c, const std::string& key, std::optional<double> def) {
  const double v = c.get_float(key, def);
  if (!(v >= 0) || !std::isfinite(v)) c.fail(key, "a number >= 0");
  return v;
}

std::vector<double> numbers(LayerConfig& c, const std::string& key) {
  const Json* j = c.get_raw(key);
  std::vector<double> out;
  if (!j || !j->is_array() || j->empty()) c.fail(key, "a non-empty list of numbers");
  for (const Json& v : *j) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) c.fail(key, "a list of finite numbers");
    out.push_back(v.get<double>());
  }
  return out;
}

void parse_piecewise(LayerConfig& c, LrSchedule& s) {
  s.boundaries = numbers(c, "boundaries");
  s.values = numbers(c, "values");
  for (size_t i = 1; i < s.boundaries.size(); ++i)
    if (!(s.boundaries[i] > s.boundaries[i - 1])) c.fail("boundaries", "strictly increasing steps");
  if (s.values.size() != s.boundaries.size() + 1)
    c.fail("values",
           "one more rate than boundaries (" + std::to_string(s.boundaries.size() + 1) + ")");
  for (double v : s.values)
    if (!(v >= 0)) c.fail("values", "rates >= 0");
}

void parse_fields(LayerConfig& c, LrSchedule& s) {
  if (s.kind == LrScheduleKind::kPiecewiseConstantDecay) {
    parse_piecewise(c, s);
    return;
  }
  s.initial = non_negative(c, "initial_learning_rate", std::nullopt);
  switch (s.kind) {
    case LrScheduleKind::kExponentialDecay:
    case LrScheduleKind::kInverseTimeDecay:
      s.decay_steps = positive(c, "decay_steps");
      s.decay_rate = non_negative(c, "decay_rate", std::nullopt);
      s.staircase = c.get_bool("staircase", false);
      break;
    case LrScheduleKind::kPolynomialDecay:
      s.decay_steps = positive(c, "decay_steps");
      s.end_learning_rate = non_negative(c, "end_learning_rate", 1e-4);
      s.power = non_negative(c, "power", 1.0);
      s.cycle = c.get_bool("cycle", false);
      break;
    case LrScheduleKind::kCosineDecay:
      s.decay_steps = positive(c, "decay_steps");
      s.alpha = non_negative(c, "alpha", 0.0);
      if (c.has("warmup_target")) s.warmup_target = positive(c, "warmup_target");
      s.warmup_steps = non_negative(c, "warmup_steps", 0.0);
      if (s.warmup_target && !(s.warmup_steps > 0))
        c.fail("warmup_steps", "a number > 0 when warmup_target is set");
      if (!c.has("warmup_target")) c.ignore("warmup_target");
      break;
    case LrScheduleKind::kCosineDecayRestarts:
      s.decay_steps = positive(c, "first_decay_steps");
      s.t_mul = positive(c, "t_mul", 2.0);
      s.m_mul = non_negative(c, "m_mul", 1.0);
      s.alpha = non_negative(c, "alpha", 0.0);
      break;
    case LrScheduleKind::kPiecewiseConstantDecay:
      break;
  }
}

double cosine_at(const LrSchedule& s, double step) {
  auto decay = [&](double t, double from) {
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * (t / s.decay_steps)));
    return from * ((1 - s.alpha) * cosine + s.alpha);
  };
  if (!s.warmup_target) return decay(std::min(step, s.decay_steps), s.initial);
  step = std::min(step, s.decay_steps + s.warmup_steps);
  if (step < s.warmup_steps)
    return (*s.warmup_target - s.initial) * (step / s.warmup_steps) + s.initial;
  return decay(step - s.warmup_steps, *s.warmup_target);
}

double restarts_at(const LrSchedule& s, double step) {
  double fraction = step / s.decay_steps, i_restart = 0;
  if (s.t_mul == 1.0) {
    i_restart = std::floor(fraction);
    fraction -= i_restart;
  } else {
    i_restart = std::floor(std::log(1.0 - fraction * (1.0 - s.t_mul)) / std::log(s.t_mul));
    const double sum_r = (1.0 - std::pow(s.t_mul, i_restart)) / (1.0 - s.t_mul);
    fraction = (fraction - sum_r) / std::pow(s.t_mul, i_restart);
  }
  const double cosine = 0.5 * std::pow(s.m_mul, i_restart) * (1.0 + std::cos(M_PI * fraction));
  return s.initial * ((1 - s.alpha) * cosine + s.alpha);
}

}  // namespace

double lr_at(const LrSchedule& s, int64_t step_count) {
  const double step = static_cast<double>(step_count);
  switch (s.kind) {
    case LrScheduleKind::kExponentialDecay: {
      const double p = s.staircase ? std::floor(step / s.decay_steps) : step / s.decay_steps;
      return s.initial * std::pow(s.decay_rate, p);
    }
    case LrScheduleKind::kPiecewiseConstantDecay: {
      size_t i = 0;
      while (i < s.boundaries.size() && step > s.boundaries[i]) ++i;
      return s.values[i];
    }
    case LrScheduleKind::kInverseTimeDecay: {
      const double p = s.staircase ? std::floor(step / s.decay_steps) : step / s.decay_steps;
      return s.initial / (1.0 + s.decay_rate * p);
    }
    case LrScheduleKind::kPolynomialDecay: {
      double steps = s.decay_steps, t = step;
      if (s.cycle)
        steps *= step == 0 ? 1.0 : std::ceil(step / s.decay_steps);
      else
        t = std::min(step, s.decay_steps);
      return (s.initial - s.end_learning_rate) * std::pow(1.0 - t / steps, s.power) +
             s.end_learning_rate;
    }
    case LrScheduleKind::kCosineDecay:
      return cosine_at(s, step);
    case LrScheduleKind::kCosineDecayRestarts:
      return restarts_at(s, step);
  }
  return s.initial;
}

bool is_lr_schedule(const Json& j) {
  if (!j.is_object()) return false;
  if (j.contains("class_name")) return j["class_name"].is_string() && find(j["class_name"]);
  return j.size() == 1 && find(j.begin().key()) != nullptr;
}

LrSchedule parse_lr_schedule(const Json& j) {
  const auto [cls, config, mode] = split_keras_object(j, "learning_rate", "learning-rate schedule");
  const NamedSchedule* e = find(cls);
  if (!e)
    throw ConfigError("learning_rate", "unknown learning-rate schedule '" + cls +
                                           "'; expected a number or one of " + name_list());
  LrSchedule s;
  s.kind = e->kind;
  LayerConfig c(config, mode, cls);
  s.name = c.has("name") ? c.get_string("name") : std::string(e->default_name);
  if (!c.has("name")) c.ignore("name");
  parse_fields(c, s);
  c.finish();
  return s;
}

Json lr_schedule_keras_config(const LrSchedule& s) {
  Json c = Json::object();
  switch (s.kind) {
    case LrScheduleKind::kExponentialDecay:
    case LrScheduleKind::kInverseTimeDecay:
      c = {{"initial_learning_rate", s.initial},
           {"decay_steps", s.decay_steps},
           {"decay_rate", s.decay_rate},
           {"staircase", s.staircase},
           {"name", s.name}};
      break;
    case LrScheduleKind::kPiecewiseConstantDecay:
      c = {{"boundaries", s.boundaries}, {"values", s.values}, {"name", s.name}};
      break;
    case LrScheduleKind::kPolynomialDecay:
      c = {{"initial_learning_rate", s.initial},
           {"decay_steps", s.decay_steps},
           {"end_learning_rate", s.end_learning_rate},
           {"power", s.power},
           {"cycle", s.cycle},
           {"name", s.name}};
      break;
    case LrScheduleKind::kCosineDecay:
      c = {{"initial_learning_rate", s.initial},
           {"decay_steps", s.decay_steps},
           {"alpha", s.alpha},
           {"name", s.name},
           {"warmup_target", s.warmup_target ? Json(*s.warmup_target) : Json(nullptr)},
           {"warmup_steps", s.warmup_steps}};
      break;
    case LrScheduleKind::kCosineDecayRestarts:
      c = {{"initial_learning_rate", s.initial},
           {"first_decay_steps", s.decay_steps},
           {"t_mul", s.t_mul},
           {"m_mul", s.m_mul},
           {"alpha", s.alpha},
           {"name", s.name}};
      break;
  }
  std::string cls = "ExponentialDecay";
  for (const auto& e : table())
    if (e.kind == s.kind) cls = e.cls;
  return {{"module", "keras.optimizers.schedules"},
          {"class_name", cls},
          {"config", c},
          {"registered_name", nullptr}};
}

const std::vector<std::string>& lr_schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : table()) v.push_back(e.cls);
    return v;
  }();
  return names;
}

}  // namespace nnfleet
