// The fleet runner: validation, output folder, pinned workers, results. It runs in the process
// that owns the queue and the output folder, and meets the rest of a run only through Peers
// (peers.h): none in a run of one process; a cluster run's rank 0 passes its other ranks.
#include "fleet/fleet.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "fleet/fit/adapt.h"
#include "fleet/fit/checkpoint.h"
#include "fleet/fit/job.h"
#include "fleet/fleet_data.h"
#include "fleet/help_board.h"
#include "fleet/peers.h"
#include "fleet/results.h"
#include "fleet/run_state.h"
#include "fleet/search_run.h"
#include "fleet/worker.h"
#include "platform/cpu.h"
#include "platform/files.h"
#include "platform/parallel.h"

namespace nnfleet {
namespace {

using fleet_detail::check_room;
using fleet_detail::job_model;
using fleet_detail::Peers;
using fleet_detail::PreparedJob;
using fleet_detail::RunFolder;
using fleet_detail::RunState;
using fleet_detail::Slots;

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
  bool stop_model(const ModelSpec& spec, const EpochRecord& rec) override {
    const bool a = a_->stop_model(spec, rec);
    return (b_ && b_->stop_model(spec, rec)) || a;
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
  if (const std::string p = target_shape_problem(loss, shape, ys); !p.empty()) return add(p);
  if (loss.sparse() && (!st.integral || st.min < 0 || st.max >= static_cast<double>(classes)))
    add("labels out of range for sparse_categorical_crossentropy; expected integers in 0.." +
        std::to_string(classes - 1) + " (the model outputs " + std::to_string(classes) +
        " classes" + (steps > 1 ? " per timestep" : "") + "), got " + range +
        (st.integral ? "" : " with fractional values"));
  if (loss.kind == LossKind::kBinaryCrossentropy && (st.min < 0 || st.max > 1))
    add("binary_crossentropy needs targets in [0, 1]; got " + range);
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
      check_source_targets(at, "test", d.test_name, d.y(j, true), d.labels(j, true), s, m, problems,
                           j, &ts.loss_of(j));
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
  const std::string at = s.where + ": model '" + s.name + "': ";
  // Every input read as ids, each against its own bound (a shared Embedding may read several).
  for (const Model::IdInput& ids : m.id_inputs()) {
    if (d.scale != 1.0f) {
      problems.push_back(at + "data.scale would change the ids its Embedding '" + ids.layer +
                         "' reads; expected scale 1");
      return;
    }
    if (ids.input >= d.num_x()) continue;  // the input count is checked (and refused) elsewhere
    const std::string which =
        m.num_inputs() > 1 ? " (input '" + m.input(ids.input).name + "')" : "";
    auto check = [&](const Array& x, const char* role, const std::string& source) {
      if (const auto bad = first_bad_id(x, ids.limit)) {
        char v[32];
        std::snprintf(v, sizeof v, "%.17g", bad->value);
        problems.push_back(at + "row " + std::to_string(bad->row) + " of the " + role + " inputs" +
                           which + " holds " + v + ", not an id the Embedding '" + ids.layer +
                           "' has; expected integers in [0, " + std::to_string(ids.limit) + ") (" +
                           role + " data " + source + ")");
      }
    };
    check(d.x(ids.input), "training", d.train_name);
    if (d.test) check(d.x(ids.input, true), "test", d.test_name);
  }
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
    problems.push_back(at +
                       "with a sample_weight data source; expected one of them (Keras "
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

std::string host_name() {
  char b[256] = {};
  return gethostname(b, sizeof b - 1) == 0 ? std::string(b) : std::string("localhost");
}

// timeline.jsonl's session record (every rank's host and cores) and the place of every display
// row (RunState::slots).
void start_timeline(RunState& st, const Slots& slots, std::optional<Timeline>& timeline) {
  Json rank_list = Json::array();
  for (size_t r = 0; r < slots.base.size(); ++r) {
    const size_t begin = static_cast<size_t>(slots.base[r]);
    const size_t end =
        r + 1 < slots.base.size() ? static_cast<size_t>(slots.base[r + 1]) : slots.cores.size();
    std::vector<int> cores(slots.cores.begin() + static_cast<std::ptrdiff_t>(begin),
                           slots.cores.begin() + static_cast<std::ptrdiff_t>(end));
    rank_list.push_back({{"rank", r}, {"host", slots.hosts.at(r)}, {"cores", cores}});
    for (size_t i = begin; i < end; ++i)
      st.slots.push_back(
          {static_cast<int>(r), slots.hosts[r], static_cast<int>(i - begin), slots.cores[i]});
  }
  timeline.emplace(st.dir, rank_list);
  timeline->set_brief(st.jobs.size() > Display::kBriefAbove);
  timeline->set_lanes_only(st.jobs.size() > large_fleet_above());
  st.timeline = &*timeline;
}

std::string default_out_dir(const Plan& plan) {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + plan.name + "-" + b;
}

// Runs job `j` on this thread in the output folder `dir`, its model built again (prepare_jobs()
// dropped it); a model that cannot be built is a failed job.
JobResult run_prepared(const PreparedJob& j, const ModelSpec& spec, const ModelIo& io,
                       const FleetData& data, const JobContext& ctx, const std::string& dir,
                       SavedModel& saved) {
  try {
    return fleet_detail::train_job(spec, io, data, ctx, dir, saved);
  } catch (const Error& e) {
    JobResult r;
    r.name = j.name();
    r.core = ctx.core;
    r.params = j.params;
    r.status = JobStatus::kFailed;
    r.message = e.what();
    return r;
  }
}

// Rough sizes of what a job writes: its saved model (float32 weights and up to two optimizer
// slots, plus the format's own bytes) and record, and, while it runs, a checkpoint.
uint64_t model_file_bytes(const PreparedJob& j) { return 12 * uint64_t{j.params} + 16384; }
uint64_t record_bytes(const ModelSpec& s) {
  return 1024 + 48 * (2 * s.metrics.size() + 3) * static_cast<uint64_t>(s.epochs);
}
uint64_t checkpoint_bytes(const PreparedJob& j) { return 16 * uint64_t{j.params} + 4096; }

// What the pending jobs will write, `workers` of them at a time; with a save policy of best N
// (`kept`: N, or 0 for none) only the N largest model files stay, and `workers` more at once.
uint64_t output_bytes(const std::vector<PreparedJob*>& pending, int workers,
                      size_t kept = SIZE_MAX) {
  uint64_t total = 0;
  std::vector<uint64_t> running, files;
  for (const PreparedJob* j : pending) {
    total += j->record_bytes;
    files.push_back(kept > 0 ? model_file_bytes(*j) : 0);
    running.push_back(checkpoint_bytes(*j) + model_file_bytes(*j));
  }
  std::sort(files.rbegin(), files.rend());
  for (size_t i = 0; i < files.size() && (kept == SIZE_MAX || i < kept); ++i) total += files[i];
  std::sort(running.rbegin(), running.rend());
  for (size_t i = 0; i < running.size() && i < static_cast<size_t>(workers); ++i)
    total += running[i];
  return total;
}

// Model `s` (plan index `i`) built and validated against its data into job `j`, whose name is
// `name` (the plan's); its problems go to `problems`, its memory estimate to `estimate` (left
// alone when it cannot be built). The estimate is of batch_rows(), never more rows than the data
// has; it is held to `available`, the memory this process may still take (the data is loaded and
// not in it).
void prepare_job(const ModelSpec& s, size_t i, const std::string& name, const ModelIo& io,
                 const FleetData& data, size_t available, const SearchSpec* search, PreparedJob& j,
                 std::vector<std::string>& problems, size_t& estimate) {
  j.plan_name = &name;
  j.index = i;
  j.epochs = s.epochs;
  j.record_bytes = record_bytes(s);
  std::vector<float> initial_params;
  RestoredOptimizer restored;
  std::shared_ptr<const Model> model;  // built again when the job runs
  try {
    model = job_model(s, io, data, initial_params, restored);
    if (io.check) io.check(*model);
  } catch (const Error& e) {
    problems.push_back(s.where + ": model '" + s.name + "': " + e.what());
    return;
  }
  check_inputs(s, *model, data, problems);
  check_targets(s, *model, data, problems);
  check_input_ids(s, *model, data, problems);
  if (initial_params.empty())
    for (const std::string& p : adapt_problems(*model, data))
      problems.push_back(s.where + ": model '" + s.name + "': " + p);
  if (s.early_stopping)
    check_monitor(s, data, "early_stopping", s.early_stopping->monitor, problems);
  if (s.reduce_lr_on_plateau)
    check_monitor(s, data, "reduce_lr_on_plateau", s.reduce_lr_on_plateau->monitor, problems);
  if (search) check_monitor(s, data, "search", search->metric, problems);
  check_weights(s, *model, data, problems);
  TrainSpec train{s.loss, s.optimizer};
  try {
    train = train_spec_of(s, *model);
    for (size_t o = 0; o < model->num_outputs(); ++o)
      for (const auto* names : {&s.metrics, &s.weighted_metrics})
        for (const auto& m : *names)
          resolve_metric(m, train.loss_of(o), static_cast<int>(model->output_shape(o)[-1]));
  } catch (const Error& e) {
    problems.push_back(s.where + ": model '" + s.name + "': " + e.what());
    return;
  }
  const int rows = batch_rows(s, data);
  j.pieces = batch_pieces(s, *model, rows);
  const size_t est = Network::estimate_bytes(model, rows, train, j.pieces);
  estimate = est;
  if (est > available)
    problems.push_back(s.where + ": model '" + s.name + "': needs an estimated " + gib(est) +
                       " of memory for batches of " + std::to_string(rows) +
                       " rows; expected at most " + gib(available) +
                       " (the memory available, with the data loaded); reduce batch_size or the "
                       "model");
  j.cost = estimated_cost(s, *model, data.n_train);
  j.params = model->trainable_params() + model->non_trainable_params();
}

// The models of a plan in groups that validate alike: one per kind (PlanModels::kind) and data
// source, numbered in plan order. What building and validating a model depends on is its
// expanded entry without its name, seed, parameters and optimizer's rates, its data, and the
// optimizer's kind and flags (they set its slots, so its estimate): a grid of 100,000 models over
// 1,000 learning rates x 100 repeats is one group, and builds one network at launch.
struct Groups {
  std::vector<uint32_t> of;     // by model
  std::vector<size_t> first;    // by group: its first model
  std::vector<size_t> members;  // by group: how many models
};

Groups group_models(const PlanModels& models) {
  Groups g;
  g.of.resize(models.size());
  std::map<std::pair<size_t, uint32_t>, uint32_t> ids;
  for (size_t k = 0; k < models.size(); ++k) {
    const auto id = static_cast<uint32_t>(g.first.size());
    auto [it, fresh] = ids.emplace(std::make_pair(models.source(k), models.kind(k)), id);
    if (fresh) {
      g.first.push_back(k);
      g.members.push_back(0);
    }
    g.of[k] = it->second;
    ++g.members[it->second];
  }
  return g;
}

// Job `j` of model `k` from its group's first model `first`, validated without a problem.
void copy_job(const PreparedJob& first, size_t k, const std::string& name, PreparedJob& j) {
  j = first;
  j.plan_name = &name;
  j.index = k;
}

// With no problem so far, adds one when the `workers` largest models, which may run together,
// need more than `available`: each group's estimate counts once per model of it (the models of a
// group whose first had problems, validated again one by one, each with its own).
void check_concurrent(const Plan& plan, const Groups& groups,
                      const std::vector<std::vector<std::string>>& first_problems,
                      const std::vector<size_t>& first_estimates,
                      const std::vector<size_t>& again_estimates, int workers, size_t available,
                      std::vector<std::string>& problems) {
  std::vector<std::pair<size_t, size_t>> estimates;  // (bytes, models), largest first
  for (size_t g = 0; g < groups.first.size(); ++g)
    if (first_problems[g].empty()) estimates.emplace_back(first_estimates[g], groups.members[g]);
  for (size_t e : again_estimates) estimates.emplace_back(e, 1);
  std::sort(estimates.rbegin(), estimates.rend());
  size_t together = 0, concurrent = 0;
  for (const auto& [bytes, count] : estimates) {
    const size_t take = std::min(count, static_cast<size_t>(workers) - together);
    together += take;
    concurrent += take * bytes;
    if (together == static_cast<size_t>(workers)) break;
  }
  if (problems.empty() && concurrent > available)
    problems.push_back(plan.path + ": the " + std::to_string(together) +
                       " largest models running at once need an estimated " + gib(concurrent) +
                       "; expected at most " + gib(available) +
                       " (the memory available, with the data loaded); use fewer workers");
}

// Every model validated against the data before anything starts, by `workers` threads: the first
// of each group (group_models), and every model of a group whose first had problems, so that
// each problem names its model; the others take their group's figures without being expanded
// (expanding a tiny model took tens of microseconds: 100,000 models, seconds). All problems are
// reported together (PlanError), in plan order. Returns the plan's plan.yaml text.
std::string prepare_jobs(const Plan& plan, const ModelIo& io, const std::vector<FleetData>& sources,
                         int workers, std::vector<PreparedJob>& jobs) {
  const PlanModels& models = plan.models;
  const size_t n = models.size();
  jobs.assign(n, PreparedJob{});
  // Asked once, after the data was loaded: every model is held to the same figure.
  const size_t available = available_memory_bytes();
  const SearchSpec* search = plan.search ? &*plan.search : nullptr;
  const Groups groups = group_models(models);
  auto prepare = [&](size_t k, std::vector<std::string>& problems, size_t& estimate) {
    const ModelSpec s = models[k];
    prepare_job(s, k, models.name(k), io, sources[s.source], available, search, jobs[k], problems,
                estimate);
  };
  const size_t g = groups.first.size();
  std::vector<std::vector<std::string>> first_problems(g);
  std::vector<size_t> first_estimates(g, 0);  // a model that cannot be built counts 0
  for_each_block(g, workers, [&](int, size_t b) {
    prepare(groups.first[b], first_problems[b], first_estimates[b]);
  });
  std::vector<size_t> again;  // the models of groups whose first had problems, in plan order
  for (size_t k = 0; k < n; ++k) {
    const uint32_t id = groups.of[k];
    if (!first_problems[id].empty())
      again.push_back(k);
    else if (k != groups.first[id])
      copy_job(jobs[groups.first[id]], k, models.name(k), jobs[k]);
  }
  std::vector<std::vector<std::string>> problems_of(again.size());
  std::vector<size_t> again_estimates(again.size(), 0);
  for_each_block(again.size(), workers,
                 [&](int, size_t b) { prepare(again[b], problems_of[b], again_estimates[b]); });
  std::vector<std::string> problems;
  for (auto& p : problems_of) std::move(p.begin(), p.end(), std::back_inserter(problems));
  check_concurrent(plan, groups, first_problems, first_estimates, again_estimates, workers,
                   available, problems);
  if (!problems.empty()) {
    std::string msg = "failed to validate plan '" + plan.path +
                      "': " + std::to_string(problems.size()) + " problem" +
                      (problems.size() > 1 ? "s" : "");
    for (const auto& p : problems) msg += "\n  " + p;
    throw PlanError(msg);
  }
  return plan_to_yaml(plan, workers, n > large_fleet_above());
}

struct OpenedRun {
  size_t done = 0;  // models finished earlier (--resume)
  double total_cost = 0, done_cost = 0;
  std::vector<std::string> notes;  // records not trusted
};

// How many model files the run keeps at its end (SIZE_MAX: all).
size_t kept_files(const Plan& plan) {
  const SavePolicy p = plan.save.resolved(plan.models.size());
  return p.kind == SavePolicy::Kind::kAll    ? SIZE_MAX
         : p.kind == SavePolicy::Kind::kNone ? 0
                                             : p.best;
}

// 3. The output folder (created, or on --resume checked), checked for room, and the queue: on
// --resume the models it holds finished are kept, and the others go to the queue, longest first
// (plan order breaks ties). `plan_yaml` is the plan's plan_to_yaml() text. Throws UsageError,
// FileError.
OpenedRun open_run(const Plan& plan, const std::string& plan_yaml, const FleetOptions& opts,
                   int workers, RunState& st, std::optional<RunFolder>& folder) {
  OpenedRun o;
  std::vector<PreparedJob*> all;
  for (auto& j : st.jobs) all.push_back(&j);
  if (!opts.resume)
    check_room(st.dir, output_bytes(all, workers, kept_files(plan)),
               "the files of " + std::to_string(all.size()) + " model(s)");
  folder.emplace(plan, st.dir, opts.resume, plan_yaml, opts.arrays);
  st.folder = &*folder;
  st.results.resize(st.jobs.size());
  st.paused.resize(st.jobs.size());
  for (auto& j : st.jobs) {
    o.total_cost += j.cost;
    if (opts.resume) {
      std::string why;
      // A search's scheduler is told every finished trial's history.
      if (std::optional<JobResult> r = folder->finished(
              j.index, j.name(), why, opts.keep_history || st.search, st.keep_best > 0)) {
        if (st.search) {
          st.search->reached(j.index, r->history, r->status, false);
          if (!opts.keep_history) r->history = {};
        }
        st.results[j.index] = std::move(static_cast<ModelResult&>(*r));
        ++o.done;
        o.done_cost += j.cost;
        // A checkpoint left by a run killed after the record: never needed again.
        std::remove((st.dir + "/checkpoints/" + j.name() + ".ckpt").c_str());
        continue;
      }
      if (!why.empty()) o.notes.push_back("model '" + j.name() + "' is trained again: " + why);
      if (st.search) resume_trial(st, j);
    }
    st.queue.push_back(&j);
  }
  if (opts.observer) {
    std::vector<std::pair<std::string, int>> planned;
    planned.reserve(st.queue.size());
    for (const PreparedJob* j : st.queue) planned.emplace_back(j->name(), j->epochs);
    opts.observer->on_run_start(planned);
  }
  // save: best N after a kill: the files of models already out of the top N go.
  for (auto& j : st.jobs)
    if (st.results[j.index].status != JobStatus::kPending) st.keep_file(j.index);
  std::stable_sort(st.queue.begin(), st.queue.end(),
                   [](const PreparedJob* a, const PreparedJob* b) { return a->cost > b->cost; });
  folder->check_writable(output_bytes(st.queue, workers, kept_files(plan)));
  return o;
}

// Which figure ranks the models: validation and test ones only when every source has them.
RankKey plan_rank_key(const Plan& plan, const std::vector<FleetData>& sources) {
  std::vector<std::string> mkeys;
  if (!plan.models.empty()) {
    const ModelSpec first = plan.models[0];
    for (const auto& m : first.metrics) mkeys.push_back(metric_key(m));
  }
  bool val = !sources.empty(), test = !sources.empty();
  for (const FleetData& d : sources) {
    val = val && d.n_val > 0;
    test = test && d.test.has_value();
  }
  return rank_key(mkeys, val, test);
}

// The leaderboard's key as the run begins: a search's metric, or the plan's (plan_rank_key).
RankKey run_rank_key(const Plan& plan, const std::vector<FleetData>& data) {
  if (plan.search) return {plan.search->metric, plan.search->higher_is_better};
  return plan_rank_key(plan, data);
}

// The display's first note (where the run is, and its output folder) and the notes before it.
void announce(Display& live, const RunState& st, const OpenedRun& opened, int total_workers,
              const Peers& peers, const Slots& slots) {
  std::string where = std::to_string(total_workers) + " worker(s)";
  Json start = {{"event", "run_start"},
                {"models", st.jobs.size()},
                {"pending", st.queue.size()},
                {"workers", total_workers},
                {"out", st.dir}};
  peers.describe(where, start);
  for (const std::string& n : opened.notes) live.note(n, {{"event", "note"}, {"message", n}});
  live.note("training " + std::to_string(st.queue.size()) + " model(s) on " + where +
                "; output in " + st.dir,
            start);
  peers.show(live, slots);
}

// This process's pinned workers: each takes the next job as soon as it is free. Those left
// without a job help the models whose batches are split, when `helpers` (every worker of the run
// is here; otherwise the pieces of a batch are computed in turn by the model's own worker).
class WorkerPool {
 public:
  WorkerPool(RunState& st, const ModelIo& io, const std::vector<FleetData>& data,
             const std::vector<int>& cores, bool helpers)
      : st_(st),
        io_(io),
        data_(data),
        cores_(cores),
        helpers_(helpers),
        // A search's trials come back rung after rung: its board counts the search as one job,
        // ended when the search is.
        board_(!helpers    ? 0
               : st.search ? 1
                           : split_jobs(st)),
        busy_(cores.size(), 0.0),
        running_(static_cast<int>(cores.size())) {}

  // Runs the workers, and `serve(running)` on this thread until they have all finished.
  void run(const std::function<void(std::atomic<int>&)>& serve) {
    run_pinned_workers(
        cores_, [this](int w) { work(w); }, [&] { serve(running_); });
  }
  double busy() const {
    double total = 0;
    for (double b : busy_) total += b;
    return total;
  }
  int jobs() const { return jobs_.load(); }
  void wake() { board_.wake(); }

 private:
  static int split_jobs(const RunState& st) {
    int n = 0;
    for (const PreparedJob* j : st.queue) n += j->pieces > 1;
    return n;
  }

  void work(int w) {
    if (st_.search) {
      work_search(w);
    } else {
      while (PreparedJob* j = st_.take()) train(w, *j);
      if (helpers_) help(w, nullptr);
    }
    --running_;
  }

  // A search's worker: trains what the scheduler hands out; while a rung waits for its last
  // trials, it helps the split ones among them (or waits) until a decision gives work.
  void work_search(int w) {
    for (;;) {
      bool wait = false;
      if (PreparedJob* j = st_.try_take(wait)) {
        train(w, *j);
        continue;
      }
      if (!wait) break;
      if (!helpers_) {
        PreparedJob* j = st_.take();  // waits for a decision
        if (!j) break;
        train(w, *j);
        continue;
      }
      help(w, [this] { return st_.search_ready(); });
    }
    if (helpers_ && !search_over_.exchange(true)) board_.job_done();
  }

  // Helps split models (HelpBoard) until no split job is left, or `until()`.
  void help(int w, const std::function<bool()>& until) {
    st_.live->helping(w, true);
    const Timeline::Slot& me = st_.slots.at(static_cast<size_t>(w));
    busy_[static_cast<size_t>(w)] += board_.help_until(
        &st_.stop, until,
        [&](int owner, HelpBoard::Clock::time_point b, HelpBoard::Clock::time_point e, int pieces) {
          if (st_.timeline)
            st_.timeline->helped(st_.jobs.at(static_cast<size_t>(owner)).name(), me,
                                 st_.timeline->wall(b), st_.timeline->wall(e), pieces);
        });
    st_.live->helping(w, false);
  }

  // Job j on worker w. Its spec is this attempt's own: a search's trial may be handed out again
  // (its next rung) as soon as store() has recorded this one.
  void train(int w, PreparedJob& j) {
    const ModelSpec s = st_.plan.models.to_train(j.index);
    st_.timeline_started(w, s.name);
    st_.live->job_started(w, s, j.cost);
    const auto js = Clock::now();
    JobContext ctx;
    ctx.seed = st_.plan.seed;
    ctx.core = cores_[static_cast<size_t>(w)];
    ctx.stop = &st_.stop;
    ctx.caller_stop = st_.opts.stop;
    TeeObserver tee(st_.live->observer(w), st_.opts.observer);
    ctx.observer = st_.opts.observer ? &tee : st_.live->observer(w);
    if (helpers_) ctx.helpers = &board_;
    ctx.job = static_cast<int>(j.index);
    ctx.checkpoint_seconds = st_.opts.checkpoint_seconds;
    ctx.checkpoint_may_exist = !st_.own_checkpoints_only;
    ctx.epoch_limit = j.epoch_limit;
    ctx.pause_at_limit = j.pause;
    // save: best N: no file for a model N finished ones rank before (a search's trial is
    // stored again at each rung, so its file is always made).
    if (st_.keep_best > 0 && !st_.search)
      ctx.wants_model_file = [this, &j](const JobResult& r) { return st_.wants_file(j.index, r); };
    SavedModel saved;
    JobResult r = run_prepared(j, s, io_, data_[s.source], ctx, st_.dir, saved);
    if (ctx.helpers && j.pieces > 1 && !st_.search) board_.job_done();
    busy_[static_cast<size_t>(w)] += std::chrono::duration<double>(Clock::now() - js).count();
    ++jobs_;
    st_.store(
        j, std::move(r), {},
        saved.path.empty() ? "" : "models/" + std::filesystem::path(saved.path).filename().string(),
        saved.xxh3, w);
  }

  RunState& st_;
  const ModelIo& io_;
  const std::vector<FleetData>& data_;
  const std::vector<int>& cores_;
  const bool helpers_;
  HelpBoard board_;
  std::vector<double> busy_;  // per worker
  std::atomic<int> running_;  // workers not yet finished
  std::atomic<int> jobs_{0};
  std::atomic<bool> search_over_{false};
};

// 6. Models never started because of a stop are reported as cancelled.
void cancel_unstarted(RunState& st, FleetSummary& sum) {
  for (auto& j : st.jobs) {
    ModelResult& r = st.results[j.index];
    if (r.status == JobStatus::kPending) {
      r.name = j.name();
      r.status = JobStatus::kCancelled;
      r.message = "not started; resume with --resume";
      r.params = j.params;
    }
    if (r.status == JobStatus::kCancelled) sum.interrupted = true;
  }
}

// 7. results.json and history.csv, and the folder synced. After a failed write the run has
// stopped; its results are written if they still can be.
void write_outcome(const Plan& plan, const std::vector<FleetData>& data, RunState& st,
                   RunFolder& folder, Peers& peers, FleetSummary& sum) {
  RankKey key = run_rank_key(plan, data);
  // A model with several outputs names its metrics by output (val_main_output_mae): when no
  // result has the plan's metric, the models rank by the loss.
  if (std::none_of(st.results.begin(), st.results.end(),
                   [&](const ModelResult& r) { return find_metric(r.metrics, key.key); }))
    key = rank_key({}, key.key.rfind("val_", 0) == 0, key.key.rfind("test_", 0) == 0);
  sum.write_error = st.write_error;
  try {
    // Two files from two sources, made side by side (about 0.1 s each for 8,000 tiny models):
    // the results from memory, history.csv's rows read back from jobs.log in parts (one part was
    // 1.6 s at 100,000 tiny models, the results 0.36 s), which the threads take in turn.
    st.keep_final(key);
    fleet_detail::fill_rungs(st);
    fleet_detail::write_trials_csv(plan, st);
    const size_t parts = std::clamp<size_t>(st.results.size() / 4096, 1, 16);
    std::vector<std::string> history(parts);
    for_each_block(1 + parts, 2, [&](int, size_t b) {
      if (b == 0) {
        write_results(
            st.dir, plan.path, plan.seed, sum.workers, st.results, key,
            fleet_detail::results_head(plan, st),
            [&plan](size_t k) { return fleet_detail::parameters_json(plan, k); },
            st.results.size() > large_fleet_above() ? SavePolicy::kDefaultBest : 0);
        sum.results_written = true;  // read once every block is done
      } else {
        history[b - 1] = folder.history_part(b - 1, parts);
      }
    });
    folder.write_history(std::move(history));
    folder.sync();
  } catch (const Error&) {
    if (sum.write_error.empty()) {
      peers.finish(st.results, sum.interrupted, 1);
      throw;
    }
  }
  peers.finish(st.results, sum.interrupted, sum.write_error.empty() ? 0 : 1);
  sum.rank_by = key.key;
  sum.rank_higher_is_better = key.higher_is_better;
}

}  // namespace

namespace fleet_detail {

void Peers::serve(RunState& st, const Slots&, std::atomic<int>& running, FleetSummary&) {
  // The workers watch st.stop only: a signal's stop (opts.stop) joins a failed write's there.
  while (running.load() > 0) {
    if (st.stopping()) st.stop = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<int> worker_cores(const std::vector<int>& cores, int workers) {
  // More workers than cores would only take turns on them (and a million threads is more than
  // the system gives a process): capped, and run_fleet_here() says so.
  const int usable = static_cast<int>(cores.size());
  const int n = workers > 0 ? std::min(workers, usable) : usable;
  std::vector<int> out;
  for (int w = 0; w < n; ++w) out.push_back(cores[static_cast<size_t>(w) % cores.size()]);
  return out;
}

FleetSummary run_fleet_here(const Plan& plan, const FleetOptions& opts, const ModelIo& io,
                            const std::vector<FleetData>& data, const std::vector<int>& cores,
                            Peers& peers) {
  // 2. Every model validated against the data before anything starts; 3. the output folder.
  const int workers = static_cast<int>(cores.size());
  RunState st(plan, opts);
  FleetSummary sum;
  sum.out_dir = opts.out_dir.empty() ? default_out_dir(plan) : opts.out_dir;
  st.dir = sum.out_dir;
  st.own_checkpoints_only = !opts.resume && !peers.send_checkpoints();
  std::optional<RunFolder> folder;
  OpenedRun opened;
  // save: none writes no model file; best N keeps the top N's (RunState::keep_file).
  const SavePolicy save = plan.save.resolved(plan.models.size());
  ModelIo own_io = io;
  if (save.kind == SavePolicy::Kind::kNone) own_io.save = nullptr;
  if (save.kind == SavePolicy::Kind::kBest) {
    st.keep_best = save.best;
    st.keep_key = run_rank_key(plan, data);
  }
  peers.agree([&] {
    const std::string plan_yaml = prepare_jobs(plan, io, data, workers, st.jobs);
    fleet_detail::make_search(plan, data, st);
    // A promoted trial trains on from the checkpoint of its rung.
    if (st.search) st.own_checkpoints_only = false;
    opened = open_run(plan, plan_yaml, opts, workers, st, folder);
  });
  if (opts.workers > workers)
    opened.notes.insert(opened.notes.begin(),
                        "warning: " + std::to_string(opts.workers) + " workers asked for, " +
                            "but this process may use " + std::to_string(workers) +
                            " core(s); running " + std::to_string(workers) +
                            " worker(s), one per core");

  // 4. The display has a row per worker: this process's first, then every peer's.
  Slots slots{cores, std::vector<int>(cores.size(), 0), {0}, {host_name()}};
  peers.add_slots(slots);
  sum.workers = static_cast<int>(slots.cores.size());
  std::optional<Timeline> timeline;
  start_timeline(st, slots, timeline);
  if (opts.on_folder_ready) opts.on_folder_ready(st.dir);
  Display live(opts.mode, slots.cores, st.jobs.size(), opened.done, opened.total_cost,
               opened.done_cost, st.dir + "/run.log");
  st.live = &live;

  // 5. Pinned workers take the next job as soon as they are free (with peers, rank 0's
  // coordinator hands jobs from the same queue to theirs meanwhile).
  WorkerPool pool(st, own_io, data, cores, peers.helpers());
  st.on_decision = [&pool] { pool.wake(); };
  const auto t0 = Clock::now();
  announce(live, st, opened, sum.workers, peers, slots);
  live.start();
  if (st.search) st.start_search();
  pool.run([&](std::atomic<int>& running) { peers.serve(st, slots, running, sum); });
  sum.makespan = std::chrono::duration<double>(Clock::now() - t0).count();
  live.stop();
  timeline->end_session();

  cancel_unstarted(st, sum);
  // A search's time limit ends the run as planned: every result is kept, and --resume goes on.
  if (st.deadline_noted && !st.stopping()) sum.interrupted = false;
  const double busy = peers.account(sum, pool.jobs(), pool.busy());
  sum.busy_fraction = sum.makespan > 0 ? busy / (sum.workers * sum.makespan) : 0.0;
  sum.peak_rss_bytes = peak_rss_bytes();
  // Every model has its result now (cancel_unstarted): the jobs go before the end's files are
  // made, where a large run's memory peaks (7.2 MB of jobs and 0.8 MB of queue at 100,000).
  std::vector<PreparedJob*>().swap(st.queue);
  std::vector<PreparedJob>().swap(st.jobs);
  write_outcome(plan, data, st, *folder, peers, sum);
  sum.results = std::move(st.results);
  return sum;
}

}  // namespace fleet_detail

size_t large_fleet_above() {
  if (const char* v = std::getenv("NNFLEET_LARGE_FLEET_ABOVE"); v && *v)
    return static_cast<size_t>(std::strtoull(v, nullptr, 10));
  return SavePolicy::kSaveAllUpTo;
}

FleetSummary run_fleet(const Plan& plan, const FleetOptions& opts, const ModelIo& io) {
  // 1. Data, loaded once and shared read-only by every worker.
  const std::vector<FleetData> data = load_plan_data(plan.sources, opts.arrays);
  fleet_detail::Peers alone;
  return fleet_detail::run_fleet_here(
      plan, opts, io, data, fleet_detail::worker_cores(allowed_cpus(), opts.workers), alone);
}

}  // namespace nnfleet
