// `nnfleet train PLAN`: runs a plan's fleet with the live display and prints the leaderboard.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "api/model_io.h"
#include "fleet/cluster/cluster.h"
#include "fleet/cluster/cluster_fleet.h"
#include "fleet/cluster/stdout_relay.h"
#include "fleet/fleet.h"
#include "fleet/results.h"
#include "report/report.h"

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
  std::string plan, out, format = "keras";
  int workers = 0;
  bool resume = false, quiet = false, json = false, report = false;
  double checkpoint_seconds = kCheckpointSeconds;
};

// Under mpirun/srun every rank runs this; only rank 0 prints (the others' errors reach rank 0).
int train(const TrainArgs& a, Cluster* cluster) {
  Plan plan;
  if (cluster)
    cluster->agree([&] { plan = load_plan(a.plan); });
  else
    plan = load_plan(a.plan);
  FleetOptions o;
  o.out_dir = a.out;
  o.workers = a.workers;
  o.resume = a.resume;
  o.checkpoint_seconds = a.checkpoint_seconds;
  o.mode = a.json    ? Display::Mode::kJson
           : a.quiet ? Display::Mode::kQuiet
           : isatty(STDOUT_FILENO) ? Display::Mode::kLive
                                   : Display::Mode::kLines;
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
  // --report: report.html rewritten while the run goes on (rank 0 only), and once at its end.
  std::optional<LiveReport> report;
  if (a.report) {
    report.emplace();
    o.on_folder_ready = [&report](const std::string& dir) { report->start(dir); };
  }
  FleetSummary s = run_cluster_fleet(plan, o,
                                     api_detail::model_io(a.format == "h5"     ? api_detail::ModelFormat::kH5
                                              : a.format == "onnx" ? api_detail::ModelFormat::kOnnx
                                                                   : api_detail::ModelFormat::kKeras),
                                     cluster);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::string report_path, report_error;
  try {
    if (report) report_path = report->finish();
  } catch (const Error& e) {
    report_error = e.what();  // the run's results are written; said after the leaderboard
  }

  int failed = 0, done = 0;
  for (const auto& r : s.results) {
    failed += r.status == JobStatus::kFailed;
    done += r.status == JobStatus::kDone;
  }
  // A run that leaves no usable model (every one diverged) is not a success either.
  const bool none_done = done == 0 && !s.results.empty() && !s.interrupted;
  const int code = !s.write_error.empty() || !report_error.empty() ? 1
                   : s.interrupted                                 ? 130
                   : failed || none_done                           ? 3
                                                                   : 0;
  if (s.rank != 0) return code;
  if (a.json) {
    Json ev = {{"event", "run_end"}, {"out", s.out_dir}, {"makespan_seconds", s.makespan},
               {"busy_fraction", s.busy_fraction}, {"peak_rss_bytes", s.peak_rss},
               {"interrupted", s.interrupted}, {"failed", failed}};
    if (!s.write_error.empty()) ev["write_error"] = s.write_error;
    if (!report_path.empty()) ev["report"] = report_path;
    if (!s.ranks.empty()) {
      Json ranks = Json::array();
      for (const auto& r : s.ranks)
        ranks.push_back({{"rank", r.rank}, {"host", r.host}, {"cores", r.cores},
                         {"loaded_data", r.loaded_data}, {"jobs", r.jobs},
                         {"busy_seconds", r.busy_seconds}, {"peak_rss_bytes", r.peak_rss},
                         {"rss_private_bytes", r.rss_private}, {"rss_shared_bytes", r.rss_shared}});
      ev["ranks"] = ranks;
      ev["round_trip_us"] = {{"count", s.round_trip.count}, {"mean", s.round_trip.mean_us},
                             {"median", s.round_trip.median_us}, {"max", s.round_trip.max_us}};
    }
    std::printf("%s\n", ev.dump().c_str());
  } else if (!a.quiet) {
    std::printf("\n%s", leaderboard_text(s.results, {s.rank_by, s.rank_higher_is_better}, 20).c_str());
    std::printf("\n%zu model(s) in %.2f s on %d worker(s), cores busy %.0f%% of the time, peak "
                "memory %.1f MB\nresults: %s/results.json\n",
                s.results.size(), s.makespan, s.workers, 100.0 * s.busy_fraction,
                static_cast<double>(s.peak_rss) / 1e6, s.out_dir.c_str());
    if (!report_path.empty()) std::printf("report: %s\n", report_path.c_str());
    if (!s.ranks.empty())
      std::printf("%zu MPI ranks; rank 0 answered %zu job request(s) in %.0f us on average "
                  "(median %.0f us)\n",
                  s.ranks.size(), s.round_trip.count, s.round_trip.mean_us, s.round_trip.median_us);
  }
  if (!report_error.empty()) std::fprintf(stderr, "nnfleet: %s\n", report_error.c_str());
  if (!s.write_error.empty())
    // The run stopped at its first failed write; what finished is kept.
    std::fprintf(stderr,
                 "nnfleet: failed to write the output folder '%s': %s; the run stopped early\n"
                 "hint: free some space (or fix the folder's permissions), then continue with: "
                 "nnfleet train %s --out %s --resume\n",
                 s.out_dir.c_str(), s.write_error.c_str(), a.plan.c_str(), s.out_dir.c_str());
  else if (s.interrupted)
    std::fprintf(stderr, "nnfleet: interrupted; continue with: nnfleet train %s --out %s --resume\n",
                 a.plan.c_str(), s.out_dir.c_str());
  else if (none_done && !failed)
    std::fprintf(stderr,
                 "nnfleet: no model trained to the end: every one diverged (non-finite loss)\n"
                 "hint: lower the learning rate or check the data's scale\n");
  return code;
}

int run_train(const TrainArgs& a) {
  if (a.workers < 0) throw UsageError("failed to parse --workers: expected a positive number, got " + std::to_string(a.workers));
  std::unique_ptr<Cluster> cluster = start_mpi_cluster();  // null unless launched by mpirun/srun
  try {
    return train(a, cluster.get());
  } catch (const PeerExit&) {
    return 0;  // rank 0 reports the error and exits with its code
  }
}

}  // namespace

void add_train_command(CLI::App& app, Run& run) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* c = app.add_subcommand("train", "Train every model of a plan (YAML or JSON) at once");
  c->add_option("plan", args->plan, "The plan file (see examples/fashion-mnist.yaml)")->required();
  c->add_option("--out", args->out, "Output folder (default: runs/<plan>-<timestamp>)");
  c->add_option("--workers", args->workers,
                "Worker threads, each pinned to one core (default: the cores this process may use)")
      ->check(CLI::PositiveNumber);
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
  c->callback([&run, args] { run = [args] { return run_train(*args); }; });
}

}  // namespace nnfleet::cli
