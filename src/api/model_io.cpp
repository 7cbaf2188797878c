// Model-file hooks for the fleet: `keras:` models are read with the Keras loader, trained
// models are written as Keras 3 `.keras` files (or legacy `.h5` with --format h5; with --format
// onnx, a `.keras` file and an `.onnx` export beside it).
#include "api/model_io.h"

#include "io/keras/keras_reader.h"
#include "io/keras/keras_writer.h"
#include "io/onnx/onnx_writer.h"
#include "layers/layer_util.h"

namespace nnfleet::api_detail {

ModelIo model_io(ModelFormat format) {
  ModelIo io;
  io.load = [format](const ModelSpec& spec, const Shape& input_shape, std::vector<float>& params) {
    LoadedModel m = load_keras_model(spec.keras, "", &input_shape);  // free dims from the data
    const ModelInput& in = m.model->input(0);
    if (!((in.is_string ? in.string_shape : in.shape) == input_shape))
      throw ModelError("the model in '" + spec.keras + "' takes inputs of shape " +
                       keras_shape(m.model->input_shape()) + "; expected the data's shape " +
                       keras_shape(input_shape));
    if (m.has_weights) params = std::move(m.params);
    // The plan's name, not the file's, names the trained model.
    return m.model;
  };
  // What the trained model will be written as must be able to hold it: found while the plan is
  // validated (a Keras 2 hard_sigmoid has no name in .keras, a masked LSTM's repeated outputs no
  // ONNX form), not after training.
  io.check = [format](const Model& m) {
    if (format != ModelFormat::kH5) {
      try {
        (void)keras_config_json(m, KerasSaveInfo{});
      } catch (const FileError& e) {
        throw ModelError(std::string(e.what()) + "\nhint: train with --format h5");
      }
    }
    if (format == ModelFormat::kOnnx) {
      try {
        check_onnx_export(m);
      } catch (const ModelError& e) {
        throw ModelError(std::string(e.what()) + "\nhint: train with --format keras");
      }
    }
  };
  io.optimizer = [](const ModelSpec& spec, const Shape& input_shape) {
    LoadedModel m = load_keras_model(spec.keras, "", &input_shape);
    if (m.optimizer_state.empty()) {
      const Json& info = m.optimizer_state_info;
      std::string holds = "no optimizer variables";
      if (info.is_object()) holds = "optimizer variables (" + info.dump() + ") it cannot restore";
      throw ModelError("failed to restore the optimizer of model '" + spec.name + "' from '" +
                       spec.keras + "': the file holds " + holds +
                       "; expected a file saved after training with its optimizer (SGD, Adam, "
                       "AdamW, RMSprop or Adagrad): a Keras 3 .keras file, or an .h5 file in "
                       "tf.keras 2.11-2.15's layout (as nnfleet writes it); or restore_optimizer: "
                       "false");
    }
    return RestoredOptimizer{m.optimizer, std::move(m.optimizer_state), m.iterations};
  };
  io.save = [format](Network& net, const ModelSpec& spec, const std::string& stem) {
    const KerasSaveInfo info = keras_save_info(net, spec.metrics);
    if (format == ModelFormat::kH5)
      return SavedModel{stem + ".h5", save_keras_h5(stem + ".h5", net.model(), net.params(), info,
                                                    Durability::kProcessCrash)};
    // An export that fails for the model itself (ModelError; io.check let it pass) loses nothing:
    // the .keras file is written all the same and the error reported with it. A failed write
    // (FileError) is the output folder's, and stops the run as any other.
    std::string export_error;
    if (format == ModelFormat::kOnnx) {
      std::string bytes;
      try {
        bytes = onnx_model_bytes(net.model(), net.params());
      } catch (const ModelError& e) {
        export_error = "model '" + spec.name + "': " + e.what();
      }
      if (export_error.empty()) write_file_atomic(stem + ".onnx", bytes, Durability::kProcessCrash);
    }
    // The .keras file is the network's last use: its working memory goes first, and each of its
    // numbers as soon as the file holds a copy (Network::discard_working_memory says why).
    net.discard_working_memory();
    return SavedModel{
        stem + ".keras",
        save_keras(stem + ".keras", net.model(), net.params(), info, Durability::kProcessCrash,
                   [&net](const float* first, size_t n) { net.discard_numbers(first, n); }),
        export_error};
  };
  return io;
}

}  // namespace nnfleet::api_detail
