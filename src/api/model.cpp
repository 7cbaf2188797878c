// Model (nnfleet/model.h): a loaded Keras file, its summary, predictions and saving.
#include "nnfleet/model.h"

#include <algorithm>
#include <cctype>

#include "api/convert.h"
#include "api/evaluate_engine.h"
#include "api/model_impl.h"
#include "api/predict_engine.h"
#include "core/check.h"
#include "fleet/fit/string_front.h"
#include "io/keras/keras_writer.h"
#include "io/model_summary.h"
#include "io/onnx/onnx_writer.h"

namespace nnfleet::api {

using api_detail::dims;

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model Model::load(const std::string& path, const std::string& weights,
                  const std::vector<std::vector<int64_t>>& input_shapes) {
  std::vector<InputShape> shapes;
  for (const auto& sh : input_shapes) shapes.push_back({"", sh});
  return load(path, weights, shapes);
}

Model Model::load(const std::string& path, const std::string& weights,
                  const std::vector<InputShape>& input_shapes) {
  auto impl = std::make_shared<Impl>();
  if (input_shapes.empty()) {
    impl->lm = load_keras_model(path, weights);
  } else {
    std::vector<ModelInput> shapes;
    for (const auto& s : input_shapes) {
      ModelInput in;
      in.name = s.name;
      for (int64_t d : s.shape) in.shape.push_back(d);
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
    impl->inputs.push_back(
        {m.input(k).name, dims(m.input(k).is_string ? m.input(k).string_shape : m.input(k).shape)});
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

// How Model::predict's and evaluate's messages name the caller's options.
api_detail::Wording wording(const std::string& verb, const Spelling& s) {
  api_detail::Wording w;
  w.verb = verb;
  w.metrics_option = s.metrics;
  w.loss_option = s.loss;
  w.scale_option = s.scale;
  return w;
}

Shape engine_shape(const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(d);
  return s;
}

// Every buffer holds at least `rows` x its output's size floats.
void check_buffers(const ModelAccess::Impl& impl, const char* what,
                   const std::vector<std::span<float>>& buffers, int64_t n, bool per_sample,
                   const std::string& verb) {
  const nnfleet::Model& m = *impl.lm.model;
  for (size_t j = 0; j < buffers.size() && j < m.num_outputs(); ++j) {
    const int64_t need = n * (per_sample ? 1 : m.output_shape(j).size());
    if (static_cast<int64_t>(buffers[j].size()) < need)
      throw UsageError("failed to " + verb + " with '" + impl.path + "': the " + what +
                       " buffer of output " + std::to_string(j) + " holds " +
                       std::to_string(buffers[j].size()) + " floats; expected at least " +
                       std::to_string(need));
  }
}

std::vector<float*> pointers(const std::vector<std::span<float>>& buffers) {
  std::vector<float*> p;
  for (const auto& b : buffers) p.push_back(b.data());
  return p;
}

}  // namespace

namespace {

// The checked inputs and converted targets of a predict or evaluate call.
struct Prepared {
  std::vector<Array> xs;
  std::vector<api_detail::OutputTargets> targets;
  int64_t n = 0;
};

Prepared prepare(const ModelAccess::Impl& impl, const std::vector<ArrayView>& x, size_t predictions,
                 const PredictOptions& o, const std::vector<ArrayView>& y, size_t losses,
                 const api_detail::Wording& w) {
  const LoadedModel& lm = impl.lm;
  const nnfleet::Model& m = *lm.model;
  const std::string& path = impl.path;
  const std::string failed = "failed to " + w.verb + " with '" + path + "': ";
  if (o.batch_size < 1)
    throw UsageError(failed + "batch_size must be positive; expected 1 or more, got " +
                     std::to_string(o.batch_size));
  if (o.workers < 0)
    throw UsageError(failed + "workers must be positive; expected 1 or more (0: every core), got " +
                     std::to_string(o.workers));
  if (!lm.has_weights)
    throw UsageError(failed +
                     "it holds no weights; expected a weights file (model.save_weights) with "
                     "an architecture file");
  if (x.size() != m.num_inputs())
    throw UsageError(failed + "it has " + std::to_string(m.num_inputs()) +
                     " input(s); expected one array per input, got " + std::to_string(x.size()));
  Prepared p;
  for (size_t k = 0; k < x.size(); ++k) {
    // A string input becomes its string layer's float rows here, once per call.
    const std::string name = nth_name(o.x_names, "x", k);
    if (m.input(k).is_string && o.scale != 1.0)
      throw UsageError(failed + "input '" + m.input(k).name +
                       "' holds strings, which a scale cannot apply to; expected scale 1");
    p.xs.push_back(bind_input(m, k, api_detail::to_array(x[k], name), "'" + name + "'"));
  }
  p.n = p.xs[0].rows();
  for (size_t k = 0; k < p.xs.size(); ++k) {
    const std::string name = nth_name(o.x_names, "x", k);
    if (p.xs[k].rows() != p.n)
      throw DataError(failed + "'" + name + "' has " + std::to_string(p.xs[k].rows()) +
                      " samples and '" + nth_name(o.x_names, "x", 0) + "' " + std::to_string(p.n) +
                      "; expected the same number in every input");
    api_detail::check_input(w, path, o.scale, m, k, p.xs[k], name);
  }
  if (predictions != m.num_outputs())
    throw UsageError(failed + "it has " + std::to_string(m.num_outputs()) +
                     " output(s); expected one predictions buffer per output, got " +
                     std::to_string(predictions));
  if (y.empty()) return p;
  if (y.size() != m.num_outputs() || losses != m.num_outputs())
    throw UsageError("failed to compute losses: '" + path + "' has " +
                     std::to_string(m.num_outputs()) +
                     " output(s); expected one target array and one loss buffer per output, "
                     "got " +
                     std::to_string(y.size()) + " and " + std::to_string(losses));
  for (size_t j = 0; j < y.size(); ++j) {
    const std::string name = nth_name(o.y_names, "y", j);
    p.targets.push_back(api_detail::make_targets(api_detail::to_array(y[j], name), name,
                                                 api_detail::output_loss(w, lm, path, o.loss, j),
                                                 m.output_shape(j), p.n));
  }
  return p;
}

RunStats stats_of(const api_detail::PredictTotals& t, const Prepared& p) {
  RunStats s;
  s.seconds = t.seconds;
  s.workers = t.workers;
  for (const auto& target : p.targets) s.losses.push_back(loss_name(target.loss));
  return s;
}

api_detail::PredictTotals run(const LoadedModel& lm, const Prepared& p, const PredictOptions& o,
                              const std::vector<float*>& predictions,
                              const std::vector<float*>& losses) {
  api_detail::PredictJob job;
  job.lm = &lm;
  job.x = &p.xs;
  job.targets = &p.targets;
  job.n = p.n;
  job.batch = o.batch_size;
  job.workers = o.workers;
  job.scale = static_cast<float>(o.scale);
  job.predictions = predictions;
  job.losses = losses;
  return api_detail::run_predict_job(job);
}

}  // namespace

RunStats Model::predict(const std::vector<ArrayView>& x,
                        const std::vector<std::span<float>>& predictions, const PredictOptions& o,
                        const std::vector<ArrayView>& y,
                        const std::vector<std::span<float>>& losses) const {
  const Prepared p =
      prepare(*impl_, x, predictions.size(), o, y, losses.size(), wording("predict", o.spelling));
  check_buffers(*impl_, "predictions", predictions, p.n, false, "predict");
  if (!y.empty()) check_buffers(*impl_, "losses", losses, p.n, true, "predict");
  if (p.n == 0) return {};
  const api_detail::PredictTotals t = run(impl_->lm, p, o, pointers(predictions), pointers(losses));
  return stats_of(t, p);
}

std::vector<std::pair<std::string, double>> Model::evaluate(
    const std::vector<ArrayView>& x, const std::vector<ArrayView>& y, const EvaluateOptions& o,
    const std::vector<std::span<float>>& losses, RunStats* stats) const {
  const LoadedModel& lm = impl_->lm;
  const size_t outs = lm.model->num_outputs();
  const api_detail::Wording w = wording("evaluate", o.spelling);
  if (y.empty())
    throw UsageError("failed to evaluate '" + impl_->path +
                     "': it needs targets; expected y (one array per output)");
  Prepared p = prepare(*impl_, x, outs, o, y, outs, w);
  if (p.n == 0)
    throw DataError("failed to evaluate '" + impl_->path +
                    "': x holds no samples; expected 1 or more");
  if (!losses.empty()) {
    if (losses.size() != outs)
      throw UsageError("failed to evaluate '" + impl_->path + "': it has " + std::to_string(outs) +
                       " output(s); expected one losses buffer per output, got " +
                       std::to_string(losses.size()));
    check_buffers(*impl_, "losses", losses, p.n, true, "evaluate");
  }
  const auto keys = api_detail::add_metrics(w, lm, impl_->path, o.metrics, p.targets);
  std::vector<std::vector<float>> pred(outs), loss(outs);
  std::vector<float*> pred_ptr, loss_ptr;
  std::vector<const float*> loss_read;
  for (size_t j = 0; j < outs; ++j) {
    pred[j].resize(static_cast<size_t>(p.n * lm.model->output_shape(j).size()));
    if (losses.empty()) loss[j].resize(static_cast<size_t>(p.n));
    float* l = losses.empty() ? loss[j].data() : losses[j].data();
    pred_ptr.push_back(pred[j].data());
    loss_ptr.push_back(l);
    loss_read.push_back(l);
  }
  const api_detail::PredictTotals t = run(lm, p, o, pred_ptr, loss_ptr);
  if (stats) *stats = stats_of(t, p);
  return api_detail::evaluation_figures(lm, keys, loss_read, p.n, t);
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
  // The file's compile() and optimizer state go with it (Keras's load_model keeps both).
  const KerasSaveInfo info = keras_save_info(lm);
  if (ends(".keras"))
    save_keras(path, *lm.model, lm.params.data(), info);
  else if (ends(".h5"))
    save_keras_h5(path, *lm.model, lm.params.data(), info);
  else if (ends(".onnx"))
    try {
      save_onnx(path, *lm.model, lm.params.data());
    } catch (const ModelError& e) {
      throw ModelError("failed to export '" + impl_->path + "': " + e.what());
    }
  else
    throw UsageError("failed to save a model to '" + path +
                     "': unknown extension; expected .keras, .h5 or .onnx");
}

size_t Model::count_layers() const { return impl_->lm.model->num_layers(); }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";  // as Shape::str() writes it
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + (shape[i] < 0 ? std::string("None") : std::to_string(shape[i]));
  return s + "]";
}

bool sample_shape_fits(const std::vector<int64_t>& data, const std::vector<int64_t>& input) {
  // No engine shape holds more axes (nor does any input of a model).
  if (data.size() > static_cast<size_t>(Shape::kMaxRank) ||
      input.size() > static_cast<size_t>(Shape::kMaxRank))
    return false;
  return api_detail::compatible(engine_shape(data), engine_shape(input));
}

std::string describe_model(const std::string& path, const std::string& weights) {
  return describe_model_file(path, weights);
}

}  // namespace nnfleet::api
