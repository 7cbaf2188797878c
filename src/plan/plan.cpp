// Plan loading: the file is read as YAML (JSON is YAML too), converted to JSON with the line of
// every field, checked field by field with every problem collected, and each model entry is
// merged over `defaults` and expanded over its grid into ModelSpecs.
#include "plan/plan.h"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "data/memory_arrays.h"
#include "layers/activation_names.h"
#include "layers/registry.h"
#include "model/layer_training.h"
#include "plan/plan_fit.h"
#include "plan/plan_problems.h"
#include "plan/plan_yaml.h"
#include "plan/yaml_emitter.h"
#include "platform/cpu.h"
#include "platform/files.h"
#include "core/limits.h"
#include "platform/parallel.h"

namespace nnfleet {
namespace {

namespace fs = std::filesystem;
using plan_detail::check_bool;
using plan_detail::check_int;
using plan_detail::check_keys;
using plan_detail::check_number;
using plan_detail::check_string;
using plan_detail::child_path;
using plan_detail::index_path;
using plan_detail::join;
using plan_detail::LocatedJson;
using plan_detail::near_miss;
using plan_detail::Problems;

const std::vector<std::string> kTopKeys = {"data", "defaults", "models", "seed"};
const std::vector<std::string> kDataKeys = {"scale", "test", "train", "validation_split"};
const std::vector<std::string> kModelKeys = {"batch_size",
                                             "batch_split",
                                             "class_weight",
                                             "data",
                                             "early_stopping",
                                             "epochs",
                                             "freeze",
                                             "grid",
                                             "keras",
                                             "layers",
                                             "loss",
                                             "loss_weights",
                                             "metrics",
                                             "name",
                                             "optimizer",
                                             "reduce_lr_on_plateau",
                                             "restore_optimizer",
                                             "shuffle",
                                             "unfreeze_from",
                                             "weighted_metrics"};
const std::vector<std::string> kDefaultsKeys = {"batch_size",
                                                "batch_split",
                                                "class_weight",
                                                "data",
                                                "early_stopping",
                                                "epochs",
                                                "freeze",
                                                "keras",
                                                "layers",
                                                "loss",
                                                "loss_weights",
                                                "metrics",
                                                "optimizer",
                                                "reduce_lr_on_plateau",
                                                "restore_optimizer",
                                                "shuffle",
                                                "unfreeze_from",
                                                "weighted_metrics"};
const std::vector<std::string> kEarlyStoppingKeys = {
    "min_delta", "mode", "monitor", "patience", "restore_best_weights", "start_from_epoch"};
// Key order in plan.yaml; other keys follow sorted.
// clang-format off
const std::vector<std::string> kYamlOrder = {
    "name", "seed", "data", "train", "test", "scale", "validation_split", "models", "keras",
    "epochs", "batch_size", "batch_split", "shuffle", "loss", "loss_weights", "metrics", "optimizer", "early_stopping",
    "monitor", "patience", "min_delta", "restore_best_weights", "mode", "start_from_epoch",
    "weighted_metrics", "reduce_lr_on_plateau", "factor", "cooldown", "min_lr", "class_weight",
    "layers"};
// clang-format on
constexpr size_t kMaxModelsPerEntry = limits::kMaxModelsPerEntry;
constexpr size_t kMaxNameLength = limits::kMaxModelNameLength;
const char* const kDefaultLoss = "sparse_categorical_crossentropy";

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

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

// The name a loss or optimizer is written with: "adam", {Adam: {...}} or {class_name: Adam, ...}.
std::string spec_name(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("class_name") && j["class_name"].is_string())
    return j["class_name"].get<std::string>();
  if (j.is_object() && j.size() == 1) return j.begin().key();
  return "";
}

// Text of a grid value inside a longer string; numbers compact (0.001, 32).
std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return plan_detail::number_text(v.get<double>());
  return v.dump();  // integers, bools, null
}

// Replaces "{var}" placeholders with grid values. A string that is exactly "{var}" takes the
// value itself (a number stays a number) unless `exact` is off; elsewhere the value's text is
// spliced in. Mapping keys are substituted as text.
struct Substituter {
  Problems& pr;
  const std::map<std::string, Json>& values;
  std::string vars;  // "units, lr" for messages

  void apply(Json& v, const std::string& path, bool exact) {
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (exact && s.size() > 2 && s.front() == '{' && s.back() == '}' &&
          is_identifier(s.substr(1, s.size() - 2))) {
        auto it = values.find(s.substr(1, s.size() - 2));
        if (it != values.end()) {
          v = it->second;
          return;
        }
      }
      v = text(s, path);
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) apply(v[i], index_path(path, i), exact);
    } else if (v.is_object()) {
      // Values are moved, not copied: a copy per level made expanding a model quadratic in its
      // nesting.
      Json out = Json::object();
      for (auto it = v.begin(); it != v.end(); ++it) {
        Json item = std::move(it.value());
        apply(item, child_path(path, it.key()), exact);
        out[text(it.key(), path)] = std::move(item);
      }
      v = std::move(out);
    }
  }

  std::string text(const std::string& s, const std::string& path) {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      const size_t open = s.find('{', i);
      const size_t close = open == std::string::npos ? open : s.find('}', open);
      if (close == std::string::npos) break;
      const std::string var = s.substr(open + 1, close - open - 1);
      out += s.substr(i, open - i);
      i = close + 1;
      if (!is_identifier(var)) {  // not a placeholder: keep "{" and rescan after it
        out += '{';
        i = open + 1;
        continue;
      }
      auto it = values.find(var);
      if (it == values.end()) {
        pr.add(path, "unknown placeholder '{" + var + "}'; expected " +
                         (vars.empty() ? std::string("none, as this model has no grid")
                                       : "one of the grid's vars: " + vars));
        out += "{" + var + "}";
        pr.mute(path);
      } else if (it->second.is_structured()) {
        pr.add(path, "placeholder '{" + var + "}' inside a longer string; expected a string, " +
                         "number or bool grid value, got " + show(it->second));
        out += "{" + var + "}";
        pr.mute(path);
      } else {
        out += value_text(it->second);
      }
    }
    return out + s.substr(std::min(i, s.size()));
  }
};

}  // namespace

namespace plan_detail {
// What expands a plan's models after load_plan: the document (for the lines of messages and of
// ModelSpec::where), and every entry once, merged over `defaults`.
class ModelExpander {
 public:
  struct Entry {
    Json merged;                              // the entry over `defaults`, placeholders kept
    std::map<std::string, std::string> base;  // key -> where it came from ("defaults", "models[0]")
    std::string path;                         // "models[0]"
    std::vector<std::pair<std::string, Json>> vars;  // the grid in written order, each its values
  };
  ModelExpander(std::string file, fs::path dir) : file(std::move(file)), dir(std::move(dir)) {}
  // The model at `r`, as load_plan checked it (without constructing its layers again).
  ModelSpec expand(const ModelRef& r) const;

  std::string file;  // the plan's path as given, for messages
  fs::path dir;      // relative file names are taken from here
  LocatedJson doc;
  std::vector<Entry> entries;
};
}  // namespace plan_detail

namespace {

using plan_detail::ModelExpander;
using plan_detail::ModelRef;

class Loader {
 public:
  Loader(const LocatedJson& doc, Problems& pr, fs::path dir)
      : doc_(doc), pr_(pr), dir_(std::move(dir)) {}
  // A loader for expanding `o`'s models apart (on another thread), reporting into `pr`: the same
  // document, defaults and checked layers; no data sources (only models without data of their
  // own are expanded apart).
  Loader(const Loader& o, Problems& pr)
      : doc_(o.doc_),
        pr_(pr),
        dir_(o.dir_),
        has_default_(o.has_default_),
        check_layers_(o.check_layers_),
        checked_layers_(o.checked_layers_) {}
  // Up to how many threads models() may check the models of one entry on (1: this one only).
  void set_threads(int n) { threads_ = n; }

  // A data mapping at field path `path` ("data", "models[2].data").
  DataSpec data(const std::string& path, const Json& v);
  // The index of `d` in `sources`, appended when no source there has the same form.
  size_t add_source(DataSpec d, std::vector<DataSpec>& sources) const;
  // The plan's `data:` (sources[0]) when it has one: the source of models without their own.
  void set_default_source(std::vector<DataSpec>* sources, bool has_default) {
    sources_ = sources;
    has_default_ = has_default;
  }
  // Appends the entries of `list`, merged over `defaults`, to `ex`, and a ref per model of their
  // grids to `out`, each model expanded and checked once.
  void models(const Json& defaults, const Json& list, ModelExpander& ex,
              std::vector<ModelRef>& out);
  // Point `point` of entry `e`'s grid, expanded into its ModelSpec.
  ModelSpec expand(const ModelExpander::Entry& e, size_t point);
  bool grid(const Json& e, const std::string& ep, std::vector<std::pair<std::string, Json>>& vars,
            size_t& count);
  void merge(const Json& defaults, const Json& e, const std::string& ep, ModelExpander::Entry& out);
  // Expanding models load_plan checked already: their layers are not constructed again (about
  // half the time of expanding a tiny model), and their data source is already known.
  void set_checked() {
    check_layers_ = false;
    has_default_ = true;
  }

 private:
  struct Expanded {
    std::string name_path;      // "models[0].name"
    std::string entry;          // "models[0]"
    std::string name_template;  // the name as written
    std::vector<std::string> grid_vars;
  };

  std::string resolve(const std::string& p) const {
    // An array the caller holds in memory (data/memory_arrays.h), not a file.
    if (p.rfind(kMemoryArrayPrefix, 0) == 0) return p;
    fs::path q(p);
    if (q.is_relative()) q = dir_ / q;
    return q.lexically_normal().string();
  }
  std::optional<DataSource> source(const std::string& path, const Json& v);
  ModelSpec model(const Json& m, const std::map<std::string, std::string>& base,
                  const std::string& entry);
  void layers(const Json& list, const std::string& path, ModelSpec& s, Json& ex);
  // freeze and unfreeze_from of a `keras:` model (`at` gives a key's path).
  template <typename At>
  void fine_tuning(const Json& m, At at, ModelSpec& s, Json& ex);
  // The parts of a model entry, in the order their problems are listed (`at` gives a key's path).
  template <typename At>
  void model_schedule(const Json& m, At at, ModelSpec& s, Json& ex);
  template <typename At>
  bool model_losses(const Json& m, At at, ModelSpec& s, Json& ex);
  template <typename At>
  void model_loss_weights(const Json& m, At at, ModelSpec& s, Json& ex);
  template <typename At>
  std::vector<std::string> model_metrics(const Json& m, At at, bool loss_ok, ModelSpec& s,
                                         Json& ex);
  template <typename At>
  void model_optimizer(const Json& m, At at, ModelSpec& s, Json& ex);
  template <typename At>
  void model_early_stopping(const Json& m, At at, std::vector<std::string>& monitors, ModelSpec& s,
                            Json& ex);
  void check_name(const std::string& path, const std::string& name);
  void check_unique_names(const std::vector<ModelRef>& models);
  void expand_entry(const ModelExpander::Entry& e, uint32_t index, size_t count,
                    std::vector<ModelRef>& out);
  void expand_entry_apart(const ModelExpander::Entry& e, uint32_t index, size_t count,
                          std::vector<ModelRef>& out);

  const LocatedJson& doc_;
  Problems& pr_;
  fs::path dir_;
  std::vector<DataSpec>* sources_ = nullptr;
  // Constructs a layer through the registry, which throws what is wrong with its config, unless
  // the same class and config was constructed before (a grid over anything but its layers
  // repeats them: the 8,000 models of an 8 x 1,000 grid over units and learning rate have 8
  // distinct Dense configs).
  void check_layer(const std::string& cls, const Json& cfg) {
    if (!check_layers_) return;
    std::string key = cls + '\n' + cfg.dump();
    if (checked_layers_.count(key)) return;
    make_layer_with_training(cls, cfg, ConfigMode::kPlan, "");
    if (checked_layers_.size() < kMaxCheckedLayers) checked_layers_.insert(std::move(key));
  }
  static constexpr size_t kMaxCheckedLayers = 4096;  // bounds what a plan's load holds for this

  bool has_default_ = false;
  bool check_layers_ = true;
  int threads_ = 1;
  // Models per share when an entry's are checked on several threads: 64 tiny ones are about
  // 2 ms of a thread's work.
  static constexpr size_t kBlock = 64;
  std::set<std::string> checked_layers_;  // class and config of layers constructed without error
  std::vector<Expanded> entries_;         // one per plan entry that expanded (ModelRef::entry)
};

std::optional<DataSource> Loader::source(const std::string& path, const Json& v) {
  static const std::string forms =
      "fashion-mnist:train, fashion-mnist:test, {x: x.npy, y: y.npy}, "
      "{npz: d.npz, x: key, y: key}, {csv: f.csv, label: column} or "
      "{idx_images: file, idx_labels: file} (x and y of npy and npz sources may be lists, one "
      "per model input and output)";
  DataSource s;
  if (v.is_string()) {
    const std::string t = v.get<std::string>();
    if (t == "fashion-mnist:train" || t == "fashion-mnist:test") {
      s.kind = DataSource::Kind::kFashionMnist;
      s.split = t.substr(t.find(':') + 1);
      return s;
    }
    pr_.add(path, "unknown data source; expected " + forms + ", got " + show(v));
    return std::nullopt;
  }
  std::vector<std::string> keys;
  if (v.is_object() && v.contains("npz")) {
    s.kind = DataSource::Kind::kNpz;
    keys = {"npz", "sample_weight", "x", "y"};
  } else if (v.is_object() && v.contains("csv")) {
    s.kind = DataSource::Kind::kCsv;
    keys = {"csv", "label"};
  } else if (v.is_object() && (v.contains("idx_images") || v.contains("idx_labels"))) {
    s.kind = DataSource::Kind::kIdx;
    keys = {"idx_images", "idx_labels"};
  } else if (v.is_object() && (v.contains("x") || v.contains("y"))) {
    s.kind = DataSource::Kind::kNpy;
    keys = {"sample_weight", "x", "y"};
  } else {
    pr_.add(path, "unknown form of data source; expected " + forms + ", got " + show(v));
    return std::nullopt;
  }
  check_keys(pr_, path, v, keys);
  bool ok = true;
  auto field = [&](const std::string& key, bool is_file, const char* what) -> std::string {
    const std::string p = child_path(path, key);
    if (!v.contains(key) || v[key].is_null()) {
      pr_.add(p, "required key missing; expected " + std::string(what));
    } else if (!v[key].is_string() || v[key].get<std::string>().empty()) {
      pr_.add(p, "expected " + std::string(what) + ", got " + show(v[key]));
    } else {
      return is_file ? resolve(v[key].get<std::string>()) : v[key].get<std::string>();
    }
    ok = false;
    return "";
  };
  // x: [a, b] and y: [c, d] (several model inputs and outputs): the first stays in x and y, the
  // others go to more_x and more_y.
  auto list_field = [&](const std::string& key, bool is_file, const char* what, std::string& first,
                        std::vector<std::string>& more) {
    if (!v.contains(key) || !v[key].is_array()) {
      first = field(key, is_file, what);
      return;
    }
    const Json& a = v[key];
    if (a.empty()) {
      pr_.add(child_path(path, key), "expected at least one entry (" + std::string(what) + ")");
      ok = false;
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string() || a[i].get<std::string>().empty()) {
        pr_.add(index_path(child_path(path, key), i),
                "expected " + std::string(what) + ", got " + show(a[i]));
        ok = false;
        continue;
      }
      const std::string e = is_file ? resolve(a[i].get<std::string>()) : a[i].get<std::string>();
      if (i == 0)
        first = e;
      else
        more.push_back(e);
    }
  };
  switch (s.kind) {
    case DataSource::Kind::kNpz:
      s.file = field("npz", true, "an .npz file path");
      list_field("x", false, "the name of an array in the .npz", s.x, s.more_x);
      list_field("y", false, "the name of an array in the .npz", s.y, s.more_y);
      if (v.contains("sample_weight"))
        s.sample_weight = field("sample_weight", false, "the name of an array in the .npz");
      break;
    case DataSource::Kind::kCsv:
      s.file = field("csv", true, "a .csv file path");
      s.label = field("label", false, "the name of the label column");
      break;
    case DataSource::Kind::kIdx:
      s.x = field("idx_images", true, "an IDX images file path");
      s.y = field("idx_labels", true, "an IDX labels file path");
      break;
    default:
      list_field("x", true, "an .npy file path", s.x, s.more_x);
      list_field("y", true, "an .npy file path", s.y, s.more_y);
      if (v.contains("sample_weight"))
        s.sample_weight = field("sample_weight", true, "an .npy file path");
      break;
  }
  if (!ok) return std::nullopt;
  return s;
}

DataSpec Loader::data(const std::string& path, const Json& v) {
  DataSpec d;
  if (!v.is_object()) {
    pr_.add(path, "expected a mapping with keys " + join(kDataKeys) + ", got " + show(v));
    return d;
  }
  check_keys(pr_, path, v, kDataKeys);
  const std::string train = child_path(path, "train"), test = child_path(path, "test");
  if (!v.contains("train") || v["train"].is_null()) {
    pr_.add(train,
            "required key missing; expected a data source such as "
            "fashion-mnist:train or {x: x.npy, y: y.npy}");
  } else if (auto s = source(train, v["train"])) {
    d.train = *s;
  }
  if (v.contains("test") && !v["test"].is_null()) d.test = source(test, v["test"]);
  if (v.contains("scale") && !v["scale"].is_null())
    d.scale = check_number(pr_, child_path(path, "scale"), v["scale"], 0, true, INFINITY, false,
                           "a positive number")
                  .value_or(1.0);
  const std::string split = child_path(path, "validation_split");
  if (v.contains("validation_split") && !v["validation_split"].is_null())
    d.validation_split =
        check_number(pr_, split, v["validation_split"], 0, false, 1, true, "a number in [0, 1)")
            .value_or(0.0);
  d.validation_split_where = pr_.where(v.contains("validation_split") ? split : path);
  return d;
}

size_t Loader::add_source(DataSpec d, std::vector<DataSpec>& sources) const {
  const Json form = d.to_json();
  for (size_t i = 0; i < sources.size(); ++i)
    if (sources[i].to_json() == form) return i;
  sources.push_back(std::move(d));
  return sources.size() - 1;
}

// Models the entries of `list` expand to, counted before any is expanded, saturating just past
// limits::kMaxPlanModels (a grid that is not a mapping of non-empty lists counts 1 here: its
// problem is reported while expanding).
size_t planned_models(const Json& list) {
  constexpr size_t kPast = limits::kMaxPlanModels + 1;
  size_t total = 0;
  for (const auto& e : list) {
    size_t count = 1;
    if (e.is_object() && e.contains("grid") && e["grid"].is_object())
      for (const auto& values : e["grid"])
        if (values.is_array() && !values.empty()) count = std::min(count * values.size(), kPast);
    total = std::min(total + count, kPast);
  }
  return total;
}

void Loader::models(const Json& defaults, const Json& list, ModelExpander& ex,
                    std::vector<ModelRef>& out) {
  const size_t planned = planned_models(list);
  if (planned > limits::kMaxPlanModels) {
    pr_.add("models", "plan too large; expected at most " + std::to_string(limits::kMaxPlanModels) +
                          " models from all entries and their grids together, got more" +
                          "\nhint: split the fleet into several plans");
    return;
  }
  out.reserve(out.size() + planned);  // growing by doubling would copy every ref made so far
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string ep = index_path("models", i);
    const Json& e = list[i];
    if (!e.is_object()) {
      pr_.add(ep, "expected a mapping with a name and layers (or keras), got " + show(e));
      continue;
    }
    check_keys(pr_, ep, e, kModelKeys);
    ModelExpander::Entry entry;
    entry.path = ep;
    size_t count = 1;
    if (!grid(e, ep, entry.vars, count)) continue;  // expanding it would only repeat its problem
    merge(defaults, e, ep, entry);

    std::vector<std::string> var_names;
    for (const auto& v : entry.vars) var_names.push_back(v.first);
    const std::string name_template =
        e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";
    entries_.push_back({child_path(entry.base.count("name") ? entry.base["name"] : ep, "name"), ep,
                        name_template, var_names});
    ex.entries.push_back(std::move(entry));
    expand_entry(ex.entries.back(), static_cast<uint32_t>(ex.entries.size() - 1), count, out);
  }
  check_unique_names(out);
}

// Refs to the `count` models of entry `e` (number `index`) in `out`, each model expanded and so
// checked here (and made again when needed).
void Loader::expand_entry(const ModelExpander::Entry& e, uint32_t index, size_t count,
                          std::vector<ModelRef>& out) {
  // A model with data of its own adds its source to the plan's list, in model order.
  if (threads_ > 1 && count >= 2 * kBlock && !e.merged.contains("data"))
    return expand_entry_apart(e, index, count, out);
  for (size_t c = 0; c < count; ++c) {
    ModelSpec s = expand(e, c);
    out.push_back(
        {index, static_cast<uint32_t>(c), static_cast<uint32_t>(s.source), std::move(s.name)});
  }
}

// The same on up to threads_ threads, in blocks of kBlock models, each thread with a loader of
// its own whose problems are replayed here in model order: the same problems as one after the
// other. (An 8 x 1,000 grid of tiny models took 0.25 s to check on one thread, Zen 3.)
void Loader::expand_entry_apart(const ModelExpander::Entry& e, uint32_t index, size_t count,
                                std::vector<ModelRef>& out) {
  const size_t blocks = (count + kBlock - 1) / kBlock;
  const int threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads_), blocks));
  std::vector<std::unique_ptr<Problems>> prs;
  std::vector<std::unique_ptr<Loader>> loaders;
  for (int t = 0; t < threads; ++t) {
    prs.push_back(std::make_unique<Problems>(Problems::recorder(pr_.file(), doc_.lines)));
    loaders.push_back(std::make_unique<Loader>(*this, *prs.back()));
  }
  struct Block {
    std::vector<ModelRef> refs;
    std::vector<Problems::Call> calls;
  };
  std::vector<Block> done(blocks);
  for_each_block(blocks, threads, [&](int t, size_t b) {
    Loader& l = *loaders[static_cast<size_t>(t)];
    for (size_t c = b * kBlock; c < std::min(count, (b + 1) * kBlock); ++c) {
      ModelSpec s = l.expand(e, c);
      done[b].refs.push_back(
          {index, static_cast<uint32_t>(c), static_cast<uint32_t>(s.source), std::move(s.name)});
    }
    done[b].calls = prs[static_cast<size_t>(t)]->take_calls();
  });
  for (Block& b : done) {
    pr_.replay(b.calls);
    out.insert(out.end(), std::make_move_iterator(b.refs.begin()),
               std::make_move_iterator(b.refs.end()));
  }
}

// The grid of entry `e` at `ep` into `vars`, in the order its vars are written (the last one
// varies fastest), and the number of models it makes into `count`; false when it is broken.
bool Loader::grid(const Json& e, const std::string& ep,
                  std::vector<std::pair<std::string, Json>>& vars, size_t& count) {
  if (!e.contains("grid") || e["grid"].is_null()) return true;
  const std::string gp = child_path(ep, "grid");
  const Json& g = e["grid"];
  if (!g.is_object()) {
    pr_.add(gp, "expected a mapping of var names to lists of values, got " + show(g));
    return false;
  }
  bool ok = true;
  auto order = doc_.keys.find(gp);
  for (const auto& var : order != doc_.keys.end() ? order->second : std::vector<std::string>{}) {
    const std::string vp = child_path(gp, var);
    const Json& values = g[var];
    if (!is_identifier(var)) {
      pr_.add(vp, "bad grid var name; expected letters, digits and '_', not starting " +
                      std::string("with a digit, got ") + show(var));
      ok = false;
    } else if (!values.is_array() || values.empty()) {
      pr_.add(vp, "expected a non-empty list of values, got " + show(values));
      ok = false;
    } else {
      vars.emplace_back(var, values);
      count *= values.size();
      if (count > kMaxModelsPerEntry) {
        pr_.add(gp, "grid too large; expected at most " + std::to_string(kMaxModelsPerEntry) +
                        " models from one entry, got more");
        return false;
      }
    }
  }
  return ok;
}

// Entry `e` at `ep` merged over the defaults into `out.merged`; `out.base` says where each key
// came from, for field paths.
void Loader::merge(const Json& defaults, const Json& e, const std::string& ep,
                   ModelExpander::Entry& out) {
  Json& merged = out.merged;
  std::map<std::string, std::string>& base = out.base;
  merged = Json::object();
  if (defaults.is_object())
    for (auto it = defaults.begin(); it != defaults.end(); ++it)
      if (!it.value().is_null() &&
          std::find(kDefaultsKeys.begin(), kDefaultsKeys.end(), it.key()) != kDefaultsKeys.end()) {
        merged[it.key()] = it.value();
        base[it.key()] = "defaults";
      }
  for (auto it = e.begin(); it != e.end(); ++it) {
    const std::string& k = it.key();
    if (k == "grid" || std::find(kModelKeys.begin(), kModelKeys.end(), k) == kModelKeys.end())
      continue;
    if (k == "layers" || k == "keras") {  // the entry's architecture replaces the default's
      for (const char* a : {"layers", "keras"})
        if (base.count(a) && base[a] == "defaults") merged.erase(a), base.erase(a);
    }
    if (it.value().is_null()) {
      merged.erase(k);
      base.erase(k);
    } else {
      merged[k] = it.value();
      base[k] = ep;
    }
  }
}

ModelSpec Loader::expand(const ModelExpander::Entry& e, size_t point) {
  std::map<std::string, Json> values;
  for (size_t v = e.vars.size(); v-- > 0;) {
    const Json& list = e.vars[v].second;
    values[e.vars[v].first] = list[point % list.size()];
    point /= list.size();
  }
  std::vector<std::string> var_names;
  for (const auto& v : e.vars) var_names.push_back(v.first);
  Substituter sub{pr_, values, join(var_names)};
  Json m = e.merged;
  for (auto it = m.begin(); it != m.end(); ++it)
    sub.apply(it.value(), child_path(e.base.at(it.key()), it.key()), it.key() != "name");
  return model(m, e.base, e.path);
}

void Loader::check_name(const std::string& path, const std::string& name) {
  if (name.empty()) {
    pr_.add(path, "empty model name; expected a name safe as a file name, got \"\"");
    return;
  }
  std::string bad;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        bad.find(c) == std::string::npos)
      bad += c;
  if (!bad.empty())
    pr_.add(path, "model name " + show(name) + " is not safe as a file name; expected only " +
                      "letters, digits, '.', '_' and '-', got " + show(bad));
  if (name[0] == '.')
    pr_.add(path, "model name " + show(name) + " starts with '.'; expected a name that is " +
                      "not a hidden file, got " + show(name));
  if (name.size() > kMaxNameLength)
    pr_.add(path, "model name " + show(name) + " is too long; expected at most " +
                      std::to_string(kMaxNameLength) + " characters, got " +
                      std::to_string(name.size()));
}

void Loader::check_unique_names(const std::vector<ModelRef>& models) {
  std::map<std::string, size_t> first;
  for (size_t k = 0; k < models.size(); ++k) {
    const std::string& name = models[k].name;
    if (name.empty()) continue;  // already reported
    auto [it, fresh] = first.emplace(name, k);
    if (fresh) continue;
    const Expanded& a = entries_[models[it->second].entry];
    const Expanded& b = entries_[models[k].entry];
    std::string msg = "duplicate model name '" + name + "'; expected names unique across the " +
                      "expanded plan, got it again (first from " + a.entry + " at line " +
                      std::to_string(pr_.line(a.entry)) + ")";
    if (a.entry == b.entry) {
      std::vector<std::string> unused;
      for (const auto& v : b.grid_vars)
        if (b.name_template.find("{" + v + "}") == std::string::npos) unused.push_back(v);
      if (!unused.empty())
        msg += "; hint: put every grid var in the name, e.g. {" + join(unused, "}, {") + "}";
    }
    pr_.add(b.name_path, msg);
  }
}

ModelSpec Loader::model(const Json& m, const std::map<std::string, std::string>& base,
                        const std::string& entry) {
  auto at = [&](const std::string& k) {
    auto it = base.find(k);
    return child_path(it == base.end() ? entry : it->second, k);
  };
  ModelSpec s;
  s.where = pr_.where(entry);
  Json ex = Json::object();

  if (!m.contains("name")) {
    pr_.add(child_path(entry, "name"), "required key missing; expected a model name");
  } else if (!m["name"].is_string()) {
    pr_.add(at("name"),
            "expected a string (quote a name that reads as a number), got " + show(m["name"]));
  } else {
    s.name = m["name"].get<std::string>();
    check_name(at("name"), s.name);
  }
  ex["name"] = s.name;

  const bool has_layers = m.contains("layers"), has_keras = m.contains("keras");
  if (has_layers && has_keras)
    pr_.add(at("keras"), "layers and keras are mutually exclusive; expected one of them, got both");
  if (!has_layers && !has_keras)
    pr_.add(entry,
            "no architecture; expected layers (a list of {Class: config}) or keras (a "
            "Keras model file), got neither");
  if (has_keras) {
    const Json& k = m["keras"];
    if (k.is_string() && !k.get<std::string>().empty())
      s.keras = resolve(k.get<std::string>());
    else
      pr_.add(at("keras"), "expected the path of a Keras model file, got " + show(k));
    ex["keras"] = s.keras;
  }
  if (has_layers) layers(m["layers"], at("layers"), s, ex);
  fine_tuning(m, at, s, ex);

  if (m.contains("data")) {
    DataSpec d = data(at("data"), m["data"]);
    d.where = pr_.where(at("data")) + " (model '" + s.name + "')";
    ex["data"] = d.to_json();
    if (sources_) s.source = add_source(std::move(d), *sources_);
  } else if (!has_default_) {
    pr_.add(entry,
            "no data for model '" + s.name +
                "'; expected data: in the model entry, in defaults or at the top of the plan");
  }

  model_schedule(m, at, s, ex);
  const bool loss_ok = model_losses(m, at, s, ex);
  model_loss_weights(m, at, s, ex);
  std::vector<std::string> monitors = model_metrics(m, at, loss_ok, s, ex);
  model_optimizer(m, at, s, ex);
  model_early_stopping(m, at, monitors, s, ex);
  plan_detail::fit_options(pr_, m, at, monitors, s, ex);
  s.expanded = ex.dump();
  s.expanded.shrink_to_fit();  // dump() grows by doubling: half of it would be slack
  return s;
}

// epochs, batch_size, batch_split and shuffle.
template <typename At>
void Loader::model_schedule(const Json& m, At at, ModelSpec& s, Json& ex) {
  if (m.contains("epochs"))
    s.epochs = static_cast<int>(check_int(pr_, at("epochs"), m["epochs"], 1).value_or(1));
  if (m.contains("batch_size"))
    s.batch_size =
        static_cast<int>(check_int(pr_, at("batch_size"), m["batch_size"], 1).value_or(32));
  if (m.contains("batch_split") && !m["batch_split"].is_null())
    s.batch_split =
        static_cast<int>(check_int(pr_, at("batch_split"), m["batch_split"], 1).value_or(0));
  if (m.contains("shuffle"))
    s.shuffle = check_bool(pr_, at("shuffle"), m["shuffle"]).value_or(true);
  ex["epochs"] = s.epochs;
  ex["batch_size"] = s.batch_size;
  if (s.batch_split > 0) ex["batch_split"] = s.batch_split;
  ex["shuffle"] = s.shuffle;
}

// loss: one, or one per output (a list in output order, a map by output name); false when a
// loss is not valid.
template <typename At>
bool Loader::model_losses(const Json& m, At at, ModelSpec& s, Json& ex) {
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
      pr_.add(spec_error_path(p, l, e, "loss"),
              config_message(e) + (e.key() == "loss" ? near_miss(spec_name(l), loss_names()) : ""));
      loss_ok = false;
    }
    return std::nullopt;
  };
  if (!per_output) {
    if (auto l = parse_one(loss, at("loss"))) s.loss = *l;
  } else if (loss.empty()) {
    pr_.add(at("loss"), "expected a loss, or one per output, got " + show(loss));
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
template <typename At>
void Loader::model_loss_weights(const Json& m, At at, ModelSpec& s, Json& ex) {
  if (m.contains("loss_weights") && !m["loss_weights"].is_null()) {
    const Json& w = m["loss_weights"];
    const std::string p = at("loss_weights");
    if (w.is_array() && !w.empty()) {
      for (size_t i = 0; i < w.size(); ++i)
        if (auto x = check_number(pr_, index_path(p, i), w[i], 0, false, INFINITY, false,
                                  "a weight >= 0"))
          s.loss_weights.push_back({"", *x});
    } else if (w.is_object() && !w.empty()) {
      for (auto it = w.begin(); it != w.end(); ++it)
        if (auto x = check_number(pr_, child_path(p, it.key()), it.value(), 0, false, INFINITY,
                                  false, "a weight >= 0"))
          s.loss_weights.push_back({it.key(), *x});
    } else {
      pr_.add(
          p, "expected a list of weights (one per output) or a map by output name, got " + show(w));
    }
    ex["loss_weights"] = w;
  }
}

// metrics (whether they fit the loss, when `loss_ok`); returns the names a callback may monitor.
template <typename At>
std::vector<std::string> Loader::model_metrics(const Json& m, At at, bool loss_ok, ModelSpec& s,
                                               Json& ex) {
  // Metrics are resolved against the data's shape when the fleet starts; here the names and
  // whether they fit the loss.
  std::vector<std::string> monitors = {"loss", "val_loss"};
  const Json metrics = m.contains("metrics") ? m["metrics"] : Json::array({"accuracy"});
  if (!metrics.is_array()) {
    pr_.add(at("metrics"), "expected a list of metric names, got " + show(metrics));
  } else {
    for (size_t i = 0; i < metrics.size(); ++i) {
      const std::string p = index_path(at("metrics"), i);
      if (!metrics[i].is_string()) {
        pr_.add(p, "expected a metric name, got " + show(metrics[i]));
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
        pr_.add(p, config_message(e));
      }
    }
  }
  ex["metrics"] = metrics;

  return monitors;
}

template <typename At>
void Loader::model_optimizer(const Json& m, At at, ModelSpec& s, Json& ex) {
  const Json opt =
      m.contains("optimizer") ? m["optimizer"] : Json::object({{"Adam", Json::object()}});
  try {
    s.optimizer = parse_optimizer(opt);
  } catch (const ConfigError& e) {
    pr_.add(spec_error_path(at("optimizer"), opt, e, "optimizer"),
            config_message(e) +
                (e.key() == "optimizer" ? near_miss(spec_name(opt), optimizer_names()) : ""));
  }
  ex["optimizer"] = opt;
}

// early_stopping (its monitor one of `monitors`, which it leaves sorted and unique).
template <typename At>
void Loader::model_early_stopping(const Json& m, At at, std::vector<std::string>& monitors,
                                  ModelSpec& s, Json& ex) {
  ex["early_stopping"] = nullptr;
  if (m.contains("early_stopping")) {
    const std::string p = at("early_stopping");
    const Json& j = m["early_stopping"];
    if (!j.is_object()) {
      pr_.add(p, "expected a mapping with keys " + join(kEarlyStoppingKeys) + ", or null, got " +
                     show(j));
    } else {
      check_keys(pr_, p, j, kEarlyStoppingKeys);
      EarlyStopping es;
      auto has = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
      if (has("monitor")) {
        std::sort(monitors.begin(), monitors.end());
        monitors.erase(std::unique(monitors.begin(), monitors.end()), monitors.end());
        es.monitor = check_string(pr_, child_path(p, "monitor"), j["monitor"], monitors)
                         .value_or(es.monitor);
      }
      if (has("patience"))
        es.patience = static_cast<int>(
            check_int(pr_, child_path(p, "patience"), j["patience"], 0).value_or(0));
      if (has("min_delta"))
        es.min_delta = check_number(pr_, child_path(p, "min_delta"), j["min_delta"], 0, false,
                                    INFINITY, false, "a number >= 0")
                           .value_or(0.0);
      if (has("restore_best_weights"))
        es.restore_best_weights =
            check_bool(pr_, child_path(p, "restore_best_weights"), j["restore_best_weights"])
                .value_or(false);
      if (has("mode"))
        es.mode = check_string(pr_, child_path(p, "mode"), j["mode"], {"auto", "min", "max"})
                      .value_or("auto");
      if (has("start_from_epoch"))
        es.start_from_epoch = static_cast<int>(
            check_int(pr_, child_path(p, "start_from_epoch"), j["start_from_epoch"], 0)
                .value_or(0));
      s.early_stopping = es;
      ex["early_stopping"] = {
          {"monitor", es.monitor},     {"patience", es.patience},
          {"min_delta", es.min_delta}, {"restore_best_weights", es.restore_best_weights},
          {"mode", es.mode},           {"start_from_epoch", es.start_from_epoch}};
    }
  }
}

void Loader::layers(const Json& list, const std::string& path, ModelSpec& s, Json& ex) {
  if (!list.is_array() || list.empty()) {
    pr_.add(path, "expected a non-empty list of layers such as [Flatten: {}, Dense: {units: " +
                      std::string("10}], got ") + show(list));
    return;
  }
  std::map<std::string, int> counters;      // per class, for default names
  std::map<std::string, std::string> used;  // layer name -> its field path
  Json out = Json::array();
  for (size_t j = 0; j < list.size(); ++j) {
    const std::string ip = index_path(path, j);
    const Json& item = list[j];
    std::string cls;
    Json cfg;
    if (item.is_string()) {  // "- Flatten" is short for "- Flatten: {}"
      cls = item.get<std::string>();
    } else if (item.is_object() && item.size() == 1) {
      cls = item.begin().key();
      cfg = item.begin().value();
    } else {
      pr_.add(ip, "a layer is a mapping with one key, its class; expected {Class: {config}} " +
                      std::string("such as {Dense: {units: 10}} (indent the config under the ") +
                      "class), got " + show(item));
      continue;
    }
    if (cfg.is_null()) cfg = Json::object();
    const std::string cp = child_path(ip, cls);
    const LayerKindInfo* kind = find_layer_kind(cls);
    if (!kind) {
      std::vector<std::string> classes;
      for (const auto& k : layer_kinds()) classes.push_back(k.class_name);
      pr_.add(ip, "unknown layer class '" + cls + "'; expected one of " + layer_kind_names() +
                      near_miss(cls, classes));
      continue;
    }
    if (!cfg.is_object()) {
      pr_.add(cp, "expected a mapping of " + cls + " options, got " + show(cfg));
      continue;
    }
    if (!cfg.contains("name") || cfg["name"].is_null()) {
      const std::string& stem = layer_name_stem(*kind);
      int& n = counters[stem];
      std::string name;
      do {
        name = n == 0 ? stem : stem + "_" + std::to_string(n);
        ++n;
      } while (used.count(name));
      cfg["name"] = name;
    }
    try {
      check_layer(cls, cfg);
    } catch (const ConfigError& e) {
      std::string hint;
      if (e.key() == "activation" && cfg["activation"].is_string())
        hint = near_miss(cfg["activation"].get<std::string>(), activation_names());
      pr_.add(e.key().empty() ? cp : child_path(cp, e.key()), config_message(e) + hint);
    } catch (const Error& e) {
      pr_.add(cp, e.what());
    }
    if (cfg["name"].is_string()) {
      const std::string name = cfg["name"].get<std::string>();
      auto [it, fresh] = used.emplace(name, ip);
      if (!fresh)
        pr_.add(child_path(cp, "name"), "duplicate layer name '" + name + "'; expected names " +
                                            "unique within a model, got it again (first at " +
                                            it->second + ")");
    }
    Json entry = Json::object();
    entry[cls] = cfg;
    out.push_back(std::move(entry));
    s.layers.push_back({cls, std::move(cfg), pr_.where(cp)});
  }
  ex["layers"] = std::move(out);
}

template <typename At>
void Loader::fine_tuning(const Json& m, At at, ModelSpec& s, Json& ex) {
  const bool keras = m.contains("keras");
  auto needs_keras = [&](const char* k) {
    if (m.contains(k) && !m[k].is_null() && !keras)
      pr_.add(at(k), std::string(k) +
                         " applies to a `keras:` model; expected it with keras: "
                         "(a plan's own layers take trainable: false instead)");
  };
  if (m.contains("freeze") && !m["freeze"].is_null()) {
    needs_keras("freeze");
    const Json& f = m["freeze"];
    if (!f.is_array()) {
      pr_.add(at("freeze"), "expected a list of layer names or indices, got " + show(f));
    } else {
      for (size_t i = 0; i < f.size(); ++i) {
        const std::string p = index_path(at("freeze"), i);
        if (f[i].is_string() || (f[i].is_number_integer() && f[i].get<int64_t>() >= 0)) {
          s.freeze.push_back(f[i]);
          s.freeze_where.push_back(pr_.where(p));
        } else {
          pr_.add(p, "expected a layer name or an index >= 0, got " + show(f[i]));
        }
      }
    }
    ex["freeze"] = f;
  }
  if (m.contains("unfreeze_from") && !m["unfreeze_from"].is_null()) {
    needs_keras("unfreeze_from");
    if (m["unfreeze_from"].is_string() && !m["unfreeze_from"].get<std::string>().empty()) {
      s.unfreeze_from = m["unfreeze_from"].get<std::string>();
      s.unfreeze_from_where = pr_.where(at("unfreeze_from"));
    } else {
      pr_.add(at("unfreeze_from"), "expected a layer name, got " + show(m["unfreeze_from"]));
    }
    ex["unfreeze_from"] = m["unfreeze_from"];
  }
  if (m.contains("restore_optimizer") && !m["restore_optimizer"].is_null()) {
    needs_keras("restore_optimizer");
    const std::string p = at("restore_optimizer");
    if (!m["restore_optimizer"].is_boolean()) {
      pr_.add(p, "expected true or false, got " + show(m["restore_optimizer"]));
    } else if ((s.restore_optimizer = m["restore_optimizer"].get<bool>())) {
      // Keras's load_model: the file's optimizer, its configuration and its state, for the
      // file's trainable weights.
      if (m.contains("optimizer") && !m["optimizer"].is_null())
        pr_.add(p,
                "restore_optimizer trains with the file's optimizer and its state; expected "
                "no optimizer for this model (remove one of them)");
      if (!s.freeze.empty() || !s.unfreeze_from.empty())
        pr_.add(p,
                "restore_optimizer keeps the state of the file's trainable weights; expected "
                "no freeze or unfreeze_from with it (they change which weights train)");
    }
    ex["restore_optimizer"] = m["restore_optimizer"];
  }
}

std::string read_plan_file(const std::string& path) {
  const std::string head = "failed to load plan '" + path + "': ";
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw PlanError(head + "no such file; expected a YAML or JSON plan file");
  if (fs::is_directory(path, ec))
    throw PlanError(head + "not a file; expected a YAML or JSON plan file, got a directory");
  const auto size = fs::file_size(path, ec);
  if (!ec && size > limits::kMaxPlanBytes)
    throw PlanError(head + "the file is too large for a plan; expected at most " +
                    std::to_string(limits::kMaxPlanBytes) + " bytes, got " + std::to_string(size));
  std::string text, why;
  if (!read_regular_file(path, text, why)) throw PlanError(head + why);
  return text;
}

}  // namespace

Json DataSpec::to_json() const {
  Json j = Json::object(
      {{"train", train.to_json()}, {"scale", scale}, {"validation_split", validation_split}});
  if (test) j["test"] = test->to_json();
  return j;
}

Json DataSource::to_json() const {
  // One input (target): a string, as before; several: the list.
  auto list = [](const std::string& first, const std::vector<std::string>& more) {
    if (more.empty()) return Json(first);
    Json a = Json::array({first});
    for (const auto& m : more) a.push_back(m);
    return a;
  };
  switch (kind) {
    case Kind::kFashionMnist:
      return "fashion-mnist:" + split;
    case Kind::kNpy:
    case Kind::kNpz: {
      Json j = Json::object({{"x", list(x, more_x)}, {"y", list(y, more_y)}});
      if (kind == Kind::kNpz) j["npz"] = file;
      if (!sample_weight.empty()) j["sample_weight"] = sample_weight;
      return j;
    }
    case Kind::kCsv:
      return Json::object({{"csv", file}, {"label", label}});
    case Kind::kIdx:
      return Json::object({{"idx_images", x}, {"idx_labels", y}});
  }
  return nullptr;
}

// The message of a YAML syntax error, at the line where the broken construct starts: yaml-cpp
// notices an unclosed '[' or quote only where the text stops making sense, often lines later.
[[noreturn]] void throw_yaml_error(const std::string& path, const std::string& text,
                                   const YAML::ParserException& e) {
  const int noticed = e.mark.line + 1;
  const std::string head = "failed to load plan '" + path + "': 1 problem(s)\n" + path + ":";
  // Whatever yaml-cpp says ("illegal block entry", "end of sequence flow not found", ...), a
  // bracket or quote still open where it stopped is what broke the text.
  const plan_detail::TextPos open =
      e.mark.pos >= 0 ? plan_detail::unclosed_construct(text, static_cast<size_t>(e.mark.pos))
                      : plan_detail::TextPos{};
  if (open.what) {
    const std::string c(1, open.what);
    const char* closer = open.what == '[' ? "]" : open.what == '{' ? "}" : c.c_str();
    throw PlanError(head + std::to_string(open.line) + ": invalid YAML: the '" + c +
                    "' at column " + std::to_string(open.column) +
                    " is never closed; expected a matching '" + closer + "' before line " +
                    std::to_string(noticed) + " (" + e.msg + ")");
  }
  throw PlanError(head + std::to_string(noticed) + ": invalid YAML: " + e.msg);
}

Plan load_plan(const std::string& path) {
  return parse_plan(read_plan_file(path), path,
                    fs::absolute(fs::path(path)).parent_path().string());
}

namespace {

// The plan text refused at byte `bad`: "path:LINE: invalid text: byte 0xNN at column C <rule>".
[[noreturn]] void refuse_text(const std::string& text, const std::string& path, size_t bad,
                              const std::string& rule) {
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
  const size_t line_end = bad == 0 ? std::string::npos : text.rfind('\n', bad - 1);
  const size_t column = line_end == std::string::npos ? bad + 1 : bad - line_end;
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + bad, '\n'));
  throw PlanError("failed to load plan '" + path + "': 1 problem(s)\n" + path + ":" +
                  std::to_string(line) + ": invalid text: byte " + byte + " at column " +
                  std::to_string(column) + " " + rule);
}

}  // namespace

Plan parse_plan(const std::string& text, const std::string& path, const std::string& base_dir,
                int threads) {
  if (const size_t bad = plan_detail::invalid_utf8_at(text); bad != std::string::npos)
    refuse_text(text, path, bad, "is not UTF-8; expected a UTF-8 (or ASCII) plan file");
  if (const size_t bad = plan_detail::yaml_unprintable_at(text); bad != std::string::npos)
    refuse_text(text, path, bad,
                "is a control character, which YAML does not allow in a document; expected "
                "printable text (tab, line feed and carriage return are allowed; inside double "
                "quotes write an escape such as \\t or \\x01)");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard (2000 levels), hit while parsing, before ours can be.
    throw PlanError("failed to load plan '" + path + "': 1 problem(s)\n" + path + ":" +
                    std::to_string(e.mark.line + 1) +
                    ": invalid YAML: nested too deeply; expected at most " +
                    std::to_string(limits::kMaxNestingDepth) + " levels of lists and mappings");
  } catch (const YAML::ParserException& e) {
    throw_yaml_error(path, text, e);
  } catch (const YAML::Exception& e) {
    throw PlanError("failed to load plan '" + path + "': invalid YAML: " + e.msg);
  }
  auto expander = std::make_shared<ModelExpander>(path, fs::absolute(fs::path(base_dir)));
  LocatedJson& doc = expander->doc;
  try {
    doc = plan_detail::yaml_to_json(root);
  } catch (const plan_detail::YamlLimitError& e) {
    throw PlanError("failed to load plan '" + path + "': 1 problem(s)\n" + path + ":" +
                    std::to_string(e.line()) + ": " + (e.path().empty() ? "" : e.path() + ": ") +
                    e.what());
  }
  Problems pr(path, doc.lines);
  for (const auto& p : doc.problems) pr.add_at(p.line, p.path, p.message);

  Plan plan;
  plan.path = path;
  plan.name = fs::path(path).stem().string();
  const Json& r = doc.value;
  if (!r.is_object()) {
    pr.add("", "a plan is a mapping; expected a mapping with keys " + join(kTopKeys) + ", got " +
                   show(r));
    pr.throw_if_any();
  }
  check_keys(pr, "", r, kTopKeys);
  if (r.contains("seed") && !r["seed"].is_null()) {
    const Json& v = r["seed"];
    if (v.is_number_unsigned())
      plan.seed = v.get<uint64_t>();
    else if (v.is_number_integer() && v.get<int64_t>() >= 0)
      plan.seed = static_cast<uint64_t>(v.get<int64_t>());
    else
      pr.add("seed", "expected a non-negative integer, got " + show(v));
  }

  Loader loader(doc, pr, expander->dir);
  loader.set_threads(threads > 0 ? threads : static_cast<int>(allowed_cpus().size()));
  plan.has_data = r.contains("data") && !r["data"].is_null();
  if (plan.has_data) {
    plan.data = loader.data("data", r["data"]);
    plan.sources.push_back(plan.data);
  }
  loader.set_default_source(&plan.sources, plan.has_data);

  const Json defaults = r.contains("defaults") ? r["defaults"] : Json();
  if (!defaults.is_null() && !defaults.is_object())
    pr.add("defaults", "expected a mapping of model settings, got " + show(defaults));
  else if (defaults.is_object())
    check_keys(pr, "defaults", defaults, kDefaultsKeys);

  const bool has_models = r.contains("models") && r["models"].is_array() && !r["models"].empty();
  // Without models there is nobody to say that their data is missing: say it here.
  if (!plan.has_data && !has_models && !(defaults.is_object() && defaults.contains("data")))
    pr.add("data",
           "required key missing; expected a mapping with at least train (or data: in defaults "
           "or in each model entry)");
  if (!r.contains("models") || r["models"].is_null())
    pr.add("models", "required key missing; expected a non-empty list of models");
  else if (!r["models"].is_array() || r["models"].empty())
    pr.add("models", "expected a non-empty list of models, got " + show(r["models"]));
  std::vector<ModelRef> refs;
  if (r.contains("models") && r["models"].is_array() && !r["models"].empty())
    loader.models(defaults, r["models"], *expander, refs);
  pr.throw_if_any();
  plan.models = PlanModels(std::move(expander), std::move(refs));
  return plan;
}

namespace plan_detail {
ModelSpec ModelExpander::expand(const ModelRef& r) const {
  Problems pr(file, doc.lines);
  Loader loader(doc, pr, dir);
  loader.set_checked();
  ModelSpec s = loader.expand(entries.at(r.entry), r.point);
  NNFLEET_CHECK(pr.empty());  // load_plan expanded the same model without a problem
  s.source = r.source;
  return s;
}
}  // namespace plan_detail

PlanModels::PlanModels(std::shared_ptr<const plan_detail::ModelExpander> expander,
                       std::vector<plan_detail::ModelRef> refs)
    : expander_(std::move(expander)), refs_(std::move(refs)) {
  refs_.shrink_to_fit();
}

ModelSpec PlanModels::operator[](size_t k) const { return expander_->expand(refs_[k]); }

ModelSpec PlanModels::at(size_t k) const {
  if (k >= refs_.size())
    throw std::out_of_range("model " + std::to_string(k) + " of a plan of " +
                            std::to_string(refs_.size()));
  return (*this)[k];
}

std::string plan_to_yaml(const Plan& plan) {
  return plan_to_yaml(plan, [](size_t, const ModelSpec&) {});
}

std::string plan_to_yaml(const Plan& plan,
                         const std::function<void(size_t, const ModelSpec&)>& each, int threads) {
  Json head = Json::object({{"seed", plan.seed}, {"models", nullptr}});
  if (plan.has_data) head["data"] = plan.data.to_json();
  // The rare text yaml-cpp writes instead (plan_yaml.h) asks for the models again, on this
  // thread after the others stopped, and `each` sees every model once. Each k is marked by the
  // one thread that makes it.
  std::vector<char> seen(plan.models.size(), 0);
  return plan_detail::json_to_yaml(
      head, kYamlOrder, "models", plan.models.size(),
      [&](size_t k) {
        const ModelSpec s = plan.models[k];
        if (!seen[k]) {
          each(k, s);
          seen[k] = 1;
        }
        return s.expanded_json();
      },
      threads);
}

}  // namespace nnfleet
