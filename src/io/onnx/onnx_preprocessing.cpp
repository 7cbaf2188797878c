// ONNX exporters of the numeric preprocessing layers (opset 13). Normalization becomes Sub and
// Div (invert: Mul and Add) by constants of the input's rank, with 1 on the reduced axes, folded
// from its config or its weights. Discretization counts the boundaries <= x (GreaterOrEqual
// against the boundaries on a new last axis, summed), which is np.digitize; its ids and
// CategoryEncoding's are then one-hot encoded (Equal against 0..depth-1), reduced over the ids
// axis for multi_hot (ReduceMax) and count (ReduceSum).
#include "io/onnx/onnx_builder.h"
#include "layers/preprocessing.h"

namespace nnfleet::onnx_export {
namespace {

const std::string& base(const LayerNode& n) { return n.layer.name(); }

// ids (float, any shape [N, ...]) encoded as `mode` over `depth`, shaped as the layer's output.
std::string encode_ids(Builder& b, const LayerNode& n, const std::string& ids, int64_t depth) {
  const std::string mode = n.config.value("output_mode", std::string("int"));
  if (mode == "int") return ids;
  // One-hot as ids == [0, 1, ..., depth-1] on a new last axis (ONNX Runtime has no OneHot for
  // float ids); an id outside the range matches nothing, as nnfleet encodes it.
  std::vector<float> range(static_cast<size_t>(depth));
  for (size_t i = 0; i < range.size(); ++i) range[i] = static_cast<float>(i);
  const std::string col = b.node("Unsqueeze", {ids, b.ints(base(n) + "/id_axis", {-1})}, base(n));
  const std::string eq =
      b.node("Equal", {col, b.weight(base(n) + "/range", {depth}, range)}, base(n));
  const std::string hot = b.node("Cast", {eq}, base(n), {attr("to", onnx::TensorProto::FLOAT)});
  if (mode == "one_hot") return b.reshape(hot, n.plan.out_shape, base(n));
  // [N, F, depth] -> [N, depth] over the sample's ids
  if (mode == "multi_hot")
    return b.node("ReduceMax", {hot}, base(n),
                  {attr("axes", std::vector<int64_t>{-2}), attr("keepdims", 0)});
  if (mode == "count")
    return b.node("ReduceSum", {hot, b.ints(base(n) + "/axes", {-2})}, base(n),
                  {attr("keepdims", 0)});
  refuse(n, "its output_mode '" + mode + "' has no ONNX form");
}

}  // namespace

std::string export_normalization(Builder& b, const LayerNode& n) {
  const Shape& in = n.plan.in_shapes[0];
  const NormalizationConstants k = normalization_constants(n.layer, in, n.params.data());
  const std::string mean = b.weight(base(n) + "/mean", k.dims, k.mean);
  const std::string div = b.weight(base(n) + "/divisor", k.dims, k.divisor);
  if (k.invert) return b.node("Add", {b.node("Mul", {n.inputs[0], div}, base(n)), mean}, base(n));
  return b.node("Div", {b.node("Sub", {n.inputs[0], mean}, base(n)), div}, base(n));
}

std::string export_discretization(Builder& b, const LayerNode& n) {
  std::vector<float> bounds;
  for (const Json& v : n.config["bin_boundaries"]) bounds.push_back(v.get<float>());
  if (bounds.empty()) refuse(n, "it has no bin boundaries (every id is 0)");
  const auto nb = static_cast<int64_t>(bounds.size());
  const std::string x =
      b.node("Unsqueeze", {n.inputs[0], b.ints(base(n) + "/axes", {-1})}, base(n));
  const std::string ge =
      b.node("GreaterOrEqual", {x, b.weight(base(n) + "/bounds", {nb}, bounds)}, base(n));
  const std::string hits = b.node("Cast", {ge}, base(n), {attr("to", onnx::TensorProto::FLOAT)});
  const std::string ids =
      b.node("ReduceSum", {hits, b.ints(base(n) + "/last", {-1})}, base(n), {attr("keepdims", 0)});
  return encode_ids(b, n, ids, nb + 1);
}

std::string export_category_encoding(Builder& b, const LayerNode& n) {
  return encode_ids(b, n, n.inputs[0], n.config.value("num_tokens", int64_t{1}));
}

}  // namespace nnfleet::onnx_export
