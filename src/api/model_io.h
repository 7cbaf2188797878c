// The model-file hooks the fleet uses: building `keras:` models and saving trained ones.
#pragma once

#include "fleet/fleet.h"

namespace nnfleet::api_detail {

enum class ModelFormat { kKeras, kH5 };

ModelIo model_io(ModelFormat format = ModelFormat::kKeras);

}  // namespace nnfleet::api_detail
