// Where Keras files keep each layer kind's weights: the sub-group of a Keras 3 weights file
// (model.weights.h5 in a .keras) and the name in a legacy .h5, per param_specs() entry. Most kinds
// keep their weights flat under the layer, named as the layer names them ("kernel", "bias"); the
// kinds that nest them (a recurrent layer's cell, Bidirectional's two halves) are listed in
// keras_layout.cpp by class name, as the ONNX exporters are per kind. The reader and the writer
// both go through here, so a file nnfleet writes reads back.
#pragma once

#include <string>
#include <vector>

#include "layers/layer.h"

namespace nnfleet {

// Where Keras files keep one parameter of a layer.
struct KerasWeightPlace {
  // In a Keras 3 weights file, relative to the layer's own group: the sub-group holding the
  // parameter's "vars" ("" for the layer's group itself, "cell" for a recurrent cell,
  // "forward_layer/cell" inside Bidirectional) and its index among those vars.
  std::string group;
  int index = 0;
  // In a legacy .h5, its name below the layer's name ("kernel", "lstm_cell/kernel",
  // "forward_lstm/lstm_cell/kernel"); tf.keras appends ":0" to the last part.
  std::string legacy_name;
  // Keras keeps it as an int64 scalar (Normalization's count); nnfleet holds it as a float.
  bool int64_scalar = false;
};

// The place of every parameter of `layer`, whose planned parameters are `specs` (its
// param_specs()), in that order. Thread-safe.
std::vector<KerasWeightPlace> keras_weight_places(const Layer& layer,
                                                  const std::vector<ParamSpec>& specs);

}  // namespace nnfleet
