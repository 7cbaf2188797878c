// The numeric preprocessing layers' data-dependent state (Keras's adapt()), computed from data
// outside the layer: Normalization's mean and variance, Discretization's bin boundaries. The
// fleet runs these once per model over its training rows (fleet/fit/adapt.h); they are plain
// math over rows of floats so that the plan, the Python API and the tests compute the same.
#pragma once

#include <cstdint>
#include <vector>

#include "layers/layer.h"

namespace nnfleet {

// Whether `layer` is a Normalization whose mean and variance are weights to adapt (its config
// gives none), as opposed to constants from its config.
bool normalization_adapts(const Layer& layer);

// What a Normalization computes over per-sample input `in`: y = (x - mean) / divisor (with
// invert, mean + x * divisor), mean and divisor of shape `dims` ([in] with 1 on every reduced
// axis, row-major), for exporters. `params` are its weights (ignored when it has none).
struct NormalizationConstants {
  std::vector<int64_t> dims;
  std::vector<float> mean, divisor;
  bool invert = false;
};
NormalizationConstants normalization_constants(const Layer& layer, const Shape& in,
                                               const float* const* params);

// Normalization's adapt over a per-sample input shape `in`: accumulates rows in order, in double,
// and writes the population mean and variance of every kept position (the Keras axis) over the
// batch and the reduced axes, and the count of values each summarizes (tf.keras's `count`).
// Keras's own adapt computes the same numbers (np.mean / np.var over the reduced axes).
class NormalizationStats {
 public:
  NormalizationStats(const Layer& layer, const Shape& in);
  // rows [n, in] in order; call for every chunk of the data, then finish (two passes: the mean
  // first, so the variance sums squares of deviations and does not cancel).
  void add_for_mean(const float* rows, int64_t n);
  void add_for_variance(const float* rows, int64_t n);
  // mean and variance [kept], count a scalar: the layer's three weights.
  void finish(float* mean, float* variance, float* count) const;
  int64_t kept() const { return static_cast<int64_t>(sum_.size()); }

 private:
  Shape in_;
  unsigned mask_ = 0;
  std::vector<double> sum_, sq_;
  std::vector<int64_t> n_;
};

// Whether `layer` is a Discretization with num_bins but no bin_boundaries (they are to be adapted).
bool discretization_adapts(const Layer& layer);

// Discretization's adapt over `values` (every value of the training rows, as float32): Keras 3's
// quantile summary of one batch (keras/src/layers/preprocessing/discretization.py: summarize,
// merge_summaries, compress_summary, get_bin_boundaries): the sorted values sampled every
// max(n * epsilon, 1), compressed to 1/epsilon points by interpolating cumulative weights, then
// to num_bins points, whose first num_bins - 1 are the boundaries. Sorts `values`.
std::vector<double> discretization_boundaries(std::vector<float>& values, int64_t num_bins,
                                              double epsilon);

}  // namespace nnfleet
