// The prediction engine (predict_core.h).
#include "api/predict_core.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "model/network.h"
#include "platform/cpu.h"
#include "platform/limits.h"

namespace nnfleet::api_detail {
namespace {

// A data value as it reads in a message: 12, 3.5, -1.
std::string json_number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Rows per forward pass inside a worker's chunk: activations of a few images stay in L1/L2, where
// a whole chunk's (256 images of m7: 38 MB for one layer) would stream through memory. Measured on
// m7 (W2), one core: 7,899 / 8,557 / 7,766 / 5,627 samples/s at 4 / 8 / 16 / 256 rows.
constexpr int kForwardRows = 8;

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

}  // namespace

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

void check_input(const std::string& model_path, double scale, const Model& model, size_t k,
                 const Array& x, const std::string& file) {
  const Shape& want = model.input(k).shape;
  const std::string what =
      model.num_inputs() > 1 ? "input '" + model.input(k).name + "' " : "input ";
  if (!compatible(x.sample_shape(), want))
    throw DataError("failed to predict with '" + model_path + "': the samples of '" + file +
                    "' have shape " + x.sample_shape().str() + " (data " + x.shape().str() +
                    "); expected the model " + what + want.str() +
                    "\nhint: reshape the data, or check that the file is the right one");
  if (const Model::IdInput& ids = model.id_input(); ids.limit > 0 && ids.input == k) {
    if (scale != 1.0)
      throw UsageError("failed to predict with '" + model_path + "': --scale " +
                       std::to_string(scale) + " would change the ids its Embedding '" + ids.layer +
                       "' reads; expected --scale 1");
    if (const auto bad = first_bad_id(x, ids.limit))
      throw DataError("failed to predict with '" + model_path + "': row " +
                      std::to_string(bad->row) + " of '" + file + "' holds " +
                      json_number(bad->value) + ", not an id the Embedding '" + ids.layer +
                      "' has; expected integers in [0, " + std::to_string(ids.limit) + ")");
  }
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

int run_predict_job(const PredictJob& job) {
  const Model& model = *job.lm->model;
  const size_t outs = model.num_outputs();
  std::vector<int> ks;
  for (size_t j = 0; j < outs; ++j) ks.push_back(static_cast<int>(model.output_shape(j).size()));
  const std::vector<int> cpus = allowed_cpus();
  const int64_t chunks = (job.n + job.batch - 1) / job.batch;
  int workers = job.workers > 0 ? job.workers : std::max<int>(1, static_cast<int>(cpus.size()));
  workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(workers, chunks)));
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const float scale = job.scale;

  auto work = [&](int w) {
    try {
      if (!cpus.empty()) pin_this_thread(cpus[static_cast<size_t>(w) % cpus.size()]);
      // A worker takes --batch rows at a time and runs them through the network kForwardRows
      // at a time, so that every layer's activations stay in cache.
      const int step = std::min(job.batch, kForwardRows);
      Network net(job.lm->model, step, job.lm->params.data());
      std::vector<int64_t> idx(static_cast<size_t>(step));
      for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
        const int64_t end = std::min<int64_t>(job.n, (c + 1) * job.batch);
        for (int64_t begin = c * job.batch; begin < end; begin += step) {
          const int rows = static_cast<int>(std::min<int64_t>(step, end - begin));
          for (int i = 0; i < rows; ++i) idx[static_cast<size_t>(i)] = begin + i;
          for (size_t k = 0; k < (*job.x).size(); ++k)
            gather_rows((*job.x)[k], idx.data(), rows, scale, net.input(k));
          net.forward(rows, false);
          for (size_t j = 0; j < outs; ++j) {
            const int k = ks[j];
            std::copy(net.output(j), net.output(j) + static_cast<size_t>(rows) * k,
                      job.predictions[j] + static_cast<size_t>(begin) * k);
            if ((*job.targets).empty()) continue;
            Targets t;
            if (!(*job.targets)[j].labels.empty())
              t.labels = (*job.targets)[j].labels.data() +
                         static_cast<size_t>(begin) * net.output_steps(j);
            else
              t.values = (*job.targets)[j].values.data() + static_cast<size_t>(begin) * k;
            loss_forward((*job.targets)[j].loss, rows, k, net.output(j), net.on_output(t, j),
                         job.losses[j] + begin);
          }
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> g(failure_mutex);
      if (!failure) failure = std::current_exception();
      next.store(chunks);  // the others stop after their current chunk
    }
  };
  // Every worker on a thread of its own: the caller's thread (a Python interpreter's, say) is
  // never pinned to a core.
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  return workers;
}

}  // namespace nnfleet::api_detail
