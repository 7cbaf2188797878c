// FleetData: the datasets of a plan, loaded once and shared read-only by every worker. A plan
// has one FleetData per distinct source (Plan::sources): the plan's `data:` and the models' own.
// Train rows [0, n_train) are trained on; rows [n_train, n_train + n_val) are the validation
// split (Keras: the last fraction of the training data, taken before shuffling).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "fleet/plan.h"

namespace nnfleet {

// What one source's targets hold, for validating them against each model's loss and output
// before training (every value is finite: load_fleet_data refuses NaN and infinities).
struct LabelStats {
  bool integral = true;  // every value a whole number
  double min = 0.0, max = 0.0;
};

struct FleetData {
  XY train;
  std::optional<XY> test;
  float scale = 1.0f;
  int64_t n_train = 0, n_val = 0;
  Shape input_shape;  // per sample
  LabelStats train_labels;  // train and its validation split
  LabelStats test_labels;   // when test is set
  std::string train_name, test_name;  // "'x.npy' and 'y.npy'", for messages (describe_source)
  // Keras's sample_weight of every train row (validation rows included) and of every test row,
  // as float32; empty: the source has none.
  std::vector<float> train_weights, test_weights;
  size_t bytes() const;
};

// The files of a source as messages name them: "'data.npz'", "'x.npy' and 'y.npy'".
std::string describe_source(const DataSource& s);

// Loads one source; throws DataError naming the file and the problem.
XY load_source(const DataSource& s);
// Loads train (and test) of a plan and checks they agree (same sample shape, x and y rows) and
// hold only finite values; throws DataError naming the file, the row and the column.
// A model's own source (spec.where set) names the model and the plan line in its errors.
FleetData load_fleet_data(const DataSpec& spec);

// Every source of a plan, in Plan::sources order, each loaded once. Throws DataError listing
// every source that failed (all of them, not only the first).
std::vector<FleetData> load_plan_data(const std::vector<DataSpec>& sources);

// The bytes held by every source together (memory estimates).
size_t data_bytes(const std::vector<FleetData>& data);

}  // namespace nnfleet
