// Activation name table.
#include "layers/activation_names.h"

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
  std::string list;
  for (const auto& n : activation_names()) list += (list.empty() ? "" : ", ") + n;
  throw ConfigError(key, "unknown activation " + v->dump() + "; expected one of " + list);
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
