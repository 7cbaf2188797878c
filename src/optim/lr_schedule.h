// Learning-rate schedules as Keras defines them (keras/src/optimizers/schedules/
// learning_rate_schedule.py): a pure function of the optimizer step, the number of updates done
// before this one (Keras's optimizer.iterations), so a resumed or split run gets the same rate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace nnfleet {

enum class LrScheduleKind {
  kExponentialDecay,        // initial * decay_rate^(step / decay_steps)
  kPiecewiseConstantDecay,  // values[i] for boundaries[i-1] < step <= boundaries[i]
  kInverseTimeDecay,        // initial / (1 + decay_rate * step / decay_steps)
  kPolynomialDecay,         // (initial - end) * (1 - step / decay_steps)^power + end
  kCosineDecay,             // linear warmup, then initial' * ((1 - alpha) cos01 + alpha)
  kCosineDecayRestarts,     // SGDR: periods first_decay_steps * t_mul^i, peaks m_mul^i
};

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kExponentialDecay;
  std::string name;                // Keras's `name` config key, written back
  double initial = 0.001;          // initial_learning_rate
  double decay_steps = 1;          // decay_steps; first_decay_steps for restarts
  double decay_rate = 0.96;        // exponential, inverse time
  bool staircase = false;          // exponential, inverse time: floor(step / decay_steps)
  std::vector<double> boundaries;  // piecewise: strictly increasing
  std::vector<double> values;      // piecewise: boundaries.size() + 1 rates
  double end_learning_rate = 1e-4, power = 1.0;  // polynomial
  bool cycle = false;                            // polynomial
  double alpha = 0.0;                            // cosine, restarts: the floor, as a fraction
  std::optional<double> warmup_target;           // cosine: rate reached after warmup_steps
  double warmup_steps = 0;                       // cosine
  double t_mul = 2.0, m_mul = 1.0;               // restarts
};

// The rate for the update after `step` earlier updates (step >= 0).
double lr_at(const LrSchedule& s, int64_t step);

// True when `j` is a schedule object: {"class_name": "ExponentialDecay", "config": {...}} as Keras
// writes it (with or without module/registered_name), or {"ExponentialDecay": {...}} in plans.
bool is_lr_schedule(const Json& j);
// Parses a schedule; throws ConfigError naming the key and the rule, or listing the valid names.
LrSchedule parse_lr_schedule(const Json& j);
// The Keras 3 serialization ({"module", "class_name", "config", "registered_name"}).
Json lr_schedule_keras_config(const LrSchedule& s);
const std::vector<std::string>& lr_schedule_names();

}  // namespace nnfleet
