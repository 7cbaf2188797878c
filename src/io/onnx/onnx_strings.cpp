// The string layers (layers/string_layer.h) have no ONNX export: their lookups run over strings
// before the float graph (ONNX's StringNormalizer, Tokenizer and LabelEncoder cover parts of
// them, and ONNX Runtime does not ship the contrib Tokenizer in its default build), so each is
// refused by name with what to do instead.
#include "io/onnx/onnx_builder.h"

namespace nnfleet::onnx_export {
namespace {

[[noreturn]] void refuse_strings(const LayerNode& n) {
  refuse(n,
         "it reads strings, which nnfleet's ONNX export does not carry; expected a model "
         "without string layers (export the part after the vectorizer, whose input is the ids "
         "it makes)");
}

}  // namespace

std::string export_text_vectorization(Builder&, const LayerNode& n) { refuse_strings(n); }
std::string export_string_lookup(Builder&, const LayerNode& n) { refuse_strings(n); }
std::string export_hashing(Builder&, const LayerNode& n) {
  refuse(n,
         "FarmHash and SipHash have no ONNX operator; expected a model without Hashing (export "
         "the part after it, whose input is the bins it makes)");
}
std::string export_integer_lookup(Builder&, const LayerNode& n) {
  refuse(n,
         "nnfleet's ONNX export does not write its vocabulary lookup (ONNX's LabelEncoder is in "
         "the ai.onnx.ml domain); expected a model without IntegerLookup (export the part after "
         "it, whose input is the ids it makes)");
}

}  // namespace nnfleet::onnx_export
