// The model-file hooks the fleet uses: building `keras:` models and saving trained ones.
#pragma once

#include "fleet/fleet.h"

namespace nnfleet::cli {

ModelIo model_io();

}  // namespace nnfleet::cli
