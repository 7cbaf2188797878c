// Model-file hooks for the fleet.
#include "cli/model_io.h"

namespace nnfleet::cli {

ModelIo model_io() { return {}; }

}  // namespace nnfleet::cli
