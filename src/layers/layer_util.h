// Small helpers shared by layer implementations: shape rules with uniform messages, the common
// Keras config keys, and conv geometry from a config.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "kernels/conv1d.h"
#include "kernels/conv2d.h"
#include "layers/activation_names.h"
#include "layers/layer.h"

namespace nnfleet {

// Shape with a leading None batch axis, as Keras prints it: "[None,13,13,8]".
// Whether s.size() <= limit, computed without overflowing (a shape's dimensions come from configs).
inline bool size_at_most(const Shape& s, int64_t limit) {
  int64_t n = 1;
  for (int i = 0; i < s.rank(); ++i) {
    if (s[i] < 0 || (s[i] > 0 && n > limit / s[i])) return false;
    n *= s[i];
  }
  return n <= limit;
}

inline std::string keras_shape(const Shape& s) {
  Shape b = s.with_batch(-1);
  return b.str();
}

// Throws ModelError "expects rank <rank+1> input, got [None,...]; <hint>" unless
// in.rank() == rank (per-sample rank; the message counts the batch axis like Keras).
void require_rank(const Shape& in, int rank, const char* hint = "");

// {"name": ..., "trainable": true, "dtype": "float32"}: the keys every Keras layer config has.
Json base_keras_config(const Layer& l);

// Spatial options of Conv2D, DepthwiseConv2D and the pools.
struct Conv2dOptions {
  int kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  bool same = false;
};
// Fills the geometry for a per-sample input [H,W,C]; throws ModelError when the output would be
// empty ("kernel 5x5 does not fit input [None,3,3,8] with padding 'valid'"), or when the sizes
// (each up to limits::kMaxConfigInt from a config) are too large for the geometry's int
// arithmetic.
ConvGeometry make_geometry(const Conv2dOptions& o, const Shape& in, int64_t out_channels);

// n * s floats, the common cache/scratch size.
inline size_t rows_floats(int n, const Shape& s) { return static_cast<size_t>(n) * s.size(); }

}  // namespace nnfleet

namespace nnfleet {
// Reads kernel_size (or pool_size), strides, padding and dilation_rate. For pools, pass
// `window_key` "pool_size" with default 2: strides default to the pool size (Keras).
Conv2dOptions parse_conv_options(LayerConfig& c, const char* window_key, bool is_pool);
Json conv_options_to_keras(const Conv2dOptions& o, const char* window_key, bool is_pool);
// Layers with a fused activation (Dense, Conv2D, DepthwiseConv2D) write their pre-activation z to
// fused_z(), then call fused_activation_forward(). z is kept (in the layer's cache, of
// fused_cache_floats()) only when the activation's derivative needs it; otherwise the activation
// runs in place on y and is differentiated from y (activation_backward_from_y).
bool fused_keeps_z(const Activation& act);
inline size_t fused_cache_floats(const Activation& act, size_t floats) {
  return fused_keeps_z(act) ? floats : 0;
}
inline float* fused_z(const Activation& act, const LayerArgs& a) {
  return fused_keeps_z(act) ? a.cache : a.y;
}
void fused_activation_forward(const Activation& act, int64_t rows, int64_t features,
                              const LayerArgs& a);
// The gradient with respect to z [rows, features], given a.dy. Linear: dy itself; ReLU handed
// a.dy_own: written there (over dy); otherwise written to `buf` (rows * features floats).
const float* pre_activation_grad(const Activation& act, int64_t rows, int64_t features,
                                 const LayerArgs& a, float* buf);
// Reads an initializer option with its Keras default.
Initializer parse_init_option(LayerConfig& c, const std::string& key, const char* def);

// What a layer with a kernel, an optional bias and a fused activation (Dense, Conv1D, Conv2D,
// Conv2DTranspose) reads from its Keras config and writes back: activation, use_bias and the two
// initializers. (Its regularizers and constraints are training keys, taken out of the config
// before the layer is built: model/layer_training.h.)
struct KernelBias {
  Activation act;
  bool use_bias = true;
  Initializer kinit, binit;

  KernelBias() = default;
  explicit KernelBias(LayerConfig& c);
  // The kernel of shape `kernel`, then with use_bias the bias [units].
  std::vector<ParamSpec> params(Shape kernel, int64_t units) const;
  // The cache and the scratch the fused activation needs for `out_floats` outputs.
  size_t cache_floats(size_t out_floats) const { return fused_cache_floats(act, out_floats); }
  size_t scratch_floats(size_t out_floats) const {
    return act.kind == Act::kLinear ? 0 : out_floats;
  }
  // The same when backward may overwrite dy (LayerArgs::dy_own): a ReLU's gradient goes there.
  size_t scratch_floats_owning_dy(size_t out_floats) const {
    return act.kind == Act::kRelu ? 0 : scratch_floats(out_floats);
  }
  const float* bias(const LayerArgs& a) const { return use_bias ? a.params[1] : nullptr; }
  float* dbias(const LayerArgs& a) const { return use_bias ? a.dparams[1] : nullptr; }
  // activation, use_bias, kernel/bias_initializer, and null kernel/bias regularizers and
  // constraints (put_layer_training fills in the model's own); with `activity`, a null
  // activity_regularizer too (Keras 3's convolutions write one, its Dense does not).
  void to_keras(Json& j, bool activity) const;
};
}  // namespace nnfleet

namespace nnfleet {
// Spatial options of Conv1D and the 1-D pools: window (kernel_size or pool_size), stride,
// dilation, padding (causal for Conv1D only).
struct Conv1dOptions {
  int k = 1, s = 1, d = 1;
  Padding1d padding = Padding1d::kValid;
};
// Reads kernel_size/pool_size (an int or a list of one), strides, padding, dilation_rate and
// data_format. For pools strides default to the pool size and null means that too (Keras).
Conv1dOptions parse_conv1d_options(LayerConfig& c, const char* window_key, bool is_pool);
Json conv1d_options_to_keras(const Conv1dOptions& o, const char* window_key, bool is_pool);
// The geometry over a per-sample input [T,C]; throws ModelError when the output would be empty
// or the sizes are too large for the geometry's int arithmetic.
ConvGeometry make_geometry1d(const Conv1dOptions& o, const Shape& in, int64_t out_channels);
// Keras's 2-D padding and cropping forms (ZeroPadding2D, Cropping2D): an int, [sym_h, sym_w] or
// [[top, bottom], [left, right]], each value >= 0; absent or null means `def` everywhere. Returns
// {top, bottom, left, right}; throws ConfigError for anything else.
std::array<int, 4> parse_pairs2d(LayerConfig& c, const char* key, int def);
}  // namespace nnfleet
