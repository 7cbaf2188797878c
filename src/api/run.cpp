// train() (nnfleet/run.h): a plan's fleet through run_fleet, with caller-owned arrays handed to
// the fleet for the plan's sources of arrays, the caller's progress callback, and the results
// turned into public types.
#include "nnfleet/run.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "api/cluster_impl.h"
#include "api/convert.h"
#include "api/model_io.h"
#include "core/check.h"
#include "fleet/cluster/cluster_fleet.h"
#include "fleet/fleet.h"
#include "fleet/results.h"
#include "plan/plan.h"
#include "platform/files.h"
#include "report/report.h"

namespace nnfleet::api {
namespace {

namespace fs = std::filesystem;

// Forwards the workers' reports to RunOptions::on_event, and asks RunOptions::stop_model after
// each epoch (on the workers' threads).
class EventObserver : public JobObserver {
 public:
  explicit EventObserver(const RunOptions& o) : f_(o.on_event), stop_(o.stop_model) {}
  void on_batch(const ModelSpec& spec, int epoch, int batch, int batches, double loss,
                double metric, double samples_per_second) override {
    Event e;
    e.kind = Event::Kind::kBatchEnd;
    e.model = spec.name;
    e.epoch = epoch;
    e.batch = batch;
    e.batches = batches;
    e.loss = loss;
    e.metric = metric;
    e.samples_per_second = samples_per_second;
    if (f_) f_(e);
  }
  void on_epoch(const ModelSpec& spec, const EpochRecord& rec) override {
    Event e;
    e.kind = Event::Kind::kEpochEnd;
    e.model = spec.name;
    e.epoch = rec.epoch;
    e.logs = rec.values;
    e.seconds = rec.seconds;
    if (f_) f_(e);
  }
  bool stop_model(const ModelSpec& spec, const EpochRecord& rec) override {
    return stop_ && stop_(spec.name, rec.epoch);
  }
  void on_model_end(const ModelResult& r) override {
    if (!f_) return;
    Event e;
    e.kind = Event::Kind::kModelEnd;
    e.model = r.name;
    e.epoch = r.epochs;
    e.logs = r.metrics;
    e.seconds = r.seconds;
    e.status = r.status;
    e.message = r.message;
    f_(e);
  }
  void on_run_start(const std::vector<std::pair<std::string, int>>& planned) override {
    if (!f_) return;
    Event e;
    e.kind = Event::Kind::kRunStart;
    e.planned = planned;
    f_(e);
  }

 private:
  const std::function<void(const Event&)>& f_;
  const std::function<bool(const std::string&, int)>& stop_;
};

// A folder of our own under $TMPDIR for a run without an output folder; removed at the end.
class TempFolder {
 public:
  TempFolder() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/nnfleet-run-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
      throw FileError("failed to create a temporary folder for the run in '" +
                      tmpl.substr(0, tmpl.rfind('/')) + "': " + std::strerror(errno));
    dir_ = tmpl;
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

FleetOptions fleet_options(const RunOptions& o) {
  if (o.workers < 0)
    throw UsageError(
        "failed to start the run: workers must be positive; expected 1 or more (0: "
        "every core), got " +
        std::to_string(o.workers));
  if (!(o.checkpoint_seconds >= 0))
    throw UsageError("failed to start the run: checkpoint_seconds must be 0 or more; got " +
                     std::to_string(o.checkpoint_seconds));
  if (o.format != "keras" && o.format != "h5" && o.format != "onnx")
    throw UsageError("failed to start the run: unknown model format '" + o.format +
                     "'; expected keras, h5 or onnx");
  if (!o.save.empty()) {
    std::string why;
    if (!parse_save_policy(o.save, why))
      throw UsageError("failed to start the run: save '" +
                       (o.save.size() > 40 ? o.save.substr(0, 40) + "..." : o.save) +
                       "' is not a policy; expected all, best N (N >= 1) or none (" + why + ")");
  }
  if (o.resume && (!o.out || o.out->empty()))
    throw UsageError(
        "failed to resume the run: resume needs the output folder of the run; "
        "expected out=FOLDER (nnfleet train: --out FOLDER)");
  FleetOptions f;
  f.workers = o.workers;
  f.resume = o.resume;
  f.checkpoint_seconds = o.checkpoint_seconds;
  f.stop = o.stop;
  f.keep_history = o.keep_history;
  f.mode = o.progress;
  return f;
}

// The models in leaderboard order (indices into the results).
std::vector<size_t> ranking(const FleetSummary& s) {
  std::vector<size_t> order;
  for (const ModelResult* r : ranked(s.results, {s.rank_by, s.rank_higher_is_better}))
    order.push_back(static_cast<size_t>(r - s.results.data()));
  return order;
}

}  // namespace

PlanInput PlanInput::file(const std::string& path) {
  PlanInput p;
  p.is_file_ = true;
  p.path_ = path;
  return p;
}

PlanInput PlanInput::text(const std::string& text, const std::string& name,
                          const std::string& base_dir) {
  PlanInput p;
  p.is_file_ = false;
  p.path_ = name;
  p.text_ = text;
  p.base_dir_ = base_dir;
  return p;
}

RunResult train(const PlanInput& input, const DataArrays& arrays, const RunOptions& o) {
  FleetOptions f = fleet_options(o);
  Plan plan;
  // Sources may name arrays ({array: KEY}) only when the caller gives some.
  const bool given = !arrays.empty();
  auto load = [&] {
    plan = input.is_file() ? load_plan(input.path(), given)
                           : parse_plan(input.content(), input.path(),
                                        input.base_dir().empty() ? fs::current_path().string()
                                                                 : input.base_dir(),
                                        0, given);
    std::string why;
    if (!o.save.empty()) plan.save = *parse_save_policy(o.save, why);  // checked above
  };
  nnfleet::Cluster* ranks = ClusterAccess::ranks(o.cluster);
  if (ranks)
    ranks->agree(load);
  else
    load();
  std::map<std::string, Array> given_arrays;
  for (const auto& [key, view] : arrays)
    given_arrays.emplace(key, api_detail::to_array(view, "{array: " + key + "}"));
  f.arrays = &given_arrays;
  std::optional<TempFolder> temp;
  if (!o.out) {
    temp.emplace();
    f.out_dir = temp->dir() + "/run";
  } else {
    f.out_dir = *o.out;
  }
  std::optional<EventObserver> events;
  if (o.on_event || o.stop_model) {
    events.emplace(o);
    f.observer = &*events;
  }
  // The report is rewritten while the run goes on (rank 0 only), and once at its end.
  std::optional<LiveReport> report;
  if (o.report) {
    report.emplace();
    f.on_folder_ready = [&report](const std::string& dir) { report->start(dir); };
  }
  const auto io = api_detail::model_io(o.format == "h5"     ? api_detail::ModelFormat::kH5
                                       : o.format == "onnx" ? api_detail::ModelFormat::kOnnx
                                                            : api_detail::ModelFormat::kKeras);
  FleetSummary s = run_cluster_fleet(plan, f, io, ranks);
  // The fleet's summary is the public result: moved, not copied field by field.
  s.ranking = ranking(s);
  RunResult r = std::move(static_cast<RunResult&>(s));
  try {
    if (report) r.report_path = report->finish();
  } catch (const Error& e) {
    r.report_error = e.what();  // the run's results are written
  }
  if (!temp && s.results_written) r.results_file = r.out_dir + "/results.json";
  if (temp) r.out_dir.clear();
  // The fleet's results are the public ones: the vector is handed over, not copied (a copy
  // beside it was 34 MB of a 100,000-model run's peak).
  r.models = std::move(s.results);
  for (size_t k = 0; k < r.models.size(); ++k) {
    ModelResult& m = r.models[k];
    // The fleet streams parameters into results.json from the plan; a program gets them here
    // (the CLI's results do not hold them: about 0.2 KB a model of a 4,000-model grid).
    if (o.parameters)
      for (const auto& [name, value] : plan.models.parameters(k))
        m.parameters.emplace_back(name, value.dump());
    if (o.load_models && s.rank == 0 && !m.model_file.empty()) m.model = Model::load(m.model_file);
    if (temp) m.model_file.clear();  // gone with the temporary folder
  }
  return r;
}

std::vector<std::string> plan_defaults_keys() { return nnfleet::plan_defaults_keys(); }

std::string write_report(const std::string& run_dir, bool live, const std::string& group_by) {
  return nnfleet::write_report(run_dir, live, nullptr, group_by);
}

}  // namespace nnfleet::api
