// The table of activation names (Keras's), shared by the Activation layer, the activation option
// of Dense/Conv2D, the gradient-check test and the Keras writer.
#pragma once

#include <string>
#include <vector>

#include "kernels/activation.h"
#include "layers/config.h"

namespace nnfleet {

// Parses a Keras activation: "relu", "swish"/"silu", "gelu", "leaky_relu", "linear"/null, or
// Keras 3's serialized form {"class_name": "function", "config": "relu", ...}. Throws
// ConfigError(key) listing the valid names.
Activation parse_activation(const Json* v, const std::string& key);
// Keras's name of an activation ("relu"); the ReLU layer's extra options are not named here.
std::string activation_name(const Activation& a);
// Every name parse_activation accepts.
const std::vector<std::string>& activation_names();

}  // namespace nnfleet
