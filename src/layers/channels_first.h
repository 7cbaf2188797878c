// channels_first layers (Keras data_format "channels_first", and BatchNormalization(axis=1)):
// nnfleet's kernels are channels_last, so such a layer is built as its channels_last twin wrapped
// in a layer that moves the channel axis (the first per-sample axis) to the end of its input and
// back to the front of its output, in scratch, around the twin's forward and backward. Its class
// name, parameters and Keras config are the twin's, with the original data_format/axis restored,
// so writers write the file back as it was. An output of rank 1 (Flatten, global pooling) is not
// moved back: Keras flattens channels_first tensors in NHWC order too.
#pragma once

#include <memory>
#include <string_view>

#include "layers/layer.h"

namespace nnfleet {

// When `config` of `class_name` (a registry class name, aliases resolved) asks for a
// channels_first layer: the channels_last twin's config in `twin` and the keys to write back in
// `restore`; false otherwise (the layer is built as usual).
bool channels_first_twin_config(std::string_view class_name, const Json& config, Json* twin,
                                Json* restore);

// Wraps the channels_last twin built from the config channels_first_twin_config() gave.
std::unique_ptr<Layer> wrap_channels_first(std::unique_ptr<Layer> twin, Json restore);

// The channels_last twin when `l` is a channels_first wrapper, else nullptr (ONNX export).
const Layer* channels_last_twin(const Layer& l);

}  // namespace nnfleet
