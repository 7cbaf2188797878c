// Between the public API's types (include/nnfleet/) and the engine's.
#pragma once

#include <string>

#include "data/dataset.h"
#include "nnfleet/array.h"

namespace nnfleet::api_detail {

// A view of the caller's bytes as an engine Array (nothing copied, nothing owned). `what` names
// it in messages. Throws DataError (a null pointer, a rank the engine cannot hold, a negative
// dimension).
Array to_array(const api::ArrayView& v, const std::string& what);

std::vector<int64_t> dims(const Shape& s);

}  // namespace nnfleet::api_detail
