// A search's part of a fleet run (search_run.h).
#include "fleet/search_run.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "fleet/fit/checkpoint.h"
#include "fleet/results.h"
#include "platform/files.h"

namespace nnfleet::fleet_detail {

namespace {

const char* scheduler_name(SearchSchedule::Kind k) {
  switch (k) {
    case SearchSchedule::Kind::kHalving:
      return "successive_halving";
    case SearchSchedule::Kind::kMedian:
      return "median_stopping";
    case SearchSchedule::Kind::kNone:
      break;
  }
  return "none";
}

// A parameter's value as a CSV cell: strings without their quotes.
std::string cell(const Json& v) {
  return csv_field(v.is_string() ? v.get<std::string>() : v.dump());
}

}  // namespace

void make_search(const Plan& plan, const std::vector<FleetData>& data, RunState& st) {
  if (!plan.search) return;
  std::vector<SearchScheduler::Trial> trials(st.jobs.size());
  for (size_t k = 0; k < st.jobs.size(); ++k) {
    const PreparedJob& j = st.jobs[k];
    trials[k].n_train = data.at(plan.models.source(k)).n_train;
    trials[k].epoch_cost = j.cost / std::max(1, j.epochs);
  }
  st.search = std::make_unique<SearchScheduler>(*plan.search, std::move(trials));
  if (plan.search->time_limit_seconds > 0)
    st.deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(plan.search->time_limit_seconds));
}

void resume_trial(RunState& st, const PreparedJob& j) {
  Checkpoint ck;
  try {
    if (!load_checkpoint(st.dir + "/checkpoints/" + j.name() + ".ckpt", ck)) return;
  } catch (const Error&) {
    return;  // the job reads it again when it runs, and says what is wrong with it
  }
  // The trial's result so far, in the run's results (a paused trial's flag beside it).
  ModelResult& r = st.results.at(j.index);
  r.name = j.name();
  r.params = j.params;
  r.status = JobStatus::kCancelled;
  const bool paused = st.paused.at(j.index) = ck.batch == 0 && !ck.history.empty();
  r.epochs = static_cast<int>(ck.history.size());
  r.seconds = ck.seconds;
  r.samples_per_second = ck.seconds > 0 ? static_cast<double>(ck.samples) / ck.seconds : 0.0;
  r.history = std::move(ck.history);
  if (!r.history.empty()) r.metrics = r.history.back().values;
  r.message = "stopped after epoch " + std::to_string(r.epochs) + "; resume with --resume";
  st.search->reached(j.index, r.history, JobStatus::kCancelled, paused);
}

void fill_rungs(RunState& st) {
  if (!st.search) return;
  for (size_t k = 0; k < st.results.size(); ++k) {
    ModelResult& r = st.results[k];
    r.rungs = st.search->rung_results(k);
    if (st.paused[k]) {
      r.message = "the search stopped (" +
                  std::string(st.deadline_noted ? "its time limit" : "a stop") +
                  ") with this trial paused after epoch " + std::to_string(r.epochs) +
                  "; resume with --resume to continue the search";
      st.paused[k] = false;
    }
  }
}

Json parameters_json(const Plan& plan, size_t k) {
  Json p = Json::object();
  for (auto& [name, value] : plan.models.parameters(k)) p[name] = std::move(value);
  return p.empty() ? Json::object() : Json{{"parameters", p}};
}

Json results_head(const Plan& plan, const RunState& st) {
  Json head = Json::object();
  Json params = Json::array();
  if (plan.search && plan.search->sampled) {
    for (const SearchParameter& p : plan.search->parameters)
      params.push_back({{"name", p.name}, {"kind", p.kind}, {"log", p.log}});
  } else if (!st.results.empty()) {
    for (const auto& [name, value] : plan.models.parameters(0))
      params.push_back({{"name", name}, {"kind", "grid"}, {"log", false}});
  }
  if (!params.empty()) head["parameters"] = params;
  if (!plan.search) return head;
  const SearchSpec& s = *plan.search;
  Json search = {{"metric", s.metric},
                 {"mode", s.higher_is_better ? "max" : "min"},
                 {"scheduler", scheduler_name(s.schedule.kind)},
                 {"rungs", st.search->budgets(0)},
                 {"budget", s.schedule.samples ? "samples" : "epochs"},
                 {"trials", s.trials},
                 {"sampler", s.sampled ? s.sampler : "models"},
                 {"epochs_trained", st.search->epochs_trained()},
                 {"stopped_by_time_limit", st.deadline_noted}};
  if (s.schedule.kind == SearchSchedule::Kind::kHalving) {
    search["reduction_factor"] = s.schedule.reduction_factor;
    search["brackets"] = s.schedule.brackets;
  }
  if (s.time_limit_seconds > 0) search["time_limit"] = s.time_limit_seconds;
  head["search"] = search;
  return head;
}

void write_trials_csv(const Plan& plan, const RunState& st) {
  if (!plan.search) return;
  std::vector<std::string> names;
  std::vector<std::vector<std::pair<std::string, Json>>> params(st.results.size());
  std::set<int> rung_epochs;  // a column per epochs any trial had a rung at (brackets differ)
  for (size_t k = 0; k < st.results.size(); ++k) {
    params[k] = plan.models.parameters(k);
    for (const auto& [name, value] : params[k])
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    for (const api::Rung& g : st.results[k].rungs) rung_epochs.insert(g.epochs);
  }
  std::ostringstream o;
  o << "trial,name,status,epochs," << csv_field(plan.search->metric);
  for (int e : rung_epochs) o << ",rung_" << e;
  for (const std::string& n : names) o << "," << csv_field(n);
  o << "\n";
  for (size_t k = 0; k < st.results.size(); ++k) {
    const ModelResult& r = st.results[k];
    const double* v = find_metric(r.metrics, plan.search->metric);
    o << k << "," << csv_field(r.name) << "," << api::status_name(r.status) << "," << r.epochs
      << "," << (v ? api::figure_text(*v) : "");
    for (int e : rung_epochs) {
      std::string c;
      for (const api::Rung& g : r.rungs)
        if (g.epochs == e) c = api::figure_text(g.value);
      o << "," << c;
    }
    for (const std::string& n : names) {
      std::string c;
      for (const auto& [name, value] : params[k])
        if (name == n) c = cell(value);
      o << "," << c;
    }
    o << "\n";
  }
  write_file_atomic(st.dir + "/trials.csv", o.str(), Durability::kProcessCrash);
}

}  // namespace nnfleet::fleet_detail
