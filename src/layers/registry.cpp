// The layer registry, generated from the one list in layers/kinds.h.
#include "layers/registry.h"

#include <algorithm>

#include "layers/channels_first.h"
#include "layers/kinds.h"

namespace nnfleet {

const std::vector<LayerKindInfo>& layer_kinds() {
  static const std::vector<LayerKindInfo> kinds = {
#define NNFLEET_KIND_ENTRY(cls, id) {#cls, &make_##id, &id##_examples},
      NNFLEET_LAYER_KINDS(NNFLEET_KIND_ENTRY)
#undef NNFLEET_KIND_ENTRY
  };
  return kinds;
}

const LayerKindInfo* find_layer_kind(std::string_view class_name) {
  // Keras's aliases for the same classes.
  if (class_name == "MaxPool2D") class_name = "MaxPooling2D";
  if (class_name == "AvgPool2D") class_name = "AveragePooling2D";
  if (class_name == "GlobalAvgPool2D") class_name = "GlobalAveragePooling2D";
  if (class_name == "GlobalMaxPool2D") class_name = "GlobalMaxPooling2D";
  if (class_name == "Convolution2D") class_name = "Conv2D";
  if (class_name == "Convolution1D") class_name = "Conv1D";
  if (class_name == "MaxPool1D") class_name = "MaxPooling1D";
  if (class_name == "AvgPool1D") class_name = "AveragePooling1D";
  if (class_name == "GlobalAvgPool1D") class_name = "GlobalAveragePooling1D";
  if (class_name == "GlobalMaxPool1D") class_name = "GlobalMaxPooling1D";
  for (const auto& k : layer_kinds())
    if (class_name == k.class_name) return &k;
  return nullptr;
}

std::vector<std::string> layer_class_names() {
  std::vector<std::string> v;
  for (const auto& k : layer_kinds()) v.push_back(k.class_name);
  return v;
}

std::string layer_kind_names() {
  std::string s;
  for (const auto& k : layer_kinds()) s += (s.empty() ? "" : ", ") + std::string(k.class_name);
  return s;
}

std::unique_ptr<Layer> make_layer(std::string_view class_name, const Json& config, ConfigMode mode,
                                  const std::string& default_name) {
  const LayerKindInfo* k = find_layer_kind(class_name);
  if (!k)
    throw ModelError("unknown layer class '" + std::string(class_name) + "'; expected one of " +
                     layer_kind_names() + near_miss(std::string(class_name), layer_class_names()));
  // channels_first (or BatchNormalization axis 1): built as the channels_last twin, wrapped.
  Json twin, restore;
  if (channels_first_twin_config(k->class_name, config, &twin, &restore))
    return wrap_channels_first(make_layer(k->class_name, twin, mode, default_name),
                               std::move(restore));
  LayerConfig cfg(config, mode, k->class_name);
  std::string name = default_name;
  if (const Json* n = cfg.get_raw("name")) {
    if (!n->is_string() || n->get<std::string>().empty()) cfg.fail("name", "a non-empty string");
    name = n->get<std::string>();
  }
  auto layer = k->make(cfg, name);
  cfg.finish([&layer] { return written_config(*layer); });
  return layer;
}

Json written_config(const Layer& layer) {
  Json j = layer.keras_config();
  // Any layer may be frozen or carry an activity regularizer (model/layer_training.h), whether or
  // not its Keras config writes them.
  if (!j.contains("trainable")) j["trainable"] = true;
  if (!j.contains("activity_regularizer")) j["activity_regularizer"] = nullptr;
  return j;
}

std::vector<std::string> layer_config_keys(std::string_view class_name, const Json& config,
                                           ConfigMode mode) {
  const LayerKindInfo* k = find_layer_kind(class_name);
  if (!k) return {};
  Json twin, restore;
  if (channels_first_twin_config(k->class_name, config, &twin, &restore)) {
    std::vector<std::string> keys = layer_config_keys(k->class_name, twin, mode);
    if (std::find(keys.begin(), keys.end(), "data_format") == keys.end() &&
        restore.contains("data_format"))
      keys.insert(std::upper_bound(keys.begin(), keys.end(), "data_format"), "data_format");
    return keys;
  }
  LayerConfig cfg(config, mode, k->class_name);
  cfg.get_raw("name");
  const auto layer = k->make(cfg, "layer");
  std::vector<std::string> keys = cfg.keys_read();
  const Json written = written_config(*layer);
  for (auto it = written.begin(); it != written.end(); ++it)
    if (it.key() != "name") keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace nnfleet
