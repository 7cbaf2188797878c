// Keras's model.evaluate on top of the prediction engine (predict_engine.h), shared by
// Model::evaluate (nnfleet/model.h) and `nnfleet evaluate`: which metrics each output reports
// (the caller's, or the file's compile metrics), and the figures in Keras's order. The loss is
// the mean of the per-sample losses; with several outputs "loss" is the loss_weights-weighted sum
// of the outputs' losses, and each output's figures are named "<output>_loss", "<output>_<metric>".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "api/predict_engine.h"

namespace nnfleet::api_detail {

using Figures = std::vector<std::pair<std::string, double>>;

// Resolves output j's metrics (`metrics` for every output, or the file's "metrics": a list for
// every output, a list of lists in output order, or a dict by output name) into targets[j] and
// returns their keys ("accuracy", ...), per output: every metric training computes (MetricSet),
// the epoch-level ones (auc, precision, recall, root_mean_squared_error, r2_score) included.
// Throws UsageError naming `model_path`.
std::vector<std::vector<std::string>> add_metrics(const Wording& w, const LoadedModel& lm,
                                                  const std::string& model_path,
                                                  const std::vector<std::string>& metrics,
                                                  std::vector<OutputTargets>& targets);

// "loss", then per output its loss (several outputs) and metrics, from the per-sample losses of
// each output (n each) and the engine's metric values.
Figures evaluation_figures(const LoadedModel& lm, const std::vector<std::vector<std::string>>& keys,
                           const std::vector<const float*>& losses, int64_t n,
                           const PredictTotals& totals);

}  // namespace nnfleet::api_detail
