// The ONNX writer: the exporter table (one per registry kind, forced by NNFLEET_LAYER_KINDS), and
// the walk over a model's layers that wires their tensors, masks and weights together.
#include "io/onnx/onnx_writer.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "io/onnx/onnx_builder.h"
#include "layers/channels_first.h"
#include "layers/kinds.h"
#include "nnfleet/version.h"

namespace nnfleet {
namespace onnx_export {

// Every kind has an exporter named export_<id>: a kind added to the registry without one is a
// link error, and the table below is checked against the registry's count.
#define NNFLEET_DECLARE_EXPORTER(cls, id) std::string export_##id(Builder&, const LayerNode&);
NNFLEET_LAYER_KINDS(NNFLEET_DECLARE_EXPORTER)
#undef NNFLEET_DECLARE_EXPORTER

const std::vector<KindExporter>& kind_exporters() {
#define NNFLEET_EXPORTER_ENTRY(cls, id) {#cls, &export_##id},
  static const std::vector<KindExporter> table = {NNFLEET_LAYER_KINDS(NNFLEET_EXPORTER_ENTRY)};
#undef NNFLEET_EXPORTER_ENTRY
  NNFLEET_CHECK(table.size() == static_cast<size_t>(kNumLayerKinds));
  return table;
}

}  // namespace onnx_export

namespace {

using namespace onnx_export;

constexpr int kOpset = 13;
constexpr int kIrVersion = 7;  // the IR version of opset 13 (ONNX 1.8)

// Float tensor type [N, dims...] with a symbolic batch axis.
void set_type(onnx::ValueInfoProto* v, const std::string& name, const Shape& sample) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("N");
  for (int64_t d : sample) s->add_dim()->set_dim_value(d);
}

const KindExporter& exporter_of(const Layer& l) {
  for (const auto& e : kind_exporters())
    if (std::string(e.class_name) == l.class_name()) return e;
  NNFLEET_CHECK(false && "a registry kind without an exporter");
  std::abort();
}

// A channels_first layer (layers/channels_first.h): its channels_last twin's nodes between a
// Transpose moving the channels last and one moving them back first (not for a rank-1 output:
// Flatten and global pooling flatten in channels_last order in Keras too).
std::string export_channels_first(Builder& b, const LayerNode& n, const Layer& twin) {
  auto to_last = [](const Shape& s) {
    if (s.rank() < 2) return s;
    Shape t;
    for (int i = 1; i < s.rank(); ++i) t.push_back(s[i]);
    t.push_back(s[0]);
    return t;
  };
  PlannedNode p = n.plan;
  p.in_shapes[0] = to_last(n.plan.in_shapes[0]);
  p.out_shape = to_last(n.plan.out_shape);
  const std::string base = n.layer.name();
  std::string x = n.inputs[0];
  const int r_in = n.plan.in_shapes[0].rank(), r_out = n.plan.out_shape.rank();
  if (r_in >= 2) {
    std::vector<int64_t> perm{0};
    for (int i = 2; i <= r_in; ++i) perm.push_back(i);
    perm.push_back(1);
    x = b.transpose(x, perm, base + "_to_channels_last");
  }
  LayerNode t{twin, twin.keras_config(), p, {x}, n.params, "", n.where, n.mask_out, n.extra_out};
  std::string y = exporter_of(twin).fn(b, t);
  if (r_out >= 2) {
    std::vector<int64_t> perm{0, r_out};
    for (int i = 1; i < r_out; ++i) perm.push_back(i);
    y = b.transpose(y, perm, base + "_to_channels_first");
  }
  return y;
}

// Pointers to every layer's parameters in Network::params() order (param_layout: a shared
// layer's further calls point at its first call's weights).
std::vector<std::vector<const float*>> param_pointers(const Model& m, const float* params) {
  const auto offsets = param_layout(m);
  std::vector<std::vector<const float*>> out(m.num_layers());
  for (size_t i = 0; i < m.num_layers(); ++i)
    for (size_t off : offsets[i]) out[i].push_back(params + off);
  return out;
}

// The tensor that input j of layer i reads: output 0 of its node or one of its extra outputs
// (a recurrent layer's returned state).
const std::string& input_name(const Model& m, size_t i, size_t j,
                              const std::vector<std::string>& tensor,
                              const std::vector<std::vector<std::string>>& extra,
                              const LayerNode& n) {
  const size_t from = static_cast<size_t>(m.layer_inputs(i)[j]);
  const int k = m.input_tensor(i, j);
  if (k == 0) return tensor[from];
  if (static_cast<size_t>(k) > extra[from].size())
    refuse(n, "it reads output " + std::to_string(k) + " of '" +
                  m.node_name(static_cast<int>(from)) + "', which has no ONNX form");
  return extra[from][static_cast<size_t>(k - 1)];
}

// The Keras mask layer i receives, as Network::mask_input gives it: that of input 0 when the
// layer has one input or consumes masks (a recurrent layer with initial states), and input 0 is
// output 0 of its node.
std::string mask_of(const Model& m, size_t i, const std::vector<std::string>& mask) {
  const auto& ins = m.layer_inputs(i);
  const bool one = ins.size() == 1 || m.layer(i).mask_use() == MaskUse::kConsume;
  if (!one || m.input_tensor(i, 0) != 0) return "";
  return mask[static_cast<size_t>(ins[0])];
}

void build_graph(const Model& m, const float* params, onnx::GraphProto* g) {
  Builder b(g);
  g->set_name(m.name());
  std::vector<std::string> tensor(m.num_inputs() + m.num_layers()), mask(tensor.size());
  std::vector<std::vector<std::string>> extra(tensor.size());
  for (size_t k = 0; k < m.num_inputs(); ++k) {
    tensor[k] = b.fresh(m.input(k).name);
    set_type(g->add_input(), tensor[k], m.input(k).shape);
  }
  const auto ptrs = param_pointers(m, params);
  for (size_t i = 0; i < m.num_layers(); ++i) {
    const Layer& l = m.layer(i);
    const size_t id = static_cast<size_t>(m.node_id(i));
    LayerNode n{l, l.keras_config(), m.planned(i), {}, ptrs[i], "", "", nullptr, nullptr};
    n.where = "layer " + std::to_string(i) + " '" + l.name() + "' (" + l.class_name() + ")";
    for (size_t j = 0; j < m.layer_inputs(i).size(); ++j)
      n.inputs.push_back(input_name(m, i, j, tensor, extra, n));
    n.mask = mask_of(m, i, mask);
    std::string made_mask;
    n.mask_out = &made_mask;
    n.extra_out = &extra[id];
    const Layer* twin = channels_last_twin(l);
    tensor[id] = twin ? export_channels_first(b, n, *twin) : exporter_of(l).fn(b, n);
    NNFLEET_CHECK(extra[id].empty() || extra[id].size() == m.planned(i).extra_out_shapes.size());
    switch (l.mask_use()) {
      case MaskUse::kDrop:
        break;
      case MaskUse::kPropagate:
        mask[id] = n.mask;
        break;
      case MaskUse::kConsume:
        mask[id] = l.passes_mask() ? n.mask : "";
        break;
      case MaskUse::kProduce:
        mask[id] = made_mask;
        break;
    }
  }
  // Outputs named as the output layers: an Identity from each output tensor.
  for (size_t j = 0; j < m.num_outputs(); ++j) {
    const std::string name = m.output_name(j);
    const size_t id = static_cast<size_t>(m.output_node(j));
    const int k = m.output_tensor(j);
    NNFLEET_CHECK(static_cast<size_t>(k) <= extra[id].size());  // exporters name every state
    const std::string& from = k == 0 ? tensor[id] : extra[id][static_cast<size_t>(k - 1)];
    onnx::NodeProto* node = g->add_node();
    node->set_op_type("Identity");
    node->set_name(b.fresh(name + "/output"));
    node->add_input(from);
    node->add_output(b.fresh(name));
    set_type(g->add_output(), node->output(0), m.output_shape(j));
  }
}

}  // namespace

std::string onnx_model_bytes(const Model& m, const float* params) {
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("nnfleet");
  model.set_producer_version(NNFLEET_VERSION_STRING);
  onnx::OperatorSetIdProto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(kOpset);
  build_graph(m, params, model.mutable_graph());
  std::string bytes;
  NNFLEET_CHECK(model.SerializeToString(&bytes));
  return bytes;
}

void check_onnx_export(const Model& m) {
  // Zero weights from calloc: pages the exporters only read stay the kernel's shared zero page.
  const size_t n = std::max<size_t>(1, m.trainable_params() + m.non_trainable_params());
  const std::unique_ptr<float, decltype(&std::free)> zeros(
      static_cast<float*>(std::calloc(n, sizeof(float))), &std::free);
  if (!zeros)
    throw ModelError("failed to check the ONNX export of model '" + m.name() +
                     "': no memory for its " + std::to_string(n) + " weights");
  onnx::GraphProto g;
  build_graph(m, zeros.get(), &g);
}

void save_onnx(const std::string& path, const Model& m, const float* params, Durability d) {
  write_file_atomic(path, onnx_model_bytes(m, params), d);
}

}  // namespace nnfleet
