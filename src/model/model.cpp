// Model: graph validation and shape planning.
#include "model/model.h"

#include <set>

#include "layers/layer_util.h"

namespace nnfleet {

Model::Model(std::string name, Shape input_shape, std::vector<ModelNode> nodes, int output,
             std::string input_name)
    : Model(std::move(name), {ModelInput{std::move(input_name), input_shape}}, std::move(nodes),
            std::vector<int>{output}) {}

Model::Model(std::string name, std::vector<ModelInput> inputs, std::vector<ModelNode> nodes,
             std::vector<int> outputs)
    : name_(std::move(name)),
      inputs_(std::move(inputs)),
      nodes_(std::move(nodes)),
      outputs_(std::move(outputs)) {
  const std::string where = "failed to build model '" + name_ + "': ";
  if (nodes_.empty()) throw ModelError(where + "the model has no layers; expected at least one");
  if (inputs_.empty()) throw ModelError(where + "the model has no input; expected at least one");
  std::set<std::string> names;
  for (const ModelInput& in : inputs_) {
    for (int64_t d : in.shape)
      if (d < 1)
        throw ModelError(where + "input '" + in.name + "' has shape " + keras_shape(in.shape) +
                         " with an unknown or empty dimension; expected positive sizes");
    if (!names.insert(in.name).second)
      throw ModelError(where + "two inputs are named '" + in.name + "'; expected unique names");
  }
  plan_nodes(where);
  check_outputs(where);
}

void Model::plan_nodes(const std::string& where) {
  std::set<std::string> names;
  for (const ModelInput& in : inputs_) names.insert(in.name);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Layer& l = *nodes_[i].layer;
    const std::string at = where + "layer " + std::to_string(i + 1) + " '" + l.name() + "' (" +
                           l.class_name() + ") ";
    if (!names.insert(l.name()).second)
      throw ModelError(at + "repeats a layer name; expected unique layer names");
    const auto& ins = nodes_[i].inputs;
    const size_t want = l.arity() == 0 ? 2 : static_cast<size_t>(l.arity());
    if (l.arity() == 0 ? ins.size() < want : ins.size() != want)
      throw ModelError(at + "takes " + (l.arity() == 0 ? "at least 2 inputs" :
                       std::to_string(want) + " input" + (want > 1 ? "s" : "")) + ", got " +
                       std::to_string(ins.size()));
    PlannedNode p;
    for (int id : ins) {
      if (id < 0 || id >= node_id(i))
        throw ModelError(at + "uses node " + std::to_string(id) +
                         " which is not defined before it; expected layers in topological order");
      p.in_shapes.push_back(node_shape(id));
    }
    try {
      p.out_shape = l.output_shape(p.in_shapes);
      p.params = l.param_specs(p.in_shapes);
    } catch (const ModelError& e) {
      throw ModelError(at + e.what());
    }
    if (const int64_t lim = l.input_id_limit(); lim > 0) {
      if (ins.size() != 1 || !is_input(ins[0]))
        throw ModelError(at +
                         "reads integer ids, which nnfleet checks as the data is loaded; "
                         "expected it to take a model input directly");
      if (id_input_.limit > 0 && id_input_.input != static_cast<size_t>(ins[0]))
        throw ModelError(at +
                         "reads integer ids from a second model input; expected ids in "
                         "one input only");
      if (id_input_.limit == 0 || lim < id_input_.limit)
        id_input_ = {l.name(), lim, static_cast<size_t>(ins[0])};
    }
    for (const auto& ps : p.params)
      (ps.trainable ? trainable_params_ : non_trainable_params_) += static_cast<size_t>(ps.shape.size());
    flops_ += l.forward_flops(p.in_shapes);
    planned_.push_back(std::move(p));
  }
}

// Outputs are distinct layers, and every layer leads to one (a dead branch would be computed
// and trained for nothing, and Keras does not save it).
void Model::check_outputs(const std::string& where) const {
  if (outputs_.empty()) throw ModelError(where + "the model has no output; expected at least one");
  std::vector<bool> used(nodes_.size(), false);
  for (int o : outputs_) {
    if (is_input(o) || o < 0 || o >= node_id(nodes_.size()))
      throw ModelError(where + "output node " + std::to_string(o) +
                       " is not a layer; expected the id of a layer's node");
    if (used[layer_of(o)])
      throw ModelError(where + "layer '" + layer(layer_of(o)).name() +
                       "' is given twice as an output; expected distinct outputs");
    used[layer_of(o)] = true;
  }
  for (size_t i = nodes_.size(); i-- > 0;) {
    if (!used[i])
      throw ModelError(where + "layer '" + layer(i).name() +
                       "' does not lead to an output; expected every layer to feed an output");
    for (int id : nodes_[i].inputs)
      if (!is_input(id)) used[layer_of(id)] = true;
  }
}

std::shared_ptr<const Model> Model::sequential(std::string name, Shape input_shape,
                                               std::vector<std::unique_ptr<Layer>> layers) {
  std::vector<ModelNode> nodes;
  for (size_t i = 0; i < layers.size(); ++i)
    nodes.push_back({std::move(layers[i]), {static_cast<int>(i)}});
  const int out = static_cast<int>(nodes.size());
  return std::make_shared<const Model>(std::move(name), input_shape, std::move(nodes), out);
}

bool Model::mixes_samples() const {
  for (const auto& n : nodes_)
    if (n.layer->mixes_samples()) return true;
  return false;
}

namespace {
// The first "<key>_regularizer" set in a layer config, looking into a wrapped layer's config
// (TimeDistributed's "layer") too; "" when none is.
std::string regularizer_in(const Json& c, int depth) {
  if (!c.is_object() || depth > 8) return "";
  for (auto it = c.begin(); it != c.end(); ++it) {
    const std::string& k = it.key();
    if (k.size() > 12 && k.compare(k.size() - 12, 12, "_regularizer") == 0 &&
        !it.value().is_null())
      return k + " " + (it.value().is_object() ? it.value().value("class_name", Json()).dump()
                                               : it.value().dump());
  }
  if (c.contains("layer") && c["layer"].is_object())
    return regularizer_in(c["layer"].value("config", Json()), depth + 1);
  return "";
}
}  // namespace

std::string Model::training_refusal() const {
  for (const auto& n : nodes_) {
    const Layer& l = *n.layer;
    if (const std::string r = regularizer_in(l.keras_config(), 0); !r.empty())
      return "layer '" + l.name() + "' has " + r + "; regularizers are not applied in training yet";
    if (const std::string why = l.training_refusal(); !why.empty())
      return "layer '" + l.name() + "' (" + l.class_name() + "): " + why;
  }
  return "";
}

bool Model::is_sequential() const {
  if (inputs_.size() != 1 || outputs_.size() != 1) return false;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].inputs.size() != 1 || nodes_[i].inputs[0] != static_cast<int>(i)) return false;
  return true;
}

}  // namespace nnfleet
