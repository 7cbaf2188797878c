// YAML <-> JSON for plans, with line numbers by field path.
#include "plan/plan_yaml.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/limits.h"
#include "plan/yaml_emitter.h"
#include "platform/parallel.h"

namespace nnfleet::plan_detail {
namespace {

bool all_digits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// YAML 1.2 core schema float: [-+]? ( \.[0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
bool looks_like_float(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!all_digits(s.substr(i), 0)) return false;
    return true;
  }
  return i == s.size();
}

struct Converter {
  LocatedJson& out;
  size_t values = 0, bytes = 0;
  // The collections being converted, outermost first: an alias to one of them is a cycle.
  std::vector<YAML::Node> open;

  // Counts one value and the text it costs (its path, and its own text for a scalar) against the
  // plan's limits. Each use of an alias counts again: that is what bounds an alias bomb.
  void count(const YAML::Node& n, const std::string& path, int line) {
    bytes += path.size() + (n.IsScalar() ? n.Scalar().size() : 0);
    if (++values > limits::kMaxPlanValues)
      throw YamlLimitError(path, line,
                           "the plan holds more than " + std::to_string(limits::kMaxPlanValues) +
                               " values (each use of a YAML alias counts its values again); "
                               "expected at most " +
                               std::to_string(limits::kMaxPlanValues));
    if (bytes > limits::kMaxPlanTextBytes)
      throw YamlLimitError(path, line,
                           "the plan holds more than " + std::to_string(limits::kMaxPlanTextBytes) +
                               " bytes of text and field paths (each use of a YAML alias counts "
                               "its text again); expected at most " +
                               std::to_string(limits::kMaxPlanTextBytes));
  }

  Json convert(const YAML::Node& n, const std::string& path, int line) {
    count(n, path, line);
    out.lines.emplace(path, line);
    if (n.IsSequence() || n.IsMap()) {
      for (const auto& o : open)
        if (o.is(n))
          throw YamlLimitError(path, line,
                               "a YAML alias refers to a collection that contains it, so the "
                               "value would be infinite; expected aliases to complete values");
      if (open.size() >= static_cast<size_t>(limits::kMaxNestingDepth))
        throw YamlLimitError(path, line,
                             "nested more than " + std::to_string(limits::kMaxNestingDepth) +
                                 " levels deep; expected at most " +
                                 std::to_string(limits::kMaxNestingDepth) +
                                 " levels of lists and mappings");
      open.push_back(n);
      Json j = convert_collection(n, path, line);
      open.pop_back();
      return j;
    }
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nullptr;
      case YAML::NodeType::Scalar:
        // yaml-cpp tags quoted and block scalars "!"; an explicit !!str keeps the text too.
        if (n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str") return n.Scalar();
        return plain_scalar(n.Scalar());
      default:
        return nullptr;
    }
  }

  Json convert_collection(const YAML::Node& n, const std::string& path, int line) {
    switch (n.Type()) {
      case YAML::NodeType::Sequence: {
        Json a = Json::array();
        size_t i = 0;
        for (const auto& item : n) {
          a.push_back(convert(item, index_path(path, i), line_of(item, line)));
          ++i;
        }
        return a;
      }
      case YAML::NodeType::Map: {
        Json o = Json::object();
        auto& order = out.keys[path];
        for (const auto& kv : n) {
          const int key_line = line_of(kv.first, line);
          if (!kv.first.IsScalar()) {
            out.problems.push_back({path, key_line,
                                    "a mapping key must be a name; expected a plain string, got " +
                                        std::string(kv.first.IsMap()        ? "a mapping"
                                                    : kv.first.IsSequence() ? "a sequence"
                                                                            : "null")});
            continue;
          }
          const std::string key = kv.first.Scalar();
          const std::string p = child_path(path, key);
          if (o.contains(key)) {
            out.problems.push_back({p, key_line,
                                    "duplicate key '" + key +
                                        "'; expected each key once, got it again on line " +
                                        std::to_string(key_line) + " (first on line " +
                                        std::to_string(out.lines[p]) + ")"});
            continue;
          }
          order.push_back(key);
          o[key] = convert(kv.second, p, key_line);
        }
        return o;
      }
      default:
        return nullptr;
    }
  }

  static int line_of(const YAML::Node& n, int fallback) {
    const YAML::Mark m = n.Mark();
    return m.line >= 0 ? m.line + 1 : fallback;
  }
};

size_t depth(const Json& v) {
  if (!v.is_structured()) return 0;
  size_t d = 0;
  for (const auto& e : v) d = std::max(d, depth(e));
  return d + 1;
}

// Small collections read best on one line, except a mapping of collections only: a layer item
// {Dense: {...}} reads as "- Dense: {units: 10}" and an optimizer as "Adam: {...}".
bool use_flow(const Json& v) {
  if (v.empty()) return true;
  const size_t d = depth(v);
  if (d > 2 || v.dump().size() > 72) return false;
  if (d == 1 || v.is_array()) return true;
  for (const auto& e : v)
    if (!e.is_structured()) return true;
  return false;
}

bool needs_quotes(const std::string& s) { return s.empty() || !plain_scalar(s).is_string(); }

// The two emitters behind one interface: YamlEmitter (yaml_emitter.h), and yaml-cpp's own as
// its reference (json_to_yaml_ref).
struct YamlCppOut {
  YAML::Emitter out;
  YamlCppOut() {
    out.SetIndent(2);
    out.SetNullFormat(YAML::LowerNull);
  }
  void begin_seq(bool flow) {
    if (flow) out << YAML::Flow;
    out << YAML::BeginSeq;
  }
  void begin_map(bool flow) {
    if (flow) out << YAML::Flow;
    out << YAML::BeginMap;
  }
  void end_seq() { out << YAML::EndSeq; }
  void end_map() { out << YAML::EndMap; }
  void null() { out << YAML::Null; }
  void boolean(bool b) { out << b; }
  void integer(int64_t v) { out << v; }
  void unsigned_integer(uint64_t v) { out << v; }
  void string(std::string_view s, bool double_quoted) {
    if (double_quoted) out << YAML::DoubleQuoted;
    out << std::string(s);
  }
  bool ok() const { return out.good(); }
  std::string text() const { return out.c_str(); }
};

template <typename Out>
struct Writer {
  Out& out;
  const std::vector<std::string>& first;

  void emit(const Json& v) {
    switch (v.type()) {
      case Json::value_t::null:
        out.null();
        break;
      case Json::value_t::boolean:
        out.boolean(v.get<bool>());
        break;
      case Json::value_t::number_integer:
        out.integer(v.get<int64_t>());
        break;
      case Json::value_t::number_unsigned:
        out.unsigned_integer(v.get<uint64_t>());
        break;
      case Json::value_t::number_float: {
        std::string t = number_text(v.get<double>());
        if (t.find_first_of(".en") == std::string::npos) t += ".0";
        out.string(t, false);
        break;
      }
      case Json::value_t::string: {
        const auto& s = v.get_ref<const std::string&>();
        out.string(s, needs_quotes(s));
        break;
      }
      case Json::value_t::array:
        out.begin_seq(use_flow(v));
        for (const auto& e : v) emit(e);
        out.end_seq();
        break;
      case Json::value_t::object: {
        out.begin_map(use_flow(v));
        for (const auto& k : ordered_keys(v)) {
          out.string(k, needs_quotes(k));
          emit(v[k]);
        }
        out.end_map();
        break;
      }
      default:  // binary and discarded values never occur in plans
        out.null();
        break;
    }
  }

  // The streamed form of json_to_yaml (plan.h's plan_to_yaml): `head` with its `list_key` made
  // of `n` items made one at a time by `items(out, n)`.
  template <typename Items>
  void emit_streamed(const Json& head, const std::string& list_key, size_t n, Items&& items) {
    out.begin_map(false);
    for (const auto& k : ordered_keys(head)) {
      out.string(k, needs_quotes(k));
      if (k != list_key) {
        emit(head[k]);
        continue;
      }
      out.begin_seq(false);
      items(*this, n);
      out.end_seq();
    }
    out.end_map();
  }

  // Items [from, to) of a list.
  void emit_items(size_t from, size_t to, const std::function<Json(size_t)>& item) {
    for (size_t i = from; i < to; ++i) emit(item(i));
  }

  std::vector<std::string> ordered_keys(const Json& o) const {
    std::vector<std::string> keys;
    for (const auto& k : first)
      if (o.contains(k)) keys.push_back(k);
    for (auto it = o.begin(); it != o.end(); ++it)
      if (std::find(first.begin(), first.end(), it.key()) == first.end()) keys.push_back(it.key());
    return keys;
  }
};

// The items of the open sequence of `out` made by `threads` threads, each taking the next block
// of kBlock items, written apart (YamlEmitter::fork) and joined in order. An item that throws
// stops the work; the exception of the earliest block that threw is rethrown.
void emit_items_in_parallel(YamlEmitter& out, const std::vector<std::string>& first, size_t n,
                            const std::function<Json(size_t)>& item, int threads) {
  // 64 tiny models' items are about 25 KB of text and 6 ms of a thread's work, validation
  // included (plan.yaml of 8,000 is 3.09 MB, their serial validation 0.70 s): blocks that size
  // keep the threads' shares even and the hand-off rare. The blocks' text is held until the
  // join, so the text is briefly there twice (6 MB for 8,000 models).
  constexpr size_t kBlock = 64;
  const size_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks == 0) return;
  std::vector<std::optional<YamlEmitter>> parts(blocks);
  for_each_block(blocks, threads, [&](int, size_t b) {
    YamlEmitter part = out.fork(b * kBlock);
    Writer<YamlEmitter>{part, first}.emit_items(b * kBlock, std::min(n, (b + 1) * kBlock), item);
    parts[b] = std::move(part);
  });
  // Each part freed once joined: the text is not held twice (plan.yaml of 100,000 tiny models
  // is 35 MB).
  for (auto& part : parts) {
    out.join(*part);
    part.reset();
  }
}

}  // namespace

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

std::string parent_path(const std::string& path) {
  if (path.empty()) return path;
  if (path.back() == ']') {
    const size_t open = path.rfind('[');
    if (open != std::string::npos) return path.substr(0, open);
  }
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

Json plain_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const size_t sign = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (all_digits(s, sign)) {
    const char* b = s.data() + (s[0] == '+' ? 1 : 0);
    const char* e = s.data() + s.size();
    int64_t i = 0;
    if (auto r = std::from_chars(b, e, i); r.ec == std::errc() && r.ptr == e) return i;
    uint64_t u = 0;
    if (auto r = std::from_chars(b, e, u); r.ec == std::errc() && r.ptr == e) return u;
    return std::strtod(s.c_str(), nullptr);
  }
  if (looks_like_float(s)) {
    const double d = std::strtod(s.c_str(), nullptr);
    if (std::isfinite(d)) return d;
  }
  return s;
}

LocatedJson yaml_to_json(const YAML::Node& root) {
  LocatedJson out;
  Converter c{out, 0, 0, {}};
  out.value = c.convert(root, "", Converter::line_of(root, 1));
  return out;
}

TextPos unclosed_construct(const std::string& text, size_t error_pos) {
  // A small scanner over flow brackets, quotes and comments: enough to find where an unclosed
  // construct starts, not a YAML parser. A bracket or quote opens something only where a value
  // starts (line start, after ':', '-', ',', '?' or another opener) or inside a flow collection;
  // elsewhere it is part of a plain scalar ("name: a[1]", "it's").
  std::vector<TextPos> flow;
  TextPos quote;
  int line = 1, column = 1;
  char last = '\n';  // the last character on this line that is not a space
  const size_t end = std::min(error_pos, text.size());
  auto starts_value = [&] { return !flow.empty() || std::strchr("\n:-,?[{", last) != nullptr; };
  for (size_t i = 0; i < end; ++i, ++column) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      column = 0;
      if (!quote.what) last = '\n';
      continue;
    }
    if (quote.what) {
      if (quote.what == '"' && c == '\\' && i + 1 < end && text[i + 1] != '\n') {
        ++i, ++column;
      } else if (c == quote.what) {
        if (c == '\'' && i + 1 < end && text[i + 1] == '\'') {
          ++i, ++column;  // '' is a quote inside a single-quoted scalar
        } else {
          quote = {};
          last = c;
        }
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') continue;
    if (c == '#' && (i == 0 || std::strchr(" \t\n", text[i - 1]))) {
      while (i + 1 < end && text[i + 1] != '\n') ++i, ++column;
      continue;
    }
    if ((c == '"' || c == '\'') && starts_value()) {
      quote = {line, column, c};
    } else if ((c == '[' || c == '{') && starts_value()) {
      flow.push_back({line, column, c});
    } else if ((c == ']' || c == '}') && !flow.empty()) {
      flow.pop_back();
    }
    last = c;
  }
  if (quote.what) return quote;
  return flow.empty() ? TextPos{} : flow.back();
}

size_t invalid_utf8_at(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // overlong
      if (c == 0xed) hi = 0x9f;  // surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;  // overlong
      if (c == 0xf4) hi = 0x8f;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
    i += len;
  }
  return std::string::npos;
}

std::string number_text(double v) {
  char buf[64];
  const double a = std::fabs(v);
  if (v == std::floor(v) && a < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::to_chars_result r = (a >= 1e-5 && a < 1e15)
                               ? std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed)
                               : std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string json_to_yaml_ref(const Json& doc, const std::vector<std::string>& first) {
  YamlCppOut out;
  Writer<YamlCppOut>{out, first}.emit(doc);
  NNFLEET_CHECK(out.ok());
  return out.text() + "\n";
}

std::string json_to_yaml_ref(const Json& head, const std::vector<std::string>& first,
                             const std::string& list_key, size_t n,
                             const std::function<Json(size_t)>& item) {
  NNFLEET_CHECK(head.is_object() && head.contains(list_key));
  YamlCppOut out;
  Writer<YamlCppOut>{out, first}.emit_streamed(
      head, list_key, n,
      [&](Writer<YamlCppOut>& w, size_t count) { w.emit_items(0, count, item); });
  NNFLEET_CHECK(out.ok());
  return out.text() + "\n";
}

std::string json_to_yaml(const Json& doc, const std::vector<std::string>& first) {
  YamlEmitter out;
  Writer<YamlEmitter>{out, first}.emit(doc);
  if (!out.ok()) return json_to_yaml_ref(doc, first);
  return out.text() + "\n";
}

std::string json_to_yaml(const Json& head, const std::vector<std::string>& first,
                         const std::string& list_key, size_t n,
                         const std::function<Json(size_t)>& item, int threads) {
  NNFLEET_CHECK(head.is_object() && head.contains(list_key));
  YamlEmitter out;
  Writer<YamlEmitter>{out, first}.emit_streamed(
      head, list_key, n, [&](Writer<YamlEmitter>& w, size_t count) {
        if (threads > 1)
          emit_items_in_parallel(w.out, first, count, item, threads);
        else
          w.emit_items(0, count, item);
      });
  if (!out.ok()) return json_to_yaml_ref(head, first, list_key, n, item);
  return out.text() + "\n";
}

}  // namespace nnfleet::plan_detail
