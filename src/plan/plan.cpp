// Plan loading: the file is read as YAML (JSON is YAML too), converted to JSON with the line of
// every field, checked field by field with every problem collected, and each model entry is
// merged over `defaults` and expanded over its grid into ModelSpecs. This file holds the
// top-level load; the pieces it uses are in plan_loader.h.
#include "plan/plan.h"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "core/limits.h"
#include "plan/plan_loader.h"
#include "plan/plan_problems.h"
#include "plan/plan_yaml.h"
#include "plan/yaml_emitter.h"
#include "platform/cpu.h"
#include "platform/files.h"

namespace nnfleet {
namespace {

namespace fs = std::filesystem;
using plan_detail::check_keys;
using plan_detail::EntryExpander;
using plan_detail::join;
using plan_detail::LocatedJson;
using plan_detail::ModelExpander;
using plan_detail::ModelRef;
using plan_detail::PlanContext;
using plan_detail::Problems;

const std::vector<std::string> kTopKeys = {"data", "defaults", "group_by", "models",
                                           "save", "search",   "seed"};
// Key order in plan.yaml; other keys follow sorted.
// clang-format off
const std::vector<std::string> kYamlOrder = {
    "name", "parameters", "seed", "group_by", "save", "data", "train", "validation", "test", "scale", "take", "validation_split", "search",
    "defaults", "models", "keras",
    "epochs", "batch_size", "batch_split", "shuffle", "loss", "loss_weights", "metrics", "optimizer", "early_stopping",
    "monitor", "patience", "min_delta", "restore_best_weights", "mode", "start_from_epoch",
    "weighted_metrics", "reduce_lr_on_plateau", "factor", "cooldown", "min_lr", "class_weight",
    "layers"};
// clang-format on

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

// The plan's text as YAML; text that is not UTF-8, holds a control character or is not YAML is
// refused with one problem.
YAML::Node read_yaml(const std::string& text, const std::string& path) {
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
  return root;
}

// The document as JSON with the line of every field; past a limit of plan_yaml.h, refused with
// one problem.
LocatedJson located_json(const YAML::Node& root, const std::string& path) {
  try {
    return plan_detail::yaml_to_json(root);
  } catch (const plan_detail::YamlLimitError& e) {
    throw PlanError("failed to load plan '" + path + "': 1 problem(s)\n" + path + ":" +
                    std::to_string(e.line()) + ": " + (e.path().empty() ? "" : e.path() + ": ") +
                    e.what());
  }
}

void read_seed(Problems& pr, const Json& r, Plan& plan) {
  if (!r.contains("seed") || r["seed"].is_null()) return;
  const Json& v = r["seed"];
  if (v.is_number_unsigned())
    plan.seed = v.get<uint64_t>();
  else if (v.is_number_integer() && v.get<int64_t>() >= 0)
    plan.seed = static_cast<uint64_t>(v.get<int64_t>());
  else
    pr.add("seed", "expected a non-negative integer, got " + show(v));
}

void read_save(Problems& pr, const Json& r, Plan& plan) {
  if (!r.contains("save") || r["save"].is_null()) return;
  const Json& v = r["save"];
  std::string why = "a text";
  if (v.is_string())
    if (std::optional<SavePolicy> p = parse_save_policy(v.get<std::string>(), why)) {
      plan.save = *p;
      return;
    }
  pr.add("save", "expected all, best N (N >= 1) or none, got " + show(v) + " (" + why + ")");
}

// The plan's data, defaults and models (`r`, a mapping): its sources into `plan`, its entries
// into `ex` and a ref per model into `refs`.
void read_models(const PlanContext& cx, EntryExpander& models, const Json& r, Plan& plan,
                 ModelExpander& ex, std::vector<ModelRef>& refs) {
  Problems& pr = cx.pr;
  plan.has_data = r.contains("data") && !r["data"].is_null();
  if (plan.has_data) {
    plan.data = plan_detail::read_data(cx, "data", r["data"]);
    plan.sources.push_back(plan.data);
  }
  models.builder().set_default_source(&plan.sources, plan.has_data);

  const Json defaults = r.contains("defaults") ? r["defaults"] : Json();
  if (!defaults.is_null() && !defaults.is_object())
    pr.add("defaults", "expected a mapping of model settings, got " + show(defaults));
  else if (defaults.is_object())
    check_keys(pr, "defaults", defaults, plan_detail::kDefaultsKeys);

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
  if (has_models) models.models(defaults, r["models"], ex, refs);
}

// group_by: the parameter the report groups the models by; it must be one the run records (a grid
// variable, a search parameter or a `parameters:` key), else the report would have no groups.
void read_group_by(Problems& pr, const Json& r, Plan& plan) {
  if (!r.contains("group_by") || r["group_by"].is_null()) return;
  std::vector<std::string> names;  // in first-seen order
  if (plan.search && plan.search->sampled) {
    for (const SearchParameter& p : plan.search->parameters) names.push_back(p.name);
  } else {
    std::set<std::string> seen;
    for (size_t k = 0; k < plan.models.size(); ++k)
      for (const auto& [name, value] : plan.models.parameters(k))
        if (seen.insert(name).second) names.push_back(name);
  }
  const Json& v = r["group_by"];
  if (v.is_string() && std::find(names.begin(), names.end(), v.get<std::string>()) != names.end()) {
    plan.group_by = v.get<std::string>();
    return;
  }
  pr.add("group_by",
         std::string(v.is_string() ? "names no recorded parameter" : "is not a parameter name") +
             "; expected a grid variable, search parameter or `parameters:` key of this plan (" +
             (names.empty() ? "it has none" : join(names)) + "), got " + show(v));
}

}  // namespace

SavePolicy SavePolicy::resolved(size_t models) const {
  if (kind != Kind::kDefault) return *this;
  if (models <= kSaveAllUpTo) return {Kind::kAll, 0};
  return {Kind::kBest, kDefaultBest};
}

std::string SavePolicy::text() const {
  switch (kind) {
    case Kind::kAll:
      return "all";
    case Kind::kNone:
      return "none";
    case Kind::kBest:
      return "best " + std::to_string(best);
    case Kind::kDefault:
      break;
  }
  return "";
}

std::optional<SavePolicy> parse_save_policy(const std::string& text, std::string& why) {
  if (text == "all") return SavePolicy{SavePolicy::Kind::kAll, 0};
  if (text == "none") return SavePolicy{SavePolicy::Kind::kNone, 0};
  if (text.rfind("best ", 0) != 0) {
    why = "an unknown policy";
    return std::nullopt;
  }
  const std::string n = text.substr(5);
  // At most 12 digits: a count of models, not an overflow.
  if (n.empty() || n.size() > 12 || n.find_first_not_of("0123456789") != std::string::npos) {
    why = "N is not a whole number";
    return std::nullopt;
  }
  const size_t best = std::stoull(n);
  if (best == 0) {
    why = "best 0 keeps nothing: use none";
    return std::nullopt;
  }
  return SavePolicy{SavePolicy::Kind::kBest, best};
}

Plan load_plan(const std::string& path, bool arrays) {
  return parse_plan(read_plan_file(path), path, fs::absolute(fs::path(path)).parent_path().string(),
                    0, arrays);
}

Plan parse_plan(const std::string& text, const std::string& path, const std::string& base_dir,
                int threads, bool arrays) {
  const YAML::Node root = read_yaml(text, path);
  auto expander = std::make_shared<ModelExpander>(path, fs::absolute(fs::path(base_dir)));
  expander->doc = located_json(root, path);
  expander->arrays = arrays;
  const LocatedJson& doc = expander->doc;
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
  read_seed(pr, r, plan);
  read_save(pr, r, plan);

  const PlanContext cx{doc, pr, expander->dir, arrays};
  EntryExpander models(cx);
  models.set_threads(threads > 0 ? threads : static_cast<int>(allowed_cpus().size()));
  if (r.contains("search") && !r["search"].is_null()) {
    plan.search.emplace();
    plan_detail::read_search(cx, r["search"], plan.seed, *plan.search, expander->search);
    expander->has_search = true;
    models.set_search(&expander->search);
  }
  std::vector<ModelRef> refs;
  read_models(cx, models, r, plan, *expander, refs);
  if (plan.search && !plan.search->sampled) {
    // The plan's models are the trials; a max_total_epochs keeps the first that fit.
    refs.resize(plan_detail::fit_trials(pr, *plan.search, refs.size()));
    plan.search->trials = refs.size();
  }
  pr.throw_if_any();
  plan.models = PlanModels(std::move(expander), std::move(refs));
  read_group_by(pr, r, plan);
  pr.throw_if_any();
  return plan;
}

namespace {

// Model `m` (an expanded_json) as an entry over `defaults` (plan_expand.cpp's merge: an entry's
// key replaces the default's, null removes it; null and absent are the same in a model): only
// the keys whose values differ, and null for a default it lacks.
Json entry_over(const Json& m, const Json& defaults) {
  Json out = Json::object();
  for (auto it = m.begin(); it != m.end(); ++it)
    if (!it.value().is_null() && !(defaults.contains(it.key()) && defaults[it.key()] == it.value()))
      out[it.key()] = it.value();
  for (auto it = defaults.begin(); it != defaults.end(); ++it)
    if (!m.contains(it.key()) || m[it.key()].is_null()) out[it.key()] = nullptr;
  return out;
}

}  // namespace

namespace {

// A large fleet's plan.yaml in its grid form: `head` (every key of which comes before `models`
// in kYamlOrder), then each entry as written with its grid, the grid's variables in their
// written order (the order of the models).
std::string grid_form(const Json& head, const std::vector<PlanModels::GridEntry>& entries) {
  std::string text = plan_detail::json_to_yaml(head, kYamlOrder) + "models:\n";
  for (const PlanModels::GridEntry& g : entries) {
    std::vector<std::string> first = {"name", "grid"};
    for (const std::vector<std::string>* list : {&g.vars, &kYamlOrder})
      for (const std::string& k : *list)
        if (std::find(first.begin(), first.end(), k) == first.end()) first.push_back(k);
    const std::string one =
        plan_detail::json_to_yaml(Json::object({{"models", Json::array({g.entry})}}), first);
    text.append(one, one.find('\n') + 1);  // without its "models:" line
  }
  return text;
}

}  // namespace

std::string plan_to_yaml(const Plan& plan, int threads, bool factored) {
  Json head = Json::object({{"seed", plan.seed}, {"models", nullptr}});
  if (plan.has_data) head["data"] = plan.data.to_json();
  if (plan.search) head["search"] = plan.search->to_json();
  if (!plan.group_by.empty()) head["group_by"] = plan.group_by;  // read by the report
  if (plan.save.kind != SavePolicy::Kind::kDefault) head["save"] = plan.save.text();
  if (factored && !plan.search) {
    const std::vector<PlanModels::GridEntry> entries = plan.models.grid_entries();
    if (!entries.empty()) {
      head.erase("models");
      return grid_form(head, entries);
    }
  }
  // factored: the first model's settings as `defaults:`, each model only what differs (a grid
  // of 100,000 tiny models: 35 MB of plan.yaml, 350 bytes a model, before).
  Json defaults;
  if (factored && !plan.search && !plan.models.empty()) {
    const Json first = plan.models[0].expanded_json();
    defaults = Json::object();
    for (const std::string& k : plan_detail::kDefaultsKeys)
      if (first.contains(k) && !first[k].is_null()) defaults[k] = first[k];
    if (!defaults.empty()) head["defaults"] = defaults;
  }
  return plan_detail::json_to_yaml(
      head, kYamlOrder, "models", plan.models.size(),
      [&](size_t k) {
        const Json m = plan.models[k].expanded_json();
        return defaults.is_object() ? entry_over(m, defaults) : m;
      },
      threads);
}

}  // namespace nnfleet
