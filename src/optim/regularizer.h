// Keras weight and activity regularizers (L1, L2, L1L2) and weight constraints (MaxNorm, NonNeg,
// UnitNorm, MinMaxNorm), as specs read from Keras configs and plans plus their math over flat
// float spans. Regularizers add l1 * sum|w| + l2 * sum w^2 to the training loss
// (keras/src/regularizers/regularizers.py); constraints project a variable after each optimizer
// update (keras/src/constraints/constraints.py). The functions never allocate or throw.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/config.h"
#include "tensor/shape.h"

namespace nnfleet {

struct Regularizer {
  double l1 = 0.0, l2 = 0.0;
  // Non-empty for a Keras regularizer nnfleet does not compute (OrthogonalRegularizer): the
  // model loads and predicts, training is refused with this reason.
  std::string refusal;
  bool active() const { return l1 != 0.0 || l2 != 0.0; }
};

// Reads a regularizer as Keras writes it ({"class_name": "L2", "config": {"l2": 0.01}}, Keras 2's
// {"class_name": "L1L2", "config": {"l1": 0.0, "l2": 0.001}}, Keras 3's module form) or as a plan
// names it ("l1", "l2", "l1_l2", "L2", ...), with Keras's defaults: L1 and L2 0.01, the class
// L1L2 0 and 0, the name "l1_l2" 0.01 and 0.01 (tf.keras and the Keras 3 documentation). Throws
// ConfigError(key) for anything else.
Regularizer parse_regularizer_spec(const Json& v, const std::string& key);
// The Keras 3 form of a regularizer ({"module", "class_name": "L1L2", "config", ...}).
Json regularizer_to_keras(const Regularizer& r);

// l1 * sum|x| + l2 * sum x^2 over x[0, n), in double.
double regularizer_penalty(const Regularizer& r, const float* x, size_t n);
// g[i] += scale * (l1 * sign(x[i]) + 2 * l2 * x[i]) (sign(0) = 0, as TensorFlow's |x|').
void regularizer_grad(const Regularizer& r, const float* x, float* g, size_t n, double scale);

enum class ConstraintKind { kMaxNorm, kNonNeg, kUnitNorm, kMinMaxNorm };

struct Constraint {
  ConstraintKind kind = ConstraintKind::kNonNeg;
  double min_value = 0.0, max_value = 2.0, rate = 1.0;
  std::vector<int> axes{0};  // the axes the norm runs over (Keras's `axis`, default 0)
  std::string refusal;       // as Regularizer::refusal (a constraint class nnfleet lacks)
};

// Reads a constraint ({"class_name": "MaxNorm", "config": {"max_value": 2, "axis": 0}}, Keras 2
// and 3 forms, or a plan's "max_norm", "non_neg", "unit_norm", "min_max_norm", "NonNeg", ...)
// with Keras's defaults (MaxNorm max_value 2, MinMaxNorm 0..1 rate 1, axis 0). Throws
// ConfigError(key).
Constraint parse_constraint_spec(const Json& v, const std::string& key);
// Axes normalized for a variable of `shape` (negative counted from the end); false when an axis
// is outside it.
bool resolve_constraint_axes(Constraint& c, const Shape& shape);
// Projects w (laid out as `shape`, row-major) in place, as Keras's constraint __call__:
// w * clip(norm) / (1e-7 + norm) with the norms over c.axes (NonNeg: max(w, 0)).
void apply_constraint(const Constraint& c, const Shape& shape, float* w);

}  // namespace nnfleet
