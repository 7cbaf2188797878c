// YamlEmitter (plan.yaml's writer) against yaml-cpp's emitter, its oracle: the same bytes for
// documents full of the strings YAML treats specially, for random documents, and for a whole
// varied plan; and the text reads back through yaml-cpp to the same values.
#include "plan/yaml_emitter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plan/plan_yaml.h"

namespace nnfleet::plan_detail {
namespace {

const std::vector<std::string> kFirst = {"name", "seed", "data", "epochs", "layers"};

// Strings each rule of plain-versus-quoted is about, in block and flow context alike. All are
// UTF-8, as every string of a plan is (parse_plan refuses other text, and the writer's JSON
// dump would throw on it).
const std::vector<std::string> kAwkward = {"",
                                           " ",
                                           "a ",
                                           " a",
                                           "~",
                                           "null",
                                           "Null",
                                           "NULL",
                                           "true",
                                           "False",
                                           "yes",
                                           "no",
                                           "on",
                                           "1",
                                           "-1",
                                           "+1",
                                           "0x1f",
                                           "1e3",
                                           "1.5",
                                           ".5",
                                           ".inf",
                                           "-.inf",
                                           ".nan",
                                           "inf",
                                           "nan",
                                           "-nan",
                                           "a: b",
                                           "a:b",
                                           "a:",
                                           ":a",
                                           ": a",
                                           ":",
                                           "-",
                                           "- a",
                                           "-a",
                                           "--",
                                           "?",
                                           "? a",
                                           "?a",
                                           "a?b",
                                           "a #b",
                                           "a#b",
                                           "#a",
                                           "a, b",
                                           "a,b",
                                           "[a]",
                                           "a]",
                                           "{a}",
                                           "a}",
                                           "a{",
                                           "'a'",
                                           "\"a\"",
                                           "it's",
                                           "say \"hi\"",
                                           "back\\slash",
                                           "&a",
                                           "*a",
                                           "!a",
                                           "|a",
                                           ">a",
                                           "%a",
                                           "@a",
                                           "`a",
                                           "a\tb",
                                           "a\nb",
                                           "a\r\nb",
                                           "a\rb",
                                           "\n",
                                           "\r",
                                           "\t",
                                           std::string("a\0b", 3),
                                           "\x01",
                                           "\x1f",
                                           "\x7f",
                                           "caf\xc3\xa9",
                                           "\xe6\x97\xa5\xe6\x9c\xac",
                                           "\xf0\x9f\x98\x80",
                                           "\xc2\x85",
                                           "\xc2\x80",
                                           "\xc2\xa0",
                                           "\xc2\xa1",
                                           "\xef\xbb\xbf"
                                           "a",
                                           "a\xef\xbb\xbf",
                                           "\xef\xbf\xbe",
                                           "data dir/t.csv",
                                           "/tmp/x y/z.npy",
                                           "t-{u}-{lr}",
                                           "{lr}",
                                           "0.001",
                                           "1e-08",
                                           "12:30",
                                           "2024-01-01",
                                           "a=b",
                                           "a;b",
                                           "a|b",
                                           "a>b",
                                           "a%b",
                                           "\xe2\x80\xa8",
                                           "x" + std::string(1030, 'y')};

Json awkward_document() {
  Json d = Json::object();
  Json list = Json::array(), flow = Json::array();
  for (size_t i = 0; i < kAwkward.size(); ++i) {
    const std::string& s = kAwkward[i];
    if (s.size() < 1024) d[s] = s;  // as a key of a block mapping, and as its value
    list.push_back(s);
    flow.push_back(Json::array({s, Json::object({{s, s}})}));  // inside flow collections
  }
  d["list"] = list;
  d["flow"] = flow;
  d["numbers"] = Json::array(
      {0, -7, std::numeric_limits<int64_t>::min(), std::numeric_limits<uint64_t>::max(), 0.1, -2.5,
       1e300, 1e-300, 3.0, std::numeric_limits<double>::infinity(),
       -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()});
  d["empty"] = Json::object({{"seq", Json::array()}, {"map", Json::object()}, {"str", ""}});
  d["nulls"] = Json::array({nullptr, true, false});
  d["deep"] = Json::array({Json::array({Json::array({1, Json::array({2, Json::object()})})}),
                           Json::object({{"k", Json::array({Json::array({3})})}})});
  d["layers"] = Json::array(
      {Json::object(
           {{"Dense", Json::object({{"units", 8}, {"activation", "relu"}, {"name", "dense"}})}}),
       "Flatten", Json::object({{"Flatten", Json::object()}})});
  return d;
}

TEST(YamlEmitter, WritesWhatYamlCppWritesForAwkwardStrings) {
  const Json d = awkward_document();
  EXPECT_EQ(json_to_yaml(d, kFirst), json_to_yaml_ref(d, kFirst));
  for (const bool flow : {false, true})
    for (const auto& s : kAwkward) {
      // Each string alone, as a key and a value of a block or flow mapping and a list item.
      Json one = Json::object({{"k", Json::array({s})}, {"m", Json::object({{s, s}})}});
      if (flow) one = Json::array({one});
      EXPECT_EQ(json_to_yaml(one, kFirst), json_to_yaml_ref(one, kFirst)) << '"' << s << '"';
    }
}

TEST(YamlEmitter, ReadsBackToTheSameValues) {
  Json d = awkward_document();
  // NaN is not equal to itself; and a lone "\r" is written plain by yaml-cpp (and so here, byte
  // for byte) but read back as null: both left out.
  d["numbers"].erase(d["numbers"].size() - 1);
  d.erase("\r");
  for (auto* l : {&d["list"], &d["flow"]})
    for (size_t i = l->size(); i-- > 0;)
      if ((*l)[i] == "\r" || ((*l)[i].is_array() && (*l)[i][0] == "\r")) l->erase(i);
  const std::string text = json_to_yaml(d, kFirst);
  Json back = yaml_to_json(YAML::Load(text)).value;
  // Special floats are written as text that reads back as strings (the plan's form of them).
  Json want = d;
  want["numbers"][9] = "inf";
  want["numbers"][10] = "-inf";
  EXPECT_EQ(back, want) << text;
}

// A random value of depth < `depth` over strings drawn from kAwkward and random bytes.
Json random_value(std::mt19937_64& rng, int depth) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto random_string = [&]() -> std::string {
    if (pick(2)) return kAwkward[pick(kAwkward.size() - 1)];
    static const std::vector<std::string> pieces = {
        " ",  "-",  "?",  ":",  ",", "[", "]",  "{", "}",        "#",
        "&",  "*",  "!",  "|",  ">", "'", "\"", "%", "@",        "`",
        "\t", "\n", "\r", "\\", "a", "0", ".",  "~", "\xc2\x85", "\xc3\xa9"};
    std::string s;
    for (size_t n = pick(6); n > 0; --n) s += pieces[pick(pieces.size())];
    return s;
  };
  const size_t kind = depth <= 0 ? pick(5) : pick(7);
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return pick(2) == 1;
    case 2:
      return static_cast<int64_t>(rng()) >> pick(64);
    case 3:
      return std::ldexp(static_cast<double>(rng() % 100000) - 50000,
                        static_cast<int>(pick(80)) - 40);
    case 4:
      return random_string();
    case 5: {
      Json a = Json::array();
      for (size_t n = pick(5); n > 0; --n) a.push_back(random_value(rng, depth - 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (size_t n = pick(5); n > 0; --n) o[random_string()] = random_value(rng, depth - 1);
      return o;
    }
  }
}

TEST(YamlEmitter, WritesWhatYamlCppWritesForRandomDocuments) {
  std::mt19937_64 rng(20261202);
  for (int i = 0; i < 3000; ++i) {
    const Json d = random_value(rng, 1 + i % 5);
    ASSERT_EQ(json_to_yaml(d, kFirst), json_to_yaml_ref(d, kFirst)) << d.dump();
  }
}

TEST(YamlEmitter, FallsBackToYamlCppForLongKeys) {
  const Json d = Json::object({{std::string(1025, 'k'), 1}, {"a", Json::object({{"b", 2}})}});
  EXPECT_EQ(json_to_yaml(d, kFirst), json_to_yaml_ref(d, kFirst));
  EXPECT_NE(json_to_yaml(d, kFirst).find("? "), std::string::npos);
}

// The items of a long list written by several threads in blocks (YamlEmitter::fork/join) give
// the text of writing them one after the other, for lists shorter and longer than a block, random
// items and heads whose list is not the last key.
TEST(YamlEmitter, ItemsWrittenByThreadsInBlocksGiveTheSameText) {
  std::mt19937_64 rng(20261203);
  for (size_t n : {0, 1, 2, 63, 64, 65, 130, 700}) {
    std::vector<Json> items;
    for (size_t k = 0; k < n; ++k) items.push_back(random_value(rng, 1 + k % 4));
    const Json head = Json::object({{"seed", 3}, {"models", nullptr}, {"zz", {1, {{"a", 2}}}}});
    auto item = [&](size_t k) { return items[k]; };
    const std::string one = json_to_yaml(head, kFirst, "models", n, item);
    EXPECT_EQ(one, json_to_yaml_ref(head, kFirst, "models", n, item)) << n << " items";
    for (int threads : {2, 3, 8})
      EXPECT_EQ(json_to_yaml(head, kFirst, "models", n, item, threads), one)
          << n << " items on " << threads << " threads";
  }
}

// An item YamlEmitter cannot write (a key over 1,024 bytes) in one thread's block: the whole text
// comes from yaml-cpp, every item asked for again on the caller's thread.
TEST(YamlEmitter, ALongKeyInOneBlockFallsBackToYamlCppForTheWholeList) {
  const Json head = Json::object({{"models", nullptr}, {"seed", 1}});
  std::atomic<int> made{0};
  auto item = [&](size_t k) -> Json {
    ++made;
    if (k == 150) return Json::object({{std::string(1025, 'k'), 1}});
    return Json::object({{"name", std::to_string(k)}});
  };
  const std::string ref = json_to_yaml_ref(head, kFirst, "models", 300, item);
  made = 0;
  const std::string text = json_to_yaml(head, kFirst, "models", 300, item, 3);
  EXPECT_EQ(text, ref);
  EXPECT_NE(text.find("? "), std::string::npos);
  EXPECT_EQ(made.load(), 600);  // once by the threads, once more for yaml-cpp
}

// An item that throws stops the threads and the earliest block's exception reaches the caller.
TEST(YamlEmitter, AnItemThatThrowsOnAThreadReachesTheCaller) {
  const Json head = Json::object({{"models", nullptr}});
  std::atomic<int> made{0};
  auto item = [&](size_t k) -> Json {
    ++made;
    if (k == 70 || k == 500) throw PlanError("item " + std::to_string(k));
    return Json::object({{"name", std::to_string(k)}});
  };
  try {
    json_to_yaml(head, kFirst, "models", 1000, item, 2);
    FAIL() << "no exception";
  } catch (const PlanError& e) {
    EXPECT_STREQ(e.what(), "item 70");
  }
  EXPECT_LT(made.load(), 1000);
}

// plan.yaml of a plan with grids, per-model data, quoted names and every section, written one
// model at a time: the bytes yaml-cpp wrote, which `--resume` compares.
std::string write_plan(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("nnfleet_yaml_emitter_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(YamlEmitter, PlanYamlIsYamlCppsText) {
  const std::string path = write_plan("p.yaml", R"(seed: 7
data:
  train: {x: "a dir/x-Ã©.npy", y: "y: 1.npy"}
  validation_split: 0.25
defaults:
  epochs: 2
  metrics: [accuracy]
  early_stopping: {monitor: val_loss, patience: 3}
models:
  - name: "m-{u}-{lr}"
    grid: {u: [1, 16], lr: [0.001, 1e-7]}
    optimizer: {Adam: {learning_rate: "{lr}", beta_1: 0.5}}
    class_weight: {0: 1.5, 2: 3}
    layers:
      - Flatten: {}
      - Dense: {units: "{u}", activation: relu, name: "true"}
      - Dropout: {rate: 0.5, name: "#x"}
      - Dense: {units: 3, activation: softmax, name: "a: b"}
  - name: "null"
    loss: mse
    reduce_lr_on_plateau: {factor: 0.5}
    layers: [Flatten, {Dense: {units: 3}}]
)");
  const Plan p = load_plan(path);
  ASSERT_EQ(p.models.size(), 5u);
  Json head = Json::object({{"seed", p.seed}, {"models", nullptr}});
  head["data"] = p.data.to_json();
  const std::vector<std::string> order = {"name",   "seed",   "data",   "train",
                                          "models", "epochs", "layers", "optimizer"};
  auto item = [&](size_t k) { return p.models[k].expanded_json(); };
  EXPECT_EQ(json_to_yaml(head, order, "models", p.models.size(), item),
            json_to_yaml_ref(head, order, "models", p.models.size(), item));
  const std::string text = plan_to_yaml(p);
  EXPECT_EQ(plan_to_yaml(load_plan(write_plan("back.yaml", text))), text);
  // Expanded and written by three threads: the same text.
  EXPECT_EQ(plan_to_yaml(p, 3), text);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace
}  // namespace nnfleet::plan_detail
