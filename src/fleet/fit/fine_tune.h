// Fine-tuning a `keras:` model as a plan asks: freeze layers by name or index, or train only
// from a named layer on (Keras's transfer-learning recipe: base.trainable = False, or every
// layer before fine_tune_at frozen).
// In fit/ because it shapes the one model a job trains (worker.h applies it before run_job); it
// needs only the plan and the model.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "plan/plan.h"

namespace nnfleet {

// The model with the spec's freeze / unfreeze_from applied; `params` (laid out as
// Network::params() for `model`, or empty) is laid out again for the result. Names match a
// layer or a nested model (all of its layers); an index counts the model's top-level layers
// without its input, a nested model being one, as Keras's Sequential.layers. unfreeze_from
// freezes every layer before the named one and unfreezes it and every later one (the file's own
// trainable flags are then replaced); freeze is applied after it. Returns `model` itself when
// nothing changes. Throws ModelError listing every unknown name or index, each with where the
// plan gave it.
std::shared_ptr<const Model> apply_fine_tuning(const ModelSpec& spec,
                                               std::shared_ptr<const Model> model,
                                               std::vector<float>& params);

}  // namespace nnfleet
