// Weight initializers: the Keras 3 name table, config parsing and serialization, and the fills.
// Fans follow keras/src/initializers/random_initializers.py compute_fans; the variance-scaling
// kinds (glorot, he, lecun) divide their scale by max(1, fan) and draw a truncated normal with
// stddev sqrt(scale) / 0.87962566103423978 (the stddev of a unit normal truncated at +-2) or a
// uniform in +-sqrt(3 scale).
#include "layers/initializer.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace nnfleet {
namespace {

struct NamedInit {
  const char* name;  // snake_case
  const char* cls;   // Keras class
  InitKind kind;
  double a, b;  // defaults
};

const std::vector<NamedInit>& table() {
  static const std::vector<NamedInit> t = {
      {"zeros", "Zeros", InitKind::kZeros, 0, 0},
      {"ones", "Ones", InitKind::kOnes, 0, 0},
      {"constant", "Constant", InitKind::kConstant, 0, 0},
      {"glorot_uniform", "GlorotUniform", InitKind::kGlorotUniform, 0, 0},
      {"glorot_normal", "GlorotNormal", InitKind::kGlorotNormal, 0, 0},
      {"he_uniform", "HeUniform", InitKind::kHeUniform, 0, 0},
      {"he_normal", "HeNormal", InitKind::kHeNormal, 0, 0},
      {"lecun_uniform", "LecunUniform", InitKind::kLecunUniform, 0, 0},
      {"lecun_normal", "LecunNormal", InitKind::kLecunNormal, 0, 0},
      {"random_normal", "RandomNormal", InitKind::kRandomNormal, 0.0, 0.05},
      {"random_uniform", "RandomUniform", InitKind::kRandomUniform, -0.05, 0.05},
      {"truncated_normal", "TruncatedNormal", InitKind::kTruncatedNormal, 0.0, 0.05},
      {"orthogonal", "Orthogonal", InitKind::kOrthogonal, 1.0, 0},
      {"variance_scaling", "VarianceScaling", InitKind::kVarianceScaling, 1.0, 0},
  };
  return t;
}

// Keras's aliases (keras/src/initializers/__init__.py).
const NamedInit* lookup(const std::string& name) {
  std::string n = name;
  if (n == "zero") n = "zeros";
  if (n == "one") n = "ones";
  if (n == "normal") n = "random_normal";
  if (n == "uniform") n = "random_uniform";
  if (n == "OrthogonalInitializer") n = "orthogonal";  // Keras 3.0-3.4's class name
  for (const auto& e : table())
    if (n == e.name || n == e.cls) return &e;
  return nullptr;
}

const NamedInit& entry(InitKind k) {
  for (const auto& e : table())
    if (e.kind == k) return e;
  return table()[0];
}

[[noreturn]] void unknown(const Json& j, const std::string& key) {
  std::string list;
  for (const auto& n : initializer_names()) list += (list.empty() ? "" : ", ") + n;
  throw ConfigError(
      key, "unknown initializer " + j.dump() + " for '" + key + "'; expected one of " + list);
}

// Keras's VarianceScaling config; "normal" is Keras 2.2's name for the truncated normal.
void parse_variance_scaling(LayerConfig& c, Initializer& init) {
  init.a = c.get_float("scale", 1.0);
  if (!(init.a > 0)) c.fail("scale", "a number > 0");
  const std::string fan = c.get_string("mode", "fan_in", {"fan_in", "fan_out", "fan_avg"});
  init.fan = fan == "fan_in" ? InitFan::kIn : fan == "fan_out" ? InitFan::kOut : InitFan::kAvg;
  const std::string d =
      c.get_string("distribution", "truncated_normal",
                   {"truncated_normal", "normal", "untruncated_normal", "uniform"});
  init.distribution = d == "uniform"              ? InitDistribution::kUniform
                      : d == "untruncated_normal" ? InitDistribution::kUntruncatedNormal
                                                  : InitDistribution::kTruncatedNormal;
}

double truncated(Rng& rng) {
  for (;;) {
    const double z = rng.normal();
    if (std::fabs(z) <= 2.0) return z;
  }
}

}  // namespace

const std::vector<std::string>& initializer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : table()) v.push_back(e.name);
    return v;
  }();
  return names;
}

Fans initializer_fans(const Shape& s) {
  Fans f;
  const int r = s.rank();
  if (r == 1) {
    f.in = f.out = static_cast<double>(s[0]);
  } else if (r >= 2) {
    double rf = 1;
    for (int i = 0; i < r - 2; ++i) rf *= static_cast<double>(s[i]);
    f.in = static_cast<double>(s[r - 2]) * rf;
    f.out = static_cast<double>(s[r - 1]) * rf;
  }
  return f;
}

std::string initializer_name(InitKind k) { return entry(k).name; }
std::string initializer_class(InitKind k) { return entry(k).cls; }

Initializer parse_initializer(const Json& j, const std::string& key) {
  const auto [name, config, mode] = split_keras_object(j, key, "initializer");
  const NamedInit* e = lookup(name);
  if (!e) unknown(j, key);

  Initializer init{e->kind, e->a, e->b};
  // Errors inside the initializer's config are reported under the layer's key, with the
  // initializer's own key in the message.
  try {
    LayerConfig c(config, mode, e->cls);
    switch (e->kind) {
      case InitKind::kConstant:
        init.a = c.get_float("value", 0.0);
        break;
      case InitKind::kRandomNormal:
      case InitKind::kTruncatedNormal:
        init.a = c.get_float("mean", e->a);
        init.b = c.get_float("stddev", e->b);
        if (init.b < 0) c.fail("stddev", "a number >= 0");
        break;
      case InitKind::kRandomUniform:
        init.a = c.get_float("minval", e->a);
        init.b = c.get_float("maxval", e->b);
        if (init.b < init.a) c.fail("maxval", "a number >= minval " + std::to_string(init.a));
        break;
      case InitKind::kOrthogonal:
        init.a = c.get_float("gain", 1.0);
        break;
      case InitKind::kVarianceScaling:
        parse_variance_scaling(c, init);
        break;
      default:
        break;
    }
    // input_axes/output_axes (newer Keras) and seed are harmless when null; an integer seed is
    // accepted too: nnfleet derives every seed from the plan seed.
    if (mode == ConfigMode::kKeras) c.ignore("seed");
    c.finish();
  } catch (const ConfigError& err) {
    throw ConfigError(key, std::string(err.what()) + " (in '" + key + "')");
  }
  return init;
}

Json initializer_to_keras(const Initializer& init) {
  Json c = Json::object();
  switch (init.kind) {
    case InitKind::kZeros:
    case InitKind::kOnes:
      break;
    case InitKind::kConstant:
      c["value"] = init.a;
      break;
    case InitKind::kRandomNormal:
    case InitKind::kTruncatedNormal:
      c = {{"seed", nullptr}, {"mean", init.a}, {"stddev", init.b}};
      break;
    case InitKind::kRandomUniform:
      c = {{"seed", nullptr}, {"minval", init.a}, {"maxval", init.b}};
      break;
    case InitKind::kOrthogonal:
      c = {{"seed", nullptr}, {"gain", init.a}};
      break;
    case InitKind::kVarianceScaling: {
      const char* fans[] = {"fan_in", "fan_out", "fan_avg"};
      const char* dists[] = {"truncated_normal", "untruncated_normal", "uniform"};
      c = {{"seed", nullptr},
           {"scale", init.a},
           {"mode", fans[static_cast<int>(init.fan)]},
           {"distribution", dists[static_cast<int>(init.distribution)]}};
      break;
    }
    default:
      // Only "seed": older Keras 3 releases reject the newer input_axes/output_axes keys.
      c = {{"seed", nullptr}};
      break;
  }
  return {{"module", "keras.initializers"},
          {"class_name", initializer_class(init.kind)},
          {"config", c},
          {"registered_name", nullptr}};
}

// Keras's Orthogonal: a normal matrix of shape (max(rows, cols), min(rows, cols)) with rows the
// product of all but the last dimension, made orthonormal by QR with the signs of R's diagonal
// folded in (which is what Gram-Schmidt gives: R's diagonal positive), transposed when
// rows < cols, times the gain.
static void fill_orthogonal(double gain, const Shape& shape, Rng& rng, float* out) {
  const int64_t cols = shape.rank() == 0 ? 1 : shape[shape.rank() - 1];
  const int64_t rows = cols == 0 ? 0 : shape.size() / cols;
  const int64_t m = std::max(rows, cols), k = std::min(rows, cols);
  std::vector<double> q(static_cast<size_t>(m * k));  // column j at q[j*m ...]
  for (auto& v : q) v = rng.normal();
  for (int64_t j = 0; j < k; ++j) {
    double* qj = q.data() + j * m;
    for (int pass = 0; pass < 2; ++pass)  // twice: one pass loses orthogonality in float error
      for (int64_t p = 0; p < j; ++p) {
        const double* qp = q.data() + p * m;
        double dot = 0;
        for (int64_t i = 0; i < m; ++i) dot += qp[i] * qj[i];
        for (int64_t i = 0; i < m; ++i) qj[i] -= dot * qp[i];
      }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i) norm += qj[i] * qj[i];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < m; ++i) qj[i] = norm > 0 ? qj[i] / norm : 0.0;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double v =
          rows >= cols ? q[static_cast<size_t>(c * m + r)] : q[static_cast<size_t>(r * m + c)];
      out[r * cols + c] = static_cast<float>(gain * v);
    }
}

static void initialize_kind(const Initializer& init, const Shape& shape, Rng& rng, float* out);

void initialize(const Initializer& init, const Shape& shape, Rng& rng, float* out) {
  initialize_kind(init, shape, rng, out);
  if (init.unit_forget_bias) {
    const int64_t q = shape.size() / 4;
    for (int64_t i = q; i < 2 * q; ++i) out[i] = 1.0f;
  }
}

static void initialize_kind(const Initializer& init, const Shape& shape, Rng& rng, float* out) {
  const int64_t n = shape.size();
  if (init.kind == InitKind::kOrthogonal) return fill_orthogonal(init.a, shape, rng, out);
  const Fans f = initializer_fans(shape);
  const double fan_in = f.in, fan_out = f.out;
  // Variance-scaling kinds: scale / max(1, fan), then normal or uniform.
  double scale = 0;
  bool uniform = false;
  switch (init.kind) {
    case InitKind::kGlorotUniform:
      uniform = true;
      [[fallthrough]];
    case InitKind::kGlorotNormal:
      scale = 1.0 / std::max(1.0, (fan_in + fan_out) / 2.0);
      break;
    case InitKind::kHeUniform:
      uniform = true;
      [[fallthrough]];
    case InitKind::kHeNormal:
      scale = 2.0 / std::max(1.0, fan_in);
      break;
    case InitKind::kLecunUniform:
      uniform = true;
      [[fallthrough]];
    case InitKind::kLecunNormal:
      scale = 1.0 / std::max(1.0, fan_in);
      break;
    case InitKind::kVarianceScaling: {
      const double fan = init.fan == InitFan::kIn    ? fan_in
                         : init.fan == InitFan::kOut ? fan_out
                                                     : (fan_in + fan_out) / 2.0;
      scale = init.a / std::max(1.0, fan);
      uniform = init.distribution == InitDistribution::kUniform;
      if (init.distribution == InitDistribution::kUntruncatedNormal) {
        const double stddev = std::sqrt(scale);
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(stddev * rng.normal());
        return;
      }
      break;
    }
    default:
      break;
  }
  switch (init.kind) {
    case InitKind::kZeros:
    case InitKind::kOnes:
    case InitKind::kConstant: {
      const float v = init.kind == InitKind::kZeros  ? 0.0f
                      : init.kind == InitKind::kOnes ? 1.0f
                                                     : static_cast<float>(init.a);
      for (int64_t i = 0; i < n; ++i) out[i] = v;
      return;
    }
    case InitKind::kRandomNormal:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(init.a + init.b * rng.normal());
      return;
    case InitKind::kTruncatedNormal:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(init.a + init.b * truncated(rng));
      return;
    case InitKind::kRandomUniform:
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(init.a + (init.b - init.a) * rng.uniform_double());
      return;
    default:
      break;
  }
  if (uniform) {
    const double limit = std::sqrt(3.0 * scale);
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<float>(limit * (2.0 * rng.uniform_double() - 1.0));
  } else {
    const double stddev = std::sqrt(scale) / 0.87962566103423978;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(stddev * truncated(rng));
  }
}

}  // namespace nnfleet
