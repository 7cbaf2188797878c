// The one prediction engine behind Model::predict (nnfleet/model.h), `nnfleet predict` and
// `nnfleet evaluate`: a loaded Keras model over N rows on pinned workers that share its weights
// read-only, writing predictions and per-sample losses into buffers the caller owns. The rows
// are cut into fixed-size contiguous chunks handed out from an atomic counter; each chunk's
// outputs, losses and metric sums land in its own slots (the sums are added in chunk order), so
// results do not depend on the number of workers.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "io/keras/keras_reader.h"
#include "loss/loss.h"

namespace nnfleet::api_detail {

// How messages name the caller's choices: the verb ("predict", "evaluate") and the spelling of
// the loss and scale options ("--loss" for the CLI, "loss=" for Python).
struct Wording {
  std::string verb = "predict";
  std::string loss_option = "--loss ";
  std::string scale_option = "--scale ";
  std::string metrics_option = "--metrics";
};

// Whether data samples of shape `d` can feed a model input `m`: the same dimensions once the
// 1s are dropped (so [28,28] feeds [28,28,1]), which keeps the row-major layout.
bool compatible(const Shape& d, const Shape& m);

// The scale the inputs are multiplied by: a finite number float32 can hold (NaN, infinity or
// 1e39 would make every output NaN or infinite). Throws UsageError naming w.scale_option.
void check_scale(const Wording& w, const std::string& model_path, double scale);

// Input `k` (named `file` in messages) against the model loaded from `model_path`: its sample
// shape, the scale (check_scale, and no scaled value beyond float32's range), and the ids an
// Embedding reads from it. Throws DataError, UsageError.
void check_input(const Wording& w, const std::string& model_path, double scale, const Model& model,
                 size_t k, const Array& x, const std::string& file);

// One output's targets, converted once for all chunks, its loss and the metrics to compute on
// it: the same MetricSet training uses, so evaluate reports every metric training does (AUC,
// precision, recall, RMSE, R2 included) with training's formulas.
struct OutputTargets {
  LossSpec loss;
  std::vector<int32_t> labels;
  std::vector<float> values;
  MetricSet metrics;
};

// Output j's targets `y` (named `y_file`) for an output of shape `out_shape` and `n` rows:
// integer labels, or values; integer labels with categorical_crossentropy become one-hot rows.
// Throws DataError (shape, labels out of range, never wrapped into another class).
OutputTargets make_targets(const Array& y, const std::string& y_file, const LossSpec& loss,
                           const Shape& out_shape, int64_t n);

// Output j's loss: `loss` (a name) for all when given, else the model file's (one for all, a
// list in output order, or a dict by output name, as Keras's compile takes them). Throws
// UsageError when there is none.
LossSpec output_loss(const Wording& w, const LoadedModel& lm, const std::string& model_path,
                     const std::string& loss, size_t j);

struct PredictJob {
  const LoadedModel* lm = nullptr;
  const std::vector<Array>* x = nullptr;                // one per model input, n rows each
  const std::vector<OutputTargets>* targets = nullptr;  // empty or one per output
  int64_t n = 0;
  int batch = 256;  // rows per chunk
  int workers = 0;  // 0: one per allowed core (never more than the chunks)
  float scale = 1.0f;
  std::vector<float*> predictions;  // per output: n x output size floats
  std::vector<float*> losses;       // per output: n floats (with targets)
};

struct PredictTotals {
  // Per output and metric: its value over all n rows (MetricSet::value of the chunks' states
  // summed in chunk order, so it does not depend on the workers).
  std::vector<std::vector<double>> metric_values;
  double seconds = 0.0;
  int workers = 1;
};

// Runs the job. Rethrows the first worker's exception (the others stop after their chunk).
PredictTotals run_predict_job(const PredictJob& job);

}  // namespace nnfleet::api_detail
