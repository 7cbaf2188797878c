// The report's data, gathered from a run folder's files. The page gets one JSON object:
//   title, dir, generated (Unix s), live, rank_by, higher_is_better, columns (history columns),
//   models: [{name, status, message, epochs, planned_epochs, params, flops, seconds,
//             samples_per_second, core, metrics, best, stop_reason, history {column: [...]},
//             grid {var: value}, rungs [{epochs, value, decision}] (search trials), layers,
//             notes}],
//   layer_tables: [text, ...] (each model's `layers` and `notes` index it: one layer table per
//   architecture),
//   group_by: the parameter the page groups models by (plan's `group_by`, `report --group-by`) or
//   null,
//   grid_vars: [name, ...], grid_source: "recorded" (the run's `parameters`) | "inferred" (from
//   the model names, for runs that recorded none),
//   param_info: {name: {kind, log}} (recorded parameters: "float", "int", "choice", "fixed",
//   "grid"; `log`: drawn on a log scale),
//   search: results.json's `search` object (metric, mode, scheduler, rungs, trials, ...) or, while
//   a search runs, what plan.yaml's `search:` says of it; null outside a search,
//   timeline: {sessions: [{session, start, end, ranks}], lanes: [{rank, host, core, worker}],
//              jobs: [{model, lane, session, start, end, status}], help: [{..., pieces}]}
//   (a large fleet's timeline has no line per job: each worker's jobs are one bar, `summary`)
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "fleet/results.h"
#include "io/keras/keras_reader.h"
#include "io/model_summary.h"
#include "plan/plan.h"
#include "plan/plan_yaml.h"
#include "platform/files.h"
#include "report/report.h"

namespace nnfleet {
namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What the report reads of plan.yaml: its expanded entries (`models`, in plan order), its
// `search:` (null outside a search) and the names of the search's `space:` in written order (JSON
// objects forget it; the YAML document keeps it).
struct PlanFile {
  Json models;
  Json search;
  std::vector<std::string> space_order;
  std::string group_by;  // the plan's top-level `group_by` ("" when none)
};

bool has_grid(const Json& models) {
  for (const Json& m : models)
    if (m.is_object() && m.contains("grid")) return true;
  return false;
}

// The models of plan.yaml `text` in its grid form, each expanded (what the other forms list).
Json expanded_models(const std::string& text, const std::string& path) {
  // Arrays allowed: a program's run names its arrays, and the report never loads the data.
  Plan plan;
  try {
    plan = parse_plan(text, path, std::filesystem::path(path).parent_path().string(), 0, true);
  } catch (const PlanError& e) {
    throw FileError("failed to read plan '" + path + "': " + e.what() +
                    "\nexpected the plan.yaml the run wrote");
  }
  Json models = Json::array();
  for (const ModelSpec& m : plan.models) models.push_back(m.expanded_json());
  return models;
}

PlanFile read_plan(const std::string& dir) {
  const std::string text = read_file(dir + "/plan.yaml");
  try {
    const YAML::Node root = YAML::Load(text);
    const Json plan = plan_detail::yaml_to_json(root).value;
    if (plan.contains("models") && plan["models"].is_array()) {
      PlanFile f{plan["models"], plan.value("search", Json(nullptr)), {}, {}};
      // A large fleet's plan.yaml is in grid form (entries with `grid:`: loaded as a plan, each
      // model expanded) or factored (plan.h: plan_to_yaml): each entry over `defaults`, its
      // null removing a default.
      if (has_grid(f.models))
        f.models = expanded_models(text, dir + "/plan.yaml");
      else if (plan.contains("defaults") && plan["defaults"].is_object())
        for (Json& m : f.models) {
          Json full = plan["defaults"];
          for (auto it = m.begin(); it != m.end(); ++it)
            if (it.value().is_null())
              full.erase(it.key());
            else
              full[it.key()] = it.value();
          m = std::move(full);
        }
      if (plan.contains("group_by") && plan["group_by"].is_string())
        f.group_by = plan["group_by"].get<std::string>();
      const YAML::Node search = root["search"];
      const YAML::Node space = search && search.IsMap() ? search["space"] : YAML::Node();
      if (space && space.IsMap())
        for (const auto& kv : space) f.space_order.push_back(kv.first.as<std::string>());
      return f;
    }
  } catch (const FileError&) {
    throw;
  } catch (const std::exception&) {
  }
  throw FileError("failed to read plan '" + dir +
                  "/plan.yaml': it is not the plan of an nnfleet run; expected a `models:` list");
}

void flatten(const Json& v, const std::string& path, std::map<std::string, Json>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
  } else if (v.is_array() && !v.empty() && (v[0].is_object() || v[0].is_array())) {
    for (size_t i = 0; i < v.size(); ++i) flatten(v[i], path + "[" + std::to_string(i) + "]", out);
  } else {
    out[path] = v;
  }
}

std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return plan_detail::number_text(v.get<double>());
  return v.dump();
}

// Whether `text` stands in `name` as a whole token (not inside a longer number or word): "16" in
// "mlp-16-0.01", not the "1" of "m1". A number of two characters or more may follow a label of
// letters, as a name template like `mlp-{units}-lr{lr}` writes it: "0.001" in "mlp-64-lr0.001".
bool names_value(const std::string& name, const std::string& text) {
  if (text.empty()) return false;
  auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.'; };
  const bool labelled = text.size() >= 2 && std::isdigit(static_cast<unsigned char>(text[0]));
  for (size_t at = name.find(text); at != std::string::npos; at = name.find(text, at + 1)) {
    const size_t end = at + text.size();
    const bool after_label =
        labelled && at > 0 && std::isalpha(static_cast<unsigned char>(name[at - 1]));
    if ((at == 0 || !part(name[at - 1]) || after_label) && (end == name.size() || !part(name[end])))
      return true;
  }
  return false;
}

// Why a model stopped, in words.
std::string stop_reason(const Json& m, const Json& spec) {
  const std::string status = m.value("status", "pending");
  const int epochs = m.value("epochs", 0), planned = m.value("planned_epochs", 0);
  if (status == "done") {
    if (planned > 0 && epochs < planned && spec.contains("early_stopping") &&
        spec["early_stopping"].is_object()) {
      const Json& es = spec["early_stopping"];
      std::string why = "early stopping after epoch " + std::to_string(epochs) + " of " +
                        std::to_string(planned) + ": " +
                        es.value("monitor", std::string("val_loss")) + " did not improve for " +
                        value_text(es.value("patience", Json(0))) + " epoch(s)";
      if (m.contains("best") && m["best"].is_object())
        why += "; best epoch " + std::to_string(m["best"].value("epoch", 0));
      if (es.value("restore_best_weights", false)) why += ", whose weights were kept";
      return why;
    }
    return "ran all " + std::to_string(epochs) + " epoch(s)";
  }
  if (status == "pending") return "not started yet";
  if (status == "running") return "still training";
  std::string msg = m.value("message", std::string());
  return status + (msg.empty() ? "" : ": " + msg);
}

// `v` to `digits` significant digits: a curve's points need no more, and at 10,000 models of 10
// epochs and 4 columns the 17 digits of a double made half of the page's 5 MB.
Json rounded(const Json& v, int digits) {
  if (!v.is_number_float()) return v;
  const double x = v.get<double>();
  if (!std::isfinite(x)) return v;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return std::strtod(buf, nullptr);
}

// Columns of history rows as arrays (null where a row lacks one), values to 6 significant digits
// (an epoch's seconds left out: the page draws no curve of them); adds new column names.
Json history_columns(const Json& history, const Json& order, std::vector<std::string>& columns) {
  std::vector<std::string> keys;
  if (order.is_array())
    for (const auto& k : order) keys.push_back(k.get<std::string>());
  for (const auto& k : keys)
    if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
  Json h = {{"epoch", Json::array()}};
  for (const auto& k : keys) h[k] = Json::array();
  for (const auto& row : history) {
    h["epoch"].push_back(row.value("epoch", 0));
    for (const auto& k : keys) h[k].push_back(row.contains(k) ? rounded(row[k], 6) : Json(nullptr));
  }
  return h;
}

ModelFileInfo model_file_info(const std::string& path, ModelFileCache* cache) {
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(path, ec);
  if (cache) {
    auto it = cache->find(path);
    if (it != cache->end() && it->second.bytes == bytes) return it->second;
  }
  ModelFileInfo info;
  info.bytes = bytes;
  try {
    const LoadedModel lm = load_keras_model(path);
    info.summary = model_summary(lm, path);
    info.flops = lm.model->forward_flops();
  } catch (const Error& e) {
    info.summary = std::string("cannot describe the model file: ") + e.what();
  }
  if (cache) (*cache)[path] = info;
  return info;
}

// The lanes (one per rank, host and core of each worker) and the bars of timeline.jsonl.
Json read_timeline(const std::string& dir, bool live) {
  Json tl = {{"sessions", Json::array()},
             {"lanes", Json::array()},
             {"jobs", Json::array()},
             {"help", Json::array()}};
  std::ifstream f(dir + "/timeline.jsonl", std::ios::binary);
  if (!f) return tl;
  std::map<std::tuple<int, std::string, int, int>, int> lane_of;
  auto lane = [&](const Json& j) {
    const auto key = std::make_tuple(j.value("rank", 0), j.value("host", std::string()),
                                     j.value("core", -1), j.value("worker", 0));
    auto it = lane_of.find(key);
    if (it != lane_of.end()) return it->second;
    const int id = static_cast<int>(tl["lanes"].size());
    tl["lanes"].push_back({{"rank", std::get<0>(key)},
                           {"host", std::get<1>(key)},
                           {"core", std::get<2>(key)},
                           {"worker", std::get<3>(key)}});
    lane_of.emplace(key, id);
    return id;
  };
  std::map<std::pair<int, std::string>, Json> open;  // (session, model) -> its start
  std::map<int, double> last_t;                      // session -> last time seen
  std::string line;
  while (std::getline(f, line)) {
    if (f.eof()) break;  // torn
    Json j;
    try {
      j = Json::parse(line);
    } catch (const Json::exception&) {
      continue;
    }
    const std::string kind = j.value("kind", "");
    const int session = j.value("session", 0);
    for (const char* k : {"t", "start", "end"})
      if (j.contains(k) && j[k].is_number())
        last_t[session] = std::max(last_t[session], j[k].get<double>());
    if (kind == "session") {
      Json s = {{"session", session},
                {"start", j.value("start", 0.0)},
                {"end", nullptr},
                {"ranks", j.value("ranks", Json::array())}};
      // Every worker gets a lane, idle ones included, in rank and worker order.
      for (const auto& r : s["ranks"]) {
        int w = 0;
        for (const auto& c : r.value("cores", Json::array()))
          lane({{"rank", r.value("rank", 0)},
                {"host", r.value("host", "")},
                {"core", c},
                {"worker", w++}});
      }
      tl["sessions"].push_back(s);
    } else if (kind == "end") {
      for (auto& s : tl["sessions"])
        if (s["session"] == session) s["end"] = j.value("t", 0.0);
    } else if (kind == "start") {
      open[{session, j.value("model", "")}] = j;
    } else if (kind == "lane") {
      // A large fleet's worker, whole (Timeline::set_lanes_only): one bar from its first start to
      // its last end, named by its jobs and busy seconds.
      tl["jobs"].push_back({{"model", std::to_string(j.value("jobs", 0)) + " jobs, busy " +
                                          api::figure_text(j.value("busy", 0.0)) + " s"},
                            {"lane", lane(j)},
                            {"session", session},
                            {"start", j.value("first", 0.0)},
                            {"end", j.value("last", 0.0)},
                            {"status", "done"},
                            {"summary", true}});
    } else if (kind == "job" || kind == "help") {
      Json bar = {{"model", j.value("model", "")},
                  {"lane", lane(j)},
                  {"session", session},
                  {"start", j.value("start", 0.0)},
                  {"end", j.value("end", 0.0)}};
      if (kind == "job") {
        bar["status"] = j.value("status", "");
        open.erase({session, j.value("model", "")});
        tl["jobs"].push_back(bar);
      } else {
        bar["pieces"] = j.value("pieces", 0);
        tl["help"].push_back(bar);
      }
    }
  }
  // A start without its end: running (the live run's last session) or cut off by a crash.
  const int last_session = tl["sessions"].empty() ? 0 : tl["sessions"].back().value("session", 0);
  for (const auto& [key, j] : open) {
    const bool running = live && key.first == last_session;
    const double end = running ? std::max(wall_now(), last_t[key.first]) : last_t[key.first];
    tl["jobs"].push_back({{"model", key.second},
                          {"lane", lane(j)},
                          {"session", key.first},
                          {"start", j.value("t", 0.0)},
                          {"end", end},
                          {"status", running ? "running" : "interrupted"}});
  }
  for (auto& s : tl["sessions"])
    if (s["end"].is_null()) s["end"] = last_t[s.value("session", 0)];
  return tl;
}

}  // namespace

Json infer_grid(const Json& expanded_models) {
  // Group the models by their set of fields.
  std::map<std::string, std::vector<size_t>> groups;
  std::vector<std::map<std::string, Json>> leaves(expanded_models.size());
  for (size_t i = 0; i < expanded_models.size(); ++i) {
    flatten(expanded_models[i], "", leaves[i]);
    leaves[i].erase("name");
    std::string key;
    for (const auto& [path, v] : leaves[i]) key += path + "\n";
    groups[key].push_back(i);
  }
  Json out = {{"vars", Json::array()}, {"values", Json::object()}};
  std::set<std::string> vars;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    for (const auto& [path, v0] : leaves[members[0]]) {
      // The models of the group whose names spell this field's value; a grid variable when they
      // hold at least two different values.
      std::vector<size_t> named;
      std::set<std::string> distinct;
      for (size_t m : members) {
        const Json& v = leaves[m].at(path);
        if (v.is_object() || v.is_array()) continue;
        if (!names_value(expanded_models[m].value("name", ""), value_text(v))) continue;
        named.push_back(m);
        distinct.insert(v.dump());
      }
      if (distinct.size() < 2) continue;
      if (vars.insert(path).second) out["vars"].push_back(path);
      for (size_t m : named)
        out["values"][expanded_models[m].value("name", "")][path] = leaves[m].at(path);
    }
  }
  return out;
}

namespace {

// results.json once the run wrote it (null while live, or when it is not there or unreadable).
Json read_results(const std::string& run_dir, bool live) {
  if (live || !file_exists(run_dir + "/results.json")) return nullptr;
  try {
    Json results = Json::parse(read_file(run_dir + "/results.json"));
    if (results.is_object()) return results;
  } catch (const std::exception&) {
  }
  return nullptr;
}

// A model's row: its jobs.log record, else its results.json row (cancelled models have no
// record), else pending or running. results.json has the last word on what a search decided: a
// trial's parameters, its rungs, and whether it was pruned.
Json model_row(const std::string& name, const std::map<std::string, Json>& records,
               const std::map<std::string, Json>& final_rows,
               const std::set<std::string>& running) {
  const auto f = final_rows.find(name);
  Json m;
  if (auto it = records.find(name); it != records.end()) {
    m = it->second;
  } else if (f != final_rows.end()) {
    return f->second;
  } else {
    return {{"name", name},
            {"status", running.count(name) ? "running" : "pending"},
            {"message", ""},
            {"epochs", 0},
            {"metrics", Json::object()},
            {"best", nullptr}};
  }
  if (f != final_rows.end()) {
    for (const char* k : {"parameters", "rungs"})
      if (f->second.contains(k)) m[k] = f->second[k];
    if (f->second.value("status", "") == "pruned") {
      m["status"] = "pruned";
      m["message"] = f->second.value("message", "");
    }
  }
  return m;
}

// What plan.yaml's `search:` (the plan form: README "Search") says before results.json does:
// the search's metric, mode and scheduler.
Json search_of_plan(const PlanFile& plan) {
  if (!plan.search.is_object()) return nullptr;
  const Json& s = plan.search;
  Json out = {{"metric", s.value("metric", std::string("val_loss"))},
              {"mode", s.value("mode", std::string("auto"))},
              {"sampler", s.value("sampler", std::string("random"))}};
  if (s.contains("trials")) out["trials"] = s["trials"];
  if (s.contains("scheduler") && s["scheduler"].is_object() && !s["scheduler"].empty())
    out["scheduler"] = s["scheduler"].begin().key();
  return out;
}

// The parameters of plan.yaml's `search.space` in written order, as results.json lists them:
// {name, kind ("float", "int", "choice", "fixed"), log}.
Json parameters_of_plan(const PlanFile& plan) {
  if (!plan.search.is_object() || !plan.search.contains("space")) return nullptr;
  const Json& space = plan.search["space"];
  Json out = Json::array();
  for (const auto& name : plan.space_order) {
    const Json dist = space.value(name, Json(nullptr));
    if (!dist.is_object()) continue;
    for (const char* kind : {"uniform", "loguniform", "float", "int", "choice", "fixed"}) {
      if (!dist.contains(kind)) continue;
      const bool log = dist.value("log", false) || std::string(kind) == "loguniform";
      const bool real = std::string(kind) == "uniform" || std::string(kind) == "loguniform";
      out.push_back({{"name", name}, {"kind", real ? "float" : kind}, {"log", log}});
      break;
    }
  }
  return out;
}

// The chart keys of a listed parameter: NAME itself, and NAME_0, NAME_1, ... in index order
// when it is one value per index (`per:`), as the models record them.
std::vector<std::string> parameter_keys(const std::string& name,
                                        const std::set<std::string>& held) {
  std::vector<std::pair<size_t, std::string>> indexed;
  for (const auto& k : held) {
    if (k.size() <= name.size() + 1 || k.compare(0, name.size() + 1, name + "_") != 0) continue;
    const std::string digits = k.substr(name.size() + 1);
    if (digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    indexed.emplace_back(std::stoul(digits), k);
  }
  std::sort(indexed.begin(), indexed.end());
  std::vector<std::string> keys;
  if (held.count(name)) keys.push_back(name);
  for (const auto& [i, k] : indexed) keys.push_back(k);
  return keys;
}

// The run's recorded parameters: the listed ones (results.json's top-level `parameters`, else a
// search plan's space) in their order, else every name the models record in first-seen order.
// Returns {"vars": [...], "info": {key: {kind, log}}}, or null when nothing is recorded (an
// older run: the page then infers the grid from the model names).
Json recorded_parameters(const Json& listed, const Json& models) {
  std::set<std::string> held;
  std::vector<std::string> seen;
  for (const auto& m : models)
    if (m.contains("parameters") && m["parameters"].is_object())
      for (const auto& [k, v] : m["parameters"].items())
        if (held.insert(k).second) seen.push_back(k);
  Json out = {{"vars", Json::array()}, {"info", Json::object()}};
  if (!listed.is_array()) {
    if (seen.empty()) return nullptr;
    for (const auto& k : seen) {
      out["vars"].push_back(k);
      out["info"][k] = {{"kind", ""}, {"log", nullptr}};
    }
    return out;
  }
  for (const auto& p : listed) {
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) continue;
    const Json info = {{"kind", p.value("kind", std::string())},
                       {"log", p.contains("log") ? p["log"] : Json(nullptr)}};
    for (const auto& k : parameter_keys(p["name"].get<std::string>(), held)) {
      out["vars"].push_back(k);
      out["info"][k] = info;
    }
  }
  return out;
}

// The grid variables of the page, in each model's `grid`: recorded ones when the run has them,
// else inferred from the names. Moves each model's `parameters` into its `grid` (the page
// holds them once).
Json grid_of(const Json& listed, const Json& specs, Json& models) {
  const Json recorded = recorded_parameters(listed, models);
  if (!recorded.is_null()) {
    for (auto& m : models) {
      m["grid"] = m.contains("parameters") && m["parameters"].is_object() ? m["parameters"]
                                                                          : Json::object();
      m.erase("parameters");
    }
    return {{"vars", recorded["vars"]}, {"info", recorded["info"]}, {"source", "recorded"}};
  }
  const Json grid = infer_grid(specs);
  for (auto& m : models) m["grid"] = grid["values"].value(m.value("name", ""), Json::object());
  return {{"vars", grid["vars"]}, {"info", Json::object()}, {"source", "inferred"}};
}

// The leaderboard's metric: results.json's, else as the leaderboard picks it (results.h): test_,
// then val_, then the training figure.
std::string rank_metric(const Json& results, const std::vector<std::string>& columns,
                        const Json& models) {
  std::string rank_by = results.is_object() ? results.value("rank_by", "") : "";
  if (!rank_by.empty()) return rank_by;
  std::string base = "loss";
  for (const auto& c : columns)
    if (c != "loss" && c.rfind("val_", 0) != 0 && c != "learning_rate") {
      base = c;
      break;
    }
  rank_by = base;
  for (const auto& m : models)
    if (m["metrics"].contains("val_" + base)) rank_by = "val_" + base;
  for (const auto& m : models)
    if (m["metrics"].contains("test_" + base)) rank_by = "test_" + base;
  return rank_by;
}

// The layer tables of the page, each once: models of one architecture share theirs (2,000
// models once put 29,916 table rows in a 4.2 MB page). A summary (`nnfleet inspect`'s text) is
// split in three: its first lines name the model and its file (the page writes them again from
// the row), then the layer table up to its last rule, then notes of the file (Keras version,
// training configuration, optimizer state), which many models share too. Both kept pieces go
// into one list; a row holds their indices.
struct LayerTables {
  Json list = Json::array();
  std::map<std::string, size_t> index;

  size_t add(const std::string& text) {
    auto [it, added] = index.emplace(text, list.size());
    if (added) list.push_back(text);
    return it->second;
  }
  // Sets m["layers"] (the table) and m["notes"] (the notes, null when none) from `summary`.
  void add_summary(const std::string& summary, Json& m) {
    std::string body = summary;
    if (body.rfind("Model: ", 0) == 0) {
      const size_t first = body.find('\n');
      const size_t second = first == std::string::npos ? first : body.find('\n', first + 1);
      if (second != std::string::npos && body.compare(first + 1, 6, "File: ") == 0)
        body = body.substr(second + 1);
    }
    const size_t rule = body.rfind("\n____");
    const size_t after = rule == std::string::npos ? rule : body.find('\n', rule + 1);
    if (after == std::string::npos || after + 1 >= body.size()) {
      m["layers"] = add(body);
      m["notes"] = nullptr;
      return;
    }
    m["layers"] = add(body.substr(0, after + 1));
    m["notes"] = add(body.substr(after + 1));
  }
};

// A model's row as the page holds it: history as columns, why it stopped, its layer table (an
// and notes: indices into `tables`) and FLOPs from its saved file; the record's key orders dropped
// (the page keeps the columns' order in `columns`).
Json page_row(const std::string& run_dir, const Json& spec, Json m,
              std::vector<std::string>& columns, LayerTables& tables, ModelFileCache* cache) {
  m["planned_epochs"] = spec.value("epochs", 0);
  m["history"] = history_columns(m.value("history", Json::array()),
                                 m.value("history_order", Json::array()), columns);
  for (const char* k : {"history_order", "metric_order", "parameter_order"}) m.erase(k);
  m["stop_reason"] = stop_reason(m, spec);
  const std::string file = m.value("model_file", "");
  if (!file.empty() && file_exists(run_dir + "/" + file)) {
    const ModelFileInfo info = model_file_info(run_dir + "/" + file, cache);
    tables.add_summary(info.summary, m);
    m["flops"] = info.flops;
  } else {
    m["layers"] = nullptr;
    m["notes"] = nullptr;
    m["flops"] = nullptr;
  }
  return m;
}

// The parameter the page groups the models by: `override` (`nnfleet report --group-by`), else
// the plan's `group_by`; null when neither. An override must name a recorded parameter.
Json group_of(const std::string& override_name, const PlanFile& plan, const Json& vars) {
  if (override_name.empty()) return plan.group_by.empty() ? Json(nullptr) : Json(plan.group_by);
  for (const auto& v : vars)
    if (v == override_name) return override_name;
  std::string names;
  for (const auto& v : vars) names += (names.empty() ? "" : ", ") + v.get<std::string>();
  throw UsageError("failed to group the report by '" + override_name +
                   "': the run records no such parameter; expected one of its parameters (" +
                   (names.empty() ? "this run records none" : names) + ")");
}

}  // namespace

Json collect_report(const std::string& run_dir, bool live, ModelFileCache* cache,
                    const std::string& group_by) {
  const PlanFile plan = read_plan(run_dir);
  const Json& specs = plan.models;
  std::map<std::string, Json> records;
  for (Json& r : read_job_records(run_dir)) {
    const std::string name = r.value("name", "");  // before the move: Json assigns by value
    records[name] = std::move(r);
  }
  const Json results = read_results(run_dir, live);
  std::map<std::string, Json> final_rows;
  if (results.is_object() && results.contains("models"))
    for (const auto& m : results["models"]) final_rows[m.value("name", "")] = m;

  const Json timeline = read_timeline(run_dir, live);
  std::set<std::string> running;
  for (const auto& j : timeline["jobs"])
    if (j.value("status", "") == "running") running.insert(j.value("model", ""));

  std::vector<std::string> columns;
  LayerTables tables;
  Json models = Json::array();
  for (const auto& spec : specs)
    models.push_back(page_row(run_dir, spec,
                              model_row(spec.value("name", ""), records, final_rows, running),
                              columns, tables, cache));
  const bool has_results = results.is_object();
  const Json listed = has_results && results.contains("parameters") ? results["parameters"]
                                                                    : parameters_of_plan(plan);
  const Json grid = grid_of(listed, specs, models);
  const Json search = has_results && results.contains("search") && results["search"].is_object()
                          ? results["search"]
                          : search_of_plan(plan);

  const std::string rank_by = rank_metric(results, columns, models);
  const bool higher = rank_by.find("acc") != std::string::npos;  // as rank_key() decides
  const std::string dir_name =
      std::filesystem::path(run_dir).lexically_normal().filename().string();
  return {{"title", "nnfleet report: " + (dir_name.empty() ? run_dir : dir_name)},
          {"dir", run_dir},
          {"generated", wall_now()},
          {"live", live},
          {"rank_by", rank_by},
          {"higher_is_better", higher},
          {"columns", columns},
          {"models", models},
          {"grid_vars", grid["vars"]},
          {"grid_source", grid["source"]},
          {"param_info", grid["info"]},
          {"group_by", group_of(group_by, plan, grid["vars"])},
          {"layer_tables", tables.list},
          {"search", search},
          {"timeline", timeline}};
}

}  // namespace nnfleet
