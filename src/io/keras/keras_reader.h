// Reading Keras model files into nnfleet models:
//  - legacy HDF5 .h5 written by Keras 2.x, tf.keras and Keras 3 (root attributes model_config,
//    keras_version, backend, training_config; model_weights with layer_names/weight_names);
//  - weights-only .h5 (model.save_weights, legacy or Keras 3 layout) for a model defined
//    elsewhere;
//  - Keras 3 .keras zip archives (config.json, metadata.json, model.weights.h5);
//  - architecture-only JSON from model.to_json().
// Layers are built through the registry (src/layers/registry.h); a model with a layer outside it,
// a custom class, a nested model with several inputs or outputs, or a shared layer is refused with
// a FileError naming the layer, its class and what is supported. Nothing in a file is executed. A
// truncated or corrupt file ends in a FileError, never a crash. Thread-safety: the functions may be
// called from any thread (HDF5 access is serialized).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "io/keras/keras_graph.h"
#include "model/model.h"
#include "optim/optimizer.h"

namespace nnfleet {

struct LoadedModel {
  std::shared_ptr<const Model> model;
  // Laid out as Network::params(): all trainable parameters in layer order, then the
  // non-trainable ones. Zeros when has_weights is false.
  std::vector<float> params;
  bool has_weights = false;
  std::string format;                  // "h5", "keras" or "json"
  std::string class_name;              // the outer Keras class: "Sequential" or "Functional"
  std::string keras_version, backend;  // empty when the file does not say
  // The h5 training_config, or the .keras / to_json compile_config; null when absent.
  Json training_config;
  // What the file holds of an optimizer ({"class_name", "iterations", "variables"}), or null.
  Json optimizer_state_info;
  // Optimizer state restored from a Keras 3 .keras file in Network::optimizer_state() layout,
  // when its optimizer is one nnfleet supports and the variables match; empty otherwise.
  OptimizerSpec optimizer;
  std::vector<float> optimizer_state;
  int64_t iterations = 0;
};

// Loads a model file (.h5, .keras or a to_json() .json; recognized by content). With
// `weights_path`, weights come from that file (a save_weights .h5, a Keras 3 .weights.h5, or
// another full model file) instead. An input dimension the file leaves free (None: a sequence
// length, an image size) takes its size from `data_shape`, the per-sample shape of the data the
// model will see (one size per run); without it, or when the ranks differ, a free dimension is a
// FileError naming both shapes. Throws FileError.
LoadedModel load_keras_model(const std::string& path, const std::string& weights_path = "",
                             const Shape* data_shape = nullptr);
// The same for a model with several inputs: the data's per-sample shapes, each sizing the free
// dimensions of the model input of its name, or (unnamed) of the input at its position in
// input_layers order; empty: none given.
LoadedModel load_keras_model(const std::string& path, const std::string& weights_path,
                             const std::vector<ModelInput>& data_shapes);

// Loads weights from `path` (legacy save_weights .h5, a full legacy .h5 model, a Keras 3
// .weights.h5 or a .keras archive) onto `graph`'s model; `params` is laid out as
// Network::params(). Throws FileError naming the layer and weight on any mismatch.
void load_weights_file(const std::string& path, const KerasGraph& graph, float* params);
// The same for a model defined in a plan (each layer its own Keras layer; a chain of layers is
// matched as a Sequential model, anything else as a Functional one).
void load_weights_h5(const std::string& path, const Model& m, float* params);

}  // namespace nnfleet
