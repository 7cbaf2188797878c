// Keras model configs -> Model: Sequential (list and dict forms), Functional/Model (Keras 2
// inbound_nodes [[["name", node, tensor, {}]]] and Keras 3 {"args": [keras tensors]}), nested
// models flattened into the outer graph. A tensor index above 0 names an extra output of a
// multi-output layer (a recurrent layer's states with return_state); a recurrent layer's initial
// states arrive as further inbound tensors (Keras 2) or as kwargs "initial_state" (Keras 3).
#include "io/keras/keras_graph.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "core/limits.h"
#include "io/keras/keras_tf_ops.h"
#include "layers/layer_util.h"
#include "layers/registry.h"

namespace nnfleet {
namespace {

// Deeper nesting of models than this is treated as a malformed (or hostile) file.
constexpr int kMaxDepth = limits::kMaxModelNesting;
// More model inputs than this is treated as a malformed file.
constexpr size_t kMaxInputs = 64;
// More calls of one shared layer than this is treated as a malformed file.
constexpr int kMaxCalls = 4096;

bool is_model_class(const std::string& c) {
  return c == "Sequential" || c == "Functional" || c == "Model";
}

std::string supported_classes() {
  return layer_kind_names() + ", InputLayer, Sequential, Functional (or Model)";
}

std::string unique_key(std::map<std::string, int>& used, const std::string& base) {
  auto it = used.find(base);
  if (it == used.end()) {
    used[base] = 0;
    return base;
  }
  return base + "_" + std::to_string(++it->second);
}

// Keras 2 writes glorot_uniform and its relatives as VarianceScaling with explicit arguments;
// rewrites the exact equivalents of the named initializers to their names. Other
// VarianceScaling settings are left for the registry to refuse by name.
Json named_initializer(const Json& init) {
  if (!init.is_object() || init.value("class_name", Json()) != "VarianceScaling") return init;
  const Json c = init.value("config", Json::object());
  if (!c.is_object()) return init;
  const Json scale = c.value("scale", Json(1.0));
  const std::string mode = c.value("mode", Json("fan_in")).is_string()
                               ? c.value("mode", std::string("fan_in"))
                               : std::string();
  const std::string dist = c.value("distribution", Json("truncated_normal")).is_string()
                               ? c.value("distribution", std::string("truncated_normal"))
                               : std::string();
  if (!scale.is_number()) return init;
  const double s = scale.get<double>();
  // Keras 2's "normal" is the truncated normal that later versions call "truncated_normal".
  const bool uniform = dist == "uniform";
  const bool normal = dist == "normal" || dist == "truncated_normal";
  std::string name;
  if (s == 1.0 && mode == "fan_avg")
    name = uniform ? "GlorotUniform" : normal ? "GlorotNormal" : "";
  if (s == 2.0 && mode == "fan_in") name = uniform ? "HeUniform" : normal ? "HeNormal" : "";
  if (s == 1.0 && mode == "fan_in") name = uniform ? "LecunUniform" : normal ? "LecunNormal" : "";
  if (name.empty()) return init;
  return Json{{"class_name", name}, {"config", {{"seed", c.value("seed", Json())}}}};
}

Json normalize_layer_config(Json cfg, int depth = 0) {
  if (!cfg.is_object()) return cfg;
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& k = it.key();
    if (k.size() > 12 && k.compare(k.size() - 12, 12, "_initializer") == 0)
      it.value() = named_initializer(it.value());
  }
  // A wrapper (TimeDistributed) holds its layer's config under "layer".
  if (depth < kMaxDepth && cfg.contains("layer") && cfg["layer"].is_object() &&
      cfg["layer"].contains("config"))
    cfg["layer"]["config"] = normalize_layer_config(cfg["layer"]["config"], depth + 1);
  return cfg;
}

// Keras 3 keeps a wrapper's weights with its wrapped layer: layers/time_distributed/layer/vars.
std::string keras3_weight_path(const std::string& path, const std::string& cls) {
  return cls == "TimeDistributed" ? path + "/layer" : path;
}

// A tensor a layer is called on: the layer (or input) that makes it and which of its outputs.
struct TensorRef {
  std::string name;
  int index = 0;
  int node = 0;  // which call of the layer made it (Keras's node index)
};

struct PendingNode {
  std::unique_ptr<Layer> layer;
  std::vector<int> inputs;   // tensor ids: k < K = model input k, K + i = output of node i
  std::vector<int> tensors;  // per input, which output of its node
  int entry = -1;            // the top-level Keras layer it belongs to
  bool frozen = false;       // trainable: false here or on an enclosing model
  std::string path, path_by_name;
  LayerTraining training;
  int shares = -1;  // a further call of a shared layer: the node of its first call
};

// One layer entry of a config: {"class_name", "config", ["name"], ["inbound_nodes"], ...}.
struct LayerJson {
  std::string cls, name;
  Json config;
};

class Builder {
 public:
  Builder(std::string where, const std::vector<ModelInput>* data_shapes, const KerasAssets* assets)
      : where_(std::move(where)), data_shapes_(data_shapes), assets_(assets) {}

  KerasGraph build(const Json& top) {
    if (!top.is_object() || !top.contains("class_name") || !top["class_name"].is_string())
      fail(
          "the model config has no class_name; expected {\"class_name\": \"Sequential\" or "
          "\"Functional\", \"config\": {...}}");
    const std::string cls = top["class_name"].get<std::string>();
    if (!is_model_class(cls))
      fail("the model has class '" + cls +
           "'; expected Sequential, Functional or Model "
           "(subclassed models cannot be loaded: their code is not in the file)");
    check_builtin(top, "the model", cls);
    // Keras 3 records the built input shape next to the config.
    if (top.contains("build_config") && top["build_config"].is_object())
      hint_ = top["build_config"].value("input_shape", Json());
    const Json cfg = top.value("config", Json());
    model_name_ = cfg.is_object() && cfg.contains("name") && cfg["name"].is_string()
                      ? cfg["name"].get<std::string>()
                      : std::string("model");
    const std::vector<int> outs = add_model_outputs(cls, cfg, -1, "", "", -1, 0);

    KerasGraph g;
    g.class_name = cls == "Sequential" ? "Sequential" : "Functional";
    std::vector<ModelNode> nodes;
    for (auto& n : nodes_) {
      g.weight_paths.push_back(n.path);
      g.weight_paths_by_name.push_back(n.path_by_name);
      nodes.push_back({std::move(n.layer), n.inputs, std::move(n.training), n.tensors, n.shares});
    }
    if (nodes.empty()) fail("the model has no layers between its input and its output");
    try {
      g.model =
          std::make_shared<const Model>(model_name_, inputs_, std::move(nodes), outs, out_tensors_);
    } catch (const ModelError& e) {
      fail(e.what());
    }
    check_attention_masks(*g.model);
    // Legacy weight order per top-level entry: trainable weights of all its layers, then the
    // non-trainable ones.
    std::vector<KerasGraph::Entry> entries(entry_names_.size());
    for (size_t e = 0; e < entries.size(); ++e) {
      entries[e].name = entry_names_[e];
      entries[e].class_name = entry_classes_[e];
    }
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].shares >= 0) continue;  // a shared layer's weights are its first call's
        const auto& specs = g.model->planned(i).params;
        for (size_t j = 0; j < specs.size(); ++j)
          // A frozen layer's weights all count as non-trainable in Keras's weight lists.
          if ((specs[j].trainable && !nodes_[i].frozen) == (pass == 0))
            entries[static_cast<size_t>(nodes_[i].entry)].weights.push_back({i, j});
      }
    for (auto& e : entries)
      if (!e.weights.empty()) g.entries.push_back(std::move(e));
    return g;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError("failed to read Keras model '" + where_ + "': " + what);
  }

  // Refuses classes that are not Keras's own (custom objects registered by user code).
  void check_builtin(const Json& j, const std::string& what, const std::string& cls) const {
    if (j.contains("module") && j["module"].is_string()) {
      const std::string m = j["module"].get<std::string>();
      if (m.rfind("keras", 0) != 0 && m.rfind("tf_keras", 0) != 0 && m != "builtins")
        fail(what + " has class '" + cls + "' from module '" + m +
             "', which is not part of Keras; expected one of " + supported_classes());
    }
    if (j.contains("registered_name") && j["registered_name"].is_string()) {
      const std::string r = j["registered_name"].get<std::string>();
      if (r != cls && r != "Functional")
        fail(what + " has class '" + cls + "' registered as custom object '" + r +
             "'; expected one of " + supported_classes());
    }
  }

  LayerJson describe(const Json& l) {
    if (!l.is_object() || !l.contains("class_name") || !l["class_name"].is_string())
      fail("a layer entry has no class_name; expected {\"class_name\": ..., \"config\": ...}");
    LayerJson d;
    d.cls = l["class_name"].get<std::string>();
    d.config = l.contains("config") ? l["config"] : Json::object();
    if (d.config.is_object() && d.config.contains("name") && d.config["name"].is_string())
      d.name = d.config["name"].get<std::string>();
    else if (l.contains("name") && l["name"].is_string())
      d.name = l["name"].get<std::string>();
    else
      d.name = unique_key(default_names_, keras_snake_case(d.cls));
    check_builtin(l, "layer '" + d.name + "'", d.cls);
    if (is_attention_class(d.cls)) fold_attention_call(l, d);
    return d;
  }

  // A model input from an InputLayer's config (or a first layer's, which then carries its
  // batch shape and dtype); false when it gives no shape. dtype "string" makes a string input,
  // whose per-sample shape ([] or [1]) must be known.
  bool input_from(const Json& c, const std::string& lname, ModelInput& out) const {
    out = ModelInput{};
    out.name = lname;
    const bool strings = c.is_object() && c.contains("dtype") && c["dtype"] == "string";
    if (!strings) return shape_from(c, lname, out.shape);
    const Json* dims = nullptr;
    for (const char* k : {"batch_shape", "batch_input_shape"})
      if (!dims && c.contains(k) && c[k].is_array()) dims = &c[k];
    if (!dims || dims->empty()) return false;
    out.is_string = true;
    for (size_t i = 1; i < dims->size(); ++i) {
      const std::optional<int64_t> d = config_int((*dims)[i], 1);
      if (!d || *d > limits::kMaxDimension)
        fail("string input '" + lname + "' has shape " + dims->dump() +
             "; expected known sizes after the batch axis ((None,) or (None, 1))");
      out.string_shape.push_back(*d);
    }
    out.shape = out.string_shape;
    return true;
  }

  // A layer config with its vocabulary from the .keras assets when the config has none.
  Json with_assets(Json cfg, const std::string& cls, const std::string& path) const {
    if (!assets_ || !cfg.is_object()) return cfg;
    if (cls != "TextVectorization" && cls != "StringLookup" && cls != "IntegerLookup") return cfg;
    if (cfg.contains("vocabulary") && !cfg["vocabulary"].is_null()) return cfg;
    const auto it = assets_->find("assets/" + path + "/vocabulary.txt");
    if (it == assets_->end()) return cfg;
    Json lines = vocabulary_lines(it->second);
    if (cls == "IntegerLookup")
      for (Json& l : lines) {
        const std::optional<int64_t> v = config_int(l, INT64_MIN / 2);
        if (!v)
          fail("layer '" + path + "' has the vocabulary term '" + l.get<std::string>() +
               "' in its assets; expected integers for IntegerLookup");
        l = *v;
      }
    cfg["vocabulary"] = std::move(lines);
    return cfg;
  }

  // Reads an input shape (without the batch axis) from a layer config; false when it has none.
  bool shape_from(const Json& c, const std::string& lname, Shape& out) const {
    if (!c.is_object()) return false;
    const Json* dims = nullptr;
    bool batch = true;
    for (const char* k : {"batch_input_shape", "batch_shape"})
      if (!dims && c.contains(k) && c[k].is_array()) dims = &c[k];
    for (const char* k : {"input_shape", "shape"})
      if (!dims && c.contains(k) && c[k].is_array()) {
        dims = &c[k];
        batch = false;
      }
    if (!dims) return false;
    return parse_dims(*dims, batch, lname, out);
  }

  bool parse_dims(const Json& dims, bool batch, const std::string& lname, Shape& out) const {
    if (!dims.is_array()) return false;
    const size_t first = batch ? 1 : 0;
    if (dims.size() < first + 1 || dims.size() - first > static_cast<size_t>(Shape::kMaxRank))
      fail("input of '" + lname + "' has shape " + dims.dump() + "; expected 1 to " +
           std::to_string(Shape::kMaxRank) + " dimensions after the batch axis");
    Shape s;
    int64_t total = 1;
    const bool any_free = std::any_of(dims.begin() + static_cast<std::ptrdiff_t>(first), dims.end(),
                                      [](const Json& d) { return d.is_null(); });
    if (any_free) check_free_dims(dims, first, lname);
    for (size_t i = first; i < dims.size(); ++i) {
      std::optional<int64_t> d = config_int(dims[i], 1);
      if (dims[i].is_null())
        d = probe_length_ ? probe_length_ : (*data_shape_)[static_cast<int>(i - first)];
      if (!d || *d > limits::kMaxDimension)
        fail("input of '" + lname + "' has shape " + dims.dump() +
             "; expected known positive sizes after the batch axis, each at most " +
             std::to_string(limits::kMaxDimension) + " (nnfleet needs a fixed input shape)");
      s.push_back(*d);
      if (*d > limits::kMaxSampleFloats / total)  // before multiplying: no overflow
        fail("input of '" + lname + "' has shape " + dims.dump() +
             ", which is implausibly large; expected at most " +
             std::to_string(limits::kMaxSampleFloats) + " values per sample");
      total *= *d;
    }
    out = s;
    return true;
  }

  // A free (None) input dimension takes the data's size: fails unless data of the same rank is
  // given.
  void check_free_dims(const Json& dims, size_t first, const std::string& lname) const {
    const size_t rank = dims.size() - first;
    if (probe_length_) return;
    if (!data_shape_)
      fail("input of '" + lname + "' has shape " + dims.dump() +
           ", with a free (None) dimension; expected the data to give its size (nnfleet predict "
           "and train take it from their data)");
    if (static_cast<size_t>(data_shape_->rank()) != rank)
      fail("input of '" + lname + "' has shape " + dims.dump() + " (" + std::to_string(rank) +
           " dimensions after the batch axis); expected data samples of that rank to size its "
           "free dimensions, got samples of shape " +
           data_shape_->str());
  }

  // The input shape a nested model's config gives: its InputLayer, its first layer's
  // batch_input_shape, or its build_input_shape.
  bool nested_input_shape(const Json& cfg, const std::string& lname, Shape& out, int depth) const {
    if (depth > kMaxDepth) return false;
    const Json* layers = cfg.is_array()                              ? &cfg
                         : cfg.is_object() && cfg.contains("layers") ? &cfg["layers"]
                                                                     : nullptr;
    if (layers && layers->is_array() && !layers->empty()) {
      const Json& first = (*layers)[0];
      const Json c = first.is_object() ? first.value("config", Json()) : Json();
      if (shape_from(c, lname, out)) return true;
      const Json cls = first.is_object() ? first.value("class_name", Json()) : Json();
      if (cls.is_string() && is_model_class(cls.get<std::string>()) &&
          nested_input_shape(c, lname, out, depth + 1))
        return true;
    }
    return cfg.is_object() && cfg.contains("build_input_shape") &&
           parse_dims(cfg["build_input_shape"], true, lname, out);
  }

  // The data shape that sizes free dimensions of model input k, named `name` (null when none is
  // given): the data entry of that name when the entries are named, else the k-th.
  void use_data_shape(size_t k, const std::string& name) {
    data_shape_ = nullptr;
    if (!data_shapes_) return;
    for (const ModelInput& d : *data_shapes_) {
      if (d.name == kEveryFreeDimension && d.shape.rank() == 1) probe_length_ = d.shape[0];
      if (!d.name.empty() && d.name == name) data_shape_ = &d.shape;
    }
    if (!data_shape_ && k < data_shapes_->size() && (*data_shapes_)[k].name.empty())
      data_shape_ = &(*data_shapes_)[k].shape;
  }

  void set_input(const Shape& s, const std::string& name) { inputs_ = {ModelInput{name, s}}; }

  int new_entry(const std::string& name, const std::string& cls) {
    entry_names_.push_back(name);
    entry_classes_.push_back(cls);
    return static_cast<int>(entry_names_.size()) - 1;
  }

  int add_layer(const LayerJson& d, std::vector<int> inputs, int entry, const std::string& path,
                const std::string& path_by_name, std::vector<int> tensors = {}, int shares = -1) {
    if (!find_layer_kind(d.cls))
      fail("layer '" + d.name + "' has class '" + d.cls +
           "', which nnfleet does not support; expected one of " + supported_classes() +
           near_miss(d.cls, layer_class_names()));
    std::string name = d.name;
    Json cfg = with_assets(normalize_layer_config(d.config), d.cls, path);
    // In a further call of a nested model, its k-th new layer is a call of the first's k-th.
    if (shares < 0 && share_from_ >= 0)
      shares = share_from_ + static_cast<int>(nodes_.size()) - share_start_;
    while (shares >= 0 && nodes_[static_cast<size_t>(shares)].shares >= 0)
      shares = nodes_[static_cast<size_t>(shares)].shares;
    if (shares >= 0) {
      // The same layer again: its first call's (possibly made unique) name.
      name = nodes_[static_cast<size_t>(shares)].layer->name();
      if (cfg.is_object()) cfg["name"] = name;
    } else if (names_.count(name)) {
      // A layer of a nested model may reuse an outer name; keep names unique in the flat graph.
      std::string base = name;
      for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
      if (cfg.is_object()) cfg["name"] = name;
    }
    if (shares < 0) names_.insert(name);
    std::unique_ptr<Layer> layer;
    LayerTraining training;
    try {
      training = take_layer_training(cfg);
      layer = make_layer(d.cls, cfg, ConfigMode::kKeras, name);
    } catch (const ModelError& e) {
      fail("layer '" + d.name + "' (" + d.cls + "): " + e.what());
    }
    const bool frozen = frozen_depth_ > 0 || training.frozen;
    training.frozen = frozen;
    training.scopes = scopes_;
    if (tensors.empty()) tensors.assign(inputs.size(), 0);
    nodes_.push_back({std::move(layer), std::move(inputs), std::move(tensors), entry, frozen,
                      keras3_weight_path(path, d.cls), keras3_weight_path(path_by_name, d.cls),
                      std::move(training), shares});
    return num_inputs_ + static_cast<int>(nodes_.size()) - 1;
  }

  // A nested model, called on one tensor: its single output.
  int add_model(const std::string& cls, const Json& cfg, int input, const std::string& prefix,
                const std::string& prefix_by_name, int entry, int depth) {
    const std::vector<int> outs =
        add_model_outputs(cls, cfg, input, prefix, prefix_by_name, entry, depth);
    if (outs.size() != 1)
      fail("a nested model has " + std::to_string(outs.size()) + " outputs; expected one");
    return outs[0];
  }

  std::vector<int> add_model_outputs(const std::string& cls, const Json& cfg, int input,
                                     const std::string& prefix, const std::string& prefix_by_name,
                                     int entry, int depth) {
    if (depth > kMaxDepth)
      fail("models are nested more than " + std::to_string(kMaxDepth) + " deep");
    const bool frozen = cfg.is_object() && cfg.value("trainable", Json(true)) == false;
    frozen_depth_ += frozen;
    if (depth > 0)
      scopes_.push_back(cfg.is_object() ? cfg.value("name", std::string()) : std::string());
    const std::vector<int> out =
        cls == "Sequential"
            ? std::vector<int>{add_sequential(cfg, input, prefix, prefix_by_name, entry, depth)}
            : add_functional(cfg, input, prefix, prefix_by_name, entry, depth);
    frozen_depth_ -= frozen;
    if (depth > 0) scopes_.pop_back();
    return out;
  }

  int add_sequential(const Json& cfg, int input, const std::string& prefix,
                     const std::string& prefix_by_name, int entry, int depth) {
    const Json* layers = cfg.is_array()                              ? &cfg
                         : cfg.is_object() && cfg.contains("layers") ? &cfg["layers"]
                                                                     : nullptr;
    if (!layers || !layers->is_array())
      fail("a Sequential model has no list of layers; expected \"layers\": [...]");
    std::map<std::string, int> used;
    int cur = input;
    bool first = true;
    for (const Json& l : *layers) {
      const LayerJson d = describe(l);
      if (d.cls == "InputLayer") {
        if (!first)
          fail("InputLayer '" + d.name + "' is not the first layer of its Sequential model");
        first = false;
        if (cur < 0) {
          ModelInput in;
          use_data_shape(0, d.name);
          if (!input_from(d.config, d.name, in))
            fail("InputLayer '" + d.name + "' has no batch_shape or batch_input_shape");
          inputs_ = {in};
          cur = 0;
        }
        continue;
      }
      first = false;
      if (cur < 0) {
        // No InputLayer: the first layer carries the shape, or the model its build shape.
        Shape s;
        use_data_shape(0, "");
        ModelInput first_in;
        if (input_from(d.config, "input_layer", first_in) && first_in.is_string) {
          inputs_ = {first_in};
          cur = 0;
        }
        const bool found = cur == 0 || shape_from(d.config, d.name, s) ||
                           (is_model_class(d.cls) && nested_input_shape(d.config, d.name, s, 0)) ||
                           (cfg.is_object() && cfg.contains("build_input_shape") &&
                            parse_dims(cfg["build_input_shape"], true, d.name, s)) ||
                           (!hint_.is_null() && parse_dims(hint_, true, d.name, s));
        if (!found)
          fail(
              "the model does not give its input shape; expected an InputLayer, or "
              "batch_input_shape in the config of its first layer '" +
              d.name + "'");
        if (cur < 0) set_input(s, "input_layer");
        cur = 0;
      }
      const std::string key = unique_key(used, keras_snake_case(d.cls));
      const std::string path = prefix + "layers/" + key;
      const std::string pbn = prefix_by_name + "layers/" + d.name;
      const int e = entry >= 0 ? entry : new_entry(d.name, d.cls);
      if (is_model_class(d.cls))
        cur = add_model(d.cls, d.config, cur, path + "/", pbn + "/", e, depth + 1);
      else
        cur = add_layer(d, {cur}, e, path, pbn);
    }
    if (cur < 0) fail("a Sequential model has no layers");
    return cur;
  }

  // [["name", 0, 0], ...], ["name", 0, 0] (one tensor) or {"key": ["name", 0, 0]}. The tensor
  // index (a layer's extra output, e.g. a recurrent layer's returned state) goes to `indices`
  // when given; otherwise only the first output of a layer is accepted.
  std::vector<std::string> tensor_refs(const Json& cfg, const char* key,
                                       std::vector<int>* indices = nullptr,
                                       std::vector<int>* nodes = nullptr) const {
    std::vector<std::string> out;
    if (!cfg.contains(key)) fail("a Functional model has no " + std::string(key));
    const Json& v = cfg[key];
    auto one = [&](const Json& r) {
      if (!r.is_array() || r.empty() || !r[0].is_string())
        fail("bad entry in " + std::string(key) + ": " + r.dump() + "; expected [\"name\", 0, 0]");
      const std::string who = "layer '" + r[0].get<std::string>() + "' in " + key;
      const int k = r.size() >= 3 ? tensor_index(r[2], who) : 0;
      if (k != 0 && !indices)
        fail(std::string(key) + " names output " + r[2].dump() + " of layer '" +
             r[0].get<std::string>() + "'; expected the first output of each layer here");
      if (indices) indices->push_back(k);
      if (nodes) nodes->push_back(r.size() >= 2 ? node_index(r[1], who) : 0);
      out.push_back(r[0].get<std::string>());
    };
    if (v.is_array() && !v.empty() && v[0].is_string()) {
      one(v);
    } else if (v.is_array()) {
      for (const Json& r : v) one(r);
    } else if (v.is_object()) {
      for (const auto& [k, r] : v.items()) one(r);
    } else {
      fail("bad " + std::string(key) + ": " + v.dump());
    }
    return out;
  }

  // A tensor index: a small non-negative integer.
  int tensor_index(const Json& k, const std::string& who) const {
    const std::optional<int64_t> i = config_int(k, 0);
    if (!i || *i > 64)
      fail(who + " uses tensor index " + k.dump() + "; expected an integer in [0, 64]");
    return static_cast<int>(*i);
  }

  // A node index: which call of a layer (shared layers are called several times).
  int node_index(const Json& k, const std::string& who) const {
    const std::optional<int64_t> i = config_int(k, 0);
    if (!i || *i > kMaxCalls)
      fail(who + " uses node index " + k.dump() + "; expected an integer in [0, " +
           std::to_string(kMaxCalls) + "]");
    return static_cast<int>(*i);
  }

  void collect_tensors(const Json& v, std::vector<TensorRef>& names, int depth) const {
    if (depth > 8) return;
    if (v.is_object()) {
      if (v.value("class_name", Json()) == "__keras_tensor__") {
        const Json c = v.value("config", Json());
        const Json h = c.is_object() ? c.value("keras_history", Json()) : Json();
        if (!h.is_array() || h.size() < 3 || !h[0].is_string())
          fail("a Keras tensor has no keras_history [\"name\", node, tensor]: " + v.dump());
        names.push_back({h[0].get<std::string>(), tensor_index(h[2], "a Keras tensor"),
                         node_index(h[1], "a Keras tensor")});
        return;
      }
      for (const auto& [k, x] : v.items()) collect_tensors(x, names, depth + 1);
    } else if (v.is_array()) {
      for (const Json& x : v) collect_tensors(x, names, depth + 1);
    }
  }

  // The tensors that feed each call of this layer (one per inbound node; a shared layer has
  // several), in argument order (a recurrent layer's initial states last).
  std::vector<std::vector<TensorRef>> inbound(const Json& l, const LayerJson& d) const {
    const std::string who = "layer '" + d.name + "' (" + d.cls + ")";
    if (is_tf_op_entry(l)) return {tf_op_call(l, d).second};
    if (d.cls == "MultiHeadAttention") return {attention_inbound(l, who)};
    const Json nodes = l.value("inbound_nodes", Json());
    if (!nodes.is_array() || nodes.empty())
      fail(who + " has no inbound node; expected it to be called on a tensor");
    if (nodes.size() > static_cast<size_t>(kMaxCalls))
      fail(who + " is called " + std::to_string(nodes.size()) + " times; expected at most " +
           std::to_string(kMaxCalls));
    std::vector<std::vector<TensorRef>> calls;
    for (const Json& node : nodes) calls.push_back(inbound_node(node, who));
    return calls;
  }

  std::vector<TensorRef> inbound_node(const Json& node, const std::string& who) const {
    std::vector<TensorRef> names;
    if (node.is_array()) {
      for (const Json& ref : node) {
        if (!ref.is_array() || ref.size() < 3 || !ref[0].is_string())
          fail(who + " has a malformed inbound node " + ref.dump() +
               "; expected [\"name\", node, tensor, {}]");
        names.push_back(
            {ref[0].get<std::string>(), tensor_index(ref[2], who), node_index(ref[1], who)});
      }
    } else if (node.is_object()) {
      collect_tensors(node.value("args", Json()), names, 0);
      Json kwargs = node.value("kwargs", Json::object());
      if (kwargs.is_object() && kwargs.contains("initial_state")) {
        collect_tensors(kwargs["initial_state"], names, 0);
        kwargs.erase("initial_state");
      }
      std::vector<TensorRef> kw;
      collect_tensors(kwargs, kw, 0);
      if (!kw.empty())
        fail(who +
             " takes a tensor as keyword argument; expected tensors as positional "
             "arguments (or a recurrent layer's initial_state)");
    } else {
      fail(who + " has a malformed inbound node " + node.dump());
    }
    if (names.empty()) fail(who + " is called without input tensors");
    return names;
  }

  // A TensorFlow operation's entry (TFOpLambda, SlicingOpLambda or a Keras 3 keras.ops call,
  // io/keras/keras_tf_ops.h): the layer it becomes and the tensors it takes, in input order.
  std::pair<LayerJson, std::vector<TensorRef>> tf_op_call(const Json& l, const LayerJson& d) const {
    try {
      TfOpCall c = read_tf_op_call(l, d.name);
      std::vector<TensorRef> refs;
      for (const auto& [name, k] : c.inputs) refs.push_back({name, k});
      return {LayerJson{c.cls, d.name, std::move(c.config)}, std::move(refs)};
    } catch (const ModelError& e) {
      fail("layer '" + d.name + "' (" + d.cls + "): " + e.what());
    }
  }

  // The layers of one Functional config being read: their calls and the tensors made so far.
  struct Scope {
    std::string mname;
    std::vector<LayerJson> ds;
    std::vector<std::string> keys;
    std::vector<int> entries;
    std::vector<std::vector<std::vector<TensorRef>>> calls;  // per layer, per call, its inputs
    std::map<std::string, size_t> index_of;                  // layer name -> position
    std::vector<int> base;        // per layer, the node index of its first call in the config
    std::vector<int> first_node;  // per layer, the node (of nodes_) its first call starts at
    std::vector<size_t> next;     // per layer, its next call to add
    std::map<std::pair<std::string, int>, int> tensor_of;  // (layer, call) -> tensor id
  };

  // A Functional model's layers; returns its output tensors in output_layers order. At the top
  // level (input < 0) its InputLayers become the model inputs in input_layers order (not the order
  // the config lists them in); a nested one has a single input, fed by tensor `input`. A layer
  // with several inbound nodes is a shared layer: each further call becomes a node sharing the
  // first call's weights (a nested model's further call, copies of its layers sharing them).
  std::vector<int> add_functional(const Json& cfg, int input, const std::string& prefix,
                                  const std::string& prefix_by_name, int entry, int depth) {
    if (!cfg.is_object() || !cfg.contains("layers") || !cfg["layers"].is_array())
      fail("a Functional model has no list of layers; expected \"layers\": [...]");
    const Json& layers = cfg["layers"];
    Scope sc;
    sc.mname = cfg.value("name", Json("model")).is_string()
                   ? cfg.value("name", std::string("model"))
                   : std::string("model");
    const auto ins = tensor_refs(cfg, "input_layers");
    // The top level's outputs may be a layer's extra outputs (an encoder's returned states).
    std::vector<int> out_tensors, out_nodes;
    const auto outs =
        tensor_refs(cfg, "output_layers", input < 0 ? &out_tensors : nullptr, &out_nodes);
    check_functional_ends(sc.mname, ins, outs, input);
    std::map<std::string, int> used;
    for (const Json& l : layers) {
      sc.ds.push_back(describe(l));
      // Keras 3 saves no weights for an operation, and its key takes no number from the count.
      const bool op = is_tf_op_entry(l);
      if (op) sc.ds.back() = tf_op_call(l, sc.ds.back()).first;
      sc.keys.push_back(op ? sc.ds.back().name
                           : unique_key(used, keras_snake_case(sc.ds.back().cls)));
      sc.entries.push_back(entry >= 0 ? entry : new_entry(sc.ds.back().name, sc.ds.back().cls));
    }
    add_functional_inputs(sc, ins, input);
    plan_calls(sc, layers, outs, out_nodes);
    // Resolve calls once their inputs exist (configs are normally in topological order), one
    // call per layer and pass: a nested model called on three inputs becomes three copies one
    // after the other, in the order the file was made in and written back in.
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t i = 0; i < sc.ds.size(); ++i)
        if (sc.next[i] < sc.calls[i].size() && add_call(sc, i, prefix, prefix_by_name, depth))
          progress = true;
    }
    for (size_t i = 0; i < sc.ds.size(); ++i)
      if (sc.next[i] < sc.calls[i].size()) {
        std::string missing;
        for (const auto& r : sc.calls[i][sc.next[i]])
          if (tensor_of_ref(sc, r, "") < 0) missing = r.name;
        fail("layer '" + sc.ds[i].name + "' of model '" + sc.mname + "' takes its input from '" +
             missing + "', which is not defined before it (or the graph has a cycle)");
      }
    std::vector<int> out_ids;
    for (size_t j = 0; j < outs.size(); ++j) {
      const std::string& o = outs[j];
      const std::string who = "the output '" + o + "' of model '" + sc.mname + "'";
      const int id = tensor_of_ref(sc, {o, 0, out_nodes[j]}, who);
      if (id < 0) fail(who + " is not one of its layers");
      if (id < num_inputs_) fail(who + " is an input; expected the output of a layer");
      if (!out_tensors.empty() && out_tensors[j] != 0 &&
          is_model_class(sc.ds[sc.index_of.at(o)].cls))
        fail(who + " is output " + std::to_string(out_tensors[j]) +
             " of a nested model, which has one");
      out_ids.push_back(id);
    }
    if (input < 0) out_tensors_ = out_tensors;
    return out_ids;
  }

  static std::string join_names(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  void check_functional_ends(const std::string& mname, const std::vector<std::string>& ins,
                             const std::vector<std::string>& outs, int input) {
    const auto list = join_names;
    if (ins.empty() || outs.empty())
      fail("model '" + mname + "' has " + std::to_string(ins.size()) + " input(s) and " +
           std::to_string(outs.size()) + " output(s); expected at least one of each");
    if (input >= 0 && (ins.size() != 1 || outs.size() != 1))
      fail("nested model '" + mname + "' has " + std::to_string(ins.size()) + " input(s) (" +
           list(ins) + ") and " + std::to_string(outs.size()) + " output(s) (" + list(outs) +
           "); expected one input and one output in a nested model");
    if (std::set<std::string>(ins.begin(), ins.end()).size() != ins.size())
      fail("model '" + mname + "' lists an input twice in input_layers (" + list(ins) + ")");
    if (ins.size() > kMaxInputs)
      fail("model '" + mname + "' has " + std::to_string(ins.size()) +
           " inputs; expected at most " + std::to_string(kMaxInputs));
    if (input < 0) {
      num_inputs_ = static_cast<int>(ins.size());
      inputs_.assign(ins.size(), ModelInput{});
    }
  }

  // The InputLayers: model inputs at the top level, the tensor `input` in a nested model.
  void add_functional_inputs(Scope& sc, const std::vector<std::string>& ins, int input) {
    for (size_t i = 0; i < sc.ds.size(); ++i)
      if (!sc.index_of.emplace(sc.ds[i].name, i).second)
        fail("model '" + sc.mname + "' has two layers named '" + sc.ds[i].name + "'");
    for (size_t i = 0; i < sc.ds.size(); ++i) {
      const LayerJson& d = sc.ds[i];
      if (d.cls != "InputLayer") continue;
      const auto pos = std::find(ins.begin(), ins.end(), d.name);
      if (pos == ins.end())
        fail("InputLayer '" + d.name + "' of model '" + sc.mname +
             "' is not one of its inputs; expected one of " + join_names(ins));
      if (input < 0) {
        const size_t k = static_cast<size_t>(pos - ins.begin());
        use_data_shape(k, d.name);
        if (!input_from(d.config, d.name, inputs_[k]))
          fail("InputLayer '" + d.name + "' has no batch_shape or batch_input_shape");
        sc.tensor_of[{d.name, 0}] = static_cast<int>(k);
      } else {
        sc.tensor_of[{d.name, 0}] = input;
      }
    }
    for (const auto& in : ins)
      if (!sc.tensor_of.count({in, 0}))
        fail("the input '" + in + "' of model '" + sc.mname + "' is not one of its InputLayers");
  }

  // Each layer's calls, and how the config numbers them. A nested model's node 0 is its own
  // build on its Input, which Keras leaves out of the outer config (tf.keras and Keras 3
  // functional.py, _should_skip_first_node): its calls there are nodes 1, 2, ...; a layer's are
  // 0, 1, .... Which one a file uses shows in the highest node index referring to it.
  void plan_calls(Scope& sc, const Json& layers, const std::vector<std::string>& outs,
                  const std::vector<int>& out_nodes) {
    const size_t n = sc.ds.size();
    sc.calls.assign(n, {});
    sc.base.assign(n, 0);
    sc.first_node.assign(n, -1);
    sc.next.assign(n, 0);
    std::vector<int> most(n, -1);
    auto note = [&](const std::string& name, int node) {
      auto it = sc.index_of.find(name);
      if (it != sc.index_of.end()) most[it->second] = std::max(most[it->second], node);
    };
    for (size_t i = 0; i < n; ++i)
      if (sc.ds[i].cls != "InputLayer") sc.calls[i] = inbound(layers[i], sc.ds[i]);
    for (const auto& layer_calls : sc.calls)
      for (const auto& call : layer_calls)
        for (const TensorRef& r : call) note(r.name, r.node);
    for (size_t j = 0; j < outs.size(); ++j) note(outs[j], out_nodes[j]);
    for (size_t i = 0; i < n; ++i)
      if (is_model_class(sc.ds[i].cls) && most[i] == static_cast<int>(sc.calls[i].size()))
        sc.base[i] = 1;
  }

  // The tensor a reference names (-1 while its call is not added yet, or when it names no
  // layer); fails, naming `who`, for a node index that is not a call of the layer.
  int tensor_of_ref(const Scope& sc, const TensorRef& r, const std::string& who) const {
    auto it = sc.index_of.find(r.name);
    if (it == sc.index_of.end()) return -1;
    const size_t j = it->second;
    const int ncalls = static_cast<int>(sc.calls[j].size());
    int call = 0;
    if (ncalls > 1) {  // a layer called once: any index names it (as before shared layers)
      call = r.node - sc.base[j];
      if (call < 0 || call >= ncalls)
        fail(who + " uses node " + std::to_string(r.node) + " of layer '" + r.name +
             "', which is called " + std::to_string(ncalls) + " times; expected a node index " +
             "from " + std::to_string(sc.base[j]) + " to " +
             std::to_string(sc.base[j] + ncalls - 1));
    }
    auto t = sc.tensor_of.find({r.name, call});
    return t == sc.tensor_of.end() ? -1 : t->second;
  }

  // Adds layer i's next call when its inputs exist; false when they do not yet.
  bool add_call(Scope& sc, size_t i, const std::string& prefix, const std::string& prefix_by_name,
                int depth) {
    const LayerJson& d = sc.ds[i];
    const size_t c = sc.next[i];
    const std::string who = "layer '" + d.name + "' (" + d.cls + ")";
    std::vector<int> in, tensors;
    for (const auto& r : sc.calls[i][c]) {
      const int id = tensor_of_ref(sc, r, who);
      if (id < 0) return false;
      in.push_back(id);
      tensors.push_back(r.index);
    }
    const std::string path = prefix + "layers/" + sc.keys[i];
    const std::string pbn = prefix_by_name + "layers/" + d.name;
    const int start = static_cast<int>(nodes_.size());
    int out;
    if (is_model_class(d.cls)) {
      if (in.size() != 1 || tensors[0] != 0)
        fail("nested model '" + d.name + "' is called on " + std::to_string(in.size()) +
             " tensors; expected one, the first output of a layer");
      const int saved_from = share_from_, saved_start = share_start_;
      if (c > 0) {
        share_from_ = sc.first_node[i];
        share_start_ = start;
      }
      out = add_model(d.cls, d.config, in[0], path + "/", pbn + "/", sc.entries[i], depth + 1);
      share_from_ = saved_from;
      share_start_ = saved_start;
    } else {
      out = add_layer(d, std::move(in), sc.entries[i], path, pbn, std::move(tensors),
                      c > 0 ? sc.first_node[i] : -1);
    }
    if (c == 0) sc.first_node[i] = start;
    sc.tensor_of[{d.name, static_cast<int>(c)}] = out;
    ++sc.next[i];
    return true;
  }

  // Attention layers (MultiHeadAttention) take their tensors by name: call(query, value, key=None,
  // attention_mask=None, return_attention_scores=False, training=None, use_causal_mask=False).
  // Keras 3 passes them as args and kwargs of Keras tensors; tf.keras as one entry for the query
  // whose kwargs hold value and key as ["layer", node, tensor] lists (or, older, one entry per
  // tensor in call order). The tensors come back in the layer's input order: query, value[, key].
  // Attention and AdditiveAttention take [query, value(, key)] as one list, read as any layer's,
  // and the same call flags.
  static bool is_attention_class(const std::string& cls) {
    return cls == "MultiHeadAttention" || cls == "Attention" || cls == "AdditiveAttention";
  }

  std::vector<TensorRef> attention_inbound(const Json& l, const std::string& who) const {
    const Json nodes = l.value("inbound_nodes", Json());
    if (!nodes.is_array() || nodes.size() != 1)
      fail(who + " has " + std::to_string(nodes.is_array() ? nodes.size() : 0) +
           " inbound nodes; expected it to be called once");
    const Json& node = nodes[0];
    std::map<std::string, TensorRef> by_name;
    const char* const order[] = {"query", "value", "key"};
    auto legacy_ref = [&](const Json& r) {
      if (!r.is_array() || r.size() < 3 || !r[0].is_string())
        fail(who + " has a malformed tensor " + r.dump() + "; expected [\"name\", node, tensor]");
      return TensorRef{r[0].get<std::string>(), tensor_index(r[2], who)};
    };
    Json kwargs = Json::object();
    if (node.is_array()) {  // tf.keras: [["q", 0, 0, {"value": [...], "key": [...]}], ...]
      for (size_t k = 0; k < node.size(); ++k) {
        if (k >= 3)
          fail(who + " has " + std::to_string(node.size()) +
               " inbound tensors; expected "
               "query, value and key at most");
        by_name[order[k]] = legacy_ref(node[k]);
        if (node[k].size() >= 4 && node[k][3].is_object())
          for (const auto& [key, v] : node[k][3].items()) kwargs[key] = v;
      }
      for (const char* name :
           {"value", "key", "attention_mask", "query_mask", "value_mask", "key_mask"})
        if (kwargs.contains(name) && !kwargs[name].is_null()) {
          by_name[name] = legacy_ref(kwargs[name]);
          kwargs.erase(name);
        }
    } else if (node.is_object()) {  // Keras 3: {"args": [...], "kwargs": {...}}
      const Json args = node.value("args", Json::array());
      for (size_t k = 0; args.is_array() && k < args.size(); ++k) {
        std::vector<TensorRef> t;
        collect_tensors(args[k], t, 0);
        if (k >= 3 || t.size() != 1)
          fail(who + " is called with positional argument " + args[k].dump() +
               "; expected the tensors query, value and key");
        by_name[order[k]] = t[0];
      }
      kwargs = node.value("kwargs", Json::object());
      if (!kwargs.is_object()) fail(who + " has malformed kwargs " + kwargs.dump());
      for (auto it = kwargs.begin(); it != kwargs.end();) {
        std::vector<TensorRef> t;
        collect_tensors(it.value(), t, 0);
        if (t.size() == 1) {
          by_name[it.key()] = t[0];
          it = kwargs.erase(it);
        } else {
          ++it;
        }
      }
    } else {
      fail(who + " has a malformed inbound node " + node.dump());
    }
    for (const auto& [name, t] : by_name)
      if (name != "query" && name != "value" && name != "key" && name != "attention_mask")
        fail(who + " is called with the tensor " + name + " ('" + t.name +
             "'); expected only query, value, key and attention_mask (the inputs' own masks come "
             "with them)");
    if (!by_name.count("query") || !by_name.count("value"))
      fail(who + " is called without " + (by_name.count("query") ? "value" : "query") +
           "; expected query and value tensors");
    std::vector<TensorRef> out{by_name["query"], by_name["value"]};
    // A key that is the value itself is Keras's default: one input fewer. With an attention
    // mask the layer takes all four (fold_attention_call marks it), the key defaulting to value.
    const bool mask = by_name.count("attention_mask") > 0;
    if (by_name.count("key") &&
        (mask || by_name["key"].name != out[1].name || by_name["key"].index != out[1].index))
      out.push_back(by_name["key"]);
    else if (mask)
      out.push_back(out[1]);
    if (mask) out.push_back(by_name["attention_mask"]);
    return out;
  }

  // The call's flags (use_causal_mask, return_attention_scores) become config keys of the layer;
  // training is ignored (nnfleet sets it); other non-tensor arguments are refused by name.
  void fold_attention_call(const Json& l, LayerJson& d) const {
    const Json nodes = l.value("inbound_nodes", Json());
    if (!nodes.is_array() || nodes.size() != 1 || !d.config.is_object()) return;
    const Json& node = nodes[0];
    Json kwargs = Json::object();
    if (node.is_object() && node.contains("kwargs") && node["kwargs"].is_object())
      kwargs = node["kwargs"];
    if (node.is_array())
      for (const Json& e : node)
        if (e.is_array() && e.size() >= 4 && e[3].is_object())
          for (const auto& [k, v] : e[3].items()) kwargs[k] = v;
    for (const auto& [k, v] : kwargs.items()) {
      if (k == "use_causal_mask" || k == "return_attention_scores") {
        if (!v.is_boolean())
          fail("layer '" + d.name + "' (" + d.cls + ") is called with " + k + " " + v.dump() +
               "; expected true or false");
        if (v.get<bool>()) d.config[k] = true;
      } else if (k == "attention_mask" && !v.is_null()) {
        d.config[k] = true;  // the tensor is the layer's fourth input (attention_inbound)
      } else if (k != "training" && k != "query" && k != "value" && k != "key" &&
                 k != "attention_mask" && k != "query_mask" && k != "value_mask" &&
                 k != "key_mask" && !v.is_null()) {
        fail("layer '" + d.name + "' (" + d.cls + ") is called with argument " + k + " " +
             v.dump() + "; expected query, value, key, use_causal_mask, return_attention_scores");
      }
    }
  }

  // An attention layer sees the Keras mask of its query only (LayerArgs::mask), which is also the
  // value's in self-attention; a masked value or key that is another tensor would be read
  // unmasked, so it is refused. Masks travel as Network carries them (Layer::mask_use).
  void check_attention_masks(const Model& m) const {
    std::vector<bool> masked(m.num_layers(), false);  // the layer's first output carries a mask
    auto carries = [&](size_t i, size_t j) {
      const int id = m.layer_inputs(i)[j];
      return !m.is_input(id) && m.input_tensor(i, j) == 0 && masked[m.layer_of(id)];
    };
    for (size_t i = 0; i < m.num_layers(); ++i) {
      const Layer& l = m.layer(i);
      const auto& ins = m.layer_inputs(i);
      const bool one = ins.size() == 1 || l.mask_use() == MaskUse::kConsume;
      const bool in = one && carries(i, 0);
      masked[i] = l.mask_use() == MaskUse::kProduce ||
                  (l.mask_use() == MaskUse::kPropagate && in) ||
                  (l.mask_use() == MaskUse::kConsume && l.passes_mask() && in);
      if (!is_attention_class(l.class_name())) continue;
      for (size_t j = 1; j < ins.size() && j < 3; ++j)
        if (carries(i, j) && (ins[j] != ins[0] || m.input_tensor(i, j) != m.input_tensor(i, 0)))
          fail("layer '" + l.name() + "' (" + l.class_name() + ") takes a " +
               (j == 1 ? "value" : "key") + " from '" + m.node_name(ins[j]) +
               "', which carries a Keras mask (Embedding mask_zero or Masking); expected a mask "
               "only on the query, or the query itself as the " +
               (j == 1 ? "value" : "key"));
    }
  }

  std::string where_;
  const std::vector<ModelInput>* data_shapes_ = nullptr;  // the data's; may be null
  const KerasAssets* assets_ = nullptr;                   // a .keras file's; may be null
  const Shape* data_shape_ = nullptr;  // the input being read's: sizes free dimensions; may be null
  int64_t probe_length_ = 0;           // > 0: the size of every free dimension (inspect)
  std::string model_name_;
  std::vector<ModelInput> inputs_;
  int num_inputs_ = 1;            // K: tensor ids below it are model inputs
  std::vector<int> out_tensors_;  // per top-level output, which output of its node (empty: all 0)
  Json hint_;
  std::vector<PendingNode> nodes_;
  int frozen_depth_ = 0;
  std::vector<std::string> scopes_;  // names of the nested models being read
  std::vector<std::string> entry_names_, entry_classes_;
  std::set<std::string> names_;
  std::map<std::string, int> default_names_;
  // While a nested model is added again (a further call): the node its first call started at,
  // and where this call's nodes start (each new node shares the corresponding first one).
  int share_from_ = -1, share_start_ = 0;
};

}  // namespace

Json vocabulary_lines(const std::string& text) {
  Json lines = Json::array();
  size_t b = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n' && text[i] != '\r') continue;
    lines.push_back(text.substr(b, i - b));
    if (i + 1 < text.size() && text[i] == '\r' && text[i + 1] == '\n') ++i;
    b = i + 1;
  }
  // splitlines() gives no empty line after a final line end; Keras then drops trailing ''.
  while (!lines.empty() && lines.back() == "") lines.erase(lines.size() - 1);
  return lines;
}

std::string keras_snake_case(const std::string& class_name) {
  static const std::regex non_word("[^A-Za-z0-9_]+");
  static const std::regex camel1("(.)([A-Z][a-z]+)");
  static const std::regex camel2("([a-z])([A-Z])");
  std::string s = std::regex_replace(class_name, non_word, "");
  s = std::regex_replace(s, camel1, "$1_$2");
  s = std::regex_replace(s, camel2, "$1_$2");
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

KerasGraph build_keras_graph(const Json& model_config, const std::string& where,
                             const Shape* data_shape) {
  std::vector<ModelInput> shapes;
  if (data_shape) shapes.push_back({"", *data_shape});
  return build_keras_graph(model_config, where, data_shape ? &shapes : nullptr);
}

KerasGraph build_keras_graph(const Json& model_config, const std::string& where,
                             const std::vector<ModelInput>* data_shapes,
                             const KerasAssets* assets) {
  try {
    return Builder(where, data_shapes, assets).build(model_config);
  } catch (const Json::exception& e) {
    throw FileError("failed to read Keras model '" + where + "': malformed model config (" +
                    e.what() + ")");
  }
}

KerasGraph keras_graph_of(std::shared_ptr<const Model> model, bool functional) {
  KerasGraph g;
  const Model& m = *model;
  g.class_name = functional ? "Functional" : "Sequential";
  std::map<std::string, int> used;
  if (functional) used["input_layer"] = 0;  // Functional.layers starts with the input
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const Layer& l = m.layer(i);
    if (const int o = m.shares(i); o >= 0) {  // the same layer again: no group of its own
      g.weight_paths.push_back(g.weight_paths[static_cast<size_t>(o)]);
      g.weight_paths_by_name.push_back(g.weight_paths_by_name[static_cast<size_t>(o)]);
      continue;
    }
    g.weight_paths.push_back(keras3_weight_path(
        "layers/" + unique_key(used, keras_snake_case(l.class_name())), l.class_name()));
    g.weight_paths_by_name.push_back(keras3_weight_path("layers/" + l.name(), l.class_name()));
    if (m.shares(i) >= 0) continue;  // a further call: its weights are its owner's entry
    KerasGraph::Entry e{l.name(), l.class_name(), {}};
    const auto& specs = m.planned(i).params;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t j = 0; j < specs.size(); ++j)
        if (specs[j].trainable == (pass == 0)) e.weights.push_back({i, j});
    if (!e.weights.empty()) g.entries.push_back(std::move(e));
  }
  g.model = std::move(model);
  return g;
}

std::vector<std::vector<size_t>> param_offsets(const Model& m, size_t* total) {
  if (total) *total = m.trainable_params() + m.non_trainable_params();
  return param_layout(m);
}

std::vector<OptimizerVarRef> keras_optimizer_var_order(const std::vector<std::string>& slots,
                                                       size_t num_vars) {
  // Groups of slots created by one add_optimizer_variables call.
  std::vector<std::vector<size_t>> groups;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s] == "velocity" && s > 0 && slots[s - 1] == "momentum")
      groups.back().push_back(s);
    else
      groups.push_back({s});
  }
  std::vector<OptimizerVarRef> order;
  for (const auto& g : groups)
    for (size_t v = 0; v < num_vars; ++v)
      for (size_t s : g) order.push_back({s, v});
  return order;
}

}  // namespace nnfleet
