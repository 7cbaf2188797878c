// Serialized TensorFlow operations in Keras configs, both directions (io/keras/keras_tf_ops.h).
#include "io/keras/keras_tf_ops.h"

#include <algorithm>

#include "layers/layer_util.h"
#include "layers/tf_op.h"

namespace nnfleet {
namespace {

constexpr const char* kConstant = "_CONSTANT_VALUE";

[[noreturn]] void bad(const std::string& what) { throw ModelError(what); }

Json input_ref(int k) { return {{"class_name", "__input__"}, {"config", {{"index", k}}}}; }

// How a Keras 3 operation's node arguments map onto the call.
enum class Form { kBinary, kUnary, kList, kGetItem };

// A Keras 3 operation: class, module, the tf.keras function it is, its argument form, and its
// config keys as the call's kwargs ({keras3 key, tf.keras kwarg}; an empty kwarg: must be null).
struct K3Row {
  const char* cls;
  const char* module;
  const char* function;
  Form form;
  std::vector<std::pair<const char*, const char*>> keys;
};

const std::vector<K3Row>& k3_table() {
  static const char* np = "keras.src.ops.numpy";
  static const char* nn = "keras.src.ops.nn";
  static const std::vector<K3Row> t = {
      {"Add", np, "math.add", Form::kBinary, {}},
      {"Subtract", np, "math.subtract", Form::kBinary, {}},
      {"Multiply", np, "math.multiply", Form::kBinary, {}},
      {"TrueDivide", np, "math.truediv", Form::kBinary, {}},
      {"Divide", np, "math.divide", Form::kBinary, {}},
      {"Maximum", np, "math.maximum", Form::kBinary, {}},
      {"Minimum", np, "math.minimum", Form::kBinary, {}},
      {"Power", np, "math.pow", Form::kBinary, {}},
      {"Matmul", np, "linalg.matmul", Form::kBinary, {}},
      {"Negative", np, "math.negative", Form::kUnary, {}},
      {"Square", np, "math.square", Form::kUnary, {}},
      {"Sqrt", np, "math.sqrt", Form::kUnary, {}},
      {"Exp", np, "math.exp", Form::kUnary, {}},
      {"Log", np, "math.log", Form::kUnary, {}},
      {"Absolute", np, "math.abs", Form::kUnary, {}},
      {"Abs", np, "math.abs", Form::kUnary, {}},
      {"Reciprocal", np, "math.reciprocal", Form::kUnary, {}},
      {"Tanh", np, "math.tanh", Form::kUnary, {}},
      {"Rsqrt", "keras.src.ops.math", "math.rsqrt", Form::kUnary, {}},
      {"Cast", "keras.src.ops.core", "cast", Form::kUnary, {{"dtype", "dtype"}}},
      {"Relu", nn, "nn.relu", Form::kUnary, {}},
      {"Relu6", nn, "nn.relu6", Form::kUnary, {}},
      {"Sigmoid", nn, "math.sigmoid", Form::kUnary, {}},
      {"Softplus", nn, "math.softplus", Form::kUnary, {}},
      {"Selu", nn, "nn.selu", Form::kUnary, {}},
      {"Silu", nn, "nn.silu", Form::kUnary, {}},
      {"Gelu", nn, "nn.gelu", Form::kUnary, {{"approximate", "approximate"}}},
      {"Elu", nn, "nn.elu", Form::kUnary, {{"alpha", "alpha"}}},
      {"LeakyRelu", nn, "nn.leaky_relu", Form::kUnary, {{"negative_slope", "alpha"}}},
      {"Softmax", nn, "nn.softmax", Form::kUnary, {{"axis", "axis"}}},
      {"Mean", np, "math.reduce_mean", Form::kUnary, {{"axis", "axis"}, {"keepdims", "keepdims"}}},
      {"Sum", np, "math.reduce_sum", Form::kUnary, {{"axis", "axis"}, {"keepdims", "keepdims"}}},
      {"Max",
       np,
       "math.reduce_max",
       Form::kUnary,
       {{"axis", "axis"}, {"keepdims", "keepdims"}, {"initial", ""}}},
      {"Min",
       np,
       "math.reduce_min",
       Form::kUnary,
       {{"axis", "axis"}, {"keepdims", "keepdims"}, {"initial", ""}}},
      {"Prod",
       np,
       "math.reduce_prod",
       Form::kUnary,
       {{"axis", "axis"}, {"keepdims", "keepdims"}, {"dtype", ""}}},
      {"Concatenate", np, "concat", Form::kList, {{"axis", "axis"}}},
      {"Stack", np, "stack", Form::kList, {{"axis", "axis"}}},
      {"Reshape", np, "reshape", Form::kUnary, {{"newshape", "shape"}}},
      {"ExpandDims", np, "expand_dims", Form::kUnary, {{"axis", "axis"}}},
      {"Squeeze", np, "squeeze", Form::kUnary, {{"axis", "axis"}}},
      {"Transpose", np, "transpose", Form::kUnary, {{"axes", "perm"}}},
      {"GetItem", np, "__operators__.getitem", Form::kGetItem, {}},
  };
  return t;
}

std::string k3_names() {
  std::vector<std::string> v;
  for (const K3Row& r : k3_table()) v.push_back(r.cls);
  std::sort(v.begin(), v.end());
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool is_keras3_op_module(const std::string& m) {
  return m.rfind("keras.src.ops.", 0) == 0 || m.rfind("keras.ops.", 0) == 0 || m == "keras.ops";
}

// Collects the tensors of a call: each is replaced by an input placeholder and listed in `refs`.
struct Refs {
  std::vector<std::pair<std::string, int>> list;
  Json take(const std::string& layer, int tensor) {
    list.push_back({layer, tensor});
    return input_ref(static_cast<int>(list.size()) - 1);
  }
};

int tensor_index(const Json& k) {
  const std::optional<int64_t> i = config_int(k, 0);
  if (!i || *i > 64) bad("a tensor index " + k.dump() + "; expected an integer in [0, 64]");
  return static_cast<int>(*i);
}

// tf.keras's kwargs: a list of 3 or 4 starting with a string is a tensor [layer, node, tensor]
// (tf.keras's own test, _is_serialized_node_data).
Json legacy_value(const Json& v, Refs& refs, int depth) {
  if (depth > 8) bad("the call's arguments are nested too deeply");
  if (v.is_array() && (v.size() == 3 || v.size() == 4) && v[0].is_string())
    return refs.take(v[0].get<std::string>(), tensor_index(v[2]));
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) out.push_back(legacy_value(e, refs, depth + 1));
    return out;
  }
  if (v.is_object()) {
    Json out = Json::object();
    for (auto it = v.begin(); it != v.end(); ++it)
      out[it.key()] = legacy_value(it.value(), refs, depth + 1);
    return out;
  }
  return v;
}

// One entry of a tf.keras node: [layer, node, tensor(, kwargs)] or [_CONSTANT_VALUE, -1, value(,
// kwargs)]. Returns the first argument's part and sets *kwargs from the entry.
Json legacy_entry(const Json& e, Refs& refs, Json* kwargs) {
  if (!e.is_array() || e.size() < 3 || e.size() > 4 || !e[0].is_string())
    bad("a malformed inbound node entry " + e.dump() + "; expected [\"name\", node, tensor, {}]");
  if (e.size() == 4) *kwargs = e[3];
  if (e[0] == kConstant) return e[2];
  return refs.take(e[0].get<std::string>(), tensor_index(e[2]));
}

TfOpCall read_legacy(const Json& entry, const std::string& name) {
  const Json cfg = entry.value("config", Json::object());
  const Json fn = cfg.is_object() ? cfg.value("function", Json()) : Json();
  if (!fn.is_string()) bad("the config has no \"function\" (the TensorFlow operation's name)");
  const Json nodes = entry.value("inbound_nodes", Json());
  if (!nodes.is_array() || nodes.size() != 1)
    bad("it is called " + std::to_string(nodes.is_array() ? nodes.size() : 0) +
        " times; expected one call");
  const Json& node = nodes[0];
  Refs refs;
  Json kwargs = Json::object(), first;
  if (node.is_array() && !node.empty() && node[0].is_string()) {
    first = legacy_entry(node, refs, &kwargs);  // one unwrapped entry: a single argument
  } else if (node.is_array() && !node.empty()) {
    first = Json::array();
    for (const Json& e : node) first.push_back(legacy_entry(e, refs, &kwargs));
    // Older files wrap a single tensor in a list; only concat and stack take a list.
    const std::string f = fn.get<std::string>();
    if (first.size() == 1 && f != "concat" && f != "stack") first = first[0];
  } else {
    bad("a malformed inbound node " + node.dump());
  }
  if (!kwargs.is_object())
    bad("the call's keyword arguments " + kwargs.dump() + " are not an object");
  TfOpCall c;
  c.cls = entry.value("class_name", std::string());
  c.config = {{"name", name},
              {"trainable", cfg.value("trainable", Json(true))},
              {"dtype", "float32"},
              {"function", fn},
              {"call", {{"first", first}, {"kwargs", legacy_value(kwargs, refs, 0)}}}};
  c.inputs = refs.list;
  return c;
}

// Keras 3 argument values: Keras tensors become inputs, slices become tf.keras's slice dicts.
Json k3_value(const Json& v, Refs& refs, int depth) {
  if (depth > 8) bad("the call's arguments are nested too deeply");
  if (v.is_object()) {
    const Json cls = v.value("class_name", Json());
    const Json c = v.value("config", Json());
    if (cls == "__keras_tensor__") {
      const Json h = c.is_object() ? c.value("keras_history", Json()) : Json();
      if (!h.is_array() || h.size() < 3 || !h[0].is_string())
        bad("a Keras tensor without keras_history: " + v.dump());
      return refs.take(h[0].get<std::string>(), tensor_index(h[2]));
    }
    if (cls == "__slice__" && c.is_object())
      return {{"start", c.value("start", Json())},
              {"stop", c.value("stop", Json())},
              {"step", c.value("step", Json())}};
    if (cls == "__ellipsis__") return {{"class_name", "__ellipsis__"}};
    if (cls == "__tuple__" && v.contains("items")) return k3_value(v["items"], refs, depth + 1);
    bad("an argument " + v.dump() + " that is not a tensor, a number, a list or a slice");
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) out.push_back(k3_value(e, refs, depth + 1));
    return out;
  }
  return v;
}

TfOpCall read_keras3(const Json& entry, const std::string& name) {
  const std::string cls = entry.value("class_name", std::string());
  const K3Row* row = nullptr;
  for (const K3Row& r : k3_table())
    if (cls == r.cls) row = &r;
  if (!row)
    bad("Keras 3 operation '" + cls + "' (module " + entry.value("module", std::string()) +
        ") is not supported; expected one of " + k3_names());
  const Json nodes = entry.value("inbound_nodes", Json());
  if (!nodes.is_array() || nodes.size() != 1 || !nodes[0].is_object())
    bad("it is called " + std::to_string(nodes.is_array() ? nodes.size() : 0) +
        " times; expected one call {\"args\": [...], \"kwargs\": {}}");
  const Json args = nodes[0].value("args", Json::array());
  const Json nkw = nodes[0].value("kwargs", Json::object());
  if (!nkw.is_object() || !nkw.empty())
    bad("it is called with keyword arguments " + nkw.dump() + "; expected none");
  const size_t want = row->form == Form::kBinary || row->form == Form::kGetItem ? 2 : 1;
  if (!args.is_array() || args.size() != want)
    bad("it is called with " + args.dump() + "; expected " + std::to_string(want) + " argument(s)");
  Refs refs;
  Json first = k3_value(args[0], refs, 0), kwargs = Json::object();
  if (row->form == Form::kBinary)
    kwargs[std::string(cls) == "Matmul" ? "b" : "y"] = k3_value(args[1], refs, 0);
  if (row->form == Form::kGetItem) kwargs["slice_spec"] = k3_value(args[1], refs, 0);
  const Json cfg = entry.value("config", Json::object());
  for (auto it = cfg.begin(); cfg.is_object() && it != cfg.end(); ++it) {
    if (it.key() == "name" || it.key() == "trainable" || (it.key() == "dtype" && cls != "Cast"))
      continue;
    auto k = std::find_if(row->keys.begin(), row->keys.end(),
                          [&](const auto& p) { return it.key() == p.first; });
    if (k == row->keys.end()) bad("its config has an unknown key '" + it.key() + "'");
    if (std::string(k->second).empty()) {
      if (!it.value().is_null())
        bad("its config has '" + it.key() + "' " + it.value().dump() + "; expected null");
    } else if (cls == "Elu") {
      if (!(it.value().is_number() && it.value().get<double>() == 1.0))
        bad("its config has alpha " + it.value().dump() + "; expected 1.0 (tf.nn.elu's)");
    } else {
      kwargs[k->second] = it.value();
    }
  }
  if (cls == "Gelu" && !kwargs.contains("approximate")) kwargs["approximate"] = true;
  if (cls == "Concatenate" && !kwargs.contains("axis")) kwargs["axis"] = 0;
  TfOpCall c;
  c.cls = row->form == Form::kGetItem ? "SlicingOpLambda" : "TFOpLambda";
  c.config = {{"name", name},
              {"trainable", true},
              {"dtype", "float32"},
              {"function", row->function},
              {"call", {{"first", first}, {"kwargs", kwargs}}}};
  c.inputs = refs.list;
  return c;
}

// The call with each input placeholder replaced by `f(k)`.
template <typename F>
Json substitute(const Json& v, F f, int depth = 0) {
  if (depth > 8) return v;
  if (v.is_object() && v.value("class_name", Json()) == "__input__")
    return f(v["config"]["index"].get<int>());
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) out.push_back(substitute(e, f, depth + 1));
    return out;
  }
  if (v.is_object()) {
    Json out = Json::object();
    for (auto it = v.begin(); it != v.end(); ++it)
      out[it.key()] = substitute(it.value(), f, depth + 1);
    return out;
  }
  return v;
}

bool is_input(const Json& v) {
  return v.is_object() && v.value("class_name", Json()) == "__input__";
}

// The canonical tf.keras name behind aliases, as the Keras 3 table lists it.
std::string canonical_function(const std::string& f) {
  static const std::vector<std::pair<const char*, const char*>> alias = {
      {"__operators__.add", "math.add"},
      {"__operators__.sub", "math.subtract"},
      {"__operators__.mul", "math.multiply"},
      {"__operators__.truediv", "math.truediv"},
      {"__operators__.pow", "math.pow"},
      {"__operators__.neg", "math.negative"},
      {"nn.tanh", "math.tanh"},
      {"nn.sigmoid", "math.sigmoid"},
      {"nn.softplus", "math.softplus"},
      {"nn.swish", "nn.silu"},
      {"math.softmax", "nn.softmax"},
      {"matmul", "linalg.matmul"},
      {"compat.v1.expand_dims", "expand_dims"},
      {"compat.v1.squeeze", "squeeze"},
      {"compat.v1.transpose", "transpose"}};
  for (const auto& [from, to] : alias)
    if (f == from) return to;
  return f;
}

// tf.keras slice dicts as Keras 3's __slice__ objects.
Json k3_slices(const Json& v) {
  if (v.is_object() && v.contains("start") && v.contains("stop") && v.contains("step"))
    return {{"class_name", "__slice__"}, {"config", v}};
  if (v.is_object() && v.value("class_name", Json()) == "__ellipsis__")
    return {{"class_name", "__ellipsis__"}, {"config", Json::object()}};
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) out.push_back(k3_slices(e));
    return out;
  }
  return v;
}

}  // namespace

bool is_tf_op_entry(const Json& entry) {
  if (!entry.is_object()) return false;
  const Json cls = entry.value("class_name", Json());
  if (cls == "TFOpLambda" || cls == "SlicingOpLambda") return true;
  const Json m = entry.value("module", Json());
  return m.is_string() && is_keras3_op_module(m.get<std::string>());
}

TfOpCall read_tf_op_call(const Json& entry, const std::string& name) {
  const Json cls = entry.value("class_name", Json());
  if (cls == "TFOpLambda" || cls == "SlicingOpLambda") return read_legacy(entry, name);
  return read_keras3(entry, name);
}

bool is_tf_op_layer(const Layer& l) {
  const std::string c = l.class_name();
  return c == "TFOpLambda" || c == "SlicingOpLambda";
}

Json tf_op_legacy_config(const Json& keras_config) {
  Json c = keras_config;
  c.erase("call");
  return c;
}

Json tf_op_legacy_node(const Model& m, size_t i) {
  const Json cfg = m.layer_keras_config(i);
  const Json& call = cfg["call"];
  const auto& ins = m.layer_inputs(i);
  auto ref = [&](int k) {
    return Json{m.node_name(ins[static_cast<size_t>(k)]), 0,
                m.input_tensor(i, static_cast<size_t>(k))};
  };
  const Json kwargs = substitute(call.value("kwargs", Json::object()), ref);
  const Json& first = call["first"];
  auto entry = [&](const Json& arg) {
    if (!is_input(arg)) return Json{kConstant, -1, arg, kwargs};
    Json e = ref(arg["config"]["index"].get<int>());
    e.push_back(kwargs);
    return e;
  };
  if (first.is_array() && std::all_of(first.begin(), first.end(), is_input)) {
    Json node = Json::array();
    for (const Json& a : first) node.push_back(entry(a));
    return node;
  }
  return entry(first);
}

Json tf_op_keras3_entry(const Model& m, size_t i) {
  const Layer& l = m.layer(i);
  const Json cfg = m.layer_keras_config(i);
  const std::string fn = canonical_function(cfg.value("function", std::string()));
  const K3Row* row = nullptr;
  for (const K3Row& r : k3_table())
    if (fn == r.function) row = &r;
  const Json& call = cfg["call"];
  Json kwargs = call.value("kwargs", Json::object());
  const bool transposed = kwargs.value("transpose_a", false) ||
                          kwargs.value("transpose_b", false) || kwargs.value("adjoint_a", false) ||
                          kwargs.value("adjoint_b", false);
  if (!row || (row->form == Form::kBinary && std::string(row->cls) == "Matmul" && transposed))
    throw ModelError("layer '" + l.name() + "' (" + l.class_name() + " " +
                     cfg.value("function", std::string()) +
                     (transposed ? " with transpose_a/transpose_b" : "") +
                     ") has no Keras 3 operation to be written as in a .keras file; save it as "
                     ".h5 (tf.keras form) instead");
  const auto& ins = m.layer_inputs(i);
  auto tensor = [&](int k) {
    const int id = ins[static_cast<size_t>(k)];
    const int t = m.input_tensor(i, static_cast<size_t>(k));
    Json shape = Json::array({nullptr});
    for (int64_t d : m.node_shape(id, t)) shape.push_back(d);
    return Json{
        {"class_name", "__keras_tensor__"},
        {"config",
         {{"shape", shape}, {"dtype", "float32"}, {"keras_history", {m.node_name(id), 0, t}}}}};
  };
  Json args = Json::array({substitute(call["first"], tensor)});
  if (row->form == Form::kBinary)
    args.push_back(
        substitute(kwargs.value(std::string(row->cls) == "Matmul" ? "b" : "y", Json()), tensor));
  if (row->form == Form::kGetItem) args.push_back(k3_slices(kwargs.value("slice_spec", Json())));
  Json c = {{"name", l.name()}};
  for (const auto& [k3, tf] : row->keys) {
    if (std::string(tf).empty()) {
      c[k3] = nullptr;
    } else if (std::string(row->cls) == "Elu") {
      c[k3] = 1.0;
    } else if (kwargs.contains(tf)) {
      c[k3] = kwargs[tf];
    }
  }
  if (std::string(row->cls) == "Gelu") c["approximate"] = kwargs.value("approximate", false);
  if (std::string(row->cls) == "LeakyRelu" && !c.contains("negative_slope"))
    c["negative_slope"] = 0.2;
  const std::string cls = row->cls;
  if ((cls == "Mean" || cls == "Sum" || cls == "Max" || cls == "Min" || cls == "Prod") &&
      !c.contains("keepdims"))
    c["keepdims"] = false;
  if ((cls == "Softmax" || cls == "Stack") && !c.contains("axis"))
    c["axis"] = cls == "Stack" ? 0 : -1;
  return {{"module", row->module},
          {"class_name", row->cls},
          {"config", c},
          {"registered_name", row->cls},
          {"name", l.name()},
          {"inbound_nodes", Json::array({{{"args", args}, {"kwargs", Json::object()}}})}};
}

}  // namespace nnfleet
