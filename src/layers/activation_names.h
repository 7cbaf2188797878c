// The table of activation names (Keras's), shared by the Activation layer, the activation option
// of Dense/Conv2D, the gradient-check test and the Keras writer. It is also how code above
// layers/ (the ONNX exporters) sees a layer's Activation (Act, alpha, max_value, threshold): the
// kernels define the type, and this header hands it on with the names.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/activation.h"

namespace nnfleet {

// Parses a Keras activation: "relu", "swish"/"silu", "gelu", "leaky_relu", "linear"/null,
// Keras 3's serialized form {"class_name": "function", "config": "relu", ...}, or an activation
// layer object {"class_name": "LeakyReLU" | "ReLU" | "ELU" | "Softmax", "config": {...}} as
// Keras writes `activation=keras.layers.LeakyReLU(...)`. Throws ConfigError(key) listing the
// valid names (and for a PReLU object, whose weight nnfleet keeps only in a PReLU layer).
Activation parse_activation(const Json* v, const std::string& key);
// Keras's name of an activation ("relu"); the ReLU layer's extra options are not named here.
std::string activation_name(const Activation& a);
// What a layer's config holds for `a`: its name when one names it exactly ("relu", "elu" with
// alpha 1, "leaky_relu" with slope 0.2), otherwise the Keras 3 layer object (LeakyReLU, ReLU,
// ELU) with its options, so a model reads back with the same function.
Json activation_to_keras(const Activation& a);
// Every name parse_activation accepts.
const std::vector<std::string>& activation_names();

}  // namespace nnfleet
