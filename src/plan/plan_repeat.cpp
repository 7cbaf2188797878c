// `repeat:` in a model's layers list (any plan): `{repeat: N, layers: [...]}` stands for N copies
// of its layers, "{i}" being the copy's index inside them (0..N-1), expanded before the model's
// placeholders are substituted so that "{width_{i}}" becomes "{width_0}", then a trial's value.
// N is an integer or a "{var}" placeholder of a grid var or a trial's parameter.
#include "plan/plan_loader.h"

namespace nnfleet::plan_detail {
namespace {

// Layers one model may have once its blocks are repeated: far beyond any real model, and it
// bounds what nested blocks (1,000 x 1,000) could make.
constexpr size_t kMaxRepeatedLayers = 10'000;

bool is_repeat(const Json& item) { return item.is_object() && item.contains("repeat"); }

std::string replaced(const std::string& s, const std::string& index) {
  std::string out;
  size_t from = 0;
  for (size_t at; (at = s.find("{i}", from)) != std::string::npos; from = at + 3)
    out += s.substr(from, at - from) + index;
  return out + s.substr(from);
}

// "{i}" replaced by `i` in every string and mapping key of `v`; a string that is exactly "{i}"
// becomes the number.
void replace_index(Json& v, int64_t i) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "{i}")
      v = i;
    else if (s.find("{i}") != std::string::npos)
      v = replaced(s, std::to_string(i));
  } else if (v.is_array()) {
    for (auto& e : v) replace_index(e, i);
  } else if (v.is_object()) {
    Json out = Json::object();
    for (auto it = v.begin(); it != v.end(); ++it) {
      Json item = std::move(it.value());
      replace_index(item, i);
      out[replaced(it.key(), std::to_string(i))] = std::move(item);
    }
    v = std::move(out);
  }
}

// The count of a block: `v` or the value of the placeholder `v` is.
std::optional<int64_t> repeat_count(Problems& pr, const std::string& path, const Json& v,
                                    const std::map<std::string, Json>& values) {
  const std::string what = "expected an integer from 0 to " + std::to_string(kMaxRepeat) +
                           " (or a \"{var}\" placeholder of one), got ";
  Json n = v;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    auto it = s.size() > 2 && s.front() == '{' && s.back() == '}'
                  ? values.find(s.substr(1, s.size() - 2))
                  : values.end();
    if (it == values.end()) {
      pr.add(path, what + show(v) + (s.front() == '{' ? " (no such grid var or parameter)" : ""));
      return std::nullopt;
    }
    n = it->second;
  }
  const bool integral = n.is_number() && std::isfinite(n.get<double>()) &&
                        n.get<double>() == std::floor(n.get<double>());
  if (!integral || n.get<double>() < 0 || n.get<double>() > static_cast<double>(kMaxRepeat)) {
    pr.add(path, what + show(v) + (v.is_string() ? " = " + show(n) : ""));
    return std::nullopt;
  }
  return static_cast<int64_t>(n.get<double>());
}

// Appends the items of `list` (written at `path`) to `out`, blocks expanded; false once the
// model has too many layers.
bool expand_into(Problems& pr, const Json& list, const std::string& path,
                 const std::map<std::string, Json>& values, RepeatedLayers& out) {
  for (size_t j = 0; j < list.size(); ++j) {
    const std::string ip = index_path(path, j);
    const Json& item = list[j];
    if (!is_repeat(item)) {
      if (out.paths.size() >= kMaxRepeatedLayers) {
        pr.add(path, "too many layers once repeat: blocks are repeated; expected at most " +
                         std::to_string(kMaxRepeatedLayers));
        return false;
      }
      out.list.push_back(item);
      out.paths.push_back(ip);
      continue;
    }
    check_keys(pr, ip, item, {"layers", "repeat"});
    const auto count = repeat_count(pr, child_path(ip, "repeat"), item["repeat"], values);
    const std::string lp = child_path(ip, "layers");
    const Json& block = item.contains("layers") ? item["layers"] : Json();
    if (!block.is_array() || block.empty()) {
      pr.add(lp, "expected a non-empty list of layers to repeat, got " + show(block));
      continue;
    }
    for (int64_t i = 0; count && i < *count; ++i) {
      Json copy = block;
      // A nested block's own layers take its own {i}; its count may use this one's.
      for (auto& e : copy) replace_index(is_repeat(e) ? e["repeat"] : e, i);
      if (!expand_into(pr, copy, lp, values, out)) return false;
    }
  }
  return true;
}

}  // namespace

RepeatedLayers expand_repeats(Problems& pr, const Json& list, const std::string& path,
                              const std::map<std::string, Json>& values) {
  RepeatedLayers out;
  if (!list.is_array()) {
    out.list = list;  // the builder reports it
    return out;
  }
  expand_into(pr, list, path, values, out);
  return out;
}

}  // namespace nnfleet::plan_detail
