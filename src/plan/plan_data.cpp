// Plan data sources: a `data:` mapping (train, validation, test, scale, validation_split) and each
// of its sources (fashion-mnist, npy, npz, csv, idx, and arrays a program gives by key), checked
// field by field, with relative file names taken from the plan's directory; and their JSON form
// (which also tells two sources apart).
#include <algorithm>
#include <cmath>

#include "plan/plan_loader.h"

namespace nnfleet {
namespace plan_detail {
namespace {

const std::vector<std::string> kDataKeys = {"scale", "take",       "test",
                                            "train", "validation", "validation_split"};
const char* const kSourceForms =
    "fashion-mnist:train, fashion-mnist:test, {x: x.npy, y: y.npy}, "
    "{npz: d.npz, x: key, y: key}, {csv: f.csv, label: column} or "
    "{idx_images: file, idx_labels: file} (x and y of npy and npz sources may be lists, one "
    "per model input and output)";

// What a field of a source holds.
enum class Value { kName, kFile, kArray };

// Whether `v` names an array a program gives: `{array: KEY}`.
bool names_array(const Json& v) { return v.is_object() && v.contains("array"); }

// The fields of the source mapping `v` at `path`, each checked; `ok` turns false at the first
// problem.
struct SourceFields {
  const PlanContext& cx;
  const std::string& path;
  const Json& v;
  bool ok = true;

  std::string field(const std::string& key, Value kind, const char* what) {
    const std::string p = child_path(path, key);
    if (!v.contains(key) || v[key].is_null()) {
      cx.pr.add(p, "required key missing; expected " + std::string(what));
      ok = false;
      return "";
    }
    return value(p, v[key], kind, what);
  }

  // One value at field path `p`.
  std::string value(const std::string& p, const Json& e, Value kind, const char* what) {
    if (kind == Value::kArray) return array_key(p, e);
    if (!e.is_string() || e.get<std::string>().empty()) {
      cx.pr.add(p, "expected " + std::string(what) + ", got " + show(e));
    } else if (kind == Value::kFile && e.get<std::string>().rfind("memory:", 0) == 0) {
      // The spelling of arrays before {array: KEY}, refused with the new one.
      const std::string key = e.get<std::string>().substr(7);
      cx.pr.add(p, "arrays are written {array: KEY}, not \"memory:KEY\"; expected {array: " + key +
                       "}, got " + show(e));
    } else {
      return kind == Value::kFile ? cx.resolve(e.get<std::string>()) : e.get<std::string>();
    }
    ok = false;
    return "";
  }

  // The key of `{array: KEY}` at `p`; only a caller that gives arrays may name them.
  std::string array_key(const std::string& p, const Json& e) {
    if (!cx.arrays || !names_array(e)) {
      ok = false;
      if (!cx.arrays && names_array(e))
        cx.pr.add(p,
                  "an array is given only by a program (train() with arrays, in C++ or "
                  "Python), never by a plan file; expected a file path, got " +
                      show(e));
      else if (cx.arrays)
        cx.pr.add(p,
                  "expected {array: KEY} (a source of arrays holds only arrays), got " + show(e));
      return "";
    }
    const Json& k = e["array"];
    if (!k.is_string() || k.get<std::string>().empty()) {
      cx.pr.add(child_path(p, "array"),
                "expected the key of an array the program gives, got " + show(k));
      ok = false;
      return "";
    }
    if (e.size() != 1) {
      check_keys(cx.pr, p, e, {"array"});
      ok = false;
    }
    return k.get<std::string>();
  }

  // x: [a, b] and y: [c, d] (several model inputs and outputs): the first stays in x and y, the
  // others go to more_x and more_y.
  void list_field(const std::string& key, Value kind, const char* what, std::string& first,
                  std::vector<std::string>& more) {
    if (!v.contains(key) || !v[key].is_array()) {
      first = field(key, kind, what);
      return;
    }
    const Json& a = v[key];
    if (a.empty()) {
      cx.pr.add(child_path(path, key), "expected at least one entry (" + std::string(what) + ")");
      ok = false;
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string e = value(index_path(child_path(path, key), i), a[i], kind, what);
      if (i == 0)
        first = e;
      else
        more.push_back(e);
    }
  }
};

// Whether the x, y or sample_weight of mapping `v` (or an entry of their lists) names an array.
bool holds_arrays(const Json& v) {
  for (const char* key : {"x", "y", "sample_weight"}) {
    if (!v.contains(key)) continue;
    const Json& f = v[key];
    if (names_array(f)) return true;
    if (f.is_array() && std::any_of(f.begin(), f.end(), names_array)) return true;
  }
  return false;
}

// The kind of source the mapping `v` is, and the keys it may have; false when it is none.
bool source_form(const Json& v, DataSource& s, std::vector<std::string>& keys) {
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
    s.kind = holds_arrays(v) ? DataSource::Kind::kArrays : DataSource::Kind::kNpy;
    keys = {"sample_weight", "x", "y"};
  } else {
    return false;
  }
  return true;
}

void source_fields(SourceFields& f, DataSource& s) {
  switch (s.kind) {
    case DataSource::Kind::kNpz:
      s.file = f.field("npz", Value::kFile, "an .npz file path");
      f.list_field("x", Value::kName, "the name of an array in the .npz", s.x, s.more_x);
      f.list_field("y", Value::kName, "the name of an array in the .npz", s.y, s.more_y);
      if (f.v.contains("sample_weight"))
        s.sample_weight =
            f.field("sample_weight", Value::kName, "the name of an array in the .npz");
      break;
    case DataSource::Kind::kCsv:
      s.file = f.field("csv", Value::kFile, "a .csv file path");
      s.label = f.field("label", Value::kName, "the name of the label column");
      break;
    case DataSource::Kind::kIdx:
      s.x = f.field("idx_images", Value::kFile, "an IDX images file path");
      s.y = f.field("idx_labels", Value::kFile, "an IDX labels file path");
      break;
    case DataSource::Kind::kArrays:
      f.list_field("x", Value::kArray, "{array: KEY}", s.x, s.more_x);
      f.list_field("y", Value::kArray, "{array: KEY}", s.y, s.more_y);
      if (f.v.contains("sample_weight"))
        s.sample_weight = f.field("sample_weight", Value::kArray, "{array: KEY}");
      break;
    default:
      f.list_field("x", Value::kFile, "an .npy file path", s.x, s.more_x);
      f.list_field("y", Value::kFile, "an .npy file path", s.y, s.more_y);
      if (f.v.contains("sample_weight"))
        s.sample_weight = f.field("sample_weight", Value::kFile, "an .npy file path");
      break;
  }
}

std::optional<DataSource> source(const PlanContext& cx, const std::string& path, const Json& v) {
  DataSource s;
  if (v.is_string()) {
    const std::string t = v.get<std::string>();
    if (t == "fashion-mnist:train" || t == "fashion-mnist:test") {
      s.kind = DataSource::Kind::kFashionMnist;
      s.split = t.substr(t.find(':') + 1);
      return s;
    }
    cx.pr.add(path,
              "unknown data source; expected " + std::string(kSourceForms) + ", got " + show(v));
    return std::nullopt;
  }
  std::vector<std::string> keys;
  if (!source_form(v, s, keys)) {
    cx.pr.add(path, "unknown form of data source; expected " + std::string(kSourceForms) +
                        ", got " + show(v));
    return std::nullopt;
  }
  check_keys(cx.pr, path, v, keys);
  SourceFields f{cx, path, v};
  source_fields(f, s);
  if (!f.ok) return std::nullopt;
  return s;
}

}  // namespace

std::string PlanContext::resolve(const std::string& p) const {
  std::filesystem::path q(p);
  if (q.is_relative()) q = dir / q;
  return q.lexically_normal().string();
}

DataSpec read_data(const PlanContext& cx, const std::string& path, const Json& v) {
  Problems& pr = cx.pr;
  DataSpec d;
  if (!v.is_object()) {
    pr.add(path, "expected a mapping with keys " + join(kDataKeys) + ", got " + show(v));
    return d;
  }
  check_keys(pr, path, v, kDataKeys);
  const std::string train = child_path(path, "train"), test = child_path(path, "test");
  if (!v.contains("train") || v["train"].is_null()) {
    pr.add(train,
           "required key missing; expected a data source such as "
           "fashion-mnist:train or {x: x.npy, y: y.npy}");
  } else if (auto s = source(cx, train, v["train"])) {
    d.train = *s;
  }
  if (v.contains("test") && !v["test"].is_null()) d.test = source(cx, test, v["test"]);
  const std::string val = child_path(path, "validation");
  if (v.contains("validation") && !v["validation"].is_null()) {
    d.validation = source(cx, val, v["validation"]);
    // Keras: validation_data replaces validation_split; both is one too many.
    if (v.contains("validation_split") && !v["validation_split"].is_null())
      pr.add(child_path(path, "validation_split"),
             "validation_split and validation both give validation data; expected one of them "
             "(validation: a source of its own, or validation_split: the last fraction of "
             "train)");
  }
  if (v.contains("scale") && !v["scale"].is_null())
    d.scale = check_number(pr, child_path(path, "scale"), v["scale"], 0, true, INFINITY, false,
                           "a positive number")
                  .value_or(1.0);
  const std::string split = child_path(path, "validation_split");
  if (v.contains("validation_split") && !v["validation_split"].is_null())
    d.validation_split =
        check_number(pr, split, v["validation_split"], 0, false, 1, true, "a number in [0, 1)")
            .value_or(0.0);
  d.validation_split_where = pr.where(v.contains("validation")         ? val
                                      : v.contains("validation_split") ? split
                                                                       : path);
  if (v.contains("take") && !v["take"].is_null())
    d.take = check_int(pr, child_path(path, "take"), v["take"], 1).value_or(0);
  return d;
}

size_t add_source(DataSpec d, std::vector<DataSpec>& sources) {
  const Json form = d.to_json();
  for (size_t i = 0; i < sources.size(); ++i)
    if (sources[i].to_json() == form) return i;
  sources.push_back(std::move(d));
  return sources.size() - 1;
}

}  // namespace plan_detail

Json DataSpec::to_json() const {
  Json j = Json::object(
      {{"train", train.to_json()}, {"scale", scale}, {"validation_split", validation_split}});
  if (test) j["test"] = test->to_json();
  if (validation) j["validation"] = validation->to_json();
  if (take > 0) j["take"] = take;
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
    case Kind::kArrays: {
      auto array = [](const std::string& key) { return Json::object({{"array", key}}); };
      auto arrays = [&](const std::string& first, const std::vector<std::string>& more) {
        if (more.empty()) return array(first);
        Json a = Json::array({array(first)});
        for (const auto& m : more) a.push_back(array(m));
        return a;
      };
      Json j = Json::object({{"x", arrays(x, more_x)}, {"y", arrays(y, more_y)}});
      if (!sample_weight.empty()) j["sample_weight"] = array(sample_weight);
      return j;
    }
  }
  return nullptr;
}

}  // namespace nnfleet
