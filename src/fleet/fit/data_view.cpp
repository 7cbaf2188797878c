// The bytes a FleetData holds (data_view.h).
#include "fleet/fit/data_view.h"

namespace nnfleet {

size_t FleetData::bytes() const {
  size_t b = train.x.size_bytes() + train.y.size_bytes();
  if (test) b += test->x.size_bytes() + test->y.size_bytes();
  for (const More* m : {&more, &test_more})
    for (const auto* v : {&m->x, &m->y})
      for (const Array& a : *v) b += a.size_bytes();
  b += (train_weights.size() + test_weights.size()) * sizeof(float);
  return b;
}

}  // namespace nnfleet
