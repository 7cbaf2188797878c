// Model: graph validation and shape planning.
#include "model/model.h"

#include <algorithm>
#include <map>
#include <set>

#include "layers/layer_util.h"
#include "layers/registry.h"
#include "layers/string_layer.h"

namespace nnfleet {
namespace {

// Attaches a layer's training options to its planned weights; throws ModelError for an option
// that names a weight the layer does not have (as Keras's constructors refuse unknown kwargs).
void plan_training(const LayerTraining& t, const std::string& at, PlannedNode& p) {
  p.frozen = t.frozen;
  for (auto& s : p.params) {
    p.layer_trainable.push_back(s.trainable);
    if (t.frozen) s.trainable = false;
  }
  p.regularizers.assign(p.params.size(), Regularizer{});
  p.constraints.assign(p.params.size(), std::nullopt);
  auto attach = [&](const std::string& stem, const char* what, auto apply) {
    bool found = false;
    for (size_t j = 0; j < p.params.size(); ++j)
      if (p.layer_trainable[j] && stem_names_param(stem, p.params[j].name)) {
        apply(j);
        found = true;
      }
    if (!found)
      throw ModelError(at + "has " + stem + what + " but no trainable weight '" + stem +
                       "'; expected it only on a layer with that weight");
  };
  // (Pairs, not structured bindings: clang 14, which builds the fuzzers, cannot capture those.)
  for (const auto& reg : t.regularizers)
    attach(reg.first, "_regularizer", [&](size_t j) { p.regularizers[j] = reg.second; });
  for (const auto& con : t.constraints)
    attach(con.first, "_constraint", [&](size_t j) {
      const std::string& stem = con.first;
      Constraint cj = con.second;
      if (!resolve_constraint_axes(cj, p.params[j].shape))
        throw ModelError(at + "has " + stem + "_constraint over an axis outside its weight " +
                         p.params[j].name + " " + p.params[j].shape.str() +
                         "; expected axes within its rank " +
                         std::to_string(p.params[j].shape.rank()));
      p.constraints[j] = cj;
    });
}

// A layer built from a config that kept its regularizers (make_layer rather than
// make_layer_with_training) writes them itself; the node takes them over so that training
// applies them all the same.
void adopt_layer_options(const Layer& l, LayerTraining& t) {
  if (t.taken_before) return;
  Json cfg = l.keras_config();
  LayerTraining own;
  try {
    own = take_layer_training(cfg);
  } catch (const ConfigError&) {
    return;  // the layer checked its own options
  }
  auto has = [](const auto& list, const std::string& stem) {
    for (const auto& e : list)
      if (e.first == stem) return true;
    return false;
  };
  for (auto& r : own.regularizers)
    if (!has(t.regularizers, r.first)) t.regularizers.push_back(r);
  for (auto& c : own.constraints)
    if (!has(t.constraints, c.first)) t.constraints.push_back(c);
  if (!t.activity && own.activity) t.activity = own.activity;
  if (t.refusal.empty()) t.refusal = own.refusal;
}

}  // namespace

Model::Model(std::string name, Shape input_shape, std::vector<ModelNode> nodes, int output,
             std::string input_name)
    : Model(std::move(name), {ModelInput{std::move(input_name), input_shape}}, std::move(nodes),
            std::vector<int>{output}) {}

Model::Model(std::string name, std::vector<ModelInput> inputs, std::vector<ModelNode> nodes,
             std::vector<int> outputs, std::vector<int> output_tensors)
    : name_(std::move(name)),
      inputs_(std::move(inputs)),
      nodes_(std::move(nodes)),
      outputs_(std::move(outputs)),
      output_tensors_(std::move(output_tensors)) {
  const std::string where = "failed to build model '" + name_ + "': ";
  if (nodes_.empty()) throw ModelError(where + "the model has no layers; expected at least one");
  if (inputs_.empty()) throw ModelError(where + "the model has no input; expected at least one");
  std::set<std::string> names;
  plan_string_inputs(where);
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

// Each string input is read by exactly one string layer, which says the float row it makes of
// the strings: that row is the input the network sees.
void Model::plan_string_inputs(const std::string& where) {
  // A string layer that also hashes numbers (Hashing) on a numeric input becomes its numeric
  // form, a layer of the float graph.
  for (ModelNode& node : nodes_) {
    const auto* sl = dynamic_cast<const StringLayer*>(node.layer.get());
    if (!sl || node.inputs.size() != 1) continue;
    const int in = node.inputs[0];
    if (in < static_cast<int>(inputs_.size()) && inputs_[static_cast<size_t>(in)].is_string)
      continue;
    if (std::unique_ptr<Layer> numeric = sl->numeric_form()) node.layer = std::move(numeric);
  }
  for (size_t k = 0; k < inputs_.size(); ++k) {
    if (!inputs_[k].is_string) continue;
    const StringLayer* reader = nullptr;
    for (const ModelNode& node : nodes_)
      for (int id : node.inputs) {
        if (id != static_cast<int>(k)) continue;
        const auto* sl = dynamic_cast<const StringLayer*>(node.layer.get());
        if (!sl || reader)
          throw ModelError(where + "string input '" + inputs_[k].name + "' is read by '" +
                           node.layer->name() + "' (" + node.layer->class_name() +
                           "); expected one string layer (TextVectorization, StringLookup, "
                           "Hashing) to read it, and only it");
        reader = sl;
      }
    if (!reader) continue;  // an unused input: check_outputs reports the dead end
    try {
      inputs_[k].shape = reader->encoded_shape(inputs_[k].string_shape);
    } catch (const ModelError& e) {
      throw ModelError(where + "layer '" + reader->name() + "' (" + reader->class_name() + ") " +
                       e.what());
    }
  }
}

void Model::plan_nodes(const std::string& where) {
  std::set<std::string> names;
  for (const ModelInput& in : inputs_) names.insert(in.name);
  std::vector<int> made(nodes_.size(), 0);  // per owner, its further calls so far
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Layer& l = *nodes_[i].layer;
    const std::string at =
        where + "layer " + std::to_string(i + 1) + " '" + l.name() + "' (" + l.class_name() + ") ";
    const int owner = nodes_[i].shares;
    if (owner < 0 && !names.insert(l.name()).second)
      throw ModelError(at + "repeats a layer name; expected unique layer names");
    const auto& ins = nodes_[i].inputs;
    const size_t want = l.arity() == 0 ? 2 : static_cast<size_t>(l.arity());
    const size_t more = want + static_cast<size_t>(l.optional_inputs());
    if (l.arity() == 0 ? ins.size() < want : (ins.size() != want && ins.size() != more))
      throw ModelError(at + "takes " +
                       (l.arity() == 0 ? "at least 2 inputs"
                                       : std::to_string(want) + " input" + (want > 1 ? "s" : "")) +
                       (more > want && l.arity() != 0
                            ? " (or " + std::to_string(more) + " with its initial states)"
                            : "") +
                       ", got " + std::to_string(ins.size()));
    if (!nodes_[i].tensors.empty() && nodes_[i].tensors.size() != ins.size())
      throw ModelError(at + "gives " + std::to_string(nodes_[i].tensors.size()) +
                       " tensor indices for " + std::to_string(ins.size()) +
                       " inputs; expected one per input");
    PlannedNode p;
    for (size_t j = 0; j < ins.size(); ++j) {
      const int id = ins[j], k = input_tensor(i, j);
      if (id < 0 || id >= node_id(i))
        throw ModelError(at + "uses node " + std::to_string(id) +
                         " which is not defined before it; expected layers in topological order");
      const size_t outs = is_input(id) ? 1 : 1 + planned_[layer_of(id)].extra_out_shapes.size();
      if (k < 0 || static_cast<size_t>(k) >= outs)
        throw ModelError(at + "uses output " + std::to_string(k) + " of '" + node_name(id) +
                         "', which has " + std::to_string(outs) + " output" +
                         (outs > 1 ? "s" : "") + "; expected an index below " +
                         std::to_string(outs));
      p.in_shapes.push_back(node_shape(id, k));
    }
    try {
      p.out_shape = l.output_shape(p.in_shapes);
      p.extra_out_shapes = l.extra_output_shapes(p.in_shapes);
      p.params = l.param_specs(p.in_shapes);
    } catch (const ModelError& e) {
      throw ModelError(at + e.what());
    }
    if (owner >= 0) {
      plan_shared(i, at, p);
      // The owner's options apply to every call (the same Keras layer); the scopes stay the
      // node's own.
      std::vector<std::string> scopes = std::move(nodes_[i].training.scopes);
      nodes_[i].training = nodes_[static_cast<size_t>(owner)].training;
      nodes_[i].training.scopes = std::move(scopes);
    } else {
      adopt_layer_options(l, nodes_[i].training);
      plan_training(nodes_[i].training, at, p);
      for (const auto& ps : p.params)
        (ps.trainable ? trainable_params_ : non_trainable_params_) +=
            static_cast<size_t>(ps.shape.size());
    }
    calls_.push_back(owner < 0 ? 0 : ++made[static_cast<size_t>(owner)]);
    plan_ids(i, at);
    flops_ += l.forward_flops(p.in_shapes);
    planned_.push_back(std::move(p));
  }
}

// Layer i reading ids (Embedding) takes a model input directly; each such input is checked
// against the smallest bound of the layers that read it.
void Model::plan_ids(size_t i, const std::string& at) {
  const Layer& l = layer(i);
  const auto& ins = nodes_[i].inputs;
  if (dynamic_cast<const StringLayer*>(&l) &&
      (ins.size() != 1 || !is_input(ins[0]) || !inputs_[static_cast<size_t>(ins[0])].is_string))
    throw ModelError(at +
                     "reads strings; expected it to take a string model input directly "
                     "(an InputLayer of dtype string)");
  const int64_t lim = l.input_id_limit();
  if (lim <= 0) return;
  // Ids made by a string layer (TextVectorization) are checked against its vocabulary once, here.
  const auto* ids_from = ins.size() == 1 && !is_input(ins[0])
                             ? dynamic_cast<const StringLayer*>(&layer(layer_of(ins[0])))
                             : nullptr;
  if (ids_from) {
    if (ids_from->id_bound() == 0 || ids_from->id_bound() > lim)
      throw ModelError(at + "reads ids from '" + ids_from->name() + "', which makes " +
                       (ids_from->id_bound()
                            ? "ids up to " + std::to_string(ids_from->id_bound() - 1)
                            : std::string("no ids")) +
                       "; expected ids below its input_dim " + std::to_string(lim));
    return;
  }
  if (ins.size() != 1 || !is_input(ins[0]))
    throw ModelError(at +
                     "reads integer ids, which nnfleet checks as the data is loaded; "
                     "expected it to take a model input directly");
  const size_t k = static_cast<size_t>(ins[0]);
  for (IdInput& e : id_inputs_)
    if (e.input == k) {
      if (lim < e.limit) e = {layer(i).name(), lim, k};
      return;
    }
  id_inputs_.push_back({layer(i).name(), lim, k});
  std::sort(id_inputs_.begin(), id_inputs_.end(),
            [](const IdInput& a, const IdInput& b) { return a.input < b.input; });
}

// A further call of a shared layer: the same kind, name and weights as its owner's first call
// (a Dense called on inputs of other widths would need other weights, which Keras refuses too).
void Model::plan_shared(size_t i, const std::string& at, PlannedNode& p) const {
  const int owner = nodes_[i].shares;
  if (owner >= static_cast<int>(i) || nodes_[static_cast<size_t>(owner)].shares >= 0)
    throw ModelError(at + "shares the weights of layer " + std::to_string(owner + 1) +
                     "; expected an earlier layer that owns its weights");
  const size_t o = static_cast<size_t>(owner);
  const Layer& a = layer(o);
  const Layer& b = layer(i);
  if (a.class_name() != b.class_name() || a.name() != b.name())
    throw ModelError(at + "is a further call of layer '" + a.name() + "' (" + a.class_name() +
                     "); expected the same layer name and class");
  const PlannedNode& q = planned_[o];
  bool same = p.params.size() == q.params.size();
  for (size_t j = 0; same && j < p.params.size(); ++j)
    same = p.params[j].name == q.params[j].name && p.params[j].shape == q.params[j].shape;
  if (!same)
    throw ModelError(at + "is called on " +
                     keras_shape(p.in_shapes.empty() ? Shape{} : p.in_shapes[0]) +
                     ", which needs other weights than its first call on " +
                     keras_shape(q.in_shapes.empty() ? Shape{} : q.in_shapes[0]) +
                     "; expected every call of a shared layer to take inputs of the same shape");
  p.params = q.params;
  p.frozen = q.frozen;
  p.layer_trainable = q.layer_trainable;
  p.regularizers = q.regularizers;
  p.constraints = q.constraints;
}

// Outputs are distinct (layer, tensor) pairs, and every layer leads to one (a dead branch would
// be computed and trained for nothing, and Keras does not save it).
void Model::check_outputs(const std::string& where) {
  if (outputs_.empty()) throw ModelError(where + "the model has no output; expected at least one");
  if (output_tensors_.empty()) output_tensors_.assign(outputs_.size(), 0);
  NNFLEET_CHECK(output_tensors_.size() == outputs_.size());
  std::vector<bool> used(nodes_.size(), false);
  std::set<std::pair<int, int>> seen;
  std::set<std::string> names;
  std::map<std::string, int> suffix;
  for (size_t j = 0; j < outputs_.size(); ++j) {
    const int o = outputs_[j], k = output_tensors_[j];
    if (is_input(o) || o < 0 || o >= node_id(nodes_.size()))
      throw ModelError(where + "output node " + std::to_string(o) +
                       " is not a layer; expected the id of a layer's node");
    const std::string& lname = layer(layer_of(o)).name();
    const size_t outs = 1 + planned_[layer_of(o)].extra_out_shapes.size();
    if (k < 0 || static_cast<size_t>(k) >= outs)
      throw ModelError(where + "output " + std::to_string(j) + " is output " + std::to_string(k) +
                       " of layer '" + lname + "', which has " + std::to_string(outs) +
                       "; expected 0 to " + std::to_string(outs - 1));
    if (!seen.insert({o, k}).second)
      throw ModelError(where + "output " + std::to_string(k) + " of layer '" + lname +
                       "' is given twice as an output; expected distinct outputs");
    used[layer_of(o)] = true;
    // tf.keras's unique output names: the layer's name, then name_1, name_2, ...
    std::string proposal = lname;
    while (names.count(proposal)) {
      int& count = suffix.try_emplace(lname, 1).first->second;
      proposal = lname + "_" + std::to_string(count++);
    }
    names.insert(proposal);
    output_names_.push_back(proposal);
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
  // A frozen layer with batch statistics runs in inference mode (Network), as in Keras.
  for (const auto& n : nodes_)
    if (n.layer->mixes_samples() && !n.training.frozen) return true;
  return false;
}

std::string Model::training_refusal() const {
  for (const auto& n : nodes_) {
    const Layer& l = *n.layer;
    if (!n.training.refusal.empty())
      return "layer '" + l.name() + "' (" + l.class_name() + "): " + n.training.refusal;
    if (const std::string why = l.training_refusal(); !why.empty())
      return "layer '" + l.name() + "' (" + l.class_name() + "): " + why;
  }
  return "";
}

Json Model::layer_keras_config(size_t i) const {
  return put_layer_training(nodes_[i].layer->keras_config(), nodes_[i].training);
}

std::shared_ptr<const Model> Model::with_frozen(const std::vector<bool>& frozen) const {
  NNFLEET_CHECK(frozen.size() == nodes_.size());
  std::vector<ModelNode> nodes;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Layer& l = *nodes_[i].layer;
    ModelNode n{make_layer(l.class_name(), l.keras_config(), ConfigMode::kKeras, l.name()),
                nodes_[i].inputs, nodes_[i].training, nodes_[i].tensors, nodes_[i].shares};
    // A further call of a shared layer is frozen with its owner.
    n.training.frozen = frozen[n.shares < 0 ? i : static_cast<size_t>(n.shares)];
    n.training.keras.erase("trainable");
    nodes.push_back(std::move(n));
  }
  return std::make_shared<const Model>(name_, inputs_, std::move(nodes), outputs_, output_tensors_);
}

std::vector<std::vector<size_t>> param_layout(const Model& m) {
  const size_t trainable = m.trainable_params();
  std::vector<std::vector<size_t>> off(m.num_layers());
  size_t t = 0, f = trainable;
  for (size_t i = 0; i < m.num_layers(); ++i) {
    if (m.shares(i) >= 0) {
      off[i] = off[static_cast<size_t>(m.shares(i))];
      continue;
    }
    for (const auto& p : m.planned(i).params) {
      size_t& at = p.trainable ? t : f;
      off[i].push_back(at);
      at += static_cast<size_t>(p.shape.size());
    }
  }
  return off;
}

void remap_params(const Model& from, const float* src, const Model& to, float* dst) {
  NNFLEET_CHECK(from.num_layers() == to.num_layers());
  const auto a = param_layout(from), b = param_layout(to);
  for (size_t i = 0; i < from.num_layers(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) {
      const size_t n = static_cast<size_t>(from.planned(i).params[j].shape.size());
      std::copy(src + a[i][j], src + a[i][j] + n, dst + b[i][j]);
    }
}

bool Model::is_sequential() const {
  if (inputs_.size() != 1 || outputs_.size() != 1 || output_tensors_[0] != 0) return false;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].shares >= 0 || nodes_[i].inputs.size() != 1 ||
        nodes_[i].inputs[0] != static_cast<int>(i) || input_tensor(i, 0) != 0)
      return false;
  return true;
}

}  // namespace nnfleet
