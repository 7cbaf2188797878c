// Regularizer and constraint specs and their math (see regularizer.h).
#include "optim/regularizer.h"

#include <algorithm>
#include <cmath>

namespace nnfleet {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A factor: a finite number >= 0 (Keras's validate_float_arg).
double factor(const Json& cfg, const char* k, double def, const std::string& key) {
  if (!cfg.contains(k) || cfg[k].is_null()) return def;
  const Json& v = cfg[k];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    throw ConfigError(key, key + ": regularizer factor '" + std::string(k) +
                               "' must be a finite number >= 0; expected e.g. 0.01, got " +
                               show(v));
  return v.get<double>();
}

double number(const Json& cfg, const char* k, double def, const std::string& key) {
  if (!cfg.contains(k) || cfg[k].is_null()) return def;
  if (!cfg[k].is_number() || !std::isfinite(cfg[k].get<double>()))
    throw ConfigError(key, key + ": constraint option '" + std::string(k) +
                               "' must be a finite number; got " + show(cfg[k]));
  return cfg[k].get<double>();
}

void check_keys(const Json& cfg, const std::vector<std::string>& allowed, const std::string& key,
                const std::string& cls) {
  for (auto it = cfg.begin(); it != cfg.end(); ++it)
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw ConfigError(key, key + ": unknown option '" + it.key() + "' of " + cls +
                                 "; expected one of " +
                                 (list.empty() ? std::string("(none)") : list));
    }
}

}  // namespace

Regularizer parse_regularizer_spec(const Json& v, const std::string& key) {
  const KerasObject o = split_keras_object(v, key, "regularizer");
  const std::string n = lower(o.name);
  Regularizer r;
  if (n == "l1") {
    check_keys(o.config, {"l1", "l"}, key, "L1");
    r.l1 = factor(o.config, o.config.contains("l") ? "l" : "l1", 0.01, key);
  } else if (n == "l2") {
    check_keys(o.config, {"l2", "l"}, key, "L2");
    r.l2 = factor(o.config, o.config.contains("l") ? "l" : "l2", 0.01, key);
  } else if (n == "l1l2" || n == "l1_l2") {
    check_keys(o.config, {"l1", "l2"}, key, "L1L2");
    // The bare name means l1_l2(): 0.01 each; the class's own defaults are 0.
    const double def = v.is_string() && n == "l1_l2" ? 0.01 : 0.0;
    r.l1 = factor(o.config, "l1", def, key);
    r.l2 = factor(o.config, "l2", def, key);
  } else if (n == "orthogonalregularizer" || n == "orthogonal_regularizer") {
    r.refusal =
        "the OrthogonalRegularizer penalty is not computed in training; expected L1, L2 "
        "or L1L2";
  } else {
    throw ConfigError(key, key + ": unknown regularizer '" + o.name +
                               "'; expected L1, L2 or L1L2 (or l1, l2, l1_l2), or null");
  }
  return r;
}

Json regularizer_to_keras(const Regularizer& r) {
  return Json{{"module", "keras.regularizers"},
              {"class_name", "L1L2"},
              {"config", {{"l1", r.l1}, {"l2", r.l2}}},
              {"registered_name", nullptr}};
}

double regularizer_penalty(const Regularizer& r, const float* x, size_t n) {
  double s1 = 0.0, s2 = 0.0;
  for (size_t i = 0; i < n; ++i) {
    s1 += std::fabs(static_cast<double>(x[i]));
    s2 += static_cast<double>(x[i]) * x[i];
  }
  return r.l1 * s1 + r.l2 * s2;
}

void regularizer_grad(const Regularizer& r, const float* x, float* g, size_t n, double scale) {
  const float a = static_cast<float>(scale * r.l1), b = static_cast<float>(2.0 * scale * r.l2);
  for (size_t i = 0; i < n; ++i) {
    const float s = x[i] > 0.0f ? 1.0f : (x[i] < 0.0f ? -1.0f : 0.0f);
    g[i] += a * s + b * x[i];
  }
}

Constraint parse_constraint_spec(const Json& v, const std::string& key) {
  const KerasObject o = split_keras_object(v, key, "constraint");
  std::string n = lower(o.name);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  Constraint c;
  auto axes = [&] {
    if (!o.config.contains("axis") || o.config["axis"].is_null()) return;
    const Json& a = o.config["axis"];
    c.axes.clear();
    for (const Json& e : a.is_array() ? a : Json::array({a})) {
      if (!e.is_number_integer() || std::abs(e.get<int64_t>()) > Shape::kMaxRank)
        throw ConfigError(
            key,
            key + ": constraint axis must be an integer or a list of integers; got " + show(a));
      c.axes.push_back(static_cast<int>(e.get<int64_t>()));
    }
    if (c.axes.empty())
      throw ConfigError(key, key + ": constraint axis list is empty; expected e.g. 0");
  };
  if (n == "maxnorm") {
    check_keys(o.config, {"max_value", "axis"}, key, "MaxNorm");
    c.kind = ConstraintKind::kMaxNorm;
    c.max_value = number(o.config, "max_value", 2.0, key);
    axes();
  } else if (n == "nonneg") {
    check_keys(o.config, {}, key, "NonNeg");
    c.kind = ConstraintKind::kNonNeg;
  } else if (n == "unitnorm") {
    check_keys(o.config, {"axis"}, key, "UnitNorm");
    c.kind = ConstraintKind::kUnitNorm;
    axes();
  } else if (n == "minmaxnorm") {
    check_keys(o.config, {"min_value", "max_value", "rate", "axis"}, key, "MinMaxNorm");
    c.kind = ConstraintKind::kMinMaxNorm;
    c.min_value = number(o.config, "min_value", 0.0, key);
    c.max_value = number(o.config, "max_value", 1.0, key);
    c.rate = number(o.config, "rate", 1.0, key);
    if (c.min_value < 0 || c.min_value > c.max_value)
      throw ConfigError(
          key, key + ": MinMaxNorm needs 0 <= min_value <= max_value; got " + show(o.config));
    axes();
  } else if (n == "radialconstraint") {
    c.refusal =
        "the RadialConstraint projection is not applied in training; expected MaxNorm, "
        "NonNeg, UnitNorm or MinMaxNorm";
  } else {
    throw ConfigError(key, key + ": unknown constraint '" + o.name +
                               "'; expected MaxNorm, NonNeg, UnitNorm or MinMaxNorm (or "
                               "max_norm, non_neg, unit_norm, min_max_norm), or null");
  }
  return c;
}

bool resolve_constraint_axes(Constraint& c, const Shape& shape) {
  for (int& a : c.axes) {
    if (a < 0) a += shape.rank();
    if (a < 0 || a >= shape.rank()) return false;
  }
  std::sort(c.axes.begin(), c.axes.end());
  c.axes.erase(std::unique(c.axes.begin(), c.axes.end()), c.axes.end());
  return true;
}

void apply_constraint(const Constraint& c, const Shape& shape, float* w) {
  const int64_t size = shape.size();
  if (c.kind == ConstraintKind::kNonNeg) {
    for (int64_t i = 0; i < size; ++i) w[i] = std::max(w[i], 0.0f);
    return;
  }
  // Split the axes into kept (k) and reduced (r) ones with their row-major strides; each kept
  // index owns one norm over its reduced elements. No buffer: the norm of one kept index is
  // computed, then applied, a strided walk each.
  int64_t stride[Shape::kMaxRank];
  for (int i = shape.rank() - 1, s = 1; i >= 0; --i) {
    stride[i] = s;
    s *= static_cast<int>(shape[i]);
  }
  int64_t kd[Shape::kMaxRank], ks[Shape::kMaxRank], rd[Shape::kMaxRank], rs[Shape::kMaxRank];
  int nk = 0, nr = 0;
  int64_t kept = 1, reduced = 1;
  for (int i = 0; i < shape.rank(); ++i) {
    if (std::find(c.axes.begin(), c.axes.end(), i) != c.axes.end()) {
      rd[nr] = shape[i], rs[nr++] = stride[i], reduced *= shape[i];
    } else {
      kd[nk] = shape[i], ks[nk++] = stride[i], kept *= shape[i];
    }
  }
  auto offset = [](int64_t lin, const int64_t* d, const int64_t* s, int n) {
    int64_t off = 0;
    for (int i = n - 1; i >= 0; --i) {
      off += (lin % d[i]) * s[i];
      lin /= d[i];
    }
    return off;
  };
  constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()
  for (int64_t k = 0; k < kept; ++k) {
    const int64_t base = offset(k, kd, ks, nk);
    double sq = 0.0;
    for (int64_t r = 0; r < reduced; ++r) {
      const double x = w[base + offset(r, rd, rs, nr)];
      sq += x * x;
    }
    const double norm = std::sqrt(sq);
    double desired = 1.0;
    if (c.kind == ConstraintKind::kMaxNorm)
      desired = std::clamp(norm, 0.0, c.max_value);
    else if (c.kind == ConstraintKind::kMinMaxNorm)
      desired = c.rate * std::clamp(norm, c.min_value, c.max_value) + (1.0 - c.rate) * norm;
    const float scale = static_cast<float>(desired / (kEpsilon + norm));
    for (int64_t r = 0; r < reduced; ++r) w[base + offset(r, rd, rs, nr)] *= scale;
  }
}

}  // namespace nnfleet
