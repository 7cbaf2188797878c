// String layers: the layers that read a model's string input (TextVectorization, StringLookup,
// Hashing). They form the model's "string front": a string layer turns each sample's strings into
// floats (ids, or multi_hot / count / tf_idf rows) once, when the data is bound to the model
// (fleet/fit/string_front.h: once per training set, once per predict call), outside the hot path.
// In the float graph the layer is then the identity over those floats (output_aliases_input), so
// the network plans no copy and the layers after it see the ids as if they were the input. A string
// layer must read a string model input directly, and a string input is read by exactly one string
// layer (Model checks both and sizes the input from encoded_shape()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace nnfleet {

class StringLayer : public Layer {
 public:
  using Layer::Layer;

  // The float row the layer makes of one sample's strings of shape `strings` ([] or [1]); throws
  // ModelError for a shape it does not take.
  virtual Shape encoded_shape(const Shape& strings) const = 0;
  // Encodes n samples of `per_sample` strings each (C order) into out[n, encoded_shape size].
  // May allocate; never throws for any string (bytes that are not UTF-8 are taken as bytes).
  virtual void encode(const std::string* strings, int64_t n, int64_t per_sample,
                      float* out) const = 0;
  // > 0 when the output is integer ids in [0, id_bound()) (output_mode "int"): an Embedding may
  // then read it, when its input_dim is at least that bound.
  virtual int64_t id_bound() const { return 0; }
  // The whole vocabulary, special tokens first, as Keras saves it in a .keras file's assets
  // (vocabulary.txt); empty for a layer without one (Hashing).
  virtual std::vector<std::string> full_vocabulary() const { return {}; }
  // The config keys Keras's adapt sets from n samples of `per_sample` strings (the training
  // rows) for a layer that has no vocabulary ({"vocabulary": [...]}, with tf_idf also
  // "idf_weights"); null when the layer needs no adapt. The layer made again with these keys
  // in its config is the adapted layer.
  virtual Json adapt(const std::string* /*strings*/, int64_t /*n*/, int64_t /*per_sample*/) const {
    return nullptr;
  }
  // The layer that takes the place of this one when its input holds numbers, not strings
  // (Hashing of integers, hashed by their decimal text); null when it reads only strings.
  virtual std::unique_ptr<Layer> numeric_form() const { return nullptr; }

  // The identity over the encoded floats.
  Shape output_shape(const std::vector<Shape>& in) const override { return in[0]; }
  bool output_aliases_input() const override { return true; }
  void forward(const LayerArgs& a) const override;
  void backward(const LayerArgs& a) const override;
};

// The ASCII text helpers Keras's defaults amount to (tf.strings.lower without an encoding only
// lowers A-Z; DEFAULT_STRIP_REGEX is the 32 characters of Python's string.punctuation).
std::string ascii_lower(std::string s);
std::string strip_ascii_punctuation(const std::string& s);
// Tokens of `s` split on runs of ASCII whitespace (tf.strings.split with no separator).
std::vector<std::string> split_ascii_whitespace(const std::string& s);

}  // namespace nnfleet
