// TFOpLambda / SlicingOpLambda: the table of supported tf.keras function names, the parse of a
// call's arguments into a TfOp, and the shape rules (layers/tf_op.h).
#include <algorithm>
#include <map>
#include <set>

#include "core/limits.h"
#include "layers/layer_util.h"
#include "layers/tf_op.h"

namespace nnfleet {
namespace {

// One supported function: its kind, the sub-operation (BinaryOp, UnaryOp, ReduceOp or Act as an
// int), and the keyword arguments it takes besides "name".
struct FnRow {
  const char* name;
  TfOpKind kind;
  int sub;
  std::vector<const char*> kwargs;
};

int b(BinaryOp o) { return static_cast<int>(o); }
int u(UnaryOp o) { return static_cast<int>(o); }
int r(ReduceOp o) { return static_cast<int>(o); }
int a(Act o) { return static_cast<int>(o); }

const std::vector<FnRow>& fn_table() {
  using K = TfOpKind;
  static const std::vector<FnRow> t = {
      {"__operators__.add", K::kBinary, b(BinaryOp::kAdd), {"y"}},
      {"math.add", K::kBinary, b(BinaryOp::kAdd), {"y"}},
      {"__operators__.sub", K::kBinary, b(BinaryOp::kSub), {"y"}},
      {"math.subtract", K::kBinary, b(BinaryOp::kSub), {"y"}},
      {"__operators__.mul", K::kBinary, b(BinaryOp::kMul), {"y"}},
      {"math.multiply", K::kBinary, b(BinaryOp::kMul), {"y"}},
      {"__operators__.truediv", K::kBinary, b(BinaryOp::kDiv), {"y"}},
      {"math.truediv", K::kBinary, b(BinaryOp::kDiv), {"y"}},
      {"math.divide", K::kBinary, b(BinaryOp::kDiv), {"y"}},
      {"math.maximum", K::kBinary, b(BinaryOp::kMax), {"y"}},
      {"math.minimum", K::kBinary, b(BinaryOp::kMin), {"y"}},
      {"__operators__.pow", K::kBinary, b(BinaryOp::kPow), {"y"}},
      {"math.pow", K::kBinary, b(BinaryOp::kPow), {"y"}},
      {"__operators__.neg", K::kUnary, u(UnaryOp::kNeg), {}},
      {"math.negative", K::kUnary, u(UnaryOp::kNeg), {}},
      {"math.square", K::kUnary, u(UnaryOp::kSquare), {}},
      {"math.sqrt", K::kUnary, u(UnaryOp::kSqrt), {}},
      {"math.rsqrt", K::kUnary, u(UnaryOp::kRsqrt), {}},
      {"math.exp", K::kUnary, u(UnaryOp::kExp), {}},
      {"math.log", K::kUnary, u(UnaryOp::kLog), {}},
      {"math.abs", K::kUnary, u(UnaryOp::kAbs), {}},
      {"math.reciprocal", K::kUnary, u(UnaryOp::kReciprocal), {}},
      {"cast", K::kUnary, u(UnaryOp::kIdentity), {"dtype"}},
      {"math.tanh", K::kActivation, a(Act::kTanh), {}},
      {"nn.tanh", K::kActivation, a(Act::kTanh), {}},
      {"math.sigmoid", K::kActivation, a(Act::kSigmoid), {}},
      {"nn.sigmoid", K::kActivation, a(Act::kSigmoid), {}},
      {"math.softplus", K::kActivation, a(Act::kSoftplus), {}},
      {"nn.softplus", K::kActivation, a(Act::kSoftplus), {}},
      {"nn.relu", K::kActivation, a(Act::kRelu), {}},
      {"nn.relu6", K::kActivation, a(Act::kRelu), {}},
      {"nn.elu", K::kActivation, a(Act::kElu), {}},
      {"nn.selu", K::kActivation, a(Act::kSelu), {}},
      {"nn.gelu", K::kActivation, a(Act::kGelu), {"approximate"}},
      {"nn.silu", K::kActivation, a(Act::kSwish), {"beta"}},
      {"nn.swish", K::kActivation, a(Act::kSwish), {"beta"}},
      {"nn.leaky_relu", K::kActivation, a(Act::kLeakyRelu), {"alpha"}},
      {"nn.softmax", K::kSoftmax, 0, {"axis"}},
      {"math.softmax", K::kSoftmax, 0, {"axis"}},
      {"math.reduce_mean", K::kReduce, r(ReduceOp::kMean), {"axis", "keepdims"}},
      {"math.reduce_sum", K::kReduce, r(ReduceOp::kSum), {"axis", "keepdims"}},
      {"math.reduce_max", K::kReduce, r(ReduceOp::kMax), {"axis", "keepdims"}},
      {"math.reduce_min", K::kReduce, r(ReduceOp::kMin), {"axis", "keepdims"}},
      {"math.reduce_prod", K::kReduce, r(ReduceOp::kProd), {"axis", "keepdims"}},
      {"concat", K::kConcat, 0, {"axis"}},
      {"stack", K::kStack, 0, {"axis"}},
      {"reshape", K::kReshape, 0, {"shape"}},
      {"expand_dims", K::kExpandDims, 0, {"axis"}},
      {"compat.v1.expand_dims", K::kExpandDims, 0, {"axis"}},
      {"squeeze", K::kSqueeze, 0, {"axis"}},
      {"compat.v1.squeeze", K::kSqueeze, 0, {"axis"}},
      {"transpose", K::kTranspose, 0, {"perm", "conjugate"}},
      {"compat.v1.transpose", K::kTranspose, 0, {"perm", "conjugate"}},
      {"__operators__.getitem", K::kSlice, 0, {"slice_spec", "var"}},
      {"linalg.matmul",
       K::kMatmul,
       0,
       {"b", "transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "a_is_sparse", "b_is_sparse",
        "output_type"}},
      {"matmul",
       K::kMatmul,
       0,
       {"b", "transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "a_is_sparse", "b_is_sparse",
        "output_type"}},
  };
  return t;
}

[[noreturn]] void bad(const std::string& key, const std::string& expected) {
  throw ConfigError(key, "bad value for '" + key + "': expected " + expected);
}

// {"class_name": "__input__", "config": {"index": k}} -> k; -1 for anything else.
int input_index(const Json& v) {
  if (!v.is_object() || v.value("class_name", Json()) != "__input__") return -1;
  const Json c = v.value("config", Json());
  const std::optional<int64_t> k =
      c.is_object() ? config_int(c.value("index", Json()), 0) : std::nullopt;
  if (!k || *k > 64) bad("call", "an input index in [0, 64], got " + v.dump());
  return static_cast<int>(*k);
}

// A constant: a number, a bool or a rectangular nested list of them.
void constant_of(const Json& v, TfOperand& out, int depth, const std::string& key) {
  if (v.is_number() || v.is_boolean()) {
    out.values.push_back(v.is_boolean() ? (v.get<bool>() ? 1.0f : 0.0f) : v.get<float>());
    return;
  }
  if (!v.is_array() || v.empty() || depth >= Shape::kMaxRank)
    bad(key, "a tensor, a number or a rectangular list of numbers, got " + v.dump());
  if (out.shape.rank() == depth) out.shape.push_back(static_cast<int64_t>(v.size()));
  if (out.shape[depth] != static_cast<int64_t>(v.size()))
    bad(key, "a rectangular list of numbers, got " + v.dump());
  for (const Json& e : v) constant_of(e, out, depth + 1, key);
}

TfOperand operand(const Json& v, const std::string& key) {
  TfOperand o;
  o.input = input_index(v);
  if (o.input < 0) constant_of(v, o, 0, key);
  if (o.input < 0 && o.values.size() > 1u << 20) bad(key, "a constant of at most 2^20 values");
  return o;
}

int tensor(const Json& v, const std::string& key) {
  const int k = input_index(v);
  if (k < 0) bad(key, "a tensor (the output of a layer), got " + v.dump());
  return k;
}

// An int or a list of ints (null -> empty with *none set).
std::vector<int64_t> ints(const Json* v, const std::string& key, bool* none = nullptr) {
  std::vector<int64_t> out;
  if (!v || v->is_null()) {
    if (none) *none = true;
    return out;
  }
  auto one = [&](const Json& e) {
    const std::optional<int64_t> i = config_int(e, -1000);
    if (!i) bad(key, "an int or a list of ints, got " + v->dump());
    out.push_back(*i);
  };
  if (v->is_array())
    for (const Json& e : *v) one(e);
  else
    one(*v);
  return out;
}

bool flag(const Json* v, const std::string& key, bool def = false) {
  if (!v || v->is_null()) return def;
  if (!v->is_boolean()) bad(key, "true or false, got " + v->dump());
  return v->get<bool>();
}

SliceItem slice_item(const Json& v) {
  SliceItem s;
  if (v.is_null()) {
    s.kind = SliceItem::Kind::kNewAxis;
  } else if (v.is_object() && v.value("class_name", Json()) == "__ellipsis__") {
    s.kind = SliceItem::Kind::kEllipsis;
  } else if (v.is_object() && v.contains("start") && v.contains("stop") && v.contains("step") &&
             v.size() == 3) {
    auto bound = [&](const char* k, int64_t* x, bool* has) {
      if (v[k].is_null()) return;
      const std::optional<int64_t> i = config_int(v[k], -limits::kMaxConfigInt);
      if (!i) bad("slice_spec", "slice bounds as ints or null, got " + v.dump());
      *x = *i;
      if (has) *has = true;
    };
    bound("start", &s.start, &s.has_start);
    bound("stop", &s.stop, &s.has_stop);
    bound("step", &s.step, nullptr);
    if (s.step == 0) bad("slice_spec", "a slice step other than 0, got " + v.dump());
  } else {
    const std::optional<int64_t> i = config_int(v, -limits::kMaxConfigInt);
    if (!i)
      bad("slice_spec",
          "ints, slices, Ellipsis and tf.newaxis (a tensor or a list as an index is not "
          "supported), got " +
              v.dump());
    s.kind = SliceItem::Kind::kIndex;
    s.index = *i;
  }
  return s;
}

using Kwargs = std::map<std::string, const Json*>;

const Json* get(const Kwargs& kw, const char* k) {
  auto it = kw.find(k);
  return it == kw.end() ? nullptr : it->second;
}

// cast's dtype: a float type is the identity, an integer type truncates, bool tests for zero.
void read_cast(TfOp& op, const Kwargs& kw) {
  const Json* d = get(kw, "dtype");
  op.dtype = d && d->is_string() ? d->get<std::string>() : "";
  static const std::set<std::string> floats = {"float32", "float64", "double"};
  static const std::set<std::string> ints = {"int8", "int16", "int32", "int64"};
  if (floats.count(op.dtype))
    op.unary = UnaryOp::kIdentity;
  else if (ints.count(op.dtype))
    op.unary = UnaryOp::kCastInt;
  else if (op.dtype == "bool")
    op.unary = UnaryOp::kCastBool;
  else
    bad("dtype",
        "one of float32, float64, int8, int16, int32, int64, bool (float16, bfloat16 and "
        "unsigned types are not supported), got " +
            (d ? d->dump() : std::string("none")));
}

// TensorFlow's defaults: relu6 caps at 6, elu's alpha is 1, gelu is exact unless approximate,
// leaky_relu's alpha 0.2, silu's beta 1 (the only one supported).
void read_activation(TfOp& op, const Kwargs& kw) {
  if (op.function == "nn.relu6") op.act.max_value = 6.0f;
  if (op.act.kind == Act::kElu) op.act.alpha = 1.0f;
  if (op.act.kind == Act::kGelu && flag(get(kw, "approximate"), "approximate"))
    op.act.kind = Act::kGeluTanh;
  if (op.act.kind == Act::kLeakyRelu) {
    const Json* al = get(kw, "alpha");
    if (al && !al->is_null() && !al->is_number()) bad("alpha", "a number");
    op.act.alpha = al && !al->is_null() ? al->get<float>() : 0.2f;
  }
  const Json* be = get(kw, "beta");
  if (op.act.kind == Act::kSwish && be && !be->is_null() &&
      !(be->is_number() && be->get<double>() == 1.0))
    bad("beta", "1.0 (silu with another beta is not supported), got " + be->dump());
}

// softmax (default -1), concat and expand_dims (required), stack (default 0): one axis.
void read_axis(TfOp& op, const Kwargs& kw) {
  const Json* ax = get(kw, "axis");
  const bool needed = op.kind == TfOpKind::kConcat || op.kind == TfOpKind::kExpandDims;
  if (needed && (!ax || ax->is_null())) bad("axis", "an axis for " + op.function);
  const std::vector<int64_t> v = ints(ax, "axis");
  if (v.size() > 1) bad("axis", "one axis, got " + ax->dump());
  op.axis = v.empty() ? (op.kind == TfOpKind::kStack ? 0 : -1) : v[0];
}

void read_slice(TfOp& op, const Kwargs& kw) {
  const Json* s = get(kw, "slice_spec");
  if (!s) bad("slice_spec", "the slice of __operators__.getitem");
  if (s->is_array())
    for (const Json& e : *s) op.slice.push_back(slice_item(e));
  else
    op.slice.push_back(slice_item(*s));
  if (get(kw, "var") && !get(kw, "var")->is_null()) bad("var", "null");
}

void read_matmul(TfOp& op, const Kwargs& kw) {
  const Json* bb = get(kw, "b");
  if (!bb) bad("b", "the second operand of " + op.function);
  op.b = operand(*bb, "b");
  // Real matrices: the adjoint is the transpose.
  op.transpose_a =
      flag(get(kw, "transpose_a"), "transpose_a") || flag(get(kw, "adjoint_a"), "adjoint_a");
  op.transpose_b =
      flag(get(kw, "transpose_b"), "transpose_b") || flag(get(kw, "adjoint_b"), "adjoint_b");
  for (const char* k : {"a_is_sparse", "b_is_sparse"})
    if (flag(get(kw, k), k)) bad(k, "false");
  if (get(kw, "output_type") && !get(kw, "output_type")->is_null()) bad("output_type", "null");
}

// Fills op from the kwargs of its kind (the first argument is read by the caller).
void read_kwargs(TfOp& op, const Kwargs& kw) {
  bool none = false;
  switch (op.kind) {
    case TfOpKind::kBinary:
      if (!get(kw, "y")) bad("call", "a second operand 'y' for " + op.function);
      op.b = operand(*get(kw, "y"), "y");
      return;
    case TfOpKind::kUnary:
      if (op.function == "cast") read_cast(op, kw);
      return;
    case TfOpKind::kActivation:
      return read_activation(op, kw);
    case TfOpKind::kSoftmax:
    case TfOpKind::kConcat:
    case TfOpKind::kStack:
    case TfOpKind::kExpandDims:
      return read_axis(op, kw);
    case TfOpKind::kReduce:
      op.axes = ints(get(kw, "axis"), "axis", &none);
      if (none) bad("axis", "the axes to reduce (axis None reduces over the batch axis too)");
      op.keepdims = flag(get(kw, "keepdims"), "keepdims");
      return;
    case TfOpKind::kReshape:
      if (!get(kw, "shape") || !get(kw, "shape")->is_array())
        bad("shape", "a list of sizes with -1 first (the batch axis)");
      for (const Json& e : *get(kw, "shape"))
        op.shape.push_back(e.is_null() ? -1 : config_int(e, -1).value_or(-2));
      return;
    case TfOpKind::kSqueeze:
      op.axes = ints(get(kw, "axis"), "axis");
      return;
    case TfOpKind::kTranspose:
      op.perm = ints(get(kw, "perm"), "perm", &none);
      if (none) bad("perm", "a permutation (perm None reverses the batch axis too)");
      if (flag(get(kw, "conjugate"), "conjugate")) bad("conjugate", "false");
      return;
    case TfOpKind::kSlice:
      return read_slice(op, kw);
    case TfOpKind::kMatmul:
      return read_matmul(op, kw);
  }
}

// Each input index 0..n-1 used exactly once over the call's arguments.
int count_inputs(const Json& v, std::vector<int>& seen, int depth) {
  if (depth > 8) return 0;
  const int k = input_index(v);
  if (k >= 0) {
    seen.push_back(k);
    return 1;
  }
  int n = 0;
  if (v.is_array() || v.is_object())
    for (const Json& e : v) n += count_inputs(e, seen, depth + 1);
  return n;
}

}  // namespace

std::vector<std::string> tf_op_function_names() {
  std::vector<std::string> v;
  for (const FnRow& f : fn_table()) v.push_back(f.name);
  std::sort(v.begin(), v.end());
  return v;
}

TfOp parse_tf_op(const std::string& function, const Json& call) {
  const FnRow* row = nullptr;
  for (const FnRow& f : fn_table())
    if (function == f.name) row = &f;
  if (!row) {
    std::string list;
    for (const std::string& n : tf_op_function_names()) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError(
        "function", "unsupported TensorFlow operation '" + function + "'; expected one of " + list);
  }
  TfOp op;
  op.function = function;
  op.kind = row->kind;
  op.binary = static_cast<BinaryOp>(row->sub);
  op.unary = static_cast<UnaryOp>(row->sub);
  op.reduce = static_cast<ReduceOp>(row->sub);
  op.act.kind = static_cast<Act>(row->sub);
  if (!call.is_object() || !call.contains("first"))
    bad("call", "{\"first\": <first argument>, \"kwargs\": {...}} for " + function);
  for (auto it = call.begin(); it != call.end(); ++it)
    if (it.key() != "first" && it.key() != "kwargs")
      bad("call", "only the keys first and kwargs, got '" + it.key() + "'");
  const Json& first = call["first"];
  const Json kwargs = call.value("kwargs", Json::object());
  if (!kwargs.is_object()) bad("call", "kwargs as an object, got " + kwargs.dump());
  std::map<std::string, const Json*> kw;
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    const bool known =
        it.key() == "name" || std::any_of(row->kwargs.begin(), row->kwargs.end(),
                                          [&](const char* k) { return it.key() == k; });
    if (!known) {
      std::string list = "name";
      for (const char* k : row->kwargs) list += std::string(", ") + k;
      bad(it.key(), "an argument " + function + " takes (" + list + "), not '" + it.key() + "'");
    }
    if (it.key() != "name") kw[it.key()] = &it.value();
  }
  if (op.kind == TfOpKind::kBinary) {
    op.a = operand(first, "first");
  } else if (op.kind == TfOpKind::kConcat || op.kind == TfOpKind::kStack) {
    if (!first.is_array() || first.empty())
      bad("first", "a list of tensors for " + function + ", got " + first.dump());
    for (const Json& e : first) tensor(e, "first");
  } else {
    op.a.input = tensor(first, "first");
  }
  read_kwargs(op, kw);
  if (op.kind == TfOpKind::kBinary && op.a.input < 0 && op.b.input < 0)
    bad("call", "at least one tensor operand for " + function);
  std::vector<int> seen;
  op.num_inputs = count_inputs(call, seen, 0);
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i)
    if (seen[i] != static_cast<int>(i))
      bad("call", "the inputs numbered 0.." + std::to_string(seen.size() - 1) + " once each");
  if (op.num_inputs == 0) bad("call", "a tensor argument");
  return op;
}

}  // namespace nnfleet
