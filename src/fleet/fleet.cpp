// The fleet runner: validation, output folder, pinned workers, results. Under MPI, rank 0 runs
// this with the cluster coordinator on its main thread; the other ranks go to run_worker_rank().
#include "fleet/fleet.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "fleet/checkpoint.h"
#include "fleet/fine_tune.h"
#include "fleet/fleet_data.h"
#include "fleet/mpi_fleet.h"
#include "fleet/results.h"
#include "platform/cpu.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using fleet_detail::check_room;
using fleet_detail::PreparedJob;
using fleet_detail::RankInfo;
using fleet_detail::RunFolder;
using fleet_detail::RunState;

using Clock = std::chrono::steady_clock;

std::string gib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return b;
}

// Tells two observers (the display's and the caller's) of a job's progress.
class TeeObserver : public JobObserver {
 public:
  TeeObserver(JobObserver* a, JobObserver* b) : a_(a), b_(b) {}
  void on_batch(const ModelSpec& spec, int epoch, int batch, int batches, double loss,
                double metric, double samples_per_second) override {
    a_->on_batch(spec, epoch, batch, batches, loss, metric, samples_per_second);
    if (b_) b_->on_batch(spec, epoch, batch, batches, loss, metric, samples_per_second);
  }
  void on_epoch(const ModelSpec& spec, const EpochRecord& rec) override {
    a_->on_epoch(spec, rec);
    if (b_) b_->on_epoch(spec, rec);
  }

 private:
  JobObserver* a_;
  JobObserver* b_;
};

// Checks that one source's targets suit the model's output and loss (the test targets are
// checked like the training ones: evaluation gathers them into the same buffers); adds problems.
void check_source_targets(const std::string& at, const char* role, const std::string& source,
                          const Array& y, const LabelStats& st, const ModelSpec& s, const Model& m,
                          std::vector<std::string>& problems, size_t out = 0,
                          const LossSpec* out_loss = nullptr) {
  const Shape& shape = m.output_shape(out);
  const int64_t k = shape.size();
  const int64_t steps = loss_steps(shape), classes = k / steps;
  const LossSpec& loss = out_loss ? *out_loss : s.loss;
  const Shape ys = y.sample_shape();
  char range_text[96];
  std::snprintf(range_text, sizeof range_text, "labels %g..%g", st.min, st.max);
  const std::string range = range_text;
  const std::string which =
      m.num_outputs() > 1 ? "output '" + m.output_name(out) + "': " : std::string();
  auto add = [&](const std::string& problem) {
    problems.push_back(at + which + problem + " (" + role + " data " + source + ")");
  };
  switch (loss.kind) {
    case LossKind::kSparseCategoricalCrossentropy:
      if (ys.size() != steps) {
        // Per-timestep outputs [T, C] take labels [N, T] (or [N, T, 1]), as Keras does.
        Shape labels;
        for (int a = 0; a + 1 < shape.rank(); ++a) labels.push_back(shape[a]);
        Shape labels1 = labels;
        labels1.push_back(1);
        add("sparse_categorical_crossentropy needs one integer label per " +
            (steps == 1
                 ? std::string("sample; expected y of shape [N] or [N,1]")
                 : "timestep of the output " + shape.str() +
                       "; expected y samples of shape " + labels.str() + " or " + labels1.str()) +
            ", got y samples of shape " + ys.str() +
            "; use categorical_crossentropy for one-hot targets");
      } else if (!st.integral || st.min < 0 || st.max >= static_cast<double>(classes)) {
        add("labels out of range for sparse_categorical_crossentropy; expected integers in 0.." +
            std::to_string(classes - 1) + " (the model outputs " + std::to_string(classes) +
            " classes" + (steps > 1 ? " per timestep" : "") + "), got " + range +
            (st.integral ? "" : " with fractional values"));
      }
      break;
    case LossKind::kBinaryCrossentropy:
      if (st.min < 0 || st.max > 1)
        add("binary_crossentropy needs targets in [0, 1]; got " + range);
      [[fallthrough]];
    default:
      if (ys.size() != k)
        add("targets do not match the model output; expected y samples of " + std::to_string(k) +
            " values (output " + shape.str() + "), got " + ys.str() +
            (ys.size() == steps && classes > 1
                 ? "; for integer class labels use loss: "
                   "sparse_categorical_crossentropy, for training and test "
                   "targets alike"
                 : ""));
  }
}

// The training (and validation) targets and the test targets against the model; adds problems.
void check_targets(const ModelSpec& s, const Model& m, const FleetData& d,
                   std::vector<std::string>& problems) {
  const std::string at = s.where + ": model '" + s.name + "': ";
  if (m.num_outputs() == 1 && d.num_y() == 1) {
    const size_t before = problems.size();
    check_source_targets(at, "training", d.train_name, d.train.y, d.train_labels, s, m, problems);
    // The test targets' problem would mostly repeat the training targets' one: only when those
    // pass.
    if (d.test && problems.size() == before)
      check_source_targets(at, "test", d.test_name, d.test->y, d.test_labels, s, m, problems);
    return;
  }
  // Several outputs: one target per output, each checked against its output and loss.
  if (d.num_y() != m.num_outputs()) {
    std::string names;
    for (size_t j = 0; j < m.num_outputs(); ++j) names += (j ? ", " : "") + m.output_name(j);
    problems.push_back(at + "the model has " + std::to_string(m.num_outputs()) + " outputs (" +
                       names + "); expected one target per output in the data (y: [...]), got " +
                       std::to_string(d.num_y()) + " (data " + d.train_name + ")");
    return;
  }
  TrainSpec ts;
  try {
    ts = train_spec_of(s, m);
  } catch (const Error& e) {
    problems.push_back(at + e.what());
    return;
  }
  for (size_t j = 0; j < m.num_outputs(); ++j) {
    const size_t before = problems.size();
    check_source_targets(at, "training", d.train_name, d.y(j), d.labels(j), s, m, problems, j,
                         &ts.loss_of(j));
    if (d.test && problems.size() == before)
      check_source_targets(at, "test", d.test_name, d.y(j, true), d.labels(j, true), s, m,
                           problems, j, &ts.loss_of(j));
  }
}

// Several inputs: one array per input in the data, each of the input's shape; adds problems.
void check_inputs(const ModelSpec& s, const Model& m, const FleetData& d,
                  std::vector<std::string>& problems) {
  const std::string at = s.where + ": model '" + s.name + "': ";
  std::string names;
  for (size_t k = 0; k < m.num_inputs(); ++k)
    names += (k ? ", " : "") + m.input(k).name + " " + m.input(k).shape.str();
  if (d.num_x() != m.num_inputs()) {
    problems.push_back(at + "the model has " + std::to_string(m.num_inputs()) + " input" +
                       (m.num_inputs() > 1 ? "s" : "") + " (" + names +
                       "); expected one array per input in the data (x: [...]), got " +
                       std::to_string(d.num_x()) + " (data " + d.train_name + ")");
    return;
  }
  for (size_t k = 1; k < m.num_inputs(); ++k)
    if (!(d.input_shapes[k] == m.input(k).shape))
      problems.push_back(at + "input '" + m.input(k).name + "' takes samples of shape " +
                         m.input(k).shape.str() + "; expected the data's x[" + std::to_string(k) +
                         "] to match, got " + d.input_shapes[k].str() + " (data " + d.train_name +
                         ")");
}

// The inputs of a model whose Embedding reads them as ids: each must be an id it has, checked
// here once so the training step indexes with them unchecked; adds problems.
void check_input_ids(const ModelSpec& s, const Model& m, const FleetData& d,
                     std::vector<std::string>& problems) {
  const Model::IdInput& ids = m.id_input();
  if (ids.limit == 0) return;
  const std::string at = s.where + ": model '" + s.name + "': ";
  if (d.scale != 1.0f) {
    problems.push_back(at + "data.scale would change the ids its Embedding '" + ids.layer +
                       "' reads; expected scale 1");
    return;
  }
  auto check = [&](const Array& x, const char* role, const std::string& source) {
    if (const auto bad = first_bad_id(x, ids.limit)) {
      char v[32];
      std::snprintf(v, sizeof v, "%.17g", bad->value);
      problems.push_back(at + "row " + std::to_string(bad->row) + " of the " + role +
                         " inputs holds " + v + ", not an id the Embedding '" + ids.layer +
                         "' has; expected integers in [0, " + std::to_string(ids.limit) + ") (" +
                         role + " data " + source + ")");
    }
  };
  check(d.train.x, "training", d.train_name);
  if (d.test) check(d.test->x, "test", d.test_name);
}

// A callback's monitor must be a quantity the job computes (early_stopping,
// reduce_lr_on_plateau).
void check_monitor(const ModelSpec& s, const FleetData& d, const std::string& option,
                   const std::string& mon, std::vector<std::string>& problems) {
  std::vector<std::string> valid{"loss"};
  for (const auto& name : s.metrics) valid.push_back(metric_key(name));
  for (const auto& name : s.weighted_metrics) {  // as the job names them (JobMetrics)
    const std::string key = metric_key(name);
    const bool taken = std::find(valid.begin(), valid.end(), key) != valid.end();
    valid.push_back(taken ? "weighted_" + key : key);
  }
  const size_t base = valid.size();
  if (d.n_val > 0)
    for (size_t i = 0; i < base; ++i) valid.push_back("val_" + valid[i]);
  if (std::find(valid.begin(), valid.end(), mon) != valid.end()) return;
  std::string list;
  for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
  problems.push_back(s.where + ": model '" + s.name + "': " + option + ".monitor '" + mon +
                     "' is not computed; expected one of " + list +
                     (mon.rfind("val_", 0) == 0 && d.n_val == 0
                          ? " (validation metrics need data.validation_split > 0)"
                          : ""));
}

// class_weight as Keras takes it: without a sample_weight source, for one output with one
// target per sample; adds problems.
void check_weights(const ModelSpec& s, const Model& m, const FleetData& d,
                   std::vector<std::string>& problems) {
  if (s.class_weight.empty()) return;
  const std::string at = s.where + ": model '" + s.name + "': class_weight ";
  if (!d.train_weights.empty())
    problems.push_back(at + "with a sample_weight data source; expected one of them (Keras "
                            "refuses both at the same time)");
  if (m.num_outputs() > 1)
    problems.push_back(at + "on a model with " + std::to_string(m.num_outputs()) +
                       " outputs; expected one output (Keras's class_weight is for models with "
                       "a single output: use a sample_weight source)");
  else if (m.output_shape().rank() > 1)
    problems.push_back(at + "with an output of shape " + m.output_shape().str() +
                       "; expected one target per sample (Keras refuses class_weight for "
                       "targets of 3 or more dimensions: use a sample_weight source)");
}

std::string default_out_dir(const Plan& plan) {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + plan.name + "-" + b;
}

// The model of a spec, its initial weights when a Keras file has them, and with
// restore_optimizer the file's optimizer. Throws Error.
std::shared_ptr<const Model> job_model(const ModelSpec& s, const ModelIo& io, const FleetData& data,
                                       std::vector<float>& initial_params,
                                       RestoredOptimizer& restored) {
  std::shared_ptr<const Model> m;
  if (s.keras.empty()) {
    m = build_model(s, data.input_shape);
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
  // An option nnfleet only predicts with (a regularizer, dropout inside a recurrent cell): found
  // while the plan is validated, not when the model's turn comes. Training without its effect
  // would silently give a different model than Keras trains.
  if (const std::string r = m->training_refusal(); !r.empty())
    throw ModelError("failed to train model '" + s.name + "': " + r +
                     "\nhint: remove the option from the config (predicting with it is "
                     "supported)");
  return m;
}

// Runs job `j` on this thread, its model built again (prepare_jobs() dropped it).
JobResult run_prepared(const PreparedJob& j, const ModelIo& io, const FleetData& data,
                       const JobContext& ctx) {
  std::vector<float> initial;
  RestoredOptimizer restored;
  std::shared_ptr<const Model> model;
  try {
    model = job_model(*j.spec, io, data, initial, restored);
  } catch (const Error& e) {
    JobResult r;
    r.name = j.spec->name;
    r.core = ctx.core;
    r.params = j.params;
    r.status = JobStatus::kFailed;
    r.message = e.what();
    return r;
  }
  JobContext c = ctx;
  if (j.spec->restore_optimizer) c.restored_optimizer = &restored;
  return run_job(*j.spec, std::move(model), data, c, initial.empty() ? nullptr : &initial);
}

// Rough sizes of what a job writes: its saved model (float32 weights and up to two optimizer
// slots, plus the format's own bytes) and record, and, while it runs, a checkpoint.
uint64_t model_file_bytes(const PreparedJob& j) { return 12 * uint64_t{j.params} + 16384; }
uint64_t record_bytes(const ModelSpec& s) {
  return 1024 + 48 * (2 * s.metrics.size() + 3) * static_cast<uint64_t>(s.epochs);
}
uint64_t checkpoint_bytes(const PreparedJob& j) { return 16 * uint64_t{j.params} + 4096; }

// What the pending jobs will write, `workers` of them at a time.
uint64_t output_bytes(const std::vector<PreparedJob*>& pending, int workers) {
  uint64_t total = 0;
  std::vector<uint64_t> running;
  for (const PreparedJob* j : pending) {
    total += model_file_bytes(*j) + record_bytes(*j->spec);
    running.push_back(checkpoint_bytes(*j) + model_file_bytes(*j));
  }
  std::sort(running.rbegin(), running.rend());
  for (size_t i = 0; i < running.size() && i < static_cast<size_t>(workers); ++i)
    total += running[i];
  return total;
}

// Every model built and validated against the data before anything starts; all problems are
// reported together (PlanError).
void prepare_jobs(const Plan& plan, const ModelIo& io, const std::vector<FleetData>& sources,
                  int workers, std::vector<PreparedJob>& jobs) {
  jobs.assign(plan.models.size(), PreparedJob{});
  const size_t all_data = data_bytes(sources);
  std::vector<std::string> problems;
  std::vector<size_t> estimates;
  for (size_t i = 0; i < plan.models.size(); ++i) {
    const ModelSpec& s = plan.models[i];
    const FleetData& data = sources[s.source];
    PreparedJob& j = jobs[i];
    j.spec = &s;
    j.index = i;
    std::vector<float> initial_params;
    RestoredOptimizer restored;
    try {
      j.model = job_model(s, io, data, initial_params, restored);
    } catch (const Error& e) {
      problems.push_back(s.where + ": model '" + s.name + "': " + e.what());
      continue;
    }
    check_inputs(s, *j.model, data, problems);
    check_targets(s, *j.model, data, problems);
    check_input_ids(s, *j.model, data, problems);
    if (s.early_stopping)
      check_monitor(s, data, "early_stopping", s.early_stopping->monitor, problems);
    if (s.reduce_lr_on_plateau)
      check_monitor(s, data, "reduce_lr_on_plateau", s.reduce_lr_on_plateau->monitor, problems);
    check_weights(s, *j.model, data, problems);
    TrainSpec train{s.loss, s.optimizer};
    try {
      train = train_spec_of(s, *j.model);
      for (size_t o = 0; o < j.model->num_outputs(); ++o)
        for (const auto* names : {&s.metrics, &s.weighted_metrics})
          for (const auto& m : *names)
            resolve_metric(m, train.loss_of(o), static_cast<int>(j.model->output_shape(o)[-1]));
    } catch (const Error& e) {
      problems.push_back(s.where + ": model '" + s.name + "': " + e.what());
      continue;
    }
    j.pieces = batch_pieces(s, *j.model);
    const size_t est = Network::estimate_bytes(j.model, s.batch_size, train, j.pieces);
    estimates.push_back(est);
    const size_t phys = physical_memory_bytes();
    if (est + all_data > phys)
      problems.push_back(s.where + ": model '" + s.name + "': needs an estimated " + gib(est) +
                         " of memory at batch_size " + std::to_string(s.batch_size) +
                         "; expected at most " + gib(phys > all_data ? phys - all_data : 0) +
                         " (this machine's memory less the data); reduce batch_size or the model");
    j.cost = estimated_cost(s, *j.model, data.n_train);
    j.params = j.model->trainable_params() + j.model->non_trainable_params();
    // Built again when the job runs: a plan of many models holds one at a time.
    j.model.reset();
  }
  std::sort(estimates.rbegin(), estimates.rend());
  size_t concurrent = all_data;
  for (size_t i = 0; i < estimates.size() && i < static_cast<size_t>(workers); ++i)
    concurrent += estimates[i];
  if (problems.empty() && concurrent > physical_memory_bytes())
    problems.push_back(plan.path + ": the " + std::to_string(workers) +
                       " largest models running at once need an estimated " + gib(concurrent) +
                       "; expected at most " + gib(physical_memory_bytes()) +
                       "; use fewer --workers");
  if (!problems.empty()) {
    std::string msg = "failed to validate plan '" + plan.path +
                      "': " + std::to_string(problems.size()) + " problem" +
                      (problems.size() > 1 ? "s" : "");
    for (const auto& p : problems) msg += "\n  " + p;
    throw PlanError(msg);
  }
}

struct OpenedRun {
  size_t done = 0;  // models finished earlier (--resume)
  double total_cost = 0, done_cost = 0;
  std::vector<std::string> notes;  // records not trusted
};

// 3. The output folder (created, or on --resume checked), checked for room, and the queue: on
// --resume the models it holds finished are kept, and the others go to the queue, longest first
// (plan order breaks ties). Throws UsageError, FileError.
OpenedRun open_run(const Plan& plan, const FleetOptions& opts, int workers, RunState& st,
                   std::optional<RunFolder>& folder) {
  OpenedRun o;
  std::vector<PreparedJob*> all;
  for (auto& j : st.jobs) all.push_back(&j);
  if (!opts.resume)
    check_room(st.dir, output_bytes(all, workers),
               "the files of " + std::to_string(all.size()) + " model(s)");
  folder.emplace(plan, st.dir, opts.resume);
  st.folder = &*folder;
  st.results.resize(st.jobs.size());
  for (auto& j : st.jobs) {
    o.total_cost += j.cost;
    if (opts.resume) {
      std::string why;
      if (std::optional<JobResult> r = folder->finished(j.index, j.spec->name, why)) {
        st.results[j.index] = std::move(*r);
        ++o.done;
        o.done_cost += j.cost;
        // A checkpoint left by a run killed after the record: never needed again.
        std::remove((st.dir + "/checkpoints/" + j.spec->name + ".ckpt").c_str());
        continue;
      }
      if (!why.empty()) o.notes.push_back("model '" + j.spec->name + "' is trained again: " + why);
    }
    st.queue.push_back(&j);
  }
  std::stable_sort(st.queue.begin(), st.queue.end(),
                   [](const PreparedJob* a, const PreparedJob* b) { return a->cost > b->cost; });
  folder->check_writable(output_bytes(st.queue, workers));
  return o;
}

// Which figure ranks the models: validation and test ones only when every source has them.
RankKey plan_rank_key(const Plan& plan, const std::vector<FleetData>& sources) {
  std::vector<std::string> mkeys;
  if (!plan.models.empty())
    for (const auto& m : plan.models[0].metrics) mkeys.push_back(metric_key(m));
  bool val = !sources.empty(), test = !sources.empty();
  for (const FleetData& d : sources) {
    val = val && d.n_val > 0;
    test = test && d.test.has_value();
  }
  return rank_key(mkeys, val, test);
}

// 1. Every source of the plan, loaded once (under MPI: once per node, every source on every
// node, in Plan::sources order, since each load is collective) and shared read-only.
std::vector<FleetData> load_sources(const Plan& plan, Cluster* cluster, bool& loaded_data) {
  if (!cluster) return load_plan_data(plan.sources);
  std::vector<FleetData> out;
  for (const DataSpec& spec : plan.sources)
    out.push_back(cluster->load_shared_data(spec, loaded_data));
  return out;
}

// Rank 0 of a cluster run: every rank must run the same plan on the same data.
void check_ranks_agree(const std::vector<RankInfo>& ranks) {
  const RankInfo& me = ranks[0];
  for (const RankInfo& r : ranks) {
    const std::string who = "rank " + std::to_string(r.rank) + " (" + r.host + ")";
    if (r.plan_hash != me.plan_hash)
      throw PlanError("failed to start the cluster run: " + who +
                      " loaded a different plan; "
                      "expected the same plan file on every node");
    if (r.data_hash != 0 && me.data_hash != 0 && r.data_hash != me.data_hash)
      throw DataError("failed to start the cluster run: the data " + who +
                      " loaded differs from "
                      "rank 0's; expected the same data files on every node");
  }
}

}  // namespace

PreparedJob* fleet_detail::RunState::take() {
  if (stopping()) return nullptr;
  const size_t qi = next.fetch_add(1);
  return qi < queue.size() ? queue[qi] : nullptr;
}

void fleet_detail::RunState::halt(const std::string& why) {
  if (write_error.empty()) write_error = why;
  stop = true;
}

void fleet_detail::RunState::store(const PreparedJob& job, JobResult r,
                                   const std::vector<ShippedFile>& files, std::string model_file) {
  // Only this job writes these (outside the lock). Failing to write the model fails the job, as
  // failing to save it does on this rank; a lost checkpoint only means that a resumed job starts
  // from an earlier one.
  for (const auto& [path, bytes] : files) {
    const bool checkpoint = path.rfind("checkpoints/", 0) == 0;
    try {
      write_file_atomic(dir + "/" + path, bytes, Durability::kProcessCrash);
      if (!checkpoint) model_file = path;
    } catch (const Error& e) {
      if (checkpoint) continue;
      r.status = JobStatus::kFailed;
      r.message = e.what();
      r.retry = r.write_failed = true;
    }
  }
  std::lock_guard<std::mutex> lock(out_mu);
  // A cancelled job, or one failed by the output folder, is not final: it keeps its checkpoint
  // and has no record, so --resume runs it again. A write that failed stops the run: every
  // later one would fail the same way.
  if (r.status != JobStatus::kCancelled && !r.retry) {
    try {
      folder->append(job.index, r, model_file);
      std::remove((dir + "/checkpoints/" + job.spec->name + ".ckpt").c_str());
    } catch (const Error& e) {
      r.status = JobStatus::kFailed;
      r.message = e.what();
      r.retry = r.write_failed = true;
    }
  }
  if (r.write_failed) halt(r.message);
  // The history is in jobs.log now; only the summary stays in memory.
  if (!opts.keep_history) {
    r.history.clear();
    r.history.shrink_to_fit();
  }
  results[job.index] = std::move(r);
}

FleetSummary run_fleet(const Plan& plan, const FleetOptions& opts, const ModelIo& io) {
  Cluster* cluster = opts.cluster && opts.cluster->size() > 1 ? opts.cluster : nullptr;

  // 1. Data, loaded once (under MPI: once per node) and shared read-only by every worker.
  bool loaded_data = true;
  const std::vector<FleetData> data = load_sources(plan, cluster, loaded_data);
  std::vector<int> cores = allowed_cpus();
  if (cluster && opts.workers == 0) cores = cluster->share_cpus(cores);
  const int workers = opts.workers > 0 ? opts.workers : static_cast<int>(cores.size());
  std::vector<int> worker_cores;
  for (int w = 0; w < workers; ++w)
    worker_cores.push_back(cores[static_cast<size_t>(w) % cores.size()]);

  // Under MPI every rank reports itself to rank 0; ranks other than 0 then wait for rank 0 to
  // validate the plan and open the output folder, and run their workers.
  std::vector<RankInfo> ranks;
  if (cluster) {
    RankInfo me;
    me.rank = cluster->rank();
    me.host = cluster->host();
    me.cores = worker_cores;
    me.loaded_data = loaded_data;
    me.plan_hash = fleet_detail::plan_hash(plan);
    me.data_hash = loaded_data ? fleet_detail::data_hash(data) : 0;
    for (const auto& s : cluster->gather(me.to_json().dump()))
      ranks.push_back(RankInfo::from_json(Json::parse(s)));
    if (cluster->rank() != 0) {
      cluster->agree([] {});
      return fleet_detail::run_worker_rank(*cluster, plan, opts, io, data, worker_cores);
    }
  }

  // 2. Every model validated against the data before anything starts; 3. the output folder.
  RunState st(plan, opts);
  FleetSummary sum;
  sum.out_dir = opts.out_dir.empty() ? default_out_dir(plan) : opts.out_dir;
  st.dir = sum.out_dir;
  const std::string& dir = st.dir;
  std::optional<RunFolder> folder;
  OpenedRun opened;
  auto prepare = [&] {
    if (cluster) check_ranks_agree(ranks);
    prepare_jobs(plan, io, data, workers, st.jobs);
    opened = open_run(plan, opts, workers, st, folder);
  };
  if (cluster)
    cluster->agree(prepare);
  else
    prepare();

  // The display has a row per worker: rank 0's own first, then every other rank's.
  std::vector<int> slot_cores = worker_cores, slot_ranks(worker_cores.size(), 0), slot_base{0};
  for (size_t r = 1; r < ranks.size(); ++r) {
    slot_base.push_back(static_cast<int>(slot_cores.size()));
    slot_cores.insert(slot_cores.end(), ranks[r].cores.begin(), ranks[r].cores.end());
    slot_ranks.insert(slot_ranks.end(), ranks[r].cores.size(), static_cast<int>(r));
  }
  const int total_workers = static_cast<int>(slot_cores.size());
  Display live(opts.mode, slot_cores, st.jobs.size(), opened.done, opened.total_cost,
               opened.done_cost, dir + "/run.log");
  if (cluster) live.set_ranks(slot_ranks);
  st.live = &live;

  // 5. Pinned workers take the next job as soon as they are free (under MPI, the coordinator
  // hands jobs from the same queue to the other ranks' workers meanwhile).
  std::vector<double> busy(static_cast<size_t>(workers), 0.0);
  std::atomic<int> running_workers{workers};
  std::atomic<int> local_jobs{0};
  const auto t0 = Clock::now();
  std::string where = std::to_string(total_workers) + " worker(s)";
  Json start = {{"event", "run_start"},
                {"models", st.jobs.size()},
                {"pending", st.queue.size()},
                {"workers", total_workers},
                {"out", dir}};
  if (cluster) {
    where += " on " + std::to_string(ranks.size()) + " MPI ranks";
    start["ranks"] = ranks.size();
  }
  for (const std::string& n : opened.notes) live.note(n, {{"event", "note"}, {"message", n}});
  live.note("training " + std::to_string(st.queue.size()) + " model(s) on " + where +
                "; output in " + dir,
            start);
  for (const RankInfo& r : ranks) {
    std::string list;
    for (int c : r.cores) {
      if (!list.empty()) list += ',';
      list += std::to_string(c);
    }
    live.note("rank " + std::to_string(r.rank) + " on " + r.host + ": " +
                  std::to_string(r.cores.size()) + " worker(s) on cores " + list +
                  (r.loaded_data ? "; read the data" : "; shares its node's copy of the data"),
              {{"event", "rank"},
               {"rank", r.rank},
               {"host", r.host},
               {"cores", r.cores},
               {"loaded_data", r.loaded_data}});
  }
  live.start();
  // Workers left without a job help the models whose batches are split (one process only: under
  // MPI the pieces of a batch are computed in turn by the model's own worker).
  int split_jobs = 0;
  for (const PreparedJob* j : st.queue) split_jobs += j->pieces > 1;
  HelpBoard board(cluster ? 0 : split_jobs);
  auto worker = [&](int w) {
    const int core = worker_cores[static_cast<size_t>(w)];
    pin_this_thread(core);
    while (PreparedJob* jp = st.take()) {
      PreparedJob& j = *jp;
      const ModelSpec& s = *j.spec;
      live.job_started(w, s, j.cost);
      const auto js = Clock::now();
      JobContext ctx;
      ctx.seed = plan.seed;
      ctx.core = core;
      ctx.stop = &st.stop;
      TeeObserver tee(live.observer(w), opts.observer);
      ctx.observer = opts.observer ? &tee : live.observer(w);
      if (!cluster) ctx.helpers = &board;
      ctx.checkpoint_path = dir + "/checkpoints/" + s.name + ".ckpt";
      ctx.checkpoint_seconds = opts.checkpoint_seconds;
      std::string saved;
      if (io.save)
        ctx.save_model = [&](const Network& net, const ModelSpec& sp) {
          saved = io.save(net, sp, dir + "/models/" + sp.name);
        };
      JobResult r = run_prepared(j, io, data[s.source], ctx);
      if (ctx.helpers && j.pieces > 1) board.job_done();
      busy[static_cast<size_t>(w)] += std::chrono::duration<double>(Clock::now() - js).count();
      ++local_jobs;
      st.store(j, std::move(r), {},
               saved.empty() ? "" : "models/" + std::filesystem::path(saved).filename().string());
      live.job_finished(w, st.results[j.index], j.cost);
    }
    if (!cluster) {
      live.helping(w, true);
      busy[static_cast<size_t>(w)] += board.help(&st.stop);
      live.helping(w, false);
    }
    --running_workers;
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(worker, w);
  if (cluster) {
    fleet_detail::coordinate(*cluster, st, ranks, slot_base, running_workers, sum);
  } else {
    // The workers watch st.stop only: a signal's stop (opts.stop) joins a failed write's there.
    while (running_workers.load() > 0) {
      if (st.stopping()) st.stop = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  for (auto& t : threads) t.join();
  sum.makespan = std::chrono::duration<double>(Clock::now() - t0).count();
  live.stop();

  // 6. Models never started because of a stop are reported as cancelled.
  for (auto& j : st.jobs) {
    JobResult& r = st.results[j.index];
    if (r.status == JobStatus::kPending) {
      r.name = j.spec->name;
      r.status = JobStatus::kCancelled;
      r.message = "not started; resume with --resume";
      r.params = j.params;
    }
    if (r.status == JobStatus::kCancelled) sum.interrupted = true;
  }
  double busy_total = 0;
  for (double b : busy) busy_total += b;
  if (cluster) {
    RankSummary& me = sum.ranks[0];
    me.jobs = local_jobs.load();
    me.busy_seconds = busy_total;
    fleet_detail::measure_memory(me);
    for (size_t r = 1; r < sum.ranks.size(); ++r) busy_total += sum.ranks[r].busy_seconds;
  }
  sum.workers = total_workers;
  sum.busy_fraction = sum.makespan > 0 ? busy_total / (total_workers * sum.makespan) : 0.0;
  sum.peak_rss = peak_rss_bytes();

  RankKey key = plan_rank_key(plan, data);
  // A model with several outputs names its metrics by output (val_main_output_mae): when no
  // result has the plan's metric, the models rank by the loss.
  if (std::none_of(st.results.begin(), st.results.end(),
                   [&](const JobResult& r) { return find_metric(r.metrics, key.key); }))
    key = rank_key({}, key.key.rfind("val_", 0) == 0, key.key.rfind("test_", 0) == 0);
  // After a failed write the run has stopped; its results are written if they still can be.
  sum.write_error = st.write_error;
  try {
    write_results(dir, plan.path, plan.seed, total_workers, st.results, key);
    folder->write_history();
    folder->sync();
  } catch (const Error&) {
    if (sum.write_error.empty()) {
      if (cluster) fleet_detail::finish_cluster(*cluster, st.results, sum.interrupted, 1);
      throw;
    }
  }
  if (cluster)
    fleet_detail::finish_cluster(*cluster, st.results, sum.interrupted,
                                 sum.write_error.empty() ? 0 : 1);
  sum.rank_by = key.key;
  sum.rank_higher_is_better = key.higher_is_better;
  sum.results = std::move(st.results);
  return sum;
}

}  // namespace nnfleet
