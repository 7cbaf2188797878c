// The layer registry, generated from the one list in layers/kinds.h.
#include "layers/registry.h"

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
                     layer_kind_names());
  LayerConfig cfg(config, mode, k->class_name);
  std::string name = default_name;
  if (const Json* n = cfg.get_raw("name")) {
    if (!n->is_string() || n->get<std::string>().empty()) cfg.fail("name", "a non-empty string");
    name = n->get<std::string>();
  }
  auto layer = k->make(cfg, name);
  cfg.finish();
  return layer;
}

}  // namespace nnfleet
