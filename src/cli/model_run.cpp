// The command line of predict and evaluate (see model_run.h): their files in and out, on the
// prediction engine of the API (api/predict_engine.h).
#include "cli/model_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "api/predict_engine.h"
#include "io/zip_archive.h"
#include "platform/files.h"

namespace nnfleet::cli {
namespace {

api_detail::Wording wording(const RunArgs& a) {
  api_detail::Wording w;
  w.verb = a.command;
  return w;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One --x per input, or a single .npz whose keys name the inputs (more than one key).
InputData load_inputs(const RunArgs& a) {
  InputData d;
  if (a.x.size() == 1 && ends_with(a.x[0], ".npz")) {
    std::string why;
    const int fd = open_regular_file(a.x[0], why);
    if (fd < 0) throw_data_error(a.x[0], why);
    ::close(fd);
    const auto keys = npz_keys(a.x[0]);
    if (keys.size() > 1) {
      for (const auto& k : keys) {
        d.x.push_back(load_npz(a.x[0], k));
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
    d.x.push_back(load_data(f, a.label, &d.csv_y));
    d.where.push_back(f);
  }
  return d;
}

std::string input_list(const Model& m) {
  std::string s;
  for (size_t k = 0; k < m.num_inputs(); ++k)
    s += (k ? ", " : "") + m.input(k).name + " " + m.input(k).shape.str();
  return s;
}

// Puts the inputs in the model's input order (by name for an .npz of named inputs).
void match_inputs(const RunArgs& a, const Model& m, InputData& d) {
  if (!d.keys.empty()) {
    std::vector<Array> x;
    std::vector<std::string> where;
    for (size_t k = 0; k < m.num_inputs(); ++k) {
      const auto it = std::find(d.keys.begin(), d.keys.end(), m.input(k).name);
      if (it == d.keys.end()) {
        std::string list;
        for (const auto& key : d.keys) list += (list.empty() ? "" : ", ") + key;
        if (m.num_inputs() == 1)
          throw UsageError("failed to choose an array of '" + a.x[0] + "': it holds " +
                           std::to_string(d.keys.size()) + " (" + list + "); expected '" + a.x[0] +
                           ":KEY'");
        throw UsageError("failed to read the inputs of '" + a.model + "' from '" + a.x[0] +
                         "': it has no array '" + m.input(k).name + "'; expected one per input (" +
                         input_list(m) + "), got " + list);
      }
      const size_t i = static_cast<size_t>(it - d.keys.begin());
      x.push_back(d.x[i]);
      where.push_back(d.where[i]);
    }
    d.x = std::move(x);
    d.where = std::move(where);
    return;
  }
  if (d.x.size() != m.num_inputs())
    throw UsageError("failed to " + a.command + " with '" + a.model + "': it has " +
                     std::to_string(m.num_inputs()) + " input" + (m.num_inputs() > 1 ? "s" : "") +
                     " (" + input_list(m) +
                     "); expected one --x per input in this order (or an "
                     ".npz with one array per input name), got " +
                     std::to_string(d.x.size()));
}

void check_input(const RunArgs& a, const Model& model, size_t k, const Array& x,
                 const std::string& file) {
  api_detail::check_input(wording(a), a.model, a.scale, model, k, x, file);
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

// A data argument: "file.npy", "file.npz:key", "file.npz" (one member), IDX (by its magic),
// or "file.csv" (with --label; `csv_y` receives the label column).
Array load_data(const std::string& spec, const std::string& label, Array* csv_y) {
  const size_t colon = spec.rfind(':');
  if (colon != std::string::npos && ends_with(spec.substr(0, colon), ".npz"))
    return load_npz(spec.substr(0, colon), spec.substr(colon + 1));
  std::string why;
  const int fd = open_regular_file(spec, why);
  if (fd < 0) throw_data_error(spec, why);
  unsigned char head[6] = {};
  const ssize_t got = ::read(fd, head, sizeof head);
  ::close(fd);
  const size_t n = got > 0 ? static_cast<size_t>(got) : 0;
  if (n >= 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) return load_npy(spec);
  if (n >= 4 && head[0] == 'P' && head[1] == 'K') {
    const auto keys = npz_keys(spec);
    if (keys.size() != 1) {
      std::string list;
      for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
      throw UsageError("failed to choose an array of '" + spec + "': it holds " +
                       std::to_string(keys.size()) + " (" + list + "); expected '" + spec +
                       ":KEY'");
    }
    return load_npz(spec, keys[0]);
  }
  if ((n >= 2 && head[0] == 0x1f && head[1] == 0x8b) || (n >= 4 && head[0] == 0 && head[1] == 0))
    return load_idx(spec);
  if (ends_with(spec, ".csv")) {
    if (label.empty())
      throw UsageError("failed to read '" + spec +
                       "': a CSV file needs --label COLUMN (the "
                       "column that is not an input)");
    CsvData d = load_csv(spec, label);
    if (csv_y) *csv_y = d.y;
    return d.x;
  }
  throw_data_error(spec, "unknown format; expected .npy, .npz[:key], an IDX file or .csv");
}

// The targets of every output: one --y per output (output_layers order), a CSV's label column
// (one output), or a single .npz whose keys name the outputs.
std::vector<std::pair<Array, std::string>> load_targets(const RunArgs& a, const Model& m,
                                                        const InputData& d) {
  std::vector<std::pair<Array, std::string>> ys;
  if (a.y.empty()) {
    if (!d.csv_y.empty()) ys.push_back({d.csv_y, a.x[0]});
  } else if (a.y.size() == 1 && m.num_outputs() > 1 && ends_with(a.y[0], ".npz")) {
    for (size_t j = 0; j < m.num_outputs(); ++j)
      ys.push_back({load_npz(a.y[0], m.output_name(j)), a.y[0] + ":" + m.output_name(j)});
  } else {
    for (const auto& f : a.y) ys.push_back({load_data(f, "", nullptr), f});
  }
  if (!ys.empty() && ys.size() != m.num_outputs())
    throw UsageError("failed to compute losses: '" + a.model + "' has " +
                     std::to_string(m.num_outputs()) +
                     " outputs; expected one --y per output in "
                     "output order (or an .npz with one array per output name), got " +
                     std::to_string(ys.size()));
  return ys;
}

// Where output j's predictions (or losses) go: the j-th of the files given, or key j of one .npz.
void save_outputs(const std::vector<std::string>& files, const std::vector<Array>& arrays,
                  const Model& m, const char* flag) {
  if (files.size() == 1 && ends_with(files[0], ".npz")) {
    std::vector<ZipMember> members;
    std::vector<std::string> temps;
    for (size_t j = 0; j < arrays.size(); ++j) {
      temps.push_back(files[0] + ".part" + std::to_string(j) + ".npy");
      save_npy(temps.back(), arrays[j]);
      members.push_back({m.output_name(j) + ".npy", "", temps.back()});
    }
    try {
      write_zip(files[0] + ".part", members);
    } catch (...) {
      for (const auto& t : temps) std::remove(t.c_str());
      throw;
    }
    for (const auto& t : temps) std::remove(t.c_str());
    if (std::rename((files[0] + ".part").c_str(), files[0].c_str()) != 0)
      throw_data_error(files[0], "cannot rename the finished file into place");
    return;
  }
  if (files.size() != arrays.size())
    throw UsageError(std::string("failed to write ") + flag + ": the model has " +
                     std::to_string(arrays.size()) + " outputs; expected one " + flag +
                     " per output in output order, or one .npz, got " +
                     std::to_string(files.size()));
  for (size_t j = 0; j < arrays.size(); ++j) save_npy(files[j], arrays[j]);
}

LossSpec output_loss_of(const RunArgs& a, const LoadedModel& lm, size_t j) {
  return api_detail::output_loss(wording(a), lm, a.model, a.loss, j);
}

RunResult run_workers(const RunArgs& a, const LoadedModel& lm, const InputData& d,
                      const std::vector<OutputTargets>& targets, int64_t n) {
  const Model& model = *lm.model;
  RunResult r;
  api_detail::PredictJob job;
  job.lm = &lm;
  job.x = &d.x;
  job.targets = &targets;
  job.n = n;
  job.batch = a.batch;
  job.workers = a.workers;
  job.scale = static_cast<float>(a.scale);
  for (size_t j = 0; j < model.num_outputs(); ++j) {
    r.pred.push_back(Array::zeros(DType::kF32, model.output_shape(j).with_batch(n)));
    r.losses.push_back(Array::zeros(DType::kF32, Shape{n}));
    job.predictions.push_back(static_cast<float*>(r.pred[j].mutable_data()));
    job.losses.push_back(static_cast<float*>(r.losses[j].mutable_data()));
  }
  api_detail::PredictTotals t = api_detail::run_predict_job(job);
  r.metric_values = std::move(t.metric_values);
  r.seconds = t.seconds;
  r.workers = t.workers;
  return r;
}

LoadedRun load_run(const RunArgs& a) {
  if (a.batch < 1)
    throw UsageError("failed to parse --batch: expected a positive number, got " +
                     std::to_string(a.batch));
  if (a.workers < 0)
    throw UsageError("failed to parse --workers: expected a positive number, got " +
                     std::to_string(a.workers));
  api_detail::check_scale(wording(a), a.model, a.scale);

  // The data first: an input dimension the model file leaves free takes its size from it.
  LoadedRun run;
  InputData& d = run.data;
  d = load_inputs(a);
  std::vector<ModelInput> shapes;
  for (size_t k = 0; k < d.x.size(); ++k) {
    if (d.x[k].shape().rank() < 1 || d.x[k].rows() < 1)
      throw_data_error(d.where[k], "it holds no samples");
    shapes.push_back({d.keys.empty() ? std::string() : d.keys[k], d.x[k].sample_shape()});
  }
  run.n = d.x[0].rows();

  const auto t_load = std::chrono::steady_clock::now();
  run.lm = load_keras_model(a.model, a.weights, shapes);
  run.load_seconds = seconds_since(t_load);
  if (!run.lm.has_weights)
    throw UsageError("failed to " + a.command + " with '" + a.model +
                     "': it holds no weights; expected "
                     "--weights WEIGHTS.h5 (model.save_weights) with an architecture file");
  const Model& model = *run.lm.model;
  match_inputs(a, model, d);
  for (size_t k = 0; k < d.x.size(); ++k) {
    if (d.x[k].rows() != run.n)
      throw DataError("failed to " + a.command + " with '" + a.model + "': '" + d.where[k] +
                      "' has " + std::to_string(d.x[k].rows()) + " samples and '" + d.where[0] +
                      "' " + std::to_string(run.n) + "; expected the same number in every input");
    check_input(a, model, k, d.x[k], d.where[k]);
  }
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
