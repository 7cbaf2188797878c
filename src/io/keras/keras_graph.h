// Translation of a Keras model config (Sequential or Functional, Keras 2 or 3 form, with nested
// models flattened into the outer graph) into a Model of registry layers, plus the bookkeeping
// needed to find each layer's weights in a Keras file:
//  - legacy .h5 files store weights per top-level Keras layer (a nested model is one entry whose
//    weights are all its trainable weights, then all its non-trainable ones), matched in order;
//  - Keras 3 weight files store them per layer at layers/<key>/vars/<i>, where <key> is the
//    snake_case class name made unique within its container (dense, dense_1, ...).
// Nothing in a config is executed: classes outside the registry are refused by name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "model/model.h"

namespace nnfleet {

struct KerasGraph {
  std::shared_ptr<const Model> model;
  std::string class_name;  // "Sequential" or "Functional" (the outer model)
  // A top-level Keras layer that has weights, in Keras's model.layers order.
  struct Entry {
    std::string name, class_name;
    // (model layer index, param_specs index) in legacy order: trainable, then non-trainable.
    std::vector<std::pair<size_t, size_t>> weights;
  };
  std::vector<Entry> entries;
  // Per model layer: its group in a Keras 3 weights file ("layers/dense_1",
  // "layers/sequential/layers/dense"), and the same path built from layer names instead of class
  // keys (how some tf.keras 2.13/2.14 files name them).
  std::vector<std::string> weight_paths, weight_paths_by_name;
};

// Builds the graph from a model config object ({"class_name": ..., "config": ...}). `where` names
// the file for messages. Throws FileError naming the layer, its class and what is supported.
// `data_shape` (may be null) sizes the input dimensions the config leaves free (see
// load_keras_model).
KerasGraph build_keras_graph(const Json& model_config, const std::string& where,
                             const Shape* data_shape = nullptr);
// The same with the data's shapes for models with several inputs (see load_keras_model).
// `assets` (may be null): a .keras archive's members under assets/ (path -> bytes); a layer
// with a vocabulary (TextVectorization, StringLookup, IntegerLookup) whose config has none
// takes the lines of assets/<its Keras 3 path>/vocabulary.txt, as Keras's load_assets does.
using KerasAssets = std::map<std::string, std::string>;
KerasGraph build_keras_graph(const Json& model_config, const std::string& where,
                             const std::vector<ModelInput>* data_shapes,
                             const KerasAssets* assets = nullptr);
// The lines of a vocabulary.txt as Keras's load_assets reads them (splitlines: "\n", "\r\n"
// or "\r" end a line; trailing empty lines dropped).
Json vocabulary_lines(const std::string& text);

// A data shape of this name (not a Keras name: Keras refuses "/" in names) sizes every free
// dimension of every input with its one dimension, whatever the input's rank: how `inspect`
// describes a file without data, several inputs included (io/model_summary.cpp).
inline constexpr char kEveryFreeDimension[] = "/every free dimension";

// The same bookkeeping for a Model that did not come from a Keras file (each layer is its own
// entry; paths as Keras 3 would write them). `functional` says whether it is saved as a
// Functional model (whose layer list starts with its InputLayer) or a Sequential one.
KerasGraph keras_graph_of(std::shared_ptr<const Model> model, bool functional);

// Keras's naming.to_snake_case ("MaxPooling2D" -> "max_pooling2d", "ReLU" -> "re_lu").
std::string keras_snake_case(const std::string& class_name);

// Per layer and param_specs entry, the offset of that parameter in Network::params() order (all
// trainable parameters in layer order, then all non-trainable ones); sets *total to the count.
std::vector<std::vector<size_t>> param_offsets(const Model& m, size_t* total);

// Keras 3's order of an optimizer's variables after `iterations` and `learning_rate`: for each,
// the state slot (index into optimizer_state_slots()) and the trainable variable it shadows.
// Adam and AdamW interleave momentum and velocity per variable (one add_optimizer_variables call
// with two names), then velocity_hat; other optimizers add one slot for all variables at a time.
struct OptimizerVarRef {
  size_t slot, var;
};
std::vector<OptimizerVarRef> keras_optimizer_var_order(const std::vector<std::string>& slots,
                                                       size_t num_vars);

}  // namespace nnfleet
