// The command line of predict and evaluate (see model_run.h): their files in and out, on the
// public API's Model (nnfleet/model.h) and data files (nnfleet/data.h).
#include "model_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace nnfleet::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

api::ReadOptions read_options(const RunArgs& a) {
  api::ReadOptions o;
  o.label = a.label;
  o.label_option = "--label ";
  return o;
}

// One --x per input, or a single .npz whose keys name the inputs (more than one key).
InputData load_inputs(const RunArgs& a) {
  InputData d;
  if (a.x.size() == 1 && ends_with(a.x[0], ".npz")) {
    const auto keys = api::npz_keys(a.x[0]);
    if (keys.size() > 1) {
      for (const auto& k : keys) {
        d.x.push_back(api::read_npz(a.x[0], k));
        d.where.push_back(a.x[0] + ":" + k);
      }
      d.keys = keys;
      return d;
    }
  }
  if (!a.label.empty() && a.x.size() > 1)
    throw UsageError(
        "failed to read the inputs: --label takes the targets from a single CSV --x; "
        "expected one --x, got " +
        std::to_string(a.x.size()));
  for (const auto& f : a.x) {
    d.x.push_back(api::read_array(f, read_options(a), &d.csv_y));
    d.where.push_back(f);
  }
  return d;
}

std::string input_list(const api::Model& m) {
  std::string s;
  for (const api::TensorInfo& in : m.inputs())
    s += (s.empty() ? "" : ", ") + in.name + " " + api::shape_text(in.shape);
  return s;
}

// Puts the inputs of an .npz of named inputs in the model's input order.
void match_named_inputs(const RunArgs& a, const api::Model& m, InputData& d) {
  std::vector<api::Array> x;
  std::vector<std::string> where;
  for (const api::TensorInfo& in : m.inputs()) {
    const auto it = std::find(d.keys.begin(), d.keys.end(), in.name);
    if (it == d.keys.end()) {
      std::string list;
      for (const auto& key : d.keys) list += (list.empty() ? "" : ", ") + key;
      if (m.inputs().size() == 1)
        throw UsageError("failed to choose an array of '" + a.x[0] + "': it holds " +
                         std::to_string(d.keys.size()) + " (" + list + "); expected '" + a.x[0] +
                         ":KEY'");
      throw UsageError("failed to read the inputs of '" + a.model + "' from '" + a.x[0] +
                       "': it has no array '" + in.name + "'; expected one per input (" +
                       input_list(m) + "), got " + list);
    }
    const size_t i = static_cast<size_t>(it - d.keys.begin());
    x.push_back(d.x[i]);
    where.push_back(d.where[i]);
  }
  d.x = std::move(x);
  d.where = std::move(where);
}

// Puts the inputs in the model's input order (by name for an .npz of named inputs).
void match_inputs(const RunArgs& a, const api::Model& m, InputData& d) {
  if (!d.keys.empty()) return match_named_inputs(a, m, d);
  const size_t inputs = m.inputs().size();
  if (d.x.size() != inputs)
    throw UsageError("failed to " + a.command + " with '" + a.model + "': it has " +
                     std::to_string(inputs) + " input" + (inputs > 1 ? "s" : "") + " (" +
                     input_list(m) +
                     "); expected one --x per input in this order (or an "
                     ".npz with one array per input name), got " +
                     std::to_string(d.x.size()));
}

}  // namespace

std::string json_number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i])
      return false;
  return true;
}

std::vector<std::pair<api::Array, std::string>> load_targets(const RunArgs& a, const api::Model& m,
                                                             const InputData& d) {
  std::vector<std::pair<api::Array, std::string>> ys;
  const size_t outputs = m.outputs().size();
  if (a.y.empty()) {
    if (!d.csv_y.empty()) ys.push_back({d.csv_y, a.x[0]});
  } else if (a.y.size() == 1 && outputs > 1 && ends_with(a.y[0], ".npz")) {
    for (const api::TensorInfo& out : m.outputs())
      ys.push_back({api::read_npz(a.y[0], out.name), a.y[0] + ":" + out.name});
  } else {
    for (const auto& f : a.y) ys.push_back({api::read_array(f, {"", "--label "}), f});
  }
  if (!ys.empty() && ys.size() != outputs)
    throw UsageError("failed to compute losses: '" + a.model + "' has " + std::to_string(outputs) +
                     " outputs; expected one --y per output in "
                     "output order (or an .npz with one array per output name), got " +
                     std::to_string(ys.size()));
  return ys;
}

api::PredictOptions predict_options(const RunArgs& a, const InputData& d,
                                    const std::vector<std::pair<api::Array, std::string>>& ys) {
  api::PredictOptions o;
  o.batch_size = a.batch;
  o.workers = a.workers;
  o.scale = a.scale;
  o.loss = a.loss;
  o.x_names = d.where;
  for (const auto& y : ys) o.y_names.push_back(y.second);
  o.spelling.loss = "--loss ";
  o.spelling.scale = "--scale ";
  o.spelling.metrics = "--metrics";
  return o;
}

std::vector<std::span<float>> Outputs::spans() {
  std::vector<std::span<float>> s;
  for (auto& d : data) s.emplace_back(d);
  return s;
}

Outputs make_outputs(const api::Model& m, int64_t n, bool per_sample) {
  Outputs o;
  for (const api::TensorInfo& out : m.outputs()) {
    std::vector<int64_t> shape{n};
    int64_t size = 1;
    if (!per_sample)
      for (int64_t dim : out.shape) {
        shape.push_back(dim);
        size *= dim;
      }
    o.data.emplace_back(static_cast<size_t>(n * size));
    o.shapes.push_back(shape);
  }
  return o;
}

// Where output j's predictions (or losses) go: the j-th of the files given, or key j of one .npz.
void save_outputs(const std::vector<std::string>& files, const Outputs& arrays, const api::Model& m,
                  const char* flag) {
  auto view = [&arrays](size_t j) {
    return api::ArrayView{arrays.data[j].data(), api::ElementType::kFloat32, arrays.shapes[j]};
  };
  if (files.size() == 1 && ends_with(files[0], ".npz")) {
    std::vector<std::pair<std::string, api::ArrayView>> named;
    for (size_t j = 0; j < arrays.data.size(); ++j)
      named.emplace_back(m.outputs()[j].name, view(j));
    api::write_npz(files[0], named);
    return;
  }
  if (files.size() != arrays.data.size())
    throw UsageError(std::string("failed to write ") + flag + ": the model has " +
                     std::to_string(arrays.data.size()) + " outputs; expected one " + flag +
                     " per output in output order, or one .npz, got " +
                     std::to_string(files.size()));
  for (size_t j = 0; j < arrays.data.size(); ++j) api::write_npy(files[j], view(j));
}

LoadedRun load_run(const RunArgs& a) {
  if (a.batch < 1)
    throw UsageError("failed to parse --batch: expected a positive number, got " +
                     std::to_string(a.batch));
  if (a.workers < 0)
    throw UsageError("failed to parse --workers: expected a positive number, got " +
                     std::to_string(a.workers));
  // The data first: an input dimension the model file leaves free takes its size from it.
  LoadedRun run;
  InputData& d = run.data;
  d = load_inputs(a);
  std::vector<api::InputShape> shapes;
  for (size_t k = 0; k < d.x.size(); ++k) {
    const auto& shape = d.x[k].shape();
    if (shape.empty() || shape[0] < 1)
      throw DataError("failed to read data file '" + d.where[k] + "': it holds no samples");
    shapes.push_back({d.keys.empty() ? std::string() : d.keys[k],
                      std::vector<int64_t>(shape.begin() + 1, shape.end())});
  }
  run.n = d.x[0].rows();

  const auto t_load = std::chrono::steady_clock::now();
  run.model.emplace(api::Model::load(a.model, a.weights, shapes));
  run.load_seconds = seconds_since(t_load);
  if (!run.model->has_weights())
    throw UsageError("failed to " + a.command + " with '" + a.model +
                     "': it holds no weights; expected "
                     "--weights WEIGHTS.h5 (model.save_weights) with an architecture file");
  match_inputs(a, *run.model, d);
  return run;
}

void add_run_options(CLI::App* c, RunArgs& a, bool targets_required) {
  c->add_option("model", a.model, "The model file")->required();
  c->add_option("--x", a.x,
                "Inputs: X.npy, X.npz:KEY, an IDX file, or X.csv with --label; one --x per model "
                "input (in its input order), or one .npz with an array per input name")
      ->required()
      ->allow_extra_args(false);
  auto* y = c->add_option("--y", a.y,
                          "Targets (npy, npz:KEY or IDX); one per model output, or one .npz with "
                          "an array per output name")
                ->allow_extra_args(false);
  if (targets_required) y->required();
  c->add_option("--label", a.label, "The label column of a CSV --x");
  c->add_option("--loss", a.loss,
                "Loss for --y (default: the model file's), e.g. categorical_crossentropy");
  c->add_option("--weights", a.weights, "Weights file (model.save_weights .h5) for MODEL");
  c->add_option("--scale", a.scale, "Multiply the inputs by this (e.g. 0.00392156862745098)");
  c->add_option("--batch", a.batch,
                "Rows a worker takes at a time (default 256); it runs them through the model 32 (8 "
                "on AVX-512) "
                "at a time");
  c->add_option(
      "--workers", a.workers,
      "Worker threads, each pinned to one core (default: the cores this process may use)");
  c->add_option("--loss-out", a.loss_out,
                "Per-sample losses file (.npy, float32 [N]); one per model output, or one .npz")
      ->allow_extra_args(false);
}

}  // namespace nnfleet::cli
