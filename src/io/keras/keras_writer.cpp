// Model -> .keras (Keras 3.10 layout) and legacy .h5 (tf.keras 2.x layout). Each structure was
// checked group by group against files Keras wrote (the shared real set, ../shared/keras-models):
// fmnist_cnn_k310.keras for .keras, mnist_cnn_raw_k224.h5 and asl_cnn_functional_tf290.h5 for .h5.
#include "io/keras/keras_writer.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <utility>

#include "io/keras/h5_builder.h"
#include "io/keras/hdf5.h"
#include "io/keras/keras_graph.h"
#include "io/keras/keras_layout.h"
#include "io/keras/keras_reader.h"
#include "io/keras/keras_tf_ops.h"
#include "layers/string_layer.h"
#include "platform/files.h"
#include "platform/zip_archive.h"

namespace nnfleet {
namespace {

using OJson = nlohmann::ordered_json;

// Keras splits attributes larger than this (HDF5's object header limit) into name0, name1, ...
constexpr size_t kHdf5ObjectHeaderLimit = 64512;

// The same value with its keys kept in the order they have (Json's sorted order), converted
// directly rather than through text.
OJson ordered(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: {
      OJson o = OJson::object();
      for (auto it = j.begin(); it != j.end(); ++it) o.emplace(it.key(), ordered(it.value()));
      return o;
    }
    case Json::value_t::array: {
      OJson a = OJson::array();
      for (const Json& e : j) a.push_back(ordered(e));
      return a;
    }
    case Json::value_t::string:
      return j.get_ref<const std::string&>();
    case Json::value_t::boolean:
      return j.get<bool>();
    case Json::value_t::number_integer:
      return j.get<int64_t>();
    case Json::value_t::number_unsigned:
      return j.get<uint64_t>();
    case Json::value_t::number_float:
      return j.get<double>();
    default:
      return nullptr;
  }
}

OJson batch_shape(const Shape& s) {
  OJson a = OJson::array({nullptr});
  for (int64_t d : s) a.push_back(d);
  return a;
}

// MultiHeadAttention keeps Keras's call arguments use_causal_mask and return_attention_scores in
// its config (keras_graph.cpp folds them in): the writers take them out of the config and pass
// them in the call, where Keras reads them. Returns them ({} for other layers).
OJson take_attention_call(const Layer& l, Json& config) {
  OJson kwargs = OJson::object();
  const std::string cls = l.class_name();
  if (cls != "MultiHeadAttention" && cls != "Attention" && cls != "AdditiveAttention")
    return kwargs;
  for (const char* k : {"use_causal_mask", "return_attention_scores"})
    if (config.contains(k)) {
      kwargs[k] = config[k].get<bool>();
      config.erase(k);
    }
  config.erase("attention_mask");  // the fourth input; the callers pass it as the tensor
  return kwargs;
}
bool is_attention_layer(const Layer& l) {
  return std::string(l.class_name()) == "MultiHeadAttention";
}
// Attention and AdditiveAttention: called on the list [query, value(, key)].
bool is_list_attention_layer(const Layer& l) {
  const std::string cls = l.class_name();
  return cls == "Attention" || cls == "AdditiveAttention";
}

// Keras 3 records build_config only for layers with their own build() (they create weights or
// check shapes there); Flatten gets one as well in files Keras 3.9/3.10 wrote.
bool has_build_config(const std::string& cls) {
  static const char* const kBuilt[] = {"Dense",
                                       "Conv2D",
                                       "DepthwiseConv2D",
                                       "BatchNormalization",
                                       "Reshape",
                                       "Flatten",
                                       "Add",
                                       "Concatenate",
                                       "Conv1D",
                                       "Embedding",
                                       "TimeDistributed",
                                       "Conv2DTranspose",
                                       "SeparableConv2D",
                                       "SimpleRNN",
                                       "LSTM",
                                       "GRU",
                                       "LayerNormalization",
                                       "PReLU",
                                       "Multiply",
                                       "Subtract",
                                       "Average",
                                       "Maximum",
                                       "Minimum",
                                       "Dot",
                                       "MultiHeadAttention",
                                       "Attention",
                                       "AdditiveAttention"};
  for (const char* c : kBuilt)
    if (cls == c) return true;
  return false;
}

// "hard_sigmoid" means 0.2 x + 0.5 in files older than Keras 3 and x / 6 + 0.5 in Keras 3 files
// (recurrent layers call the old one hard_sigmoid_keras2, see keras_reader.cpp): each is written
// under its name in the format that has it, and refused in the one that does not.
template <typename J>
void name_hard_sigmoid(J& c, bool keras3, const Layer& l) {
  if (c.is_array()) {
    for (auto& e : c) name_hard_sigmoid(e, keras3, l);
    return;
  }
  if (!c.is_object()) return;
  const bool recurrent = c.contains("units") && c.contains("recurrent_initializer");
  for (auto& [k, v] : c.items()) {
    if (!recurrent || (k != "activation" && k != "recurrent_activation") || !v.is_string()) {
      name_hard_sigmoid(v, keras3, l);
      continue;
    }
    const std::string a = v.template get<std::string>();
    if (a == "hard_sigmoid_keras2" && !keras3) v = "hard_sigmoid";
    if ((a == "hard_sigmoid_keras2" && keras3) || (a == "hard_sigmoid" && !keras3))
      throw FileError("failed to write Keras file: layer '" + l.name() + "' uses " +
                      (keras3 ? "Keras 2's hard_sigmoid (0.2 x + 0.5)"
                              : "Keras 3's hard_sigmoid (x / 6 + 0.5)") +
                      " as its " + k + ", which the " + (keras3 ? ".keras" : "legacy .h5") +
                      " format cannot name; expected the " + (keras3 ? "legacy .h5" : ".keras") +
                      " format for this model");
  }
}

// tf.keras 2's LeakyReLU takes `alpha` where Keras 3 writes `negative_slope` (Keras 3 reads
// both): in a legacy file the layer, and an activation given as a LeakyReLU object, use alpha.
void legacy_leaky_relu_keys(OJson& c, bool is_leaky_relu) {
  if (is_leaky_relu && c.contains("negative_slope")) {
    c["alpha"] = c["negative_slope"];
    c.erase("negative_slope");
  }
  for (auto& [k, v] : c.items())
    if (v.is_object() && v.value("class_name", "") == "LeakyReLU" && v.contains("config") &&
        v["config"].is_object())
      legacy_leaky_relu_keys(v["config"], true);
}

// Layer i's config in a legacy .h5 file, with name, trainable and dtype first.
// A layer whose Keras config has no trainable (Keras 3's SpatialDropout) gets none.
OJson legacy_layer_config(const Model& m, size_t i) {
  const Layer& l = m.layer(i);
  const Json src = m.layer_keras_config(i);
  Json src_rest = src;
  take_attention_call(l, src_rest);
  OJson c;
  c["name"] = l.name();
  if (src.contains("trainable")) c["trainable"] = src["trainable"].get<bool>();
  c["dtype"] = "float32";
  for (auto it = src_rest.begin(); it != src_rest.end(); ++it)
    if (it.key() != "name" && it.key() != "trainable" && it.key() != "dtype")
      c[it.key()] = ordered(it.value());
  name_hard_sigmoid(c, false, l);
  legacy_leaky_relu_keys(c, std::string(l.class_name()) == "LeakyReLU");
  return c;
}

// The dtype Keras 3 writes into every layer config, as text.
const std::string& keras3_dtype_text() {
  static const std::string t = OJson{
      {"module", "keras"},
      {"class_name", "DTypePolicy"},
      {"config", {{"name", "float32"}}},
      {"registered_name", nullptr}}.dump();
  return t;
}

// The vocabulary.txt a layer saves in a .keras file's assets ("" when it has none): its terms,
// special tokens first, joined by "\n" as Keras's save_assets writes them.
std::string vocabulary_asset(const Layer& l) {
  const auto* sl = dynamic_cast<const StringLayer*>(&l);
  if (!sl) return {};
  std::string t;
  const std::vector<std::string> v = sl->full_vocabulary();
  for (size_t i = 0; i < v.size(); ++i) t += (i ? "\n" : "") + v[i];
  return t;
}

// The assets members of a .keras file: per layer with a vocabulary, at its Keras 3 path (and
// again under _lookup_layer/ for TextVectorization, whose inner StringLookup Keras saves too).
std::vector<ZipMember> asset_members(const Model& m) {
  std::vector<ZipMember> out;
  std::map<std::string, int> used;
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const Layer& l = m.layer(i);
    const std::string snake = keras_snake_case(l.class_name());
    const int n = used[snake]++;
    const std::string text = vocabulary_asset(l);
    if (text.empty()) continue;
    const std::string dir = "assets/layers/" + (n ? snake + "_" + std::to_string(n) : snake) + "/";
    out.push_back({dir + "vocabulary.txt", text, ""});
    if (std::string(l.class_name()) == "TextVectorization")
      out.push_back({dir + "_lookup_layer/vocabulary.txt", text, ""});
  }
  return out;
}

// Layer i's config in a .keras file, as text, without an ordered copy: Keras 3's config lists
// name, trainable and dtype first, then the layer's keys in the sorted order Json keeps them in,
// so the layer's own config is dumped as it is behind those three.
std::string keras3_layer_config_text(const Model& m, size_t i) {
  const Layer& l = m.layer(i);
  Json src = m.layer_keras_config(i);
  std::string t = "{\"name\":" + Json(l.name()).dump();
  if (src.contains("trainable"))
    t += std::string(",\"trainable\":") + (src["trainable"].get<bool>() ? "true" : "false");
  t += ",\"dtype\":" + keras3_dtype_text();
  for (const char* k : {"name", "trainable", "dtype"}) src.erase(k);
  take_attention_call(l, src);
  name_hard_sigmoid(src, true, l);
  if (!vocabulary_asset(l).empty()) src["vocabulary"] = nullptr;  // in the assets instead
  const std::string rest = src.dump();
  if (rest.size() > 2)
    t += "," + rest.substr(1);
  else
    t += "}";
  return t;
}

// Input k's batch shape as Keras sees it: a string input's is its strings' shape.
OJson input_batch_shape(const Model& m, size_t k) {
  const ModelInput& in = m.input(k);
  return batch_shape(in.is_string ? in.string_shape : in.shape);
}

OJson input_layer_config(const Model& m, size_t k, bool keras3) {
  OJson c;
  c[keras3 ? "batch_shape" : "batch_input_shape"] = input_batch_shape(m, k);
  c["dtype"] = m.input(k).is_string ? "string" : "float32";
  c["sparse"] = false;
  c["ragged"] = false;
  c["name"] = m.input(k).name;
  return c;
}

// Name of the node with id `id` (a model input or a layer; m.node_shape(id, k) gives the shape
// of its output k).
std::string tensor_name(const Model& m, int id) { return m.node_name(id); }
// Keras's node index of that tensor: which call of its (shared) layer made it.
int tensor_node(const Model& m, int id) {
  return m.is_input(id) ? 0 : m.call_index(m.layer_of(id));
}
// The nodes of layer i's calls: i itself and each further call sharing its weights (Keras writes
// one entry per layer, with an inbound node per call).
std::vector<size_t> calls_of(const Model& m, size_t i) {
  std::vector<size_t> v{i};
  for (size_t c = i + 1; c < m.num_layers(); ++c)
    if (m.shares(c) == static_cast<int>(i)) v.push_back(c);
  return v;
}

// Whether layer i is called with initial states (inputs after its arity(): Keras's
// initial_state, which Keras 3 passes as a keyword argument and Keras 2 as further tensors).
bool has_initial_state(const Model& m, size_t i) {
  const Layer& l = m.layer(i);
  return l.optional_inputs() > 0 && l.arity() > 0 && !is_attention_layer(l) &&
         !is_list_attention_layer(l) && m.layer_inputs(i).size() > static_cast<size_t>(l.arity());
}

// A Functional config's input_layers and output_layers: [["name", 0, 0], ...].
OJson input_refs(const Model& m) {
  OJson a = OJson::array();
  for (size_t k = 0; k < m.num_inputs(); ++k) a.push_back({m.input(k).name, 0, 0});
  return a;
}
OJson output_refs(const Model& m) {
  OJson a = OJson::array();
  for (size_t j = 0; j < m.num_outputs(); ++j)
    a.push_back(
        {m.node_name(m.output_node(j)), tensor_node(m, m.output_node(j)), m.output_tensor(j)});
  return a;
}

// Keras 3's key of input k's group in model.weights.h5 (input_layer, input_layer_1, ...).
std::string input_layer_key(size_t k) {
  return k == 0 ? std::string("input_layer") : "input_layer_" + std::to_string(k);
}

// Keras 3's entry for input k.
OJson keras3_input_entry(const Model& m, size_t k, bool functional) {
  OJson in{{"module", "keras.layers"},
           {"class_name", "InputLayer"},
           {"config", input_layer_config(m, k, true)},
           {"registered_name", nullptr}};
  if (functional) {
    in["name"] = m.input(k).name;
    in["inbound_nodes"] = OJson::array();
  }
  return in;
}

// Keras 3's build_config of layer i (null: the layer has none).
OJson keras3_build_config(const Model& m, size_t i) {
  const Layer& l = m.layer(i);
  if (!has_build_config(l.class_name())) return nullptr;
  const auto& ins = m.layer_inputs(i);
  if (is_attention_layer(l)) {
    // build(query_shape, value_shape, key_shape=None), by name.
    OJson shapes = OJson::object();
    const char* const names[] = {"query_shape", "value_shape", "key_shape"};
    for (size_t j = 0; j < ins.size() && j < 3; ++j)
      shapes[names[j]] = batch_shape(m.node_shape(ins[j], m.input_tensor(i, j)));
    return {{"shapes_dict", shapes}};
  }
  if (has_initial_state(m, i)) {
    // Keras 3 records build()'s arguments by name when there are several.
    OJson states = OJson::array();
    for (size_t j = 1; j < ins.size(); ++j)
      states.push_back(batch_shape(m.node_shape(ins[j], m.input_tensor(i, j))));
    return {{"shapes_dict",
             {{"sequences_shape", batch_shape(m.node_shape(ins[0], m.input_tensor(i, 0)))},
              {"initial_state_shape", states}}}};
  }
  if (ins.size() == 1)
    return {{"input_shape", batch_shape(m.node_shape(ins[0], m.input_tensor(i, 0)))}};
  OJson shapes = OJson::array();
  for (size_t j = 0; j < ins.size(); ++j)
    shapes.push_back(batch_shape(m.node_shape(ins[j], m.input_tensor(i, j))));
  return {{"input_shape", shapes}};
}

// Keras 3's inbound node of node i's call in a Functional config.
OJson keras3_inbound_node(const Model& m, size_t i) {
  const Layer& l = m.layer(i);
  const auto& ins = m.layer_inputs(i);
  OJson tensors = OJson::array();
  for (size_t j = 0; j < ins.size(); ++j) {
    const int id = ins[j], k = m.input_tensor(i, j);
    const bool text = m.is_input(id) && m.input(static_cast<size_t>(id)).is_string;
    tensors.push_back({{"class_name", "__keras_tensor__"},
                       {"config",
                        {{"shape", text ? input_batch_shape(m, static_cast<size_t>(id))
                                        : batch_shape(m.node_shape(id, k))},
                         {"dtype", text ? "string" : "float32"},
                         {"keras_history", {tensor_name(m, id), tensor_node(m, id), k}}}}});
  }
  OJson args = l.arity() == 0 ? OJson::array({tensors}) : tensors;
  OJson kwargs = OJson::object();
  if (is_attention_layer(l)) {  // call(query, value, key=None, ...)
    Json config = l.keras_config();
    kwargs = take_attention_call(l, config);
    args = OJson::array({tensors[0], tensors[1]});
    if (tensors.size() > 2) kwargs["key"] = tensors[2];
    if (tensors.size() > 3) kwargs["attention_mask"] = tensors[3];
  }
  if (is_list_attention_layer(l)) {  // call([query, value, key], ...)
    Json config = l.keras_config();
    kwargs = take_attention_call(l, config);
    args = OJson::array({tensors});
  }
  if (has_initial_state(m, i)) {
    OJson states = OJson::array();
    for (size_t j = 1; j < tensors.size(); ++j) states.push_back(tensors[j]);
    args = OJson::array({tensors[0]});
    kwargs["initial_state"] = states;
  }
  return {{"args", args}, {"kwargs", kwargs}};
}

// Keras 3's inbound_nodes of layer i: one per call.
OJson keras3_inbound_nodes(const Model& m, size_t i) {
  OJson nodes = OJson::array();
  for (size_t c : calls_of(m, i)) nodes.push_back(keras3_inbound_node(m, c));
  return nodes;
}

// Keras 3's "layers" list, as text: the inputs, then each layer's entry with the keys module,
// class_name, config, registered_name, build_config (when it has one), name and inbound_nodes
// (Functional only).
std::string keras3_layers_text(const Model& m, bool functional) {
  std::string t = "[";
  for (size_t k = 0; k < m.num_inputs(); ++k) {
    if (k) t += ",";
    t += keras3_input_entry(m, k, functional).dump();
  }
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (m.shares(i) >= 0) continue;  // written with its layer's first call
    const Layer& l = m.layer(i);
    if (i || m.num_inputs()) t += ",";
    if (is_tf_op_layer(l)) {  // as a Keras 3 operation (keras.ops), which Keras 3 can load
      t += tf_op_keras3_entry(m, i).dump();
      continue;
    }
    t += "{\"module\":\"keras.layers\",\"class_name\":" + Json(l.class_name()).dump();
    t += ",\"config\":" + keras3_layer_config_text(m, i) + ",\"registered_name\":null";
    const OJson build = keras3_build_config(m, i);
    if (!build.is_null()) t += ",\"build_config\":" + build.dump();
    if (functional) {
      t += ",\"name\":" + Json(l.name()).dump();
      t += ",\"inbound_nodes\":" + keras3_inbound_nodes(m, i).dump();
    }
    t += "}";
  }
  return t + "]";
}

bool compiled(const KerasSaveInfo& info) { return info.loss && info.optimizer; }

bool functional(const Model& m, const KerasSaveInfo& info) {
  if (!m.is_sequential()) return true;  // a DAG can only be written as Functional
  // A TensorFlow operation's arguments live in its node, which only a Functional config has.
  for (size_t i = 0; i < m.num_layers(); ++i)
    if (is_tf_op_layer(m.layer(i))) return true;
  return info.keras_class == "Functional" || info.keras_class == "Model";
}

OJson metrics_json(const KerasSaveInfo& info) {
  if (!info.metrics_config.is_null()) return ordered(info.metrics_config);
  if (info.metrics.empty()) return nullptr;
  OJson a = OJson::array();
  for (const auto& m : info.metrics) a.push_back(m);
  return a;
}

// The loss of compile_config: one serialized loss, or a list of them in output order.
OJson keras3_loss(const KerasSaveInfo& info) {
  if (info.outputs.empty()) return ordered(loss_to_keras(*info.loss));
  OJson a = OJson::array();
  for (const auto& o : info.outputs) a.push_back(ordered(loss_to_keras(o.loss)));
  return a;
}

OJson loss_weights_json(const KerasSaveInfo& info) {
  if (info.outputs.empty()) return nullptr;
  OJson a = OJson::array();
  for (const auto& o : info.outputs) a.push_back(o.weight);
  return a;
}

OJson compile_config(const KerasSaveInfo& info) {
  return {{"optimizer",
           {{"module", "keras.optimizers"},
            {"class_name", optimizer_class(info.optimizer->kind)},
            {"config", ordered(optimizer_keras_config(*info.optimizer))},
            {"registered_name", nullptr}}},
          {"loss", keras3_loss(info)},
          {"loss_weights", loss_weights_json(info)},
          {"metrics", metrics_json(info)},
          {"weighted_metrics", nullptr},
          {"run_eagerly", false},
          {"steps_per_execution", 1},
          {"jit_compile", false}};
}

// config.json of a .keras archive, as Keras 3.10 writes it (key order included), made as text
// around the parts' own dumps rather than as one ordered tree: a tiny model's whole save took
// 138-173 us so against 189-228 us (2,000 saves to tmpfs, three times, Zen 3).
std::string config_json_text(const Model& m, const KerasSaveInfo& info) {
  const std::string name = Json(m.name()).dump();
  std::string t;
  if (functional(m, info)) {
    t = "{\"module\":\"keras.src.models.functional\",\"class_name\":\"Functional\","
        "\"config\":{\"name\":" +
        name + ",\"trainable\":true,\"layers\":" + keras3_layers_text(m, true) +
        ",\"input_layers\":" + input_refs(m).dump() +
        ",\"output_layers\":" + output_refs(m).dump() + "},\"registered_name\":\"Functional\"";
  } else {
    const std::string shape = input_batch_shape(m, 0).dump();
    t = "{\"module\":\"keras\",\"class_name\":\"Sequential\",\"config\":{\"name\":" + name +
        ",\"trainable\":true,\"dtype\":" + keras3_dtype_text() +
        ",\"layers\":" + keras3_layers_text(m, false) + ",\"build_input_shape\":" + shape +
        "},\"registered_name\":null,\"build_config\":{\"input_shape\":" + shape + "}";
  }
  if (compiled(info)) t += ",\"compile_config\":" + compile_config(info).dump();
  return t + "}";
}

std::vector<int64_t> dims_of(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// Opens base/path, creating the groups along it that are missing (an h5::Group or a
// h5::Builder::Node).
template <typename G>
G open_or_create(G& base, const std::string& path) {
  std::string sofar;
  for (size_t a = 0;;) {
    const size_t b = path.find('/', a);
    const std::string part = path.substr(a, b == std::string::npos ? std::string::npos : b - a);
    const std::string next = sofar.empty() ? part : sofar + "/" + part;
    if (!base.has_group(next)) {
      if (sofar.empty())
        base.create_group(part);
      else
        base.group(sofar).create_group(part);
    }
    sofar = next;
    if (b == std::string::npos) break;
    a = b + 1;
  }
  return base.group(path);
}

// Keras 3's groups for one layer: the layer's own vars (named after the layer), and each
// sub-group of keras_weight_places with its vars (a recurrent cell's named after the cell,
// e.g. gru_cell, as Keras names the cell object).
void write_keras3_layer(h5::Builder::Node lg, const Model& m, size_t i, const float* params,
                        const std::vector<size_t>& offsets, const NumbersCopied& copied) {
  const Layer& l = m.layer(i);
  const auto& specs = m.planned(i).params;
  lg.create_group("vars").write_string_attr("name", l.name(), h5::StrType::kVlenUtf8);
  const std::vector<KerasWeightPlace> places = keras_weight_places(l, specs);
  for (size_t j = 0; j < specs.size(); ++j) {
    const KerasWeightPlace& where = places[j];
    const std::string vpath = where.group.empty() ? "vars" : where.group + "/vars";
    if (!lg.has_group(vpath)) {
      h5::Builder::Node v = open_or_create(lg, vpath);
      const std::string& legacy = where.legacy_name;
      const size_t slash = legacy.rfind('/');
      v.write_string_attr("name", slash == std::string::npos ? l.name() : legacy.substr(0, slash),
                          h5::StrType::kVlenUtf8);
    }
    if (where.int64_scalar)
      lg.group(vpath).write_int64_scalar(std::to_string(where.index),
                                         std::llround(params[offsets[j]]));
    else
      lg.group(vpath).write_floats(std::to_string(where.index), dims_of(specs[j].shape),
                                   params + offsets[j]);
    if (copied) copied(params + offsets[j], static_cast<size_t>(specs[j].shape.size()));
  }
}

std::string now_string() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d@%H:%M:%S", &tm);
  return buf;
}

// The model.weights.h5 of a .keras file; `where` names the .keras in messages.
std::string keras3_weights(const Model& m, const float* params, const KerasSaveInfo& info,
                           const std::string& where, const NumbersCopied& copied) {
  size_t total = 0;
  const auto offsets = param_offsets(m, &total);
  const size_t slots = info.optimizer ? optimizer_state_slots(*info.optimizer).size() : 0;
  // Made by a Builder: the models of one architecture share everything but their numbers.
  h5::Builder f(where + ":model.weights.h5", 4 * total * (1 + slots) + 1024 * m.num_layers());
  h5::Builder::Node root = f.root();
  // The model's own (empty) variable group, named after the model.
  root.create_group("vars").write_varying_string_attr("name", m.name(), h5::StrType::kVlenUtf8);
  h5::Builder::Node layers = root.create_group("layers");
  const bool fn = functional(m, info);
  const KerasGraph g = keras_graph_of(std::shared_ptr<const Model>(&m, [](const Model*) {}), fn);
  if (fn) {
    // Functional.layers starts with the InputLayers, which get (variable-less) groups.
    for (size_t k = 0; k < m.num_inputs(); ++k) {
      h5::Builder::Node v = layers.create_group(input_layer_key(k)).create_group("vars");
      v.write_string_attr("name", m.input(k).name, h5::StrType::kVlenUtf8);
    }
  }
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (is_tf_op_layer(m.layer(i))) continue;  // an operation, not one of model.layers
    if (m.shares(i) >= 0) continue;            // a shared layer's weights: stored once
    const std::string key = g.weight_paths[i].substr(std::string("layers/").size());
    // A wrapper's weights live with its wrapped layer (time_distributed/layer/vars); the wrapper
    // keeps an empty vars group of its own, as Keras writes it.
    const size_t slash = key.find('/');
    h5::Builder::Node group = layers.create_group(key.substr(0, slash));
    if (slash != std::string::npos) {
      group.create_group("vars").write_string_attr("name", m.layer(i).name(),
                                                   h5::StrType::kVlenUtf8);
      group = group.create_group(key.substr(slash + 1));
    }
    write_keras3_layer(std::move(group), m, i, params, offsets[i], copied);
  }
  if (compiled(info) && info.optimizer_state) {
    const OptimizerSpec& spec = *info.optimizer;
    const Json ocfg = optimizer_keras_config(spec);
    h5::Builder::Node v = root.create_group("optimizer").create_group("vars");
    v.write_string_attr("name", ocfg.value("name", std::string("optimizer")),
                        h5::StrType::kVlenUtf8);
    v.write_int64_scalar("0", info.iterations);
    // Keras 3 keeps the rate as a variable only when it is a number, not a schedule.
    const size_t first_slot = spec.schedule ? 1 : 2;
    if (!spec.schedule) {
      const float lr = static_cast<float>(spec.learning_rate);
      v.write_floats("1", {}, &lr);
    }
    std::vector<std::pair<size_t, size_t>> vars;
    const size_t n_trainable = m.trainable_params();
    for (size_t i = 0; i < m.num_layers(); ++i)
      for (size_t j = 0; j < m.planned(i).params.size(); ++j)
        if (m.planned(i).params[j].trainable && m.shares(i) < 0) vars.push_back({i, j});
    const auto order = keras_optimizer_var_order(optimizer_state_slots(spec), vars.size());
    for (size_t k = 0; k < order.size(); ++k) {
      const auto [li, j] = vars[order[k].var];
      const float* slot = info.optimizer_state + order[k].slot * n_trainable + offsets[li][j];
      v.write_floats(std::to_string(k + first_slot), dims_of(m.planned(li).params[j].shape), slot);
      if (copied) copied(slot, static_cast<size_t>(m.planned(li).params[j].shape.size()));
    }
  }
  return f.finish();
}

// Keras's save_attributes_to_hdf5_group: one attribute, or name0, name1, ... when the fixed-width
// array would exceed the object header limit (chunks as numpy.array_split makes them).
void write_split_names(h5::Group& g, const std::string& name, const std::vector<std::string>& v) {
  size_t width = 1;
  for (const auto& s : v) width = std::max(width, s.size());
  size_t chunks = 1;
  auto fits = [&](size_t k) {
    const size_t biggest = (v.size() + k - 1) / k;
    return biggest * width <= kHdf5ObjectHeaderLimit;
  };
  while (!fits(chunks) && chunks < v.size()) ++chunks;
  if (chunks == 1) {
    g.write_string_list_attr(name, v, h5::StrType::kFixedAscii);
    return;
  }
  const size_t base = v.size() / chunks, extra = v.size() % chunks;
  size_t pos = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t len = base + (c < extra ? 1 : 0);
    std::vector<std::string> part(v.begin() + static_cast<std::ptrdiff_t>(pos),
                                  v.begin() + static_cast<std::ptrdiff_t>(pos + len));
    g.write_string_list_attr(name + std::to_string(c), part, h5::StrType::kFixedAscii);
    pos += len;
  }
}

// tf.keras's node of an attention layer: one entry for the query, with value, key (when it is
// not the value) and the call flags as kwargs: [["q", 0, 0, {"value": ["v", 0, 0], ...}]].
OJson legacy_attention_node(const Model& m, size_t i) {
  const auto& ins = m.layer_inputs(i);
  Json config = m.layer(i).keras_config();
  OJson kwargs = take_attention_call(m.layer(i), config);
  auto ref = [&](size_t j) {
    return OJson::array({tensor_name(m, ins[j]), 0, m.input_tensor(i, j)});
  };
  kwargs["value"] = ref(1);
  if (ins.size() > 2) kwargs["key"] = ref(2);
  if (ins.size() > 3) kwargs["attention_mask"] = ref(3);
  return OJson::array({OJson::array({tensor_name(m, ins[0]), 0, m.input_tensor(i, 0), kwargs})});
}

OJson legacy_model_config(const Model& m, bool functional) {
  OJson layers = OJson::array();
  for (size_t k = 0; k < m.num_inputs(); ++k) {
    OJson in{{"class_name", "InputLayer"}, {"config", input_layer_config(m, k, false)}};
    if (functional) {
      in["name"] = m.input(k).name;
      in["inbound_nodes"] = OJson::array();
    }
    layers.push_back(in);
  }
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (m.shares(i) >= 0) continue;  // written with its layer's first call
    const Layer& l = m.layer(i);
    OJson e{{"class_name", l.class_name()}, {"config", legacy_layer_config(m, i)}};
    if (is_tf_op_layer(l)) {  // the call's arguments go to the node, as tf.keras writes them
      e["config"].erase("call");
      e["name"] = l.name();
      e["inbound_nodes"] = OJson::array({ordered(tf_op_legacy_node(m, i))});
      layers.push_back(e);
      continue;
    }
    if (functional) {
      const bool attention = is_attention_layer(l);
      OJson nodes = OJson::array();
      for (size_t c : calls_of(m, i)) {
        OJson refs = attention ? legacy_attention_node(m, c) : OJson::array();
        for (size_t j = 0; !attention && j < m.layer_inputs(c).size(); ++j) {
          const int id = m.layer_inputs(c)[j];
          refs.push_back(
              {tensor_name(m, id), tensor_node(m, id), m.input_tensor(c, j), OJson::object()});
        }
        if (is_list_attention_layer(l)) {  // the call flags ride with the first tensor
          Json config = l.keras_config();
          refs[0][3] = take_attention_call(l, config);
        }
        nodes.push_back(refs);
      }
      e["name"] = l.name();
      e["inbound_nodes"] = nodes;
    }
    layers.push_back(e);
  }
  OJson cfg{{"name", m.name()}, {"layers", layers}};
  if (functional) {
    cfg["input_layers"] = input_refs(m);
    cfg["output_layers"] = output_refs(m);
  }
  return OJson{{"class_name", functional ? "Functional" : "Sequential"}, {"config", cfg}};
}

OJson legacy_loss(const LossSpec& l) {
  return l.from_logits || l.kind == LossKind::kHuber ? ordered(loss_to_keras(l))
                                                     : OJson(loss_name(l));
}

OJson legacy_training_config(const KerasSaveInfo& info) {
  OJson loss = legacy_loss(*info.loss);
  if (!info.outputs.empty()) {
    loss = OJson::array();
    for (const auto& o : info.outputs) loss.push_back(legacy_loss(o.loss));
  }
  return OJson{{"loss", loss},
               {"metrics", metrics_json(info)},
               {"weighted_metrics", nullptr},
               {"loss_weights", loss_weights_json(info)},
               {"optimizer_config",
                {{"class_name", optimizer_class(info.optimizer->kind)},
                 {"config", ordered(optimizer_keras_config(*info.optimizer))}}}};
}

// optimizer_weights as tf.keras 2.11-2.15 (the keras_version this writer states) writes them
// (save_optimizer_weights_to_hdf5_group): see legacy_optimizer_vars.
void write_legacy_optimizer(h5::Group& root, const Model& m, const KerasSaveInfo& info,
                            const std::vector<std::vector<size_t>>& offsets) {
  const OptimizerSpec& spec = *info.optimizer;
  const size_t n_trainable = m.trainable_params();
  h5::Group og = root.create_group("optimizer_weights");
  std::vector<std::string> names = {kLegacyIterationName};
  og.write_int64_scalar(kLegacyIterationName, info.iterations);
  for (const LegacyOptimizerVar& v : legacy_optimizer_vars(m, spec)) {
    names.push_back(v.name);
    const size_t slash = v.name.rfind('/');
    const auto& p = m.planned(v.layer).params[v.param];
    open_or_create(og, v.name.substr(0, slash))
        .write_floats(v.name.substr(slash + 1), dims_of(p.shape),
                      info.optimizer_state + v.slot * n_trainable + offsets[v.layer][v.param]);
  }
  write_split_names(og, "weight_names", names);
}

// A legacy Keras .h5 file; `where` names it in messages.
std::string legacy_h5(const Model& m, const float* params, const KerasSaveInfo& info,
                      const std::string& where) {
  auto lock = h5::hdf5_lock();
  size_t total = 0;
  const auto offsets = param_offsets(m, &total);
  const size_t slots = info.optimizer ? optimizer_state_slots(*info.optimizer).size() : 0;
  h5::File f =
      h5::File::create(where, 4 * total * (1 + slots) + 2048 * m.num_layers() * (1 + slots));
  h5::Group& root = f.root();
  const auto ascii = h5::StrType::kVlenAscii;
  root.write_string_attr("backend", "tensorflow", ascii);
  root.write_string_attr("keras_version", kKerasLegacyWriteVersion, ascii);
  const bool fn = functional(m, info);
  root.write_string_attr("model_config", legacy_model_config(m, fn).dump(), ascii);
  if (compiled(info))
    root.write_string_attr("training_config", legacy_training_config(info).dump(), ascii);
  h5::Group mw = root.create_group("model_weights");
  std::vector<std::string> names;
  // tf.keras's model.layers: a Functional model lists its InputLayer, a Sequential one does not.
  if (fn)
    for (size_t k = 0; k < m.num_inputs(); ++k) {
      names.push_back(m.input(k).name);
      mw.create_group(m.input(k).name)
          .write_string_list_attr("weight_names", {}, h5::StrType::kFixedAscii);
    }
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (m.shares(i) >= 0) continue;  // a shared layer's weights: stored once
    const Layer& l = m.layer(i);
    names.push_back(l.name());
    h5::Group lg = mw.create_group(l.name());
    const auto& specs = m.planned(i).params;
    std::vector<std::string> wnames;
    std::vector<size_t> order;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t j = 0; j < specs.size(); ++j)
        if (specs[j].trainable == (pass == 0)) order.push_back(j);
    const std::vector<KerasWeightPlace> places = keras_weight_places(l, specs);
    for (size_t j : order) wnames.push_back(l.name() + "/" + places[j].legacy_name + ":0");
    write_split_names(lg, "weight_names", wnames);
    if (order.empty()) continue;
    h5::Group inner = lg.create_group(l.name());
    for (size_t j : order) {
      // tf.keras nests a recurrent layer's weights under its cell's scope (lstm/lstm_cell/...).
      const std::string& name = places[j].legacy_name;
      const size_t slash = name.rfind('/');
      if (places[j].int64_scalar) {
        inner.write_int64_scalar(name + ":0", std::llround(params[offsets[i][j]]));
        continue;
      }
      if (slash == std::string::npos) {
        inner.write_floats(name + ":0", dims_of(specs[j].shape), params + offsets[i][j]);
        continue;
      }
      open_or_create(inner, name.substr(0, slash))
          .write_floats(name.substr(slash + 1) + ":0", dims_of(specs[j].shape),
                        params + offsets[i][j]);
    }
  }
  // tf.keras >= 2.5 (and Keras 3) add the model's own weights, none here.
  mw.create_group("top_level_model_weights")
      .write_string_list_attr("weight_names", {}, h5::StrType::kFixedAscii);
  write_split_names(mw, "layer_names", names);
  mw.write_string_attr("backend", "tensorflow", ascii);
  mw.write_string_attr("keras_version", kKerasLegacyWriteVersion, ascii);
  if (compiled(info) && info.optimizer_state) write_legacy_optimizer(root, m, info, offsets);
  return f.close_image();
}

}  // namespace

std::vector<LegacyOptimizerVar> legacy_optimizer_vars(const Model& m, const OptimizerSpec& spec) {
  const auto slots = optimizer_state_slots(spec);
  const bool adam = spec.kind == OptKind::kAdam || spec.kind == OptKind::kAdamW;
  // tf.keras 2.11-2.15 names Adam's momentum, velocity and velocity_hat m, v and vhat, SGD's
  // momentum m; RMSprop's and Adagrad's are named as in Keras 3.
  auto slot_name = [&](const std::string& s) -> std::string {
    if ((adam || spec.kind == OptKind::kSGD) && s == "momentum") return "m";
    if (adam && s == "velocity") return "v";
    if (adam && s == "velocity_hat") return "vhat";
    return s;
  };
  const std::string cls = optimizer_class(spec.kind);
  std::vector<LegacyOptimizerVar> out;
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (m.shares(i) >= 0) continue;  // a shared layer's variables: once
    const Layer& l = m.layer(i);
    const auto& specs = m.planned(i).params;
    const std::vector<KerasWeightPlace> places = keras_weight_places(l, specs);
    for (size_t j = 0; j < specs.size(); ++j) {
      if (!specs[j].trainable) continue;
      const std::string var = l.name() + "/" + places[j].legacy_name;
      for (size_t k = 0; k < slots.size(); ++k)
        out.push_back({cls + "/" + slot_name(slots[k]) + "/" + var + ":0", i, j, k});
    }
  }
  return out;
}

KerasSaveInfo keras_save_info(const Network& net, std::vector<std::string> metrics) {
  KerasSaveInfo info;
  info.metrics = std::move(metrics);
  if (net.trainable()) {
    info.loss = net.train_spec().loss;
    info.outputs = net.train_spec().outputs;
    info.optimizer = net.train_spec().optimizer;
    info.optimizer_state = net.optimizer_state();
    info.iterations = net.iterations();
  }
  return info;
}

namespace {

// Output j's entry of a per-output setting (a list in output order or a dict by output name);
// null when the setting is one value for every output.
const Json* per_output(const Json& v, const Model& m, size_t j) {
  if (v.is_array() && v.size() == m.num_outputs()) return &v[j];
  if (v.is_object() && v.contains(m.output_name(j))) return &v[m.output_name(j)];
  return nullptr;
}

// The compile loss of `tc` into `info` (one loss, or each output's with its loss_weights).
void read_compile_loss(const Json& tc, const Model& m, KerasSaveInfo& info) {
  const Json& loss = tc["loss"];
  const Json weights = tc.value("loss_weights", Json());
  const bool split = m.num_outputs() > 1 && (per_output(loss, m, 0) || !weights.is_null());
  if (!split) {
    info.loss = parse_loss(loss);
    return;
  }
  for (size_t j = 0; j < m.num_outputs(); ++j) {
    const Json* l = per_output(loss, m, j);
    const Json* w = per_output(weights, m, j);
    info.outputs.push_back(
        {parse_loss(l ? *l : loss), w && w->is_number() ? w->get<double>() : 1.0});
  }
  info.loss = info.outputs[0].loss;
}

}  // namespace

KerasSaveInfo keras_save_info(const LoadedModel& lm) {
  KerasSaveInfo info;
  info.keras_class = lm.class_name;
  const Json& tc = lm.training_config;
  if (!tc.is_object()) return info;
  if (tc.contains("metrics") && !tc["metrics"].is_null()) info.metrics_config = tc["metrics"];
  // .keras files keep the optimizer as compile_config's "optimizer", legacy .h5 files as
  // training_config's "optimizer_config".
  const Json opt =
      tc.contains("optimizer") ? tc["optimizer"] : tc.value("optimizer_config", Json());
  if (!tc.contains("loss") || tc["loss"].is_null() || opt.is_null()) return info;
  try {
    read_compile_loss(tc, *lm.model, info);
    info.optimizer = lm.optimizer_state.empty() ? parse_optimizer(opt) : lm.optimizer;
  } catch (const Error&) {
    // A loss or optimizer nnfleet cannot name: saved uncompiled, as before.
    info.loss.reset();
    info.outputs.clear();
    info.optimizer.reset();
    return info;
  }
  if (!lm.optimizer_state.empty()) {
    info.optimizer_state = lm.optimizer_state.data();
    info.iterations = lm.iterations;
  }
  return info;
}

Json keras_config_json(const Model& m, const KerasSaveInfo& info) {
  return Json::parse(config_json_text(m, info));
}

uint64_t save_keras(const std::string& path, const Model& m, const float* params,
                    const KerasSaveInfo& info, Durability d, const NumbersCopied& copied) {
  const OJson meta{{"keras_version", kKerasWriteVersion}, {"date_saved", now_string()}};
  // The weights are made in memory (h5::File::create says why) and stored in the archive as they
  // are: a model's weights are held twice for a moment (zip_image), never written twice.
  std::vector<ZipMember> members(3);
  members[0] = {"metadata.json", meta.dump(), ""};
  members[1] = {"config.json", config_json_text(m, info), ""};
  members[2] = {"model.weights.h5", keras3_weights(m, params, info, path, copied), ""};
  for (ZipMember& a : asset_members(m)) members.push_back(std::move(a));
  // A large model's archive goes straight to its file (libzip's temporary, then ours renamed):
  // made in memory it would hold the weights twice more (zip_image), which was W1's peak resident
  // memory (m8's 8 MB of weights and Adam state: +6 MiB while m7 trains). A tiny model keeps the
  // image: a temporary file and rename cost it more than its training (zip_image says why).
  if (members[2].bytes.size() >= kStreamedKerasBytes) {
    write_atomic_with(
        path, [&members](const std::string& tmp) { write_zip(tmp, members); }, d);
    std::vector<ZipMember>().swap(members);
    return hash_file(path);  // the bytes written, read back from the page cache
  }
  const std::string bytes = zip_image(path, std::move(members));
  write_file_atomic(path, bytes, d);
  return hash_bytes(bytes);
}

uint64_t save_keras_h5(const std::string& path, const Model& m, const float* params,
                       const KerasSaveInfo& info, Durability d) {
  const std::string bytes = legacy_h5(m, params, info, path);
  write_file_atomic(path, bytes, d);
  return hash_bytes(bytes);
}

}  // namespace nnfleet
