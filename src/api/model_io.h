// The model-file hooks the fleet uses: building `keras:` models and saving trained ones.
#pragma once

#include "fleet/fleet.h"

namespace nnfleet::api_detail {

// kOnnx writes the .keras file and an .onnx export of the same model beside it.
enum class ModelFormat { kKeras, kH5, kOnnx };

ModelIo model_io(ModelFormat format = ModelFormat::kKeras);

}  // namespace nnfleet::api_detail
