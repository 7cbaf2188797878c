// A worker's job: its model built (again: validation dropped it) and trained (see worker.h).
#include "fleet/worker.h"

#include "core/limits.h"
#include "fleet/fit/adapt.h"
#include "fleet/fit/fine_tune.h"
#include "fleet/fit/string_front.h"

namespace nnfleet::fleet_detail {
namespace {

FleetData bind_strings(const Model& m, const FleetData& data) {
  if (!has_string_input(m)) return data;
  if (data.scale != 1.0f)
    throw DataError("failed to train model '" + m.name() +
                    "': data.scale would apply to the ids its string layer makes; expected "
                    "scale 1 with text inputs");
  FleetData b = data;
  for (size_t k = 0; k < m.num_inputs() && k < data.num_x(); ++k) {
    Array& x = k == 0 ? b.train.x : b.more.x[k - 1];
    x = bind_input(m, k, x, data.train_name);
    if (b.test) {
      Array& t = k == 0 ? b.test->x : b.test_more.x[k - 1];
      t = bind_input(m, k, t, data.test_name);
    }
    if (k < b.input_shapes.size()) b.input_shapes[k] = m.input(k).shape;
  }
  b.input_shape = m.input(0).shape;
  return b;
}

}  // namespace

std::shared_ptr<const Model> job_model(const ModelSpec& s, const ModelIo& io, const FleetData& data,
                                       std::vector<float>& initial_params,
                                       RestoredOptimizer& restored) {
  std::shared_ptr<const Model> m;
  if (s.keras.empty()) {
    const std::optional<ModelSpec> adapted = adapted_spec(s, data);  // Discretization's adapt()
    m = build_model(adapted ? *adapted : s, data.input_shape);
  } else {
    if (!io.load) throw ModelError("models from Keras files are not available in this build");
    m = io.load(s, data.input_shape, initial_params);
    m = apply_fine_tuning(s, std::move(m), initial_params);
    if (s.restore_optimizer) {
      if (!io.optimizer)
        throw ModelError("restore_optimizer is not available in this build (no Keras reader)");
      restored = io.optimizer(s, data.input_shape);
    }
  }
  // A lookup without a vocabulary learns it from the training rows, once per run
  // (data.adapted keeps it from the plan's validation for the job).
  m = adapt_string_layers(std::move(m), data.train.x.slice_rows(0, data.n_train),
                          data.adapted.get());
  // The bound a Keras file's model has (keras_reader.cpp), for the plan's own models too and for
  // what fine-tuning added: checked before any parameter is allocated.
  const size_t params = m->trainable_params() + m->non_trainable_params();
  if (params > limits::kMaxParams)
    throw ModelError("failed to build model '" + s.name + "': it has " + std::to_string(params) +
                     " parameters; expected at most " + std::to_string(limits::kMaxParams) +
                     "\nhint: make its layers smaller, or split it into several models");
  // An option nnfleet only predicts with (a regularizer, dropout inside a recurrent cell): found
  // while the plan is validated, not when the model's turn comes. Training without its effect
  // would silently give a different model than Keras trains.
  if (const std::string r = m->training_refusal(); !r.empty())
    throw ModelError("failed to train model '" + s.name + "': " + r +
                     "\nhint: remove the option from the config (predicting with it is "
                     "supported)");
  return m;
}

JobResult train_job(const ModelSpec& s, const ModelIo& io, const FleetData& data, JobContext ctx,
                    const std::string& root, SavedModel& saved) {
  std::vector<float> initial;
  RestoredOptimizer restored;
  std::shared_ptr<const Model> model = job_model(s, io, data, initial, restored);
  // A string input becomes the float rows its string layer makes, once for the whole run.
  const FleetData bound = bind_strings(*model, data);
  if (s.restore_optimizer) ctx.restored_optimizer = &restored;
  ctx.checkpoint_path = root + "/checkpoints/" + s.name + ".ckpt";
  if (io.save)
    ctx.save_model = [&](Network& net, const ModelSpec& sp) {
      saved = io.save(net, sp, root + "/models/" + sp.name);
    };
  JobResult r = run_job(s, std::move(model), bound, ctx, initial.empty() ? nullptr : &initial);
  // The model is trained and its file written, but the export the run asked for is missing: the
  // job fails with the export's error, and its record (with the model file) keeps --resume from
  // training it again.
  if (r.status == JobStatus::kDone && !saved.export_error.empty()) {
    r.status = JobStatus::kFailed;
    r.message = saved.export_error + "; the trained model is kept in '" + saved.path + "'";
  }
  return r;
}

}  // namespace nnfleet::fleet_detail
