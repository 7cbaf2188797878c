// Keras axis options: parsing, resolution against a per-sample shape, and the row view.
#include "layers/axes.h"

#include "layers/layer_util.h"

namespace nnfleet {

KerasAxes parse_keras_axes(LayerConfig& c, const std::string& key, int64_t def) {
  KerasAxes a;
  const Json* v = c.get_raw(key);
  if (!v || v->is_null()) {
    a.values = {def};
    return a;
  }
  const char* what = "an axis (an int, negative from the end) or a non-empty list of them";
  auto one = [&](const Json& e) {
    const std::optional<int64_t> i = config_int(e, -Shape::kMaxRank - 1);
    if (!i || *i > Shape::kMaxRank + 1) c.fail(key, what);
    a.values.push_back(*i);
  };
  if (v->is_array()) {
    if (v->empty()) c.fail(key, what);
    for (const auto& e : *v) one(e);
    a.is_list = true;
  } else {
    one(*v);
  }
  return a;
}

Json keras_axes_json(const KerasAxes& a) {
  if (!a.is_list) return a.values[0];
  return Json(a.values);
}

unsigned resolve_axes_unchecked(const KerasAxes& a, const Shape& s) {
  unsigned mask = 0;
  for (int64_t v : a.values) {
    const int64_t i = v < 0 ? s.rank() + v : v - 1;
    if (i >= 0 && i < s.rank()) mask |= 1u << i;
  }
  return mask;
}

unsigned resolve_axes(const KerasAxes& a, const Shape& s, const char* what) {
  unsigned mask = 0;
  for (int64_t v : a.values) {
    const int64_t i = v < 0 ? s.rank() + v : v - 1;
    std::string why;
    if (v == 0 || v == -(s.rank() + 1))
      why = "the batch axis cannot be one";
    else if (i < 0 || i >= s.rank())
      why = "the axis is outside the input";
    else if (mask >> i & 1u)
      why = "an axis is repeated";
    if (!why.empty())
      throw ModelError(std::string(what) + " axis " + keras_axes_json(a).dump() + " of input " +
                       keras_shape(s) + ": " + why + "; expected axes from 1 to " +
                       std::to_string(s.rank()) + " (or -1 to -" + std::to_string(s.rank()) +
                       "), each once");
    mask |= 1u << i;
  }
  return mask;
}

AxisSplit split_axes(const Shape& s, unsigned mask) {
  AxisSplit sp;
  int first = s.rank();
  for (int i = 0; i < s.rank(); ++i) {
    if (mask >> i & 1u) {
      sp.cols *= s[i];
      if (first == s.rank()) first = i;
    } else {
      sp.rows *= s[i];
    }
  }
  // Trailing: every axis from the first row axis on is a row axis.
  sp.trailing = true;
  for (int i = first; i < s.rank(); ++i) sp.trailing = sp.trailing && (mask >> i & 1u);
  return sp;
}

}  // namespace nnfleet
