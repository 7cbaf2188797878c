// ONNX exporters of TFOpLambda and SlicingOpLambda (layers/tf_op.h): each TensorFlow operation
// maps to the ONNX operator of the same meaning (Add, Mul, ReduceMean, Concat, Reshape, Transpose,
// Slice, MatMul, Softmax, ...), over tensors with the batch axis first, so the operation's axes
// are used as they are. Constants become initializers; numpy broadcasting is ONNX's too.
#include <limits>

#include "io/onnx/onnx_builder.h"
#include "layers/tf_op.h"

namespace nnfleet::onnx_export {
namespace {

TfOp op_of(const LayerNode& n) {
  return parse_tf_op(n.config.value("function", std::string()), n.config.value("call", Json()));
}

std::string operand(Builder& b, const LayerNode& n, const TfOperand& o) {
  if (o.input >= 0) return n.inputs[static_cast<size_t>(o.input)];
  if (o.shape.rank() == 0) return b.scalar(n.layer.name() + "/const", o.values[0]);
  return b.weight(n.layer.name() + "/const", std::vector<int64_t>(o.shape.begin(), o.shape.end()),
                  o.values);
}

// A TensorFlow axis (batch = 0, negative from the end) of a tensor of `full` axes, made positive.
int64_t full_axis(int64_t axis, int full) { return axis < 0 ? axis + full : axis; }

std::string binary(Builder& b, const LayerNode& n, const TfOp& op) {
  static const char* names[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  return b.node(names[static_cast<int>(op.binary)], {operand(b, n, op.a), operand(b, n, op.b)},
                n.layer.name());
}

std::string unary(Builder& b, const LayerNode& n, const TfOp& op) {
  const std::string& x = n.inputs[0];
  const std::string base = n.layer.name();
  switch (op.unary) {
    case UnaryOp::kIdentity:
      return b.node("Identity", {x}, base);
    case UnaryOp::kNeg:
      return b.node("Neg", {x}, base);
    case UnaryOp::kSquare:
      return b.node("Mul", {x, x}, base);
    case UnaryOp::kSqrt:
      return b.node("Sqrt", {x}, base);
    case UnaryOp::kRsqrt:
      return b.node("Reciprocal", {b.node("Sqrt", {x}, base)}, base);
    case UnaryOp::kExp:
      return b.node("Exp", {x}, base);
    case UnaryOp::kLog:
      return b.node("Log", {x}, base);
    case UnaryOp::kAbs:
      return b.node("Abs", {x}, base);
    case UnaryOp::kReciprocal:
      return b.node("Reciprocal", {x}, base);
    case UnaryOp::kCastInt:
    case UnaryOp::kCastBool: {
      // Cast to the integer (truncating) or bool type and back to the graph's float.
      const auto to =
          op.unary == UnaryOp::kCastInt ? onnx::TensorProto::INT64 : onnx::TensorProto::BOOL;
      const std::string c = b.node("Cast", {x}, base, {attr("to", to)});
      return b.node("Cast", {c}, base, {attr("to", onnx::TensorProto::FLOAT)});
    }
  }
  return x;
}

std::string reduce(Builder& b, const LayerNode& n, const TfOp& op) {
  const int full = n.plan.in_shapes[0].rank() + 1;
  std::vector<int64_t> axes;
  for (int64_t a : op.axes) axes.push_back(full_axis(a, full));
  static const char* names[] = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"};
  const std::string base = n.layer.name();
  std::string y;
  if (op.reduce == ReduceOp::kSum)  // opset 13 takes ReduceSum's axes as an input
    y = b.node("ReduceSum", {n.inputs[0], b.ints(base + "/axes", axes)}, base,
               {attr("keepdims", op.keepdims ? 1 : 0)});
  else
    y = b.node(names[static_cast<int>(op.reduce)], {n.inputs[0]}, base,
               {attr("axes", axes), attr("keepdims", op.keepdims ? 1 : 0)});
  return b.reshape(y, n.plan.out_shape, base);  // every sample axis reduced: [N] -> [N, 1]
}

std::string join(Builder& b, const LayerNode& n, const TfOp& op) {
  const int full = n.plan.out_shape.rank() + 1;
  const int64_t axis = full_axis(op.axis, full);
  std::vector<std::string> parts = n.inputs;
  if (op.kind == TfOpKind::kStack)
    for (std::string& p : parts)
      p = b.node("Unsqueeze", {p, b.ints(n.layer.name() + "/axes", {axis})}, n.layer.name());
  return b.node("Concat", parts, n.layer.name(), {attr("axis", axis)});
}

std::string slice(Builder& b, const LayerNode& n, const TfOp& op) {
  ResolvedSlice r;
  resolve_slice(op.slice, n.plan.in_shapes[0], &r);
  std::vector<int64_t> starts, ends, axes, steps;
  for (int i = 0; i < r.in_rank; ++i) {
    const int64_t dim = n.plan.in_shapes[0][i];
    if (r.start[i] == 0 && r.step[i] == 1 && r.count[i] == dim) continue;
    int64_t end = r.start[i] + r.count[i] * r.step[i];
    // A negative step that runs past index 0: ONNX reads a negative end from the back.
    if (end < 0) end = std::numeric_limits<int64_t>::min() / 2;
    starts.push_back(r.start[i]);
    ends.push_back(end);
    axes.push_back(i + 1);
    steps.push_back(r.step[i]);
  }
  std::string y = n.inputs[0];
  const std::string base = n.layer.name();
  if (!axes.empty())
    y = b.node("Slice",
               {y, b.ints(base + "/starts", starts), b.ints(base + "/ends", ends),
                b.ints(base + "/axes", axes), b.ints(base + "/steps", steps)},
               base);
  return b.reshape(y, n.plan.out_shape, base);  // drops indexed axes, adds new ones
}

std::string matmul(Builder& b, const LayerNode& n, const TfOp& op) {
  const std::string base = n.layer.name();
  std::string x = n.inputs[static_cast<size_t>(op.a.input)];
  auto swap_last = [&](const std::string& t, int rank) {
    std::vector<int64_t> perm;
    for (int i = 0; i < rank; ++i) perm.push_back(i);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return b.transpose(t, perm, base);
  };
  const int ra = n.plan.in_shapes[static_cast<size_t>(op.a.input)].rank() + 1;
  if (op.transpose_a) x = swap_last(x, ra);
  std::string y = operand(b, n, op.b);
  const int rb = op.b.input >= 0 ? ra : 2;
  if (op.transpose_b) y = swap_last(y, rb);
  return b.node("MatMul", {x, y}, base);
}

std::string export_tf_op(Builder& b, const LayerNode& n) {
  const TfOp op = op_of(n);
  const int full = n.plan.in_shapes[0].rank() + 1;
  switch (op.kind) {
    case TfOpKind::kBinary:
      return binary(b, n, op);
    case TfOpKind::kUnary:
      return unary(b, n, op);
    case TfOpKind::kActivation:
      return b.activation(n.inputs[0], op.act, n.layer.name());
    case TfOpKind::kSoftmax:
      return b.node("Softmax", {n.inputs[0]}, n.layer.name(),
                    {attr("axis", full_axis(op.axis, full))});
    case TfOpKind::kReduce:
      return reduce(b, n, op);
    case TfOpKind::kConcat:
    case TfOpKind::kStack:
      return join(b, n, op);
    case TfOpKind::kReshape:
    case TfOpKind::kExpandDims:
    case TfOpKind::kSqueeze:
      return b.reshape(n.inputs[0], n.plan.out_shape, n.layer.name());
    case TfOpKind::kTranspose: {
      std::vector<int64_t> perm;
      for (int64_t p : op.perm) perm.push_back(full_axis(p, full));
      return b.transpose(n.inputs[0], perm, n.layer.name());
    }
    case TfOpKind::kSlice:
      return slice(b, n, op);
    case TfOpKind::kMatmul:
      return matmul(b, n, op);
  }
  refuse(n, "its operation " + op.function + " has no ONNX form");
}

}  // namespace

std::string export_tf_op_lambda(Builder& b, const LayerNode& n) { return export_tf_op(b, n); }
std::string export_slicing_op_lambda(Builder& b, const LayerNode& n) { return export_tf_op(b, n); }

}  // namespace nnfleet::onnx_export
