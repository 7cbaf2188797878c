// A model.summary()-like description of a loaded Keras file, for `nnfleet inspect`.
#pragma once

#include <string>

#include "io/keras_reader.h"

namespace nnfleet {

// The layer table (name, class, output shape, parameters, inputs for Functional models), the
// parameter totals, and what the file says of its Keras version, training config and optimizer.
std::string model_summary(const LoadedModel& lm, const std::string& path);

// "34,826" and "136.04 KB".
std::string thousands(uint64_t v);
std::string human_bytes(double bytes);

}  // namespace nnfleet
