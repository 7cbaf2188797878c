// Results files and the leaderboard.
#include "fleet/results.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>

#include "fleet/fit/checkpoint.h"
#include "platform/files.h"

namespace nnfleet {

std::string api::figure_text(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

namespace {

using api::figure_text;

// JSON has no NaN: non-finite values are written as null.
Json finite_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

}  // namespace

Json model_result_to_json(const ModelResult& r) {
  Json m = Json::object();
  for (const auto& [k, v] : r.metrics) m[k] = finite_or_null(v);
  Json j = {{"name", r.name},
            {"status", api::status_name(r.status)},
            {"message", r.message},
            {"epochs", r.epochs},
            {"params", r.params},
            {"seconds", r.seconds},
            {"samples_per_second", r.samples_per_second},
            {"core", r.core},
            {"metrics", m}};
  if (r.best.epoch > 0)
    j["best"] = {{"epoch", r.best.epoch},
                 {"monitor", r.best.monitor},
                 {"value", finite_or_null(r.best.value)}};
  else
    j["best"] = nullptr;
  if (!r.last_metrics.empty()) {
    Json last = Json::object(), last_order = Json::array();
    for (const auto& [k, v] : r.last_metrics) {
      last[k] = finite_or_null(v);
      last_order.push_back(k);
    }
    j["last_metrics"] = last;
    j["last_metric_order"] = last_order;
  }
  Json h = Json::array();
  for (const auto& e : r.history) {
    Json row = {{"epoch", e.epoch}, {"seconds", e.seconds}};
    for (const auto& [k, v] : e.values) row[k] = finite_or_null(v);
    h.push_back(row);
  }
  j["history"] = h;
  // JSON objects forget key order; keep it so a resumed run reports metrics in the same order.
  Json order = Json::array(), horder = Json::array();
  for (const auto& kv : r.metrics) order.push_back(kv.first);
  if (!r.history.empty())
    for (const auto& kv : r.history[0].values) horder.push_back(kv.first);
  j["metric_order"] = order;
  j["history_order"] = horder;
  if (!r.parameters.empty()) {
    Json p = Json::object();
    for (const auto& [k, v] : r.parameters) p[k] = Json::parse(v);
    j["parameters"] = p;
    Json porder = Json::array();
    for (const auto& kv : r.parameters) porder.push_back(kv.first);
    j["parameter_order"] = porder;
  }
  if (!r.rungs.empty()) {
    Json rungs = Json::array();
    for (const api::Rung& g : r.rungs)
      rungs.push_back(
          {{"epochs", g.epochs}, {"value", finite_or_null(g.value)}, {"decision", g.decision}});
    j["rungs"] = rungs;
  }
  return j;
}

Json job_result_to_json(const JobResult& r) {
  Json j = model_result_to_json(r);
  if (r.retry) j["retry"] = true;
  if (r.write_failed) j["write_failed"] = true;
  if (r.paused) j["paused"] = true;
  return j;
}

namespace {

// A JSON text writer for job_result_json_text: strings escaped, numbers round-tripping (shortest),
// non-finite numbers null.
struct JsonText {
  std::string o;
  bool first = true;
  void sep() {
    if (!first) o += ',';
    first = false;
  }
  void str(const std::string& s) {
    o += '"';
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (u < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", u);
        o += b;
      } else {
        o += c;
      }
    }
    o += '"';
  }
  void key(const char* k) {
    sep();
    o += '"';
    o += k;
    o += "\":";
  }
  void key(const std::string& k) {
    sep();
    str(k);
    o += ':';
  }
  void num(double v) {
    if (!std::isfinite(v)) {
      o += "null";
      return;
    }
    char b[32];
    // The shortest text that reads back as the same double.
    const auto end = std::to_chars(b, b + sizeof b, v).ptr;
    o.append(b, end);
  }
  void integer(long long v) { o += std::to_string(v); }
  void open(char c) {
    o += c;
    first = true;
  }
  void close(char c) {
    o += c;
    first = false;
  }
  void values(const std::vector<std::pair<std::string, double>>& kv) {
    open('{');
    for (const auto& [k, v] : kv) {
      key(k);
      num(v);
    }
    close('}');
  }
  void names(const std::vector<std::pair<std::string, double>>& kv) {
    open('[');
    for (const auto& e : kv) {
      sep();
      str(e.first);
    }
    close(']');
  }
};

}  // namespace

double timing_figure(double v) {
  if (!std::isfinite(v)) return v;
  // The double nearest "%.6g" of v, through to_chars/from_chars: snprintf and strtod took 0.7%
  // of a 100,000-model run's CPU (a few figures per model).
  char b[32];
  const char* end = std::to_chars(b, b + sizeof b, v, std::chars_format::general, 6).ptr;
  double r = v;
  std::from_chars(b, end, r);
  return r;
}

namespace {

// The keys of a record's history rows when none are written ("history_order"): the metrics'
// without the test_ ones (evaluated once, after training). The writer and the reader both use it.
std::vector<std::string> default_history_order(const Metrics& metrics) {
  std::vector<std::string> order;
  for (const auto& kv : metrics)
    if (kv.first.rfind("test_", 0) != 0) order.push_back(kv.first);
  return order;
}

// The monitor a record's "best" names when it is written as its epoch alone: fit's default,
// val_loss when the model has validation metrics, else loss.
std::string default_monitor(const Metrics& metrics) {
  return find_metric(metrics, "val_loss") ? "val_loss" : "loss";
}

// "best": {epoch, monitor[, value]}, the value left out when the history's row of that epoch
// has it (the same double), and only the epoch (a number) when the monitor is also
// default_monitor()'s (36 bytes of 336 a record at 100,000 tiny models, before); nothing when
// there is no best epoch.
void best_text(JsonText& w, const ModelResult& r) {
  const api::BestEpoch& b = r.best;
  if (b.epoch <= 0) return;
  w.key("best");
  const EpochRecord* row = nullptr;
  for (const EpochRecord& e : r.history)
    if (e.epoch == b.epoch) row = &e;
  const double* v = row ? find_metric(row->values, b.monitor) : nullptr;
  const bool derivable = v && (*v == b.value || (std::isnan(*v) && std::isnan(b.value)));
  if (derivable && b.monitor == default_monitor(r.metrics)) {
    w.integer(b.epoch);
    return;
  }
  w.open('{');
  w.key("epoch");
  w.integer(b.epoch);
  w.key("monitor");
  w.str(b.monitor);
  if (!derivable) {
    w.key("value");
    w.num(b.value);
  }
  w.close('}');
}

// Whether the history is one epoch whose row is the metrics (without test_ ones, in order) and
// the model's seconds: written "history":"metrics" (a one-epoch model's row repeated them).
bool history_is_metrics(const ModelResult& r) {
  if (r.history.size() != 1 || r.epochs != 1) return false;
  const EpochRecord& e = r.history[0];
  if (e.epoch != 1 || timing_figure(e.seconds) != timing_figure(r.seconds)) return false;
  size_t k = 0;
  for (const auto& [name, v] : r.metrics) {
    if (name.rfind("test_", 0) == 0) continue;
    if (k >= e.values.size() || e.values[k].first != name) return false;
    const double h = e.values[k].second;
    if (!(h == v || (std::isnan(h) && std::isnan(v)))) return false;
    ++k;
  }
  return k == e.values.size();
}

// "history": one array per epoch, [epoch, seconds, values in history order], and that order
// ("history_order") when it is not default_history_order(). Every epoch's row has the first
// row's keys (fit records the same metrics each epoch).
void history_text(JsonText& w, const ModelResult& r) {
  if (r.history.empty()) return;
  if (history_is_metrics(r)) {
    w.key("history");
    w.str("metrics");
    return;
  }
  std::vector<std::string> order;
  for (const auto& kv : r.history[0].values) order.push_back(kv.first);
  if (order != default_history_order(r.metrics)) {
    w.key("history_order");
    w.names(r.history[0].values);
  }
  w.key("history");
  w.open('[');
  for (const EpochRecord& e : r.history) {
    w.sep();
    w.open('[');
    w.sep();
    w.integer(e.epoch);
    w.sep();
    w.num(timing_figure(e.seconds));
    for (const std::string& k : order) {
      w.sep();
      const double* v = find_metric(e.values, k);
      w.num(v ? *v : NAN);
    }
    w.close(']');
  }
  w.close(']');
}

}  // namespace

std::string result_record_text(const ModelResult& r, JobFlags flags, const std::string& model_file,
                               uint64_t model_xxh3) {
  JsonText w;
  w.o.reserve(384 + 64 * r.history.size());
  w.open('{');
  w.key("name");
  w.str(r.name);
  if (r.status != JobStatus::kDone) {  // absent: done
    w.key("status");
    w.str(api::status_name(r.status));
  }
  if (!r.message.empty()) {
    w.key("message");
    w.str(r.message);
  }
  w.key("epochs");
  w.integer(r.epochs);
  w.key("params");
  w.integer(static_cast<long long>(r.params));
  w.key("seconds");
  w.num(timing_figure(r.seconds));
  w.key("sps");  // samples_per_second
  w.num(timing_figure(r.samples_per_second));
  w.key("core");
  w.integer(r.core);
  // Written in order: the reader takes the metrics' order from the text (no "metric_order").
  w.key("metrics");
  w.values(r.metrics);
  best_text(w, r);
  if (!r.last_metrics.empty()) {
    w.key("last_metrics");
    w.values(r.last_metrics);
  }
  history_text(w, r);
  for (const auto& [flag, name] :
       {std::pair{flags.retry, "retry"}, std::pair{flags.write_failed, "write_failed"},
        std::pair{flags.paused, "paused"}})
    if (flag) {
      w.key(name);
      w.o += "true";
    }
  // The rarer parts (a search's parameters and rungs) through the Json writer.
  if (!r.parameters.empty() || !r.rungs.empty()) {
    Json j = model_result_to_json(r);
    for (const char* k : {"parameters", "parameter_order", "rungs"})
      if (j.contains(k)) {
        w.key(k);
        w.o += j[k].dump();
      }
  }
  if (!model_file.empty()) {
    w.key("model_file");
    w.str(model_file);
    w.key("model_xxh3");
    w.str(hex64(model_xxh3));
  }
  w.close('}');
  return std::move(w.o);
}

namespace {

// The names of `j`'s key `order_key` when it has one, else the keys of object `values` in the
// order the JSON type keeps them (as written for ordered_json).
template <class J>
std::vector<std::string> key_order(const J& j, const char* order_key, const J& values) {
  std::vector<std::string> out;
  if (j.contains(order_key)) {
    for (const auto& k : j.at(order_key)) out.push_back(k.template get<std::string>());
  } else {
    for (auto it = values.begin(); it != values.end(); ++it) out.push_back(it.key());
  }
  return out;
}

template <class J>
double value_of(const J& v) {
  return v.is_null() ? NAN : v.template get<double>();
}

// Both forms of a record: the full one of job_result_to_json (and of jobs.log before issue 36:
// "message", "metric_order", "history_order", history rows as objects, "best": null) and the
// compact one of job_result_json_text.
template <class J>
JobResult result_from(const J& j) {
  JobResult r;
  r.name = j.at("name").template get<std::string>();
  r.status = j.contains("status") ? job_status_from_name(j["status"].template get<std::string>())
                                  : JobStatus::kDone;
  r.message = j.contains("message") ? j["message"].template get<std::string>() : "";
  r.epochs = j.at("epochs").template get<int>();
  r.params = j.at("params").template get<size_t>();
  r.seconds = j.at("seconds").template get<double>();
  r.samples_per_second =
      j.at(j.contains("sps") ? "sps" : "samples_per_second").template get<double>();
  r.core = j.at("core").template get<int>();
  const J& metrics = j.at("metrics");
  for (const std::string& k : key_order(j, "metric_order", metrics))
    r.metrics.emplace_back(k, value_of(metrics.at(k)));
  if (j.contains("last_metrics"))
    for (const std::string& k : key_order(j, "last_metric_order", j["last_metrics"]))
      r.last_metrics.emplace_back(k, value_of(j["last_metrics"].at(k)));
  std::vector<std::string> horder;
  if (j.contains("history_order")) {
    for (const auto& k : j["history_order"]) horder.push_back(k.template get<std::string>());
  } else {
    horder = default_history_order(r.metrics);
  }
  if (j.contains("history") && j["history"].is_string()) {  // "metrics": history_is_metrics
    EpochRecord e;
    e.epoch = 1;
    e.seconds = r.seconds;
    for (const std::string& k : horder) e.values.emplace_back(k, *find_metric(r.metrics, k));
    r.history.push_back(std::move(e));
  } else if (j.contains("history")) {
    for (const auto& row : j["history"]) {
      EpochRecord e;
      if (row.is_array()) {  // [epoch, seconds, values in horder]
        if (row.size() != horder.size() + 2)
          throw std::runtime_error("a history row of " + std::to_string(row.size()) +
                                   " values; expected " + std::to_string(horder.size() + 2));
        e.epoch = row[0].template get<int>();
        e.seconds = row[1].template get<double>();
        for (size_t i = 0; i < horder.size(); ++i)
          e.values.emplace_back(horder[i], value_of(row[i + 2]));
      } else {
        e.epoch = row.at("epoch").template get<int>();
        e.seconds = row.at("seconds").template get<double>();
        for (const std::string& k : horder) e.values.emplace_back(k, value_of(row.at(k)));
      }
      r.history.push_back(std::move(e));
    }
  }
  if (j.contains("best") && !j["best"].is_null()) {
    const J& b = j["best"];
    const bool short_form = b.is_number();  // its epoch alone: best_text
    r.best.epoch = (short_form ? b : b.at("epoch")).template get<int>();
    r.best.monitor =
        short_form ? default_monitor(r.metrics) : b.at("monitor").template get<std::string>();
    if (!short_form && b.contains("value")) {
      r.best.value = value_of(b["value"]);
    } else {  // the history's row of the best epoch has it (best_text)
      r.best.value = NAN;
      for (const EpochRecord& e : r.history)
        if (e.epoch == r.best.epoch)
          if (const double* v = find_metric(e.values, r.best.monitor)) r.best.value = *v;
    }
  }
  r.retry = j.contains("retry") && j["retry"].template get<bool>();
  r.write_failed = j.contains("write_failed") && j["write_failed"].template get<bool>();
  r.paused = j.contains("paused") && j["paused"].template get<bool>();
  if (j.contains("parameters"))
    for (const std::string& k : key_order(j, "parameter_order", j["parameters"]))
      r.parameters.emplace_back(k, j["parameters"].at(k).dump());
  if (j.contains("rungs"))
    for (const auto& g : j["rungs"])
      r.rungs.push_back({g.at("epochs").template get<int>(), value_of(g.at("value")),
                         g.at("decision").template get<std::string>()});
  return r;
}

}  // namespace

JobResult job_result_from_json(const Json& j) { return result_from(j); }

JobResult job_result_from_record(std::string_view json, std::string* model_file,
                                 std::string* model_xxh3) {
  // ordered_json keeps the keys in written order: the metrics' order comes from the text.
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(json);
  JobResult r = result_from(j);
  if (model_file) *model_file = j.contains("model_file") ? j["model_file"].get<std::string>() : "";
  if (model_xxh3) *model_xxh3 = j.contains("model_xxh3") ? j["model_xxh3"].get<std::string>() : "";
  return r;
}

RankKey rank_key(const std::vector<std::string>& metric_keys, bool has_val, bool has_test) {
  const std::string base = metric_keys.empty() ? "loss" : metric_keys[0];
  const bool higher = base.find("acc") != std::string::npos;
  const std::string prefix = has_test ? "test_" : has_val ? "val_" : "";
  return {prefix + base, higher};
}

namespace {

// A result's place on the leaderboard, found once: its group (0 finished with the value, 1 a
// search's pruned trial with it, 2 the rest), its epochs and its value.
struct RankPlace {
  int group;
  int epochs;
  double value;
};

RankPlace rank_place(const ModelResult& r, const RankKey& key) {
  const double* v = find_metric(r.metrics, key.key);
  // Finished models first, then a search's pruned trials (furthest rung first), then the rest.
  const int group = !v || !std::isfinite(*v)         ? 2
                    : r.status == JobStatus::kDone   ? 0
                    : r.status == JobStatus::kPruned ? 1
                                                     : 2;
  return {group, r.epochs, group == 2 ? 0.0 : *v};
}

bool place_before(const RankPlace& a, const RankPlace& b, bool higher_is_better) {
  if (a.group != b.group) return a.group < b.group;
  if (a.group == 2) return false;
  if (a.group == 1 && a.epochs != b.epochs) return a.epochs > b.epochs;
  return higher_is_better ? a.value > b.value : a.value < b.value;
}

}  // namespace

bool ranks_before(const ModelResult& a, const ModelResult& b, const RankKey& key) {
  return place_before(rank_place(a, key), rank_place(b, key), key.higher_is_better);
}

std::vector<const ModelResult*> ranked(const std::vector<ModelResult>& results,
                                       const RankKey& key) {
  // Each place found once: looking the metric up in every comparison was 12% of the CPU of a
  // 100,000-model run's last 3 seconds (three sorts of 1.7 million comparisons).
  std::vector<std::pair<RankPlace, const ModelResult*>> v;
  v.reserve(results.size());
  for (const auto& r : results) v.emplace_back(rank_place(r, key), &r);
  std::stable_sort(v.begin(), v.end(), [&](const auto& a, const auto& b) {
    return place_before(a.first, b.first, key.higher_is_better);
  });
  std::vector<const ModelResult*> out;
  out.reserve(v.size());
  for (const auto& e : v) out.push_back(e.second);
  return out;
}

std::string history_csv_header(const std::vector<std::string>& columns) {
  std::string h = "model,epoch";
  for (const auto& c : columns) h += "," + c;
  return h + ",seconds\n";
}

void history_csv_rows(std::ostream& o, const ModelResult& r,
                      const std::vector<std::string>& columns) {
  const std::string name = csv_field(r.name);
  for (const auto& e : r.history) {
    o << name << "," << e.epoch;
    for (const auto& c : columns) {
      const double* v = find_metric(e.values, c);
      o << "," << (v ? figure_text(*v) : "");
    }
    o << "," << figure_text(e.seconds) << "\n";
  }
}

namespace {

// Writes `path` atomically through a stream; throws FileError.
void write_streamed(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  write_atomic_with(
      path,
      [&](const std::string& tmp) {
        std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
        fill(o);
        o.flush();
        if (!o) throw FileError("failed to write file '" + path + "': " + std::strerror(errno));
      },
      Durability::kProcessCrash);
}

}  // namespace

void write_results(const std::string& dir, const std::string& plan_path, uint64_t seed, int workers,
                   const std::vector<ModelResult>& results, const RankKey& key,
                   const Json& more_head, const std::function<Json(size_t)>& more_of,
                   size_t list_best) {
  // The models listed: all in plan order, or (list_best) the best N in rank order.
  std::vector<size_t> listed;
  const bool summary = list_best > 0;
  if (summary) {
    for (const ModelResult* r : ranked(results, key)) {
      if (listed.size() == list_best) break;
      listed.push_back(static_cast<size_t>(r - results.data()));
    }
  } else {
    listed.resize(results.size());
    std::iota(listed.begin(), listed.end(), size_t{0});
  }
  write_streamed(dir + "/results.json", [&](std::ostream& o) {
    Json head = {{"plan", plan_path}, {"seed", seed}, {"workers", workers}, {"rank_by", key.key}};
    if (more_head.is_object()) head.update(more_head);
    if (summary) {
      Json counts = Json::object();
      for (const ModelResult& r : results) {
        Json& c = counts[api::status_name(r.status)];
        c = c.is_null() ? 1 : c.get<size_t>() + 1;
      }
      head["models_total"] = results.size();
      head["status_counts"] = counts;
      head["models_listed"] = "best " + std::to_string(listed.size());
      head["all_models"] = "results.csv";
    }
    const std::string h = head.dump(2);  // "{\n  ...\n}": the models go before the brace
    o << h.substr(0, h.size() - 2) << ",\n  \"models\": [";
    const size_t n = listed.size();
    for (size_t i = 0; i < n; ++i) {
      const size_t k = listed[i];
      Json j = model_result_to_json(results[k]);
      for (const char* x : {"history", "metric_order", "history_order", "parameter_order"})
        j.erase(x);  // history.csv has the histories; the parameters keep written order here
      if (more_of) j.update(more_of(k));
      std::string m = j.dump(2);
      // Indented two levels deeper, as a whole-document dump(2) would.
      for (size_t at = m.find('\n'); at != std::string::npos; at = m.find('\n', at + 1))
        m.insert(at + 1, "    ");
      o << (i ? ",\n    " : "\n    ") << m;
    }
    o << (n == 0 ? "]\n}\n" : "\n  ]\n}\n");
  });

  std::vector<std::string> mcols;
  for (const auto& r : results)
    for (const auto& [k, v] : r.metrics)
      if (std::find(mcols.begin(), mcols.end(), k) == mcols.end()) mcols.push_back(k);
  write_streamed(dir + "/results.csv", [&](std::ostream& o) {
    o << "name,status,epochs";
    for (const auto& c : mcols) o << "," << c;
    o << ",best_epoch,best_monitor,best_value,params,seconds,samples_per_second,core,message\n";
    for (const auto& r : results) {
      o << csv_field(r.name) << "," << api::status_name(r.status) << "," << r.epochs;
      for (const auto& c : mcols) {
        const double* v = find_metric(r.metrics, c);
        o << "," << (v ? figure_text(*v) : "");
      }
      if (r.best.epoch > 0)
        o << "," << r.best.epoch << "," << r.best.monitor << "," << figure_text(r.best.value);
      else
        o << ",,,";
      o << "," << r.params << "," << figure_text(r.seconds) << ","
        << figure_text(r.samples_per_second) << "," << r.core << "," << csv_field(r.message)
        << "\n";
    }
  });
}

}  // namespace nnfleet
