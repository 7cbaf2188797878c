// The string front of a model (layers/string_layer.h): a model input of dtype string is read by
// one string layer, which turns each sample's strings into the float row the network sees. This
// runs once when data is bound to a model (a training set once before the first epoch, the rows
// of a predict or evaluate call once per call), never in the hot path.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/config.h"
#include "data/dataset.h"
#include "fleet/fit/data_view.h"
#include "layers/string_layer.h"
#include "model/model.h"

namespace nnfleet {

// The string layer that reads model input k; null when the input holds floats.
const StringLayer* string_reader(const Model& m, size_t k);
// Model input k's data as the network takes it: `x` itself for a float input (strings refused),
// the float32 rows [rows, input shape] its string layer makes for a string input (numbers
// refused; one string per sample for shapes (None,) and (None, 1) alike). `what` names the data
// in messages ("'x.npy'"). Throws DataError.
Array bind_input(const Model& m, size_t k, const Array& x, const std::string& what);
// True when some input of `m` holds strings.
bool has_string_input(const Model& m);
// Adapted vocabularies by the layer's config (its name left out) and the rows adapted on: a
// plan's models that share a TextVectorization config share one adapt.
struct AdaptedVocabularies {
  std::mutex mu;
  std::map<std::string, Json> by_key;
};
// `m` with every string layer that has no vocabulary (TextVectorization, StringLookup) and
// reads input 0 adapted on `texts`, the training rows of that input (Keras's adapt: most
// frequent first, max_tokens kept), other layers as they are; `m` itself when none needs it.
// With `cache`, what was adapted on the same rows for the same config is reused (adapt reads
// every text: it runs once per run, not once when the plan is validated and again when the job
// runs). Throws ModelError.
std::shared_ptr<const Model> adapt_string_layers(std::shared_ptr<const Model> m, const Array& texts,
                                                 AdaptedVocabularies* cache = nullptr);

}  // namespace nnfleet
