// The prediction engine behind Model::predict and `nnfleet predict`: one Keras model over N rows
// on pinned workers that share its weights read-only, writing into caller-owned buffers. The
// rows are cut into fixed-size chunks handed out from an atomic counter; each chunk's outputs land
// in its own rows, so results do not depend on the number of workers.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "io/keras_reader.h"
#include "loss/loss.h"

namespace nnfleet::api_detail {

// Whether data samples of shape `d` can feed a model input `m`: the same dimensions once the
// 1s are dropped (so [28,28] feeds [28,28,1]), which keeps the row-major layout.
bool compatible(const Shape& d, const Shape& m);

// Input `k` (named `file` in messages) against the model loaded from `model_path`: its sample
// shape, and the ids an Embedding reads from it. Throws DataError, UsageError.
void check_input(const std::string& model_path, double scale, const Model& model, size_t k,
                 const Array& x, const std::string& file);

// One output's targets, converted once for all chunks, and its loss.
struct OutputTargets {
  LossSpec loss;
  std::vector<int32_t> labels;
  std::vector<float> values;
};

// The targets `y` (named `y_file`) of an output of shape `out_shape` for `n` rows. Throws
// DataError (shape, labels out of range).
OutputTargets make_targets(const Array& y, const std::string& y_file, const LossSpec& loss,
                           const Shape& out_shape, int64_t n);

struct PredictJob {
  const LoadedModel* lm = nullptr;
  const std::vector<Array>* x = nullptr;                // one per model input, n rows each
  const std::vector<OutputTargets>* targets = nullptr;  // empty or one per output
  int64_t n = 0;
  int batch = 256;
  int workers = 0;  // 0: one per allowed core
  float scale = 1.0f;
  std::vector<float*> predictions;  // per output: n x output size
  std::vector<float*> losses;       // per output: n (with targets)
};

// Runs the job; returns the number of workers used. Rethrows the first worker's exception.
int run_predict_job(const PredictJob& job);

}  // namespace nnfleet::api_detail
