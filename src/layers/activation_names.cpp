// Activation name table, and activations given as Keras activation-layer objects.
#include "layers/activation_names.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace nnfleet {
namespace {

struct NamedAct {
  const char* name;
  Activation act;
};

const std::vector<NamedAct>& table() {
  static const std::vector<NamedAct> t = {
      {"linear", {Act::kLinear}},
      {"relu", {Act::kRelu}},
      {"sigmoid", {Act::kSigmoid}},
      {"tanh", {Act::kTanh}},
      {"softmax", {Act::kSoftmax}},
      {"elu", {Act::kElu, 1.0f}},
      {"selu", {Act::kSelu}},
      {"softplus", {Act::kSoftplus}},
      {"softsign", {Act::kSoftsign}},
      {"swish", {Act::kSwish}},
      {"silu", {Act::kSwish}},
      {"gelu", {Act::kGelu}},
      {"leaky_relu", {Act::kLeakyRelu, 0.2f}},
      {"hard_sigmoid", {Act::kHardSigmoid}},
      {"exponential", {Act::kExponential}},
      {"relu6", {Act::kRelu, 0.0f, 6.0f}},
  };
  return t;
}

}  // namespace

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : table()) v.push_back(e.name);
    return v;
  }();
  return names;
}

namespace {

// A number of an activation layer's config, or `def` when absent (or null, with null_def).
float object_number(const Json& cfg, const char* k, float def, const std::string& key,
                    const char* cls, float null_def) {
  if (!cfg.contains(k)) return def;
  const Json& v = cfg[k];
  if (v.is_null()) return null_def;
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw ConfigError(
        key, std::string(cls) + " activation has " + k + " = " + v.dump() + "; expected a number");
  return static_cast<float>(v.get<double>());
}

// Keras's activation layers given as an activation: {"class_name": "LeakyReLU", "config":
// {...}} (Keras 3 adds module and registered_name). The keys their configs hold besides these
// options (name, trainable, dtype) are ignored; any other key is refused.
Activation parse_activation_object(const std::string& cls, const Json& cfg,
                                   const std::string& key) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::string> known = {"name", "trainable", "dtype"};
  Activation a;
  if (cls == "LeakyReLU") {
    a = {Act::kLeakyRelu, object_number(cfg, "alpha", 0.3f, key, "LeakyReLU", 0.3f)};
    a.alpha = object_number(cfg, "negative_slope", a.alpha, key, "LeakyReLU", a.alpha);
    known.insert(known.end(), {"alpha", "negative_slope"});
  } else if (cls == "ReLU") {
    a = {Act::kRelu, object_number(cfg, "negative_slope", 0.0f, key, "ReLU", 0.0f),
         object_number(cfg, "max_value", inf, key, "ReLU", inf),
         object_number(cfg, "threshold", 0.0f, key, "ReLU", 0.0f)};
    if (a.max_value < 0)
      throw ConfigError(key,
                        "ReLU activation has a negative max_value; expected a non-negative "
                        "number or null");
    known.insert(known.end(), {"negative_slope", "max_value", "threshold"});
  } else if (cls == "ELU") {
    a = {Act::kElu, object_number(cfg, "alpha", 1.0f, key, "ELU", 1.0f)};
    known.push_back("alpha");
  } else if (cls == "Softmax") {
    a = {Act::kSoftmax};
    if (cfg.contains("axis") && !cfg["axis"].is_null()) {
      const Json& ax =
          cfg["axis"].is_array() && cfg["axis"].size() == 1 ? cfg["axis"][0] : cfg["axis"];
      if (!ax.is_number_integer() || ax.get<int64_t>() != -1)
        throw ConfigError(key, "Softmax activation over axis " + cfg["axis"].dump() +
                                   "; expected -1 (a Softmax layer takes other axes)");
    }
    known.push_back("axis");
  } else if (cls == "PReLU") {
    throw ConfigError(key,
                      "PReLU as the activation of a layer is not supported (its alpha is a "
                      "weight of that layer); expected a separate PReLU layer after it");
  } else {
    return {Act::kLinear, -1.0f};  // not an activation layer: the caller reports it
  }
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    bool ok = std::find(known.begin(), known.end(), it.key()) != known.end();
    if (!ok)
      throw ConfigError(key, cls + " activation has the unsupported option '" + it.key() +
                                 "'; expected only its Keras options");
  }
  return a;
}

}  // namespace

Activation parse_activation(const Json* v, const std::string& key) {
  if (!v || v->is_null()) return {};
  const Json* s = v;
  // Keras 3 may serialize an activation as {"module": "keras.activations", "class_name":
  // "function", "config": "relu", "registered_name": "relu"}.
  if (v->is_object() && v->contains("config") && (*v)["config"].is_string()) s = &(*v)["config"];
  if (s->is_string()) {
    const std::string name = s->get<std::string>();
    for (const auto& e : table())
      if (name == e.name) return e.act;
  }
  if (v->is_object() && v->contains("class_name") && (*v)["class_name"].is_string()) {
    const Json cfg = v->value("config", Json::object());
    if (cfg.is_object()) {
      const Activation a = parse_activation_object((*v)["class_name"].get<std::string>(), cfg, key);
      if (!(a.kind == Act::kLinear && a.alpha < 0)) return a;
    }
  }
  std::string list;
  for (const auto& n : activation_names()) list += (list.empty() ? "" : ", ") + n;
  throw ConfigError(key, "unknown activation " + v->dump() + "; expected one of " + list +
                             ", or a LeakyReLU, ReLU, ELU or Softmax layer object");
}

Json activation_to_keras(const Activation& a) {
  for (const auto& e : table()) {
    const Activation& t = e.act;
    if (t.kind == a.kind && t.alpha == a.alpha && t.max_value == a.max_value &&
        t.threshold == a.threshold)
      return e.name;
  }
  Json cfg = Json::object();
  const char* cls = nullptr;
  switch (a.kind) {
    case Act::kLeakyRelu:
      cls = "LeakyReLU";
      cfg["negative_slope"] = a.alpha;
      break;
    case Act::kRelu:
      cls = "ReLU";
      cfg["max_value"] = std::isinf(a.max_value) ? Json(nullptr) : Json(a.max_value);
      cfg["negative_slope"] = a.alpha;
      cfg["threshold"] = a.threshold;
      break;
    case Act::kElu:
      cls = "ELU";
      cfg["alpha"] = a.alpha;
      break;
    default:
      return activation_name(a);
  }
  return Json{{"module", "keras.layers"},
              {"class_name", cls},
              {"config", cfg},
              {"registered_name", nullptr}};
}

std::string activation_name(const Activation& a) {
  if (a.kind == Act::kRelu && a.max_value == 6.0f && a.alpha == 0.0f && a.threshold == 0.0f)
    return "relu6";
  if (a.kind == Act::kGeluTanh) return "gelu";
  for (const auto& e : table())
    if (e.act.kind == a.kind) return e.name;
  return "linear";
}

}  // namespace nnfleet
