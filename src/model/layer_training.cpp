// LayerTraining: the training keys of a layer config, taken out and put back.
#include "model/layer_training.h"

#include "layers/registry.h"

namespace nnfleet {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

void refuse(LayerTraining& t, const std::string& why) {
  if (t.refusal.empty()) t.refusal = why;
}

// Takes the keys out of one config level; `inner` is a wrapped layer's config (its weights are
// the wrapper's, its activity regularizer is not applied here).
void take_level(Json& cfg, LayerTraining& t, Json& patch, bool inner) {
  std::vector<std::string> taken;
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& k = it.key();
    if (k == "trainable" || ends_with(k, "_regularizer") || ends_with(k, "_constraint"))
      taken.push_back(k);
  }
  for (const std::string& k : taken) {
    Json v = cfg[k];
    cfg.erase(k);
    if (k == "trainable") {
      if (!v.is_boolean()) throw ConfigError(k, "expected true or false, got " + v.dump());
      if (!v.get<bool>()) {
        t.frozen = true;
        patch[k] = false;
      }
      continue;
    }
    if (v.is_null()) continue;
    if (ends_with(k, "_regularizer")) {
      Regularizer r = parse_regularizer_spec(v, k);
      if (!r.refusal.empty()) refuse(t, k + ": " + r.refusal);
      // A name stands for different factors in different Keras versions: write it out.
      patch[k] = v.is_string() ? regularizer_to_keras(r) : v;
      if (k == "activity_regularizer") {
        if (inner && r.active())
          refuse(t,
                 "activity_regularizer on a wrapped layer is not applied in training; "
                 "expected it on the wrapper or on a layer of its own");
        else
          t.activity = r;
      } else {
        t.regularizers.emplace_back(k.substr(0, k.size() - 12), r);
      }
    } else {
      Constraint c = parse_constraint_spec(v, k);
      if (!c.refusal.empty()) refuse(t, k + ": " + c.refusal);
      patch[k] = v;
      t.constraints.emplace_back(k.substr(0, k.size() - 11), c);
    }
  }
}

void put_level(Json& cfg, const Json& patch) {
  if (!cfg.is_object()) return;
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if ((it.key() == "layer" || it.key() == "backward_layer") && it.value().is_object()) {
      if (cfg.contains(it.key()) && cfg[it.key()].is_object() && cfg[it.key()].contains("config"))
        put_level(cfg[it.key()]["config"], it.value().value("config", Json::object()));
      continue;
    }
    cfg[it.key()] = it.value();
  }
}

}  // namespace

LayerTraining take_layer_training(Json& config) {
  LayerTraining t;
  if (!config.is_object()) return t;
  take_level(config, t, t.keras, false);
  // A wrapper's layer: its weights are the wrapper's (Bidirectional copies the forward layer's
  // options to the backward one, as Keras does when it builds the backward layer from it).
  for (const char* w : {"layer", "backward_layer"}) {
    if (!config.contains(w) || !config[w].is_object() || !config[w].contains("config") ||
        !config[w]["config"].is_object())
      continue;
    LayerTraining inner;
    Json patch = Json::object();
    take_level(config[w]["config"], inner, patch, true);
    if (!patch.empty()) t.keras[w] = {{"config", patch}};
    if (!inner.refusal.empty()) refuse(t, inner.refusal);
    if (std::string(w) == "layer") {
      for (auto& r : inner.regularizers) t.regularizers.push_back(r);
      for (auto& c : inner.constraints) t.constraints.push_back(c);
      t.frozen = t.frozen || inner.frozen;
    } else if (patch.dump() !=
                   t.keras.value("layer", Json::object()).value("config", Json()).dump() &&
               !patch.empty()) {
      refuse(t,
             "a backward_layer with regularizers or constraints of its own is not applied in "
             "training; expected them on the forward layer only");
    }
  }
  return t;
}

Json put_layer_training(Json config, const LayerTraining& t) {
  put_level(config, t.keras);
  if (t.frozen && config.is_object()) config["trainable"] = false;
  return config;
}

std::pair<std::unique_ptr<Layer>, LayerTraining> make_layer_with_training(
    const std::string& class_name, Json config, ConfigMode mode, const std::string& name) {
  LayerTraining t = take_layer_training(config);
  t.taken_before = true;
  return {make_layer(class_name, config, mode, name), std::move(t)};
}

bool stem_names_param(const std::string& stem, const std::string& param) {
  return param == stem || param == stem + "_kernel";
}

}  // namespace nnfleet
