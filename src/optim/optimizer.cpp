// Optimizers: config parsing and the Keras 3 update rules (keras/src/optimizers/*.py) as flat
// loops. One step is, in Keras's order (BaseOptimizer._backend_apply_gradients): clip the
// gradients, apply weight decay p -= p * wd * lr, then the optimizer's update_step.
// Element-wise math is float like Keras's float32 variables; the bias-correction scalars and the
// clipping norms are computed in double.
#include "optim/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace nnfleet {
namespace {

struct NamedOpt {
  const char* cls;
  OptKind kind;
};

const std::vector<NamedOpt>& table() {
  static const std::vector<NamedOpt> t = {
      {"SGD", OptKind::kSGD},         {"Adam", OptKind::kAdam},       {"AdamW", OptKind::kAdamW},
      {"RMSprop", OptKind::kRMSprop}, {"Adagrad", OptKind::kAdagrad},
  };
  return t;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string name_list() {
  std::string s;
  for (const auto& n : optimizer_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

double get_range(LayerConfig& c, const std::string& key, double def, double lo, double hi,
                 bool lo_open, bool hi_open, const std::string& what) {
  const double v = c.get_float(key, def);
  if ((lo_open ? !(v > lo) : !(v >= lo)) || (hi_open ? !(v < hi) : !(v <= hi))) c.fail(key, what);
  return v;
}

// Keys Keras writes into optimizer configs that nnfleet accepts only at their defaults.
void keras_defaults(LayerConfig& c) {
  if (c.mode() != ConfigMode::kKeras) return;
  c.ignore("jit_compile");   // an XLA switch, no effect on the math
  c.ignore("ema_momentum");  // meaningful only with use_ema
  if (c.get_bool("use_ema", false)) c.fail("use_ema", "false (EMA of weights is not supported)");
  if (c.get_bool("is_legacy_optimizer", false))
    c.fail("is_legacy_optimizer", "false (legacy tf.keras optimizers are not supported)");
  if (c.has("decay") && c.get_float("decay") != 0.0)
    c.fail("decay", "0 or null (Keras 3 ignores `decay`; use a constant learning rate)");
  c.ignore("decay");
  if (c.has("ema_overwrite_frequency")) c.fail("ema_overwrite_frequency", "null");
  c.ignore("ema_overwrite_frequency");
  if (c.has("loss_scale_factor") && c.get_float("loss_scale_factor") != 1.0)
    c.fail("loss_scale_factor", "null (loss scaling is not supported)");
  c.ignore("loss_scale_factor");
  if (c.has("gradient_accumulation_steps"))
    c.fail("gradient_accumulation_steps", "null (gradient accumulation is not supported)");
  c.ignore("gradient_accumulation_steps");
}

// Number of state slots, in optimizer_state_slots() order.
size_t slot_count(const OptimizerSpec& s) { return optimizer_state_slots(s).size(); }

}  // namespace

// Keras's per-variable clip_by_norm and global clip_by_global_norm, and element-wise clipvalue.
void clip_gradients(const OptimizerSpec& s, size_t n, float* g, const std::vector<VarRange>& vars) {
  auto norm = [&](size_t off, size_t len) {
    double ss = 0;
    for (size_t i = off; i < off + len; ++i) ss += static_cast<double>(g[i]) * g[i];
    return std::sqrt(ss);
  };
  auto scale = [&](size_t off, size_t len, double f) {
    const float ff = static_cast<float>(f);
    for (size_t i = off; i < off + len; ++i) g[i] *= ff;
  };
  if (s.clipnorm > 0) {
    // values * clipnorm / max(l2norm, clipnorm)
    auto one = [&](size_t off, size_t len) {
      const double l2 = norm(off, len);
      if (l2 > s.clipnorm) scale(off, len, s.clipnorm / l2);
    };
    if (vars.empty()) {
      one(0, n);
    } else {
      for (const VarRange& v : vars) {
        NNFLEET_DCHECK(v.offset + v.size <= n);
        one(v.offset, v.size);
      }
    }
  } else if (s.global_clipnorm > 0) {
    double ss = 0;
    if (vars.empty()) {
      ss = norm(0, n) * norm(0, n);
    } else {
      for (const VarRange& v : vars) {
        const double l = norm(v.offset, v.size);
        ss += l * l;
      }
    }
    const double l2 = std::sqrt(ss);
    if (!std::isfinite(l2)) {
      scale(0, n, std::nan(""));  // Keras: a non-finite norm makes every gradient NaN
    } else if (l2 > s.global_clipnorm) {
      if (vars.empty()) {
        scale(0, n, s.global_clipnorm / l2);
      } else {
        for (const VarRange& v : vars) scale(v.offset, v.size, s.global_clipnorm / l2);
      }
    }
  } else if (s.clipvalue > 0) {
    const float c = static_cast<float>(s.clipvalue);
    for (size_t i = 0; i < n; ++i) g[i] = std::min(std::max(g[i], -c), c);
  }
}

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : table()) v.push_back(e.cls);
    return v;
  }();
  return names;
}

std::string optimizer_class(OptKind k) {
  for (const auto& e : table())
    if (e.kind == k) return e.cls;
  return "Adam";
}

OptimizerSpec parse_optimizer(const Json& j) {
  const auto [name, config, mode] = split_keras_object(j, "optimizer", "optimizer");
  // Keras looks built-in optimizers up case-insensitively ("adam", "Adam", "ADAM").
  const NamedOpt* found = nullptr;
  for (const auto& e : table())
    if (lower(name) == lower(e.cls)) found = &e;
  if (!found) {
    std::vector<std::string> lowered;  // the near miss as case-blind as the lookup
    for (const auto& e : table()) lowered.push_back(lower(e.cls));
    throw ConfigError(
        "optimizer",
        "unknown optimizer " + j.dump() + "; expected one of " + name_list() +
            (near_miss(name, optimizer_names()).empty() ? near_miss(lower(name), lowered)
                                                        : near_miss(name, optimizer_names())));
  }

  OptimizerSpec s;
  s.kind = found->kind;
  LayerConfig c(config, mode, found->cls);
  const double kInf = INFINITY;
  const double def_lr = s.kind == OptKind::kSGD ? 0.01 : 0.001;
  if (const Json* lr = c.get_raw("learning_rate"); lr && lr->is_object()) {
    if (!is_lr_schedule(*lr)) {
      std::string names;
      for (const auto& n : lr_schedule_names()) names += (names.empty() ? "" : ", ") + n;
      c.fail("learning_rate", "a number > 0 or a learning-rate schedule (" + names + ")");
    }
    s.schedule = parse_lr_schedule(*lr);
    s.learning_rate = lr_at(*s.schedule, 0);
  } else {
    s.learning_rate = get_range(c, "learning_rate", def_lr, 0, kInf, true, false, "a number > 0");
  }
  s.weight_decay = get_range(c, "weight_decay", s.kind == OptKind::kAdamW ? 0.004 : 0.0, 0, kInf,
                             false, false, "a number >= 0");
  s.clipnorm = get_range(c, "clipnorm", 0.0, 0, kInf, false, false, "a number >= 0");
  s.global_clipnorm = get_range(c, "global_clipnorm", 0.0, 0, kInf, false, false, "a number >= 0");
  s.clipvalue = get_range(c, "clipvalue", 0.0, 0, kInf, false, false, "a number >= 0");
  const int nclip = (s.clipnorm > 0) + (s.global_clipnorm > 0) + (s.clipvalue > 0);
  if (nclip > 1)
    throw ConfigError(s.clipnorm > 0 ? "clipnorm" : "global_clipnorm",
                      "only one of clipnorm, global_clipnorm and clipvalue can be set; expected "
                      "one, got " +
                          std::to_string(nclip));
  switch (s.kind) {
    case OptKind::kSGD:
      s.momentum = get_range(c, "momentum", 0.0, 0, 1, false, false, "a number in [0, 1]");
      s.nesterov = c.get_bool("nesterov", false);
      break;
    case OptKind::kAdam:
    case OptKind::kAdamW:
      s.beta_1 = get_range(c, "beta_1", 0.9, 0, 1, false, true, "a number in [0, 1)");
      s.beta_2 = get_range(c, "beta_2", 0.999, 0, 1, false, true, "a number in [0, 1)");
      s.epsilon = get_range(c, "epsilon", 1e-7, 0, kInf, false, false, "a number >= 0");
      s.amsgrad = c.get_bool("amsgrad", false);
      break;
    case OptKind::kRMSprop:
      s.rho = get_range(c, "rho", 0.9, 0, 1, false, false, "a number in [0, 1]");
      s.momentum = get_range(c, "momentum", 0.0, 0, 1, false, false, "a number in [0, 1]");
      s.epsilon = get_range(c, "epsilon", 1e-7, 0, kInf, false, false, "a number >= 0");
      s.centered = c.get_bool("centered", false);
      break;
    case OptKind::kAdagrad:
      s.initial_accumulator_value =
          get_range(c, "initial_accumulator_value", 0.1, 0, kInf, false, false, "a number >= 0");
      s.epsilon = get_range(c, "epsilon", 1e-7, 0, kInf, false, false, "a number >= 0");
      break;
  }
  keras_defaults(c);
  c.finish();
  return s;
}

Json optimizer_keras_config(const OptimizerSpec& s) {
  auto or_null = [](double v) { return v > 0 ? Json(v) : Json(nullptr); };
  // Keras's auto_name: to_snake_case of the class name.
  const char* name = "adam";
  switch (s.kind) {
    case OptKind::kSGD:
      name = "sgd";
      break;
    case OptKind::kAdam:
      name = "adam";
      break;
    case OptKind::kAdamW:
      name = "adam_w";
      break;
    case OptKind::kRMSprop:
      name = "rm_sprop";
      break;
    case OptKind::kAdagrad:
      name = "adagrad";
      break;
  }
  Json c = {
      {"name", name},
      {"learning_rate", s.schedule ? lr_schedule_keras_config(*s.schedule) : Json(s.learning_rate)},
      {"weight_decay", or_null(s.weight_decay)},
      {"clipnorm", or_null(s.clipnorm)},
      {"global_clipnorm", or_null(s.global_clipnorm)},
      {"clipvalue", or_null(s.clipvalue)},
      {"use_ema", false},
      {"ema_momentum", 0.99},
      {"ema_overwrite_frequency", nullptr},
      {"loss_scale_factor", nullptr},
      {"gradient_accumulation_steps", nullptr}};
  switch (s.kind) {
    case OptKind::kSGD:
      c["momentum"] = s.momentum;
      c["nesterov"] = s.nesterov;
      break;
    case OptKind::kAdam:
    case OptKind::kAdamW:
      c["beta_1"] = s.beta_1;
      c["beta_2"] = s.beta_2;
      c["epsilon"] = s.epsilon;
      c["amsgrad"] = s.amsgrad;
      break;
    case OptKind::kRMSprop:
      c["rho"] = s.rho;
      c["momentum"] = s.momentum;
      c["epsilon"] = s.epsilon;
      c["centered"] = s.centered;
      break;
    case OptKind::kAdagrad:
      c["initial_accumulator_value"] = s.initial_accumulator_value;
      c["epsilon"] = s.epsilon;
      break;
  }
  if (s.kind == OptKind::kAdamW) c["weight_decay"] = s.weight_decay;  // never null for AdamW
  return c;
}

std::vector<std::string> optimizer_state_slots(const OptimizerSpec& s) {
  switch (s.kind) {
    case OptKind::kSGD:
      if (s.momentum > 0) return {"momentum"};
      return {};
    case OptKind::kAdam:
    case OptKind::kAdamW:
      if (s.amsgrad) return {"momentum", "velocity", "velocity_hat"};
      return {"momentum", "velocity"};
    case OptKind::kRMSprop: {
      std::vector<std::string> v = {"velocity"};
      if (s.momentum > 0) v.push_back("momentum");
      if (s.centered) v.push_back("average_gradient");
      return v;
    }
    case OptKind::kAdagrad:
      return {"accumulator"};
  }
  return {};
}

size_t optimizer_state_floats(const OptimizerSpec& s, size_t n) { return slot_count(s) * n; }

void optimizer_init_state(const OptimizerSpec& s, size_t n, float* state) {
  const float v =
      s.kind == OptKind::kAdagrad ? static_cast<float>(s.initial_accumulator_value) : 0.0f;
  std::fill(state, state + optimizer_state_floats(s, n), v);
}

void optimizer_step(const OptimizerSpec& s, int64_t iteration, size_t n, float* p, float* g,
                    float* state, const std::vector<VarRange>& vars) {
  clip_gradients(s, n, g, vars);
  optimizer_update(s, iteration, n, p, g, state, 0, n);
}

// Every loop runs over [begin, end) only; state slot k of element i is state[k * n + i].
double learning_rate_at(const OptimizerSpec& s, int64_t iteration) {
  return s.schedule ? lr_at(*s.schedule, iteration) : s.learning_rate;
}

void optimizer_update(const OptimizerSpec& s, int64_t iteration, size_t n, float* p, float* g,
                      float* state, size_t begin, size_t end) {
  const double rate = learning_rate_at(s, iteration);
  const float lr = static_cast<float>(rate);
  if (s.weight_decay > 0) {
    const float wd = static_cast<float>(s.weight_decay);
    for (size_t i = begin; i < end; ++i) p[i] -= p[i] * wd * lr;
  }
  switch (s.kind) {
    case OptKind::kSGD: {
      if (s.momentum > 0) {
        // m = momentum m - lr g; p += m (nesterov: p += momentum m - lr g).
        float* m = state;
        const float mu = static_cast<float>(s.momentum);
        for (size_t i = begin; i < end; ++i) {
          m[i] = m[i] * mu - g[i] * lr;
          p[i] += s.nesterov ? m[i] * mu - g[i] * lr : m[i];
        }
      } else {
        for (size_t i = begin; i < end; ++i) p[i] -= g[i] * lr;
      }
      return;
    }
    case OptKind::kAdam:
    case OptKind::kAdamW: {
      // alpha = lr sqrt(1 - b2^t) / (1 - b1^t), t = iteration + 1;
      // m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); [vhat = max(vhat, v); v = vhat]
      // p -= alpha m / (sqrt(v) + eps).
      const double t = static_cast<double>(iteration + 1);
      const float alpha = static_cast<float>(rate * std::sqrt(1 - std::pow(s.beta_2, t)) /
                                             (1 - std::pow(s.beta_1, t)));
      const float c1 = static_cast<float>(1 - s.beta_1), c2 = static_cast<float>(1 - s.beta_2);
      const float eps = static_cast<float>(s.epsilon);
      // Separate loops without aliasing so the compiler vectorizes them (this loop streams four
      // arrays the size of the model every step).
      float* __restrict m = state;
      float* __restrict v = state + n;
      float* __restrict pp = p;
      const float* __restrict gg = g;
      if (!s.amsgrad) {
        for (size_t i = begin; i < end; ++i) {
          m[i] += (gg[i] - m[i]) * c1;
          v[i] += (gg[i] * gg[i] - v[i]) * c2;
          pp[i] -= m[i] * alpha / (std::sqrt(v[i]) + eps);
        }
        return;
      }
      float* __restrict vhat = state + 2 * n;
      for (size_t i = begin; i < end; ++i) {
        m[i] += (gg[i] - m[i]) * c1;
        v[i] += (gg[i] * gg[i] - v[i]) * c2;
        vhat[i] = std::max(vhat[i], v[i]);
        pp[i] -= m[i] * alpha / (std::sqrt(vhat[i]) + eps);
      }
      return;
    }
    case OptKind::kRMSprop: {
      // vel = rho vel + (1 - rho) g^2; [ag = rho ag + (1 - rho) g; denom = vel - ag^2 + eps]
      // inc = lr g / sqrt(denom); [mom = momentum mom + inc; p -= mom] or p -= inc.
      const float rho = static_cast<float>(s.rho), c = static_cast<float>(1 - s.rho);
      const float eps = static_cast<float>(s.epsilon), mu = static_cast<float>(s.momentum);
      float* vel = state;
      float* mom = s.momentum > 0 ? state + n : nullptr;
      float* ag = s.centered ? state + (s.momentum > 0 ? 2 : 1) * n : nullptr;
      for (size_t i = begin; i < end; ++i) {
        vel[i] = rho * vel[i] + c * (g[i] * g[i]);
        float denom;
        if (ag) {
          ag[i] = rho * ag[i] + c * g[i];
          denom = vel[i] - ag[i] * ag[i] + eps;
        } else {
          denom = vel[i] + eps;
        }
        const float inc = lr * g[i] / std::sqrt(denom);
        if (mom) {
          mom[i] = mu * mom[i] + inc;
          p[i] -= mom[i];
        } else {
          p[i] -= inc;
        }
      }
      return;
    }
    case OptKind::kAdagrad: {
      // acc += g^2; p -= lr g / sqrt(acc + eps).
      const float eps = static_cast<float>(s.epsilon);
      float* acc = state;
      for (size_t i = begin; i < end; ++i) {
        acc[i] += g[i] * g[i];
        p[i] -= lr * g[i] / std::sqrt(acc[i] + eps);
      }
      return;
    }
  }
}

}  // namespace nnfleet
