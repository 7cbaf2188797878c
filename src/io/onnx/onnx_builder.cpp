// The ONNX graph builder and the helpers the per-kind exporters share (see onnx_builder.h).
#include "io/onnx/onnx_builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "layers/activation_names.h"

namespace nnfleet::onnx_export {

Attr attr(const std::string& name, int64_t v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::kInt;
  a.ints = {v};
  return a;
}
Attr attr(const std::string& name, std::vector<int64_t> v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attr attr_f(const std::string& name, float v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::kFloat;
  a.floats = {v};
  return a;
}
Attr attr_fs(const std::string& name, std::vector<float> v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}
Attr attr_s(const std::string& name, const std::string& v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::kString;
  a.strings = {v};
  return a;
}
Attr attr_ss(const std::string& name, std::vector<std::string> v) {
  Attr a;
  a.name = name;
  a.kind = Attr::Kind::kStrings;
  a.strings = std::move(v);
  return a;
}

std::string Builder::fresh(const std::string& base) {
  std::string name = base;
  while (std::find(used_.begin(), used_.end(), name) != used_.end())
    name = base + "_" + std::to_string(++counter_);
  used_.push_back(name);
  return name;
}

std::string Builder::weight(const std::string& base, const std::vector<int64_t>& dims,
                            const float* data) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const std::string bytes(reinterpret_cast<const char*>(data),
                          static_cast<size_t>(n) * sizeof(float));
  std::vector<int>& same_base = weights_[base];
  for (int k : same_base) {
    const onnx::TensorProto& e = g_->initializer(k);
    if (e.raw_data() == bytes &&
        std::equal(e.dims().begin(), e.dims().end(), dims.begin(), dims.end()))
      return e.name();
  }
  same_base.push_back(g_->initializer_size());
  onnx::TensorProto* t = g_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(bytes);
  return name;
}

std::string Builder::ints(const std::string& base, const std::vector<int64_t>& v) {
  onnx::TensorProto* t = g_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
  return name;
}

std::string Builder::scalar(const std::string& base, float v) {
  onnx::TensorProto* t = g_->add_initializer();
  const std::string name = fresh(base);
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(v);
  return name;
}

std::string Builder::node(const std::string& op, const std::vector<std::string>& inputs,
                          const std::string& base, const std::vector<Attr>& attrs, int outputs,
                          std::vector<std::string>* all_outputs) {
  onnx::NodeProto* n = g_->add_node();
  n->set_op_type(op);
  n->set_name(fresh(base + "/" + op));
  for (const auto& i : inputs) n->add_input(i);
  std::string first;
  for (int o = 0; o < outputs; ++o) {
    std::string name = base;
    name.append("/").append(op);
    if (o > 0) name.append(":").append(std::to_string(o));
    const std::string out = fresh(name);
    n->add_output(out);
    if (o == 0) first = out;
    if (all_outputs) all_outputs->push_back(out);
  }
  for (const Attr& a : attrs) {
    onnx::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    switch (a.kind) {
      case Attr::Kind::kInt:
        p->set_type(onnx::AttributeProto::INT);
        p->set_i(a.ints[0]);
        break;
      case Attr::Kind::kInts:
        p->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : a.ints) p->add_ints(v);
        break;
      case Attr::Kind::kFloat:
        p->set_type(onnx::AttributeProto::FLOAT);
        p->set_f(a.floats[0]);
        break;
      case Attr::Kind::kFloats:
        p->set_type(onnx::AttributeProto::FLOATS);
        for (float v : a.floats) p->add_floats(v);
        break;
      case Attr::Kind::kString:
        p->set_type(onnx::AttributeProto::STRING);
        p->set_s(a.strings[0]);
        break;
      case Attr::Kind::kStrings:
        p->set_type(onnx::AttributeProto::STRINGS);
        for (const auto& s : a.strings) p->add_strings(s);
        break;
    }
  }
  return first;
}

std::string Builder::transpose(const std::string& x, const std::vector<int64_t>& perm,
                               const std::string& base) {
  return node("Transpose", {x}, base, {attr("perm", perm)});
}

std::string Builder::reshape(const std::string& x, const Shape& sample, const std::string& base) {
  std::vector<int64_t> dims = {-1};
  for (int64_t d : sample) dims.push_back(d);
  return node("Reshape", {x, ints(base + "/shape", dims)}, base);
}

std::string Builder::activation(const std::string& x, const Activation& a,
                                const std::string& base) {
  switch (a.kind) {
    case Act::kLinear:
      return x;
    case Act::kRelu: {
      const bool inf = std::isinf(a.max_value);
      if (a.threshold == 0.0f && a.alpha == 0.0f && inf) return node("Relu", {x}, base);
      if (a.threshold == 0.0f && inf)
        return node("LeakyRelu", {x}, base, {attr_f("alpha", a.alpha)});
      // Keras's ReLU layer: max_value above it, x on [threshold, max_value), alpha (x -
      // threshold) below.
      const std::string th = scalar(base + "/threshold", a.threshold);
      std::string top = x;
      if (!inf) top = node("Min", {x, scalar(base + "/max_value", a.max_value)}, base);
      const std::string below =
          node("Mul", {node("Sub", {x, th}, base), scalar(base + "/alpha", a.alpha)}, base);
      return node("Where", {node("Less", {x, th}, base), below, top}, base);
    }
    case Act::kSigmoid:
      return node("Sigmoid", {x}, base);
    case Act::kTanh:
      return node("Tanh", {x}, base);
    case Act::kSoftmax:
      return node("Softmax", {x}, base, {attr("axis", -1)});
    case Act::kElu:
      return node("Elu", {x}, base, {attr_f("alpha", a.alpha)});
    case Act::kSelu:
      return node("Selu", {x}, base);
    case Act::kSoftplus:
      return node("Softplus", {x}, base);
    case Act::kSoftsign:
      return node("Softsign", {x}, base);
    case Act::kSwish:
      return node("Mul", {x, node("Sigmoid", {x}, base)}, base);
    case Act::kGelu: {
      // 0.5 x (1 + erf(x / sqrt(2)))
      const std::string e = node(
          "Erf", {node("Mul", {x, scalar(base + "/inv_sqrt2", 0.70710678118654752f)}, base)}, base);
      const std::string one_plus = node("Add", {e, scalar(base + "/one", 1.0f)}, base);
      return node("Mul", {node("Mul", {x, scalar(base + "/half", 0.5f)}, base), one_plus}, base);
    }
    case Act::kGeluTanh: {
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      const std::string x3 = node("Mul", {node("Mul", {x, x}, base), x}, base);
      const std::string inner =
          node("Add", {x, node("Mul", {x3, scalar(base + "/c", 0.044715f)}, base)}, base);
      const std::string t = node(
          "Tanh", {node("Mul", {inner, scalar(base + "/k", 0.7978845608028654f)}, base)}, base);
      const std::string one_plus = node("Add", {t, scalar(base + "/one", 1.0f)}, base);
      return node("Mul", {node("Mul", {x, scalar(base + "/half", 0.5f)}, base), one_plus}, base);
    }
    case Act::kLeakyRelu:
      return node("LeakyRelu", {x}, base, {attr_f("alpha", a.alpha)});
    case Act::kHardSigmoid:  // Keras 3: relu6(x + 3) / 6 = clip(x / 6 + 1/2, 0, 1)
      return node("HardSigmoid", {x}, base, {attr_f("alpha", 1.0f / 6.0f), attr_f("beta", 0.5f)});
    case Act::kExponential:
      return node("Exp", {x}, base);
  }
  throw ModelError("activation '" + activation_name(a) + "' has no ONNX form");
}

std::string Builder::lengths_of_mask(const std::string& mask, const std::string& base) {
  const std::string sum =
      node("ReduceSum", {mask, ints(base + "/axes", {1})}, base, {attr("keepdims", 0)});
  return node("Cast", {sum}, base, {attr("to", onnx::TensorProto::INT32)});
}

void refuse(const LayerNode& n, const std::string& why) {
  throw ModelError("failed to export " + n.where + " to ONNX: " + why);
}

Activation activation_of(const LayerNode& n, const char* key) {
  const Json* v = n.config.contains(key) ? &n.config[key] : nullptr;
  return parse_activation(v, key);
}

std::vector<int64_t> ints_of(const Json& j, const char* key) {
  std::vector<int64_t> v;
  if (!j.contains(key)) return v;
  const Json& x = j[key];
  if (x.is_array()) {
    for (const Json& e : x) v.push_back(e.get<int64_t>());
  } else if (x.is_number()) {
    v.push_back(x.get<int64_t>());
  }
  return v;
}

std::pair<int64_t, int64_t> same_pads(int64_t in, int64_t k, int64_t s, int64_t d) {
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0);
  return {total / 2, total - total / 2};
}

std::vector<int64_t> to_channels_first(int rank) {
  std::vector<int64_t> p = {0, rank + 1};
  for (int i = 1; i <= rank; ++i) p.push_back(i);
  return p;
}

std::vector<int64_t> to_channels_last(int rank) {
  std::vector<int64_t> p = {0};
  for (int i = 2; i <= rank + 1; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

}  // namespace nnfleet::onnx_export
