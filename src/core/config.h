// LayerConfig: typed, checked access to a layer's Keras-style config (a JSON object), used by the
// layer factories for plans and Keras files alike. A getter that finds the wrong type throws
// ConfigError (nnfleet/error.h) naming the key and what was expected; finish() refuses keys
// nobody read.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/limits.h"

namespace nnfleet {

using Json = nlohmann::json;

// A bad value in a layer (or optimizer, loss) config. key() is the config key ("units"); the
// message is "<rule>; expected <x>, got <y>" without location, which callers add (plan file and
// line, or Keras file and layer).
class ConfigError : public ModelError {
 public:
  ConfigError(std::string key, const std::string& what) : ModelError(what), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// A JSON document nested deeper than parse_json_bounded allows. depth() is the limit.
class JsonTooDeep : public std::runtime_error {
 public:
  explicit JsonTooDeep(int limit);
  int limit() const { return limit_; }

 private:
  int limit_;
};

// " (did you mean 'epochs'?)" when `word` is within two edits of one of `valid` (and not one of
// them), else "": the hint every "unknown ..." message of plans and Keras files adds.
std::string near_miss(const std::string& word, const std::vector<std::string>& valid);

// A JSON value for a message: compact, cut to 60 characters (never inside a UTF-8 sequence:
// messages end up in JSON files), bytes that are not UTF-8 replaced rather than thrown on.
std::string show(const Json& v);

// Json::parse, refusing a document nested more than `max_depth` levels (a list or mapping inside
// another is one level) while it is parsed, so nothing deeper is ever built, copied or walked by
// the recursive code that follows (copies, dump(), the Keras graph builder). Throws
// Json::parse_error on bad syntax and JsonTooDeep beyond the limit.
Json parse_json_bounded(const std::string& text, int max_depth = limits::kMaxNestingDepth);

// The value of a JSON integer (signed or unsigned) when it lies in [min, limits::kMaxConfigInt];
// nullopt for anything else (floats, strings, larger values), never truncated.
std::optional<int64_t> config_int(const Json& v, int64_t min);

// How strictly unread keys are treated by finish().
enum class ConfigMode {
  kPlan,   // every key must be known: an unknown key is an error listing the valid ones
  kKeras,  // keys Keras writes are tolerated when they hold their default (regularizers null, ...)
};

// A Keras object (a loss, an optimizer, an initializer) in one of the three forms it is written
// in: a bare name ("adam"); the plan form {"Adam": {config}}; or Keras's own {"class_name": ...,
// "config": ..., "module": ..., "registered_name": ...} (then mode is kKeras).
struct KerasObject {
  std::string name;
  Json config;  // always a mapping
  ConfigMode mode = ConfigMode::kPlan;
};
// Throws ConfigError(key) naming `what` ("loss") when `j` is none of the three forms.
KerasObject split_keras_object(const Json& j, const std::string& key, const std::string& what);

class LayerConfig {
 public:
  LayerConfig(const Json& j, ConfigMode mode, std::string class_name);

  const std::string& class_name() const { return class_name_; }
  ConfigMode mode() const { return mode_; }
  bool has(const std::string& key) const;  // present and not null

  // Integers lie in [min, limits::kMaxConfigInt]; integral floats (3.0) and numeric strings
  // ("3", from grid substitution) are accepted, fractions, non-finite and larger values refused.
  int64_t get_int(const std::string& key, std::optional<int64_t> def = {}, int64_t min = 1);
  double get_float(const std::string& key, std::optional<double> def = {});
  bool get_bool(const std::string& key, std::optional<bool> def = {});
  std::string get_string(const std::string& key, std::optional<std::string> def = {},
                         const std::vector<std::string>& allowed = {});
  // An int or a list of ints of length n (Keras kernel_size, strides, pool_size: 3 or [3, 3]).
  std::vector<int64_t> get_ints(const std::string& key, size_t n,
                                std::optional<std::vector<int64_t>> def = {}, int64_t min = 1);
  // Any JSON value (for nested structures such as an initializer or ZeroPadding2D's padding).
  const Json* get_raw(const std::string& key);
  // Marks a key as read without interpreting it.
  void ignore(const std::string& key);

  // Throws ConfigError for the first key not read, according to the mode, listing the keys read
  // and those of `written()` (the config the layer writes back, Keras's keys included; called
  // only for a key not read) with a "did you mean" for a near miss. A key the layer writes but
  // does not read (dtype, seed) is accepted at the value it writes, or null, in plan mode too.
  void finish(const std::function<Json()>& written = nullptr) const;
  // The keys read so far (without "name"), sorted.
  std::vector<std::string> keys_read() const;

  // Builds a ConfigError for `key` ("expected <expected>, got <json of value>").
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

 private:
  const Json* find(const std::string& key) const;
  Json j_;
  ConfigMode mode_;
  std::string class_name_;
  std::set<std::string> used_;
};

}  // namespace nnfleet
