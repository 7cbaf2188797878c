// The Keras forms of serialized TensorFlow operations, read and written:
//  - tf.keras 2.4+ TFOpLambda / SlicingOpLambda entries, whose node carries the call: the first
//    argument as [layer, node, tensor, kwargs] (one unwrapped entry for a single tensor, a list of
//    entries for a list such as tf.concat's, ["_CONSTANT_VALUE", -1, value, kwargs] for a
//    constant) and the other arguments as kwargs, tensors among them as [layer, node, tensor];
//  - Keras 3 keras.ops calls in a Functional config: an entry of an operation class ("Add",
//    "Mean", "GetItem", ... of module keras.src.ops.numpy / nn / math / core) whose node has
//    {"args": [...], "kwargs": {}} with Keras tensors, and whose config holds the constants.
// Both become the layer config of layers/tf_op.h ({"function", "call"}). The .h5 writer writes
// tf.keras's form back; the .keras writer writes Keras 3's operation classes (Keras 3 cannot load
// TFOpLambda), refusing by name the calls that have none (matmul with transpose_a/b).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "model/model.h"

namespace nnfleet {

// True for a TFOpLambda / SlicingOpLambda entry, or a Keras 3 operation (its module one of
// keras.src.ops.* / keras.ops.*).
bool is_tf_op_entry(const Json& entry);

struct TfOpCall {
  std::string cls;  // TFOpLambda or SlicingOpLambda
  Json config;      // {"name", "trainable", "dtype", "function", "call"}
  // The tensors the call takes, in the order of its "__input__" indices: (layer name, tensor).
  std::vector<std::pair<std::string, int>> inputs;
};
// Reads an entry for which is_tf_op_entry() holds. Throws ModelError saying what is wrong (an
// unsupported Keras 3 operation is refused by name, listing the supported ones).
TfOpCall read_tf_op_call(const Json& entry, const std::string& name);

// Whether layer `l` is one of the TF operation kinds.
bool is_tf_op_layer(const Layer& l);
// Layer i's tf.keras node (the element of inbound_nodes) and its config without "call".
Json tf_op_legacy_node(const Model& m, size_t i);
Json tf_op_legacy_config(const Json& keras_config);
// Layer i as a Keras 3 operation entry (module, class_name, config, registered_name, name,
// inbound_nodes). Throws ModelError for a call Keras 3 has no operation for.
Json tf_op_keras3_entry(const Model& m, size_t i);

}  // namespace nnfleet
