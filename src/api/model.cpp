// Model (nnfleet/model.h): a loaded Keras file, its summary, predictions and saving.
#include "nnfleet/model.h"

#include <algorithm>
#include <cctype>

#include "api/convert.h"
#include "api/model_impl.h"
#include "api/predict_core.h"
#include "io/keras_writer.h"
#include "io/model_summary.h"
#include "nnfleet/error.h"

namespace nnfleet::api {

using api_detail::dims;

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model Model::load(const std::string& path, const std::string& weights,
                  const std::vector<std::vector<int64_t>>& input_shapes) {
  auto impl = std::make_shared<Impl>();
  if (input_shapes.empty()) {
    impl->lm = load_keras_model(path, weights);
  } else {
    std::vector<ModelInput> shapes;
    for (const auto& s : input_shapes) {
      ModelInput in;
      for (int64_t d : s) in.shape.push_back(d);
      shapes.push_back(in);
    }
    impl->lm = load_keras_model(path, weights, shapes);
  }
  impl->path = path;
  // `nnfleet inspect`'s table (which shows free input dimensions as None), else this shape's.
  impl->summary =
      input_shapes.empty() ? describe_model_file(path, weights) : model_summary(impl->lm, path);
  const nnfleet::Model& m = *impl->lm.model;
  for (size_t k = 0; k < m.num_inputs(); ++k)
    impl->inputs.push_back({m.input(k).name, dims(m.input(k).shape)});
  for (size_t j = 0; j < m.num_outputs(); ++j)
    impl->outputs.push_back({m.output_name(j), dims(m.output_shape(j))});
  return Model(std::move(impl));
}

const std::string& Model::summary() const { return impl_->summary; }
const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
bool Model::has_weights() const { return impl_->lm.has_weights; }
const std::string& Model::path() const { return impl_->path; }

int64_t Model::count_params() const {
  const nnfleet::Model& m = *impl_->lm.model;
  return static_cast<int64_t>(m.trainable_params() + m.non_trainable_params());
}

namespace {

std::string nth_name(const std::vector<std::string>& names, const char* base, size_t k) {
  if (k < names.size()) return names[k];
  return k == 0 ? std::string(base) : std::string(base) + "[" + std::to_string(k) + "]";
}

// Output j's loss: the options' for all, or the file's (one for all, a list in output order or a
// dict by output name, as Keras's compile takes them).
LossSpec output_loss(const LoadedModel& lm, const PredictOptions& o, const std::string& path,
                     size_t j) {
  if (!o.loss.empty()) return parse_loss(Json(o.loss));
  const Json& tc = lm.training_config;
  if (tc.is_object() && tc.contains("loss") && !tc["loss"].is_null()) {
    const Json& l = tc["loss"];
    const std::string out = lm.model->output_name(j);
    const Json* pick = &l;
    if (l.is_array() && l.size() == lm.model->num_outputs()) pick = &l[j];
    if (l.is_object() && l.contains(out)) pick = &l[out];
    try {
      return parse_loss(*pick);
    } catch (const Error& e) {
      throw UsageError("failed to use the loss of '" + path + "' (" + e.what() +
                       "); expected loss=NAME");
    }
  }
  throw UsageError("failed to compute losses: '" + path +
                   "' names no loss; expected loss=NAME (e.g. categorical_crossentropy)");
}

}  // namespace

void Model::predict(const std::vector<ArrayView>& x, const std::vector<float*>& predictions,
                    const PredictOptions& o, const std::vector<ArrayView>& y,
                    const std::vector<float*>& losses) const {
  const LoadedModel& lm = impl_->lm;
  const nnfleet::Model& m = *lm.model;
  const std::string& path = impl_->path;
  if (o.batch_size < 1)
    throw UsageError("failed to predict with '" + path +
                     "': batch_size must be positive; expected 1 or more, got " +
                     std::to_string(o.batch_size));
  if (o.workers < 0)
    throw UsageError("failed to predict with '" + path +
                     "': workers must be positive; expected 1 or more (0: every core), got " +
                     std::to_string(o.workers));
  if (!lm.has_weights)
    throw UsageError("failed to predict with '" + path +
                     "': it holds no weights; expected a weights file (model.save_weights) with "
                     "an architecture file");
  if (x.size() != m.num_inputs())
    throw UsageError("failed to predict with '" + path + "': it has " +
                     std::to_string(m.num_inputs()) +
                     " input(s); expected one array per input, got " + std::to_string(x.size()));
  std::vector<Array> xs;
  for (size_t k = 0; k < x.size(); ++k)
    xs.push_back(api_detail::to_array(x[k], nth_name(o.x_names, "x", k)));
  const int64_t n = xs[0].rows();
  for (size_t k = 0; k < xs.size(); ++k) {
    const std::string name = nth_name(o.x_names, "x", k);
    if (xs[k].rows() != n)
      throw DataError("failed to predict with '" + path + "': '" + name + "' has " +
                      std::to_string(xs[k].rows()) + " samples and '" +
                      nth_name(o.x_names, "x", 0) + "' " + std::to_string(n) +
                      "; expected the same number in every input");
    api_detail::check_input(path, o.scale, m, k, xs[k], name);
  }
  if (predictions.size() != m.num_outputs())
    throw UsageError("failed to predict with '" + path + "': it has " +
                     std::to_string(m.num_outputs()) +
                     " output(s); expected one predictions buffer per output, got " +
                     std::to_string(predictions.size()));
  std::vector<api_detail::OutputTargets> targets;
  if (!y.empty()) {
    if (y.size() != m.num_outputs() || losses.size() != m.num_outputs())
      throw UsageError("failed to compute losses: '" + path + "' has " +
                       std::to_string(m.num_outputs()) +
                       " output(s); expected one target array and one loss buffer per output, "
                       "got " +
                       std::to_string(y.size()) + " and " + std::to_string(losses.size()));
    for (size_t j = 0; j < y.size(); ++j) {
      const std::string name = nth_name(o.y_names, "y", j);
      targets.push_back(api_detail::make_targets(api_detail::to_array(y[j], name), name,
                                                 output_loss(lm, o, path, j), m.output_shape(j),
                                                 n));
    }
  }
  if (n == 0) return;
  api_detail::PredictJob job;
  job.lm = &lm;
  job.x = &xs;
  job.targets = &targets;
  job.n = n;
  job.batch = o.batch_size;
  job.workers = o.workers;
  job.scale = static_cast<float>(o.scale);
  job.predictions = predictions;
  job.losses = losses;
  api_detail::run_predict_job(job);
}

void Model::save(const std::string& path) const {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto ends = [&](const std::string& s) {
    return lower.size() >= s.size() && lower.compare(lower.size() - s.size(), s.size(), s) == 0;
  };
  const LoadedModel& lm = impl_->lm;
  if (!lm.has_weights)
    throw UsageError("failed to save '" + impl_->path + "': it holds no weights");
  KerasSaveInfo info;
  info.keras_class = lm.class_name;
  const Json& tc = lm.training_config;
  if (tc.is_object() && tc.contains("loss") && tc["loss"].is_string()) {
    try {
      info.loss = parse_loss(tc["loss"]);
      info.optimizer = lm.optimizer;
    } catch (const Error&) {
      info.loss.reset();  // saved uncompiled, as a model whose loss nnfleet cannot name
    }
    if (tc.contains("metrics") && tc["metrics"].is_array())
      for (const Json& v : tc["metrics"])
        if (v.is_string()) info.metrics.push_back(v.get<std::string>());
  }
  if (ends(".keras"))
    save_keras(path, *lm.model, lm.params.data(), info);
  else if (ends(".h5"))
    save_keras_h5(path, *lm.model, lm.params.data(), info);
  else
    throw UsageError("failed to save a model to '" + path +
                     "': unknown extension; expected .keras or .h5");
}

}  // namespace nnfleet::api
