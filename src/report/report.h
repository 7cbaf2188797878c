// The HTML report of a run (`nnfleet report RUN_DIR`, `nnfleet train --report`): one
// self-contained report.html in the run folder, its scripts (uPlot, inlined when nnfleet is
// built), styles and data inlined, so it opens offline. It shows the leaderboard, a search's view
// (trials through their rungs, each parameter against the metric, the trials table), the learning
// curves, each grid variable (the run's recorded parameters) against the ranking metric, the
// per-core timeline (timeline.jsonl) and each model's layer table, and is made from the folder's
// files alone: plan.yaml, jobs.log (readable while a run appends to it), results.json once the
// run ended, timeline.jsonl and the saved models.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "core/config.h"

namespace nnfleet {

// What a saved model file says, kept between the rewrites of a live report (files are written
// once, atomically, so a path and its size name the content).
struct ModelFileInfo {
  uint64_t bytes = 0;
  std::string summary;  // as `nnfleet inspect` prints it
  double flops = 0.0;   // forward FLOPs per sample
};
using ModelFileCache = std::map<std::string, ModelFileInfo>;

// Everything the page shows, as JSON (the page's data; see report_data.cpp for the fields).
// `live`: the run is still going (models without a record are pending or running). Throws
// FileError when `run_dir` has no plan.yaml and jobs.log (not a run folder). `group_by` (a
// recorded parameter) overrides the plan's `group_by`; UsageError, listing the parameters, when it
// names none.
Json collect_report(const std::string& run_dir, bool live, ModelFileCache* cache = nullptr,
                    const std::string& group_by = "");

// The page for `data`: HTML with every script and style inlined (the data as page_data packs
// it); a live page reloads itself every few seconds.
std::string report_html(const Json& data);

// The data as the page holds it: `models` as rows of one key list ({keys, nested, rows}), each
// model's history, metrics and grid as rows of their own key lists (`nested`), since at 10,000
// models the keys repeated in every row were a third of the page. data_of_page(page_data(d)) is d.
Json page_data(const Json& data);
Json data_of_page(const Json& page);

// collect_report + report_html, written atomically to <run_dir>/report.html; returns its path.
// Throws FileError (UsageError for a `group_by` that names no recorded parameter).
std::string write_report(const std::string& run_dir, bool live, ModelFileCache* cache = nullptr,
                         const std::string& group_by = "");

// Grid variables inferred from expanded plan entries (for runs whose results.json records no
// `parameters`): models with the same fields form a group,
// and a field is a grid variable when at least two models of a group spell different values of it
// in their names, each as a whole token (plans name grid models after their values: mlp-16-0.01).
// Returns {"vars": [path, ...], "values": {model: {path: value}}}.
Json infer_grid(const Json& expanded_models);

// `train --report`: rewrites <dir>/report.html at most every `seconds` on a thread of its own
// while a run is live, and a last time, not live, when finished. Failures to write are dropped
// until the last write, which throws (FileError).
class LiveReport {
 public:
  explicit LiveReport(double seconds = 3.0) : seconds_(seconds) {}
  ~LiveReport();
  LiveReport(const LiveReport&) = delete;
  LiveReport& operator=(const LiveReport&) = delete;
  // The run's folder exists now: starts rewriting it. Thread-safe.
  void start(const std::string& dir);
  // Stops the thread; with `final_write`, writes the finished report. Returns its path ("" when
  // never started).
  std::string finish(bool final_write = true);

 private:
  void loop();

  double seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::string dir_;
  std::thread thread_;
  ModelFileCache cache_;  // used by the thread, then by finish()
};

}  // namespace nnfleet
