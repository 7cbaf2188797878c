// Plan fit options: reduce_lr_on_plateau, checked field by field as Keras's ReduceLROnPlateau
// would take them (and refused with a learning-rate schedule, which Keras cannot change either),
// and class_weight.
#include "plan/plan_fit.h"

#include <algorithm>
#include <cmath>

namespace nnfleet::plan_detail {
namespace {

const std::vector<std::string> kPlateauKeys = {"cooldown", "factor",  "min_delta", "min_lr",
                                               "mode",     "monitor", "patience"};

void reduce_lr_on_plateau(Problems& pr, const std::string& p, const Json& j,
                          std::vector<std::string> monitors, ModelSpec& s, Json& ex) {
  if (!j.is_object()) {
    pr.add(p, "expected a mapping with keys " + join(kPlateauKeys) + ", or null, got " + show(j));
    return;
  }
  check_keys(pr, p, j, kPlateauKeys);
  ReduceLrOnPlateau r;
  auto has = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  auto at = [&](const char* k) { return child_path(p, k); };
  if (has("monitor")) {
    std::sort(monitors.begin(), monitors.end());
    monitors.erase(std::unique(monitors.begin(), monitors.end()), monitors.end());
    r.monitor = check_string(pr, at("monitor"), j["monitor"], monitors).value_or(r.monitor);
  }
  if (has("factor"))
    r.factor = check_number(pr, at("factor"), j["factor"], 0, false, 1, true,
                            "a number in [0, 1) (Keras refuses a factor >= 1)")
                   .value_or(r.factor);
  if (has("patience"))
    r.patience = static_cast<int>(check_int(pr, at("patience"), j["patience"], 0).value_or(10));
  if (has("min_delta"))
    r.min_delta = check_number(pr, at("min_delta"), j["min_delta"], 0, false, INFINITY, false,
                               "a number >= 0")
                      .value_or(r.min_delta);
  if (has("cooldown"))
    r.cooldown = static_cast<int>(check_int(pr, at("cooldown"), j["cooldown"], 0).value_or(0));
  if (has("min_lr"))
    r.min_lr =
        check_number(pr, at("min_lr"), j["min_lr"], 0, false, INFINITY, false, "a number >= 0")
            .value_or(r.min_lr);
  if (has("mode"))
    r.mode = check_string(pr, at("mode"), j["mode"], {"auto", "min", "max"}).value_or("auto");
  if (s.optimizer.schedule)
    pr.add(p, "a learning-rate schedule (" + s.optimizer.schedule->name +
                  ") cannot be reduced on a plateau, as in Keras (its rate is not settable); "
                  "expected optimizer.learning_rate a number, got a schedule");
  s.reduce_lr_on_plateau = r;
  ex["reduce_lr_on_plateau"] = {{"monitor", r.monitor},   {"factor", r.factor},
                                {"patience", r.patience}, {"min_delta", r.min_delta},
                                {"cooldown", r.cooldown}, {"min_lr", r.min_lr},
                                {"mode", r.mode}};
}

// {class: weight}: keys are class indices (Keras converts them with int()), weights finite and
// non-negative, kept as float32 as Keras's sample weights are.
void class_weight(Problems& pr, const std::string& p, const Json& j, ModelSpec& s, Json& ex) {
  if (!j.is_object() || j.empty()) {
    pr.add(p, "expected a mapping of class indices to weights such as {0: 1.0, 1: 5.0}, got " +
                  show(j));
    return;
  }
  Json out = Json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string kp = child_path(p, it.key());
    const std::string& key = it.key();
    const bool digits =
        !key.empty() && key.size() <= 9 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      pr.add(kp, "bad class index; expected a non-negative integer, got " + show(key));
      continue;
    }
    const auto w = check_number(pr, kp, it.value(), 0, false, INFINITY, true,
                                "a finite number >= 0 (the class's weight)");
    if (!w) continue;
    s.class_weight[std::stoi(key)] = static_cast<float>(*w);
    out[std::to_string(std::stoi(key))] = *w;
  }
  ex["class_weight"] = std::move(out);
}

// weighted_metrics: names as in `metrics`, checked against the loss's targets.
void weighted_metrics(Problems& pr, const std::string& p, const Json& j, ModelSpec& s, Json& ex,
                      std::vector<std::string>& monitors) {
  ex["weighted_metrics"] = j;
  if (!j.is_array()) {
    pr.add(p, "expected a list of metric names, got " + show(j));
    return;
  }
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string ip = index_path(p, i);
    if (!j[i].is_string()) {
      pr.add(ip, "expected a metric name, got " + show(j[i]));
      continue;
    }
    const std::string name = j[i].get<std::string>();
    try {
      const std::string key = metric_key(name);
      if (key != "binary_accuracy") resolve_metric(name, s.loss, 2);
      s.weighted_metrics.push_back(name);
      bool taken = false;
      for (const auto& other : s.metrics) taken = taken || metric_key(other) == key;
      const std::string k = taken ? "weighted_" + key : key;
      monitors.push_back(k);
      monitors.push_back("val_" + k);
    } catch (const ConfigError& e) {
      const std::string prefix = "bad value for '" + e.key() + "'; ";
      const std::string what = e.what();
      pr.add(ip, what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
    }
  }
}

}  // namespace

void fit_options(Problems& pr, const Json& m,
                 const std::function<std::string(const std::string&)>& at,
                 std::vector<std::string> monitors, ModelSpec& s, Json& ex) {
  if (m.contains("weighted_metrics"))
    weighted_metrics(pr, at("weighted_metrics"), m["weighted_metrics"], s, ex, monitors);
  if (m.contains("reduce_lr_on_plateau"))
    reduce_lr_on_plateau(pr, at("reduce_lr_on_plateau"), m["reduce_lr_on_plateau"],
                         std::move(monitors), s, ex);
  if (m.contains("class_weight")) class_weight(pr, at("class_weight"), m["class_weight"], s, ex);
}

}  // namespace nnfleet::plan_detail
