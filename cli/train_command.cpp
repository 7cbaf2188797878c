// `nnfleet train PLAN`: runs a plan's fleet with the live display and prints the leaderboard.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.h"
#include "leaderboard.h"
#include "nnfleet/cluster.h"
#include "nnfleet/run.h"
#include "stdout_relay.h"

namespace nnfleet::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int sig) {
  // First signal: finish the current batch, checkpoint, write results. Second: die at once.
  if (g_stop.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

struct TrainArgs {
  std::string plan, out, format = "keras", save;
  int workers = 0;
  bool resume = false, quiet = false, json = false, report = false;
  double checkpoint_seconds = api::RunOptions{}.checkpoint_seconds;
};

// The end of the run on stdout: one JSON event, or the leaderboard and the run's figures.
void print_summary(const TrainArgs& a, const api::RunResult& r, int failed) {
  if (a.json) {
    using Json = nlohmann::json;
    Json ev = {{"event", "run_end"},
               {"out", r.out_dir},
               {"makespan_seconds", r.makespan},
               {"busy_fraction", r.busy_fraction},
               {"peak_rss_bytes", r.peak_rss_bytes},
               {"interrupted", r.interrupted},
               {"failed", failed}};
    if (!r.write_error.empty()) ev["write_error"] = r.write_error;
    if (!r.report_path.empty()) ev["report"] = r.report_path;
    if (!r.ranks.empty()) {
      Json ranks = Json::array();
      for (const auto& k : r.ranks)
        ranks.push_back({{"rank", k.rank},
                         {"host", k.host},
                         {"cores", k.cores},
                         {"loaded_data", k.loaded_data},
                         {"jobs", k.jobs},
                         {"busy_seconds", k.busy_seconds},
                         {"peak_rss_bytes", k.peak_rss_bytes},
                         {"rss_private_bytes", k.rss_private_bytes},
                         {"rss_shared_bytes", k.rss_shared_bytes}});
      ev["ranks"] = ranks;
      const api::RoundTrips& t = r.round_trips;
      ev["round_trip_us"] = {
          {"count", t.count}, {"mean", t.mean_us}, {"median", t.median_us}, {"max", t.max_us}};
    }
    std::printf("%s\n", ev.dump().c_str());
  } else if (!a.quiet) {
    std::printf("\n%s", leaderboard_text(r, 20).c_str());
    std::printf(
        "\n%zu model(s) in %.2f s on %d worker(s), cores busy %.0f%% of the time, peak "
        "memory %.1f MB\n",
        r.models.size(), r.makespan, r.workers, 100.0 * r.busy_fraction,
        static_cast<double>(r.peak_rss_bytes) / 1e6);
    // Only a file this run wrote (a failed write leaves none, or an older one).
    if (!r.results_file.empty()) std::printf("results: %s\n", r.results_file.c_str());
    if (!r.report_path.empty()) std::printf("report: %s\n", r.report_path.c_str());
    if (!r.ranks.empty())
      std::printf(
          "%zu MPI ranks; rank 0 answered %zu job request(s) in %.0f us on average "
          "(median %.0f us)\n",
          r.ranks.size(), r.round_trips.count, r.round_trips.mean_us, r.round_trips.median_us);
  }
}

// What went wrong or is left to do, on stderr.
void print_advice(const TrainArgs& a, const api::RunResult& r, int failed) {
  if (!r.report_error.empty()) std::fprintf(stderr, "nnfleet: %s\n", r.report_error.c_str());
  if (!r.write_error.empty())
    // The run stopped at its first failed write; what finished is kept.
    std::fprintf(stderr,
                 "nnfleet: failed to write the output folder '%s': %s; the run stopped "
                 "early\n%s\n",
                 r.out_dir.c_str(), r.write_error.c_str(),
                 write_failure_hint(a.plan, r.out_dir, r.write_error).c_str());
  else if (r.interrupted)
    std::fprintf(stderr,
                 "nnfleet: interrupted; continue with: nnfleet train %s --out %s --resume\n",
                 a.plan.c_str(), r.out_dir.c_str());
  else if (none_done(r) && !failed)
    std::fprintf(stderr,
                 "nnfleet: no model trained to the end: every one diverged (non-finite loss)\n"
                 "hint: lower the learning rate or check the data's scale\n");
}

// Under mpirun/srun every rank runs this; only rank 0 prints (the others' errors reach rank 0).
int train(const TrainArgs& a, const api::Cluster* cluster) {
  api::RunOptions o;
  o.out = a.out;
  o.workers = a.workers;
  o.resume = a.resume;
  o.checkpoint_seconds = a.checkpoint_seconds;
  o.format = a.format;
  o.save = a.save;
  o.report = a.report;
  o.cluster = cluster;
  o.load_models = false;
  o.parameters = false;  // the leaderboard shows none; results.json and results.csv have them
  o.keep_history = false;
  o.progress = a.json                  ? api::Progress::kJson
               : a.quiet               ? api::Progress::kQuiet
               : isatty(STDOUT_FILENO) ? api::Progress::kLive
                                       : api::Progress::kLines;
  o.stop = &g_stop;
  // Under mpirun, rank 0's output must never block the fleet (stdout_relay.h), and a reader that
  // went away must not kill a rank that is writing its results.
  std::optional<StdoutRelay> relay;
  if (cluster) {
    std::signal(SIGPIPE, SIG_IGN);
    if (cluster->rank() == 0) relay.emplace();
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // A file-size limit (ulimit -f) then fails a write with EFBIG, as a full disk does, instead of
  // killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  const api::RunResult r = api::train(api::PlanInput::file(a.plan), {}, o);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (r.rank != 0) return exit_code(r);
  const int failed = static_cast<int>(
      std::count_if(r.models.begin(), r.models.end(),
                    [](const api::ModelResult& m) { return m.status == api::Status::kFailed; }));
  print_summary(a, r, failed);
  print_advice(a, r, failed);
  return exit_code(r);
}

int run_train(const TrainArgs& a) {
  // Null unless launched by mpirun/srun.
  const std::unique_ptr<api::Cluster> cluster = api::Cluster::start_mpi();
  try {
    return train(a, cluster.get());
  } catch (const PeerExit&) {
    return 0;  // rank 0 reports the error and exits with its code
  }
}

}  // namespace

std::string write_failure_hint(const std::string& plan, const std::string& out_dir,
                               const std::string& write_error) {
  auto says = [&](int e) { return write_error.find(std::strerror(e)) != std::string::npos; };
  const std::string resume = "nnfleet train " + plan + " --out " + out_dir + " --resume";
  std::error_code ec;
  if (!std::filesystem::is_directory(out_dir, ec) || says(ENOENT) || says(ENOTDIR))
    return "hint: the output folder (or a part of it) was deleted or moved while the run wrote "
           "it; start the run again: nnfleet train " +
           plan + " --out " + out_dir;
  if (says(ENOSPC) || says(EDQUOT) || says(EFBIG))
    return "hint: free some space, then continue with: " + resume;
  if (says(EACCES) || says(EPERM) || says(EROFS))
    return "hint: fix the folder's permissions, then continue with: " + resume;
  return "hint: remove the cause above, then continue with: " + resume;
}

void add_train_command(CLI::App& app, Run& run) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* c =
      app.add_subcommand("train",
                         "Train every model of a plan (YAML or JSON) at once, or run its search "
                         "(sampled trials, successive halving; README \"Search\")");
  c->add_option("plan", args->plan, "The plan file (see examples/fashion-mnist.yaml)")->required();
  c->add_option("--out", args->out, "Output folder (default: runs/<plan>-<timestamp>)");
  c->add_option("--workers", args->workers,
                "Worker threads, each pinned to one core (default, and at most: the cores this "
                "process may use)")
      ->check(CLI::Validator(
          [](const std::string& v) {
            // Checked as text: CLI11's own range check prints its bounds with 309 digits.
            char* end = nullptr;
            errno = 0;
            const long long n = std::strtoll(v.c_str(), &end, 10);
            return end != v.c_str() && *end == '\0' && errno == 0 && n >= 1 && n <= INT32_MAX
                       ? std::string()
                       : "expected a whole number of workers from 1 to " +
                             std::to_string(INT32_MAX) + " (leave it out for one per core); got '" +
                             v + "'";
          },
          "N"));
  c->add_flag("--resume", args->resume,
              "Continue the run in --out: finished models are kept, others restart from their "
              "last checkpoint");
  c->add_option("--checkpoint-seconds", args->checkpoint_seconds,
                "Checkpoint a model at the end of an epoch once this many seconds of training "
                "have passed since its last checkpoint (default 2; 0: every epoch). Models are "
                "also checkpointed when stopped and when early stopping ends them")
      ->check(CLI::Validator(
          [](const std::string& v) {
            char* end = nullptr;
            const double s = std::strtod(v.c_str(), &end);
            return end != v.c_str() && *end == '\0' && s >= 0.0
                       ? std::string()
                       : "expected a number of seconds, 0 or more; got '" + v + "'";
          },
          "SECONDS"));
  c->add_flag("--quiet", args->quiet, "Print nothing but errors");
  c->add_flag("--json", args->json, "Print one JSON event per line instead of the display");
  c->add_flag("--report", args->report,
              "Write <out>/report.html (as `nnfleet report` does) every few seconds while the "
              "run goes on, and once at its end; the page reloads itself while the run is live");
  c->add_option("--format", args->format,
                "File format of the trained models in <out>/models: keras (Keras 3 .keras, the "
                "default), h5 (legacy Keras HDF5) or onnx (the .keras file and an ONNX export "
                "beside it)")
      ->check(CLI::IsMember({"keras", "h5", "onnx"}));
  c->add_option("--save", args->save,
                "Which trained models keep their file in <out>/models: all, \"best N\" (the N "
                "best on the leaderboard, ties in plan order; the others' files are deleted as "
                "better models finish) or none; replaces the plan's `save:`. Default: all up to "
                "10,000 models, best 100 above. Results, histories and records are kept for "
                "every model whatever the policy")
      ->type_name("POLICY");
  c->callback([&run, args] { run = [args] { return run_train(*args); }; });
}

}  // namespace nnfleet::cli
