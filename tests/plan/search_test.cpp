// A plan's search: each distribution's draws (range and scale), their determinism, conditional
// and per parameters, templates chosen by `when`, `repeat:` blocks, {trial} names, parameters(),
// max_total_epochs, the plan.yaml round trip, the W5 example, and every problem at file:line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan/plan_loader.h"
#include "plan/search_space.h"
#include "tensor/rng.h"

namespace nnfleet {
namespace {

using plan_detail::Parameters;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* const kData = "data:\n  train: fashion-mnist:train\n";  // lines 1 and 2

Plan parse(const std::string& text, int threads = 1) {
  return parse_plan(text, "s.yaml", ".", threads);
}

// The problem lines of the PlanError parse() throws (without its header line).
std::vector<std::string> problems(const std::string& text) {
  try {
    parse(text);
  } catch (const PlanError& e) {
    std::istringstream ss(e.what());
    std::vector<std::string> lines;
    std::string line;
    std::getline(ss, line);
    while (std::getline(ss, line)) lines.push_back(line);
    return lines;
  }
  ADD_FAILURE() << "parse_plan did not throw";
  return {};
}

std::string w5() { return std::string(NNFLEET_SOURCE_DIR) + "/examples/search/w5.yaml"; }

// n draws of distribution `d` (JSON text) as a space's parameter "x" under seed 7.
std::vector<Json> draws(const std::string& d, size_t n) {
  const std::map<std::string, int> lines;
  plan_detail::Problems pr("t", lines);
  const auto p = plan_detail::read_distribution(pr, "x", "x", Json::parse(d));
  EXPECT_TRUE(pr.empty() && p) << d;
  std::vector<Json> out;
  for (size_t k = 0; p && k < n; ++k)
    out.push_back(plan_detail::value_at(*p, plan_detail::random_u(7, k, "x")));
  return out;
}

double median(std::vector<Json> v) {
  std::vector<double> x;
  for (const auto& j : v) x.push_back(j.get<double>());
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

std::map<std::string, Json> as_map(const Parameters& p) { return {p.begin(), p.end()}; }

const Json* find(const Parameters& p, const std::string& name) {
  for (const auto& [n, v] : p)
    if (n == name) return &v;
  return nullptr;
}

// A search plan: the space (YAML lines under `space:`, indented 4) and the models after it.
std::string search_plan(const std::string& space, const std::string& models,
                        const std::string& extra = "", int trials = 6) {
  return std::string(kData) + "search:\n  trials: " + std::to_string(trials) +
         "\n  scheduler: {successive_halving: {reduction_factor: 3, min_epochs: 1, max_epochs: "
         "9}}\n" +
         extra + "  space:\n" + space + "models:\n" + models;
}

const char* const kMlp =
    "  - name: \"t-{trial}\"\n"
    "    optimizer: {SGD: {learning_rate: \"{lr}\"}}\n"
    "    layers: [Flatten, Dense: {units: 10, activation: softmax}]\n";

// ---- Distributions ----

TEST(SearchDraws, UniformAndLogUniformHaveTheirRangeAndScale) {
  const auto u = draws(R"({"uniform": [0.2, 0.7]})", 1000);
  for (const auto& v : u) {
    ASSERT_TRUE(v.is_number_float());
    EXPECT_GE(v.get<double>(), 0.2);
    EXPECT_LE(v.get<double>(), 0.7);
  }
  EXPECT_NEAR(median(u), 0.45, 0.04);
  // Log scale: the median is the geometric mean 1e-3, not the arithmetic 5e-3.
  const auto l = draws(R"({"loguniform": [1e-4, 1e-2]})", 1000);
  for (const auto& v : l) {
    EXPECT_GE(v.get<double>(), 1e-4);
    EXPECT_LE(v.get<double>(), 1e-2);
  }
  EXPECT_GT(median(l), 1e-3 / 1.3);
  EXPECT_LT(median(l), 1e-3 * 1.3);
  EXPECT_EQ(draws(R"({"float": [1e-4, 1e-2], "log": true})", 50),
            draws(R"({"loguniform": [1e-4, 1e-2]})", 50));
}

TEST(SearchDraws, IntegersCoverTheirRangeOnTheirScale) {
  std::set<int64_t> seen;
  for (const auto& v : draws(R"({"int": [1, 3]})", 300)) {
    ASSERT_TRUE(v.is_number_integer());
    seen.insert(v.get<int64_t>());
  }
  EXPECT_THAT(seen, ElementsAre(1, 2, 3));
  const auto l = draws(R"({"int": [32, 512], "log": true})", 1000);
  for (const auto& v : l) {
    ASSERT_TRUE(v.is_number_integer());
    EXPECT_GE(v.get<int64_t>(), 32);
    EXPECT_LE(v.get<int64_t>(), 512);
  }
  EXPECT_GT(median(l), 128 / 1.3);  // geometric mean of [32, 513)
  EXPECT_LT(median(l), 128 * 1.3);
  std::set<int64_t> stepped;
  for (const auto& v : draws(R"({"int": [0, 11], "step": 5})", 300))
    stepped.insert(v.get<int64_t>());
  EXPECT_THAT(stepped, ElementsAre(0, 5, 10));
}

TEST(SearchDraws, FloatStepsChoicesAndFixedValues) {
  std::set<double> stepped;
  for (const auto& v : draws(R"({"float": [0, 0.5], "step": 0.1})", 500))
    stepped.insert(v.get<double>());
  EXPECT_THAT(stepped, ElementsAre(0.0, 0.1, 0.2, 0.3, 0.4, 0.5));  // 0.3 exactly, not 0.30000...4
  std::map<std::string, int> counts;
  for (const auto& v : draws(R"({"choice": ["relu", "tanh", "gelu"]})", 900))
    ++counts[v.get<std::string>()];
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [name, n] : counts) EXPECT_NEAR(n, 300, 60) << name;
  EXPECT_EQ(draws(R"({"choice": [32, 64]})", 1)[0].is_number_integer(), true);
  for (const auto& v : draws(R"({"fixed": 0.9})", 5)) EXPECT_EQ(v, Json(0.9));
}

TEST(SearchDraws, ADrawDependsOnlyOnSeedTrialAndName) {
  const double u = plan_detail::random_u(3, 5, "lr");
  EXPECT_EQ(plan_detail::random_u(3, 5, "lr"), u);
  EXPECT_NE(plan_detail::random_u(4, 5, "lr"), u);
  EXPECT_NE(plan_detail::random_u(3, 6, "lr"), u);
  EXPECT_NE(plan_detail::random_u(3, 5, "lr2"), u);
  // The design's definition: the 53 high bits of Rng(seed, "trial/k", "param/name")'s first draw.
  Rng rng(3, "trial/5", "param/lr");
  EXPECT_EQ(u, static_cast<double>(rng.next() >> 11) * 0x1p-53);
}

TEST(SearchDraws, SobolPointsAreStratifiedAndShiftedByTheSeed) {
  plan_detail::SobolSequence a(11, 3), b(11, 3), c(12, 3);
  std::set<int> bins;
  bool differs = false;
  for (int k = 0; k < 63; ++k) {
    const std::vector<double> pa = a.next();
    EXPECT_EQ(pa, b.next());
    differs = differs || pa != c.next();
    for (double x : pa) {
      EXPECT_GE(x, 0.0);
      EXPECT_LT(x, 1.0);
    }
    bins.insert(static_cast<int>(pa[0] * 64));
  }
  // Points 0..63 (the origin first) lie one in each 1/64 of a dimension (a net), shifted or not.
  EXPECT_EQ(bins.size(), 63u);
  EXPECT_TRUE(differs);
}

TEST(SearchDraws, SampleOneTakesThePlansPath) {
  const Plan p =
      parse(search_plan("    a: {choice: [x, y]}\n    lr: {loguniform: [1.0e-4, 1.0e-2]}\n", kMlp,
                        "  sampler: sobol\n"));
  const Plan r =
      parse(search_plan("    a: {choice: [x, y]}\n    lr: {loguniform: [1.0e-4, 1.0e-2]}\n", kMlp));
  const Json d = Json::parse(R"({"loguniform": [1e-4, 1e-2]})");
  for (size_t k = 0; k < p.models.size(); ++k) {
    EXPECT_EQ(*find(p.models.parameters(k), "lr"),
              plan_detail::sample_one(0, k, "lr", d, "sobol", 1));
    EXPECT_EQ(*find(r.models.parameters(k), "lr"),
              plan_detail::sample_one(0, k, "lr", d, "random", 0));
  }
  EXPECT_THROW(
      plan_detail::sample_one(0, 0, "lr", Json::parse(R"({"uniform": [1, 0]})"), "random", 0),
      UsageError);
  try {
    plan_detail::sample_one(0, 0, "lr", Json::parse(R"({"int": [1, 2], "step": -1})"), "random", 0);
    ADD_FAILURE() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("failed to sample parameter 'lr': lr.step: expected a positive "
                                    "integer, got -1"));
  }
  EXPECT_THROW(plan_detail::sample_one(0, 0, "lr", d, "halton", 0), UsageError);
  EXPECT_THROW(plan_detail::sample_one(0, 0, "lr", d, "sobol", 40), UsageError);
}

// ---- Trials ----

TEST(Search, W5ExampleDrawsConditionalTrialsFromItsTemplates) {
  const Plan p = load_plan(w5());
  ASSERT_TRUE(p.search.has_value());
  const SearchSpec& s = *p.search;
  EXPECT_TRUE(s.sampled);
  EXPECT_EQ(s.trials, 81u);
  ASSERT_EQ(p.models.size(), 81u);
  EXPECT_EQ(s.schedule.kind, SearchSchedule::Kind::kHalving);
  EXPECT_EQ(s.schedule.max_budget, 9);
  EXPECT_EQ(s.metric, "val_accuracy");
  EXPECT_TRUE(s.higher_is_better);
  std::vector<std::string> names;
  for (const auto& q : s.parameters) names.push_back(q.name + ":" + q.kind + (q.log ? ":log" : ""));
  EXPECT_THAT(names, ElementsAre("family:choice", "depth:int", "width:int:log", "activation:choice",
                                 "dropout:float", "filters:int:log", "kernel:choice",
                                 "dense:int:log", "lr:float:log", "batch_size:choice"));
  int mlps = 0, cnns = 0;
  for (size_t k = 0; k < p.models.size(); ++k) {
    const ModelSpec m = p.models[k];
    const Parameters q = p.models.parameters(k);
    const std::string index = (k < 10 ? "0" : "") + std::to_string(k);
    EXPECT_EQ(m.epochs, 9);
    EXPECT_EQ(q[0].first, "family");
    EXPECT_DOUBLE_EQ(m.optimizer.learning_rate, find(q, "lr")->get<double>());
    EXPECT_EQ(m.batch_size, find(q, "batch_size")->get<int>());
    EXPECT_EQ(m.expanded_json()["parameters"], Json(as_map(q)));
    if (q[0].second == "mlp") {
      ++mlps;
      EXPECT_EQ(m.name, "mlp-" + index);
      const int depth = find(q, "depth")->get<int>();
      ASSERT_EQ(m.layers.size(), static_cast<size_t>(2 + 2 * depth));
      for (int i = 0; i < depth; ++i) {
        const Json* w = find(q, "width_" + std::to_string(i));
        ASSERT_NE(w, nullptr);
        EXPECT_EQ(m.layers[1 + 2 * i].config["units"], *w);
        EXPECT_EQ(m.layers[2 + 2 * i].config["rate"], *find(q, "dropout"));
      }
      EXPECT_EQ(find(q, "width_" + std::to_string(depth)), nullptr);
      EXPECT_EQ(find(q, "filters"), nullptr);
    } else {
      ++cnns;
      EXPECT_EQ(m.name, "cnn-" + index);
      EXPECT_EQ(m.layers[0].class_name, "Conv2D");
      EXPECT_EQ(m.layers[0].config["filters"], *find(q, "filters"));
      EXPECT_EQ(find(q, "depth"), nullptr);
      EXPECT_EQ(find(q, "width_0"), nullptr);
    }
  }
  EXPECT_GT(mlps, 20);
  EXPECT_GT(cnns, 20);
}

TEST(Search, AddingAParameterChangesNoOtherDraw) {
  const Plan a = parse(search_plan("    lr: {loguniform: [1.0e-4, 1.0e-2]}\n", kMlp));
  const Plan b = parse(
      search_plan("    extra: {uniform: [0, 1]}\n    lr: {loguniform: [1.0e-4, 1.0e-2]}\n", kMlp));
  const Plan c = parse("seed: 8\n" + search_plan("    lr: {loguniform: [1.0e-4, 1.0e-2]}\n", kMlp));
  const Plan again = parse(search_plan("    lr: {loguniform: [1.0e-4, 1.0e-2]}\n", kMlp));
  for (size_t k = 0; k < a.models.size(); ++k) {
    EXPECT_EQ(*find(a.models.parameters(k), "lr"), *find(b.models.parameters(k), "lr"));
    EXPECT_NE(*find(a.models.parameters(k), "lr"), *find(c.models.parameters(k), "lr"));
    EXPECT_EQ(a.models[k].expanded, again.models[k].expanded);
  }
}

TEST(Search, TrialNamesArePaddedToTheLastIndex) {
  const std::string space = "    lr: {uniform: [0.01, 0.1]}\n";
  EXPECT_EQ(parse(search_plan(space, kMlp, "", 5)).models.name(4), "t-4");
  const Plan p = parse(search_plan(space, kMlp, "", 11));
  EXPECT_EQ(p.models.name(0), "t-00");
  EXPECT_EQ(p.models.name(10), "t-10");
  // "{trial}" alone stays text.
  const Plan q = parse(search_plan(space, R"(  - name: "t{trial}"
    layers: [Flatten: {name: "{trial}"}]
)",
                                   "", 3));
  EXPECT_EQ(q.models[2].layers[0].config["name"], "2");
}

TEST(Search, PerParametersFollowTheirCountAndWhenHoldsOnlyForItsValues) {
  const Plan p = parse(search_plan(R"(    lr: {uniform: [0.01, 0.1]}
    n: {int: [0, 3]}
    w: {int: [1, 9], per: n}
    k: {choice: [a, b]}
    only_b: {fixed: 1, when: {k: b}}
    either: {fixed: 2, when: {k: [a, b], n: [1, 2, 3]}}
)",
                                   kMlp, "", 40));
  for (size_t t = 0; t < p.models.size(); ++t) {
    const Parameters q = p.models.parameters(t);
    const int n = find(q, "n")->get<int>();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(find(q, "w_" + std::to_string(i)) != nullptr, i < n);
    EXPECT_EQ(find(q, "only_b") != nullptr, *find(q, "k") == "b");
    EXPECT_EQ(find(q, "either") != nullptr, n > 0);
  }
}

TEST(Search, EachTrialTakesTheFirstTemplateWhoseWhenHolds) {
  const Plan p = parse(search_plan("    fam: {choice: [a, b, c]}\n", R"(  - name: "a-{trial}"
    when: {fam: a}
    layers: [Flatten]
  - name: "bc-{trial}"
    when: {fam: [b, c]}
    layers: [Dense: {units: 3}]
  - name: "never-{trial}"
    layers: [Dense: {units: 4}]
)",
                                   "", 30));
  for (size_t k = 0; k < p.models.size(); ++k) {
    const std::string fam = p.models.parameters(k)[0].second;
    EXPECT_EQ(p.models.name(k).substr(0, 2), fam == "a" ? "a-" : "bc") << k;
  }
}

TEST(Search, ModelsOfAPlanWithoutSpaceAreTheTrialsAtTheSchedulersEpochs) {
  const Plan p = parse(std::string(kData) + R"(search:
  scheduler: {median_stopping: {min_epochs: 1, max_epochs: 4}}
models:
  - name: m-{u}
    grid: {u: [2, 4, 8]}
    layers: [Dense: {units: "{u}"}]
  - name: n
    epochs: 4
    parameters: {u: 16, note: wide}
    layers: [Dense: {units: 16}]
)");
  ASSERT_EQ(p.models.size(), 4u);
  EXPECT_FALSE(p.search->sampled);
  EXPECT_EQ(p.search->trials, 4u);
  EXPECT_FALSE(p.search->higher_is_better);  // val_loss
  for (const auto& m : p.models) EXPECT_EQ(m.epochs, 4);
  EXPECT_THAT(p.models.parameters(1), ElementsAre(std::pair<std::string, Json>("u", 4)));
  EXPECT_THAT(p.models.parameters(3), ElementsAre(std::pair<std::string, Json>("u", 16),
                                                  std::pair<std::string, Json>("note", "wide")));
  // Budgets in samples leave each model's epochs as it says.
  const Plan s = parse(std::string(kData) + R"(search:
  scheduler: {none: {max_samples: 100000}}
models:
  - name: m
    epochs: 3
    layers: [Flatten]
)");
  EXPECT_TRUE(s.search->schedule.samples);
  EXPECT_EQ(s.models[0].epochs, 3);
}

// ---- Parameters of any plan ----

TEST(Search, ParametersOfGridsAndEntriesKeepTheirWrittenOrder) {
  const Plan p = parse(std::string(kData) + R"(models:
  - name: m-{units}-{lr}
    grid: {units: [8, 16], lr: [0.1, 0.01]}
    layers: [Dense: {units: "{units}"}]
  - name: n-{units}
    grid: {units: [8]}
    parameters: {zeta: "{units}", alpha: 2, "{units}x": true}
    layers: [Flatten]
  - name: plain
    layers: [Flatten]
)");
  EXPECT_THAT(p.models.parameters(1), ElementsAre(std::pair<std::string, Json>("units", 8),
                                                  std::pair<std::string, Json>("lr", 0.01)));
  EXPECT_THAT(p.models.parameters(4), ElementsAre(std::pair<std::string, Json>("zeta", 8),
                                                  std::pair<std::string, Json>("alpha", 2),
                                                  std::pair<std::string, Json>("8x", true)));
  EXPECT_TRUE(p.models.parameters(5).empty());
  // Grids record their vars without adding to the model's text (plan.yaml of grids unchanged).
  EXPECT_FALSE(p.models[1].expanded_json().contains("parameters"));
  EXPECT_EQ(p.models[4].expanded_json()["parameters"]["zeta"], 8);
}

// ---- repeat ----

TEST(Search, RepeatBlocksTakeTheirIndexAndNest) {
  const Plan p = parse(std::string(kData) + R"(models:
  - name: m-{n}
    grid: {n: [0, 2]}
    layers:
      - Flatten
      - repeat: "{n}"
        layers:
          - Dense: {units: 4, name: "outer_{i}"}
          - repeat: "{i}"
            layers: [Dropout: {rate: 0.1, name: "drop_{i}_of_x"}]
      - Dense: {units: 10}
)");
  std::vector<std::string> layers;
  for (const auto& l : p.models[0].layers) layers.push_back(l.class_name);
  EXPECT_THAT(layers, ElementsAre("Flatten", "Dense"));
  layers.clear();
  const ModelSpec m = p.models[1];
  for (const auto& l : m.layers) layers.push_back(l.config["name"].get<std::string>());
  EXPECT_THAT(layers, ElementsAre("flatten", "outer_0", "outer_1", "drop_0_of_x", "dense"));
  EXPECT_THAT(m.layers[3].where, HasSubstr("s.yaml:12: models[0].layers[1].layers[1].layers[0]"));
}

TEST(Search, RepeatFillsPerParametersOfATrial) {
  const Plan p =
      parse(search_plan("    depth: {int: [1, 3]}\n    width: {int: [2, 9], per: depth}\n",
                        R"(  - name: "t-{trial}"
    layers:
      - repeat: "{depth}"
        layers: [Dense: {units: "{width_{i}}"}]
)",
                        "", 12));
  for (size_t k = 0; k < p.models.size(); ++k) {
    const Parameters q = p.models.parameters(k);
    const ModelSpec m = p.models[k];
    ASSERT_EQ(m.layers.size(), find(q, "depth")->get<size_t>());
    for (size_t i = 0; i < m.layers.size(); ++i)
      EXPECT_EQ(m.layers[i].config["units"], *find(q, "width_" + std::to_string(i)));
  }
}

// ---- Budgets ----

TEST(Search, PlannedEpochsFollowTheSchedule) {
  SearchSchedule h;
  h.kind = SearchSchedule::Kind::kHalving;
  h.min_budget = 1;
  h.max_budget = 9;
  EXPECT_THAT(h.rungs(), ElementsAre(1, 3, 9));
  EXPECT_EQ(plan_detail::planned_epochs(h, 81), 81 * 1 + 27 * 2 + 9 * 6);  // 189
  EXPECT_EQ(plan_detail::planned_epochs(h, 2), 2 * 1 + 1 * 2 + 1 * 6);
  h.brackets = 2;  // trials 0, 2 from rung 1; trials 1, 3 from rung 3
  EXPECT_EQ(plan_detail::planned_epochs(h, 4), (2 + 1 * 2 + 1 * 6) + (2 * 3 + 1 * 6));
  h.max_budget = 10;
  h.brackets = 1;
  EXPECT_THAT(h.rungs(), ElementsAre(1, 3, 9, 10));
  SearchSchedule m;
  m.kind = SearchSchedule::Kind::kMedian;
  m.min_budget = 2;
  m.interval = 3;
  m.max_budget = 9;
  EXPECT_THAT(m.rungs(), ElementsAre(2, 5, 8, 9));
  EXPECT_EQ(plan_detail::planned_epochs(m, 7), 63);
}

TEST(Search, MaxTotalEpochsKeepsTheTrialsThatFit) {
  const std::string space = "    lr: {uniform: [0.01, 0.1]}\n";
  // n + 2 floor(n / 3) + 6 floor(n / 9) <= 100: n = 44 (96 epochs; 45 would plan 105).
  const Plan p = parse(search_plan(space, kMlp, "  max_total_epochs: 100\n", 81));
  EXPECT_EQ(p.search->trials, 44u);
  EXPECT_EQ(p.models.size(), 44u);
  const Plan q = parse(std::string(kData) + R"(search:
  scheduler: {none: {max_epochs: 2}}
  max_total_epochs: 7
models:
  - name: m-{u}
    grid: {u: [1, 2, 3, 4, 5]}
    layers: [Dense: {units: "{u}"}]
)");
  EXPECT_EQ(q.models.size(), 3u);
  EXPECT_EQ(q.models.name(2), "m-3");
}

// ---- plan.yaml ----

TEST(Search, PlanYamlLoadsBackToTheSameTrials) {
  const std::string space =
      "    fam: {choice: [x, y]}\n    n: {int: [1, 2], when: {fam: x}}\n"
      "    w: {int: [4, 64], log: true, per: n}\n    lr: {loguniform: [1.0e-4, 1.0e-2]}\n";
  const std::string models = R"(  - name: "x-{trial}"
    when: {fam: x}
    optimizer: {Adam: {learning_rate: "{lr}"}}
    layers: [{repeat: "{n}", layers: [Dense: {units: "{w_{i}}"}]}]
  - name: "y-{trial}"
    layers: [Flatten]
)";
  const Plan a = parse(search_plan(space, models, "  metric: val_accuracy\n  time_limit: 60\n"));
  const std::string yaml = plan_to_yaml(a);
  EXPECT_THAT(yaml, HasSubstr("search:\n  mode: max\n"));
  const Plan b = parse(yaml);
  ASSERT_TRUE(b.search.has_value());
  EXPECT_FALSE(b.search->sampled);
  EXPECT_EQ(b.search->to_json(), a.search->to_json());
  EXPECT_EQ(b.search->schedule.reduction_factor, 3);
  EXPECT_DOUBLE_EQ(b.search->time_limit_seconds, 60);
  ASSERT_EQ(b.models.size(), a.models.size());
  for (size_t k = 0; k < a.models.size(); ++k) {
    EXPECT_EQ(b.models[k].expanded, a.models[k].expanded);
    EXPECT_EQ(as_map(b.models.parameters(k)), as_map(a.models.parameters(k)));
  }
  EXPECT_EQ(plan_to_yaml(b), yaml);
  // The text (the resume check and the MPI plan hash) changes with the search.
  const auto changed = [&](const std::string& s, const std::string& m, const std::string& e) {
    return plan_to_yaml(parse(search_plan(s, m, e))) != yaml;
  };
  EXPECT_TRUE(changed(space, models, "  metric: val_accuracy\n  time_limit: 61\n"));
  EXPECT_TRUE(changed(space, models, "  metric: val_loss\n  time_limit: 60\n"));
  std::string wider = space;
  wider.replace(wider.find("1.0e-2"), 6, "2.0e-2");
  EXPECT_TRUE(changed(wider, models, "  metric: val_accuracy\n  time_limit: 60\n"));
  EXPECT_TRUE(
      changed(space, models, "  metric: val_accuracy\n  time_limit: 60\n  sampler: sobol\n"));
}

TEST(Search, ChecksManyTrialsOnSeveralThreadsAlike) {
  const std::string text = search_plan("    lr: {uniform: [0.01, 0.1]}\n", kMlp, "", 300);
  const Plan a = parse(text, 1), b = parse(text, 2);
  ASSERT_EQ(a.models.size(), 300u);
  for (size_t k = 0; k < a.models.size(); k += 37)
    EXPECT_EQ(a.models[k].expanded, b.models[k].expanded);
}

// ---- Problems ----

TEST(SearchProblems, BadDistributionsAreNamedWithTheirRule) {
  const auto lines = problems(std::string(kData) + R"(search:
  trials: 4
  scheduler: {none: {max_epochs: 2}}
  space:
    fam: {choice: [x, y]}
    a: {uniform: [0.5, 0.5]}
    b: {int: [3, 2]}
    c: {loguniform: [0, 1]}
    d: {float: [0, 1], step: 0}
    e: {choice: []}
    f: {normal: [0, 1]}
    g: {uniform: [0, 1], per: fam}
    h: {uniform: [0, 1], when: {zz: 1}}
    k: {uniform: [0, 1], when: {fam: z}}
models:
  - name: "t-{trial}"
    layers: [Flatten]
)");
  EXPECT_THAT(
      lines,
      ElementsAre(HasSubstr("s.yaml:8: search.space.a.uniform: empty range; expected lo < hi"),
                  HasSubstr("s.yaml:9: search.space.b.int: empty range; expected lo <= hi"),
                  HasSubstr("s.yaml:10: search.space.c.loguniform: a log range cannot pass "
                            "through zero or negative values; expected lo > 0"),
                  HasSubstr("s.yaml:11: search.space.d.step: expected a step > 0, got 0"),
                  HasSubstr("s.yaml:12: search.space.e.choice: empty choice; expected a "
                            "non-empty list of values"),
                  HasSubstr("s.yaml:13: search.space.f.normal: unknown key 'normal'"),
                  HasSubstr("s.yaml:13: search.space.f: no distribution; expected exactly "
                            "one of uniform, loguniform, float, int, choice, fixed"),
                  HasSubstr("s.yaml:14: search.space.g.per: per names no int parameter; "
                            "expected the name of an earlier int parameter"),
                  HasSubstr("s.yaml:15: search.space.h.when.zz: when names an unknown "
                            "parameter 'zz'; expected one of the parameters before it"),
                  HasSubstr("s.yaml:16: search.space.k.when.fam: when names a value \"z\" "
                            "that parameter 'fam' never takes")));
}

TEST(SearchProblems, BadSearchSettingsAreReportedTogether) {
  const auto lines = problems(std::string(kData) + R"(search:
  trials: 0
  scheduler: {successive_halving: {reduction_factor: 1, min_epochs: 5, max_epochs: 3}}
  space:
    lr: {uniform: [0, 1]}
models:
  - name: m
    layers: [Flatten]
)");
  EXPECT_THAT(lines,
              ElementsAre(HasSubstr("s.yaml:4: search.trials: expected a positive integer, "
                                    "got 0"),
                          HasSubstr("s.yaml:5: search.scheduler.successive_halving.min_epochs: "
                                    "min_epochs is above max_epochs; expected min <= max, "
                                    "got 5 > 3"),
                          HasSubstr("s.yaml:5: search.scheduler.successive_halving."
                                    "reduction_factor: expected an integer >= 2, got 1")));
  const auto more = problems(std::string(kData) + R"(search:
  trials: 100001
  scheduler: {hyperband: {max_epochs: 3}}
  space: {lr: {uniform: [0, 1]}}
models:
  - name: m
    layers: [Flatten]
)");
  EXPECT_THAT(more, ElementsAre(HasSubstr("s.yaml:4: search.trials: expected a positive integer at "
                                          "most 100000, got 100001"),
                                HasSubstr("s.yaml:5: search.scheduler.hyperband: unknown scheduler "
                                          "'hyperband'; expected one of successive_halving, "
                                          "median_stopping, none")));
}

TEST(SearchProblems, MaxTotalEpochsBelowOneTrialIsRefused) {
  EXPECT_THAT(problems(search_plan("    lr: {uniform: [0, 1]}\n", kMlp, "  max_total_epochs: 5\n")),
              ElementsAre(HasSubstr("s.yaml:6: search.max_total_epochs: max_total_epochs is "
                                    "smaller than one trial of the schedule; expected at least 9 "
                                    "(one trial trained to max_epochs), got 5")));
}

TEST(SearchProblems, SamplerMetricAndSchedulerProblems) {
  EXPECT_THAT(problems(std::string(kData) + R"(search:
  trials: 2
  sampler: sobol
  metric: val_f00
  space:
    w: {int: [0, 50]}
    v: {uniform: [0, 1], per: w}
models:
  - name: "t-{trial}"
    layers: [Flatten]
)"),
              ElementsAre(HasSubstr("s.yaml:3: search.scheduler: required key missing; expected "
                                    "one of successive_halving, median_stopping, none"),
                          HasSubstr("s.yaml:5: search.sampler: sobol draws at most 40 dimensions"),
                          HasSubstr("s.yaml:6: search.metric: mode auto cannot tell whether "
                                    "'val_f00' is better higher or lower")));
}

TEST(SearchProblems, TemplatesThatDoNotFitTheTrialsAreRefused) {
  const auto none = problems(search_plan("    fam: {choice: [mlp, cnn]}\n", R"(  - name: "t-{trial}"
    when: {fam: mlp}
    layers: [Flatten]
)",
                                         "", 20));
  ASSERT_EQ(none.size(), 1u) << ::testing::PrintToString(none);
  EXPECT_THAT(none[0], HasSubstr("s.yaml:8: models: no model entry matches trial "));
  EXPECT_THAT(none[0], HasSubstr("(fam: cnn) nor "));
  EXPECT_THAT(none[0],
              HasSubstr("expected an entry whose when: holds for it, or one without when"));
  EXPECT_THAT(problems(search_plan("    lr: {uniform: [0.001, 0.1]}\n", R"(  - name: "t-{trial}"
    when: {lr: 2}
    parameters: {a: 1}
    grid: {u: [1]}
    layers: [Flatten]
  - name: "u-{trial}"
    epochs: 5
    optimizer: {SGD: {learning_rate: "{rate}"}}
    layers: [Flatten]
)")),
              ElementsAre(HasSubstr("s.yaml:10: models[0].when.lr: when names a value 2 that "
                                    "parameter 'lr' never takes"),
                          HasSubstr("s.yaml:11: models[0].parameters: a trial's parameters are the "
                                    "values it drew from search.space; expected no parameters"),
                          HasSubstr("s.yaml:12: models[0].grid: a search's trials are drawn from "
                                    "search.space; expected no grid"),
                          HasSubstr("s.yaml:15: models[1].epochs: a search's epochs are set by "
                                    "search.scheduler (max_epochs: 9); expected no epochs here (or "
                                    "9), got 5"),
                          HasSubstr("s.yaml:16: models[1].optimizer.SGD.learning_rate: unknown "
                                    "placeholder '{rate}'; expected one of the parameters of "
                                    "search.space that trial 0 drew (lr) or trial")));
}

TEST(SearchProblems, WhenOutsideASearchAndTrialsWithoutASpace) {
  EXPECT_THAT(
      problems(std::string(kData) + R"(models:
  - name: m
    when: {family: mlp}
    layers: [Flatten]
)"),
      ElementsAre(HasSubstr("s.yaml:5: models[0].when: when chooses the entry of a search's "
                            "trials; expected it only with search.space")));
  EXPECT_THAT(problems(std::string(kData) + R"(search:
  trials: 3
  scheduler: {none: {max_epochs: 1}}
models:
  - name: m
    layers: [Flatten]
)"),
              ElementsAre(HasSubstr("s.yaml:4: search.trials: trials are drawn from search.space; "
                                    "expected no trials without a space")));
}

TEST(SearchProblems, RepeatCountsOutOfRangeAreNamed) {
  EXPECT_THAT(problems(std::string(kData) + R"(models:
  - name: m
    layers:
      - Flatten
      - repeat: 1001
        layers: [Dense: {units: 4}]
      - repeat: "{n}"
        layers: [Dense: {units: 4}]
      - repeat: 2
        layers: []
      - repeat: 1.5
        layers: [Flatten]
)"),
              ElementsAre(HasSubstr("s.yaml:7: models[0].layers[1].repeat: expected an integer "
                                    "from 0 to 1000 (or a \"{var}\" placeholder of one), got 1001"),
                          HasSubstr("s.yaml:9: models[0].layers[2].repeat: expected an integer "
                                    "from 0 to 1000 (or a \"{var}\" placeholder of one), got "
                                    "\"{n}\" (no such grid var or parameter)"),
                          HasSubstr("s.yaml:12: models[0].layers[3].layers: expected a non-empty "
                                    "list of layers to repeat, got []"),
                          HasSubstr("s.yaml:13: models[0].layers[4].repeat: expected an integer "
                                    "from 0 to 1000")));
}

}  // namespace
}  // namespace nnfleet

namespace nnfleet {
namespace {

// "{name*k}": W5's second convolution has twice the first's filters.
TEST(ScaledPlaceholders, MultiplyAValueAndKeepIntegersWhole) {
  const Plan p = parse(search_plan("    f: {int: [4, 32], log: true}\n    lr: {fixed: 0.01}\n",
                                   "  - name: \"t-{trial}\"\n"
                                   "    optimizer: {SGD: {learning_rate: \"{lr*0.5}\"}}\n"
                                   "    layers:\n"
                                   "      - Conv2D: {filters: \"{f}\", kernel_size: 3}\n"
                                   "      - Conv2D: {filters: \"{f*2}\", kernel_size: 3}\n"
                                   "      - Flatten: {}\n"
                                   "      - Dense: {units: 10, activation: softmax}\n"));
  for (size_t k = 0; k < p.models.size(); ++k) {
    const ModelSpec s = p.models[k];
    const int64_t f = as_map(p.models.parameters(k)).at("f").get<int64_t>();
    EXPECT_EQ(s.layers[0].config["filters"], f);
    EXPECT_EQ(s.layers[1].config["filters"], 2 * f);
    EXPECT_TRUE(s.layers[1].config["filters"].is_number_integer());
    EXPECT_DOUBLE_EQ(s.optimizer.learning_rate, 0.005);
  }
}

TEST(ScaledPlaceholders, AnUnknownOrNonNumericValueIsAProblemNamingTheField) {
  const auto lines =
      problems(search_plan("    act: {fixed: relu}\n",
                           "  - name: \"t-{trial}\"\n"
                           "    layers:\n"
                           "      - Flatten: {}\n"
                           "      - Dense: {units: \"{act*2}\", activation: softmax}\n"
                           "      - Dense: {units: \"{nope*2}\", activation: softmax}\n"));
  ASSERT_GE(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("models[0].layers[1].Dense.units: placeholder '{act*2}' "
                                  "multiplies \"relu\"; expected a number"));
  EXPECT_THAT(lines[1], HasSubstr("models[0].layers[2].Dense.units: unknown placeholder "
                                  "'{nope}' in '{nope*2}'"));
}

// `take: N`: the first N samples, before the validation split (W5 trains on the first 10,000
// Fashion-MNIST images and validates on the next 2,000).
TEST(DataTake, IsReadCheckedAndPartOfTheSourcesForm) {
  const Plan p = parse(
      "data:\n  train: fashion-mnist:train\n  take: 12000\n  validation_split: 0.2\n"
      "models:\n  - name: m\n    layers: [Flatten, Dense: {units: 10}]\n");
  EXPECT_EQ(p.data.take, 12000);
  EXPECT_EQ(p.data.to_json()["take"], 12000);
  const auto bad = problems(
      "data:\n  train: fashion-mnist:train\n  take: 0\n"
      "models:\n  - name: m\n    layers: [Flatten, Dense: {units: 10}]\n");
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_THAT(bad[0], HasSubstr("s.yaml:3: data.take: expected a positive integer, got 0"));
}

// A search's trials drawn from one template are one kind (PlanModels::kind) when they differ only
// in the optimizer's rate; a drawn layer width makes a kind per width, numbered in plan order.
TEST(SearchKinds, TrialsOfOneArchitectureAreOneKind) {
  const Plan a = parse(search_plan("    lr: {loguniform: [1.0e-4, 1.0e-2]}\n", kMlp), 2);
  ASSERT_EQ(a.models.size(), 6u);
  for (size_t k = 0; k < a.models.size(); ++k) {
    EXPECT_EQ(a.models.kind(k), 0u) << a.models.name(k);
    EXPECT_EQ(a.models[k].name, a.models.name(k));
  }
  const std::string wide =
      "  - name: \"w-{trial}\"\n"
      "    optimizer: {SGD: {learning_rate: \"{lr}\"}}\n"
      "    layers: [Flatten, Dense: {units: \"{u}\"}, Dense: {units: 10, activation: softmax}]\n";
  const Plan b = parse(search_plan(
      "    lr: {loguniform: [1.0e-4, 1.0e-2]}\n    u: {choice: [4, 8]}\n", wide, "", 20));
  std::map<int64_t, uint32_t> kind_of_width;
  for (size_t k = 0; k < b.models.size(); ++k) {
    const int64_t u = b.models[k].layers[1].config["units"].get<int64_t>();
    auto [it, fresh] = kind_of_width.emplace(u, b.models.kind(k));
    if (fresh) {
      EXPECT_EQ(it->second, kind_of_width.size() - 1);  // numbered in plan order
    }
    EXPECT_EQ(b.models.kind(k), it->second) << b.models.name(k);
  }
  EXPECT_EQ(kind_of_width.size(), 2u);
}

}  // namespace
}  // namespace nnfleet
