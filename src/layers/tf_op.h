// tf.keras's serialized TensorFlow operations (TFOpLambda, SlicingOpLambda) and Keras 3's
// keras.ops calls, parsed into one operation: an enum and its constant arguments. Nothing from a
// file is executed: the function name picks a row of a fixed table, and a name outside it is
// refused listing the supported ones.
//
// The layer's config is tf.keras's TFOpLambda config plus the call it was made from:
//   {"name", "trainable", "dtype", "function": "math.reduce_mean",
//    "call": {"first": <first argument>, "kwargs": {"axis": 1, ...}}}
// where a tensor argument is {"class_name": "__input__", "config": {"index": k}} (the layer's
// input k) and anything else is a constant (numbers, nested lists, tf.keras slice dicts
// {"start", "stop", "step"}, {"class_name": "__ellipsis__"}, null for tf.newaxis). The Keras
// reader builds "call" from the node's arguments; the writers turn it back into them.
//
// Axes count the batch axis as 0 (as TensorFlow sees them); the layers work on per-sample shapes
// and refuse an operation over or across the batch axis by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/activation.h"
#include "tensor/shape.h"

namespace nnfleet {

enum class TfOpKind {
  kBinary,      // element-wise with numpy broadcasting: a op b
  kUnary,       // element-wise math (UnaryOp)
  kActivation,  // element-wise Activation (relu, gelu, ...)
  kSoftmax,     // over `axis`
  kReduce,      // over `axes` (empty with all_axes: every per-sample axis is refused)
  kConcat,      // the inputs along `axis`
  kStack,       // the inputs along a new `axis`
  kReshape,     // to `shape` (the batch entry -1)
  kExpandDims,  // a size-1 axis at `axis`
  kSqueeze,     // size-1 `axes` (all per-sample size-1 axes when empty)
  kTranspose,   // by `perm` (perm[0] == 0)
  kSlice,       // x[slice_spec]
  kMatmul,      // a @ b, with transpose_a / transpose_b
};
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMax, kMin, kPow };
enum class UnaryOp {
  kIdentity,  // cast to a float type
  kNeg,
  kSquare,
  kSqrt,
  kRsqrt,
  kExp,
  kLog,
  kAbs,
  kReciprocal,
  kCastInt,   // cast to an integer type: truncation toward zero, no gradient (TensorFlow)
  kCastBool,  // x != 0, no gradient
};
enum class ReduceOp { kMean, kSum, kMax, kMin, kProd };

// An operand: the layer's input `input`, or (input < 0) a constant of `shape` (rank 0: scalar).
struct TfOperand {
  int input = -1;
  std::vector<float> values;
  Shape shape;
};

// One entry of a slice spec: an index, a range (start/stop absent = None), tf.newaxis, or "...".
struct SliceItem {
  enum class Kind { kIndex, kRange, kNewAxis, kEllipsis } kind = Kind::kRange;
  int64_t index = 0;
  int64_t start = 0, stop = 0, step = 1;
  bool has_start = false, has_stop = false;
};

struct TfOp {
  std::string function;  // the tf.keras name ("math.reduce_mean")
  TfOpKind kind = TfOpKind::kUnary;
  BinaryOp binary = BinaryOp::kAdd;
  UnaryOp unary = UnaryOp::kIdentity;
  ReduceOp reduce = ReduceOp::kMean;
  Activation act;
  int num_inputs = 1;                             // tensors the call takes (the layer's inputs)
  TfOperand a, b;                                 // kBinary; kMatmul (a a tensor)
  std::vector<int64_t> axes;                      // kReduce, kSqueeze (as given, batch axis 0)
  bool keepdims = false;                          // kReduce
  int64_t axis = -1;                              // kSoftmax, kConcat, kStack, kExpandDims
  std::vector<int64_t> shape;                     // kReshape, with the batch entry
  std::vector<int64_t> perm;                      // kTranspose, with the batch entry
  bool transpose_a = false, transpose_b = false;  // kMatmul
  std::vector<SliceItem> slice;                   // kSlice
  std::string dtype;                              // cast
};

// Parses a TFOpLambda / SlicingOpLambda config's "function" and "call". Throws ConfigError naming
// the key (an unknown function lists the supported ones; an unknown keyword argument names it).
TfOp parse_tf_op(const std::string& function, const Json& call);
// The tf.keras function names parse_tf_op accepts, sorted.
std::vector<std::string> tf_op_function_names();

// The per-sample output shape of `op` over per-sample inputs `in`; throws ModelError for shapes
// the operation refuses (an axis naming the batch axis, shapes that do not broadcast, ...).
Shape tf_op_output_shape(const TfOp& op, const std::vector<Shape>& in);

// A slice spec resolved against a per-sample input. Per input axis: the first index, the step
// and the count walked (an indexed axis: its index, count 1, and it leaves the output). Per
// output axis: its size and the input axis it walks (-1 for a new axis of size 1).
struct ResolvedSlice {
  int in_rank = 0, out_rank = 0;
  int64_t start[Shape::kMaxRank] = {}, step[Shape::kMaxRank] = {}, count[Shape::kMaxRank] = {};
  bool indexed[Shape::kMaxRank] = {};
  int64_t out_dims[Shape::kMaxRank] = {};
  int out_from[Shape::kMaxRank] = {};
};
// Resolves op.slice against per-sample `in`; returns an empty string, or why the spec does not
// apply ("index 5 is out of range for axis 2 of size 4").
std::string resolve_slice(const std::vector<SliceItem>& spec, const Shape& in, ResolvedSlice* out);

}  // namespace nnfleet
