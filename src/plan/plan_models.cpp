// Plan models: the ModelSpec of one expanded entry, field by field in the order its problems are
// listed: name, architecture (layers, each constructed once through the registry, or a Keras
// file and its fine-tuning), data, schedule, losses, metrics, optimizer and callbacks.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>

#include "core/limits.h"
#include "layers/activation_names.h"
#include "layers/registry.h"
#include "model/layer_training.h"
#include "plan/plan_fit.h"
#include "plan/plan_loader.h"

namespace nnfleet::plan_detail {
namespace {

const std::vector<std::string> kEarlyStoppingKeys = {
    "min_delta", "mode", "monitor", "patience", "restore_best_weights", "start_from_epoch"};
constexpr size_t kMaxNameLength = limits::kMaxModelNameLength;
const char* const kDefaultLoss = "sparse_categorical_crossentropy";

// Keras's auto-naming (keras/src/utils/naming.py to_snake_case): "MaxPooling2D" ->
// "max_pooling2d", "BatchNormalization" -> "batch_normalization", "ReLU" -> "re_lu".
std::string snake_case(const std::string& cls) {
  static const std::regex word("(.)([A-Z][a-z]+)");
  static const std::regex hump("([a-z])([A-Z])");
  std::string s = std::regex_replace(std::regex_replace(cls, word, "$1_$2"), hump, "$1_$2");
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// snake_case of a registered kind's class, made once per kind: std::regex_replace took about 30%
// of expanding a tiny 3-layer model, and more on several threads at once (its locale copies
// share one reference count).
const std::string& layer_name_stem(const LayerKindInfo& kind) {
  static const std::vector<std::string> stems = [] {
    std::vector<std::string> v;
    for (const auto& k : layer_kinds()) v.push_back(snake_case(k.class_name));
    return v;
  }();
  return stems.at(static_cast<size_t>(&kind - layer_kinds().data()));
}

// A ConfigError's message without the "bad value for 'units'; " the field path already says.
std::string config_message(const ConfigError& e) {
  const std::string prefix = "bad value for '" + e.key() + "'; ";
  const std::string what = e.what();
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

// The field path of a ConfigError from parse_loss/parse_optimizer on `j` found at `base`.
std::string spec_error_path(const std::string& base, const Json& j, const ConfigError& e,
                            const std::string& self) {
  const std::string& key = e.key();
  if (key.empty() || key == self) return base;
  if (j.is_object() && j.contains("class_name"))
    return j.contains(key) ? child_path(base, key) : child_path(child_path(base, "config"), key);
  if (j.is_object() && j.size() == 1) return child_path(child_path(base, j.begin().key()), key);
  return child_path(base, key);
}

}  // namespace

std::string ModelBuilder::KeyPaths::operator()(const std::string& k) const {
  auto it = base.find(k);
  return child_path(it == base.end() ? entry : it->second, k);
}

ModelSpec ModelBuilder::build(const Json& m, const std::map<std::string, std::string>& base,
                              const std::string& entry) {
  const KeyPaths at{base, entry};
  ModelSpec s;
  s.where = cx_.pr.where(entry);
  Json ex = Json::object();
  model_name(m, at, s, ex);
  model_parameters(m, at, ex);
  model_architecture(m, at, s, ex);
  model_data(m, at, s, ex);
  model_schedule(m, at, s, ex);
  const bool loss_ok = model_losses(m, at, s, ex);
  model_loss_weights(m, at, s, ex);
  std::vector<std::string> monitors = model_metrics(m, at, loss_ok, s, ex);
  model_optimizer(m, at, s, ex);
  model_early_stopping(m, at, monitors, s, ex);
  fit_options(cx_.pr, m, at, monitors, s, ex);
  if (text_) expanded_text(ex, s);
  return s;
}

// ex.dump() into s.expanded, item by item (the same text: a compact object's items are
// "key":value joined by commas, in key order), and kind_key_ made from the same items without
// the ones models of one kind differ in (PlanModels::kind), so at no second dump's cost.
void ModelBuilder::expanded_text(const Json& ex, ModelSpec& s) {
  static const std::set<std::string> kVarying = {"name", "optimizer", "parameters", "seed"};
  std::string text = "{";
  kind_items_.clear();
  for (auto it = ex.begin(); it != ex.end(); ++it) {
    const std::string item = Json(it.key()).dump() + ":" + it.value().dump();
    if (text.size() > 1) text += ',';
    text += item;
    if (!kVarying.count(it.key())) kind_items_ += item + ",";
  }
  text += '}';
  kind_key_ = kind_items_ + optimizer_kind(s.optimizer);
  s.expanded = std::move(text);
  s.expanded.shrink_to_fit();  // the text grew by doubling: half of it would be slack
}

std::string ModelBuilder::optimizer_kind(const OptimizerSpec& o) {
  return Json{static_cast<int>(o.kind), o.momentum != 0.0,     o.nesterov, o.amsgrad, o.centered,
              o.weight_decay != 0.0,    o.schedule.has_value()}
      .dump();
}

void ModelBuilder::model_name(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  if (!m.contains("name")) {
    cx_.pr.add(child_path(at.entry, "name"), "required key missing; expected a model name");
  } else if (!m["name"].is_string()) {
    cx_.pr.add(at("name"),
               "expected a string (quote a name that reads as a number), got " + show(m["name"]));
  } else {
    s.name = m["name"].get<std::string>();
    check_name(at("name"), s.name);
  }
  ex["name"] = s.name;
}

// parameters: what results record as the model's parameters (a search's trial: what it drew).
void ModelBuilder::model_parameters(const Json& m, const KeyPaths& at, Json& ex) {
  if (!m.contains("parameters") || m["parameters"].is_null()) return;
  const Json& p = m["parameters"];
  if (!p.is_object())
    cx_.pr.add(
        at("parameters"),
        "expected a mapping of parameter names to values, such as {lr: 0.001}, got " + show(p));
  else
    ex["parameters"] = p;
}

// layers or keras (with its fine-tuning options).
void ModelBuilder::model_architecture(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  const bool has_layers = m.contains("layers"), has_keras = m.contains("keras");
  if (has_layers && has_keras)
    cx_.pr.add(at("keras"),
               "layers and keras are mutually exclusive; expected one of them, got both");
  if (!has_layers && !has_keras)
    cx_.pr.add(at.entry,
               "no architecture; expected layers (a list of {Class: config}) or keras (a "
               "Keras model file), got neither");
  if (has_keras) {
    const Json& k = m["keras"];
    if (k.is_string() && !k.get<std::string>().empty())
      s.keras = cx_.resolve(k.get<std::string>());
    else
      cx_.pr.add(at("keras"), "expected the path of a Keras model file, got " + show(k));
    ex["keras"] = s.keras;
  }
  if (has_layers) layers(m["layers"], at("layers"), s, ex);
  fine_tuning(m, at, s, ex);
}

// The model's own data (a source added to the plan's list), else the plan's.
void ModelBuilder::model_data(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  if (m.contains("data")) {
    DataSpec d = read_data(cx_, at("data"), m["data"]);
    d.where = cx_.pr.where(at("data")) + " (model '" + s.name + "')";
    ex["data"] = d.to_json();
    if (sources_) s.source = add_source(std::move(d), *sources_);
  } else if (!has_default_) {
    cx_.pr.add(at.entry,
               "no data for model '" + s.name +
                   "'; expected data: in the model entry, in defaults or at the top of the plan");
  }
}

std::vector<std::string> ModelBuilder::name_problems(const std::string& name) {
  if (name.empty()) return {"empty model name; expected a name safe as a file name, got \"\""};
  std::vector<std::string> out;
  std::string bad;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        bad.find(c) == std::string::npos)
      bad += c;
  if (!bad.empty())
    out.push_back("model name " + show(name) + " is not safe as a file name; expected only " +
                  "letters, digits, '.', '_' and '-', got " + show(bad));
  if (name[0] == '.')
    out.push_back("model name " + show(name) + " starts with '.'; expected a name that is " +
                  "not a hidden file, got " + show(name));
  if (name.size() > kMaxNameLength)
    out.push_back("model name " + show(name) + " is too long; expected at most " +
                  std::to_string(kMaxNameLength) + " characters, got " +
                  std::to_string(name.size()));
  return out;
}

void ModelBuilder::check_name(const std::string& path, const std::string& name) {
  for (const std::string& p : name_problems(name)) cx_.pr.add(path, p);
}

// epochs, batch_size, batch_split and shuffle.
void ModelBuilder::model_schedule(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  if (m.contains("epochs"))
    s.epochs = static_cast<int>(check_int(cx_.pr, at("epochs"), m["epochs"], 1).value_or(1));
  if (m.contains("batch_size"))
    s.batch_size =
        static_cast<int>(check_int(cx_.pr, at("batch_size"), m["batch_size"], 1).value_or(32));
  if (m.contains("batch_split") && !m["batch_split"].is_null())
    s.batch_split =
        static_cast<int>(check_int(cx_.pr, at("batch_split"), m["batch_split"], 1).value_or(0));
  if (m.contains("shuffle"))
    s.shuffle = check_bool(cx_.pr, at("shuffle"), m["shuffle"]).value_or(true);
  ex["epochs"] = s.epochs;
  ex["batch_size"] = s.batch_size;
  if (s.batch_split > 0) ex["batch_split"] = s.batch_split;
  ex["shuffle"] = s.shuffle;
}

// loss: one, or one per output (a list in output order, a map by output name); false when a
// loss is not valid.
bool ModelBuilder::model_losses(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  const Json loss = m.contains("loss") ? m["loss"] : Json(kDefaultLoss);
  bool loss_ok = true;
  // One loss, or one per output (a list in output order, a map by output name).
  auto known_loss = [](const std::string& k) {
    try {
      parse_loss(Json(k));
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  const bool per_output =
      loss.is_array() ||
      (loss.is_object() && !loss.contains("class_name") &&
       (loss.size() > 1 || (loss.size() == 1 && !known_loss(loss.begin().key()))));
  auto parse_one = [&](const Json& l, const std::string& p) -> std::optional<LossSpec> {
    try {
      return parse_loss(l);
    } catch (const ConfigError& e) {
      cx_.pr.add(spec_error_path(p, l, e, "loss"), config_message(e));
      loss_ok = false;
    }
    return std::nullopt;
  };
  if (!per_output) {
    if (auto l = parse_one(loss, at("loss"))) s.loss = *l;
  } else if (loss.empty()) {
    cx_.pr.add(at("loss"), "expected a loss, or one per output, got " + show(loss));
    loss_ok = false;
  } else if (loss.is_array()) {
    for (size_t i = 0; i < loss.size(); ++i)
      if (auto l = parse_one(loss[i], index_path(at("loss"), i)))
        s.output_losses.push_back({"", *l});
  } else {
    for (auto it = loss.begin(); it != loss.end(); ++it)
      if (auto l = parse_one(it.value(), child_path(at("loss"), it.key())))
        s.output_losses.push_back({it.key(), *l});
  }
  if (!s.output_losses.empty()) s.loss = s.output_losses[0].second;
  ex["loss"] = loss;
  return loss_ok;
}

// loss_weights: one per output (a list, or a map by output name).
void ModelBuilder::model_loss_weights(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  if (m.contains("loss_weights") && !m["loss_weights"].is_null()) {
    const Json& w = m["loss_weights"];
    const std::string p = at("loss_weights");
    if (w.is_array() && !w.empty()) {
      for (size_t i = 0; i < w.size(); ++i)
        if (auto x = check_number(cx_.pr, index_path(p, i), w[i], 0, false, INFINITY, false,
                                  "a weight >= 0"))
          s.loss_weights.push_back({"", *x});
    } else if (w.is_object() && !w.empty()) {
      for (auto it = w.begin(); it != w.end(); ++it)
        if (auto x = check_number(cx_.pr, child_path(p, it.key()), it.value(), 0, false, INFINITY,
                                  false, "a weight >= 0"))
          s.loss_weights.push_back({it.key(), *x});
    } else {
      cx_.pr.add(
          p, "expected a list of weights (one per output) or a map by output name, got " + show(w));
    }
    ex["loss_weights"] = w;
  }
}

// metrics (whether they fit the loss, when `loss_ok`); returns the names a callback may monitor.
std::vector<std::string> ModelBuilder::model_metrics(const Json& m, const KeyPaths& at,
                                                     bool loss_ok, ModelSpec& s, Json& ex) {
  // Metrics are resolved against the data's shape when the fleet starts; here the names and
  // whether they fit the loss.
  std::vector<std::string> monitors = {"loss", "val_loss"};
  const Json metrics = m.contains("metrics") ? m["metrics"] : Json::array({"accuracy"});
  if (!metrics.is_array()) {
    cx_.pr.add(at("metrics"), "expected a list of metric names, got " + show(metrics));
  } else {
    for (size_t i = 0; i < metrics.size(); ++i) {
      const std::string p = index_path(at("metrics"), i);
      if (!metrics[i].is_string()) {
        cx_.pr.add(p, "expected a metric name, got " + show(metrics[i]));
        continue;
      }
      const std::string name = metrics[i].get<std::string>();
      try {
        const std::string key = metric_key(name);
        // Whether a metric fits the loss's targets does not depend on the number of outputs K,
        // except for binary_accuracy with integer labels (valid only when K == 1).
        if (loss_ok && key != "binary_accuracy") resolve_metric(name, s.loss, 2);
        s.metrics.push_back(name);
        for (const auto& n : {name, key}) {
          monitors.push_back(n);
          monitors.push_back("val_" + n);
        }
      } catch (const ConfigError& e) {
        cx_.pr.add(p, config_message(e));
      }
    }
  }
  ex["metrics"] = metrics;

  return monitors;
}

void ModelBuilder::model_optimizer(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  const Json opt =
      m.contains("optimizer") ? m["optimizer"] : Json::object({{"Adam", Json::object()}});
  try {
    s.optimizer = parse_optimizer(opt);
  } catch (const ConfigError& e) {
    cx_.pr.add(spec_error_path(at("optimizer"), opt, e, "optimizer"), config_message(e));
  }
  ex["optimizer"] = opt;
}

// early_stopping (its monitor one of `monitors`, which it leaves sorted and unique).
void ModelBuilder::model_early_stopping(const Json& m, const KeyPaths& at,
                                        std::vector<std::string>& monitors, ModelSpec& s,
                                        Json& ex) {
  ex["early_stopping"] = nullptr;
  if (m.contains("early_stopping")) {
    const std::string p = at("early_stopping");
    const Json& j = m["early_stopping"];
    if (!j.is_object()) {
      cx_.pr.add(p, "expected a mapping with keys " + join(kEarlyStoppingKeys) + ", or null, got " +
                        show(j));
    } else {
      check_keys(cx_.pr, p, j, kEarlyStoppingKeys);
      EarlyStopping es;
      auto has = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
      if (has("monitor")) {
        std::sort(monitors.begin(), monitors.end());
        monitors.erase(std::unique(monitors.begin(), monitors.end()), monitors.end());
        es.monitor = check_string(cx_.pr, child_path(p, "monitor"), j["monitor"], monitors)
                         .value_or(es.monitor);
      }
      if (has("patience"))
        es.patience = static_cast<int>(
            check_int(cx_.pr, child_path(p, "patience"), j["patience"], 0).value_or(0));
      if (has("min_delta"))
        es.min_delta = check_number(cx_.pr, child_path(p, "min_delta"), j["min_delta"], 0, false,
                                    INFINITY, false, "a number >= 0")
                           .value_or(0.0);
      if (has("restore_best_weights"))
        es.restore_best_weights =
            check_bool(cx_.pr, child_path(p, "restore_best_weights"), j["restore_best_weights"])
                .value_or(false);
      if (has("mode"))
        es.mode = check_string(cx_.pr, child_path(p, "mode"), j["mode"], {"auto", "min", "max"})
                      .value_or("auto");
      if (has("start_from_epoch"))
        es.start_from_epoch = static_cast<int>(
            check_int(cx_.pr, child_path(p, "start_from_epoch"), j["start_from_epoch"], 0)
                .value_or(0));
      s.early_stopping = es;
      ex["early_stopping"] = {
          {"monitor", es.monitor},     {"patience", es.patience},
          {"min_delta", es.min_delta}, {"restore_best_weights", es.restore_best_weights},
          {"mode", es.mode},           {"start_from_epoch", es.start_from_epoch}};
    }
  }
}

std::string ModelBuilder::layer_name(const std::string& stem, std::map<std::string, int>& counters,
                                     const std::map<std::string, std::string>& used) {
  int& n = counters[stem];
  std::string name;
  do {
    name = n == 0 ? stem : stem + "_" + std::to_string(n);
    ++n;
  } while (used.count(name));
  return name;
}

// "- call: dense_1": layer dense_1 (an earlier one) applied again, sharing its weights.
void ModelBuilder::call_layer(const Json& name, const std::string& cp,
                              const std::map<std::string, std::string>& used, ModelSpec& s,
                              Json& out) {
  const LayerEntry* owner = nullptr;
  if (name.is_string())
    for (const LayerEntry& e : s.layers)
      if (e.call.empty() && e.config.value("name", Json()) == name) owner = &e;
  if (!owner) {
    std::string names;
    for (const auto& [n, where] : used) names += (names.empty() ? "" : ", ") + n;
    cx_.pr.add(cp, "expected the name of an earlier layer of this model (" +
                       (names.empty() ? std::string("none yet") : names) +
                       ") to call again with its weights, got " + show(name));
    return;
  }
  out.push_back(Json{{"call", name}});
  LayerEntry e{owner->class_name, owner->config, cx_.pr.where(cp)};
  e.call = name.get<std::string>();
  s.layers.push_back(std::move(e));
}

void ModelBuilder::layers(const Json& list, const std::string& path, ModelSpec& s, Json& ex) {
  if (!list.is_array() || list.empty()) {
    cx_.pr.add(path, "expected a non-empty list of layers such as [Flatten: {}, Dense: {units: " +
                         std::string("10}], got ") + show(list));
    return;
  }
  std::map<std::string, int> counters;      // per class, for default names
  std::map<std::string, std::string> used;  // layer name -> its field path
  Json out = Json::array();
  for (size_t j = 0; j < list.size(); ++j) {
    const std::string ip =
        layer_paths_ && j < layer_paths_->size() ? (*layer_paths_)[j] : index_path(path, j);
    const Json& item = list[j];
    std::string cls;
    Json cfg;
    if (item.is_object() && item.size() == 1 && item.begin().key() == "call") {
      call_layer(item["call"], child_path(ip, "call"), used, s, out);
      continue;
    }
    if (item.is_string()) {  // "- Flatten" is short for "- Flatten: {}"
      cls = item.get<std::string>();
    } else if (item.is_object() && item.size() == 1) {
      cls = item.begin().key();
      cfg = item.begin().value();
    } else {
      cx_.pr.add(ip, "a layer is a mapping with one key, its class; expected {Class: {config}} " +
                         std::string("such as {Dense: {units: 10}} (indent the config under the ") +
                         "class), got " + show(item));
      continue;
    }
    if (cfg.is_null()) cfg = Json::object();
    const std::string cp = child_path(ip, cls);
    const LayerKindInfo* kind = find_layer_kind(cls);
    if (!kind) {
      cx_.pr.add(ip, "unknown layer class '" + cls + "'; expected one of " + layer_kind_names() +
                         near_miss(cls, layer_class_names()));
      continue;
    }
    if (!cfg.is_object()) {
      cx_.pr.add(cp, "expected a mapping of " + cls + " options, got " + show(cfg));
      continue;
    }
    if (!cfg.contains("name") || cfg["name"].is_null())
      cfg["name"] = layer_name(layer_name_stem(*kind), counters, used);
    try {
      check_layer(cls, cfg);
    } catch (const ConfigError& e) {
      std::string hint;
      if (e.key() == "activation" && cfg["activation"].is_string())
        hint = near_miss(cfg["activation"].get<std::string>(), activation_names());
      cx_.pr.add(e.key().empty() ? cp : child_path(cp, e.key()), config_message(e) + hint);
    } catch (const Error& e) {
      cx_.pr.add(cp, e.what());
    }
    if (cfg["name"].is_string()) {
      const std::string name = cfg["name"].get<std::string>();
      auto [it, fresh] = used.emplace(name, ip);
      if (!fresh)
        cx_.pr.add(child_path(cp, "name"), "duplicate layer name '" + name + "'; expected names " +
                                               "unique within a model, got it again (first at " +
                                               it->second + ")");
    }
    Json entry = Json::object();
    entry[cls] = cfg;
    out.push_back(std::move(entry));
    s.layers.push_back({cls, std::move(cfg), cx_.pr.where(cp)});
  }
  ex["layers"] = std::move(out);
}

void ModelBuilder::fine_tuning(const Json& m, const KeyPaths& at, ModelSpec& s, Json& ex) {
  const bool keras = m.contains("keras");
  auto needs_keras = [&](const char* k) {
    if (m.contains(k) && !m[k].is_null() && !keras)
      cx_.pr.add(at(k), std::string(k) +
                            " applies to a `keras:` model; expected it with keras: "
                            "(a plan's own layers take trainable: false instead)");
  };
  if (m.contains("freeze") && !m["freeze"].is_null()) {
    needs_keras("freeze");
    const Json& f = m["freeze"];
    if (!f.is_array()) {
      cx_.pr.add(at("freeze"), "expected a list of layer names or indices, got " + show(f));
    } else {
      for (size_t i = 0; i < f.size(); ++i) {
        const std::string p = index_path(at("freeze"), i);
        if (f[i].is_string() || (f[i].is_number_integer() && f[i].get<int64_t>() >= 0)) {
          s.freeze.push_back(f[i]);
          s.freeze_where.push_back(cx_.pr.where(p));
        } else {
          cx_.pr.add(p, "expected a layer name or an index >= 0, got " + show(f[i]));
        }
      }
    }
    ex["freeze"] = f;
  }
  if (m.contains("unfreeze_from") && !m["unfreeze_from"].is_null()) {
    needs_keras("unfreeze_from");
    if (m["unfreeze_from"].is_string() && !m["unfreeze_from"].get<std::string>().empty()) {
      s.unfreeze_from = m["unfreeze_from"].get<std::string>();
      s.unfreeze_from_where = cx_.pr.where(at("unfreeze_from"));
    } else {
      cx_.pr.add(at("unfreeze_from"), "expected a layer name, got " + show(m["unfreeze_from"]));
    }
    ex["unfreeze_from"] = m["unfreeze_from"];
  }
  if (m.contains("restore_optimizer") && !m["restore_optimizer"].is_null()) {
    needs_keras("restore_optimizer");
    const std::string p = at("restore_optimizer");
    if (!m["restore_optimizer"].is_boolean()) {
      cx_.pr.add(p, "expected true or false, got " + show(m["restore_optimizer"]));
    } else if ((s.restore_optimizer = m["restore_optimizer"].get<bool>())) {
      // Keras's load_model: the file's optimizer, its configuration and its state, for the
      // file's trainable weights.
      if (m.contains("optimizer") && !m["optimizer"].is_null())
        cx_.pr.add(p,
                   "restore_optimizer trains with the file's optimizer and its state; expected "
                   "no optimizer for this model (remove one of them)");
      if (!s.freeze.empty() || !s.unfreeze_from.empty())
        cx_.pr.add(p,
                   "restore_optimizer keeps the state of the file's trainable weights; expected "
                   "no freeze or unfreeze_from with it (they change which weights train)");
    }
    ex["restore_optimizer"] = m["restore_optimizer"];
  }
}

void ModelBuilder::check_layer(const std::string& cls, const Json& cfg) {
  if (!check_layers_) return;
  std::string key = cls + '\n' + cfg.dump();
  if (checked_layers_.count(key)) return;
  make_layer_with_training(cls, cfg, ConfigMode::kPlan, "");
  if (checked_layers_.size() < kMaxCheckedLayers) checked_layers_.insert(std::move(key));
}

}  // namespace nnfleet::plan_detail
