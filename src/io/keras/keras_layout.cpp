// The Keras file layout of each layer kind (keras_layout.h): the kinds that nest their weights,
// by class name, and the flat layout of every other kind.
#include "io/keras/keras_layout.h"

#include <string_view>

#include "core/check.h"
#include "layers/kinds.h"

namespace nnfleet {
namespace {

using Places = std::vector<KerasWeightPlace>;
using Specs = std::vector<ParamSpec>;

// Every other kind: all weights in the layer's own vars, in param_specs() order, named as the
// layer names them.
Places flat_places(const Specs& specs) {
  Places out;
  for (size_t j = 0; j < specs.size(); ++j) out.push_back({"", static_cast<int>(j), specs[j].name});
  return out;
}

// tf.keras's scope of a recurrent layer's cell, as Keras names the cell object.
std::string cell_scope(const std::string& cls) {
  return cls == "SimpleRNN" ? "simple_rnn_cell" : cls == "LSTM" ? "lstm_cell" : "gru_cell";
}

// One recurrent layer of class `cls` whose weights are specs[first, first + count): Keras 3 keeps
// them on the cell object (`group`), tf.keras under the cell's scope below `legacy_prefix`.
void add_recurrent(const std::string& cls, const std::string& group,
                   const std::string& legacy_prefix, const Specs& specs, size_t first, size_t count,
                   Places& out) {
  for (size_t j = 0; j < count; ++j)
    out.push_back({group, static_cast<int>(j),
                   legacy_prefix + cell_scope(cls) + "/" + specs[first + j].name});
}

// SimpleRNN, LSTM, GRU: "cell" in Keras 3, "lstm_cell/kernel" in tf.keras.
Places recurrent_places(const Layer& l, const Specs& specs) {
  Places out;
  add_recurrent(l.class_name(), "cell", "", specs, 0, specs.size(), out);
  return out;
}

// Bidirectional: the forward layer's weights, then the backward layer's (its param_specs()
// order), each kept as its recurrent layer keeps them one level down: Keras 3 in forward_layer/cell
// and backward_layer/cell, tf.keras under the half's name (forward_lstm/lstm_cell/kernel). The
// halves' classes and names are read from the layer's Keras config: Keras names them
// forward_<layer's name> and, unless a backward_layer is given, backward_<layer's name>.
Places bidirectional_places(const Layer& l, const Specs& specs) {
  const Json c = l.keras_config();
  const Json& fwd = c["layer"];
  const std::string inner = fwd["config"]["name"].get<std::string>();
  const bool given = c.contains("backward_layer") && c["backward_layer"].is_object();
  const std::string fcls = fwd["class_name"].get<std::string>();
  const std::string bcls = given ? c["backward_layer"]["class_name"].get<std::string>() : fcls;
  const std::string bname =
      given ? c["backward_layer"]["config"]["name"].get<std::string>() : "backward_" + inner;
  // A recurrent layer has kernel, recurrent_kernel and, with use_bias, bias.
  const size_t nf = fwd["config"].value("use_bias", true) ? 3 : 2;
  NNFLEET_CHECK(nf <= specs.size());
  Places out;
  add_recurrent(fcls, "forward_layer/cell", "forward_" + inner + "/", specs, 0, nf, out);
  add_recurrent(bcls, "backward_layer/cell", bname + "/", specs, nf, specs.size() - nf, out);
  return out;
}

// MultiHeadAttention: four EinsumDense sub-layers, each with its kernel and (use_bias) bias:
// Keras 3 keeps them in query_dense, key_dense, value_dense and output_dense, tf.keras names them
// query/kernel, key/..., value/..., attention_output/... (the layer's param_specs() order).
Places multi_head_attention_places(const Layer&, const Specs& specs) {
  static const char* const kGroups[] = {"query_dense", "key_dense", "value_dense", "output_dense"};
  static const char* const kLegacy[] = {"query", "key", "value", "attention_output"};
  const size_t per = specs.size() / 4;  // 2 with biases, 1 without
  NNFLEET_CHECK(per * 4 == specs.size() && per >= 1);
  Places out;
  for (size_t j = 0; j < specs.size(); ++j)
    out.push_back({kGroups[j / per], static_cast<int>(j % per),
                   std::string(kLegacy[j / per]) + "/" + specs[j].name});
  return out;
}

struct KindLayout {
  std::string_view class_name;
  Places (*places)(const Layer&, const Specs&);
};
constexpr KindLayout kNestedKinds[] = {
    {"SimpleRNN", recurrent_places},
    {"LSTM", recurrent_places},
    {"GRU", recurrent_places},
    {"Bidirectional", bidirectional_places},
    {"MultiHeadAttention", multi_head_attention_places},
};

// Each kind named above is a registry kind (a renamed kind would otherwise fall back to the flat
// layout unnoticed).
#define NNFLEET_KIND_CLASS(cls, id) #cls,
constexpr std::string_view kKindClasses[] = {NNFLEET_LAYER_KINDS(NNFLEET_KIND_CLASS)};
#undef NNFLEET_KIND_CLASS
constexpr bool all_registry_kinds() {
  for (const KindLayout& k : kNestedKinds) {
    bool found = false;
    for (std::string_view c : kKindClasses) found = found || c == k.class_name;
    if (!found) return false;
  }
  return true;
}
static_assert(all_registry_kinds(), "kNestedKinds names a class that is not in layers/kinds.h");

}  // namespace

std::vector<KerasWeightPlace> keras_weight_places(const Layer& layer, const Specs& specs) {
  for (const KindLayout& k : kNestedKinds)
    if (k.class_name == layer.class_name()) return k.places(layer, specs);
  Places out = flat_places(specs);
  // Normalization's adapt count: tf.keras and Keras 3 both add it with dtype int64.
  if (std::string_view(layer.class_name()) == "Normalization")
    for (size_t j = 0; j < specs.size(); ++j)
      out[j].int64_scalar = specs[j].name == "count" && specs[j].shape.rank() == 0;
  return out;
}

}  // namespace nnfleet
