// FleetData: the datasets one job trains and evaluates on, as the fleet holds them (loaded once
// per source by fleet/fleet_data.h and shared read-only by every worker). Train rows [0, n_train)
// are trained on; rows [n_train, n_train + n_val) are the validation split (Keras: the last
// fraction of the training data, taken before shuffling).
// A types header in fit/ because the fit loop reads these rows; loading, checking and sharing
// them is the fleet's job, so the loaders stay in fleet/fleet_data.h.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace nnfleet {

// What one source's targets hold, for validating them against each model's loss and output
// before training (every value is finite: load_fleet_data refuses NaN and infinities).
struct LabelStats {
  bool integral = true;  // every value a whole number
  double min = 0.0, max = 0.0;
};

// The vocabularies string layers adapted on a FleetData's training rows (string_front.h).
struct AdaptedVocabularies;
std::shared_ptr<AdaptedVocabularies> new_adapted_vocabularies();

struct FleetData {
  XY train;
  std::optional<XY> test;
  float scale = 1.0f;
  int64_t n_train = 0, n_val = 0;
  Shape input_shape;                  // per sample
  LabelStats train_labels;            // train and its validation split
  LabelStats test_labels;             // when test is set
  std::string train_name, test_name;  // "'x.npy' and 'y.npy'", for messages (describe_source)
  // Models with several inputs or outputs: the second and later inputs and targets of train and
  // of test (DataSource::more_x, more_y), each with the rows of train.x (test->x).
  struct More {
    std::vector<Array> x, y;
    std::vector<LabelStats> y_labels;  // per y
  };
  More more, test_more;
  // Every input's per-sample shape, in order (the first is input_shape).
  std::vector<Shape> input_shapes;
  // Input k (0: train.x) and target j (0: train.y) of train, or of test.
  const Array& x(size_t k, bool of_test = false) const {
    const XY& d = of_test ? *test : train;
    return k == 0 ? d.x : (of_test ? test_more : more).x[k - 1];
  }
  const Array& y(size_t j, bool of_test = false) const {
    const XY& d = of_test ? *test : train;
    return j == 0 ? d.y : (of_test ? test_more : more).y[j - 1];
  }
  const LabelStats& labels(size_t j, bool of_test = false) const {
    return j == 0 ? (of_test ? test_labels : train_labels)
                  : (of_test ? test_more : more).y_labels[j - 1];
  }
  size_t num_x() const { return 1 + more.x.size(); }
  size_t num_y() const { return 1 + more.y.size(); }
  // Keras's sample_weight of every train row (validation rows included) and of every test row,
  // as float32; empty: the source has none.
  std::vector<float> train_weights, test_weights;
  // Shared by the copies of this data: a vocabulary is adapted once per run, while the plan is
  // validated, and the job built again later reuses it (as does every model with the same
  // TextVectorization config).
  std::shared_ptr<AdaptedVocabularies> adapted = new_adapted_vocabularies();
  size_t bytes() const;
};

}  // namespace nnfleet
