// FleetData: the datasets of a plan, loaded once and shared read-only by every worker.
// Train rows [0, n_train) are trained on; rows [n_train, n_train + n_val) are the validation
// split (Keras: the last fraction of the training data, taken before shuffling).
#pragma once

#include <optional>
#include <string>

#include "data/dataset.h"
#include "fleet/plan.h"

namespace nnfleet {

struct FleetData {
  XY train;
  std::optional<XY> test;
  float scale = 1.0f;
  int64_t n_train = 0, n_val = 0;
  Shape input_shape;  // per sample
  // Label statistics of train (and test), for validating losses before training.
  bool labels_integral = true;
  double label_min = 0.0, label_max = 0.0;
  size_t bytes() const;
};

// Loads one source; throws DataError naming the file and the problem.
XY load_source(const DataSource& s);
// Loads train (and test) of a plan and checks they agree (same sample shape, x and y rows).
FleetData load_fleet_data(const DataSpec& spec);

}  // namespace nnfleet
