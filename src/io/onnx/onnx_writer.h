// Writing an nnfleet model as an ONNX model (opset 13, IR version 7) through Debian's libonnx
// protobuf classes: standard operators only, the weights as initializers, a dynamic batch axis
// ("N") on every input and output, the inputs named as the Keras model's inputs and the outputs as
// its output layers. Inputs and outputs keep Keras's layout (channels last, [batch, time,
// features]). Every layer kind of the registry has an exporter (src/io/onnx/onnx_builder.h);
// one that ONNX cannot express is refused with a ModelError naming the layer. Thread-safe (no
// shared state).
#pragma once

#include <string>

#include "model/model.h"
#include "platform/files.h"

namespace nnfleet {

// The serialized ModelProto of `m` with `params` (laid out as Network::params()). Throws
// ModelError for a layer that cannot be exported.
std::string onnx_model_bytes(const Model& m, const float* params);
// Throws the ModelError onnx_model_bytes would for `m` (the layer ONNX cannot express), without
// its weights: for checking a model before it is trained.
void check_onnx_export(const Model& m);
// Writes it to `path` atomically. Throws ModelError, FileError.
void save_onnx(const std::string& path, const Model& m, const float* params,
               Durability d = Durability::kSystemCrash);

}  // namespace nnfleet
