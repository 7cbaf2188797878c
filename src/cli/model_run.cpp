// Running one loaded model over a data set for predict and evaluate (see model_run.h).
#include "cli/model_run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "io/zip_archive.h"
#include "model/network.h"
#include "platform/cpu.h"
#include "platform/files.h"
#include "platform/limits.h"

namespace nnfleet::cli {
namespace {

// Rows per forward pass inside a worker's chunk: activations of a few images stay in L1/L2, where
// a whole chunk's (256 images of m7: 38 MB for one layer) would stream through memory. Measured on
// m7 (W2), one core: 7,899 / 8,557 / 7,766 / 5,627 samples/s at 4 / 8 / 16 / 256 rows.
constexpr int kForwardRows = 8;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether data samples of shape `d` can feed a model input `m`: the same dimensions once the
// 1s are dropped (so [28,28] feeds [28,28,1]), which keeps the row-major layout.
bool compatible(const Shape& d, const Shape& m) {
  if (d == m) return true;
  if (d.size() != m.size()) return false;
  std::vector<int64_t> a, b;
  for (int64_t v : d)
    if (v != 1) a.push_back(v);
  for (int64_t v : m)
    if (v != 1) b.push_back(v);
  return a == b;
}

LossSpec loss_of(const RunArgs& a, const LoadedModel& lm) {
  if (!a.loss.empty()) return parse_loss(Json(a.loss));
  const Json& tc = lm.training_config;
  if (tc.is_object() && tc.contains("loss") && !tc["loss"].is_null()) {
    try {
      return parse_loss(tc["loss"]);
    } catch (const Error& e) {
      throw UsageError("failed to use the loss of '" + a.model + "' (" + e.what() +
                       "); expected --loss NAME");
    }
  }
  throw UsageError("failed to compute losses: '" + a.model +
                   "' names no loss; expected --loss NAME (e.g. categorical_crossentropy)");
}

// The targets as class labels 0..k-1 for `loss`: each value of `y` (read from `file`) must be an
// integer in that range. Checked on the values as stored, before any conversion to int32, so an
// int64 label of 2^31 or a float of 1e300 is refused, never wrapped into another class.
std::vector<int32_t> class_labels(const Array& y, int k, const std::string& file,
                                  const std::string& loss) {
  const int64_t n = y.rows(), values = y.shape().size();
  for (int64_t i = 0; i < values; ++i) {
    const double v = y.at(i);
    if (v == std::floor(v) && v >= 0 && v < k) continue;
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    const std::string got = y.dtype() == DType::kI64
                                ? std::to_string(static_cast<const int64_t*>(y.data())[i])
                                : std::string(text);
    throw DataError("failed to compute " + loss + ": '" + file + "' has the label " + got +
                    " at sample " + std::to_string(i / y.row_size()) +
                    (y.row_size() > 1 ? ", step " + std::to_string(i % y.row_size()) : "") +
                    "; expected integer class labels 0.." + std::to_string(k - 1) +
                    " (the model has " + std::to_string(k) + " outputs)");
  }
  if (values > limits::kMaxLabel)
    throw DataError("failed to compute " + loss + ": '" + file + "' has " + std::to_string(values) +
                    " labels; expected at most " + std::to_string(limits::kMaxLabel));
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  std::vector<int32_t> labels(static_cast<size_t>(values));
  gather_labels(y, all.data(), static_cast<int>(n), labels.data());
  return labels;
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
  const Shape& want = model.input(k).shape;
  const std::string what =
      model.num_inputs() > 1 ? "input '" + model.input(k).name + "' " : "input ";
  if (!compatible(x.sample_shape(), want))
    throw DataError("failed to " + a.command + " with '" + a.model + "': the samples of '" + file +
                    "' have shape " + x.sample_shape().str() + " (data " + x.shape().str() +
                    "); expected the model " + what + want.str() +
                    "\nhint: reshape the data, or check that the file is the right one");
  if (const Model::IdInput& ids = model.id_input(); ids.limit > 0 && ids.input == k) {
    if (a.scale != 1.0)
      throw UsageError("failed to " + a.command + " with '" + a.model + "': --scale " +
                       std::to_string(a.scale) + " would change the ids its Embedding '" +
                       ids.layer + "' reads; expected --scale 1");
    if (const auto bad = first_bad_id(x, ids.limit))
      throw DataError("failed to " + a.command + " with '" + a.model + "': row " +
                      std::to_string(bad->row) + " of '" + file + "' holds " +
                      json_number(bad->value) + ", not an id the Embedding '" + ids.layer +
                      "' has; expected integers in [0, " + std::to_string(ids.limit) + ")");
  }
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

OutputTargets make_targets(const Array& y, const std::string& y_file, const LossSpec& loss,
                           const Shape& out_shape, int64_t n) {
  OutputTargets o;
  o.loss = loss;
  const int k = static_cast<int>(out_shape.size());
  if (y.rows() != n)
    throw DataError("failed to compute losses: '" + y_file + "' has " + std::to_string(y.rows()) +
                    " targets for " + std::to_string(n) + " samples; expected one per sample");
  // Per-timestep outputs [T, C]: the loss applies to each of the `steps` rows of C (Targets).
  const int steps = loss_steps(out_shape), classes = k / steps;
  const bool one_per_row = y.row_size() == steps;
  if (loss.sparse() ||
      (one_per_row && classes > 1 && loss.kind == LossKind::kCategoricalCrossentropy)) {
    if (!one_per_row) {
      Shape want = out_shape.with_batch(n);
      want[-1] = 1;
      throw DataError(
          "failed to compute " + loss_name(loss) + ": the targets in '" + y_file + "' have shape " +
          y.shape().str() + " (" + dtype_name(y.dtype()) + "); expected integer class labels " +
          (steps == 1 ? "[" + std::to_string(n) + "]"
                      : want.str() + ", one per timestep of the output " + out_shape.str()));
    }
    o.labels = class_labels(y, classes, y_file, loss_name(loss));
    if (!loss.sparse()) {
      // Integer labels with categorical_crossentropy: one-hot rows of `classes`.
      o.values.assign(static_cast<size_t>(n) * k, 0.0f);
      for (size_t r = 0; r < o.labels.size(); ++r)
        o.values[r * classes + static_cast<size_t>(o.labels[r])] = 1.0f;
      o.labels.clear();
    }
    return o;
  }
  if (y.row_size() != k)
    throw DataError("failed to compute " + loss_name(loss) + ": the targets in '" + y_file +
                    "' have shape " + y.shape().str() + "; expected [" + std::to_string(n) + "," +
                    std::to_string(k) + "] to match the model output " + out_shape.str());
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  o.values.resize(static_cast<size_t>(n) * k);
  gather_rows(y, all.data(), static_cast<int>(n), 1.0f, o.values.data());
  return o;
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

// Each output's loss: --loss for all, or the model file's (one for all, a list in output order,
// or a dict by output name, as Keras's compile takes them).
LossSpec output_loss_of(const RunArgs& a, const LoadedModel& lm, size_t j) {
  const Model& m = *lm.model;
  const Json& tc = lm.training_config;
  if (a.loss.empty() && m.num_outputs() > 1 && tc.is_object() && tc.contains("loss")) {
    const Json& l = tc["loss"];
    const Json* pick = nullptr;
    if (l.is_array() && l.size() == m.num_outputs()) pick = &l[j];
    if (l.is_object() && l.contains(m.output_name(j))) pick = &l[m.output_name(j)];
    if (pick) {
      try {
        return parse_loss(*pick);
      } catch (const Error& e) {
        throw UsageError("failed to use the loss of '" + a.model + "' for output '" +
                         m.output_name(j) + "' (" + e.what() + "); expected --loss NAME");
      }
    }
  }
  return loss_of(a, lm);
}

RunResult run_workers(const RunArgs& a, const LoadedModel& lm, const InputData& d,
                      const std::vector<OutputTargets>& targets, int64_t n) {
  const Model& model = *lm.model;
  const size_t outs = model.num_outputs();
  RunResult r;
  std::vector<float*> pred_data, loss_data;
  std::vector<int> ks;
  for (size_t j = 0; j < outs; ++j) {
    r.pred.push_back(Array::zeros(DType::kF32, model.output_shape(j).with_batch(n)));
    r.losses.push_back(Array::zeros(DType::kF32, Shape{n}));
    pred_data.push_back(static_cast<float*>(r.pred[j].mutable_data()));
    loss_data.push_back(static_cast<float*>(r.losses[j].mutable_data()));
    ks.push_back(static_cast<int>(model.output_shape(j).size()));
  }
  const std::vector<int> cpus = allowed_cpus();
  const int64_t chunks = (n + a.batch - 1) / a.batch;
  int workers = a.workers > 0 ? a.workers : std::max<int>(1, static_cast<int>(cpus.size()));
  workers = static_cast<int>(std::min<int64_t>(workers, chunks));
  // Metric sums per chunk, output and metric (slot c * slots + s), and metric weights per chunk
  // and output: summed in chunk order afterwards, so the totals do not depend on --workers.
  std::vector<size_t> first_slot(outs + 1, 0);
  for (size_t j = 0; j < targets.size(); ++j)
    first_slot[j + 1] = first_slot[j] + targets[j].metrics.size();
  const size_t slots = first_slot[targets.size()];
  std::vector<double> chunk_sums(static_cast<size_t>(chunks) * slots, 0.0);
  std::vector<double> chunk_weights(static_cast<size_t>(chunks) * outs, 0.0);
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const float scale = static_cast<float>(a.scale);

  auto work = [&](int w) {
    try {
      if (!cpus.empty()) pin_this_thread(cpus[static_cast<size_t>(w) % cpus.size()]);
      // A worker takes --batch rows at a time and runs them through the network kForwardRows
      // at a time, so that every layer's activations stay in cache.
      const int step = std::min(a.batch, kForwardRows);
      Network net(lm.model, step, lm.params.data());
      std::vector<int64_t> idx(static_cast<size_t>(step));
      for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
        const int64_t end = std::min<int64_t>(n, (c + 1) * a.batch);
        for (int64_t begin = c * a.batch; begin < end; begin += step) {
          const int rows = static_cast<int>(std::min<int64_t>(step, end - begin));
          for (int i = 0; i < rows; ++i) idx[static_cast<size_t>(i)] = begin + i;
          for (size_t k = 0; k < d.x.size(); ++k)
            gather_rows(d.x[k], idx.data(), rows, scale, net.input(k));
          net.forward(rows, false);
          for (size_t j = 0; j < outs; ++j) {
            const int k = ks[j];
            std::copy(net.output(j), net.output(j) + static_cast<size_t>(rows) * k,
                      pred_data[j] + static_cast<size_t>(begin) * k);
            if (targets.empty()) continue;
            const OutputTargets& o = targets[j];
            Targets t;
            if (!o.labels.empty())
              t.labels = o.labels.data() + static_cast<size_t>(begin) * net.output_steps(j);
            else
              t.values = o.values.data() + static_cast<size_t>(begin) * k;
            t = net.on_output(t, j);
            loss_forward(o.loss, rows, k, net.output(j), t, loss_data[j] + begin);
            if (o.metrics.empty()) continue;
            chunk_weights[static_cast<size_t>(c) * outs + j] += metric_weight(rows, t);
            double* sums = chunk_sums.data() + static_cast<size_t>(c) * slots + first_slot[j];
            for (size_t m = 0; m < o.metrics.size(); ++m)
              sums[m] += metric_sum(o.metrics[m], rows, k, net.output(j), t, o.loss.from_logits);
          }
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> g(failure_mutex);
      if (!failure) failure = std::current_exception();
      next.store(chunks);  // the others stop after their current chunk
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work, w);
  work(0);
  for (auto& t : threads) t.join();
  r.seconds = seconds_since(t0);
  r.workers = workers;
  if (failure) std::rethrow_exception(failure);
  r.metric_sums.resize(targets.size());
  r.metric_weights.assign(targets.size(), 0.0);
  for (size_t j = 0; j < targets.size(); ++j) {
    r.metric_sums[j].assign(targets[j].metrics.size(), 0.0);
    for (int64_t c = 0; c < chunks; ++c) {
      r.metric_weights[j] += chunk_weights[static_cast<size_t>(c) * outs + j];
      for (size_t m = 0; m < targets[j].metrics.size(); ++m)
        r.metric_sums[j][m] += chunk_sums[static_cast<size_t>(c) * slots + first_slot[j] + m];
    }
  }
  return r;
}

LoadedRun load_run(const RunArgs& a) {
  if (a.batch < 1)
    throw UsageError("failed to parse --batch: expected a positive number, got " +
                     std::to_string(a.batch));
  if (a.workers < 0)
    throw UsageError("failed to parse --workers: expected a positive number, got " +
                     std::to_string(a.workers));
  if (!std::isfinite(a.scale)) throw UsageError("failed to parse --scale: expected a number");

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
                "Rows a worker takes at a time (default 256); it runs them through the model 8 "
                "at a time");
  c->add_option(
      "--workers", a.workers,
      "Worker threads, each pinned to one core (default: the cores this process may use)");
  c->add_option("--loss-out", a.loss_out,
                "Per-sample losses file (.npy, float32 [N]); one per model output, or one .npz")
      ->allow_extra_args(false);
}

}  // namespace nnfleet::cli
