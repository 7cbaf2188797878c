// What Keras attaches to a layer for training besides its math: weight regularizers and
// constraints (kernel_regularizer, bias_constraint, ...), an activity regularizer, and
// `trainable: false`. These keys are taken out of a layer's config before the layer is built
// (the layer never sees them), kept with the model node, applied by Network in training, and put
// back into the config when the model is written.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "layers/layer.h"
#include "optim/regularizer.h"

namespace nnfleet {

struct LayerTraining {
  bool frozen = false;  // trainable: false on the layer or on a model that encloses it
  std::optional<Regularizer> activity;
  // Keyed by the config key's stem: "kernel" (kernel_regularizer), "bias", "recurrent"
  // (recurrent_kernel), "depthwise", "embeddings", "gamma", ...
  std::vector<std::pair<std::string, Regularizer>> regularizers;
  std::vector<std::pair<std::string, Constraint>> constraints;
  // Why training must refuse these options ("" when it can apply them all).
  std::string refusal;
  // The keys as taken out of the config, to be put back when the model is written: an object
  // of keys, with "layer" / "backward_layer": {"config": {...}} for a wrapped layer's own.
  Json keras = Json::object();
  // Names of the nested models around the layer, outermost first (Keras files only).
  std::vector<std::string> scopes;
  // The keys were taken out of the layer's config before the layer was made
  // (make_layer_with_training), so the layer holds none of its own and the model need not look
  // for them in its whole Keras config (3% of a run of 8,000 tiny models went to that).
  bool taken_before = false;
};

// Removes the training keys (*_regularizer, *_constraint, trainable) from `config`, and from a
// wrapped layer's config (TimeDistributed, Bidirectional), and returns them parsed. Throws
// ConfigError naming the key for a value that is not a regularizer, constraint or boolean.
LayerTraining take_layer_training(Json& config);

// `config` with the keys of `t` put back (trainable: false when frozen).
Json put_layer_training(Json config, const LayerTraining& t);

// Builds a layer through the registry (make_layer) after taking its training keys out of
// `config`; the same errors as make_layer and take_layer_training.
std::pair<std::unique_ptr<Layer>, LayerTraining> make_layer_with_training(
    const std::string& class_name, Json config, ConfigMode mode, const std::string& name);

// The parameter a stem names: the param_specs entries called `stem` or `stem` + "_kernel"
// (recurrent -> recurrent_kernel, depthwise -> depthwise_kernel).
bool stem_names_param(const std::string& stem, const std::string& param);

}  // namespace nnfleet
