// Building an ONNX graph (Debian's libonnx protobuf classes) from nnfleet layers: unique tensor
// names, float and int64 initializers, nodes with attributes, and the per-kind exporter table.
// Tensors inside the graph keep Keras's channels-last layout with the batch axis first; an
// operator that wants channels first (Conv, pools) is wrapped in Transposes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "layers/activation_names.h"
#include "layers/layer.h"
#include "model/model.h"

namespace nnfleet::onnx_export {

// One attribute of a node: an int, ints, a float, floats, a string or strings.
struct Attr {
  std::string name;
  enum class Kind { kInt, kInts, kFloat, kFloats, kString, kStrings } kind = Kind::kInt;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
};
Attr attr(const std::string& name, int64_t v);
Attr attr(const std::string& name, std::vector<int64_t> v);
Attr attr_f(const std::string& name, float v);
Attr attr_fs(const std::string& name, std::vector<float> v);
Attr attr_s(const std::string& name, const std::string& v);
Attr attr_ss(const std::string& name, std::vector<std::string> v);

class Builder {
 public:
  explicit Builder(onnx::GraphProto* g) : g_(g) {}
  // A fresh tensor name from `base` (the layer's name plus a suffix).
  std::string fresh(const std::string& base);
  // A float32 initializer of `dims` holding `data` (copied); returns its name. The same
  // weight asked again (same base name, dims and bytes: a shared layer's further call) is the
  // initializer made the first time, so shared weights are stored once.
  std::string weight(const std::string& base, const std::vector<int64_t>& dims, const float* data);
  std::string weight(const std::string& base, const std::vector<int64_t>& dims,
                     const std::vector<float>& data) {
    return weight(base, dims, data.data());
  }
  std::string ints(const std::string& base, const std::vector<int64_t>& v);  // int64 [v.size()]
  std::string scalar(const std::string& base, float v);                      // float32 []
  // Adds a node; returns its first output (outputs named fresh from `base` unless given).
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::string& base, const std::vector<Attr>& attrs = {}, int outputs = 1,
                   std::vector<std::string>* all_outputs = nullptr);
  // Transpose by `perm`.
  std::string transpose(const std::string& x, const std::vector<int64_t>& perm,
                        const std::string& base);
  // x reshaped to [batch, dims...] (dims of one sample, fully known).
  std::string reshape(const std::string& x, const Shape& sample, const std::string& base);
  // Keras activation `a` applied to x (x itself for linear). Throws ModelError for one ONNX
  // cannot express with standard operators.
  std::string activation(const std::string& x, const Activation& a, const std::string& base);
  // The per-timestep "valid length" of a mask [N, T] (int32 [N]): the count of its ones.
  std::string lengths_of_mask(const std::string& mask, const std::string& base);

 private:
  onnx::GraphProto* g_;
  std::vector<std::string> used_;
  int counter_ = 0;
  std::map<std::string, std::vector<int>> weights_;  // base name -> its initializers' indices
};

// What an exporter gets for one layer application.
struct LayerNode {
  const Layer& layer;
  Json config;  // layer.keras_config()
  const PlannedNode& plan;
  // Tensor names, one per layer input; a recurrent layer's initial states ([N, U] each, Keras's
  // initial_state) follow its sequence.
  std::vector<std::string> inputs;
  std::vector<const float*> params;  // one per plan.params entry (param_specs order)
  std::string mask;                  // float [N, T] Keras mask of input 0, or "" when none
  std::string where;                 // "layer 3 'dense_1' (Dense)" for messages
  std::string* mask_out = nullptr;   // a layer that makes a mask (MaskUse::kProduce) sets it
  // A layer with extra outputs (Layer::extra_output_shapes: a recurrent layer's returned states)
  // appends their tensor names here, in Keras's order (LSTM: h, c; the others: h).
  std::vector<std::string>* extra_out = nullptr;
};

// An exporter adds the nodes of one layer and returns its output tensor's name. It throws
// ModelError naming the layer (LayerNode::where) for a configuration it cannot express.
using ExportFn = std::string (*)(Builder&, const LayerNode&);

struct KindExporter {
  const char* class_name;
  ExportFn fn;
};
// One exporter per registry kind (src/layers/kinds.h), in the registry's order.
const std::vector<KindExporter>& kind_exporters();

// A layer kind that has no ONNX form: throws ModelError naming the layer.
[[noreturn]] void refuse(const LayerNode& n, const std::string& why);

// Helpers the exporters share.
Activation activation_of(const LayerNode& n, const char* key = "activation");
std::vector<int64_t> ints_of(const Json& j, const char* key);
// Keras "same" padding for one axis: [begin, end] with the extra pixel at the end.
std::pair<int64_t, int64_t> same_pads(int64_t in, int64_t k, int64_t s, int64_t d);
// channels-last [N, spatial..., C] <-> channels-first [N, C, spatial...] for `rank` spatial axes.
std::vector<int64_t> to_channels_first(int rank);
std::vector<int64_t> to_channels_last(int rank);

}  // namespace nnfleet::onnx_export
