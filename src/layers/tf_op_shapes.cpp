// Shape rules of the TensorFlow operations (layers/tf_op.h), over per-sample shapes: TensorFlow's
// axis k (batch = 0) is per-sample axis k - 1, and an operation on the batch axis is refused.
#include <algorithm>
#include <set>

#include "layers/layer_util.h"
#include "layers/tf_op.h"

namespace nnfleet {
namespace {

std::string shapes_str(const std::vector<Shape>& in) {
  std::string s;
  for (const auto& x : in) s += (s.empty() ? "" : ", ") + keras_shape(x);
  return s;
}

[[noreturn]] void refuse(const TfOp& op, const std::vector<Shape>& in, const std::string& why) {
  throw ModelError(op.function + " on " + shapes_str(in) + ": " + why);
}

// Full-rank axis `axis` (batch = 0, negative from the end) of a tensor of full rank `full` as a
// per-sample axis; refuses the batch axis and axes outside.
int sample_axis(const TfOp& op, const std::vector<Shape>& in, int64_t axis, int full) {
  const int64_t v = axis < 0 ? axis + full : axis;
  if (v < 0 || v >= full)
    refuse(op, in,
           "axis " + std::to_string(axis) + " is outside the tensor's " + std::to_string(full) +
               " axes");
  if (v == 0)
    refuse(op, in,
           "axis " + std::to_string(axis) +
               " is the batch axis; expected an axis of the samples (nnfleet keeps the "
               "samples of a batch apart)");
  return static_cast<int>(v - 1);
}

Shape operand_shape(const TfOperand& o, const std::vector<Shape>& in) {
  return o.input >= 0 ? in[static_cast<size_t>(o.input)] : o.shape;
}

Shape binary_shape(const TfOp& op, const std::vector<Shape>& in) {
  Shape sa = operand_shape(op.a, in), sb = operand_shape(op.b, in);
  const bool ta = op.a.input >= 0, tb = op.b.input >= 0;
  // A constant lines up with the trailing axes; one with a size-1 leading axis for the batch
  // broadcasts over it.
  auto fit = [&](Shape& c, const Shape& t) {
    while (c.rank() > t.rank() && c[0] == 1) {
      Shape d;
      for (int i = 1; i < c.rank(); ++i) d.push_back(c[i]);
      c = d;
    }
    if (c.rank() > t.rank())
      refuse(op, in, "the constant of shape " + c.str() + " has more axes than the samples");
  };
  if (ta && !tb) fit(sb, sa);
  if (tb && !ta) fit(sa, sb);
  if (ta && tb && sa.rank() != sb.rank())
    refuse(op, in,
           "the two tensors have different ranks, so numpy broadcasting would pair an "
           "axis with the batch axis; expected tensors of the same rank");
  const int rank = std::max(sa.rank(), sb.rank());
  Shape out;
  for (int i = 0; i < rank; ++i) {
    const int ia = i - (rank - sa.rank()), ib = i - (rank - sb.rank());
    const int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
    if (da != db && da != 1 && db != 1)
      refuse(op, in,
             "shapes " + sa.str() + " and " + sb.str() +
                 " do not broadcast; expected equal sizes or 1 on each axis");
    out.push_back(std::max(da, db));
  }
  return out;
}

Shape reduce_shape(const TfOp& op, const std::vector<Shape>& in) {
  const Shape& s = in[0];
  std::set<int> axes;
  for (int64_t ax : op.axes)
    if (!axes.insert(sample_axis(op, in, ax, s.rank() + 1)).second)
      refuse(op, in, "axis " + std::to_string(ax) + " is named twice");
  Shape out;
  for (int i = 0; i < s.rank(); ++i)
    if (!axes.count(i))
      out.push_back(s[i]);
    else if (op.keepdims)
      out.push_back(1);
  // Every sample axis reduced: TensorFlow's output is [N]; nnfleet's samples keep one value.
  if (out.rank() == 0) out.push_back(1);
  return out;
}

Shape join_shape(const TfOp& op, const std::vector<Shape>& in) {
  const bool stack = op.kind == TfOpKind::kStack;
  const int ax = sample_axis(op, in, op.axis, in[0].rank() + 1 + (stack ? 1 : 0));
  for (const Shape& s : in) {
    bool ok = s.rank() == in[0].rank();
    for (int i = 0; ok && i < s.rank(); ++i) ok = s[i] == in[0][i] || (!stack && i == ax);
    if (!ok)
      refuse(op, in,
             stack ? "expected inputs of one shape"
                   : "expected equal shapes except on the concatenation axis");
  }
  Shape out;
  for (int i = 0; i < in[0].rank(); ++i) {
    if (stack && i == ax) out.push_back(static_cast<int64_t>(in.size()));
    int64_t d = in[0][i];
    if (!stack && i == ax) {
      d = 0;
      for (const Shape& s : in) d += s[i];
    }
    out.push_back(d);
  }
  if (stack && ax == in[0].rank()) out.push_back(static_cast<int64_t>(in.size()));
  if (out.rank() > Shape::kMaxRank) refuse(op, in, "the output has too many axes");
  return out;
}

Shape reshape_shape(const TfOp& op, const std::vector<Shape>& in) {
  if (op.shape.empty() || op.shape[0] != -1)
    refuse(op, in,
           "shape " + Json(op.shape).dump() +
               " does not keep the batch axis; expected -1 (or None) first");
  Shape out;
  int64_t known = 1, free_at = -1;
  for (size_t i = 1; i < op.shape.size(); ++i) {
    const int64_t d = op.shape[i];
    if (d == -1 && free_at < 0) {
      free_at = static_cast<int64_t>(i - 1);
      out.push_back(1);
      continue;
    }
    if (d < 1) refuse(op, in, "shape " + Json(op.shape).dump() + " has a bad size");
    out.push_back(d);
    known *= d;
  }
  if (out.rank() == 0) out.push_back(1);
  if (free_at >= 0 && in[0].size() % known == 0)
    out[static_cast<int>(free_at)] = in[0].size() / known;
  if (out.size() != in[0].size())
    refuse(op, in,
           "shape " + Json(op.shape).dump() + " does not hold the " + std::to_string(in[0].size()) +
               " values of a sample");
  return out;
}

Shape squeeze_shape(const TfOp& op, const std::vector<Shape>& in) {
  const Shape& s = in[0];
  std::set<int> axes;
  for (int64_t ax : op.axes) {
    const int i = sample_axis(op, in, ax, s.rank() + 1);
    if (s[i] != 1)
      refuse(
          op, in,
          "axis " + std::to_string(ax) + " has size " + std::to_string(s[i]) + "; expected size 1");
    axes.insert(i);
  }
  Shape out;
  for (int i = 0; i < s.rank(); ++i)
    if (!(op.axes.empty() ? s[i] == 1 : axes.count(i) > 0)) out.push_back(s[i]);
  if (out.rank() == 0) out.push_back(1);
  return out;
}

Shape transpose_shape(const TfOp& op, const std::vector<Shape>& in) {
  const Shape& s = in[0];
  std::vector<int64_t> p = op.perm;
  for (int64_t& v : p)
    if (v < 0) v += s.rank() + 1;
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(p.size()) == s.rank() + 1;
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
  if (!ok) refuse(op, in, "perm " + Json(op.perm).dump() + " is not a permutation of its axes");
  if (p[0] != 0) refuse(op, in, "perm " + Json(op.perm).dump() + " moves the batch axis");
  Shape out;
  for (size_t i = 1; i < p.size(); ++i) out.push_back(s[static_cast<int>(p[i] - 1)]);
  return out;
}

Shape matmul_shape(const TfOp& op, const std::vector<Shape>& in) {
  const Shape& sa = in[static_cast<size_t>(op.a.input)];
  const Shape sb = operand_shape(op.b, in);
  const bool tb = op.b.input >= 0;
  if (tb ? sa.rank() < 2 || sa.rank() != sb.rank() : sb.rank() != 2)
    refuse(op, in,
           tb ? "expected two tensors of one rank with at least 2 axes per sample (a "
                "product over the batch axis mixes samples)"
              : "expected a constant matrix as the second operand");
  if (op.transpose_a && sa.rank() < 2)
    refuse(op, in, "transpose_a would swap an axis with the batch axis");
  const int r = sa.rank();
  const int64_t m = r >= 2 ? sa[op.transpose_a ? r - 1 : r - 2] : 1;
  const int64_t k = sa[op.transpose_a ? r - 2 : r - 1];
  const int rb = sb.rank();
  const int64_t kb = sb[op.transpose_b ? rb - 1 : rb - 2], n = sb[op.transpose_b ? rb - 2 : rb - 1];
  for (int i = 0; tb && i < r - 2; ++i)
    if (sa[i] != sb[i]) refuse(op, in, "the leading axes differ; expected them equal");
  if (k != kb)
    refuse(op, in, "inner sizes " + std::to_string(k) + " and " + std::to_string(kb) + " differ");
  Shape out;
  for (int i = 0; i < r - 2; ++i) out.push_back(sa[i]);
  if (r >= 2) out.push_back(m);
  out.push_back(n);
  return out;
}

// Python's slice.indices over an axis of size `dim`: the first index and the count.
void range_of(const SliceItem& s, int64_t dim, int64_t* first, int64_t* count) {
  auto clamp = [&](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
  int64_t start, stop;
  if (s.step > 0) {
    start = s.has_start ? clamp(s.start < 0 ? s.start + dim : s.start, 0, dim) : 0;
    stop = s.has_stop ? clamp(s.stop < 0 ? s.stop + dim : s.stop, 0, dim) : dim;
    *count = stop > start ? (stop - start + s.step - 1) / s.step : 0;
  } else {
    start = s.has_start ? clamp(s.start < 0 ? s.start + dim : s.start, -1, dim - 1) : dim - 1;
    stop = s.has_stop ? clamp(s.stop < 0 ? s.stop + dim : s.stop, -1, dim - 1) : -1;
    *count = start > stop ? (start - stop - s.step - 1) / -s.step : 0;
  }
  *first = start;
}

}  // namespace

std::string resolve_slice(const std::vector<SliceItem>& spec, const Shape& in, ResolvedSlice* out) {
  using Kind = SliceItem::Kind;
  const int full = in.rank() + 1;
  int consuming = 0, ellipses = 0;
  for (const SliceItem& s : spec) {
    consuming += s.kind == Kind::kIndex || s.kind == Kind::kRange;
    ellipses += s.kind == Kind::kEllipsis;
  }
  if (ellipses > 1) return "the slice has more than one Ellipsis";
  if (consuming > full)
    return "the slice indexes more axes than the tensor's " + std::to_string(full);
  ResolvedSlice r;
  r.in_rank = in.rank();
  int axis = -1;  // the full-rank axis the next entry applies to (-1: the batch axis)
  auto walk_whole = [&](int a) {
    r.start[a] = 0;
    r.step[a] = 1;
    r.count[a] = in[a];
    r.out_dims[r.out_rank] = in[a];
    r.out_from[r.out_rank++] = a;
  };
  for (const SliceItem& s : spec) {
    if (r.out_rank >= Shape::kMaxRank) return "the slice makes too many axes";
    if (s.kind == Kind::kEllipsis) {
      const int n = full - consuming;
      for (int i = 0; i < n; ++i, ++axis)
        if (axis >= 0) walk_whole(axis);
      continue;
    }
    if (s.kind == Kind::kNewAxis) {
      if (axis < 0) return "tf.newaxis before the batch axis would move it";
      r.out_dims[r.out_rank] = 1;
      r.out_from[r.out_rank++] = -1;
      continue;
    }
    if (axis < 0) {
      const bool whole = s.kind == Kind::kRange && !s.has_start && !s.has_stop && s.step == 1;
      if (!whole) return "the slice indexes the batch axis; expected ':' (or '...') first";
      ++axis;
      continue;
    }
    const int64_t dim = in[axis];
    if (s.kind == Kind::kIndex) {
      const int64_t i = s.index < 0 ? s.index + dim : s.index;
      if (i < 0 || i >= dim)
        return "index " + std::to_string(s.index) + " is out of range for axis " +
               std::to_string(axis + 1) + " of size " + std::to_string(dim);
      r.start[axis] = i;
      r.step[axis] = 1;
      r.count[axis] = 1;
      r.indexed[axis] = true;
    } else {
      range_of(s, dim, &r.start[axis], &r.count[axis]);
      r.step[axis] = s.step;
      if (r.count[axis] == 0) return "the slice of axis " + std::to_string(axis + 1) + " is empty";
      r.out_dims[r.out_rank] = r.count[axis];
      r.out_from[r.out_rank++] = axis;
    }
    ++axis;
  }
  if (axis < 0) return "the slice indexes the batch axis; expected ':' (or '...') first";
  for (; axis < in.rank(); ++axis) {
    if (r.out_rank >= Shape::kMaxRank) return "the slice makes too many axes";
    walk_whole(axis);
  }
  if (r.out_rank == 0) {  // every sample axis indexed: TensorFlow's [N] kept as one value
    r.out_dims[0] = 1;
    r.out_from[0] = -1;
    r.out_rank = 1;
  }
  if (out) *out = r;
  return {};
}

Shape tf_op_output_shape(const TfOp& op, const std::vector<Shape>& in) {
  if (static_cast<int>(in.size()) != op.num_inputs)
    throw ModelError(op.function + " takes " + std::to_string(op.num_inputs) + " tensor(s), got " +
                     std::to_string(in.size()));
  switch (op.kind) {
    case TfOpKind::kBinary:
      return binary_shape(op, in);
    case TfOpKind::kUnary:
    case TfOpKind::kActivation:
      return in[0];
    case TfOpKind::kSoftmax:
      sample_axis(op, in, op.axis, in[0].rank() + 1);
      return in[0];
    case TfOpKind::kReduce:
      return reduce_shape(op, in);
    case TfOpKind::kConcat:
    case TfOpKind::kStack:
      return join_shape(op, in);
    case TfOpKind::kReshape:
      return reshape_shape(op, in);
    case TfOpKind::kExpandDims: {
      const int ax = sample_axis(op, in, op.axis, in[0].rank() + 2);
      if (in[0].rank() >= Shape::kMaxRank) refuse(op, in, "the output has too many axes");
      Shape out;
      for (int i = 0; i <= in[0].rank(); ++i) {
        if (i == ax) out.push_back(1);
        if (i < in[0].rank()) out.push_back(in[0][i]);
      }
      return out;
    }
    case TfOpKind::kSqueeze:
      return squeeze_shape(op, in);
    case TfOpKind::kTranspose:
      return transpose_shape(op, in);
    case TfOpKind::kSlice: {
      ResolvedSlice r;
      const std::string why = resolve_slice(op.slice, in[0], &r);
      if (!why.empty()) refuse(op, in, why);
      Shape out;
      for (int i = 0; i < r.out_rank; ++i) out.push_back(r.out_dims[i]);
      return out;
    }
    case TfOpKind::kMatmul:
      return matmul_shape(op, in);
  }
  return in[0];
}

}  // namespace nnfleet
