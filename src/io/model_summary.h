// A model.summary()-like description of a loaded Keras file, for `nnfleet inspect`.
#pragma once

#include <string>
#include <string_view>

#include "io/keras/keras_reader.h"

namespace nnfleet {

// The layer table (name, class, output shape, parameters, inputs for Functional models), the
// parameter totals, the forward FLOPs, and what the file says of its Keras version, training config
// and optimizer. With `other_length` (the same file loaded with other sizes for its free input
// dimensions), what differs between the two prints as None, or as depending on those sizes.
std::string model_summary(const LoadedModel& lm, const std::string& path,
                          const LoadedModel* other_length = nullptr);

// `nnfleet inspect`: the summary of a model file (with `weights` for an architecture file). When
// the file leaves an input dimension free (None), the model is loaded at two sizes for it and the
// summary shows what depends on it as None. Throws what load_keras_model throws.
std::string describe_model_file(const std::string& path, const std::string& weights = "");

// "34,826" and "136.04 KB".
std::string thousands(uint64_t v);
std::string human_bytes(double bytes);

}  // namespace nnfleet
