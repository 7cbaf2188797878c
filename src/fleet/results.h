// Results of a fleet run: results.json / results.csv (one row per model), history.csv (one row
// per epoch), the JSON of a job's record (run_folder.h), and the leaderboard. Every file is
// written atomically.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/fit/job_types.h"

namespace nnfleet {

// `s` as one CSV field: quoted (quotes doubled) when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);

// A model's result as JSON; job_result_to_json adds a job's flags (retry, write_failed, paused).
Json model_result_to_json(const ModelResult& r);
Json job_result_to_json(const JobResult& r);
// jobs.log's record of a model: a compact JSON text written directly (building and dumping a
// Json tree was a few allocations per value), with "model_file" and "model_xxh3" when
// `model_file` is not empty. Compact (issue 36: 100,000 tiny models wrote 640 bytes a record):
// keys in written order (no "metric_order"), "message", "best" and "history" left out when
// empty, "status" when done, "samples_per_second" written "sps", the best value when the history
// has it and "best" as its epoch alone when its monitor is also fit's default, history rows as
// arrays [epoch, seconds, values] with "history_order" only when it is not the metrics' own without
// the test_ ones
// ("history":"metrics" when its one epoch's row is the metrics and the model's seconds),
// timings to 6 significant digits (metrics stay exact). job_result_from_record reads it.
std::string result_record_text(const ModelResult& r, JobFlags flags, const std::string& model_file,
                               uint64_t model_xxh3);
inline std::string job_result_json_text(const JobResult& r, const std::string& model_file = "",
                                        uint64_t model_xxh3 = 0) {
  return result_record_text(r, r.flags(), model_file, model_xxh3);
}
// A timing (seconds, samples per second) to the 6 significant digits a record keeps: the clocks
// behind them vary by more from run to run, and a double's 17 digits took ~25 bytes a record
// (issue 36). RunState::store rounds a result's so a resumed run reports the same figures.
double timing_figure(double v);
// Reads job_result_to_json's JSON (the form a cluster's ranks send each other).
JobResult job_result_from_json(const Json& j);
// A jobs.log record's JSON text, in either form: job_result_json_text's (compact) or the full
// one of job_result_to_json that jobs.log held before (read by --resume all the same); its
// "model_file" and "model_xxh3" ("" when absent) into the optional outputs. Throws on bad JSON.
JobResult job_result_from_record(std::string_view json, std::string* model_file = nullptr,
                                 std::string* model_xxh3 = nullptr);

// The leaderboard's metric: test_<first metric> when there is test data, else val_<first
// metric> with validation data, else the first metric; "loss" variants when no metric is set.
struct RankKey {
  std::string key;
  bool higher_is_better = true;
};
RankKey rank_key(const std::vector<std::string>& metric_keys, bool has_val, bool has_test);
// Whether `a` ranks strictly before `b` on the leaderboard (finished models by `key`, then a
// search's pruned trials, then models without the value); equal ones keep plan order.
bool ranks_before(const ModelResult& a, const ModelResult& b, const RankKey& key);
// Results sorted best first by `key` (models without the value last, in plan order).
std::vector<const ModelResult*> ranked(const std::vector<ModelResult>& results, const RankKey& key);

// The records of <dir>/jobs.log (run_folder.h): each intact one's JSON (job_result_to_json with
// its history, plus "model_file"), in the order written, the last of each name kept; torn or
// damaged records are skipped, so a live run's file can be read. Throws FileError.
std::vector<Json> read_job_records(const std::string& dir);

// history.csv: "model,epoch,<columns>,seconds", then one row per epoch of each model.
std::string history_csv_header(const std::vector<std::string>& columns);
void history_csv_rows(std::ostream& o, const ModelResult& r,
                      const std::vector<std::string>& columns);
// results.json and results.csv in `dir` (written model by model: no whole copy in memory);
// `more_head`'s keys join results.json's top level (a run's `parameters` and `search`), and
// `more_of(k)`'s keys model k's (its `parameters`, made from the plan as it is written).
// `list_best` > 0 (a large fleet: fleet.h): results.json lists only the best `list_best` by
// `key`, in rank order, beside "models_total", "status_counts",
// "models_listed" ("best N") and "all_models" ("results.csv", which keeps every model's row).
void write_results(const std::string& dir, const std::string& plan_path, uint64_t seed, int workers,
                   const std::vector<ModelResult>& results, const RankKey& key,
                   const Json& more_head = Json(),
                   const std::function<Json(size_t)>& more_of = nullptr, size_t list_best = 0);

}  // namespace nnfleet
