// save: all | best N | none (README "What you get"): which model files a run keeps. The best N
// by the leaderboard's key (ties in plan order) keep their files, whatever the number of workers
// and after a stop and --resume; every model keeps its record and results; the policy's text is
// refused by name when it is not one. No timing is asserted: only files and bounded counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "fleet/fleet.h"
#include "fleet/results.h"
#include "fleet_test_util.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

using ::testing::HasSubstr;

// 48 tiny models, 2 epochs (a stop can land mid-run); `r` repeats each configuration, so equal
// results (ties) are likely.
std::string tiny_grid(const std::string& save = "") {
  return "seed: 3\n" + save +
         R"(data:
  train: {x: train_x.npy, y: train_y.npy}
  test: {x: test_x.npy, y: test_y.npy}
defaults:
  epochs: 2
  batch_size: 64
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
models:
  - name: t-{u}-{lr}-{r}
    grid: {u: [1, 2, 4], lr: [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 0.0001], r: [0, 1]}
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers:
      - Flatten: {}
      - Dense: {units: "{u}", activation: relu}
      - Dense: {units: 3, activation: softmax}
)";
}

class SavePolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing_util::write_blobs(dir.path, "train", 300, 1);
    testing_util::write_blobs(dir.path, "test", 90, 2);
    plan_path = dir.path + "/plan.yaml";
    testing_util::write_text(plan_path, tiny_grid());
  }
  FleetSummary run(const std::string& out, const std::string& save, int workers = 2,
                   bool resume = false, const std::atomic<bool>* stop = nullptr,
                   const ModelIo& io = testing_util::raw_io(Durability::kProcessCrash)) {
    Plan p = load_plan(plan_path);
    std::string why;
    if (!save.empty()) p.save = *parse_save_policy(save, why);
    FleetOptions o;
    o.out_dir = out;
    o.workers = workers;
    o.resume = resume;
    o.stop = stop;
    o.mode = Display::Mode::kQuiet;
    return run_fleet(p, o, io);
  }
  // The model files in <out>/models.
  static std::set<std::string> files(const std::string& out) {
    std::set<std::string> f;
    for (const auto& e : std::filesystem::directory_iterator(out + "/models"))
      f.insert(e.path().filename().string());
    return f;
  }
  // The files the best n models have, from results.json: rank key, then plan order.
  static std::set<std::string> best_files(const std::string& out, size_t n) {
    const Json r = Json::parse(read_file(out + "/results.json"));
    const std::string key = r["rank_by"].get<std::string>();
    std::vector<std::pair<double, size_t>> v;
    const Json& ms = r["models"];
    for (size_t i = 0; i < ms.size(); ++i) v.emplace_back(-ms[i]["metrics"][key].get<double>(), i);
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::set<std::string> f;
    for (size_t i = 0; i < n && i < v.size(); ++i)
      f.insert(ms[v[i].second]["name"].get<std::string>() + ".bin");
    return f;
  }
  static size_t entries(const std::string& d) {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(d),
                                             std::filesystem::directory_iterator()));
  }
  testing_util::TempDir dir;
  std::string plan_path;
};

TEST_F(SavePolicyTest, KeepsEveryFileTheBestNOrNoneWithTheSameResults) {
  const std::string all = dir.path + "/all", best = dir.path + "/best", none = dir.path + "/none";
  const FleetSummary a = run(all, "all");
  EXPECT_EQ(files(all).size(), 48u);
  const FleetSummary b = run(best, "best 5");
  EXPECT_EQ(files(best), best_files(all, 5));
  run(none, "none");
  EXPECT_EQ(entries(none + "/models"), 0u);
  for (const std::string& o : {best, none}) {
    SCOPED_TRACE(o);
    EXPECT_EQ(testing_util::comparable(o), testing_util::comparable(all));
    EXPECT_EQ(testing_util::recorded_models(o).size(), 48u);  // every model's record is kept
    EXPECT_EQ(entries(o + "/checkpoints"), 0u);               // finished models leave none
  }
  // The results name a file only where one is kept.
  size_t named = 0;
  for (const ModelResult& r : b.results) {
    if (r.model_file.empty()) continue;
    ++named;
    EXPECT_TRUE(file_exists(r.model_file)) << r.model_file;
  }
  EXPECT_EQ(named, 5u);
  // The best model's file is the same bytes under every policy that keeps it.
  const std::string top = *best_files(all, 1).begin();
  EXPECT_EQ(read_file(best + "/models/" + top), read_file(all + "/models/" + top));
}

// A model that N finished ones already rank before can never be among the final N: it is not
// written at all. With one worker the models finish one by one (in the queue's order, seen by an
// observer), so exactly those that enter the running top N (ties: plan order) are written.
TEST_F(SavePolicyTest, BestNWritesOnlyTheModelsThatEnterTheRunningTopN) {
  struct Order : JobObserver {
    std::vector<std::string> names;
    void on_batch(const ModelSpec&, int, int, int, double, double, double) override {}
    void on_epoch(const ModelSpec&, const EpochRecord&) override {}
    void on_model_end(const api::ModelResult& r) override { names.push_back(r.name); }
  } order;
  std::vector<std::string> written;
  ModelIo io = testing_util::raw_io(Durability::kProcessCrash);
  io.save = [&written, inner = io.save](Network& net, const ModelSpec& s, const std::string& p) {
    written.push_back(s.name);  // one worker: no other thread saves
    return inner(net, s, p);
  };
  Plan p = load_plan(plan_path);
  std::string why;
  p.save = *parse_save_policy("best 5", why);
  FleetOptions o;
  o.out_dir = dir.path + "/best";
  o.workers = 1;
  o.observer = &order;
  o.mode = Display::Mode::kQuiet;
  run_fleet(p, o, io);
  // The rank key's value and plan index of each model, from results.json (plan order).
  const Json r = Json::parse(read_file(o.out_dir + "/results.json"));
  const std::string key = r["rank_by"].get<std::string>();
  std::map<std::string, std::pair<double, size_t>> at;
  for (size_t i = 0; i < r["models"].size(); ++i)
    at[r["models"][i]["name"].get<std::string>()] = {r["models"][i]["metrics"][key].get<double>(),
                                                     i};
  ASSERT_EQ(order.names.size(), 48u);
  std::vector<std::string> expected;
  for (size_t k = 0; k < order.names.size(); ++k) {
    const auto [v, i] = at.at(order.names[k]);
    size_t before = 0;
    for (size_t j = 0; j < k; ++j) {
      const auto [w, h] = at.at(order.names[j]);
      before += w > v || (w == v && h < i);
    }
    if (before < 5) expected.push_back(order.names[k]);
  }
  EXPECT_EQ(written, expected);
  EXPECT_LT(written.size(), 48u);  // the skip happened: fewer files than models
  EXPECT_EQ(files(o.out_dir), best_files(o.out_dir, 5));
}

TEST_F(SavePolicyTest, OneAndTwoWorkersKeepTheSameFiles) {
  const std::string one = dir.path + "/one", two = dir.path + "/two";
  run(one, "best 7", 1);
  run(two, "best 7", 2);
  EXPECT_EQ(files(one), files(two));
  EXPECT_EQ(files(one), best_files(one, 7));
  EXPECT_EQ(testing_util::comparable(one), testing_util::comparable(two));
}

// A stop mid-run (held at an epoch end, platform/test_hold.h), then --resume: finished models
// are not trained again (their files may already be gone), and the folder ends as an
// uninterrupted run's.
TEST_F(SavePolicyTest, ResumeAfterAStopEndsWithTheSameFiles) {
  const std::string full = dir.path + "/full";
  run(full, "best 4");
  for (int nth : {5, 30}) {
    SCOPED_TRACE(nth);
    const std::string out = dir.path + "/stopped" + std::to_string(nth);
    FleetSummary first;
    {
      testing_util::StopAtEpochEnd stopper(dir.path + "/hold" + std::to_string(nth), nth);
      first = run(out, "best 4", 2, false, &stopper.stop);
    }
    EXPECT_TRUE(first.interrupted);
    const std::set<std::string> done = testing_util::recorded_models(out);
    const FleetSummary resumed = run(out, "best 4", 2, true);
    for (const ModelResult& r : resumed.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
    EXPECT_EQ(files(out), files(full));
    EXPECT_EQ(testing_util::comparable(out), testing_util::comparable(full));
    // One record per model: those finished before the stop were not trained again.
    EXPECT_EQ(testing_util::recorded_models(out).size(), 48u);
    const std::string log = read_file(out + "/jobs.log");
    EXPECT_EQ(static_cast<size_t>(std::count(log.begin(), log.end(), '\n')), 48u);
    EXPECT_FALSE(done.empty());
  }
}

TEST_F(SavePolicyTest, APolicyThatIsNotOneIsRefusedByName) {
  for (const char* bad : {"best 0", "some", "best", "best -3", "best 2x"}) {
    SCOPED_TRACE(bad);
    testing_util::write_text(plan_path, tiny_grid(std::string("save: ") + bad + "\n"));
    try {
      load_plan(plan_path);
      ADD_FAILURE() << "accepted";
    } catch (const PlanError& e) {
      EXPECT_THAT(e.what(), HasSubstr("save"));
      EXPECT_THAT(e.what(), HasSubstr("expected all, best N (N >= 1) or none"));
    }
  }
  std::string why;
  EXPECT_FALSE(parse_save_policy("best 0", why));
  EXPECT_THAT(why, HasSubstr("use none"));
  testing_util::write_text(plan_path, tiny_grid("save: best 3\n"));
  const Plan p = load_plan(plan_path);
  EXPECT_EQ(p.save.text(), "best 3");
  EXPECT_THAT(plan_to_yaml(p), HasSubstr("save: best 3"));
}

TEST(SavePolicy, TheDefaultIsAllUpToTenThousandModelsAndTheBest100Above) {
  const SavePolicy d;
  EXPECT_EQ(d.resolved(10000).text(), "all");
  EXPECT_EQ(d.resolved(10001).text(), "best 100");
  const SavePolicy none{SavePolicy::Kind::kNone, 0};
  EXPECT_EQ(none.resolved(20000).text(), "none");
}

// The fields a record keeps, as text (NaN spelt out): two results read back alike.
std::string fields_of(const JobResult& r) {
  auto f = [](double v) { return api::figure_text(v); };
  std::string s = r.name + "|" + api::status_name(r.status) + "|" + r.message + "|" +
                  std::to_string(r.epochs) + "|" + std::to_string(r.params) + "|" + f(r.seconds) +
                  "|" + f(r.samples_per_second) + "|" + std::to_string(r.core) + "|";
  for (const auto& [k, v] : r.metrics)
    s += k + "=" + Json(v).dump() + (std::isnan(v) ? "nan" : "") + ",";
  s += "|";
  for (const auto& [k, v] : r.last_metrics) s += k + "=" + Json(v).dump() + ",";
  s += "|" + std::to_string(r.best.epoch) + r.best.monitor + f(r.best.value) + "|";
  for (const auto& e : r.history) {
    s += std::to_string(e.epoch) + "@" + f(e.seconds) + ":";
    for (const auto& [k, v] : e.values) s += k + "=" + f(v) + ",";
  }
  for (const auto& [k, v] : r.parameters) s += "|" + k + "=" + v;
  return s + "|" + std::to_string(r.retry) + std::to_string(r.write_failed) +
         std::to_string(r.paused);
}

JobResult record_example() {
  JobResult r;
  r.name = "a\"b\\c\n";
  r.status = JobStatus::kDone;
  r.message = "tab\there \x01";
  r.epochs = 2;
  r.params = 610;
  r.seconds = 0.1;
  r.samples_per_second = 1000.0 / 3.0;
  r.core = 1;
  r.metrics = {{"loss", 0.25}, {"accuracy", NAN}, {"test_loss", 1e-300}};
  r.last_metrics = {{"loss", 0.5}};
  r.best = {1, "val_loss", 0.2};
  r.history = {{1, {{"loss", 0.3}, {"accuracy", NAN}}, 0.01},
               {2, {{"loss", 1.0 / 3.0}, {"accuracy", 0.5}}, 0.02}};
  r.parameters = {{"lr", "0.001"}, {"act", "\"relu\""}};
  r.retry = true;
  return r;
}

// jobs.log's record text (written directly, compact) reads back as the same result: metrics
// exact, timings to 6 significant digits; the model file and its hash beside it.
TEST(RecordText, ReadsBackTheSameResult) {
  JobResult r = record_example();
  std::string file, xxh3;
  JobResult back =
      job_result_from_record(job_result_json_text(r, "models/x.keras", 42), &file, &xxh3);
  r.samples_per_second = 333.333;  // 6 significant digits
  EXPECT_EQ(fields_of(back), fields_of(r));
  EXPECT_EQ(file, "models/x.keras");
  EXPECT_EQ(xxh3, hex64(42));
  EXPECT_EQ(back.history[1].values[0].second, 1.0 / 3.0);  // exact
  back = job_result_from_record(job_result_json_text(r), &file, &xxh3);
  EXPECT_EQ(file, "");
}

// What the compact form leaves out: an empty message, a done status, metric_order, a derivable
// history order and best value, the monitor of a best epoch that monitors fit's default, a
// one-epoch history that is the metrics; a one-epoch model's record is under 270 bytes (640
// before issue 36, 336 before the short best and status).
TEST(RecordText, LeavesOutWhatCanBeDerived) {
  JobResult r;
  r.name = "m-0-0.001";
  r.status = JobStatus::kDone;
  r.epochs = 1;
  r.params = 610;
  r.seconds = 0.003294854123;
  r.samples_per_second = 436134.65118636517;
  r.metrics = {{"loss", 2.2639910795660425},
               {"accuracy", 0.18649965205288796},
               {"test_loss", 2.2276656452152466},
               {"test_accuracy", 0.19166666666666668}};
  r.best = {1, "loss", 2.2639910795660425};
  r.history = {{1, {{"loss", 2.2639910795660425}, {"accuracy", 0.18649965205288796}}, 0.0032}};
  std::string text = job_result_json_text(r);
  for (const char* k : {"message", "metric_order", "history_order", "\"value\"", "status",
                        "monitor", "samples_per_second"})
    EXPECT_EQ(text.find(k), std::string::npos) << k << " in " << text;
  r.samples_per_second = 436135;  // 6 significant digits
  r.seconds = 0.00329485;
  EXPECT_EQ(fields_of(job_result_from_record(text)), fields_of(r));
  r.history[0].seconds = r.seconds = 0.00329485;
  text = job_result_json_text(r);
  EXPECT_THAT(text, HasSubstr("\"history\":\"metrics\""));
  EXPECT_THAT(text, HasSubstr("\"best\":1,"));
  EXPECT_LT(text.size(), 270u) << text;
  EXPECT_EQ(fields_of(job_result_from_record(text)), fields_of(r));
  // Not done: the status is written. A best epoch on another monitor names it; with validation
  // metrics the default monitor is val_loss.
  r.status = JobStatus::kDiverged;
  r.best.monitor = "accuracy";
  r.best.value = r.history[0].values[1].second;
  text = job_result_json_text(r);
  EXPECT_THAT(text, HasSubstr("\"status\":\"diverged\""));
  EXPECT_THAT(text, HasSubstr("\"monitor\":\"accuracy\""));
  EXPECT_EQ(fields_of(job_result_from_record(text)), fields_of(r));
  r.metrics.insert(r.metrics.begin() + 2, {"val_loss", 2.5});
  r.history[0].values.push_back({"val_loss", 2.5});
  r.best = {1, "val_loss", 2.5};
  text = job_result_json_text(r);
  EXPECT_THAT(text, HasSubstr("\"best\":1,"));
  EXPECT_EQ(fields_of(job_result_from_record(text)), fields_of(r));
  r.best.monitor = "loss";  // not the default any more: named
  r.best.value = r.history[0].values[0].second;
  text = job_result_json_text(r);
  EXPECT_THAT(text, HasSubstr("\"monitor\":\"loss\""));
  EXPECT_EQ(fields_of(job_result_from_record(text)), fields_of(r));
  // A history whose keys are not the metrics' (without test_) names them.
  r.history[0].values = {{"accuracy", 0.5}, {"loss", 2.0}};
  EXPECT_NE(job_result_json_text(r).find("\"history_order\":[\"accuracy\",\"loss\"]"),
            std::string::npos);
  EXPECT_EQ(fields_of(job_result_from_record(job_result_json_text(r))), fields_of(r));
}

// A timing keeps the 6 significant digits printf's %.6g writes, read back as a double.
TEST(RecordText, TimingsKeepTheSixDigitsOfPrintf) {
  for (double v : {0.0, 1.0, 0.1, 1.0 / 3.0, 436134.65118636517, 0.003294854123, 1234567.0, 2.5e-7,
                   9.999995, 99999.95, 1e300, -0.25}) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    EXPECT_EQ(timing_figure(v), std::strtod(b, nullptr)) << v;
  }
  EXPECT_TRUE(std::isnan(timing_figure(NAN)));
  EXPECT_EQ(timing_figure(INFINITY), INFINITY);
}

// Records of the full form (job_result_to_json, which jobs.log held before issue 36) still read.
TEST(RecordText, ReadsTheOlderFullForm) {
  const JobResult r = record_example();
  Json old = job_result_to_json(r);
  old["model_file"] = "models/x.keras";
  old["model_xxh3"] = hex64(7);
  std::string file, xxh3;
  EXPECT_EQ(fields_of(job_result_from_record(old.dump(), &file, &xxh3)), fields_of(r));
  EXPECT_EQ(file, "models/x.keras");
  EXPECT_EQ(xxh3, hex64(7));
  EXPECT_EQ(fields_of(job_result_from_json(old)), fields_of(r));
}

// Many models leave a bounded folder: the files of a run (no per-model file with save: none)
// and at most ~2 KB a model.
TEST_F(SavePolicyTest, ManyModelsWithoutFilesLeaveABoundedFolder) {
  std::string lrs;
  for (int i = 0; i < 250; ++i) lrs += (i ? ", " : "") + std::to_string(0.001 + i * 1e-6);
  testing_util::write_text(plan_path, "seed: 1\nsave: none\n" + std::string(R"(data:
  train: {x: train_x.npy, y: train_y.npy}
defaults:
  epochs: 1
  batch_size: 300
  loss: sparse_categorical_crossentropy
models:
  - name: m-{u}-{lr}
    grid: {u: [1, 2, 3, 4, 5, 6, 7, 8], lr: [)") +
                                          lrs + R"(]}
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers:
      - Flatten: {}
      - Dense: {units: "{u}", activation: relu}
      - Dense: {units: 3, activation: softmax}
)");
  const std::string out = dir.path + "/many";
  const FleetSummary s = run(out, "");  // the plan's own policy
  ASSERT_EQ(s.results.size(), 2000u);
  size_t n = 0, bytes = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(out))
    if (e.is_regular_file()) {
      ++n;
      bytes += e.file_size();
    }
  EXPECT_LE(n, 10u);  // plan.yaml, run.json, jobs.log, lock, results, history, timeline, run.log
  EXPECT_LE(bytes, 2000u * 2048u);
  // More than Display::kBriefAbove models: run.log holds a line a percent of the models done (no
  // start, epoch or end line of a model that trained well), timeline.jsonl no "start" line.
  const std::string log = read_file(out + "/run.log");
  EXPECT_EQ(log.find("start m-"), std::string::npos);
  EXPECT_EQ(log.find(" epoch 1/1"), std::string::npos);
  EXPECT_THAT(log, HasSubstr("done 2000/2000 models"));
  EXPECT_LE(log.size(), 200u * 100u);
  const std::string timeline = read_file(out + "/timeline.jsonl");
  EXPECT_EQ(timeline.find("\"kind\":\"start\""), std::string::npos);
  EXPECT_THAT(timeline, HasSubstr("\"kind\":\"job\""));
}

// A large fleet (more models than large_fleet_above(), lowered to 20 here through its test
// hook): results.json lists the best 100 (here all 48) in rank order with the totals,
// results.csv every model, timeline.jsonl one line per worker instead of one per job; --resume
// reads it all back without training and writes the same rows.
TEST_F(SavePolicyTest, ALargeFleetListsTheBestAndKeepsEveryRowInTheCsv) {
  ::setenv("NNFLEET_LARGE_FLEET_ABOVE", "20", 1);
  struct Unset {
    ~Unset() { ::unsetenv("NNFLEET_LARGE_FLEET_ABOVE"); }
  } unset;
  ASSERT_EQ(large_fleet_above(), 20u);
  testing_util::write_text(plan_path, tiny_grid("save: none\n"));
  const std::string out = dir.path + "/large";
  const FleetSummary s = run(out, "");  // the plan's own policy
  ASSERT_EQ(s.results.size(), 48u);
  const Json results = Json::parse(read_file(out + "/results.json"));
  EXPECT_EQ(results["models_total"], 48);
  EXPECT_EQ(results["status_counts"]["done"], 48);
  EXPECT_EQ(results["all_models"], "results.csv");
  // 48 models, at most SavePolicy::kDefaultBest listed: all 48, best first.
  ASSERT_EQ(results["models"].size(), 48u);
  const RankKey key{results["rank_by"].get<std::string>(), true};
  for (size_t i = 1; i < results["models"].size(); ++i)
    EXPECT_GE(results["models"][i - 1]["metrics"][key.key].get<double>(),
              results["models"][i]["metrics"][key.key].get<double>());
  EXPECT_EQ(results["models"][0]["name"],
            s.results[static_cast<size_t>(ranked(s.results, key)[0] - s.results.data())].name);
  const std::string csv = read_file(out + "/results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 49);
  const std::string timeline = read_file(out + "/timeline.jsonl");
  EXPECT_EQ(timeline.find("\"kind\":\"job\""), std::string::npos);
  EXPECT_EQ(timeline.find("\"kind\":\"start\""), std::string::npos);
  EXPECT_THAT(timeline, HasSubstr("\"jobs\":"));
  EXPECT_THAT(timeline, HasSubstr("\"kind\":\"lane\""));
  // plan.yaml is the plan's grid entry (not 48 models), and loads to the plan's models.
  const std::string plan_yaml = read_file(out + "/plan.yaml");
  EXPECT_THAT(plan_yaml, HasSubstr("grid:"));
  EXPECT_EQ(std::count(plan_yaml.begin(), plan_yaml.end(), '{') -
                std::count(plan_yaml.begin(), plan_yaml.end(), '}'),
            0);
  EXPECT_EQ(plan_to_yaml(load_plan(out + "/plan.yaml")), plan_to_yaml(load_plan(plan_path)));
  // --resume trusts every record: nothing trained again, the same rows.
  const std::string log = read_file(out + "/jobs.log");
  const FleetSummary again = run(out, "", 2, true);
  EXPECT_EQ(read_file(out + "/jobs.log"), log);
  EXPECT_EQ(read_file(out + "/results.csv"), csv);
  EXPECT_EQ(read_file(out + "/plan.yaml"), plan_yaml);
  for (const ModelResult& r : again.results) EXPECT_EQ(r.status, JobStatus::kDone) << r.name;
}

// Two entries of different settings and architectures; `own_data` gives the second its own
// data (a file path, which the expanded models hold resolved).
std::string two_entries(bool own_data) {
  return std::string(R"(seed: 5
data:
  train: {x: train_x.npy, y: train_y.npy}
defaults:
  epochs: 2
  loss: sparse_categorical_crossentropy
  metrics: [accuracy]
models:
  - name: a-{u}-{d}
    grid: {u: [1, 2], d: [0.5, 0.25, 0.125]}
    layers:
      - Flatten: {}
      - Dense: {units: "{u}", activation: relu}
      - Dropout: {rate: "{d}"}
      - Dense: {units: 3, activation: softmax}
  - name: b
    batch_size: 7
    early_stopping: {monitor: loss, patience: 1}
    metrics: null
    optimizer: {SGD: {learning_rate: 0.1}}
)") + (own_data ? "    data: {train: {x: train_x.npy, y: train_y.npy}}\n" : "") +
         R"(    layers:
      - Flatten: {}
      - Dense: {units: 3, activation: softmax}
)";
}

// A large fleet's plan.yaml in its grid form (plan_to_yaml's `factored` when every entry is
// whole and names no file: each entry merged over `defaults`, with its grid, the grid's
// variables in written order, which is the models' order) loads to the same models as the
// plan: its full text is the plan's, and the text is the entries, not one item per model.
TEST_F(SavePolicyTest, AGridFormPlanLoadsToTheSameModels) {
  testing_util::write_text(plan_path, two_entries(false));
  const Plan plan = load_plan(plan_path);
  ASSERT_EQ(plan.models.size(), 7u);
  const std::string full = plan_to_yaml(plan);
  const std::string grid = plan_to_yaml(plan, 1, true);
  EXPECT_THAT(grid, HasSubstr("name: a-{u}-{d}"));
  EXPECT_THAT(grid, Not(HasSubstr("defaults:")));
  EXPECT_THAT(grid, Not(HasSubstr("a-2-0.25")));
  // u before d, as written (d sorts first): the models come in the plan's order.
  EXPECT_LT(grid.find("u: ["), grid.find("d: ["));
  const std::string again = dir.path + "/grid.yaml";
  testing_util::write_text(again, grid);
  EXPECT_EQ(plan_to_yaml(load_plan(again)), full);
  EXPECT_EQ(plan_to_yaml(load_plan(again), 1, true), grid);
}

// A plan whose entry names a file of its own (here its data) is written factored instead: the
// first model's settings as `defaults:`, each model what differs, null for what it has not; it
// loads to the same models as the plan.
TEST_F(SavePolicyTest, AFactoredPlanLoadsToTheSameModels) {
  testing_util::write_text(plan_path, two_entries(true));
  const Plan plan = load_plan(plan_path);
  const std::string full = plan_to_yaml(plan);
  const std::string factored = plan_to_yaml(plan, 1, true);
  EXPECT_THAT(factored, HasSubstr("defaults:"));
  EXPECT_THAT(factored, HasSubstr("a-2-0.25"));
  EXPECT_LT(factored.size(), full.size());
  const std::string again = dir.path + "/factored.yaml";
  testing_util::write_text(again, factored);
  EXPECT_EQ(plan_to_yaml(load_plan(again)), full);
}

}  // namespace
}  // namespace nnfleet
