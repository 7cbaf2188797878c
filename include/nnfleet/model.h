// nnfleet's public API: a Keras model, loaded from a file or trained by a run (run.h).
//
// A Model is immutable once loaded: its architecture and weights never change, so any number of
// threads may call its const methods at once (predict, save, summary). Copies share the same
// immutable model (cheap). Every method that can fail because of its input throws a subclass of
// nnfleet::Error (include/nnfleet/error.h) whose message is the one `nnfleet` prints.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nnfleet/array.h"
#include "nnfleet/error.h"

namespace nnfleet::api {

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // per sample (without the batch axis)
};

// A sample shape the way messages write it: "[None,28,28]" (None: a dimension left free).
std::string shape_text(const std::vector<int64_t>& shape);
// Whether samples of shape `data` can feed an input of shape `input` (free dimensions match
// anything): the same dimensions once the 1s are dropped, so [28,28] feeds [28,28,1].
bool sample_shape_fits(const std::vector<int64_t>& data, const std::vector<int64_t>& input);

// A sample shape for an input of a model file that leaves dimensions free; `name` (may be empty:
// inputs in order) picks the input by name.
struct InputShape {
  std::string name;
  std::vector<int64_t> shape;
};

// How messages name the caller's options: the Python module's keywords by default, the command
// line's flags for `nnfleet predict` ("--loss ", "--scale ", "--metrics").
struct Spelling {
  std::string loss = "loss=";
  std::string scale = "scale=";
  std::string metrics = "metrics=";
};

// What a prediction took: seconds over all rows, the workers that ran it, and with targets the
// loss of each output by its Keras name ("categorical_crossentropy").
struct RunStats {
  double seconds = 0.0;
  int workers = 0;
  std::vector<std::string> losses;
};

struct PredictOptions {
  int batch_size = 256;  // rows a worker takes at a time
  int workers = 0;       // pinned worker threads; 0: one per core this process may use
  double scale = 1.0;    // multiplies the inputs (e.g. 1/255)
  // The loss of the per-sample losses ("categorical_crossentropy", ...); empty: the model
  // file's own (compile's loss), else predict throws UsageError.
  std::string loss;
  // How messages name the inputs and targets ("x", "y"; one per input / output). Empty: "x",
  // "x[1]", ..., "y", "y[1]", ...
  std::vector<std::string> x_names, y_names;
  Spelling spelling;
};

struct EvaluateOptions : PredictOptions {
  // Metrics to report for every output ("accuracy", "mae", ...); empty: the model file's own
  // (compile's metrics: a list, a list per output, or a dict by output name).
  std::vector<std::string> metrics;
};

class Model {
 public:
  // Reads a Keras file (.keras, legacy .h5, or a to_json() .json with `weights`, a
  // save_weights() .h5). `input_shapes` (per sample, one per input) fills dimensions the file
  // leaves free (None); empty: they must all be given. Throws FileError, ModelError, DataError.
  [[nodiscard]] static Model load(const std::string& path, const std::string& weights = "",
                                  const std::vector<std::vector<int64_t>>& input_shapes = {});
  // The same with shapes that name their inputs (an .npz of named inputs), or an empty name for
  // the next input in order.
  [[nodiscard]] static Model load(const std::string& path, const std::string& weights,
                                  const std::vector<InputShape>& input_shapes);

  // The table `nnfleet inspect` prints: layers, output shapes, parameters, and what the file
  // says of its training configuration.
  [[nodiscard]] const std::string& summary() const;
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  int64_t count_params() const;  // trainable and non-trainable
  bool has_weights() const;
  // The file it was loaded from (for a trained model: where the run saved it).
  const std::string& path() const;

  // Predictions of every output for the rows of `x` (one view per input, in inputs() order,
  // each of the same number of rows N, samples of the input's shape or that shape with its 1s
  // dropped). `predictions[j]` receives N x outputs()[j] floats; with `y` (one view per output),
  // `losses[j]` receives the N per-sample losses of output j. Buffers are the caller's, at least
  // that large (else UsageError); results do not depend on `workers`. Throws DataError (shapes,
  // labels), UsageError (no loss known, no weights, a buffer too small), ModelError.
  RunStats predict(const std::vector<ArrayView>& x,
                   const std::vector<std::span<float>>& predictions,
                   const PredictOptions& options = {}, const std::vector<ArrayView>& y = {},
                   const std::vector<std::span<float>>& losses = {}) const;

  // Keras's evaluate on the rows of `x` with targets `y` (one view per output): ("loss", the mean
  // per-sample loss; with several outputs the loss_weights-weighted sum of the outputs'), then
  // per output its loss ("<output>_loss", several outputs only) and metrics ("accuracy", or
  // "<output>_accuracy"), in that order; the same figures as `nnfleet evaluate`, for any
  // `workers`. Throws as predict() does, and UsageError for a metric that does not fit.
  // `losses` (empty, or one buffer of N floats per output) receives the per-sample losses, and
  // `stats` what the pass took.
  [[nodiscard]] std::vector<std::pair<std::string, double>> evaluate(
      const std::vector<ArrayView>& x, const std::vector<ArrayView>& y,
      const EvaluateOptions& options = {}, const std::vector<std::span<float>>& losses = {},
      RunStats* stats = nullptr) const;

  // Writes the model with its weights, by the extension: Keras 3 `.keras`, legacy `.h5`, or
  // `.onnx` (standard operators, opset 13, a dynamic batch axis). Atomic (a temporary file, then
  // a rename). Throws FileError, UsageError (other extension), ModelError (a layer ONNX export
  // does not cover, named).
  void save(const std::string& path) const;
  // The model's layers (as summary() lists them).
  size_t count_layers() const;

 private:
  struct Impl;
  friend struct ModelAccess;  // the library's own door to Impl (src/api/model_impl.h)
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// The table `nnfleet inspect` prints for a Keras file (layers, output shapes with None for free
// dimensions, parameters, the file's Keras version and training configuration), which needs
// neither weights nor fixed input shapes. Throws FileError, ModelError.
[[nodiscard]] std::string describe_model(const std::string& path, const std::string& weights = "");

}  // namespace nnfleet::api
