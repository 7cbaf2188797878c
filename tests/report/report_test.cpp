// The report's data from a run folder made by hand (plan.yaml, jobs.log, timeline.jsonl,
// results.json): models with and without records, live and ended runs, grid variables (recorded
// or guessed), a search's parameters, rungs and summary, why a model stopped, the timeline's
// lanes and bars; and the page itself (self-contained, script-safe).
#include "report/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "plan/plan_yaml.h"
#include "platform/files.h"
#include "script_elements.h"

namespace nnfleet {
namespace {

struct RunDir {
  std::filesystem::path path;
  RunDir() {
    path = std::filesystem::temp_directory_path() /
           ("nnfleet_report_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~RunDir() { std::filesystem::remove_all(path); }
  std::string dir() const { return path.string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

// A jobs.log record as the run folder frames it: "<length> <XXH3> <json>\n".
std::string record(const Json& j) {
  const std::string s = j.dump();
  return std::to_string(s.size()) + " " + hex64(hash_bytes(s)) + " " + s + "\n";
}

Json result(const std::string& name, const std::string& status, int epochs, Json best) {
  Json h = Json::array();
  for (int e = 1; e <= epochs; ++e)
    h.push_back({{"epoch", e}, {"seconds", 0.1}, {"loss", 1.0 / e}, {"val_loss", 1.2 / e}});
  return {{"name", name},
          {"status", status},
          {"message", status == "diverged" ? "loss became nan at epoch 2, batch 3" : ""},
          {"epochs", epochs},
          {"params", 100},
          {"seconds", 0.5},
          {"samples_per_second", 1000.0},
          {"core", 0},
          {"metrics", {{"loss", 0.5}, {"val_loss", 0.6}}},
          {"best", best},
          {"history", h},
          {"metric_order", {"loss", "val_loss"}},
          {"history_order", {"loss", "val_loss"}}};
}

const char* kPlan = R"(seed: 1
models:
  - name: mlp-8-0.01
    epochs: 5
    early_stopping: {monitor: val_loss, patience: 2, restore_best_weights: true}
    layers:
      - Dense: {units: 8}
    optimizer: {Adam: {learning_rate: 0.01}}
  - name: mlp-16-0.01
    epochs: 5
    layers:
      - Dense: {units: 16}
    optimizer: {Adam: {learning_rate: 0.01}}
  - name: mlp-8-0.1
    epochs: 5
    layers:
      - Dense: {units: 8}
    optimizer: {Adam: {learning_rate: 0.1}}
  - name: other
    epochs: 5
    layers:
      - Dense: {units: 4}
      - Dense: {units: 2}
)";

void make_run(const RunDir& run) {
  run.write("plan.yaml", kPlan);
  run.write("jobs.log", record(result("mlp-8-0.01", "done", 3,
                                      {{"epoch", 1}, {"monitor", "val_loss"}, {"value", 1.2}})) +
                            record(result("mlp-16-0.01", "done", 5, nullptr)) +
                            record(result("mlp-8-0.1", "diverged", 2, nullptr)) +
                            "57 0123456789abcdef {\"name\": \"torn");
  run.write(
      "timeline.jsonl",
      R"({"kind":"session","session":1,"start":100,"ranks":[{"rank":0,"host":"h","cores":[4,5]}]})"
      "\n"
      R"({"kind":"start","session":1,"model":"mlp-8-0.01","rank":0,"host":"h","worker":0,"core":4,"t":100})"
      "\n"
      R"({"kind":"job","session":1,"model":"mlp-8-0.01","rank":0,"host":"h","worker":0,"core":4,"start":100,"end":101,"status":"done"})"
      "\n"
      R"({"kind":"start","session":1,"model":"other","rank":0,"host":"h","worker":1,"core":5,"t":100.5})"
      "\n"
      R"({"kind":"help","session":1,"model":"mlp-8-0.01","rank":0,"host":"h","worker":1,"core":5,"start":100.2,"end":100.4,"pieces":3})"
      "\n");
}

const Json& model(const Json& d, const std::string& name) {
  for (const auto& m : d["models"])
    if (m["name"] == name) return m;
  throw std::runtime_error("no model " + name);
}

TEST(Report, LiveRunShowsRecordedModelsAndRunningOnes) {
  RunDir run;
  make_run(run);
  const Json d = collect_report(run.dir(), true);
  ASSERT_EQ(d["models"].size(), 4u);  // every model of the plan, in plan order
  EXPECT_EQ(d["models"][0]["name"], "mlp-8-0.01");
  EXPECT_EQ(model(d, "mlp-16-0.01")["status"], "done");
  EXPECT_EQ(model(d, "other")["status"], "running");  // started, no record yet
  EXPECT_EQ(model(d, "mlp-8-0.1")["stop_reason"], "diverged: loss became nan at epoch 2, batch 3");
  EXPECT_EQ(model(d, "mlp-16-0.01")["stop_reason"], "ran all 5 epoch(s)");
  EXPECT_EQ(model(d, "mlp-8-0.01")["stop_reason"],
            "early stopping after epoch 3 of 5: val_loss did not improve for 2 epoch(s); best "
            "epoch 1, whose weights were kept");
  const Json& h = model(d, "mlp-16-0.01")["history"];
  EXPECT_EQ(h["epoch"], Json({1, 2, 3, 4, 5}));
  EXPECT_DOUBLE_EQ(h["val_loss"][1].get<double>(), 0.6);
  EXPECT_EQ(d["columns"], Json({"loss", "val_loss"}));
  EXPECT_EQ(d["rank_by"], "val_loss");
  EXPECT_FALSE(d["higher_is_better"].get<bool>());
  EXPECT_TRUE(d["live"].get<bool>());
}

TEST(Report, TimelineHasALanePerWorkerAndBarsForJobsAndHelp) {
  RunDir run;
  make_run(run);
  const Json t = collect_report(run.dir(), true)["timeline"];
  ASSERT_EQ(t["lanes"].size(), 2u);
  EXPECT_EQ(t["lanes"][0]["core"], 4);
  EXPECT_EQ(t["lanes"][1]["core"], 5);
  ASSERT_EQ(t["jobs"].size(), 2u);
  EXPECT_EQ(t["jobs"][0]["model"], "mlp-8-0.01");
  EXPECT_EQ(t["jobs"][1]["model"], "other");
  EXPECT_EQ(t["jobs"][1]["status"], "running");
  EXPECT_EQ(t["jobs"][1]["lane"], 1);
  ASSERT_EQ(t["help"].size(), 1u);
  EXPECT_EQ(t["help"][0]["pieces"], 3);
  EXPECT_EQ(t["help"][0]["lane"], 1);
  // The run ended without the job's end: not running, cut off where the session's last line was.
  const Json ended = collect_report(run.dir(), false)["timeline"];
  EXPECT_EQ(ended["jobs"][1]["status"], "interrupted");
  EXPECT_DOUBLE_EQ(ended["jobs"][1]["end"].get<double>(), 101.0);
  EXPECT_EQ(collect_report(run.dir(), false)["models"][3]["status"], "pending");
}

TEST(Report, GridVariablesAreTheFieldsNamedInTheModelNames) {
  const Json plan = Json::parse(R"([
    {"name": "mlp-8-0.01", "epochs": 5, "layers": [{"Dense": {"units": 8}}], "optimizer": {"Adam": {"learning_rate": 0.01}}},
    {"name": "mlp-16-0.01", "epochs": 5, "layers": [{"Dense": {"units": 16}}], "optimizer": {"Adam": {"learning_rate": 0.01}}},
    {"name": "mlp-8-0.1", "epochs": 5, "layers": [{"Dense": {"units": 8}}], "optimizer": {"Adam": {"learning_rate": 0.1}}},
    {"name": "m1", "epochs": 1, "layers": [{"Dense": {"units": 32}}], "optimizer": {"Adam": {"learning_rate": 0.01}}},
    {"name": "m2", "epochs": 1, "layers": [{"Dense": {"units": 128}}], "optimizer": {"Adam": {"learning_rate": 0.01}}}
  ])");
  const Json g = infer_grid(plan);
  EXPECT_EQ(g["vars"], Json({"layers[0].Dense.units", "optimizer.Adam.learning_rate"}));
  EXPECT_EQ(g["values"]["mlp-16-0.01"]["layers[0].Dense.units"], 16);
  EXPECT_DOUBLE_EQ(g["values"]["mlp-8-0.1"]["optimizer.Adam.learning_rate"].get<double>(), 0.1);
  // m1 and m2 differ in units too, but their names do not say so: not a grid.
  EXPECT_FALSE(g["values"].contains("m1"));
}

TEST(Report, GridVariablesMayFollowALabelInTheNames) {
  // The example fleet's grid, named `mlp-{units}-lr{lr}`; a one-digit value after a letter (the
  // 1 of m1) still names nothing.
  const Json plan = Json::parse(R"([
    {"name": "mlp-64-lr0.001", "layers": [{"Dense": {"units": 64}}], "optimizer": {"Adam": {"learning_rate": 0.001}}},
    {"name": "mlp-64-lr0.003", "layers": [{"Dense": {"units": 64}}], "optimizer": {"Adam": {"learning_rate": 0.003}}},
    {"name": "mlp-256-lr0.001", "layers": [{"Dense": {"units": 256}}], "optimizer": {"Adam": {"learning_rate": 0.001}}},
    {"name": "m1", "layers": [{"Conv1D": {"kernel_size": 1}}]},
    {"name": "m2", "layers": [{"Conv1D": {"kernel_size": 2}}]}
  ])");
  const Json g = infer_grid(plan);
  EXPECT_EQ(g["vars"], Json({"layers[0].Dense.units", "optimizer.Adam.learning_rate"}));
  EXPECT_DOUBLE_EQ(g["values"]["mlp-64-lr0.003"]["optimizer.Adam.learning_rate"].get<double>(),
                   0.003);
  EXPECT_EQ(g["values"]["mlp-256-lr0.001"]["layers[0].Dense.units"], 256);
  EXPECT_FALSE(g["values"].contains("m1"));
}

// A search run as the design writes it (notes: results.json's `parameters`, `rungs`, `search`,
// status "pruned"): six trials of successive halving over rungs 1, 3, 9 with a conditional
// `width` per `depth`; trials 0 and 3 finished, the others pruned. jobs.log holds records of
// some trials (as the fleet writes them, without parameters); results.json has the last word.
const char* kSearchPlan = R"(seed: 7
search:
  trials: 6
  space:
    family: {choice: [mlp, cnn]}
    depth: {int: [1, 2], when: {family: mlp}}
    width: {int: [32, 512], log: true, per: depth, when: {family: mlp}}
    lr: {loguniform: [1.0e-4, 1.0e-2]}
    batch_size: {choice: [32, 64]}
  scheduler:
    successive_halving: {reduction_factor: 3, min_epochs: 1, max_epochs: 9}
  metric: val_accuracy
  mode: max
models:
)";

Json search_trial(int k) {
  const bool mlp = k % 2 == 0;
  Json p = {
      {"family", mlp ? "mlp" : "cnn"}, {"lr", 0.0001 * (k + 1)}, {"batch_size", k < 3 ? 32 : 64}};
  if (mlp) {
    p["depth"] = k == 0 ? 2 : 1;
    p["width_0"] = 32 << k;
    if (k == 0) p["width_1"] = 64;
  }
  Json rungs = {{{"epochs", 1}, {"value", 0.5 + 0.01 * k}, {"decision", "promoted"}}};
  const bool done = k == 0 || k == 3;
  if (done) {
    rungs[0]["decision"] = "promoted";
    rungs.push_back({{"epochs", 3}, {"value", 0.7 + 0.01 * k}, {"decision", "promoted"}});
    rungs.push_back({{"epochs", 9}, {"value", 0.8 + 0.01 * k}, {"decision", "final"}});
  } else {
    rungs[0]["decision"] = "pruned";
  }
  Json m = result("trial-" + std::to_string(k), done ? "done" : "pruned", done ? 9 : 1, nullptr);
  m["metrics"] = {{"val_accuracy", rungs.back()["value"]}};
  for (const char* key : {"history", "metric_order", "history_order"}) m.erase(key);
  m["parameters"] = p;
  m["rungs"] = rungs;
  return m;
}

void make_search_run(const RunDir& run, bool with_results) {
  std::string plan = kSearchPlan, log;
  Json models = Json::array();
  for (int k = 0; k < 6; ++k) {
    plan += "  - name: trial-" + std::to_string(k) + "\n    epochs: 9\n    layers:\n" +
            "      - Dense: {units: 10}\n";
    models.push_back(search_trial(k));
    if (k < 4) {  // the fleet's record: status and figures, without parameters and rungs
      Json r = result("trial-" + std::to_string(k), k == 0 || k == 3 ? "done" : "pruned",
                      k == 0 || k == 3 ? 9 : 1, nullptr);
      if (!with_results) r["parameters"] = models.back()["parameters"];
      log += record(r);
    }
  }
  run.write("plan.yaml", plan);
  run.write("jobs.log", log);
  if (!with_results) return;
  const Json results = {{"plan", "search.yaml"},
                        {"rank_by", "val_accuracy"},
                        {"parameters",
                         {{{"name", "family"}, {"kind", "choice"}, {"log", false}},
                          {{"name", "depth"}, {"kind", "int"}, {"log", false}},
                          {{"name", "width"}, {"kind", "int"}, {"log", true}},
                          {{"name", "lr"}, {"kind", "float"}, {"log", true}},
                          {{"name", "batch_size"}, {"kind", "choice"}, {"log", false}}}},
                        {"search",
                         {{"metric", "val_accuracy"},
                          {"mode", "max"},
                          {"scheduler", "successive_halving"},
                          {"reduction_factor", 3},
                          {"rungs", {1, 3, 9}},
                          {"trials", 6},
                          {"epochs_trained", 28},
                          {"sampler", "random"}}},
                        {"models", models}};
  run.write("results.json", results.dump(2));
}

TEST(Report, SearchRunHasItsParametersRungsAndSearch) {
  RunDir run;
  make_search_run(run, true);
  const Json d = collect_report(run.dir(), false);
  EXPECT_EQ(d["grid_source"], "recorded");
  // The listed order; `width` is one value per index of `depth`: width_0, width_1.
  EXPECT_EQ(d["grid_vars"], Json({"family", "depth", "width_0", "width_1", "lr", "batch_size"}));
  EXPECT_EQ(d["param_info"]["width_1"], Json({{"kind", "int"}, {"log", true}}));
  EXPECT_EQ(d["param_info"]["lr"], Json({{"kind", "float"}, {"log", true}}));
  EXPECT_EQ(d["param_info"]["batch_size"]["kind"], "choice");
  EXPECT_EQ(d["search"]["metric"], "val_accuracy");
  EXPECT_EQ(d["search"]["rungs"], Json({1, 3, 9}));
  const Json& t0 = model(d, "trial-0");
  EXPECT_EQ(t0["status"], "done");
  EXPECT_EQ(t0["grid"]["width_1"], 64);
  EXPECT_EQ(t0["grid"]["family"], "mlp");
  EXPECT_FALSE(t0.contains("parameters"));  // held once, as `grid`
  ASSERT_EQ(t0["rungs"].size(), 3u);
  EXPECT_EQ(t0["rungs"][2]["decision"], "final");
  // A record and results.json's row (which alone has its rungs), and a row without a record.
  for (const char* name : {"trial-1", "trial-5"}) {
    const Json& t = model(d, name);
    EXPECT_EQ(t["status"], "pruned") << name;
    EXPECT_EQ(t["rungs"][0]["decision"], "pruned") << name;
    EXPECT_FALSE(t["grid"].contains("depth")) << name;  // a cnn: no mlp parameters
    EXPECT_EQ(t["grid"]["batch_size"], name == std::string("trial-1") ? 32 : 64) << name;
  }
  // The page holds the same data whole, and the script that draws the search's view.
  const std::string html = report_html(d);
  const auto scripts = test_html::script_elements(html);
  ASSERT_EQ(scripts.size(), 3u);
  const Json page = Json::parse(scripts[0].text);
  EXPECT_TRUE(page["models"].is_object());  // packed as rows (page_data)
  const Json back = data_of_page(page);
  EXPECT_EQ(back["search"], d["search"]);
  EXPECT_EQ(back["param_info"], d["param_info"]);
  EXPECT_EQ(model(back, "trial-3")["rungs"], model(d, "trial-3")["rungs"]);
  for (const char* part : {"search-budget", "param-chart", "pruned@", "trialSort"})
    EXPECT_NE(scripts[2].text.find(part), std::string::npos) << part;
}

TEST(Report, LiveSearchTakesItsSpaceFromThePlanAndValuesFromTheRecords) {
  RunDir run;
  make_search_run(run, false);
  const Json d = collect_report(run.dir(), true);
  EXPECT_EQ(d["search"]["metric"], "val_accuracy");
  EXPECT_EQ(d["search"]["mode"], "max");
  EXPECT_EQ(d["search"]["scheduler"], "successive_halving");
  EXPECT_EQ(d["grid_vars"], Json({"family", "depth", "width_0", "width_1", "lr", "batch_size"}));
  EXPECT_EQ(d["param_info"]["lr"], Json({{"kind", "float"}, {"log", true}}));  // loguniform
  EXPECT_EQ(d["param_info"]["width_0"], Json({{"kind", "int"}, {"log", true}}));
  EXPECT_EQ(d["param_info"]["depth"], Json({{"kind", "int"}, {"log", false}}));
  EXPECT_EQ(model(d, "trial-2")["grid"]["width_0"], 128);
  EXPECT_EQ(model(d, "trial-5")["status"], "pending");
  EXPECT_EQ(model(d, "trial-5")["grid"], Json::object());
}

// A grid whose models are named without their values (a-0, a-1, ...): the run's recorded
// parameters are its variables; the names alone would give none.
TEST(Report, GridRunUsesItsRecordedParameters) {
  RunDir run;
  std::string plan = "models:\n", log;
  Json rows = Json::array();
  const int units[] = {8, 16, 8, 16};
  const double lrs[] = {0.001, 0.001, 0.1, 0.1};
  for (int k = 0; k < 4; ++k) {
    const std::string name = "a-" + std::to_string(k);
    plan += "  - name: " + name +
            "\n    layers:\n      - Dense: {units: " + std::to_string(units[k]) +
            "}\n    optimizer: {Adam: {learning_rate: " + plan_detail::number_text(lrs[k]) + "}}\n";
    Json r = result(name, "done", 2, nullptr);
    log += record(r);
    for (const char* key : {"history", "metric_order", "history_order"}) r.erase(key);
    r["parameters"] = {{"units", units[k]}, {"lr", lrs[k]}};
    rows.push_back(r);
  }
  run.write("plan.yaml", plan);
  run.write("jobs.log", log);
  EXPECT_EQ(collect_report(run.dir(), false)["grid_vars"], Json::array());  // no results yet
  run.write("results.json",
            Json({{"rank_by", "val_loss"},
                  {"parameters",
                   {{{"name", "units"}, {"kind", "grid"}}, {{"name", "lr"}, {"kind", "grid"}}}},
                  {"models", rows}})
                .dump());
  const Json d = collect_report(run.dir(), false);
  EXPECT_EQ(d["grid_source"], "recorded");
  EXPECT_EQ(d["grid_vars"], Json({"units", "lr"}));
  EXPECT_EQ(d["param_info"]["lr"], Json({{"kind", "grid"}, {"log", nullptr}}));
  EXPECT_EQ(model(d, "a-2")["grid"], Json({{"units", 8}, {"lr", 0.1}}));
  EXPECT_TRUE(d["search"].is_null());
  EXPECT_NE(report_html(d).find("\"grid_vars\":[\"units\",\"lr\"]"), std::string::npos);
}

// A large fleet's plan.yaml in its grid form (plan_to_yaml): entries with `grid:`, which the
// report expands as the plan loader does; each model's row has its layers and its record.
TEST(Report, GridFormPlanIsExpandedIntoItsModels) {
  RunDir run;
  run.write("plan.yaml", R"(seed: 1
data: {train: {x: x.npy, y: y.npy}}
models:
  - name: g-{u}-{lr}
    grid:
      u: [8, 4]
      lr: [0.1, 0.01]
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers:
      - Dense: {units: "{u}"}
  - name: other
    layers:
      - Dense: {units: 2}
)");
  run.write("jobs.log", record(result("g-4-0.1", "done", 2, nullptr)));
  const Json d = collect_report(run.dir(), false);
  std::vector<std::string> names;
  for (const Json& m : d["models"]) names.push_back(m["name"].get<std::string>());
  EXPECT_EQ(names,
            (std::vector<std::string>{"g-8-0.1", "g-8-0.01", "g-4-0.1", "g-4-0.01", "other"}));
  EXPECT_EQ(model(d, "g-4-0.1")["status"], "done");
  EXPECT_EQ(model(d, "g-8-0.01")["status"], "pending");
  // A grid-form plan.yaml that no longer loads names the file and the plan's problem.
  run.write("plan.yaml",
            "data: {train: {x: x.npy, y: y.npy}}\nmodels:\n  - name: g-{u}\n    grid: {u: [1]}\n   "
            " layers: [{Nope: {}}]\n");
  try {
    collect_report(run.dir(), false);
    ADD_FAILURE() << "expected a FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("plan.yaml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Nope"), std::string::npos) << e.what();
  }
}

// A W4-like run: a grid variable k (the series) over lstm-{k} and gru-{k}, grouped by k as the
// plan's copy in the run folder says, or as `report --group-by` says instead; a name the run does
// not record is refused with the names it does. Curve points keep 6 significant digits.
TEST(Report, GroupByComesFromThePlanOrTheOverrideAndMustBeRecorded) {
  RunDir run;
  std::string plan = "group_by: k\nmodels:\n", log;
  Json rows = Json::array();
  for (int k = 1; k <= 2; ++k)
    for (const char* arch : {"lstm", "gru"}) {
      const std::string name = std::string(arch) + "-" + std::to_string(k);
      plan += "  - name: " + name + "\n    layers:\n      - Dense: {units: 2}\n";
      Json r = result(name, "done", 3, nullptr);
      log += record(r);
      for (const char* key : {"history", "metric_order", "history_order"}) r.erase(key);
      r["parameters"] = {{"k", k}};
      rows.push_back(r);
    }
  run.write("plan.yaml", plan);
  run.write("jobs.log", log);
  run.write("results.json", Json({{"rank_by", "val_loss"},
                                  {"parameters", {{{"name", "k"}, {"kind", "grid"}}}},
                                  {"models", rows}})
                                .dump());
  const Json d = collect_report(run.dir(), false);
  EXPECT_EQ(d["group_by"], "k");
  EXPECT_EQ(model(d, "gru-2")["grid"]["k"], 2);
  EXPECT_DOUBLE_EQ(model(d, "gru-2")["history"]["loss"][2].get<double>(), 0.333333);
  EXPECT_TRUE(model(d, "gru-2")["layers"].is_null());  // no saved model file
  EXPECT_EQ(d["layer_tables"], Json::array());
  EXPECT_EQ(collect_report(run.dir(), false, nullptr, "k")["group_by"], "k");
  try {
    collect_report(run.dir(), false, nullptr, "series");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "failed to group the report by 'series': the run records no such parameter; "
              "expected one of its parameters (k)");
  }
  run.write("plan.yaml", plan.substr(plan.find('\n') + 1));  // a plan without group_by
  EXPECT_TRUE(collect_report(run.dir(), false)["group_by"].is_null());
}

// The page's models as rows of one key list, their history, metrics and grid too: a model that
// lacks a key (or holds null, or a non-object history) reads back exactly as it was.
TEST(Report, PageDataPacksModelsAsRowsAndReadsBackExactly) {
  const Json d = {{"title", "t"},
                  {"models",
                   {{{"name", "a"},
                     {"history", {{"epoch", {1, 2}}, {"loss", {0.5, 0.25}}}},
                     {"grid", {{"k", 1}}},
                     {"metrics", {{"loss", 0.25}}},
                     {"layers", 0}},
                    {{"name", "b"},
                     {"history", {{"epoch", Json::array()}}},
                     {"grid", Json::object()},
                     {"metrics", nullptr},
                     {"layers", nullptr},
                     {"rungs", {{{"epochs", 1}}}}},
                    {{"name", "c"}}}}};
  const Json page = page_data(d);
  EXPECT_EQ(page["models"]["keys"],
            Json({"grid", "history", "layers", "metrics", "name", "rungs"}));
  EXPECT_EQ(page["models"]["nested"]["history"], Json({"epoch", "loss"}));
  EXPECT_EQ(page["models"]["rows"][0],
            Json({{1}, {{1, 2}, {0.5, 0.25}}, 0, {0.25}, "a", nullptr, {{"absent", {5}}}}));
  EXPECT_EQ(data_of_page(page).dump(), d.dump());
  EXPECT_EQ(data_of_page(page_data(Json({{"models", Json::array()}}))),
            Json({{"models", Json::array()}}));
}

TEST(Report, OldRunWithoutRecordedParametersKeepsTheGuess) {
  RunDir run;
  make_run(run);
  run.write("results.json", R"({"rank_by": "val_loss", "models": []})");
  const Json d = collect_report(run.dir(), false);
  EXPECT_EQ(d["grid_source"], "inferred");
  EXPECT_EQ(d["grid_vars"], Json({"layers[0].Dense.units", "optimizer.Adam.learning_rate"}));
  EXPECT_EQ(model(d, "mlp-16-0.01")["grid"]["layers[0].Dense.units"], 16);
  EXPECT_TRUE(d["search"].is_null());
}

TEST(Report, PageIsSelfContainedAndItsDataCannotEndTheScript) {
  RunDir run;
  make_run(run);
  Json d = collect_report(run.dir(), false);
  d["models"][2]["message"] = "bad </script><script>alert(1)</script>";
  const std::string html = report_html(d);
  EXPECT_EQ(html.find("</script><script>alert"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
  EXPECT_NE(html.find("uPlot"), std::string::npos);  // the library is inlined
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("http-equiv=\"refresh\""), std::string::npos);  // ended: no reload
  d["live"] = true;
  EXPECT_NE(report_html(d).find("http-equiv=\"refresh\""), std::string::npos);
}

// The page of a run in `dir` whose models bear `names` (and messages quoting them) must hold its
// three script elements as an HTML parser splits them, the data first and whole, and its JSON
// must read back the same.
void expect_intact_page(const std::filesystem::path& dir, const std::vector<std::string>& names) {
  std::filesystem::create_directories(dir);
  std::string plan = "models:\n";
  std::string log;
  for (const auto& n : names) {
    plan += "  - name: " + Json(n).dump() + "\n    layers:\n      - Dense: {units: 2}\n";
    Json r = result(n, "failed", 1, nullptr);
    r["message"] = "stopped at " + n;
    log += record(r);
  }
  std::ofstream(dir / "plan.yaml") << plan;
  std::ofstream(dir / "jobs.log") << log;
  const Json d = collect_report(dir.string(), false);
  const std::string html = report_html(d);

  const auto scripts = test_html::script_elements(html);
  ASSERT_EQ(scripts.size(), 3u);  // the data, uPlot, the page's script
  int data_elements = 0;
  for (const auto& s : scripts) {
    EXPECT_TRUE(s.closed);
    if (s.start_tag.find("id=\"report-data\"") != std::string::npos) ++data_elements;
  }
  ASSERT_EQ(data_elements, 1);
  EXPECT_EQ(scripts[0].start_tag, "<script type=\"application/json\" id=\"report-data\">");
  EXPECT_EQ(scripts[0].text.find('<'), std::string::npos);
  EXPECT_NE(scripts[1].text.find("uPlot"), std::string::npos);
  EXPECT_EQ(html.substr(html.size() - 16), "</body>\n</html>\n");

  const Json back = data_of_page(Json::parse(scripts[0].text));
  EXPECT_EQ(back.dump(), d.dump());
  EXPECT_EQ(back["dir"], dir.string());
  for (const auto& n : names) {
    EXPECT_EQ(model(back, n)["name"], n);
    EXPECT_EQ(model(back, n)["message"], "stopped at " + n);
  }
}

// Names that change how the HTML parser reads a script element: "<!--<script>" alone put the
// data element into the double-escaped state, where its own "</script>" no longer ended it and
// the page's scripts became part of its text (an empty page). The run folder's path, shown in
// the title and the data, holds them too.
TEST(Report, NamesThatSpeakHtmlLeaveOneIntactDataElementAndRoundTrip) {
  RunDir run;
  expect_intact_page(run.path / "<!--<script>", {"<!--<script>", "m2"});
  expect_intact_page(run.path / "<!--<script>" / "x<" / "script>--> & \u2028",
                     {"<!--<script>", "</script>", "<!--", "-->", "<script>",
                      "a\u2028b\u2029&amp;c", "</SCRIPT "});
}

TEST(Report, WritesReportHtmlAtomicallyAndRefusesAFolderThatIsNoRun) {
  RunDir run;
  make_run(run);
  const std::string path = write_report(run.dir(), false);
  EXPECT_EQ(path, run.dir() + "/report.html");
  EXPECT_NE(read_file(path).find("mlp-16-0.01"), std::string::npos);
  for (const auto& e : std::filesystem::directory_iterator(run.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos);
  RunDir empty;
  try {
    write_report(empty.dir(), false);
    FAIL() << "expected FileError";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("plan.yaml"), std::string::npos) << e.what();
  }
}

TEST(Report, LiveReportWritesWhileRunningAndOnceMoreAtTheEnd) {
  RunDir run;
  make_run(run);
  LiveReport live(0.05);
  live.start(run.dir());
  // Waits for the first write; the bound only keeps a regression from hanging the suite.
  const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!file_exists(run.dir() + "/report.html") && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(file_exists(run.dir() + "/report.html"));
  EXPECT_NE(read_file(run.dir() + "/report.html").find("http-equiv=\"refresh\""),
            std::string::npos);
  EXPECT_EQ(live.finish(), run.dir() + "/report.html");
  EXPECT_EQ(read_file(run.dir() + "/report.html").find("http-equiv=\"refresh\""),
            std::string::npos);
}

}  // namespace
}  // namespace nnfleet
