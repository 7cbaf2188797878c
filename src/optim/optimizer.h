// Optimizers with Keras 3 defaults and update rules, as flat loops over the model's arena: all
// trainable parameters are one contiguous array, their gradients another, and the optimizer state
// a third. Variables (one per ParamSpec) are given as [offset, size) ranges for per-variable
// clipping. Not thread-safe per instance; each model has its own state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "optim/lr_schedule.h"

namespace nnfleet {

enum class OptKind { kSGD, kAdam, kAdamW, kRMSprop, kAdagrad };

struct OptimizerSpec {
  OptKind kind = OptKind::kAdam;
  double learning_rate = 0.001;        // the rate of the first update when `schedule` is set
  std::optional<LrSchedule> schedule;  // a Keras learning-rate schedule in place of the number
  double momentum = 0.0;               // SGD, RMSprop
  bool nesterov = false;               // SGD
  double beta_1 = 0.9, beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;                    // Adam, AdamW
  double weight_decay = 0.0;               // any optimizer (AdamW default 0.004)
  double rho = 0.9;                        // RMSprop
  bool centered = false;                   // RMSprop
  double initial_accumulator_value = 0.1;  // Adagrad
  double clipnorm = 0.0;                   // per variable, 0 = off
  double global_clipnorm = 0.0;            // over all variables, 0 = off
  double clipvalue = 0.0;                  // element-wise, 0 = off
};

// Parses {"Adam": {"learning_rate": 0.001}}, "adam", or Keras's {"class_name": "Adam", "config":
// {...}}; learning_rate may be a schedule (lr_schedule.h). Throws ConfigError naming the key, or
// listing valid optimizer names.
OptimizerSpec parse_optimizer(const Json& j);
std::string optimizer_class(OptKind k);  // "Adam"
// The rate of the update after `iteration` earlier ones (Keras's optimizer.learning_rate then).
double learning_rate_at(const OptimizerSpec& s, int64_t iteration);
const std::vector<std::string>& optimizer_names();
// Keras 3 config object ({"name": "adam", "learning_rate": ..., ...}).
Json optimizer_keras_config(const OptimizerSpec& s);

struct VarRange {
  size_t offset, size;
};

// Floats of state the optimizer needs for n trainable parameters (e.g. 2n for Adam, 3n amsgrad).
size_t optimizer_state_floats(const OptimizerSpec& s, size_t n);
// Initializes state (e.g. Adagrad's accumulators).
void optimizer_init_state(const OptimizerSpec& s, size_t n, float* state);
// One update. `iteration` counts from 0 (Keras's optimizer.iterations before the step). Gradients
// may be modified in place by clipping.
void optimizer_step(const OptimizerSpec& s, int64_t iteration, size_t n, float* params,
                    float* grads, float* state, const std::vector<VarRange>& vars);
// optimizer_step in two parts, for updating one model's parameters on several threads:
// clip_gradients over all gradients first (a no-op unless clipnorm, global_clipnorm or clipvalue
// is set), then the element-wise update of parameters [begin, end). Any split of [0, n) into
// ranges gives exactly the result of optimizer_step.
void clip_gradients(const OptimizerSpec& s, size_t n, float* grads,
                    const std::vector<VarRange>& vars);
void optimizer_update(const OptimizerSpec& s, int64_t iteration, size_t n, float* params,
                      float* grads, float* state, size_t begin, size_t end);
// Names of each state slot, Keras-style, for writing .keras optimizer vars ("m", "v", "vhat").
std::vector<std::string> optimizer_state_slots(const OptimizerSpec& s);

}  // namespace nnfleet
