// Keras files -> LoadedModel. The layouts follow Keras's own saving code:
//  legacy h5: keras/src/legacy/saving/legacy_h5_format.py (tf.keras: hdf5_format.py), where
//    weights are matched to the model's layers in order (load_weights_from_hdf5_group);
//  .keras: keras/src/saving/saving_lib.py, where each layer's variables live at
//    <path>/vars/<i> with <path> built from snake_case class names (H5IOStore.get, including
//    its fallback to tf.keras 2.13's "_layer_checkpoint_dependencies" groups).
#include "io/keras/keras_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "core/limits.h"
#include "io/keras/hdf5.h"
#include "io/keras/keras_layout.h"
#include "io/keras/keras_writer.h"
#include "platform/file.h"
#include "platform/files.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using limits::kMaxJsonBytes;

// nnfleet runs small models: a config beyond these sizes is refused (it is most likely corrupt)
// before anything is allocated for it.
using limits::kMaxParams;
using limits::kMaxSampleFloats;

enum class Kind { kHdf5, kZip, kJson, kUnknown };

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw FileError("failed to read Keras model '" + where + "': " + what);
}

Kind sniff(const std::string& path) {
  std::string why;
  File file = File::open_regular(path, why);
  if (!file.is_open()) fail(path, why);
  char head[64] = {};
  size_t n = 0;
  if (!file.read_full(head, sizeof head, n)) n = 0;
  file.close();
  if (n >= 8 && std::memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0) return Kind::kHdf5;
  if (n >= 4 && head[0] == 'P' && head[1] == 'K' && (head[2] == 3 || head[2] == 5))
    return Kind::kZip;
  for (size_t i = 0; i < n; ++i) {
    const char c = head[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '{') return Kind::kJson;
    break;
  }
  // HDF5 allows a user block before the signature (512, 1024, ... bytes).
  auto lock = h5::hdf5_lock();
  if (H5Fis_hdf5(path.c_str()) > 0) return Kind::kHdf5;
  return Kind::kUnknown;
}

// Parses a config, refusing deep nesting while parsing (before any recursive copy or walk).
Json parse_json(const std::string& text, const std::string& where, const std::string& what) {
  try {
    return parse_json_bounded(text);
  } catch (const Json::exception& e) {
    fail(where, what + " is not valid JSON (" + e.what() + ")");
  } catch (const JsonTooDeep& e) {
    fail(where, what + " is " + e.what() + " (a corrupt or hostile file?)");
  }
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

bool same_shape(const std::vector<int64_t>& d, const Shape& s) {
  if (static_cast<int>(d.size()) != s.rank()) return false;
  for (int i = 0; i < s.rank(); ++i)
    if (d[static_cast<size_t>(i)] != s[i]) return false;
  return true;
}

std::string spec_names(const std::vector<std::pair<size_t, size_t>>& refs, const Model& m) {
  std::string s;
  for (const auto& [li, j] : refs) s += (s.empty() ? "" : ", ") + m.planned(li).params[j].name;
  return s;
}

void read_into(const h5::Dataset& ds, const Model& m, size_t li, size_t j, float* dst,
               const std::string& where) {
  const ParamSpec& spec = m.planned(li).params[j];
  const auto dims = ds.dims();
  if (!same_shape(dims, spec.shape))
    fail(where, "weight '" + spec.name + "' of layer '" + m.layer(li).name() + "' has shape " +
                    dims_str(dims) + " in the file ('" + ds.path() + "'); expected " +
                    spec.shape.str());
  ds.read_floats(dst, static_cast<size_t>(spec.shape.size()));
}

std::vector<std::string> list_attr_or_empty(const h5::Group& g, const std::string& name) {
  if (!g.has_attr(name) && !g.has_attr(name + "0")) return {};
  return g.string_list_attr(name);
}

// Zeroed parameters for `m`, after checking its sizes are plausible.
std::vector<float> zero_params(const Model& m, const std::string& where) {
  for (size_t k = 0; k < m.num_inputs(); ++k)
    if (m.input(k).shape.size() > kMaxSampleFloats)
      fail(where, "the model input " + m.input(k).shape.str() + " is implausibly large");
  for (size_t i = 0; i < m.num_layers(); ++i)
    if (m.planned(i).out_shape.size() > kMaxSampleFloats)
      fail(where, "layer '" + m.layer(i).name() + "' has an implausibly large output " +
                      m.planned(i).out_shape.str() + " (corrupt config?)");
  const size_t total = m.trainable_params() + m.non_trainable_params();
  if (total > kMaxParams)
    fail(where, "the model has " + std::to_string(total) + " parameters; expected at most " +
                    std::to_string(kMaxParams) + " (corrupt config?)");
  return std::vector<float>(total, 0.0f);
}

// Builds the model of a Keras config into `lm` (model, class name, zeroed parameters of the
// checked size) and returns the graph the weight readers need.
int major_version(const std::string& v);

// Keras 2 (and tf.keras) computed hard_sigmoid as clip(0.2 x + 0.5), Keras 3 as clip(x / 6 + 0.5):
// in a file older than Keras 3 the name means the old formula, which recurrent layers know as
// hard_sigmoid_keras2. Walks nested objects (Bidirectional's layer, nested models) within the
// bounded depth the config was parsed with.
void mark_keras2_hard_sigmoid(Json& j) {
  if (j.is_array()) {
    for (auto& e : j) mark_keras2_hard_sigmoid(e);
    return;
  }
  if (!j.is_object()) return;
  for (auto& [k, v] : j.items()) {
    if ((k == "activation" || k == "recurrent_activation") && v.is_string() &&
        v.get<std::string>() == "hard_sigmoid" && j.contains("units") &&
        (j.contains("recurrent_initializer") || j.contains("recurrent_activation")))
      v = "hard_sigmoid_keras2";
    else
      mark_keras2_hard_sigmoid(v);
  }
}

KerasGraph adopt_graph(LoadedModel& lm, const Json& cfg_in, const std::string& path,
                       const std::vector<ModelInput>* data_shapes,
                       const KerasAssets* assets = nullptr) {
  Json cfg = cfg_in;
  if (!lm.keras_version.empty() && major_version(lm.keras_version) < 3)
    mark_keras2_hard_sigmoid(cfg);
  KerasGraph graph = build_keras_graph(cfg, path, data_shapes, assets);
  lm.model = graph.model;
  lm.class_name = graph.class_name;
  lm.params = zero_params(*lm.model, path);
  return graph;
}

// Legacy layout: `g` has layer_names; each named group has weight_names, datasets at those paths.
void read_legacy(const h5::Group& g, const KerasGraph& graph, float* params,
                 const std::string& where) {
  const Model& m = *graph.model;
  const auto offsets = param_offsets(m, nullptr);
  const auto names = g.string_list_attr("layer_names");
  struct FileLayer {
    std::string name;
    std::vector<std::string> weights;
  };
  std::vector<FileLayer> file_layers;
  for (const auto& name : names) {
    if (!g.has_group(name)) g.fail("layer_names lists a missing group", name);
    auto w = list_attr_or_empty(g.group(name), "weight_names");
    if (!w.empty()) file_layers.push_back({name, std::move(w)});
  }
  if (g.has_group("top_level_model_weights") &&
      !list_attr_or_empty(g.group("top_level_model_weights"), "weight_names").empty())
    fail(where,
         "the file has model-level weights (top_level_model_weights); expected weights "
         "on layers only");
  if (file_layers.size() != graph.entries.size()) {
    std::string f, e;
    for (const auto& l : file_layers) f += (f.empty() ? "" : ", ") + l.name;
    for (const auto& l : graph.entries) e += (e.empty() ? "" : ", ") + l.name;
    fail(where, "the file has weights for " + std::to_string(file_layers.size()) + " layers (" + f +
                    "); the model has " + std::to_string(graph.entries.size()) +
                    " layers with weights (" + e + "); expected the same layers in the same order");
  }
  for (size_t k = 0; k < file_layers.size(); ++k) {
    const auto& entry = graph.entries[k];
    const auto& fl = file_layers[k];
    if (fl.weights.size() != entry.weights.size()) {
      std::string fw;
      for (const auto& w : fl.weights) fw += (fw.empty() ? "" : ", ") + w;
      fail(where, "layer #" + std::to_string(k) + " ('" + entry.name + "' (" + entry.class_name +
                      ") in the model, '" + fl.name + "' in the file) has " +
                      std::to_string(fl.weights.size()) + " weights in the file (" + fw +
                      "); expected " + std::to_string(entry.weights.size()) + " (" +
                      spec_names(entry.weights, m) + ")");
    }
    const h5::Group lg = g.group(fl.name);
    for (size_t w = 0; w < fl.weights.size(); ++w) {
      const auto [li, j] = entry.weights[w];
      read_into(lg.dataset(fl.weights[w]), m, li, j, params + offsets[li][j], where);
    }
  }
}

// Every group of a Keras 3 weights file by its path, with '\' read as '/' (files written on
// Windows) and, in `compat`, tf.keras 2.13's "_layer_checkpoint_dependencies" read as "layers".
class Keras3Index {
 public:
  explicit Keras3Index(const h5::Group& root) { visit(root, "", 0); }

  // The real path of the group at `path`, or "" when there is none.
  std::string find(const std::string& path) const {
    auto it = exact_.find(path);
    if (it != exact_.end()) return it->second;
    it = compat_.find(path);
    return it != compat_.end() ? it->second : std::string();
  }

 private:
  void visit(const h5::Group& g, const std::string& real, int depth) {
    if (depth > limits::kMaxWeightGroupDepth) return;
    for (const auto& child : g.children()) {
      if (++count_ > limits::kMaxWeightGroups) g.fail("implausibly many groups below");
      if (!g.has_group(child)) continue;
      const std::string r = real.empty() ? child : real + "/" + child;
      std::string norm = r;
      for (char& c : norm)
        if (c == '\\') c = '/';
      exact_.emplace(norm, r);
      std::string compat, part;
      for (size_t i = 0; i <= norm.size(); ++i) {
        if (i == norm.size() || norm[i] == '/') {
          if (part == "_layer_checkpoint_dependencies") part = "layers";
          compat += (compat.empty() ? "" : "/") + part;
          part.clear();
        } else {
          part += norm[i];
        }
      }
      compat_.emplace(compat, r);
      visit(g.group(child), r, depth + 1);
    }
  }
  std::map<std::string, std::string> exact_, compat_;
  size_t count_ = 0;
};

size_t count_datasets(const h5::Group& g) {
  size_t n = 0;
  for (const auto& c : g.children())
    if (g.has_dataset(c)) ++n;
  return n;
}

// One layer's weights: each parameter sits in the vars group keras_weight_places names
// (recurrent layers keep theirs one level down, in "cell"), counted group by group.
void read_keras3_layer(const h5::Group& root, const Keras3Index& index, const KerasGraph& graph,
                       size_t i, const std::vector<size_t>& offsets, float* params,
                       const std::string& where) {
  const Model& m = *graph.model;
  const Layer& layer = m.layer(i);
  const auto& specs = m.planned(i).params;
  const std::string who = "layer '" + layer.name() + "' (" + layer.class_name() + ")";
  const std::vector<KerasWeightPlace> places = keras_weight_places(layer, specs);
  std::map<std::string, std::vector<size_t>> groups;  // sub-group -> params stored there
  for (size_t j = 0; j < specs.size(); ++j) groups[places[j].group].push_back(j);
  for (const auto& [sub, members] : groups) {
    const std::string tail = (sub.empty() ? "" : "/" + sub) + "/vars";
    std::string real;
    for (const auto& cand : {graph.weight_paths[i], graph.weight_paths_by_name[i]}) {
      real = index.find(cand + tail);
      if (!real.empty()) break;
    }
    if (real.empty())
      fail(where,
           "no weights for " + who + "; expected the group '" + graph.weight_paths[i] + tail + "'");
    const h5::Group vars = root.group(real);
    const size_t n = count_datasets(vars);
    if (n != members.size()) {
      std::string names;
      for (size_t j : members) names += (names.empty() ? "" : ", ") + specs[j].name;
      fail(where, who + " has " + std::to_string(n) + " weights in the file ('" + real +
                      "'); expected " + std::to_string(members.size()) + " (" + names + ")");
    }
    for (size_t j : members) {
      const std::string ds = std::to_string(places[j].index);
      if (!vars.has_dataset(ds))
        fail(where, who + " has no weight '" + real + "/" + ds + "'; expected " + specs[j].name);
      read_into(vars.dataset(ds), m, i, j, params + offsets[j], where);
    }
  }
}

void read_keras3(const h5::Group& root, const Keras3Index& index, const KerasGraph& graph,
                 float* params, const std::string& where) {
  const Model& m = *graph.model;
  const auto offsets = param_offsets(m, nullptr);
  for (size_t i = 0; i < m.num_layers(); ++i)
    if (!m.planned(i).params.empty() && m.shares(i) < 0)  // a shared layer's weights: once
      read_keras3_layer(root, index, graph, i, offsets[i], params, where);
}

int major_version(const std::string& v) {
  int major = 0;
  for (char c : v) {
    if (c < '0' || c > '9') break;
    major = major * 10 + (c - '0');
  }
  return major;
}

// The optimizer variables of a Keras 3 file: described in optimizer_state_info and, when they
// match an optimizer nnfleet runs, restored in Network::optimizer_state() layout.
void read_keras3_optimizer(const h5::Group& root, const Keras3Index& index, LoadedModel& lm) {
  const std::string real = index.find("optimizer/vars");
  if (real.empty()) return;
  const h5::Group vars = root.group(real);
  const size_t n = count_datasets(vars);
  Json info = {{"variables", n}};
  if (vars.has_attr("name")) info["name"] = vars.string_attr("name");
  if (n > 0 && vars.has_dataset("0")) info["iterations"] = vars.dataset("0").read_int64();
  const Json opt =
      lm.training_config.is_object() ? lm.training_config.value("optimizer", Json()) : Json();
  if (opt.is_object() && opt.contains("class_name")) info["class_name"] = opt["class_name"];
  lm.optimizer_state_info = info;
  if (major_version(lm.keras_version) < 3 || opt.is_null()) return;
  OptimizerSpec spec;
  try {
    spec = parse_optimizer(opt);
  } catch (const Error&) {
    return;  // an optimizer nnfleet does not run: the weights still load
  }
  const Model& m = *lm.model;
  const auto offsets = param_offsets(m, nullptr);
  std::vector<std::pair<size_t, size_t>> vars_list;  // trainable (layer, spec) in Keras order
  const size_t n_trainable = m.trainable_params();
  for (size_t i = 0; i < m.num_layers(); ++i)
    for (size_t j = 0; j < m.planned(i).params.size(); ++j)
      if (m.planned(i).params[j].trainable && m.shares(i) < 0) vars_list.push_back({i, j});
  const auto slots = optimizer_state_slots(spec);
  const auto order = keras_optimizer_var_order(slots, vars_list.size());
  // vars: iterations, the rate when it is a number (not a schedule), then the slots.
  const size_t first_slot = spec.schedule ? 1 : 2;
  if (n != first_slot + order.size()) return;
  std::vector<float> state(optimizer_state_floats(spec, n_trainable), 0.0f);
  for (size_t k = 0; k < order.size(); ++k) {
    const auto [li, j] = vars_list[order[k].var];
    const h5::Dataset ds = vars.dataset(std::to_string(k + first_slot));
    if (!same_shape(ds.dims(), m.planned(li).params[j].shape)) return;
    ds.read_floats(state.data() + order[k].slot * n_trainable + offsets[li][j],
                   static_cast<size_t>(m.planned(li).params[j].shape.size()));
  }
  lm.optimizer = spec;
  lm.optimizer_state = std::move(state);
  lm.iterations = info.value("iterations", int64_t{0});
}

// Legacy optimizer_weights: only described (tf.keras 2 slot layouts differ by version).
Json legacy_optimizer_info(const h5::Group& root) {
  if (!root.has_group("optimizer_weights")) return Json();
  const h5::Group g = root.group("optimizer_weights");
  const auto names = list_attr_or_empty(g, "weight_names");
  Json info = {{"variables", names.size()}};
  for (const auto& n : names)
    if (n.find("iter") != std::string::npos && g.has_dataset(n)) {
      info["iterations"] = g.dataset(n).read_int64();
      info["name"] = n.substr(0, n.find('/'));
      break;
    }
  return info;
}

// Legacy optimizer_weights in the layout of tf.keras 2.11-2.15 (and of nnfleet's .h5 writer):
// restored in Network::optimizer_state() layout when the training config's optimizer is one
// nnfleet runs and the names match legacy_optimizer_vars exactly; older layouts (tf.keras <=
// 2.10 "Adam/iter:0", Keras 2.2 "training/Adam/Variable:0") stay described only.
void read_legacy_optimizer(const h5::Group& root, LoadedModel& lm) {
  if (!root.has_group("optimizer_weights") || !lm.training_config.is_object()) return;
  const Json opt = lm.training_config.value("optimizer_config", Json());
  if (!opt.is_object() || !opt.contains("class_name")) return;
  OptimizerSpec spec;
  try {
    spec = parse_optimizer(opt);
  } catch (const Error&) {
    return;
  }
  const h5::Group g = root.group("optimizer_weights");
  const auto names = list_attr_or_empty(g, "weight_names");
  const Model& m = *lm.model;
  const auto vars = legacy_optimizer_vars(m, spec);
  if (names.size() != vars.size() + 1 || names[0] != kLegacyIterationName ||
      !g.has_dataset(kLegacyIterationName))
    return;
  for (size_t k = 0; k < vars.size(); ++k)
    if (names[k + 1] != vars[k].name) return;
  const size_t n_trainable = m.trainable_params();
  const auto offsets = param_offsets(m, nullptr);
  std::vector<float> state(optimizer_state_floats(spec, n_trainable), 0.0f);
  for (const LegacyOptimizerVar& v : vars) {
    const auto& p = m.planned(v.layer).params[v.param];
    const h5::Dataset ds = g.dataset(v.name);
    if (!same_shape(ds.dims(), p.shape)) return;
    ds.read_floats(state.data() + v.slot * n_trainable + offsets[v.layer][v.param],
                   static_cast<size_t>(p.shape.size()));
  }
  lm.optimizer = spec;
  lm.optimizer_state = std::move(state);
  lm.iterations = g.dataset(kLegacyIterationName).read_int64();
}

// Dispatches on what the weights file holds (the caller holds the HDF5 lock).
void load_weights_from_root(const h5::Group& root, const KerasGraph& graph, float* params,
                            const std::string& where) {
  if (root.has_attr("layer_names") || root.has_attr("layer_names0")) {
    read_legacy(root, graph, params, where);
    return;
  }
  if (root.has_group("model_weights")) {
    read_legacy(root.group("model_weights"), graph, params, where);
    return;
  }
  Keras3Index index(root);
  bool keras3 = root.has_group("vars");
  for (const auto& c : root.children())
    if (c == "layers" || c.rfind("_layer_checkpoint_dependencies", 0) == 0) keras3 = true;
  if (!keras3)
    fail(where,
         "no weights found; expected layer_names (a legacy .h5) or a 'layers' group "
         "(a Keras 3 .weights.h5)");
  read_keras3(root, index, graph, params, where);
}

Json optional_json_attr(const h5::Group& root, const std::string& name) {
  if (!root.has_attr(name)) return Json();
  const std::string s = root.string_attr(name);
  try {
    return parse_json_bounded(s);
  } catch (const Json::exception&) {
    return Json(s);  // kept as text for inspection
  } catch (const JsonTooDeep&) {
    return Json(s);
  }
}

// The most bytes a weights member for `m` can need (limits.h says how the allowance is made).
uint64_t weights_member_bound(const Model& m) {
  const uint64_t params = m.trainable_params() + m.non_trainable_params();
  const uint64_t need = params * limits::kWeightsBytesPerParam +
                        uint64_t{m.num_layers()} * limits::kWeightsBytesPerLayer +
                        limits::kWeightsFixedBytes;
  return std::min(need, limits::kMaxWeightsBytes);
}

// The weights member of a .keras archive `z`, for the model its config describes: refused on its
// declared sizes, before anything is inflated, when it is larger than `m`'s parameters can need
// or compressed beyond any weights file (a zip bomb); read() stops inflating at that size.
std::string read_weights_member(const ZipReader& z, const std::string& path, const Model& m) {
  const char* member = "model.weights.h5";
  const ZipMemberInfo info = z.info(member);
  const uint64_t bound = weights_member_bound(m);
  const uint64_t params = m.trainable_params() + m.non_trainable_params();
  if (info.size > bound)
    fail(path, std::string(member) + " inflates to " + std::to_string(info.size) +
                   " bytes; expected at most " + std::to_string(bound) + " for the " +
                   std::to_string(params) + " parameters in " + std::to_string(m.num_layers()) +
                   " layer(s) of its config (a zip bomb, or the weights of another model?)");
  if (!info.stored && info.size > limits::kWeightsRatioFloorBytes &&
      info.size / std::max<uint64_t>(info.compressed_size, 1) > limits::kMaxWeightsRatio)
    fail(path, std::string(member) + " inflates from " + std::to_string(info.compressed_size) +
                   " to " + std::to_string(info.size) + " bytes; expected at most " +
                   std::to_string(limits::kMaxWeightsRatio) +
                   " times its compressed size (a zip bomb?)");
  return z.read(member, bound);
}

LoadedModel load_h5(const std::string& path, const std::string& weights_path,
                    const std::vector<ModelInput>* data_shapes) {
  auto lock = h5::hdf5_lock();
  h5::File f = h5::File::open(path);
  const h5::Group& root = f.root();
  if (!root.has_attr("model_config")) {
    if (root.has_attr("layer_names") || root.has_attr("layer_names0") || root.has_group("layers"))
      fail(path,
           "this is a weights-only file (model.save_weights) with no model_config; expected "
           "a full model file, or give this file with --weights next to the architecture "
           "(a to_json() .json or another model file)");
    fail(path, "no model_config attribute; expected a Keras model saved with model.save()");
  }
  LoadedModel lm;
  lm.format = "h5";
  const Json cfg = parse_json(root.string_attr("model_config"), path, "model_config");
  if (root.has_attr("keras_version")) lm.keras_version = root.string_attr("keras_version");
  if (root.has_attr("backend")) lm.backend = root.string_attr("backend");
  lm.training_config = optional_json_attr(root, "training_config");
  const KerasGraph graph = adopt_graph(lm, cfg, path, data_shapes);
  if (weights_path.empty()) {
    if (!root.has_group("model_weights"))
      fail(path, "no model_weights group; expected the weights saved with the model");
    read_legacy(root.group("model_weights"), graph, lm.params.data(), path);
    lm.optimizer_state_info = legacy_optimizer_info(root);
    read_legacy_optimizer(root, lm);
  } else {
    load_weights_file(weights_path, graph, lm.params.data());
  }
  lm.has_weights = true;
  return lm;
}

// The vocabulary.txt members under assets/ (what the lookup layers save there), each at most
// kMaxJsonBytes.
KerasAssets read_assets(const ZipReader& z) {
  KerasAssets assets;
  const std::string suffix = "/vocabulary.txt";
  for (const std::string& n : z.names())
    if (n.rfind("assets/", 0) == 0 && n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      assets[n] = z.read(n, kMaxJsonBytes);
  return assets;
}

LoadedModel load_zip(const std::string& path, const std::string& weights_path,
                     const std::vector<ModelInput>* data_shapes) {
  ZipReader z(path);
  if (!z.has("config.json"))
    fail(path,
         "no config.json in the archive; expected a .keras file (config.json, "
         "metadata.json, model.weights.h5)");
  LoadedModel lm;
  lm.format = "keras";
  const Json cfg = parse_json(z.read("config.json", kMaxJsonBytes), path, "config.json");
  if (z.has("metadata.json")) {
    const Json meta = parse_json(z.read("metadata.json", kMaxJsonBytes), path, "metadata.json");
    if (meta.is_object() && meta.contains("keras_version") && meta["keras_version"].is_string())
      lm.keras_version = meta["keras_version"].get<std::string>();
  }
  if (cfg.is_object() && cfg.contains("compile_config")) lm.training_config = cfg["compile_config"];
  const KerasAssets assets = read_assets(z);
  const KerasGraph graph = adopt_graph(lm, cfg, path, data_shapes, &assets);
  if (!weights_path.empty()) {
    load_weights_file(weights_path, graph, lm.params.data());
    lm.has_weights = true;
    return lm;
  }
  if (!z.has("model.weights.h5")) {
    if (z.has("model.weights.npz"))
      fail(path,
           "the weights are stored as model.weights.npz; expected model.weights.h5 (save "
           "with Keras's default weights format)");
    fail(path, "no model.weights.h5 in the archive");
  }
  const std::string bytes = read_weights_member(z, path, *graph.model);
  auto lock = h5::hdf5_lock();
  h5::File f = h5::File::open_image(path + ":model.weights.h5", bytes);
  Keras3Index index(f.root());
  read_keras3(f.root(), index, graph, lm.params.data(), path);
  read_keras3_optimizer(f.root(), index, lm);
  lm.has_weights = true;
  return lm;
}

LoadedModel load_json(const std::string& path, const std::string& weights_path,
                      const std::vector<ModelInput>* data_shapes) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) fail(path, "cannot read it");
  if (text.size() > kMaxJsonBytes) fail(path, "the file is too large for a model architecture");
  const Json cfg = parse_json(text, path, "the file");
  LoadedModel lm;
  lm.format = "json";
  if (cfg.is_object()) {
    if (cfg.contains("keras_version") && cfg["keras_version"].is_string())
      lm.keras_version = cfg["keras_version"].get<std::string>();
    if (cfg.contains("backend") && cfg["backend"].is_string())
      lm.backend = cfg["backend"].get<std::string>();
    if (cfg.contains("compile_config")) lm.training_config = cfg["compile_config"];
  }
  const KerasGraph graph = adopt_graph(lm, cfg, path, data_shapes);
  if (!weights_path.empty()) {
    load_weights_file(weights_path, graph, lm.params.data());
    lm.has_weights = true;
  }
  return lm;
}

}  // namespace

LoadedModel load_keras_model(const std::string& path, const std::string& weights_path,
                             const Shape* data_shape) {
  std::vector<ModelInput> shapes;
  if (data_shape) shapes.push_back({"", *data_shape});
  return load_keras_model(path, weights_path, shapes);
}

LoadedModel load_keras_model(const std::string& path, const std::string& weights_path,
                             const std::vector<ModelInput>& data_shapes_given) {
  const std::vector<ModelInput>* data_shapes =
      data_shapes_given.empty() ? nullptr : &data_shapes_given;
  switch (sniff(path)) {
    case Kind::kHdf5:
      return load_h5(path, weights_path, data_shapes);
    case Kind::kZip:
      return load_zip(path, weights_path, data_shapes);
    case Kind::kJson:
      return load_json(path, weights_path, data_shapes);
    case Kind::kUnknown:
      break;
  }
  fail(path,
       "not a Keras model file; expected an HDF5 .h5, a .keras zip archive or a "
       "to_json() .json architecture");
}

void load_weights_file(const std::string& path, const KerasGraph& graph, float* params) {
  const Kind kind = sniff(path);
  if (kind == Kind::kZip) {
    ZipReader z(path);
    if (!z.has("model.weights.h5")) fail(path, "no model.weights.h5 in the archive");
    const std::string bytes = read_weights_member(z, path, *graph.model);
    auto lock = h5::hdf5_lock();
    h5::File f = h5::File::open_image(path + ":model.weights.h5", bytes);
    load_weights_from_root(f.root(), graph, params, path);
    return;
  }
  if (kind != Kind::kHdf5)
    fail(path, "not a weights file; expected an HDF5 .h5 (model.save_weights) or a .keras archive");
  auto lock = h5::hdf5_lock();
  h5::File f = h5::File::open(path);
  load_weights_from_root(f.root(), graph, params, path);
}

void load_weights_h5(const std::string& path, const Model& m, float* params) {
  // A non-owning pointer: the graph does not outlive this call.
  const KerasGraph graph =
      keras_graph_of(std::shared_ptr<const Model>(&m, [](const Model*) {}), !m.is_sequential());
  load_weights_file(path, graph, params);
}

}  // namespace nnfleet
