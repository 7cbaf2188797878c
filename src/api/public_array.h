// The engine's arrays as the public, owning ones of nnfleet/data.h. A header apart from convert.h:
// inside namespace nnfleet::api the public Array would hide the engine's in every file that
// includes it.
#pragma once

#include "data/dataset.h"
#include "nnfleet/data.h"

namespace nnfleet::api_detail {

// A view of the engine array's bytes, which the public Array keeps alive (nothing copied).
api::Array to_public(const Array& a);

}  // namespace nnfleet::api_detail
