// The string front (string_front.h).
#include "fleet/fit/string_front.h"

#include "core/config.h"
#include "layers/layer_util.h"
#include "layers/registry.h"
#include "layers/string_lookup_util.h"

namespace nnfleet {

const StringLayer* string_reader(const Model& m, size_t k) {
  if (!m.input(k).is_string) return nullptr;
  for (size_t i = 0; i < m.num_layers(); ++i)
    for (int id : m.layer_inputs(i))
      if (id == static_cast<int>(k)) return dynamic_cast<const StringLayer*>(&m.layer(i));
  return nullptr;
}

bool has_string_input(const Model& m) {
  for (size_t k = 0; k < m.num_inputs(); ++k)
    if (m.input(k).is_string) return true;
  return false;
}

Array bind_input(const Model& m, size_t k, const Array& x, const std::string& what) {
  const ModelInput& in = m.input(k);
  if (!in.is_string) {
    if (x.dtype() == DType::kStr)
      throw DataError("failed to read " + what + ": it holds strings, but model input '" + in.name +
                      "' takes numbers; expected a numeric array (a string input " +
                      "is an InputLayer of dtype string read by TextVectorization, " +
                      "StringLookup or Hashing)");
    return x;
  }
  if (x.dtype() != DType::kStr)
    throw DataError("failed to read " + what + ": it holds " + dtype_name(x.dtype()) +
                    " values, but model input '" + in.name +
                    "' takes strings; expected text (a NumPy unicode array, a quoted CSV "
                    "column, or a list of str)");
  const Shape sample = x.sample_shape();
  if (sample.size() != in.string_shape.size())
    throw DataError("failed to read " + what + ": samples of shape " + keras_shape(sample) +
                    "; expected " + std::to_string(in.string_shape.size()) +
                    " string(s) per sample for model input '" + in.name + "' of shape " +
                    keras_shape(in.string_shape));
  const StringLayer* reader = string_reader(m, k);
  Array out = Array::zeros(DType::kF32, in.shape.with_batch(x.rows()));
  if (reader)
    reader->encode(x.strings(), x.rows(), sample.size(), static_cast<float*>(out.mutable_data()));
  return out;
}

std::shared_ptr<AdaptedVocabularies> new_adapted_vocabularies() {
  return std::make_shared<AdaptedVocabularies>();
}

namespace {

// The config keys adapt sets for layer `l` (reading input 0) on `x`, the training rows of that
// input; null when it needs no adapt: a string layer's (StringLayer::adapt), or an
// IntegerLookup's on numbers.
Json adapt_keys(const Layer& l, const Array& x) {
  const int64_t per = x.row_size();
  if (const auto* sl = dynamic_cast<const StringLayer*>(&l))
    return x.dtype() == DType::kStr && sl->full_vocabulary().empty()
               ? sl->adapt(x.strings(), x.rows(), per)
               : Json();
  if (std::string(l.class_name()) != "IntegerLookup" || x.dtype() == DType::kStr) return nullptr;
  std::vector<double> values(static_cast<size_t>(x.rows() * per));
  for (size_t i = 0; i < values.size(); ++i) values[i] = x.at(static_cast<int64_t>(i));
  return integer_lookup_adapt(l, values, per);
}

// adapt_keys from `cache` when it has them.
Json cached_adapt_keys(const Layer& l, const Array& x, AdaptedVocabularies* cache) {
  // Most models adapt nothing: no config is keyed for them.
  if (!dynamic_cast<const StringLayer*>(&l) && std::string(l.class_name()) != "IntegerLookup")
    return nullptr;
  if (!cache) return adapt_keys(l, x);
  Json cfg = l.keras_config();
  cfg.erase("name");
  const std::string key =
      std::string(l.class_name()) + cfg.dump(-1, ' ', false, Json::error_handler_t::replace) + "@" +
      std::to_string(reinterpret_cast<uintptr_t>(x.data())) + "+" + std::to_string(x.rows());
  const std::lock_guard<std::mutex> lock(cache->mu);
  auto it = cache->by_key.find(key);
  if (it == cache->by_key.end()) it = cache->by_key.emplace(key, adapt_keys(l, x)).first;
  return it->second;
}

}  // namespace

std::shared_ptr<const Model> adapt_string_layers(std::shared_ptr<const Model> m, const Array& texts,
                                                 AdaptedVocabularies* cache) {
  // The training rows are those of input 0: only a layer reading it directly adapts.
  std::vector<Json> keys(m->num_layers());
  bool any = false;
  for (size_t i = 0; i < m->num_layers(); ++i)
    if (m->layer_inputs(i) == std::vector<int>{0}) {
      keys[i] = cached_adapt_keys(m->layer(i), texts, cache);
      any = any || !keys[i].empty();
    }
  if (!any) return m;
  std::vector<ModelNode> nodes;
  for (size_t i = 0; i < m->num_layers(); ++i) {
    const Layer& l = m->layer(i);
    Json cfg = l.keras_config();
    for (const auto& [k, v] : keys[i].items()) cfg[k] = v;
    std::vector<int> tensors;
    for (size_t j = 0; j < m->layer_inputs(i).size(); ++j) tensors.push_back(m->input_tensor(i, j));
    nodes.push_back({make_layer(l.class_name(), cfg, ConfigMode::kKeras, l.name()),
                     m->layer_inputs(i), m->training(i), tensors});
  }
  std::vector<ModelInput> inputs;
  for (size_t k = 0; k < m->num_inputs(); ++k) inputs.push_back(m->input(k));
  std::vector<int> outs, out_tensors;
  for (size_t j = 0; j < m->num_outputs(); ++j) {
    outs.push_back(m->output_node(j));
    out_tensors.push_back(m->output_tensor(j));
  }
  return std::make_shared<const Model>(m->name(), std::move(inputs), std::move(nodes), outs,
                                       out_tensors);
}

}  // namespace nnfleet
