// Keras's adapt() for a plan: the data-dependent state of the preprocessing layers, computed once
// per model over its training rows (rows [0, n_train) of its source, never the validation split
// or the test data) before training: Normalization's mean, variance and count (weights, filled
// when the job initializes its weights; a model from a Keras file keeps the file's), and
// Discretization's bin boundaries (config, filled into the plan's layer before the model is
// built). Deterministic: the rows are read in order and summed in double, so the result does
// not depend on the number of workers or on batch sizes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fleet/fit/data_view.h"
#include "model/network.h"
#include "plan/plan.h"

namespace nnfleet {

// Why the model cannot be adapted from `data`, one problem per layer ("layer 'normalization' (at
// 2) adapts its mean and variance from the data of a model input; expected it to take a model
// input directly, it takes 'dense'"); empty when it can (or has nothing to adapt).
std::vector<std::string> adapt_problems(const Model& m, const FleetData& data);

// `spec` with the bin_boundaries of a first-layer Discretization that has only num_bins adapted
// from the training values of the model input; nullopt when there is none (or the spec is a Keras
// file's). A Discretization elsewhere is left as it is: building it then fails with a
// message saying it needs boundaries. Throws ModelError when there are no training rows.
std::optional<ModelSpec> adapted_spec(const ModelSpec& spec, const FleetData& data);

// Whether the model has layers to adapt.
bool needs_adapt(const Model& m);

// Fills the adapted weights of every adapting layer of `net` from the training rows of `data`.
// Call after initialize(). Throws ModelError with the first of adapt_problems() when there are
// any.
void adapt_weights(const FleetData& data, Network& net);

}  // namespace nnfleet
