// LayerConfig: checked access to Keras-style config objects.
#include "core/config.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nnfleet {
namespace {

// Keys Keras writes into layer configs that nnfleet reads nowhere but accepts when they hold
// their harmless default (null, false, channels_last, float32, ...).
bool keras_key_is_harmless(const std::string& key, const Json& v) {
  if (v.is_null()) return true;
  if (key == "name" || key == "trainable" || key == "dtype" || key == "batch_input_shape" ||
      key == "batch_shape" || key == "input_shape" || key == "build_config" || key == "seed" ||
      key == "autocast" || key == "sparse" || key == "ragged" || key == "input_dtype" ||
      key == "noise_shape" || key == "synchronized")
    return true;
  if (key == "data_format") return v.is_string() && v.get<std::string>() == "channels_last";
  if (key.find("regularizer") != std::string::npos || key.find("constraint") != std::string::npos)
    return v.is_null();
  if (key == "lora_rank" || key == "lora_alpha") return v.is_null();
  if (key == "renorm" || key == "fused" || key == "virtual_batch_size" || key == "adjustment")
    return v.is_null() || (v.is_boolean() && !v.get<bool>());
  if (key == "renorm_clipping" || key == "renorm_momentum") return true;
  if (key == "groups") return v.is_number_integer() && v.get<int64_t>() == 1;
  return false;
}

}  // namespace

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string near_miss(const std::string& word, const std::vector<std::string>& valid) {
  std::string best;
  size_t best_d = 3;  // at most two edits
  for (const auto& v : valid) {
    const size_t d = edit_distance(word, v);
    if (d > 0 && d < best_d && d < v.size()) best = v, best_d = d;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string show(const Json& v) {
  // Replace, never throw, on bytes that are not UTF-8 (a value shown in a message).
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 60) {
    size_t cut = 57;  // not inside a UTF-8 sequence: messages end up in JSON files
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
    s = s.substr(0, cut) + "...";
  }
  return s;
}

JsonTooDeep::JsonTooDeep(int limit)
    : std::runtime_error("nested more than " + std::to_string(limit) +
                         " levels deep; expected at most " + std::to_string(limit) +
                         " levels of lists and mappings"),
      limit_(limit) {}

Json parse_json_bounded(const std::string& text, int max_depth) {
  // The callback sees each value as it is parsed, with the depth of the container it opens in
  // (0 for the top level): a container opened at depth max_depth would be level max_depth + 1.
  // nlohmann's parser itself keeps its stack on the heap, so only the limit bounds recursion.
  auto guard = [max_depth](int depth, Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw JsonTooDeep(max_depth);
    return true;
  };
  return Json::parse(text, guard);
}

std::optional<int64_t> config_int(const Json& v, int64_t min) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(limits::kMaxConfigInt) || static_cast<int64_t>(u) < min)
      return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) return std::nullopt;
  const int64_t i = v.get<int64_t>();
  if (i < min || i > limits::kMaxConfigInt) return std::nullopt;
  return i;
}

KerasObject split_keras_object(const Json& j, const std::string& key, const std::string& what) {
  KerasObject o;
  o.config = Json::object();
  if (j.is_string()) {
    o.name = j.get<std::string>();
    return o;
  }
  if (j.is_object() && j.contains("class_name")) {
    if (!j["class_name"].is_string())
      throw ConfigError(key, "bad class_name in a Keras " + what + "; expected a string, got " +
                                 show(j["class_name"]));
    for (auto it = j.begin(); it != j.end(); ++it)
      // shared_object_id: Keras 3's tag for an object several configs share; no meaning here.
      if (it.key() != "class_name" && it.key() != "config" && it.key() != "module" &&
          it.key() != "registered_name" && it.key() != "shared_object_id")
        throw ConfigError(key,
                          "unknown key '" + it.key() + "' in a Keras " + what +
                              "; expected one of: class_name, config, module, registered_name");
    o.name = j["class_name"].get<std::string>();
    if (j.contains("config") && !j["config"].is_null()) o.config = j["config"];
    o.mode = ConfigMode::kKeras;
  } else if (j.is_object() && j.size() == 1) {
    o.name = j.begin().key();
    if (!j.begin().value().is_null()) o.config = j.begin().value();
  } else {
    throw ConfigError(key, "bad " + what +
                               "; expected a name, {\"Name\": {config}} or "
                               "{\"class_name\": ..., \"config\": ...}, got " +
                               show(j));
  }
  if (!o.config.is_object())
    throw ConfigError(key, "bad config of " + what + " " + o.name + "; expected a mapping, got " +
                               show(o.config));
  return o;
}

LayerConfig::LayerConfig(const Json& j, ConfigMode mode, std::string class_name)
    : j_(j.is_null() ? Json::object() : j), mode_(mode), class_name_(std::move(class_name)) {
  if (!j_.is_object())
    throw ConfigError(
        "",
        "a layer config must be a mapping of keys to values; expected a mapping, got " + show(j));
}

const Json* LayerConfig::find(const std::string& key) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool LayerConfig::has(const std::string& key) const { return find(key) != nullptr; }

void LayerConfig::fail(const std::string& key, const std::string& expected) const {
  const Json* v = find(key);
  throw ConfigError(key, "bad value for '" + key + "'; expected " + expected + ", got " +
                             (v ? show(*v) : std::string("nothing")));
}

namespace {
// Plans substitute grid values into strings ("{units}" -> "32"): accept numeric strings.
bool as_number(const Json& v, double& out) {
  if (v.is_number()) {
    out = v.get<double>();
    return true;
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.empty()) return false;
    char* end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return end && *end == '\0';
  }
  return false;
}

// The integer `v` holds when it is one in [min, kMaxConfigInt]: a JSON integer (compared as one,
// never through a double), an integral float or a numeric string. `over` says whether it failed
// by being too large, for the message.
std::optional<int64_t> as_config_int(const Json& v, int64_t min, bool& over) {
  constexpr int64_t kMax = limits::kMaxConfigInt;
  over = false;
  if (v.is_boolean()) return std::nullopt;
  if (v.is_number_integer()) {  // signed or unsigned
    over = v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(kMax)
                                  : v.get<int64_t>() > kMax;
    return config_int(v, min);
  }
  double d = 0;
  if (!as_number(v, d) || std::isnan(d)) return std::nullopt;
  over = d > static_cast<double>(kMax);
  // Range first: the cast below is only defined for values that fit.
  if (over || d < static_cast<double>(min) || d != std::floor(d)) return std::nullopt;
  return static_cast<int64_t>(d);
}

std::string int_rule(int64_t min) {
  return min == 1   ? "a positive integer"
         : min == 0 ? "a non-negative integer"
                    : "an integer >= " + std::to_string(min);
}

// Built with += : GCC 12 reports a false -Warray-bounds on `"literal" + std::to_string(...)`.
std::string at_most() {
  std::string s = " at most ";
  s += std::to_string(limits::kMaxConfigInt);
  return s;
}
}  // namespace

int64_t LayerConfig::get_int(const std::string& key, std::optional<int64_t> def, int64_t min) {
  used_.insert(key);
  const Json* v = find(key);
  const std::string what = int_rule(min);
  if (!v) {
    if (def) return *def;
    throw ConfigError(key, "missing required key '" + key + "'; expected " + what);
  }
  bool over = false;
  const std::optional<int64_t> i = as_config_int(*v, min, over);
  if (!i) fail(key, what + (over ? at_most() : ""));
  return *i;
}

double LayerConfig::get_float(const std::string& key, std::optional<double> def) {
  used_.insert(key);
  const Json* v = find(key);
  if (!v) {
    if (def) return *def;
    throw ConfigError(key, "missing required key '" + key + "'; expected a number");
  }
  double d = 0;
  if (v->is_boolean() || !as_number(*v, d) || !std::isfinite(d)) fail(key, "a finite number");
  return d;
}

bool LayerConfig::get_bool(const std::string& key, std::optional<bool> def) {
  used_.insert(key);
  const Json* v = find(key);
  if (!v) {
    if (def) return *def;
    throw ConfigError(key, "missing required key '" + key + "'; expected true or false");
  }
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string()) {
    const auto& s = v->get_ref<const std::string&>();
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
  }
  fail(key, "true or false");
}

std::string LayerConfig::get_string(const std::string& key, std::optional<std::string> def,
                                    const std::vector<std::string>& allowed) {
  used_.insert(key);
  const Json* v = find(key);
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  if (!v) {
    if (def) return *def;
    throw ConfigError(key, "missing required key '" + key + "'; expected " +
                               (allowed.empty() ? std::string("a string") : "one of " + list));
  }
  if (!v->is_string()) fail(key, allowed.empty() ? std::string("a string") : "one of " + list);
  std::string s = v->get<std::string>();
  if (!allowed.empty()) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == s;
    if (!ok) fail(key, "one of " + list);
  }
  return s;
}

std::vector<int64_t> LayerConfig::get_ints(const std::string& key, size_t n,
                                           std::optional<std::vector<int64_t>> def, int64_t min) {
  used_.insert(key);
  const Json* v = find(key);
  const std::string rule = int_rule(min);
  const std::string what = rule + " or a list of " + std::to_string(n) + " of them";
  if (!v) {
    if (def) return *def;
    throw ConfigError(key, "missing required key '" + key + "'; expected " + what);
  }
  std::vector<int64_t> out;
  auto one = [&](const Json& e) {
    bool over = false;
    const std::optional<int64_t> i = as_config_int(e, min, over);
    if (!i) fail(key, what + (over ? " (each" + at_most() + ")" : ""));
    out.push_back(*i);
  };
  if (v->is_array()) {
    for (const auto& e : *v) one(e);
    if (out.size() != n) fail(key, what);
  } else {
    one(*v);
    out.assign(n, out[0]);
  }
  return out;
}

const Json* LayerConfig::get_raw(const std::string& key) {
  used_.insert(key);
  return find(key);
}

void LayerConfig::ignore(const std::string& key) { used_.insert(key); }

std::vector<std::string> LayerConfig::keys_read() const {
  std::vector<std::string> v;
  for (const auto& k : used_)
    if (k != "name") v.push_back(k);
  return v;
}

void LayerConfig::finish(const std::function<Json()>& written) const {
  Json back;  // what the layer writes, asked for at the first key not read
  bool asked = false;
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    const std::string& key = it.key();
    if (used_.count(key) || key == "name") continue;
    const bool keras = mode_ == ConfigMode::kKeras;
    if (keras && keras_key_is_harmless(key, it.value())) continue;
    if (!keras && key == "trainable" && it.value().is_boolean() && it.value().get<bool>()) continue;
    if (!asked && written) back = written();
    asked = true;
    if (!keras && back.is_object() && back.contains(key) &&
        (it.value().is_null() || it.value() == back[key]))
      continue;
    std::set<std::string> valid(used_.begin(), used_.end());
    if (back.is_object())
      for (auto w = back.begin(); w != back.end(); ++w) valid.insert(w.key());
    valid.erase("name");
    const std::vector<std::string> list(valid.begin(), valid.end());
    std::string known;
    for (const auto& k : list) known += (known.empty() ? "" : ", ") + k;
    if (keras)
      throw ConfigError(key, "unsupported option '" + key + "' = " + show(it.value()) + " of " +
                                 class_name_ + "; expected it absent or null (nnfleet supports: " +
                                 known + ")" + near_miss(key, list));
    throw ConfigError(key, "unknown key '" + key + "' for " + class_name_ + "; expected one of: " +
                               (known.empty() ? std::string("(no keys)") : known) +
                               near_miss(key, list));
  }
}

}  // namespace nnfleet
