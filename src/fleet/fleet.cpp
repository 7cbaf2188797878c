// The fleet runner: validation, output folder, pinned workers, results.
#include "fleet/fleet.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "fleet/checkpoint.h"
#include "fleet/fleet_data.h"
#include "fleet/results.h"
#include "platform/cpu.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using Clock = std::chrono::steady_clock;

struct PreparedJob {
  const ModelSpec* spec = nullptr;
  size_t index = 0;  // plan order
  std::shared_ptr<const Model> model;
  std::vector<float> initial_params;  // from a Keras file, if any
  double cost = 0.0;
};

std::string gib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return b;
}

// Checks that the data's targets suit the model's output and loss; returns problems.
void check_targets(const ModelSpec& s, const Model& m, const FleetData& d,
                   std::vector<std::string>& problems) {
  const int64_t k = m.output_shape().size();
  const Shape ys = d.train.y.sample_shape();
  const std::string at = s.where + ": model '" + s.name + "': ";
  auto range = [&] {
    char b[96];
    std::snprintf(b, sizeof b, "labels %g..%g", d.label_min, d.label_max);
    return std::string(b);
  };
  switch (s.loss.kind) {
    case LossKind::kSparseCategoricalCrossentropy:
      if (ys.size() != 1)
        problems.push_back(at + "sparse_categorical_crossentropy needs one integer label per sample; "
                           "expected y of shape [N] or [N,1], got y samples of shape " + ys.str() +
                           " (use categorical_crossentropy for one-hot targets)");
      else if (!d.labels_integral || d.label_min < 0 || d.label_max >= static_cast<double>(k))
        problems.push_back(at + "labels out of range for sparse_categorical_crossentropy; expected "
                           "integers in 0.." + std::to_string(k - 1) + " (the model outputs " +
                           std::to_string(k) + " classes), got " + range() +
                           (d.labels_integral ? "" : " with fractional values"));
      break;
    case LossKind::kBinaryCrossentropy:
      if (d.label_min < 0 || d.label_max > 1)
        problems.push_back(at + "binary_crossentropy needs targets in [0, 1]; got " + range());
      [[fallthrough]];
    default:
      if (ys.size() != k)
        problems.push_back(at + "targets do not match the model output; expected y samples of " +
                           std::to_string(k) + " values (output " + m.output_shape().str() +
                           "), got " + ys.str() +
                           (ys.size() == 1 && k > 1 ? "; for integer class labels use "
                                                       "loss: sparse_categorical_crossentropy"
                                                     : ""));
  }
}

void check_early_stopping(const ModelSpec& s, const Model& m, const FleetData& d,
                          std::vector<std::string>& problems) {
  if (!s.early_stopping) return;
  const std::string& mon = s.early_stopping->monitor;
  std::vector<std::string> valid{"loss"};
  for (const auto& name : s.metrics) valid.push_back(metric_key(name));
  const size_t base = valid.size();
  if (d.n_val > 0)
    for (size_t i = 0; i < base; ++i) valid.push_back("val_" + valid[i]);
  (void)m;
  if (std::find(valid.begin(), valid.end(), mon) != valid.end()) return;
  std::string list;
  for (const auto& v : valid) list += (list.empty() ? "" : ", ") + v;
  problems.push_back(s.where + ": model '" + s.name + "': early_stopping.monitor '" + mon +
                     "' is not computed; expected one of " + list +
                     (mon.rfind("val_", 0) == 0 && d.n_val == 0
                          ? " (validation metrics need data.validation_split > 0)"
                          : ""));
}

std::string default_out_dir(const Plan& plan) {
  std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof b, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + plan.name + "-" + b;
}

}  // namespace

FleetSummary run_fleet(const Plan& plan, const FleetOptions& opts, const ModelIo& io) {
  // 1. Data, loaded once and shared read-only by every worker.
  FleetData data = load_fleet_data(plan.data);

  // 2. Every model validated against it before anything starts; all problems reported together.
  std::vector<PreparedJob> jobs(plan.models.size());
  std::vector<std::string> problems;
  std::vector<int> cores = allowed_cpus();
  const int workers = opts.workers > 0 ? opts.workers : static_cast<int>(cores.size());
  std::vector<size_t> estimates;
  for (size_t i = 0; i < plan.models.size(); ++i) {
    const ModelSpec& s = plan.models[i];
    PreparedJob& j = jobs[i];
    j.spec = &s;
    j.index = i;
    try {
      if (!s.keras.empty()) {
        if (!io.load)
          throw ModelError("models from Keras files are not available in this build");
        j.model = io.load(s, data.input_shape, j.initial_params);
      } else {
        j.model = build_model(s, data.input_shape);
      }
    } catch (const Error& e) {
      problems.push_back(s.where + ": model '" + s.name + "': " + e.what());
      continue;
    }
    check_targets(s, *j.model, data, problems);
    check_early_stopping(s, *j.model, data, problems);
    try {
      for (const auto& m : s.metrics)
        resolve_metric(m, s.loss, static_cast<int>(j.model->output_shape().size()));
    } catch (const Error& e) {
      problems.push_back(s.where + ": model '" + s.name + "': " + e.what());
    }
    const size_t est = Network::estimate_bytes(j.model, s.batch_size, TrainSpec{s.loss, s.optimizer});
    estimates.push_back(est);
    const size_t phys = physical_memory_bytes();
    if (est + data.bytes() > phys)
      problems.push_back(s.where + ": model '" + s.name + "': needs an estimated " + gib(est) +
                         " of memory at batch_size " + std::to_string(s.batch_size) +
                         "; expected at most " + gib(phys > data.bytes() ? phys - data.bytes() : 0) +
                         " (this machine's memory less the data); reduce batch_size or the model");
    j.cost = estimated_cost(s, *j.model, data.n_train);
  }
  std::sort(estimates.rbegin(), estimates.rend());
  size_t concurrent = data.bytes();
  for (size_t i = 0; i < estimates.size() && i < static_cast<size_t>(workers); ++i)
    concurrent += estimates[i];
  if (problems.empty() && concurrent > physical_memory_bytes())
    problems.push_back(plan.path + ": the " + std::to_string(workers) +
                       " largest models running at once need an estimated " + gib(concurrent) +
                       "; expected at most " + gib(physical_memory_bytes()) +
                       "; use fewer --workers");
  if (!problems.empty()) {
    std::string msg = "failed to validate plan '" + plan.path + "': " +
                      std::to_string(problems.size()) + " problem" +
                      (problems.size() > 1 ? "s" : "");
    for (const auto& p : problems) msg += "\n  " + p;
    throw PlanError(msg);
  }

  // 3. The output folder.
  FleetSummary sum;
  sum.workers = workers;
  sum.out_dir = opts.out_dir.empty() ? default_out_dir(plan) : opts.out_dir;
  const std::string dir = sum.out_dir;
  const std::string plan_yaml = plan_to_yaml(plan);
  if (opts.resume) {
    if (!file_exists(dir + "/plan.yaml"))
      throw UsageError("failed to resume '" + dir + "': no plan.yaml there; expected the --out "
                       "folder of an earlier run of this plan");
    if (read_file(dir + "/plan.yaml") != plan_yaml)
      throw UsageError("failed to resume '" + dir + "': the plan differs from the one that run "
                       "began with (" + dir + "/plan.yaml); expected the same plan, or a new --out");
  } else if (file_exists(dir)) {
    throw UsageError("failed to create output folder '" + dir + "': it already exists; expected "
                     "a new folder, or --resume to continue the run in it");
  }
  if (opts.resume) {
    // Temporaries of a killed run are never read back; remove them.
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename().string().find(".tmp.") != std::string::npos)
        std::filesystem::remove(e.path());
  } else {
    // The folder appears whole (with its plan) or not at all: built under a temporary name.
    const std::string tmp = dir + ".tmp." + std::to_string(::getpid());
    std::filesystem::remove_all(tmp);
    for (const char* sub : {"", "/history", "/models", "/checkpoints", "/jobs"}) make_dirs(tmp + sub);
    write_file_atomic(tmp + "/plan.yaml", plan_yaml);
    std::error_code ec;
    std::filesystem::rename(tmp, dir, ec);
    if (ec)
      throw FileError("failed to create output folder '" + dir + "': " + ec.message());
  }

  // 4. Finished models are kept on --resume.
  std::vector<JobResult> results(jobs.size());
  std::vector<PreparedJob*> queue;
  double total_cost = 0, done_cost = 0;
  size_t done = 0;
  for (auto& j : jobs) {
    total_cost += j.cost;
    const std::string rec = dir + "/jobs/" + j.spec->name + ".json";
    if (opts.resume && file_exists(rec)) {
      try {
        results[j.index] = job_result_from_json(Json::parse(read_file(rec)));
        ++done;
        done_cost += j.cost;
        continue;
      } catch (const Json::exception&) {
        // An unreadable record (it is written atomically, so only by hand): run the model again.
      }
    }
    queue.push_back(&j);
  }
  // Longest first; plan order breaks ties.
  std::stable_sort(queue.begin(), queue.end(),
                   [](const PreparedJob* a, const PreparedJob* b) { return a->cost > b->cost; });

  std::vector<int> worker_cores;
  for (int w = 0; w < workers; ++w) worker_cores.push_back(cores[static_cast<size_t>(w) % cores.size()]);
  Display live(opts.mode, worker_cores, jobs.size(), done, total_cost, done_cost, dir + "/run.log");

  // 5. Pinned workers take the next job as soon as they are free.
  std::atomic<size_t> next{0};
  std::mutex out_mu;
  std::vector<double> busy(static_cast<size_t>(workers), 0.0);
  const auto t0 = Clock::now();
  live.note("training " + std::to_string(queue.size()) + " model(s) on " + std::to_string(workers) +
                " worker(s); output in " + dir,
            {{"event", "run_start"}, {"models", jobs.size()}, {"pending", queue.size()},
             {"workers", workers}, {"out", dir}});
  live.start();
  auto worker = [&](int w) {
    const int core = worker_cores[static_cast<size_t>(w)];
    pin_this_thread(core);
    for (;;) {
      if (opts.stop && opts.stop->load()) return;
      const size_t qi = next.fetch_add(1);
      if (qi >= queue.size()) return;
      PreparedJob& j = *queue[qi];
      const ModelSpec& s = *j.spec;
      live.job_started(w, s, j.cost);
      const auto js = Clock::now();
      JobContext ctx;
      ctx.seed = plan.seed;
      ctx.core = core;
      ctx.stop = opts.stop;
      ctx.observer = live.observer(w);
      ctx.checkpoint_path = dir + "/checkpoints/" + s.name + ".ckpt";
      if (io.save)
        ctx.save_model = [&](const Network& net, const ModelSpec& sp) {
          io.save(net, sp, dir + "/models/" + sp.name);
        };
      JobResult r = run_job(s, j.model, data, ctx, j.initial_params.empty() ? nullptr : &j.initial_params);
      busy[static_cast<size_t>(w)] += std::chrono::duration<double>(Clock::now() - js).count();
      {
        std::lock_guard<std::mutex> lock(out_mu);
        try {
          write_history_csv(dir + "/history/" + s.name + ".csv", r);
          if (r.status != JobStatus::kCancelled) {
            // Process-crash durability: after a system crash a lost record only means the
            // model is trained again, with the same result.
            write_file_atomic(dir + "/jobs/" + s.name + ".json", job_result_to_json(r).dump(1) + "\n",
                              Durability::kProcessCrash);
            std::remove((dir + "/checkpoints/" + s.name + ".ckpt").c_str());
          }
        } catch (const Error& e) {
          r.status = JobStatus::kFailed;
          r.message = e.what();
        }
        results[j.index] = r;
      }
      live.job_finished(w, r, j.cost);
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(worker, w);
  for (auto& t : threads) t.join();
  sum.makespan = std::chrono::duration<double>(Clock::now() - t0).count();
  live.stop();

  // 6. Models never started because of a stop are reported as cancelled.
  for (auto& j : jobs) {
    JobResult& r = results[j.index];
    if (r.status == JobStatus::kPending) {
      r.name = j.spec->name;
      r.status = JobStatus::kCancelled;
      r.message = "not started; resume with --resume";
      r.params = j.model->trainable_params() + j.model->non_trainable_params();
    }
    if (r.status == JobStatus::kCancelled) sum.interrupted = true;
  }
  double busy_total = 0;
  for (double b : busy) busy_total += b;
  sum.busy_fraction = sum.makespan > 0 ? busy_total / (workers * sum.makespan) : 0.0;
  sum.peak_rss = peak_rss_bytes();

  std::vector<std::string> mkeys;
  if (!plan.models.empty())
    for (const auto& m : plan.models[0].metrics) mkeys.push_back(metric_key(m));
  const RankKey key = rank_key(mkeys, data.n_val > 0, data.test.has_value());
  write_results(dir, plan.path, plan.seed, workers, results, key);
  sum.rank_by = key.key;
  sum.rank_higher_is_better = key.higher_is_better;
  sum.results = std::move(results);
  return sum;
}

}  // namespace nnfleet
