// Writing models as Keras files:
//  - .keras (Keras 3 layout, as keras/src/saving/saving_lib.py writes it in Keras 3.10):
//    config.json ({module, class_name, config, registered_name, build_config, compile_config}),
//    metadata.json ({"keras_version", "date_saved"}) and model.weights.h5 with
//    layers/<key>/vars/<i> per layer (key = snake_case class name made unique), the model's own
//    vars group, and optimizer/vars/<i> (iterations, learning_rate, then the slot variables in
//    Keras 3's order) for a model trained here;
//  - legacy .h5 (the layout of tf.keras 2.x, legacy_h5_format.py): root attributes model_config,
//    keras_version, backend (and training_config), model_weights/<layer>/<layer>/kernel:0 with
//    layer_names / weight_names attributes, and optimizer_weights as tf.keras 2.11-2.15 writes
//    them for a model trained here.
// Files are written atomically (temporary file, then rename). Throws FileError.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loss/loss.h"
#include "model/model.h"
#include "model/network.h"
#include "optim/optimizer.h"
#include "platform/files.h"

namespace nnfleet {

// The Keras version written into metadata.json (the .keras layout matches this version).
inline constexpr const char* kKerasWriteVersion = "3.10.0";
// The keras_version attribute of legacy .h5 files (the tf.keras 2.x layout).
inline constexpr const char* kKerasLegacyWriteVersion = "2.15.0";

struct KerasSaveInfo {
  // "Sequential" or "Functional"; empty: Sequential for a chain of layers, else Functional.
  // (A Functional chain read from a Keras file keeps its class when written back.)
  std::string keras_class;
  // With both set, the model is saved as compiled (compile_config / training_config).
  std::optional<LossSpec> loss;
  std::optional<OptimizerSpec> optimizer;
  // A model with several outputs: each output's loss and weight (written as Keras's loss list and
  // loss_weights); empty: `loss` for every output.
  std::vector<OutputLoss> outputs;
  std::vector<std::string> metrics;  // as the user named them ("accuracy")
  // A file's own compile metrics as it had them (a list, a list per output, or a dict by output
  // name), written instead of `metrics` when not null.
  Json metrics_config;
  // Optimizer state in Network::optimizer_state() layout (optimizer_state_floats() floats) and
  // the step count; written as optimizer/vars in .keras files when set.
  const float* optimizer_state = nullptr;
  int64_t iterations = 0;
};

// Loss, optimizer, optimizer state and iterations of a training network (only `metrics` for an
// inference network). The pointer stays valid while `net` lives.
KerasSaveInfo keras_save_info(const Network& net, std::vector<std::string> metrics = {});

struct LoadedModel;
// What a loaded Keras file says of its compile(): its class, loss (per output, with loss_weights),
// metrics, optimizer and the optimizer's variables (pointing into `lm`, valid while it lives), so
// that writing the model back keeps them. A loss or optimizer nnfleet cannot name leaves the
// model saved uncompiled (its weights and metrics kept).
KerasSaveInfo keras_save_info(const LoadedModel& lm);

// The slot variables of a legacy .h5 file's optimizer_weights as tf.keras 2.11-2.15 names and
// orders them (the keras_version the .h5 writer states): after kLegacyIterationName, for each
// trainable weight in model order its slots, "Adam/m/dense/kernel:0", "Adam/v/dense/kernel:0"
// (the rate is not a variable there). Each names layer `layer`'s param `param` and the state slot
// (optimizer_state_slots order) it holds.
struct LegacyOptimizerVar {
  std::string name;
  size_t layer, param, slot;
};
inline constexpr const char* kLegacyIterationName = "iteration:0";
std::vector<LegacyOptimizerVar> legacy_optimizer_vars(const Model& m, const OptimizerSpec& spec);

// `params` is laid out as Network::params(). Written atomically (a temporary, then a rename),
// with an fsync unless `d` says otherwise (the fleet syncs its output folder once per run).
// Both return the xxh3 of the bytes written (hash_bytes).
// `copied`, when set, is called with each range of `params` and info.optimizer_state as soon as
// the file being made holds a copy of it (each range once), before the file's HDF5 image and
// archive are made: the caller may free the range then.
using NumbersCopied = std::function<void(const float* first, size_t n)>;
// A .keras file whose model.weights.h5 has this many bytes or more is written by libzip straight
// to its file, not made in memory first (the same bytes; save_keras says why).
inline constexpr size_t kStreamedKerasBytes = size_t{1} << 20;
uint64_t save_keras(const std::string& path, const Model& m, const float* params,
                    const KerasSaveInfo& info = {}, Durability d = Durability::kSystemCrash,
                    const NumbersCopied& copied = nullptr);
uint64_t save_keras_h5(const std::string& path, const Model& m, const float* params,
                       const KerasSaveInfo& info = {}, Durability d = Durability::kSystemCrash);

// The config.json object save_keras writes (compile_config included when compiled).
Json keras_config_json(const Model& m, const KerasSaveInfo& info = {});

}  // namespace nnfleet
