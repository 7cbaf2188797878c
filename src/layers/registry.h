// The one list of every layer kind. It feeds the factory (plans and Keras files), the name table
// used in error messages, and the gradient-check test (tests/layers/gradient_check_test.cpp), so a
// kind cannot be added without a factory and a gradient check.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layers/layer.h"

namespace nnfleet {

// An example configuration for tests: a config and the per-sample input shapes it accepts.
struct LayerExample {
  Json config;
  std::vector<Shape> inputs;
  bool training = false;  // run the gradient check in training mode (BatchNormalization)
  int64_t id_limit = 0;   // > 0: the inputs are integer ids in [0, id_limit) (Embedding), which
                          // the check draws as such and does not differentiate
};

struct LayerKindInfo {
  const char* class_name;  // Keras class name
  std::unique_ptr<Layer> (*make)(LayerConfig& cfg, const std::string& name);
  std::vector<LayerExample> (*examples)();
};

// Every kind, in a fixed order.
const std::vector<LayerKindInfo>& layer_kinds();
// nullptr when unknown.
const LayerKindInfo* find_layer_kind(std::string_view class_name);
// Every kind's Keras class name, in layer_kinds() order (for near_miss).
std::vector<std::string> layer_class_names();
// "Activation, Add, AveragePooling2D, ..." for error messages.
std::string layer_kind_names();

// The keys a layer's config may hold besides "name", as the "unknown key" messages list them:
// those its kind reads from `config`, and those of written_config() of the layer built. Throws as
// make_layer does for a bad value; empty for an unknown class.
std::vector<std::string> layer_config_keys(std::string_view class_name, const Json& config,
                                           ConfigMode mode = ConfigMode::kPlan);
// The layer's Keras config (keras_config()) with trainable and activity_regularizer, which any
// layer takes: its keys are valid keys of the kind (its regularizers and constraints are taken
// out of a config before the layer is built, model/layer_training.h), and a key it writes but
// does not read (dtype, seed) is accepted at the value written.
Json written_config(const Layer& layer);

// Builds a layer from its class name and config (Keras or plan form); the config's "name" key,
// when present, overrides `default_name`. Throws ModelError for an unknown class (listing the valid
// ones) and ConfigError for a bad config value.
std::unique_ptr<Layer> make_layer(std::string_view class_name, const Json& config, ConfigMode mode,
                                  const std::string& default_name);

}  // namespace nnfleet
