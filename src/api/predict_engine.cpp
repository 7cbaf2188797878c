// The prediction engine (predict_engine.h).
#include "api/predict_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>

#include "core/limits.h"
#include "model/network.h"
#include "platform/cpu.h"
#include "platform/parallel.h"

namespace nnfleet::api_detail {
namespace {

// Rows per forward pass inside a worker's chunk: activations of a few images stay in cache, where
// a whole chunk's (256 images of m7: 38 MB for one layer) would stream through memory, but each
// pass reads every Dense kernel once (m7's 9216 x 128: 4.7 MB), so fewer rows read it more often.
// Measured on m7 (W2), one core, per machine kind: on AVX-512 (1 MiB L2 per core) 7,899 / 8,557 /
// 7,766 / 5,627 samples/s at 4 / 8 / 16 / 256 rows; on Zen 3 (AVX2, 512 KiB L2; three interleaved
// runs of 10,000 images) 2,332-2,744 / 2,462-2,772 / 2,791-3,073 / 2,946-3,240 at 8 / 16 / 32 / 64.
int forward_rows() {
  static const int rows = __builtin_cpu_supports("avx512f") ? 8 : 32;
  return rows;
}

// v to `digits` significant digits.
std::string number_text_digits(double v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

// The shortest text that reads back as v (1e+39, not 1.0000000000000001e+39).
std::string number_text(double v) {
  char b[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    if (!std::isfinite(v) || std::strtod(b, nullptr) == v) break;
  }
  return b;
}

// The first finite value of `x` that times `scale` lies beyond float32's range (the model would
// see infinities, then NaN), and its row; nullopt when there is none. Read once per call, never
// on the hot path, and only when the dtype's values could overflow at this scale.
std::optional<BadId> first_overflow(const Array& x, double scale) {
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  const double bound = x.dtype() == DType::kU8    ? 255.0
                       : x.dtype() == DType::kI32 ? 2147483648.0
                       : x.dtype() == DType::kI64 ? 9.3e18
                       : x.dtype() == DType::kF32 ? kFloatMax
                                                  : HUGE_VAL;
  if (bound * std::fabs(scale) <= kFloatMax) return std::nullopt;
  const int64_t values = x.shape().size(), per_row = std::max<int64_t>(1, x.row_size());
  for (int64_t i = 0; i < values; ++i) {
    const double v = x.at(i);
    if (std::isfinite(v) && std::fabs(v * scale) > kFloatMax) return BadId{i / per_row, v};
  }
  return std::nullopt;
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

// The loss named by `loss`, or the one the file's compile() gave every output.
LossSpec single_loss(const Wording& w, const LoadedModel& lm, const std::string& model_path,
                     const std::string& loss) {
  if (!loss.empty()) return parse_loss(Json(loss));
  const Json& tc = lm.training_config;
  if (tc.is_object() && tc.contains("loss") && !tc["loss"].is_null()) {
    try {
      return parse_loss(tc["loss"]);
    } catch (const Error& e) {
      throw UsageError("failed to use the loss of '" + model_path + "' (" + e.what() +
                       "); expected " + w.loss_option + "NAME");
    }
  }
  throw UsageError("failed to compute losses: '" + model_path + "' names no loss; expected " +
                   w.loss_option + "NAME (e.g. categorical_crossentropy)");
}

// One worker: takes chunks until none is left, writing their rows' outputs, losses and sums.
struct ChunkRun {
  const PredictJob& job;
  int64_t chunks;
  size_t slots;                    // metric state doubles per chunk
  std::vector<size_t> first_slot;  // per output: where its MetricSet's state starts in a chunk's
  std::vector<double> states;      // chunk c's metric states at c * slots
  std::atomic<int64_t> next{0};

  void work();
};

void ChunkRun::work() {
  const LoadedModel& lm = *job.lm;
  const size_t outs = lm.model->num_outputs();
  const std::vector<OutputTargets>& targets = *job.targets;
  // A worker takes job.batch rows at a time and runs them through the network forward_rows() at
  // a time, so that every layer's activations stay in cache.
  const int step = std::min(job.batch, forward_rows());
  Network net(lm.model, step, lm.params.data());
  std::vector<int64_t> idx(static_cast<size_t>(step));
  for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
    const int64_t end = std::min<int64_t>(job.n, (c + 1) * job.batch);
    for (int64_t begin = c * job.batch; begin < end; begin += step) {
      const int rows = static_cast<int>(std::min<int64_t>(step, end - begin));
      for (int i = 0; i < rows; ++i) idx[static_cast<size_t>(i)] = begin + i;
      for (size_t k = 0; k < job.x->size(); ++k)
        gather_rows((*job.x)[k], idx.data(), rows, job.scale, net.input(k));
      net.forward(rows, false);
      for (size_t j = 0; j < outs; ++j) {
        const int k = static_cast<int>(lm.model->output_shape(j).size());
        std::copy(net.output(j), net.output(j) + static_cast<size_t>(rows) * k,
                  job.predictions[j] + static_cast<size_t>(begin) * k);
        if (targets.empty()) continue;
        const OutputTargets& o = targets[j];
        Targets t;
        if (!o.labels.empty())
          t.labels = o.labels.data() + static_cast<size_t>(begin) * net.output_steps(j);
        else
          t.values = o.values.data() + static_cast<size_t>(begin) * k;
        t = net.on_output(t, j);
        loss_forward(o.loss, rows, k, net.output(j), t, job.losses[j] + begin);
        if (o.metrics.size() == 0) continue;
        o.metrics.accumulate(states.data() + static_cast<size_t>(c) * slots + first_slot[j], rows,
                             net.output(j), t, nullptr);
      }
    }
  }
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

void check_scale(const Wording& w, const std::string& model_path, double scale) {
  if (std::isfinite(scale) && std::fabs(scale) <= std::numeric_limits<float>::max()) return;
  throw UsageError("failed to " + w.verb + " with '" + model_path + "': " + w.scale_option +
                   number_text(scale) + " is not a number the inputs can be multiplied by; " +
                   "expected a finite number within float32's range (|scale| <= 3.4e38), e.g. " +
                   w.scale_option + "0.00392156862745098");
}

void check_input(const Wording& w, const std::string& model_path, double scale, const Model& model,
                 size_t k, const Array& x, const std::string& file) {
  check_scale(w, model_path, scale);
  if (const auto big = first_overflow(x, scale))
    throw DataError("failed to " + w.verb + " with '" + model_path + "': row " +
                    std::to_string(big->row) + " of '" + file + "' holds " +
                    number_text(big->value) + ", which becomes about " +
                    number_text_digits(big->value * scale, 3) + " at " + w.scale_option +
                    number_text(scale) + "; expected every scaled input within float32's range " +
                    "(+-3.4e38)\nhint: choose a smaller scale, or check the data");
  const Shape& want = model.input(k).shape;
  const std::string what =
      model.num_inputs() > 1 ? "input '" + model.input(k).name + "' " : "input ";
  if (!compatible(x.sample_shape(), want))
    throw DataError("failed to " + w.verb + " with '" + model_path + "': the samples of '" + file +
                    "' have shape " + x.sample_shape().str() + " (data " + x.shape().str() +
                    "); expected the model " + what + want.str() +
                    "\nhint: reshape the data, or check that the file is the right one");
  if (const Model::IdInput* id = model.id_input_of(k)) {
    const Model::IdInput& ids = *id;
    if (scale != 1.0)
      throw UsageError("failed to " + w.verb + " with '" + model_path + "': " + w.scale_option +
                       std::to_string(scale) + " would change the ids its Embedding '" + ids.layer +
                       "' reads; expected " + w.scale_option + "1");
    if (const auto bad = first_bad_id(x, ids.limit))
      throw DataError("failed to " + w.verb + " with '" + model_path + "': row " +
                      std::to_string(bad->row) + " of '" + file + "' holds " +
                      number_text(bad->value) + ", not an id the Embedding '" + ids.layer +
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
  // The rule training applies (target_shape_problem): integer labels with
  // categorical_crossentropy are refused here too, as Keras refuses them.
  if (const std::string p = target_shape_problem(loss, out_shape, y.sample_shape()); !p.empty())
    throw DataError("failed to compute " + loss_name(loss) + ": the targets in '" + y_file +
                    "' have shape " + y.shape().str() + " (" + dtype_name(y.dtype()) + "): " + p);
  if (loss.sparse()) {
    o.labels = class_labels(y, k / loss_steps(out_shape), y_file, loss_name(loss));
    return o;
  }
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  o.values.resize(static_cast<size_t>(n) * k);
  gather_rows(y, all.data(), static_cast<int>(n), 1.0f, o.values.data());
  // A NaN or infinite target (or a float64 beyond float's range) makes the loss NaN and every
  // metric meaningless: refused by name and row rather than reported as a number.
  for (size_t i = 0; i < o.values.size(); ++i)
    if (!std::isfinite(o.values[i]))
      throw DataError("failed to compute " + loss_name(loss) + ": '" + y_file +
                      "' has the target " + number_text(y.at(static_cast<int64_t>(i))) +
                      " at sample " + std::to_string(i / static_cast<size_t>(k)) + ", value " +
                      std::to_string(i % static_cast<size_t>(k)) +
                      "; expected finite numbers within float32's range");
  return o;
}

LossSpec output_loss(const Wording& w, const LoadedModel& lm, const std::string& model_path,
                     const std::string& loss, size_t j) {
  const Model& m = *lm.model;
  const Json& tc = lm.training_config;
  if (loss.empty() && m.num_outputs() > 1 && tc.is_object() && tc.contains("loss")) {
    const Json& l = tc["loss"];
    const Json* pick = nullptr;
    if (l.is_array() && l.size() == m.num_outputs()) pick = &l[j];
    if (l.is_object() && l.contains(m.output_name(j))) pick = &l[m.output_name(j)];
    if (pick) {
      try {
        return parse_loss(*pick);
      } catch (const Error& e) {
        throw UsageError("failed to use the loss of '" + model_path + "' for output '" +
                         m.output_name(j) + "' (" + e.what() + "); expected " + w.loss_option +
                         "NAME");
      }
    }
  }
  return single_loss(w, lm, model_path, loss);
}

PredictTotals run_predict_job(const PredictJob& job) {
  const size_t outs = job.lm->model->num_outputs();
  const std::vector<OutputTargets>& targets = *job.targets;
  NNFLEET_CHECK(job.predictions.size() == outs);
  NNFLEET_CHECK(targets.empty() || (targets.size() == outs && job.losses.size() == outs));
  const std::vector<int> cpus = allowed_cpus();
  ChunkRun run{job, (job.n + job.batch - 1) / job.batch, 0, std::vector<size_t>(outs + 1, 0), {}};
  int workers = job.workers > 0 ? job.workers : std::max<int>(1, static_cast<int>(cpus.size()));
  workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(workers, run.chunks)));
  for (size_t j = 0; j < targets.size(); ++j)
    run.first_slot[j + 1] = run.first_slot[j] + targets[j].metrics.state_size();
  run.slots = run.first_slot[targets.size()];
  run.states.assign(static_cast<size_t>(run.chunks) * run.slots, 0.0);
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&](int) {
    try {
      run.work();
    } catch (...) {
      std::lock_guard<std::mutex> g(failure_mutex);
      if (!failure) failure = std::current_exception();
      run.next.store(run.chunks);  // the others stop after their current chunk
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  // Worker w on cpus[w % cpus.size()], unpinned when the cpus are unknown.
  std::vector<int> cores(static_cast<size_t>(workers), -1);
  for (size_t w = 0; w < cores.size() && !cpus.empty(); ++w) cores[w] = cpus[w % cpus.size()];
  run_pinned_workers_here(cores, work);
  PredictTotals r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.workers = workers;
  if (failure) std::rethrow_exception(failure);
  // Every metric's state is a sum, so the chunks' states add up to the whole run's.
  std::vector<double> state;
  r.metric_values.resize(targets.size());
  for (size_t j = 0; j < targets.size(); ++j) {
    const MetricSet& set = targets[j].metrics;
    state.assign(set.state_size(), 0.0);
    for (int64_t c = 0; c < run.chunks; ++c) {
      const double* s = run.states.data() + static_cast<size_t>(c) * run.slots + run.first_slot[j];
      for (size_t i = 0; i < state.size(); ++i) state[i] += s[i];
    }
    for (size_t m = 0; m < set.size(); ++m)
      r.metric_values[j].push_back(set.value(m, state.data()));
  }
  return r;
}

}  // namespace nnfleet::api_detail
