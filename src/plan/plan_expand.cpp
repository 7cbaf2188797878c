// Plan expansion: each model entry merged over `defaults`, its grid read, and every point of the
// grid expanded ("{var}" placeholders replaced by the grid's values) into a ModelSpec that the
// model builder checks; model names unique across the plan. After the load, PlanModels expands
// a model again from its entry whenever it is asked for.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>

#include "core/limits.h"
#include "plan/plan_loader.h"
#include "platform/parallel.h"

namespace nnfleet {
namespace plan_detail {

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
                                             "parameters",
                                             "reduce_lr_on_plateau",
                                             "restore_optimizer",
                                             "shuffle",
                                             "unfreeze_from",
                                             "weighted_metrics",
                                             "when"};
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

namespace {

constexpr size_t kMaxModelsPerEntry = limits::kMaxModelsPerEntry;

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Text of a grid value inside a longer string; numbers compact (0.001, 32).
std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return plan_detail::number_text(v.get<double>());
  return v.dump();  // integers, bools, null
}

// Replaces "{var}" placeholders with grid values (or a trial's parameters). A string that is
// exactly "{var}" takes the value itself (a number stays a number) unless `exact` is off;
// elsewhere the value's text is spliced in. Mapping keys are substituted as text.
struct Substituter {
  Problems& pr;
  const std::map<std::string, Json>& values;
  std::string expected;  // "one of the grid's vars: units, lr", for messages

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
      Json product;
      if (exact && s.size() > 2 && s.front() == '{' && s.back() == '}' &&
          scaled(s.substr(1, s.size() - 2), path, product)) {
        v = std::move(product);
        return;
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

  // "{name*k}" (k a number): the value of `name` times k, an integer when both are (a CNN's
  // second layer with twice the first's filters: "{filters*2}"). False when `var` is not of
  // that form; a problem when `name` is unknown or not a number.
  bool scaled(const std::string& var, const std::string& path, Json& out) {
    const size_t star = var.find('*');
    if (star == std::string::npos || !is_identifier(var.substr(0, star))) return false;
    const std::string name = var.substr(0, star), factor = var.substr(star + 1);
    char* end = nullptr;
    const double k = std::strtod(factor.c_str(), &end);
    if (factor.empty() || *end != '\0' || !std::isfinite(k)) return false;
    auto it = values.find(name);
    if (it == values.end() || !it->second.is_number()) {
      pr.add(path, it == values.end() ? "unknown placeholder '{" + name + "}' in '{" + var +
                                            "}'; expected " + expected
                                      : "placeholder '{" + var + "}' multiplies " +
                                            show(it->second) + "; expected a number");
      pr.mute(path);
      out = "{" + var + "}";
      return true;
    }
    const bool whole =
        it->second.is_number_integer() && factor.find_first_of(".eE") == std::string::npos;
    out = whole ? Json(it->second.get<int64_t>() * static_cast<int64_t>(k))
                : Json(it->second.get<double>() * k);
    return true;
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
      Json product;
      if (scaled(var, path, product)) {
        out += value_text(product);
        continue;
      }
      if (!is_identifier(var)) {  // not a placeholder: keep "{" and rescan after it
        out += '{';
        i = open + 1;
        continue;
      }
      auto it = values.find(var);
      if (it == values.end()) {
        pr.add(path, "unknown placeholder '{" + var + "}'; expected " + expected);
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

// Entry `e` at `ep` merged over the defaults into `out.merged`; `out.base` says where each key
// came from, for field paths.
void merge(const Json& defaults, const Json& e, const std::string& ep, ModelExpander::Entry& out) {
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
    if (k == "grid" || k == "when" ||
        std::find(kModelKeys.begin(), kModelKeys.end(), k) == kModelKeys.end())
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

// The values of grid point `point` of `e` (the last var varying fastest).
std::map<std::string, Json> grid_values(const ModelExpander::Entry& e, size_t point) {
  std::map<std::string, Json> values;
  for (size_t v = e.vars.size(); v-- > 0;) {
    const Json& list = e.vars[v].second;
    values[e.vars[v].first] = list[point % list.size()];
    point /= list.size();
  }
  return values;
}

// Whether `v` (a value of a model entry) holds a '{' in a string or a mapping key: a placeholder
// (or text that might be one).
bool has_brace(const Json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().find('{') != std::string::npos;
  if (v.is_array())
    return std::any_of(v.begin(), v.end(), [](const Json& e) { return has_brace(e); });
  if (v.is_object())
    for (auto it = v.begin(); it != v.end(); ++it)
      if (it.key().find('{') != std::string::npos || has_brace(it.value())) return true;
  return false;
}

// Whether the grid entry `e` varies only in its name, parameters and optimizer: no placeholder
// elsewhere, and no file of its own (`keras:`, `data:`).
bool fixed_entry(const ModelExpander::Entry& e) {
  if (e.is_template || e.vars.empty() || e.merged.contains("keras") || e.merged.contains("data"))
    return false;
  for (auto it = e.merged.begin(); it != e.merged.end(); ++it)
    if (it.key() != "name" && it.key() != "parameters" && it.key() != "optimizer" &&
        has_brace(it.value()))
      return false;
  return true;
}

// {trial}: the index zero-padded to `digits` ("007" of 100 trials), text even where the whole
// string is the placeholder.
std::string trial_text(size_t k, int digits) {
  std::string t = std::to_string(k);
  return std::string(t.size() < static_cast<size_t>(digits) ? digits - t.size() : 0, '0') + t;
}

Json parameters_json(const Parameters& p) {
  Json j = Json::object();
  for (const auto& [name, v] : p) j[name] = v;
  return j;
}

}  // namespace

// Model entry `e` at `ep` is a mapping (else a problem) and its keys are checked.
bool EntryExpander::entry_keys(const Json& e, const std::string& ep) {
  if (!e.is_object()) {
    cx_.pr.add(ep, "expected a mapping with a name and layers (or keras), got " + show(e));
    return false;
  }
  check_keys(cx_.pr, ep, e, kModelKeys);
  return true;
}

void EntryExpander::models(const Json& defaults, const Json& list, ModelExpander& ex,
                           std::vector<ModelRef>& out) {
  if (search_ && search_->sampled) return templates(defaults, list, ex, out);
  const size_t planned = planned_models(list);
  if (planned > limits::kMaxPlanModels) {
    cx_.pr.add("models", "plan too large; expected at most " +
                             std::to_string(limits::kMaxPlanModels) +
                             " models from all entries and their grids together, got more" +
                             "\nhint: split the fleet into several plans");
    return;
  }
  out.reserve(out.size() + planned);  // growing by doubling would copy every ref made so far
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string ep = index_path("models", i);
    const Json& e = list[i];
    if (!entry_keys(e, ep)) continue;
    if (e.contains("when"))
      cx_.pr.add(child_path(ep, "when"),
                 "when chooses the entry of a search's trials; expected it only with "
                 "search.space (this plan's models are " +
                     std::string(search_ ? "its search's trials as written)" : "not a search)"));
    ModelExpander::Entry entry;
    entry.path = ep;
    size_t count = 1;
    if (!grid(e, ep, entry.vars, count)) continue;  // expanding it would only repeat its problem
    merge(defaults, e, ep, entry);
    entry.fixed = !search_ && fixed_entry(entry);

    std::vector<std::string> var_names;
    for (const auto& v : entry.vars) var_names.push_back(v.first);
    const std::string name_template =
        e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";
    entries_.push_back({child_path(entry.base.count("name") ? entry.base["name"] : ep, "name"), ep,
                        name_template, var_names});
    ex.entries.push_back(std::move(entry));
    const auto index = static_cast<uint32_t>(ex.entries.size() - 1);
    start_quick(ex.entries.back(), index, count);
    expand_points(
        ex.entries, count,
        [index](size_t c) {
          return Point{index, c};
        },
        !ex.entries.back().merged.contains("data"), out);
    quick_.on = false;
  }
  check_unique_names(out);
}

void EntryExpander::start_quick(ModelExpander::Entry& e, uint32_t index, size_t count) {
  quick_.on = false;
  if (!e.fixed || count < 2) return;
  // Its first model built apart, its problems (if any) kept from the plan's: expand_points
  // builds it again and reports them, and its other models are then built too.
  Problems pr = Problems::recorder(cx_.pr.file(), cx_.doc.lines);
  EntryExpander probe(*this, pr);
  ModelSpec first = probe.expand(e, 0);
  if (!pr.take_calls().empty()) return;
  quick_ = {true, index, static_cast<uint32_t>(first.source), probe.builder().kind_items()};
  std::string().swap(first.expanded);  // a worker's model has none (PlanModels::to_train)
  e.first = std::make_shared<const ModelSpec>(std::move(first));
}

bool EntryExpander::quick_point(const ModelExpander::Entry& e, size_t point, std::string& name,
                                std::string& key) const {
  // Where load_plan's checks of these keys would find a problem, the model is built instead.
  Problems pr = Problems::recorder(cx_.pr.file(), cx_.doc.lines);
  Substituter sub{pr, grid_values(e, point), ""};
  const Json& m = e.merged;
  if (!m.contains("name") || !m["name"].is_string()) return false;
  Json n = m["name"];
  sub.apply(n, "name", false);
  if (!n.is_string()) return false;
  name = n.get<std::string>();
  if (!ModelBuilder::name_problems(name).empty()) return false;
  if (m.contains("parameters")) {
    Json p = m["parameters"];
    sub.apply(p, "parameters", true);
    if (!p.is_object()) return false;
  }
  Json opt = m.contains("optimizer") ? m["optimizer"] : Json::object({{"Adam", Json::object()}});
  sub.apply(opt, "optimizer", true);
  if (!pr.take_calls().empty()) return false;
  try {
    key = quick_.items + ModelBuilder::optimizer_kind(parse_optimizer(opt));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

ModelRef EntryExpander::point_ref(EntryExpander& l,
                                  const std::vector<ModelExpander::Entry>& entries, Point p,
                                  std::string& key) {
  std::string name;
  if (l.quick_.on && l.quick_.entry == p.entry && p.point > 0 &&
      l.quick_point(entries[p.entry], p.point, name, key))
    return {p.entry, static_cast<uint32_t>(p.point), l.quick_.source, 0, std::move(name)};
  ModelSpec s = l.expand(entries[p.entry], p.point);
  key = l.builder().kind_key();
  return {p.entry, static_cast<uint32_t>(p.point), static_cast<uint32_t>(s.source), 0,
          std::move(s.name)};
}

// A search's templates: each entry of `list` merged over `defaults`, and trial k expanded from
// the first whose `when` holds for it.
void EntryExpander::templates(const Json& defaults, const Json& list, ModelExpander& ex,
                              std::vector<ModelRef>& out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string ep = index_path("models", i);
    const Json& e = list[i];
    if (!entry_keys(e, ep)) continue;
    if (e.contains("parameters"))
      cx_.pr.add(child_path(ep, "parameters"),
                 "a trial's parameters are the values it drew from search.space; expected no "
                 "parameters in a search's model entry");
    ModelExpander::Entry entry;
    entry.path = ep;
    entry.is_template = true;
    if (e.contains("when"))
      entry.when = read_when(cx_.pr, child_path(ep, "when"), e["when"], search_->space,
                             search_->space.params.size(), "of search.space");
    if (e.contains("grid") && !e["grid"].is_null()) {
      cx_.pr.add(child_path(ep, "grid"),
                 "a search's trials are drawn from search.space; expected no grid in its model "
                 "entries (put the grid's vars in the space, e.g. {choice: [...]})");
      continue;
    }
    merge(defaults, e, ep, entry);
    const std::string name_template =
        e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";
    entries_.push_back({child_path(entry.base.count("name") ? entry.base["name"] : ep, "name"),
                        ep,
                        name_template,
                        {"trial"}});
    ex.entries.push_back(std::move(entry));
  }
  const std::vector<Trial>& trials = search_->trials;
  std::vector<uint32_t> which(trials.size());
  size_t unmatched = 0, first = 0;
  bool data = false;
  for (size_t k = 0; k < trials.size(); ++k) {
    size_t t = 0;
    while (t < ex.entries.size() && !search_->space.holds(ex.entries[t].when, trials[k])) ++t;
    if (t == ex.entries.size() && unmatched++ == 0) first = k;
    which[k] = static_cast<uint32_t>(t);
    data = data || (t < ex.entries.size() && ex.entries[t].merged.contains("data"));
  }
  if (unmatched > 0) {
    std::string drew;
    for (const auto& [name, v] : search_->space.named(trials[first]))
      drew += (drew.empty() ? "" : ", ") + name + ": " + value_text(v);
    cx_.pr.add(
        "models",
        "no model entry matches trial " + std::to_string(first) + " (" + drew + ")" +
            (unmatched > 1 ? " nor " + std::to_string(unmatched - 1) + " other trial(s)" : "") +
            "; expected an entry whose when: holds for it, or one without when");
    return;
  }
  out.reserve(trials.size());
  expand_points(
      ex.entries, trials.size(),
      [&](size_t k) {
        return Point{which[k], k};
      },
      !data, out);
  check_unique_names(out);
}

// Refs to the `count` models at(0), at(1), ... in `out`, each model expanded and so checked here
// (and made again when needed).
void EntryExpander::expand_points(const std::vector<ModelExpander::Entry>& entries, size_t count,
                                  const std::function<Point(size_t)>& at, bool apart,
                                  std::vector<ModelRef>& out) {
  // A model with data of its own adds its source to the plan's list, in model order: never apart.
  if (threads_ > 1 && count >= 2 * kBlock && apart)
    return expand_points_apart(entries, count, at, out);
  std::string key;
  for (size_t c = 0; c < count; ++c) {
    out.push_back(point_ref(*this, entries, at(c), key));
    out.back().kind = kind_of(key);
  }
}

uint32_t EntryExpander::kind_of(const std::string& key) {
  return kinds_.emplace(key, static_cast<uint32_t>(kinds_.size())).first->second;
}

// The same on up to threads_ threads, in blocks of kBlock models, each thread with an expander
// of its own whose problems are replayed here in model order: the same problems as one after the
// other. (An 8 x 1,000 grid of tiny models took 0.25 s to check on one thread, Zen 3.)
void EntryExpander::expand_points_apart(const std::vector<ModelExpander::Entry>& entries,
                                        size_t count, const std::function<Point(size_t)>& at,
                                        std::vector<ModelRef>& out) {
  const size_t blocks = (count + kBlock - 1) / kBlock;
  const int threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads_), blocks));
  std::vector<std::unique_ptr<Problems>> prs;
  std::vector<std::unique_ptr<EntryExpander>> expanders;
  for (int t = 0; t < threads; ++t) {
    prs.push_back(std::make_unique<Problems>(Problems::recorder(cx_.pr.file(), cx_.doc.lines)));
    expanders.push_back(std::make_unique<EntryExpander>(*this, *prs.back()));
  }
  // Each block's refs go straight to their place in `out`: copies of them made apart and joined
  // after were 4.8 MB more for a grid of 100,000 models, left in pieces in the threads' heaps.
  const size_t base = out.size();
  out.resize(base + count);
  struct Block {
    std::vector<std::string> kinds;  // the block's refs' kinds index these until joined
    std::vector<Problems::Call> calls;
  };
  std::vector<Block> done(blocks);
  for_each_block(blocks, threads, [&](int t, size_t b) {
    EntryExpander& l = *expanders[static_cast<size_t>(t)];
    Block& d = done[b];
    for (size_t c = b * kBlock; c < std::min(count, (b + 1) * kBlock); ++c) {
      std::string key;
      out[base + c] = point_ref(l, entries, at(c), key);
      const auto kind =
          static_cast<uint32_t>(std::find(d.kinds.begin(), d.kinds.end(), key) - d.kinds.begin());
      if (kind == d.kinds.size()) d.kinds.push_back(key);
      out[base + c].kind = kind;
    }
    d.calls = prs[static_cast<size_t>(t)]->take_calls();
  });
  for (size_t b = 0; b < blocks; ++b) {
    cx_.pr.replay(done[b].calls);
    std::vector<uint32_t> kinds;
    for (const std::string& key : done[b].kinds) kinds.push_back(kind_of(key));
    for (size_t c = b * kBlock; c < std::min(count, (b + 1) * kBlock); ++c)
      out[base + c].kind = kinds[out[base + c].kind];
  }
}

// The grid of entry `e` at `ep` into `vars`, in the order its vars are written (the last one
// varies fastest), and the number of models it makes into `count`; false when it is broken.
bool EntryExpander::grid(const Json& e, const std::string& ep,
                         std::vector<std::pair<std::string, Json>>& vars, size_t& count) {
  if (!e.contains("grid") || e["grid"].is_null()) return true;
  const std::string gp = child_path(ep, "grid");
  const Json& g = e["grid"];
  if (!g.is_object()) {
    cx_.pr.add(gp, "expected a mapping of var names to lists of values, got " + show(g));
    return false;
  }
  bool ok = true;
  auto order = cx_.doc.keys.find(gp);
  for (const auto& var : order != cx_.doc.keys.end() ? order->second : std::vector<std::string>{}) {
    const std::string vp = child_path(gp, var);
    const Json& values = g[var];
    if (!is_identifier(var)) {
      cx_.pr.add(vp, "bad grid var name; expected letters, digits and '_', not starting " +
                         std::string("with a digit, got ") + show(var));
      ok = false;
    } else if (!values.is_array() || values.empty()) {
      cx_.pr.add(vp, "expected a non-empty list of values, got " + show(values));
      ok = false;
    } else {
      vars.emplace_back(var, values);
      count *= values.size();
      if (count > kMaxModelsPerEntry) {
        cx_.pr.add(gp, "grid too large; expected at most " + std::to_string(kMaxModelsPerEntry) +
                           " models from one entry, got more");
        return false;
      }
    }
  }
  return ok;
}

ModelSpec EntryExpander::expand(const ModelExpander::Entry& e, size_t point) {
  std::map<std::string, Json> values;
  std::string expected;
  if (e.is_template) {
    std::vector<std::string> names;
    for (const auto& [d, v] : search_->trials[point]) {
      values[search_->space.names[d]] = v;
      names.push_back(search_->space.names[d]);
    }
    values["trial"] = trial_text(point, search_->digits);
    expected = "one of the parameters of search.space that trial " + std::to_string(point) +
               " drew (" + (names.empty() ? std::string("none") : join(names)) + ") or trial";
  } else {
    values = grid_values(e, point);
    std::vector<std::string> var_names;
    for (const auto& v : e.vars) var_names.push_back(v.first);
    expected = var_names.empty() ? "none, as this model has no grid"
                                 : "one of the grid's vars: " + join(var_names);
  }
  Substituter sub{cx_.pr, values, expected};
  Json m = e.merged;
  RepeatedLayers layers;
  for (auto it = m.begin(); it != m.end(); ++it) {
    const std::string path = child_path(e.base.at(it.key()), it.key());
    if (it.key() != "layers") {
      sub.apply(it.value(), path, it.key() != "name");
      continue;
    }
    // Blocks repeated before the placeholders are substituted ("{width_{i}}": "{width_0}").
    layers = expand_repeats(cx_.pr, it.value(), path, values);
    for (size_t j = 0; j < layers.paths.size(); ++j)
      sub.apply(layers.list[j], layers.paths[j], true);
    it.value() = std::move(layers.list);
  }
  if (e.is_template)
    m["parameters"] = parameters_json(search_->space.named(search_->trials[point]));
  if (search_) search_epochs(e, m);
  builder_.set_layer_paths(layers.paths.empty() ? nullptr : &layers.paths);
  ModelSpec s = builder_.build(m, e.base, e.path);
  builder_.set_layer_paths(nullptr);
  return s;
}

// A search's trials train for the scheduler's max_epochs: an entry's own epochs, unless the same,
// would say otherwise (plan.yaml writes every trial's epochs, and loads back).
void EntryExpander::search_epochs(const ModelExpander::Entry& e, Json& m) {
  if (!search_->epochs) return;
  const int epochs = *search_->epochs;
  if (m.contains("epochs") && !(m["epochs"].is_number() && m["epochs"].get<double>() == epochs))
    cx_.pr.add(child_path(e.base.at("epochs"), "epochs"),
               "a search's epochs are set by " + search_->epochs_path +
                   " (max_epochs: " + std::to_string(epochs) + "); expected no epochs here (or " +
                   std::to_string(epochs) + "), got " + show(m["epochs"]));
  m["epochs"] = epochs;
}

// The models sorted by name (ties in plan order) find the repeated names: 4 bytes a model where a
// map of the names took about 80 (8 MB for 100,000 models). Each repeat is reported in plan
// order, naming the model that had the name first.
void EntryExpander::check_unique_names(const std::vector<ModelRef>& models) {
  std::vector<uint32_t> order;
  order.reserve(models.size());
  for (size_t k = 0; k < models.size(); ++k)
    if (!models[k].name.empty()) order.push_back(static_cast<uint32_t>(k));  // empty: reported
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return models[a].name < models[b].name; });
  std::vector<std::pair<uint32_t, uint32_t>> repeats;  // (model, the first with its name)
  for (size_t i = 1, first = 0; i < order.size(); ++i) {
    if (models[order[i]].name != models[order[first]].name)
      first = i;
    else
      repeats.emplace_back(order[i], order[first]);
  }
  std::sort(repeats.begin(), repeats.end());
  for (const auto& [k, f] : repeats) {
    const std::string& name = models[k].name;
    const Expanded& a = entries_[models[f].entry];
    const Expanded& b = entries_[models[k].entry];
    std::string msg = "duplicate model name '" + name + "'; expected names unique across the " +
                      "expanded plan, got it again (first from " + a.entry + " at line " +
                      std::to_string(cx_.pr.line(a.entry)) + ")";
    if (a.entry == b.entry) {
      std::vector<std::string> unused;
      for (const auto& v : b.grid_vars)
        if (b.name_template.find("{" + v + "}") == std::string::npos) unused.push_back(v);
      if (!unused.empty())
        msg += "; hint: put every grid var in the name, e.g. {" + join(unused, "}, {") + "}";
    }
    cx_.pr.add(b.name_path, msg);
  }
}

ModelSpec ModelExpander::expand(const ModelRef& r, bool text) const {
  Problems pr(file, doc.lines);
  EntryExpander expander(PlanContext{doc, pr, dir, arrays});
  expander.builder().set_checked();
  if (!text) expander.builder().set_no_text();
  if (has_search) expander.set_search(&search);
  ModelSpec s = expander.expand(entries.at(r.entry), r.point);
  NNFLEET_CHECK(pr.empty());  // load_plan expanded the same model without a problem
  s.source = r.source;
  return s;
}

OptimizerSpec ModelExpander::optimizer(const ModelRef& r) const {
  const Entry& e = entries.at(r.entry);
  if (!e.merged.contains("optimizer"))
    return parse_optimizer(Json::object({{"Adam", Json::object()}}));
  Problems pr(file, doc.lines);
  Substituter sub{pr, grid_values(e, r.point), ""};
  Json opt = e.merged["optimizer"];
  sub.apply(opt, child_path(e.base.at("optimizer"), "optimizer"), true);
  NNFLEET_CHECK(pr.empty());  // load_plan substituted the same values without a problem
  return parse_optimizer(opt);
}

Parameters ModelExpander::parameters(const ModelRef& r) const {
  const Entry& e = entries.at(r.entry);
  if (e.is_template) return search.space.named(search.trials.at(r.point));
  const std::map<std::string, Json> values = grid_values(e, r.point);
  Parameters out;
  if (!e.merged.contains("parameters")) {
    for (const auto& v : e.vars) out.emplace_back(v.first, values.at(v.first));
    return out;
  }
  // The entry's own `parameters:`, its placeholders substituted, in its written order.
  Problems pr(file, doc.lines);
  Substituter sub{pr, values, ""};
  const std::string path = child_path(e.base.at("parameters"), "parameters");
  Json p = e.merged["parameters"];
  sub.apply(p, path, true);
  auto order = doc.keys.find(path);
  for (const auto& k : order != doc.keys.end() ? order->second : std::vector<std::string>{}) {
    const std::string key = sub.text(k, path);
    if (p.contains(key)) out.emplace_back(key, p[key]);
  }
  return out;
}

}  // namespace plan_detail

PlanModels::PlanModels(std::shared_ptr<const plan_detail::ModelExpander> expander,
                       std::vector<plan_detail::ModelRef> refs)
    : expander_(std::move(expander)), refs_(std::move(refs)) {
  refs_.shrink_to_fit();
}

ModelSpec PlanModels::operator[](size_t k) const { return expander_->expand(refs_[k]); }

ModelSpec PlanModels::to_train(size_t k) const {
  const plan_detail::ModelRef& r = refs_.at(k);
  const plan_detail::ModelExpander::Entry& e = expander_->entries[r.entry];
  if (!e.first) return expander_->expand(r, false);
  // Its entry's first model but for its name and optimizer: a tenth of the time of expanding a
  // tiny model (copying the first's spec, substituting and parsing the optimizer alone).
  ModelSpec s = *e.first;
  s.name = r.name;
  s.source = r.source;
  s.optimizer = expander_->optimizer(r);
  return s;
}

std::vector<std::pair<std::string, Json>> PlanModels::parameters(size_t k) const {
  return expander_->parameters(refs_.at(k));
}

std::vector<PlanModels::GridEntry> PlanModels::grid_entries() const {
  if (!expander_ || expander_->has_search) return {};
  std::vector<GridEntry> out;
  size_t k = 0;
  for (size_t i = 0; i < expander_->entries.size(); ++i) {
    const plan_detail::ModelExpander::Entry& e = expander_->entries[i];
    if (e.is_template || e.merged.contains("keras") || e.merged.contains("data")) return {};
    size_t points = 1;
    for (const auto& v : e.vars) points *= v.second.size();
    for (size_t p = 0; p < points; ++p, ++k)
      if (k >= refs_.size() || refs_[k].entry != i || refs_[k].point != p) return {};
    GridEntry g{e.merged, {}};
    if (!e.vars.empty()) {
      Json grid = Json::object();
      for (const auto& [name, values] : e.vars) {
        grid[name] = values;
        g.vars.push_back(name);
      }
      g.entry["grid"] = std::move(grid);
    }
    out.push_back(std::move(g));
  }
  if (k != refs_.size()) return {};
  return out;
}

ModelSpec PlanModels::at(size_t k) const {
  if (k >= refs_.size())
    throw std::out_of_range("model " + std::to_string(k) + " of a plan of " +
                            std::to_string(refs_.size()));
  return (*this)[k];
}

const std::vector<std::string>& plan_defaults_keys() { return plan_detail::kDefaultsKeys; }

}  // namespace nnfleet
