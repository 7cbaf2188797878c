// TFOpLambda and SlicingOpLambda: tf.keras's serialized TensorFlow operations (x + y,
// tf.reduce_mean, tf.concat, x[:, 1:3], ...) and Keras 3's keras.ops calls, which the Keras
// reader turns into these kinds. The operation is parsed once (layers/tf_op.h); forward and
// backward walk per-sample tensors with strides. Gradients follow TensorFlow's: maximum/minimum
// send the gradient to x where x >= y (x <= y), reduce_max/min split it among ties, pow's
// exponent gradient is 0 where the base is not positive, integer casts pass none.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "layers/axes.h"
#include "layers/kinds.h"
#include "layers/layer_util.h"
#include "layers/tf_op.h"

namespace nnfleet {
namespace {

// Row-major strides of `s` into `st`.
void strides_of(const Shape& s, int64_t* st) {
  int64_t k = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = k;
    k *= s[i];
  }
}

// Calls f(o, p, q) for every flat offset o of a tensor of `dims` (rank r), with p and q the
// offsets given by strides sp and sq (odometer order).
template <typename F>
void walk(int r, const int64_t* dims, const int64_t* sp, const int64_t* sq, F f) {
  int64_t idx[Shape::kMaxRank] = {};
  int64_t total = 1;
  for (int i = 0; i < r; ++i) total *= dims[i];
  int64_t p = 0, q = 0;
  for (int64_t o = 0; o < total; ++o) {
    f(o, p, q);
    for (int i = r - 1; i >= 0; --i) {
      p += sp[i];
      q += sq[i];
      if (++idx[i] < dims[i]) break;
      p -= sp[i] * dims[i];
      q -= sq[i] * dims[i];
      idx[i] = 0;
    }
  }
}

// Strides of operand shape `s` walked over output shape `out` (right-aligned; 0 where it
// broadcasts).
void broadcast_strides(const Shape& s, const Shape& out, int64_t* st) {
  int64_t own[Shape::kMaxRank] = {};
  strides_of(s, own);
  for (int i = 0; i < out.rank(); ++i) {
    const int j = i - (out.rank() - s.rank());
    st[i] = j >= 0 && s[j] != 1 ? own[j] : 0;
  }
}

float binary_value(BinaryOp op, float x, float y) {
  switch (op) {
    case BinaryOp::kAdd:
      return x + y;
    case BinaryOp::kSub:
      return x - y;
    case BinaryOp::kMul:
      return x * y;
    case BinaryOp::kDiv:
      return x / y;
    case BinaryOp::kMax:
      return std::max(x, y);
    case BinaryOp::kMin:
      return std::min(x, y);
    case BinaryOp::kPow:
      return std::pow(x, y);
  }
  return 0.0f;
}

// d(x op y)/dx and /dy.
void binary_grad(BinaryOp op, float x, float y, float* gx, float* gy) {
  switch (op) {
    case BinaryOp::kAdd:
      *gx = 1.0f, *gy = 1.0f;
      return;
    case BinaryOp::kSub:
      *gx = 1.0f, *gy = -1.0f;
      return;
    case BinaryOp::kMul:
      *gx = y, *gy = x;
      return;
    case BinaryOp::kDiv:
      *gx = 1.0f / y, *gy = -x / (y * y);
      return;
    case BinaryOp::kMax:
      *gx = x >= y ? 1.0f : 0.0f, *gy = 1.0f - *gx;
      return;
    case BinaryOp::kMin:
      *gx = x <= y ? 1.0f : 0.0f, *gy = 1.0f - *gx;
      return;
    case BinaryOp::kPow:
      *gx = y * std::pow(x, y - 1.0f);
      *gy = x > 0.0f ? std::pow(x, y) * std::log(x) : 0.0f;
      return;
  }
}

float unary_value(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kIdentity:
      return x;
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kSquare:
      return x * x;
    case UnaryOp::kSqrt:
      return std::sqrt(x);
    case UnaryOp::kRsqrt:
      return 1.0f / std::sqrt(x);
    case UnaryOp::kExp:
      return std::exp(x);
    case UnaryOp::kLog:
      return std::log(x);
    case UnaryOp::kAbs:
      return std::fabs(x);
    case UnaryOp::kReciprocal:
      return 1.0f / x;
    case UnaryOp::kCastInt:
      return std::trunc(x);
    case UnaryOp::kCastBool:
      return x != 0.0f ? 1.0f : 0.0f;
  }
  return x;
}

// dy/dx from x and y = op(x).
float unary_grad(UnaryOp op, float x, float y) {
  switch (op) {
    case UnaryOp::kIdentity:
      return 1.0f;
    case UnaryOp::kNeg:
      return -1.0f;
    case UnaryOp::kSquare:
      return 2.0f * x;
    case UnaryOp::kSqrt:
      return 0.5f / y;
    case UnaryOp::kRsqrt:
      return -0.5f * y * y * y;
    case UnaryOp::kExp:
      return y;
    case UnaryOp::kLog:
      return 1.0f / x;
    case UnaryOp::kAbs:
      return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f;
    case UnaryOp::kReciprocal:
      return -y * y;
    case UnaryOp::kCastInt:
    case UnaryOp::kCastBool:
      return 0.0f;
  }
  return 0.0f;
}

class TfOpLayer final : public Layer {
 public:
  TfOpLayer(LayerConfig& c, const std::string& name, const char* cls) : Layer(name), cls_(cls) {
    function_ = c.get_string("function");
    const Json* call = c.get_raw("call");
    call_ = call ? *call : Json();
    op_ = parse_tf_op(function_, call_);
    const bool getitem = op_.kind == TfOpKind::kSlice;
    if (getitem != (std::string(cls) == "SlicingOpLambda"))
      c.fail("function", getitem ? "a function of TFOpLambda (getitem is SlicingOpLambda's)"
                                 : "__operators__.getitem (SlicingOpLambda's only function)");
  }
  const char* class_name() const override { return cls_; }
  int arity() const override { return op_.num_inputs; }
  Shape output_shape(const std::vector<Shape>& in) const override {
    return tf_op_output_shape(op_, in);
  }
  bool output_aliases_input() const override {
    return op_.kind == TfOpKind::kReshape || op_.kind == TfOpKind::kExpandDims ||
           op_.kind == TfOpKind::kSqueeze ||
           (op_.kind == TfOpKind::kUnary && op_.unary == UnaryOp::kIdentity);
  }
  size_t scratch_floats(const std::vector<Shape>& in, int /*n*/) const override {
    const bool rows = op_.kind == TfOpKind::kSoftmax || op_.kind == TfOpKind::kReduce;
    return rows ? 3 * static_cast<size_t>(in[0].size()) : 0;
  }
  void forward(const LayerArgs& a) const override;
  void backward(const LayerArgs& a) const override;
  Json keras_config() const override {
    Json j = base_keras_config(*this);
    j["function"] = function_;
    j["call"] = call_;
    return j;
  }

 private:
  const float* operand(const TfOperand& o, const LayerArgs& a) const {
    return o.input >= 0 ? a.x[o.input] : o.values.data();
  }
  Shape operand_shape(const TfOperand& o, const LayerArgs& a) const {
    return o.input >= 0 ? a.in_shapes[o.input] : o.shape;
  }
  void binary(const LayerArgs& a, bool back) const;
  void elementwise(const LayerArgs& a, bool back) const;
  void softmax(const LayerArgs& a, bool back) const;
  void reduce(const LayerArgs& a, bool back) const;
  void reduce_rows(const float* x, int64_t rows, int64_t cols, float* y) const;
  void reduce_rows_back(const float* x, const float* y, const float* dy, int64_t rows, int64_t cols,
                        float* dx) const;
  void join(const LayerArgs& a, bool back) const;
  void copy(const LayerArgs& a, bool back) const;
  void gather(const LayerArgs& a, bool back) const;
  void matmul(const LayerArgs& a, bool back) const;

  const char* cls_;
  std::string function_;
  Json call_;
  TfOp op_;
};

void TfOpLayer::forward(const LayerArgs& a) const {
  switch (op_.kind) {
    case TfOpKind::kBinary:
      return binary(a, false);
    case TfOpKind::kUnary:
    case TfOpKind::kActivation:
      return elementwise(a, false);
    case TfOpKind::kSoftmax:
      return softmax(a, false);
    case TfOpKind::kReduce:
      return reduce(a, false);
    case TfOpKind::kConcat:
    case TfOpKind::kStack:
      return join(a, false);
    case TfOpKind::kReshape:
    case TfOpKind::kExpandDims:
    case TfOpKind::kSqueeze:
      return copy(a, false);
    case TfOpKind::kTranspose:
    case TfOpKind::kSlice:
      return gather(a, false);
    case TfOpKind::kMatmul:
      return matmul(a, false);
  }
}

void TfOpLayer::backward(const LayerArgs& a) const {
  switch (op_.kind) {
    case TfOpKind::kBinary:
      return binary(a, true);
    case TfOpKind::kUnary:
    case TfOpKind::kActivation:
      return elementwise(a, true);
    case TfOpKind::kSoftmax:
      return softmax(a, true);
    case TfOpKind::kReduce:
      return reduce(a, true);
    case TfOpKind::kConcat:
    case TfOpKind::kStack:
      return join(a, true);
    case TfOpKind::kReshape:
    case TfOpKind::kExpandDims:
    case TfOpKind::kSqueeze:
      return copy(a, true);
    case TfOpKind::kTranspose:
    case TfOpKind::kSlice:
      return gather(a, true);
    case TfOpKind::kMatmul:
      return matmul(a, true);
  }
}

// y = a op b over the broadcast shape; a tensor operand moves one sample per row, a constant
// stays.
void TfOpLayer::binary(const LayerArgs& a, bool back) const {
  const Shape& out = a.out_shape;
  int64_t sa[Shape::kMaxRank] = {}, sb[Shape::kMaxRank] = {};
  broadcast_strides(operand_shape(op_.a, a), out, sa);
  broadcast_strides(operand_shape(op_.b, a), out, sb);
  const float* xa = operand(op_.a, a);
  const float* xb = operand(op_.b, a);
  float* da = back && op_.a.input >= 0 ? a.dx[op_.a.input] : nullptr;
  float* db = back && op_.b.input >= 0 ? a.dx[op_.b.input] : nullptr;
  const int64_t pa = op_.a.input >= 0 ? a.in_shapes[op_.a.input].size() : 0;
  const int64_t pb = op_.b.input >= 0 ? a.in_shapes[op_.b.input].size() : 0;
  const int64_t per = out.size();
  int64_t dims[Shape::kMaxRank] = {};
  for (int i = 0; i < out.rank(); ++i) dims[i] = out[i];
  for (int n = 0; n < a.n; ++n) {
    const float* x = xa + n * pa;
    const float* y = xb + n * pb;
    if (!back) {
      float* o = a.y + n * per;
      walk(out.rank(), dims, sa, sb,
           [&](int64_t k, int64_t p, int64_t q) { o[k] = binary_value(op_.binary, x[p], y[q]); });
      continue;
    }
    const float* dy = a.dy + n * per;
    float* gx = da ? da + n * pa : nullptr;
    float* gy = db ? db + n * pb : nullptr;
    walk(out.rank(), dims, sa, sb, [&](int64_t k, int64_t p, int64_t q) {
      float fx = 0.0f, fy = 0.0f;
      binary_grad(op_.binary, x[p], y[q], &fx, &fy);
      if (gx) gx[p] += fx * dy[k];
      if (gy) gy[q] += fy * dy[k];
    });
  }
}

void TfOpLayer::elementwise(const LayerArgs& a, bool back) const {
  const int64_t m = static_cast<int64_t>(rows_floats(a.n, a.out_shape));
  const float* x = a.x[0];
  if (op_.kind == TfOpKind::kActivation) {
    if (!back)
      activation_forward(op_.act, m, 1, x, a.y);
    else if (a.dx[0])
      activation_backward(op_.act, m, 1, x, a.y, a.dy, a.dx[0]);
    return;
  }
  if (!back) {
    for (int64_t i = 0; i < m; ++i) a.y[i] = unary_value(op_.unary, x[i]);
    return;
  }
  if (!a.dx[0] || op_.unary == UnaryOp::kCastInt || op_.unary == UnaryOp::kCastBool) return;
  for (int64_t i = 0; i < m; ++i) a.dx[0][i] += unary_grad(op_.unary, x[i], a.y[i]) * a.dy[i];
}

// Softmax over one axis: the sample viewed as rows along that axis (layers/axes.h).
void TfOpLayer::softmax(const LayerArgs& a, bool back) const {
  const Shape& s = a.in_shapes[0];
  const int64_t ax = op_.axis < 0 ? op_.axis + s.rank() : op_.axis - 1;
  const unsigned mask = 1u << ax;
  const AxisSplit sp = split_axes(s, mask);
  const Activation act{Act::kSoftmax};
  const int64_t per = s.size();
  float* ys = a.scratch;
  float* dys = ys + per;
  float* dxs = dys + per;
  for (int i = 0; i < a.n; ++i) {
    const float* xi = a.x[0] + i * per;
    float* yi = a.y + i * per;
    if (!back) {
      for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { ys[k] = xi[o]; });
      activation_forward(act, sp.rows, sp.cols, ys, ys);
      for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { yi[o] = ys[k]; });
      continue;
    }
    if (!a.dx[0]) return;
    const float* dyi = a.dy + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) {
      ys[k] = yi[o];
      dys[k] = dyi[o];
      dxs[k] = 0.0f;
    });
    activation_backward(act, sp.rows, sp.cols, ys, ys, dys, dxs);
    float* dxi = a.dx[0] + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { dxi[o] += dxs[k]; });
  }
}

// Each sample gathered as rows of the reduced axes (one row per output value).
void TfOpLayer::reduce(const LayerArgs& a, bool back) const {
  const Shape& s = a.in_shapes[0];
  unsigned mask = 0;
  for (int64_t ax : op_.axes) mask |= 1u << (ax < 0 ? ax + s.rank() : ax - 1);
  const AxisSplit sp = split_axes(s, mask);
  const int64_t per = s.size();
  float* xs = a.scratch;
  float* gs = xs + per;
  for (int i = 0; i < a.n; ++i) {
    const float* xi = a.x[0] + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { xs[k] = xi[o]; });
    float* yi = a.y + i * sp.rows;
    if (!back) {
      reduce_rows(xs, sp.rows, sp.cols, yi);
      continue;
    }
    if (!a.dx[0]) return;
    std::fill(gs, gs + per, 0.0f);
    reduce_rows_back(xs, yi, a.dy + i * sp.rows, sp.rows, sp.cols, gs);
    float* dxi = a.dx[0] + i * per;
    for_each_axis_offset(s, mask, [&](int64_t o, int64_t k) { dxi[o] += gs[k]; });
  }
}

void TfOpLayer::reduce_rows(const float* x, int64_t rows, int64_t cols, float* y) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = x + r * cols;
    float acc = op_.reduce == ReduceOp::kProd ? 1.0f : v[0];
    for (int64_t c = op_.reduce == ReduceOp::kProd ? 0 : 1; c < cols; ++c) {
      switch (op_.reduce) {
        case ReduceOp::kMean:
        case ReduceOp::kSum:
          acc += v[c];
          break;
        case ReduceOp::kMax:
          acc = std::max(acc, v[c]);
          break;
        case ReduceOp::kMin:
          acc = std::min(acc, v[c]);
          break;
        case ReduceOp::kProd:
          acc *= v[c];
          break;
      }
    }
    y[r] = op_.reduce == ReduceOp::kMean ? acc / static_cast<float>(cols) : acc;
  }
}

void TfOpLayer::reduce_rows_back(const float* x, const float* y, const float* dy, int64_t rows,
                                 int64_t cols, float* dx) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = x + r * cols;
    float* g = dx + r * cols;
    if (op_.reduce == ReduceOp::kMean || op_.reduce == ReduceOp::kSum) {
      const float d = op_.reduce == ReduceOp::kMean ? dy[r] / static_cast<float>(cols) : dy[r];
      for (int64_t c = 0; c < cols; ++c) g[c] += d;
    } else if (op_.reduce == ReduceOp::kProd) {
      // The product of the others, without dividing by a zero.
      for (int64_t c = 0; c < cols; ++c) {
        float p = 1.0f;
        for (int64_t j = 0; j < cols; ++j)
          if (j != c) p *= v[j];
        g[c] += p * dy[r];
      }
    } else {
      int64_t ties = 0;
      for (int64_t c = 0; c < cols; ++c) ties += v[c] == y[r];
      const float d = dy[r] / static_cast<float>(ties);
      for (int64_t c = 0; c < cols; ++c)
        if (v[c] == y[r]) g[c] += d;
    }
  }
}

// Concat / stack: the output interleaves chunks of the inputs along the axis.
void TfOpLayer::join(const LayerArgs& a, bool back) const {
  const Shape& out = a.out_shape;
  const bool stack = op_.kind == TfOpKind::kStack;
  const int full = out.rank() + 1;
  const int ax = static_cast<int>(op_.axis < 0 ? op_.axis + full : op_.axis) - 1;
  int64_t outer = a.n, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= out[i];
  for (int i = ax + 1; i < out.rank(); ++i) inner *= out[i];
  const int64_t out_row = out[ax] * inner;
  int64_t col = 0;
  for (int k = 0; k < a.n_inputs; ++k) {
    const int64_t len = (stack ? 1 : a.in_shapes[k][ax]) * inner;
    for (int64_t o = 0; o < outer; ++o) {
      if (!back) {
        std::memcpy(a.y + o * out_row + col, a.x[k] + o * len, len * sizeof(float));
      } else if (a.dx[k]) {
        const float* src = a.dy + o * out_row + col;
        float* dst = a.dx[k] + o * len;
        for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
      }
    }
    col += len;
  }
}

void TfOpLayer::copy(const LayerArgs& a, bool back) const {
  const size_t m = rows_floats(a.n, a.out_shape);
  if (!back) {
    std::memcpy(a.y, a.x[0], m * sizeof(float));
  } else if (a.dx[0]) {
    for (size_t i = 0; i < m; ++i) a.dx[0][i] += a.dy[i];
  }
}

// Transpose and slicing: each output value reads one input value, by strides.
void TfOpLayer::gather(const LayerArgs& a, bool back) const {
  const Shape& in = a.in_shapes[0];
  const Shape& out = a.out_shape;
  int64_t ist[Shape::kMaxRank] = {}, src[Shape::kMaxRank] = {}, none[Shape::kMaxRank] = {};
  int64_t dims[Shape::kMaxRank] = {};
  strides_of(in, ist);
  int64_t base = 0;
  if (op_.kind == TfOpKind::kTranspose) {
    for (int i = 0; i < out.rank(); ++i) {
      const int64_t p = op_.perm[static_cast<size_t>(i + 1)];
      src[i] = ist[(p < 0 ? p + in.rank() + 1 : p) - 1];
    }
  } else {
    ResolvedSlice r;
    resolve_slice(op_.slice, in, &r);
    for (int i = 0; i < r.in_rank; ++i) base += r.start[i] * ist[i];
    for (int i = 0; i < r.out_rank; ++i)
      src[i] = r.out_from[i] >= 0 ? r.step[r.out_from[i]] * ist[r.out_from[i]] : 0;
  }
  for (int i = 0; i < out.rank(); ++i) dims[i] = out[i];
  const int64_t pin = in.size(), pout = out.size();
  for (int n = 0; n < a.n; ++n) {
    const float* x = a.x[0] + n * pin + base;
    if (!back) {
      float* y = a.y + n * pout;
      walk(out.rank(), dims, src, none, [&](int64_t k, int64_t p, int64_t) { y[k] = x[p]; });
    } else if (a.dx[0]) {
      float* dx = a.dx[0] + n * pin + base;
      const float* dy = a.dy + n * pout;
      walk(out.rank(), dims, src, none, [&](int64_t k, int64_t p, int64_t) { dx[p] += dy[k]; });
    }
  }
}

// y[l] = A[l] @ B[l] for each leading index l of a sample (B a constant matrix: the same for
// every l). Element (m, k) of A sits at m * am + k * ak; (k, j) of B at k * bk + j * bj.
void TfOpLayer::matmul(const LayerArgs& a, bool back) const {
  const Shape& sa = a.in_shapes[op_.a.input];
  const Shape& out = a.out_shape;
  const int r = sa.rank();
  const int64_t K = sa[op_.transpose_a ? r - 2 : r - 1];
  const int64_t M = r >= 2 ? sa[op_.transpose_a ? r - 1 : r - 2] : 1;
  const int64_t N = out[out.rank() - 1];
  const int64_t am = op_.transpose_a ? 1 : K, ak = op_.transpose_a ? M : 1;
  const int64_t bk = op_.transpose_b ? 1 : N, bj = op_.transpose_b ? K : 1;
  const bool tb = op_.b.input >= 0;
  const int64_t lead = sa.size() / (M * K);
  const int64_t b_block = tb ? K * N : 0;
  const float* A = a.x[op_.a.input];
  const float* B = operand(op_.b, a);
  float* dA = back ? a.dx[op_.a.input] : nullptr;
  float* dB = back && tb ? a.dx[op_.b.input] : nullptr;
  for (int64_t l = 0; l < a.n * lead; ++l) {
    const float* Al = A + l * M * K;
    const float* Bl = B + l * b_block;
    const float* dY = back ? a.dy + l * M * N : nullptr;
    float* Y = a.y + l * M * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        if (!back) {
          float acc = 0.0f;
          for (int64_t k = 0; k < K; ++k) acc += Al[m * am + k * ak] * Bl[k * bk + j * bj];
          Y[m * N + j] = acc;
          continue;
        }
        const float d = dY[m * N + j];
        for (int64_t k = 0; k < K; ++k) {
          if (dA) dA[l * M * K + m * am + k * ak] += d * Bl[k * bk + j * bj];
          if (dB) dB[l * b_block + k * bk + j * bj] += d * Al[m * am + k * ak];
        }
      }
  }
}

// The pieces of the examples' configs.
Json in_ref(int k) { return {{"class_name", "__input__"}, {"config", {{"index", k}}}}; }
Json op_cfg(const char* fn, Json first, Json kwargs = Json::object()) {
  return {{"function", fn}, {"call", {{"first", std::move(first)}, {"kwargs", std::move(kwargs)}}}};
}
Json slice_json(Json start, Json stop, Json step) {
  return {{"start", std::move(start)}, {"stop", std::move(stop)}, {"step", std::move(step)}};
}

}  // namespace

std::unique_ptr<Layer> make_tf_op_lambda(LayerConfig& c, const std::string& name) {
  return std::make_unique<TfOpLayer>(c, name, "TFOpLambda");
}
std::unique_ptr<Layer> make_slicing_op_lambda(LayerConfig& c, const std::string& name) {
  return std::make_unique<TfOpLayer>(c, name, "SlicingOpLambda");
}

// sqrt, rsqrt, log and pow need positive inputs, which the gradient check does not draw: they are
// checked in tests/layers/tf_op_lambda_test.cpp.
std::vector<LayerExample> tf_op_lambda_examples() {
  const Shape s23{2, 3};
  std::vector<LayerExample> v = {
      {op_cfg("__operators__.add", in_ref(0), {{"y", in_ref(1)}, {"name", nullptr}}), {s23, s23}},
      {op_cfg("math.subtract", in_ref(0), {{"y", in_ref(1)}}), {s23, Shape{1, 3}}},
      {op_cfg("math.multiply", in_ref(0), {{"y", in_ref(1)}}), {Shape{2, 1}, s23}},
      {op_cfg("math.truediv", in_ref(0), {{"y", Json{0.5, -2.0, 4.0}}}), {s23}},
      {op_cfg("math.subtract", 1.5, {{"y", in_ref(0)}}), {s23}},
      {op_cfg("math.multiply", in_ref(0), {{"y", 3.0}}), {s23}},
      {op_cfg("math.maximum", in_ref(0), {{"y", in_ref(1)}}), {s23, s23}},
      {op_cfg("math.minimum", in_ref(0), {{"y", Json{{0.3}, {-0.2}}}}), {s23}},
      {op_cfg("math.pow", in_ref(0), {{"y", 2.0}}), {s23}},
      {op_cfg("math.negative", in_ref(0)), {s23}},
      {op_cfg("math.square", in_ref(0)), {s23}},
      {op_cfg("math.exp", in_ref(0)), {s23}},
      {op_cfg("math.abs", in_ref(0)), {s23}},
      {op_cfg("math.reciprocal", in_ref(0)), {s23}},
      {op_cfg("cast", in_ref(0), {{"dtype", "float32"}}), {s23}},
      {op_cfg("math.tanh", in_ref(0)), {s23}},
      {op_cfg("nn.relu6", in_ref(0)), {s23}},
      {op_cfg("nn.gelu", in_ref(0), {{"approximate", true}}), {s23}},
      {op_cfg("nn.leaky_relu", in_ref(0), {{"alpha", 0.1}}), {s23}},
      {op_cfg("nn.silu", in_ref(0)), {s23}},
      {op_cfg("nn.softmax", in_ref(0), {{"axis", 1}}), {Shape{3, 4}}},
      {op_cfg("nn.softmax", in_ref(0)), {Shape{3, 4}}},
      {op_cfg("math.reduce_mean", in_ref(0), {{"axis", 1}}), {Shape{3, 4}}},
      {op_cfg("math.reduce_sum", in_ref(0), {{"axis", Json{-1, 1}}, {"keepdims", true}}),
       {Shape{2, 3, 2}}},
      {op_cfg("math.reduce_max", in_ref(0), {{"axis", -1}}), {Shape{3, 4}}},
      {op_cfg("math.reduce_min", in_ref(0), {{"axis", 2}}), {Shape{3, 4}}},
      {op_cfg("math.reduce_prod", in_ref(0), {{"axis", 1}, {"keepdims", true}}), {Shape{3, 2}}},
      {op_cfg("concat", Json{in_ref(0), in_ref(1)}, {{"axis", 1}}), {s23, Shape{1, 3}}},
      {op_cfg("concat", Json{in_ref(0), in_ref(1)}, {{"axis", -1}}), {s23, Shape{2, 2}}},
      {op_cfg("stack", Json{in_ref(0), in_ref(1)}, {{"axis", -1}}), {s23, s23}},
      {op_cfg("stack", Json{in_ref(0), in_ref(1), in_ref(2)}, {{"axis", 1}}), {s23, s23, s23}},
      {op_cfg("reshape", in_ref(0), {{"shape", Json{-1, 3, 2}}}), {s23}},
      {op_cfg("expand_dims", in_ref(0), {{"axis", -1}}), {s23}},
      {op_cfg("squeeze", in_ref(0), {{"axis", 2}}), {Shape{3, 1}}},
      {op_cfg("compat.v1.transpose", in_ref(0), {{"perm", Json{0, 2, 1}}}), {s23}},
      {op_cfg("transpose", in_ref(0), {{"perm", Json{0, 3, 1, 2}}}), {Shape{2, 3, 4}}},
      {op_cfg("linalg.matmul", in_ref(0), {{"b", in_ref(1)}}), {Shape{2, 3}, Shape{3, 4}}},
      {op_cfg("linalg.matmul", in_ref(0), {{"b", in_ref(1)}, {"transpose_b", true}}),
       {Shape{5, 2, 3}, Shape{5, 4, 3}}},
      {op_cfg("matmul", in_ref(0), {{"b", in_ref(1)}, {"transpose_a", true}}),
       {Shape{3, 2}, Shape{3, 4}}},
      {op_cfg("linalg.matmul", in_ref(0), {{"b", Json{{1.0, -1.0}, {0.5, 2.0}, {0.0, 1.0}}}}),
       {Shape{3}}},
  };
  return v;
}

std::vector<LayerExample> slicing_op_lambda_examples() {
  const Json all = slice_json(nullptr, nullptr, nullptr);
  const Json ell = {{"class_name", "__ellipsis__"}};
  auto sl = [](Json spec) {
    return op_cfg("__operators__.getitem", in_ref(0), {{"slice_spec", spec}});
  };
  return {
      {sl(Json{all, slice_json(1, 3, nullptr)}), {Shape{4, 2}}},
      {sl(Json{all, 0}), {Shape{4, 2}}},
      {sl(Json{ell, -1}), {Shape{3, 4}}},
      {sl(Json{all, slice_json(nullptr, nullptr, -2), nullptr}), {Shape{5}}},
      {sl(Json{ell, slice_json(-3, nullptr, nullptr), nullptr, 1}), {Shape{2, 4, 3}}},
      {sl(ell), {Shape{2, 2}}},
  };
}

}  // namespace nnfleet
