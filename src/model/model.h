// Model: an immutable, validated DAG of layers with one or more inputs and one or more outputs
// (Sequential is the one-input, one-output chain case). Built once; shapes, parameter specs and
// FLOPs are planned at construction, and one Model can be shared read-only by any number of
// Networks (instances with their own arena).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "model/layer_training.h"
#include "tensor/shape.h"

namespace nnfleet {

// One layer application. inputs are node ids: ids 0 .. K-1 are the model's K inputs (in Keras's
// input_layers order) and id K + i is the output of layer i, so with one input layer i is id i + 1.
// tensors (empty: all 0) says which output of its node each input is: 0 the layer's output,
// k >= 1 its k-th extra output (Layer::extra_output_shapes; Keras's tensor index).
// shares (>= 0) makes the node a further call of layer `shares` (a layer index below its own, a
// node that shares no other): a shared layer, as Keras's layer called on several tensors. Its
// layer is of the same kind, config and name, and uses the owner's weights: they are counted,
// initialized, regularized and updated once, and backward sums every call's gradient into them.
// Its own training options are ignored (the owner's apply).
struct ModelNode {
  std::unique_ptr<Layer> layer;
  std::vector<int> inputs;
  LayerTraining training = {};  // regularizers, constraints, trainable: false
  std::vector<int> tensors = {};
  int shares = -1;
};

struct PlannedNode {
  std::vector<Shape> in_shapes;
  Shape out_shape;
  std::vector<Shape> extra_out_shapes;  // outputs 1.. of a multi-output layer
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

// A model input: its name (the Keras InputLayer's) and per-sample shape.
// A string input (Keras dtype "string") holds strings of per-sample shape string_shape ([] or
// [1]); exactly one string layer (layers/string_layer.h) reads it, and `shape` is what that layer
// makes of them (the Model sets it): the float rows the network sees (fleet/fit/string_front.h).
struct ModelInput {
  std::string name;
  Shape shape;
  bool is_string = false;
  Shape string_shape = {};
};

class Model {
 public:
  // Builds and validates. With K inputs, nodes[i] has id K + i and may only use ids < K + i
  // (topological order). `outputs` are the ids of the output nodes (layers, not inputs), in
  // Keras's output_layers order, and `output_tensors` (empty: all 0) which output of its node
  // each is (k >= 1: an extra output, e.g. a recurrent layer's returned state); the (node,
  // tensor) pairs are distinct, and every layer must lead to one of them. Throws ModelError:
  // "failed to build model 'cnn': layer 3 'dense_1' expects rank 2 input, got [32,13,13,8]; ..."
  Model(std::string name, std::vector<ModelInput> inputs, std::vector<ModelNode> nodes,
        std::vector<int> outputs, std::vector<int> output_tensors = {});
  // The one-input, one-output case.
  Model(std::string name, Shape input_shape, std::vector<ModelNode> nodes, int output,
        std::string input_name = "input_layer");
  // The chain case.
  static std::shared_ptr<const Model> sequential(std::string name, Shape input_shape,
                                                 std::vector<std::unique_ptr<Layer>> layers);

  const std::string& name() const { return name_; }
  size_t num_inputs() const { return inputs_.size(); }
  const ModelInput& input(size_t k) const { return inputs_[k]; }
  // The first input's (the only one's, in one-input models).
  const std::string& input_name() const { return inputs_[0].name; }
  const Shape& input_shape() const { return inputs_[0].shape; }
  // Outputs in output_layers order. Their names are their layers' names, made unique as tf.keras
  // does when a layer gives several outputs (its states: "lstm", "lstm_1", "lstm_2").
  size_t num_outputs() const { return outputs_.size(); }
  int output_node(size_t j = 0) const { return outputs_[j]; }
  // Which output of its node output j is (0 unless it is an extra output).
  int output_tensor(size_t j = 0) const { return output_tensors_[j]; }
  const Shape& output_shape(size_t j = 0) const {
    return node_shape(outputs_[j], output_tensors_[j]);
  }
  const std::string& output_name(size_t j) const { return output_names_[j]; }
  // Layers in topological order; node id = num_inputs() + index.
  size_t num_layers() const { return nodes_.size(); }
  const Layer& layer(size_t i) const { return *nodes_[i].layer; }
  const std::vector<int>& layer_inputs(size_t i) const { return nodes_[i].inputs; }
  // Which output of its node input j of layer i is (0 unless the node has several).
  int input_tensor(size_t i, size_t j) const {
    return nodes_[i].tensors.empty() ? 0 : nodes_[i].tensors[j];
  }
  const PlannedNode& planned(size_t i) const { return planned_[i]; }
  // The layer whose weights layer i uses (ModelNode::shares), -1 when it owns its own; and which
  // call of that shared layer node i is (0 for the owner, then 1, 2, ... in node order).
  int shares(size_t i) const { return nodes_[i].shares; }
  int call_index(size_t i) const { return calls_[i]; }
  // Node ids: whether an id is a model input, the layer index of a layer's id, and back.
  bool is_input(int id) const { return id < static_cast<int>(inputs_.size()); }
  size_t layer_of(int id) const { return static_cast<size_t>(id) - inputs_.size(); }
  int node_id(size_t layer) const { return static_cast<int>(inputs_.size() + layer); }
  // The name of a node's tensor: the input's name or the layer's.
  const std::string& node_name(int id) const {
    return is_input(id) ? inputs_[static_cast<size_t>(id)].name : layer(layer_of(id)).name();
  }
  const Shape& node_shape(int id, int tensor = 0) const {
    if (is_input(id)) return inputs_[static_cast<size_t>(id)].shape;
    const PlannedNode& p = planned_[layer_of(id)];
    return tensor == 0 ? p.out_shape : p.extra_out_shapes[static_cast<size_t>(tensor - 1)];
  }
  bool is_sequential() const;

  size_t trainable_params() const { return trainable_params_; }
  size_t non_trainable_params() const { return non_trainable_params_; }
  double forward_flops() const { return flops_; }  // per sample
  // True when some layer couples the samples of a training batch (Layer::mixes_samples).
  bool mixes_samples() const;
  // A model input read as integer ids (by an Embedding, possibly shared by several inputs): the
  // layer and the bound its values must stay under (the smallest when several layers read it).
  // Data loaders check every value of that input against it before a model runs (first_bad_id
  // in data/dataset.h).
  struct IdInput {
    std::string layer;
    int64_t limit = 0;
    size_t input = 0;  // which model input it reads
  };
  // One entry per input read as ids, in input order (empty: every input is plain floats).
  const std::vector<IdInput>& id_inputs() const { return id_inputs_; }
  // The entry for input k, or null.
  const IdInput* id_input_of(size_t k) const {
    for (const IdInput& e : id_inputs_)
      if (e.input == k) return &e;
    return nullptr;
  }
  // The first entry (limit 0 when there is none).
  const IdInput& id_input() const { return id_inputs_.empty() ? no_ids_ : id_inputs_[0]; }
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
  void plan_nodes(const std::string& where);
  void plan_string_inputs(const std::string& where);
  void check_outputs(const std::string& where);
  void plan_ids(size_t i, const std::string& at);
  void plan_shared(size_t i, const std::string& at, PlannedNode& p) const;

  std::vector<IdInput> id_inputs_;
  IdInput no_ids_;
  std::vector<int> calls_;
  std::string name_;
  std::vector<ModelInput> inputs_;
  std::vector<ModelNode> nodes_;
  std::vector<PlannedNode> planned_;
  std::vector<int> outputs_, output_tensors_;
  std::vector<std::string> output_names_;
  size_t trainable_params_ = 0, non_trainable_params_ = 0;
  double flops_ = 0.0;
};

// Offsets of every parameter in the Network::params() layout (trainable ones first, in layer and
// param_specs order, then the others; a shared layer's further calls point at its owner's):
// [layer][param].
std::vector<std::vector<size_t>> param_layout(const Model& m);
// Copies parameters laid out for `from` into the layout of `to`, a model with the same layers
// (e.g. from Model::with_frozen).
void remap_params(const Model& from, const float* src, const Model& to, float* dst);

}  // namespace nnfleet
