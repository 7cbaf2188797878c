// The YAML side of plans: turning a yaml-cpp document into JSON while remembering the line of
// every field (so problems can say "fleet.yaml:14: models[1].layers[2].Dense.units"), and writing
// JSON back as YAML that reads back to the same values. Internal to src/fleet.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.h"

namespace nnfleet::plan_detail {

// A field path: "" for the root, "models", "models[1]", "models[1].layers[2].Dense.units".
std::string child_path(const std::string& parent, const std::string& key);
std::string index_path(const std::string& parent, size_t i);
// The path one level up ("models[1].layers" -> "models[1]" -> "models" -> ""); "" stays "".
std::string parent_path(const std::string& path);

// A document converted to JSON, with the 1-based line of each field and the written order of each
// mapping's keys (JSON objects sort their keys; grids expand in the written order).
struct LocatedJson {
  Json value;
  std::map<std::string, int> lines;                      // path -> line of the key or item
  std::map<std::string, std::vector<std::string>> keys;  // path of a mapping -> keys as written
  struct Problem {
    std::string path;
    int line;
    std::string message;
  };
  std::vector<Problem> problems;  // duplicate keys, keys that are not names
};

// A document yaml_to_json refuses to walk any further: nested deeper than
// limits::kMaxNestingDepth, more than limits::kMaxPlanValues values once aliases are expanded
// (an alias bomb), or a collection that contains itself through an alias (`a: &x [*x]`).
// what() is the rule; path and line say where.
class YamlLimitError : public std::runtime_error {
 public:
  YamlLimitError(std::string path, int line, const std::string& what)
      : std::runtime_error(what), path_(std::move(path)), line_(line) {}
  const std::string& path() const { return path_; }
  int line() const { return line_; }

 private:
  std::string path_;
  int line_;
};

// Plain scalars become null (~, null, empty), bools (true/false), integers or numbers when they
// read as one; quoted scalars and everything else stay strings (YAML 1.2 core schema).
// Throws YamlLimitError (above) before walking past a limit.
LocatedJson yaml_to_json(const YAML::Node& root);

// Where a YAML syntax error starts: for an error yaml-cpp reports at `error_line` (1-based) while
// looking for the end of a flow collection or a quoted scalar, the line and column (1-based) of
// the '[', '{' or quote that is never closed before that point; {0, 0} when none is found.
struct TextPos {
  int line = 0, column = 0;
  char what = 0;  // '[', '{', '"' or '\''
};
TextPos unclosed_construct(const std::string& text, size_t error_pos);

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or std::string::npos. YAML text is UTF-8,
// and the plan's strings are later written as JSON, which must be.
size_t invalid_utf8_at(const std::string& text);
Json plain_scalar(const std::string& text);

// Compact text of a number: 32, 0.001, 1e-08; the shortest text that reads back exactly.
std::string number_text(double v);

// Emits `doc` as block YAML (small leaf collections in flow style), quoting strings that would
// read back as another type, so yaml_to_json(YAML::Load(json_to_yaml(doc))).value == doc.
// Mapping keys in `first` come first, in that order; the others follow sorted. Written by
// YamlEmitter (yaml_emitter.h): the same text as yaml-cpp's emitter in json_to_yaml_ref (below)
// without its per-scalar RegEx matching; yaml-cpp writes the rare document YamlEmitter cannot (a
// mapping key over 1024 bytes).
std::string json_to_yaml(const Json& doc, const std::vector<std::string>& first);
// The same for a mapping whose key `list_key` (present in `head`, its value ignored) holds a list
// of `n` items made one at a time by `item(k)`: only one item is held at once per thread. With
// `threads` > 1, item() is called from that many threads at once (each k once, increasing k on
// each thread) and the text is the same; an exception item() throws is rethrown here (the
// earliest block's) after every thread stopped. In the rare document YamlEmitter cannot write,
// item() is then called again for every k, on this thread, for yaml-cpp.
std::string json_to_yaml(const Json& head, const std::vector<std::string>& first,
                         const std::string& list_key, size_t n,
                         const std::function<Json(size_t)>& item, int threads = 1);
// The same two through yaml-cpp's YAML::Emitter: the oracle json_to_yaml is tested against.
std::string json_to_yaml_ref(const Json& doc, const std::vector<std::string>& first);
std::string json_to_yaml_ref(const Json& head, const std::vector<std::string>& first,
                             const std::string& list_key, size_t n,
                             const std::function<Json(size_t)>& item);

}  // namespace nnfleet::plan_detail
