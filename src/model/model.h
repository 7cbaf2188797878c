// Model: an immutable, validated DAG of layers with one input and one output (Sequential is the
// chain case). Built once; shapes, parameter specs and FLOPs are planned at construction, and one
// Model can be shared read-only by any number of Networks (instances with their own arena).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "model/layer_training.h"
#include "tensor/shape.h"

namespace nnfleet {

// One layer application. inputs are node ids; node id 0 is the model input.
struct ModelNode {
  std::unique_ptr<Layer> layer;
  std::vector<int> inputs;
  LayerTraining training = {};  // regularizers, constraints, trainable: false
};

struct PlannedNode {
  std::vector<Shape> in_shapes;
  Shape out_shape;
  // The layer's param_specs(), except that every weight of a frozen layer is non-trainable (as
  // in Keras's weight lists): the model's trainable parameters are what training updates.
  std::vector<ParamSpec> params;
  bool frozen = false;
  // ParamSpec::trainable as the layer gives it: the weights its backward() writes dparams for.
  std::vector<bool> layer_trainable;
  // Per params entry: its weight regularizer (inactive: none) and constraint.
  std::vector<Regularizer> regularizers;
  std::vector<std::optional<Constraint>> constraints;
};

class Model {
 public:
  // Builds and validates. nodes[i] has id i + 1 and may only use ids <= i (topological order).
  // `output` is the id of the output node (0 would be the input itself). Throws ModelError:
  // "failed to build model 'cnn': layer 3 'dense_1' expects rank 2 input, got [32,13,13,8]; ..."
  Model(std::string name, Shape input_shape, std::vector<ModelNode> nodes, int output,
        std::string input_name = "input_layer");
  // The chain case.
  static std::shared_ptr<const Model> sequential(std::string name, Shape input_shape,
                                                 std::vector<std::unique_ptr<Layer>> layers);

  const std::string& name() const { return name_; }
  const std::string& input_name() const { return input_name_; }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return planned_.back().out_shape; }
  // Layers in topological order; node id = index + 1.
  size_t num_layers() const { return nodes_.size(); }
  const Layer& layer(size_t i) const { return *nodes_[i].layer; }
  const std::vector<int>& layer_inputs(size_t i) const { return nodes_[i].inputs; }
  const PlannedNode& planned(size_t i) const { return planned_[i]; }
  int output_node() const { return output_; }
  bool is_sequential() const;

  size_t trainable_params() const { return trainable_params_; }
  size_t non_trainable_params() const { return non_trainable_params_; }
  double forward_flops() const { return flops_; }  // per sample
  // True when some layer couples the samples of a training batch (Layer::mixes_samples).
  bool mixes_samples() const;
  // The layer that reads the model input as integer ids (Embedding) and the bound they must stay
  // under (the smallest when several do); limit 0 when the input is plain floats. Data loaders
  // check every input value against it before a model runs (first_bad_id in data/dataset.h).
  struct IdInput {
    std::string layer;
    int64_t limit = 0;
  };
  const IdInput& id_input() const { return id_input_; }
  // Why the model cannot be trained yet, "" when it can: the first layer with a training option
  // nnfleet does not apply (an OrthogonalRegularizer, LayerTraining::refusal) or whose
  // Layer::training_refusal() gives a reason. Network refuses to train such a model, and the
  // fleet checks it when it validates a plan.
  std::string training_refusal() const;
  // Layer i's regularizers, constraints and frozen flag (layer_training.h).
  const LayerTraining& training(size_t i) const { return nodes_[i].training; }
  // Layer i's Keras config as a file holds it: Layer::keras_config() with its training keys.
  Json layer_keras_config(size_t i) const;
  // The same model with layer i frozen when frozen[i] (its other training options kept); each
  // layer is built again from its Keras config. Throws ModelError.
  std::shared_ptr<const Model> with_frozen(const std::vector<bool>& frozen) const;

 private:
  IdInput id_input_;
  std::string name_, input_name_;
  Shape input_shape_;
  std::vector<ModelNode> nodes_;
  std::vector<PlannedNode> planned_;
  int output_ = 0;
  size_t trainable_params_ = 0, non_trainable_params_ = 0;
  double flops_ = 0.0;
};

// Offsets of every parameter in the Network::params() layout (trainable ones first, in layer and
// param_specs order, then the others): [layer][param].
std::vector<std::vector<size_t>> param_layout(const Model& m);
// Copies parameters laid out for `from` into the layout of `to`, a model with the same layers
// (e.g. from Model::with_frozen).
void remap_params(const Model& from, const float* src, const Model& to, float* dst);

}  // namespace nnfleet
