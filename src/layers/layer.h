// The layer contract, written once. Every layer kind in src/layers/ implements it.
//
// A layer is an immutable description (its Keras config) plus its math; it owns no tensors.
// Shapes are per sample (no batch axis), NHWC, and are planned once when a Model is built:
//   output_shape()  checks the input shapes and says the output shape; throws ModelError with a
//                   rule and a hint (the model adds "failed to build model 'x': layer 3
//                   'dense_1'").
//   param_specs()   the layer's weights in Keras order (trainable before non-trainable), each with
//                   its Keras name ("kernel", "bias", "gamma", ...), shape and initializer.
//   cache_floats()  floats kept from forward to backward for a batch of n (e.g. a pre-activation).
//   scratch_floats() floats of temporary space one call may use (e.g. an im2col buffer).
// forward() and backward() then run over views handed in through LayerArgs; they never allocate,
// validate or throw. backward() ACCUMULATES (+=) into dx and dparams; the caller zeroes them
// (or asks a layer that can for a write instead: LayerArgs::dx_fresh, dparams_fresh).
// One layer object may serve many copies of a model at once from different threads: every method
// is const and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "layers/initializer.h"
#include "tensor/rng.h"
#include "tensor/shape.h"

namespace nnfleet {

struct ParamSpec {
  std::string name;  // Keras weight name: kernel, bias, gamma, beta, moving_mean, ...
  Shape shape;
  Initializer init;
  bool trainable = true;
};

// Keras masks: a sequence may carry a mask [n, T] over its first per-sample axis (1 = a real
// step, 0 = padding), made by a layer from its input (Masking; Embedding with mask_zero) and
// passed along by the network to the layers after it, as Keras's _keras_mask:
enum class MaskUse {
  kDrop,       // the output carries no mask (Keras layers that do not support masking)
  kPropagate,  // the output carries the input's mask unchanged (Dropout, Activation, ...)
  kConsume,    // reads the input's mask (LayerArgs::mask); passes it on when passes_mask()
  kProduce,    // makes its output's mask from its input (writes LayerArgs::mask_out in forward)
};

struct LayerArgs {
  int n = 0;                         // batch rows in this call (<= the planned maximum)
  bool training = false;             // dropout active, batch norm uses batch statistics
  int n_inputs = 1;                  // number of inputs (x, dx and in_shapes entries)
  const Shape* in_shapes = nullptr;  // per-sample shapes of the inputs
  Shape out_shape;                   // per-sample shape of the output
  const float* const* x = nullptr;   // inputs, each [n, in_shapes[i]]
  float* y = nullptr;                // output [n, out_shape]
  float* const* extra_y = nullptr;   // outputs 1.. (extra_output_shapes), each [n, shape]
  float* const* params = nullptr;    // per param_specs() entry (forward may update
                                     // non-trainable ones in training, e.g. moving_mean)
  float* cache = nullptr;            // cache_floats(n) floats, kept from forward to backward
  float* scratch = nullptr;          // scratch_floats(n) floats
  Rng* rng = nullptr;                // the model's training randomness (dropout)
  const float* mask = nullptr;       // [n, in_shapes[0][0]] the input's mask, or null
  float* mask_out = nullptr;         // kProduce only: [n, in_shapes[0][0]], written by forward
  // Backward only.
  const float* dy = nullptr;  // [n, out_shape]
  // dy's own block when the caller lets backward overwrite it (nothing reads it after this call),
  // else null; the caller then planned the scratch with scratch_floats_owning_dy().
  float* dy_own = nullptr;
  const float* const* extra_dy = nullptr;  // per extra output, shaped as it (zeros when unused)
  float* const* dx = nullptr;              // per input, += ; an entry may be null (not needed)
  // Set only for a layer whose writes_whole_dx() is true: dx's blocks hold stale numbers, not
  // zeros, and backward writes every element of each as 0.0f + its gradient (the bits += gives
  // on zeros), so the caller skips zeroing them (W1's m7: 8.7 MB a step).
  bool dx_fresh = false;
  // Set only for a layer whose writes_whole_dparams() is true: the same for dparams (W1's m7:
  // its Dense kernel gradient, 4.7 MB a batch piece, written instead of read, added to and
  // zeroed again; nothing to zero at all).
  bool dparams_fresh = false;
  float* const* dparams = nullptr;  // per trainable param, in param_specs() order, +=
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  // The Keras class name ("Dense").
  virtual const char* class_name() const = 0;
  // Number of inputs: 1 for most layers; 0 means two or more (Add, Concatenate).
  virtual int arity() const { return 1; }
  // Inputs a layer may take after its arity() ones, all or none (a recurrent layer's initial
  // states, Keras's initial_state); the layer tells from in.size() / LayerArgs::n_inputs.
  virtual int optional_inputs() const { return 0; }

  virtual Shape output_shape(const std::vector<Shape>& in) const = 0;
  // Shapes of the outputs after the first (a recurrent layer's states with return_state); a
  // layer with extra outputs writes them through LayerArgs::extra_y and reads their gradients
  // from extra_dy. Empty for single-output layers.
  virtual std::vector<Shape> extra_output_shapes(const std::vector<Shape>& /*in*/) const {
    return {};
  }
  virtual std::vector<ParamSpec> param_specs(const std::vector<Shape>& /*in*/) const { return {}; }
  virtual size_t cache_floats(const std::vector<Shape>& /*in*/, int /*n*/) const { return 0; }
  virtual size_t scratch_floats(const std::vector<Shape>& /*in*/, int /*n*/) const { return 0; }
  // The scratch when backward is handed LayerArgs::dy_own: a layer that puts a temporary of dy's
  // shape over dy itself (a fused ReLU's pre-activation gradient) needs that much less.
  virtual size_t scratch_floats_owning_dy(const std::vector<Shape>& in, int n) const {
    return scratch_floats(in, n);
  }
  virtual void forward(const LayerArgs& a) const = 0;
  virtual void backward(const LayerArgs& a) const = 0;
  // True when backward honours LayerArgs::dx_fresh (writes all of dx then, never reads it).
  virtual bool writes_whole_dx() const { return false; }
  // True when backward honours LayerArgs::dparams_fresh (writes all of dparams then).
  virtual bool writes_whole_dparams() const { return false; }

  // The layer's Keras config (the "config" object Keras writes, including "name").
  virtual Json keras_config() const = 0;
  // FLOPs (multiply-add = 2) of one forward pass of one sample; for scheduling and benchmarks.
  virtual double forward_flops(const std::vector<Shape>& /*in*/) const { return 0.0; }
  // True when a training forward couples the samples of a batch (batch statistics), so the
  // batch cannot be split into pieces computed apart.
  virtual bool mixes_samples() const { return false; }
  // True when the output is the input's bytes unchanged, only reshaped (Flatten, Reshape). The
  // network then plans the output as a view of the input (the same pointer, no copy) and its
  // gradient as the input's gradient (the consumers add straight into it), and calls neither
  // forward nor backward of the layer; both must still copy and add for other callers (tests).
  // Such a layer has one input, one output, no parameters and no cache, and makes no mask.
  virtual bool output_aliases_input() const { return false; }
  // Nonzero when the layer reads its input as integer ids in [0, limit) (Embedding). Such a layer
  // must take the model input directly, whose values the data loaders check (Model::id_input());
  // forward may then index with them unchecked. Ids get no gradient.
  virtual int64_t input_id_limit() const { return 0; }
  // How the layer treats a mask on its input (see MaskUse); for kConsume, whether its output
  // keeps the time axis and so carries the mask on (a recurrent layer with return_sequences).
  virtual MaskUse mask_use() const { return MaskUse::kDrop; }
  virtual bool passes_mask() const { return false; }
  // Why this layer cannot be trained (an option accepted for inference whose training effect is
  // not implemented, e.g. a regularizer), as "<rule>; expected <x>"; empty when it can.
  virtual std::string training_refusal() const { return {}; }

 private:
  std::string name_;
};

}  // namespace nnfleet
