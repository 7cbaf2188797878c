// The string front (string_front.h).
#include "io/string_front.h"

#include "core/config.h"
#include "layers/layer_util.h"

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

}  // namespace nnfleet
